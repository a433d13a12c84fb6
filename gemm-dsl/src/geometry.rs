//! Thread geometry the spec implies, per kernel family: how a block tile splits into warp
//! tiles and per-thread tiles, and how many vector copies each thread issues per stage.
//! Validation checks these numbers; the code generator's plan builds on them.

use crate::spec::{DType, Grid2, Tile};

/// Bytes one copy instruction moves (`ld.global.v4` / `cp.async ... 16`).
pub const COPY_VECTOR_BYTES: u32 = 16;

/// SIMT family: lanes of a warp form a 4 x 8 grid. A quarter-warp (8 lanes, one phase of a
/// 128-bit shared load) then shares one lane row, so A reads broadcast and B reads cover 8
/// consecutive 16-byte chunks: no bank conflicts without padding.
pub const SIMT_LANE_ROWS: u32 = 4;
pub const SIMT_LANE_COLS: u32 = 8;
/// Each thread reads B and writes C in groups of 4 consecutive columns (one 16-byte vector).
pub const SIMT_COLUMN_GROUP: u32 = 4;
/// The most warps a block may have (1024 threads).
pub const MAX_WARPS: u32 = 32;

/// How one operand tile is spread over the block's threads as 16-byte copies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CopyGeometry {
    /// Tile rows and 16-byte vectors per row (in global and shared memory alike).
    pub rows: u32,
    pub vectors_per_row: u32,
    /// Copies each thread issues per stage.
    pub copies_per_thread: u32,
}

impl CopyGeometry {
    /// `None` when the vectors don't spread evenly: every thread must issue the same copies,
    /// and thread `t`'s `i`-th copy (vector `t + i·threads`) must sit at a fixed row/column
    /// offset from its first, which holds when threads and vectors per row divide one another.
    pub fn new(rows: u32, row_bytes: u32, threads: u32) -> Option<CopyGeometry> {
        if !row_bytes.is_multiple_of(COPY_VECTOR_BYTES) || threads == 0 {
            return None;
        }
        let vectors_per_row = row_bytes / COPY_VECTOR_BYTES;
        let vectors = rows.checked_mul(vectors_per_row)?;
        let divides =
            threads.is_multiple_of(vectors_per_row) || vectors_per_row.is_multiple_of(threads);
        if vectors == 0 || !vectors.is_multiple_of(threads) || !divides {
            return None;
        }
        Some(CopyGeometry {
            rows,
            vectors_per_row,
            copies_per_thread: vectors / threads,
        })
    }
}

/// An operand tile whose 16-byte copies the block's threads cannot share out evenly.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CopySpread {
    pub operand: char,
    pub vectors: u32,
    pub vectors_per_row: u32,
    pub threads: u32,
}

/// The copies of A (`BM x BK`, K contiguous) and B (`BK x BN`, N contiguous), stored as in
/// global memory by both families.
fn operand_copies(
    tile: Tile,
    element: u32,
    threads: u32,
) -> Result<(CopyGeometry, CopyGeometry), CopySpread> {
    let copy = |operand, rows: u32, row_bytes: u32| {
        CopyGeometry::new(rows, row_bytes, threads).ok_or(CopySpread {
            operand,
            vectors: rows * row_bytes / COPY_VECTOR_BYTES,
            vectors_per_row: row_bytes / COPY_VECTOR_BYTES,
            threads,
        })
    };
    Ok((
        copy('A', tile.m, tile.k * element)?,
        copy('B', tile.k, tile.n * element)?,
    ))
}

/// The SIMT (`mma: fma`) family's split of the block tile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SimtGeometry {
    pub tile: Tile,
    pub warps: Grid2,
    pub threads: u32,
    pub warp_tile_m: u32,
    pub warp_tile_n: u32,
    /// Accumulator rows and columns per thread.
    pub thread_tile_m: u32,
    pub thread_tile_n: u32,
    /// A is stored `BM x BK` (K contiguous), B `BK x BN`, both as in global memory.
    pub a_copy: CopyGeometry,
    pub b_copy: CopyGeometry,
}

/// Why a tile/warp combination has no SIMT geometry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SimtGeometryError {
    WarpCount,
    WarpGridDoesNotDivide,
    WarpTile { warp_tile_m: u32, warp_tile_n: u32 },
    CopyWidth,
    CopySpread(CopySpread),
}

impl SimtGeometry {
    pub fn new(tile: Tile, warps: Grid2, dtype: DType) -> Result<SimtGeometry, SimtGeometryError> {
        if warps.count() == 0 || warps.count() > MAX_WARPS {
            return Err(SimtGeometryError::WarpCount);
        }
        if !tile.m.is_multiple_of(warps.rows) || !tile.n.is_multiple_of(warps.cols) {
            return Err(SimtGeometryError::WarpGridDoesNotDivide);
        }
        let warp_tile_m = tile.m / warps.rows;
        let warp_tile_n = tile.n / warps.cols;
        if !warp_tile_m.is_multiple_of(SIMT_LANE_ROWS)
            || !warp_tile_n.is_multiple_of(SIMT_LANE_COLS * SIMT_COLUMN_GROUP)
        {
            return Err(SimtGeometryError::WarpTile {
                warp_tile_m,
                warp_tile_n,
            });
        }
        let element = dtype.size_bytes();
        if !(tile.k * element).is_multiple_of(COPY_VECTOR_BYTES) {
            return Err(SimtGeometryError::CopyWidth);
        }
        let threads = warps.count() * 32;
        let (a_copy, b_copy) =
            operand_copies(tile, element, threads).map_err(SimtGeometryError::CopySpread)?;
        Ok(SimtGeometry {
            tile,
            warps,
            threads,
            warp_tile_m,
            warp_tile_n,
            thread_tile_m: warp_tile_m / SIMT_LANE_ROWS,
            thread_tile_n: warp_tile_n / SIMT_LANE_COLS,
            a_copy,
            b_copy,
        })
    }

    /// Legal warp grids for a tile, best first: closest to an 8x8 thread tile, then fewer warps.
    pub fn legal_warp_grids(tile: Tile, dtype: DType) -> Vec<Grid2> {
        let mut grids: Vec<(u32, Grid2)> = Vec::new();
        for rows in 1..=MAX_WARPS {
            for cols in 1..=MAX_WARPS / rows {
                let warps = Grid2 { rows, cols };
                if let Ok(g) = SimtGeometry::new(tile, warps, dtype) {
                    let per_thread = g.thread_tile_m * g.thread_tile_n;
                    let score = per_thread.abs_diff(64) * 64 + g.thread_tile_m.abs_diff(8);
                    grids.push((score, warps));
                }
            }
        }
        grids.sort_by_key(|&(score, warps)| (score, warps.count(), warps.rows));
        grids.into_iter().map(|(_, warps)| warps).collect()
    }
}

/// Whether an XOR swizzle (`32B`, `64B`, `128B`) can permute shared-memory rows of this many
/// bytes: rows of 16, 32, 64 or 128 bytes share 128-byte lines evenly, and rows of a multiple
/// of 128 bytes split into whole lines. (The tensor-core family's swizzle XORs the 16-byte
/// chunk index within a 128-byte line with the line's index.)
pub fn xor_swizzle_fits_row(row_bytes: u32) -> bool {
    (row_bytes.is_power_of_two() && (16..=128).contains(&row_bytes))
        || (row_bytes > 0 && row_bytes.is_multiple_of(128))
}

/// One `mma.sync` instruction's `m x n x k`: `m16n8k16` for f16/bf16, `m16n8k8` for tf32.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MmaShape {
    pub m: u32,
    pub n: u32,
    pub k: u32,
}

impl MmaShape {
    /// The shape of the tensor-core instruction for an input type; `None` for f32, which the
    /// tensor cores do not multiply.
    pub fn for_dtype(dtype: DType) -> Option<MmaShape> {
        match dtype {
            DType::F16 | DType::Bf16 => Some(MmaShape { m: 16, n: 8, k: 16 }),
            DType::Tf32 => Some(MmaShape { m: 16, n: 8, k: 8 }),
            DType::F32 => None,
        }
    }

    /// Columns of B one warp-wide load covers: `ldmatrix.x4.trans` gives the fragments of two
    /// n8 tiles for 16-bit types; tf32 B is read per n8 fragment with 32-bit shared loads.
    pub fn b_load_cols(self, dtype: DType) -> u32 {
        match dtype {
            DType::F16 | DType::Bf16 => 2 * self.n,
            DType::Tf32 | DType::F32 => self.n,
        }
    }
}

/// The Ampere tensor-core (`mma: mma_sync`) family's split of the block tile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MmaSyncGeometry {
    pub tile: Tile,
    pub warps: Grid2,
    pub threads: u32,
    pub warp_tile_m: u32,
    pub warp_tile_n: u32,
    pub shape: MmaShape,
    /// mma tiles per warp: `warp_tile_m / 16` rows of `warp_tile_n / 8` columns.
    pub m_frags: u32,
    pub n_frags: u32,
    /// mma k steps per block tile (`BK / shape.k`).
    pub k_steps: u32,
    /// A is stored `BM x BK` (K contiguous), B `BK x BN` (N contiguous), as in global memory.
    pub a_copy: CopyGeometry,
    pub b_copy: CopyGeometry,
}

/// Accumulator rows one epilogue band holds: one row of m16 mma tiles.
pub const EPILOGUE_BAND_ROWS: u32 = 16;

/// Shared memory of the staged epilogue: each warp converts one band of accumulator rows at
/// a time into output elements in a slab of its own, then reads the band back as 16-byte
/// vectors covering whole row segments, so global stores are full vectors on consecutive
/// addresses. Two slabs per warp alternate, so one warp barrier per band separates a band's
/// writes from its reads and from the reads of the band before.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EpilogueSlab {
    /// One warp-tile row in the output type.
    pub row_bytes: u32,
    /// Row to row: the row plus 8 elements, which spreads the mma fragment's writes (8 rows
    /// by 4 lanes) over all 32 banks.
    pub pitch: u32,
    pub vectors_per_row: u32,
    pub bytes_per_warp: u32,
    /// Every warp's slabs.
    pub bytes: u32,
}

/// Why a tile/warp combination has no mma.sync geometry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MmaSyncGeometryError {
    /// The input type has no tensor-core shape (f32).
    Dtype,
    WarpCount,
    WarpGridDoesNotDivide,
    WarpTile {
        warp_tile_m: u32,
        warp_tile_n: u32,
        /// Required multiples of the warp tile's rows and columns.
        m_step: u32,
        n_step: u32,
    },
    TileK {
        k_step: u32,
    },
    CopySpread(CopySpread),
}

impl MmaSyncGeometry {
    pub fn new(
        tile: Tile,
        warps: Grid2,
        dtype: DType,
    ) -> Result<MmaSyncGeometry, MmaSyncGeometryError> {
        let shape = MmaShape::for_dtype(dtype).ok_or(MmaSyncGeometryError::Dtype)?;
        if warps.count() == 0 || warps.count() > MAX_WARPS {
            return Err(MmaSyncGeometryError::WarpCount);
        }
        if !tile.m.is_multiple_of(warps.rows) || !tile.n.is_multiple_of(warps.cols) {
            return Err(MmaSyncGeometryError::WarpGridDoesNotDivide);
        }
        let warp_tile_m = tile.m / warps.rows;
        let warp_tile_n = tile.n / warps.cols;
        let n_step = shape.b_load_cols(dtype);
        if warp_tile_m == 0
            || warp_tile_n == 0
            || !warp_tile_m.is_multiple_of(shape.m)
            || !warp_tile_n.is_multiple_of(n_step)
        {
            return Err(MmaSyncGeometryError::WarpTile {
                warp_tile_m,
                warp_tile_n,
                m_step: shape.m,
                n_step,
            });
        }
        if !tile.k.is_multiple_of(shape.k) {
            return Err(MmaSyncGeometryError::TileK { k_step: shape.k });
        }
        let element = dtype.size_bytes();
        let threads = warps.count() * 32;
        let (a_copy, b_copy) =
            operand_copies(tile, element, threads).map_err(MmaSyncGeometryError::CopySpread)?;
        Ok(MmaSyncGeometry {
            tile,
            warps,
            threads,
            warp_tile_m,
            warp_tile_n,
            shape,
            m_frags: warp_tile_m / shape.m,
            n_frags: warp_tile_n / shape.n,
            k_steps: tile.k / shape.k,
            a_copy,
            b_copy,
        })
    }

    /// f32 accumulator registers per thread: four per m16n8 tile.
    pub fn accumulators(&self) -> u32 {
        self.m_frags * self.n_frags * 4
    }

    /// The shared-memory slabs of the staged epilogue, or `None` when a warp tile row is not
    /// a whole number of 16-byte vectors that the 32 lanes share out evenly (the kernel then
    /// stores straight from the accumulator registers).
    pub fn epilogue_slab(&self, out: DType) -> Option<EpilogueSlab> {
        let element = out.size_bytes();
        let row_bytes = self.warp_tile_n * element;
        if !row_bytes.is_multiple_of(COPY_VECTOR_BYTES) {
            return None;
        }
        let vectors_per_row = row_bytes / COPY_VECTOR_BYTES;
        let lanes_share_rows = 32 % vectors_per_row == 0 || vectors_per_row.is_multiple_of(32);
        if !(EPILOGUE_BAND_ROWS * vectors_per_row).is_multiple_of(32) || !lanes_share_rows {
            return None;
        }
        let pitch = row_bytes + 8 * element;
        let bytes_per_warp = 2 * EPILOGUE_BAND_ROWS * pitch;
        Some(EpilogueSlab {
            row_bytes,
            pitch,
            vectors_per_row,
            bytes_per_warp,
            bytes: bytes_per_warp * self.warps.count(),
        })
    }

    /// Legal warp grids for a tile, best first: warp tiles closest to 64x64 (128 accumulators
    /// per thread), then square ones, then fewer warps.
    pub fn legal_warp_grids(tile: Tile, dtype: DType) -> Vec<Grid2> {
        let mut grids: Vec<(u32, Grid2)> = Vec::new();
        for rows in 1..=MAX_WARPS {
            for cols in 1..=MAX_WARPS / rows {
                let warps = Grid2 { rows, cols };
                if let Ok(g) = MmaSyncGeometry::new(tile, warps, dtype) {
                    let area = g.warp_tile_m * g.warp_tile_n;
                    let score = area.abs_diff(64 * 64) + g.warp_tile_m.abs_diff(g.warp_tile_n);
                    grids.push((score, warps));
                }
            }
        }
        grids.sort_by_key(|&(score, warps)| (score, warps.count(), warps.rows));
        grids.into_iter().map(|(_, warps)| warps).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const F32: DType = DType::F32;

    #[test]
    fn mma_sync_geometry_of_the_default_tile() {
        let tile = Tile {
            m: 128,
            n: 128,
            k: 32,
        };
        let g = MmaSyncGeometry::new(tile, Grid2 { rows: 2, cols: 2 }, DType::Bf16).unwrap();
        assert_eq!((g.warp_tile_m, g.warp_tile_n), (64, 64));
        assert_eq!((g.m_frags, g.n_frags, g.k_steps), (4, 8, 2));
        assert_eq!(g.accumulators(), 128);
        // A: 128 rows x 4 vectors = 512 copies over 128 threads.
        assert_eq!(g.a_copy.copies_per_thread, 4);
        assert_eq!(g.b_copy.copies_per_thread, 4);
        let tf32 = MmaSyncGeometry::new(tile, Grid2 { rows: 2, cols: 2 }, DType::Tf32).unwrap();
        assert_eq!(tf32.k_steps, 4);
        assert_eq!(tf32.a_copy.copies_per_thread, 8);
        assert_eq!(
            MmaSyncGeometry::new(tile, Grid2 { rows: 2, cols: 2 }, F32),
            Err(MmaSyncGeometryError::Dtype)
        );
        // 16-bit B is loaded 16 columns at a time, tf32 B 8 at a time.
        let narrow = Grid2 { rows: 1, cols: 16 };
        assert!(matches!(
            MmaSyncGeometry::new(tile, narrow, DType::Bf16),
            Err(MmaSyncGeometryError::WarpTile { n_step: 16, .. })
        ));
        assert!(MmaSyncGeometry::new(tile, narrow, DType::Tf32).is_ok());
        assert_eq!(
            MmaSyncGeometry::legal_warp_grids(tile, DType::Bf16)[0],
            Grid2 { rows: 2, cols: 2 }
        );
    }

    #[test]
    fn default_tile_gives_8x8_per_thread() {
        let g = SimtGeometry::new(
            Tile {
                m: 128,
                n: 128,
                k: 8,
            },
            Grid2 { rows: 4, cols: 2 },
            F32,
        )
        .unwrap();
        assert_eq!((g.thread_tile_m, g.thread_tile_n), (8, 8));
        assert_eq!(g.threads, 256);
        assert_eq!(g.a_copy.copies_per_thread, 1);
        assert_eq!(g.b_copy.copies_per_thread, 1);
    }

    #[test]
    fn copies_spread_when_threads_exceed_a_row() {
        let g = CopyGeometry::new(8, 128 * 4, 256).unwrap();
        assert_eq!(g.vectors_per_row, 32);
        assert_eq!(g.copies_per_thread, 1);
        assert_eq!(CopyGeometry::new(8, 4 * 4, 256), None);
        assert_eq!(CopyGeometry::new(3, 24 * 4, 32), None);
        assert_eq!(CopyGeometry::new(u32::MAX, 32, 32), None);
    }

    #[test]
    fn legal_warp_grids_prefer_8x8() {
        let tile = Tile {
            m: 128,
            n: 128,
            k: 8,
        };
        assert_eq!(
            SimtGeometry::legal_warp_grids(tile, F32)[0],
            Grid2 { rows: 4, cols: 2 }
        );
    }
}
