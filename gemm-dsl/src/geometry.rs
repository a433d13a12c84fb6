//! Geometry every family shares: operand copies of 16 bytes (or a spec's narrower
//! `vector`) spread over a block's threads, and
//! which rows an XOR swizzle can permute. Each family's own split of the block tile lives with
//! its rules in [`crate::family`].

use crate::spec::{Grid2, Layout, Tile};

/// Bytes of one shared-memory chunk: tile lines are whole chunks, swizzles permute them, and
/// the widest copy (`ld.global.v4` / `cp.async ... 16`) moves one.
pub const COPY_VECTOR_BYTES: u32 = 16;
/// 32-bit registers that hold one copy vector of `copy: sync` between its load and its
/// store (a 2-byte vector takes one, zero-extended).
pub fn staging_words(vector_bytes: u32) -> u32 {
    (vector_bytes / 4).max(1)
}

/// Bytes of one mbarrier (a ring's full and empty barriers).
pub const MBARRIER_BYTES: u32 = 8;
/// A TMA-store epilogue's buffers start after the ring on the period of the widest swizzle.
pub const STAGING_ALIGN_BYTES: u32 = 1024;

/// The most warps a block may have (1024 threads).
pub const MAX_WARPS: u32 = 32;

/// Every warp grid of at most [`MAX_WARPS`] warps that `score` accepts (`Some`), best (lowest
/// score) first, then fewer warps, then fewer rows: the families' legal-grid lists.
pub fn rank_warp_grids(score: impl Fn(Grid2) -> Option<u32>) -> Vec<Grid2> {
    let mut grids: Vec<(u32, Grid2)> = (1..=MAX_WARPS)
        .flat_map(|rows| (1..=MAX_WARPS / rows).map(move |cols| Grid2 { rows, cols }))
        .filter_map(|warps| score(warps).map(|score| (score, warps)))
        .collect();
    grids.sort_by_key(|&(score, warps)| (score, warps.count(), warps.rows));
    grids.into_iter().map(|(_, warps)| warps).collect()
}

/// How one operand tile is spread over the block's threads as copies of `vector_bytes`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CopyGeometry {
    /// Bytes of one copy: 16, or the spec's narrower `vector`.
    pub vector_bytes: u32,
    /// Tile rows and vectors per row (in global and shared memory alike).
    pub rows: u32,
    pub vectors_per_row: u32,
    /// Copies each thread issues per stage.
    pub copies_per_thread: u32,
}

impl CopyGeometry {
    /// `None` when the vectors don't spread evenly: every thread must issue the same copies,
    /// and thread `t`'s `i`-th copy (vector `t + i·threads`) must sit at a fixed row/column
    /// offset from its first, which holds when threads and vectors per row divide one another.
    /// Rows are whole 16-byte chunks whatever the vector (the shared-memory layouts and their
    /// reads work in chunks); a vector is a power of two of at most 16 bytes, so it divides
    /// them.
    pub fn new(rows: u32, row_bytes: u32, threads: u32, vector_bytes: u32) -> Option<CopyGeometry> {
        let vector_fits = vector_bytes.is_power_of_two() && vector_bytes <= COPY_VECTOR_BYTES;
        if !row_bytes.is_multiple_of(COPY_VECTOR_BYTES) || threads == 0 || !vector_fits {
            return None;
        }
        let vectors_per_row = row_bytes / vector_bytes;
        let vectors = rows.checked_mul(vectors_per_row)?;
        let divides =
            threads.is_multiple_of(vectors_per_row) || vectors_per_row.is_multiple_of(threads);
        if vectors == 0 || !vectors.is_multiple_of(threads) || !divides {
            return None;
        }
        Some(CopyGeometry {
            vector_bytes,
            rows,
            vectors_per_row,
            copies_per_thread: vectors / threads,
        })
    }
}

/// An operand tile whose copies the block's threads cannot share out evenly.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CopySpread {
    pub operand: char,
    pub vector_bytes: u32,
    pub vectors: u32,
    pub vectors_per_row: u32,
    pub threads: u32,
}

/// An operand tile as it lies in global memory, and so in the shared memory of the families
/// that copy vectors along its contiguous dimension: `lines` of `line_elements`
/// contiguous elements. A row-major A is `BM` lines of `BK`, a column-major A `BK` lines of
/// `BM`; a row-major B `BK` lines of `BN`, a column-major B `BN` lines of `BK`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StoredTile {
    pub lines: u32,
    pub line_elements: u32,
    /// The lines run along K (one line per k): column-major A, row-major B.
    pub lines_are_k: bool,
}

impl StoredTile {
    /// The stored tiles of A and B under `layout`.
    pub fn of(tile: Tile, layout: Layout) -> (StoredTile, StoredTile) {
        let line = |lines_are_k: bool, mn: u32| StoredTile {
            lines: if lines_are_k { tile.k } else { mn },
            line_elements: if lines_are_k { mn } else { tile.k },
            lines_are_k,
        };
        (
            line(!layout.a_row_major(), tile.m),
            line(layout.b_row_major(), tile.n),
        )
    }
}

/// The copies of A and B, each along its contiguous dimension ([`StoredTile`]), in vectors
/// of `vector_bytes`.
pub(crate) fn operand_copies(
    tile: Tile,
    layout: Layout,
    element: u32,
    threads: u32,
    vector_bytes: u32,
) -> Result<(CopyGeometry, CopyGeometry), CopySpread> {
    let copy = |operand, stored: StoredTile| {
        let row_bytes = stored.line_elements * element;
        CopyGeometry::new(stored.lines, row_bytes, threads, vector_bytes).ok_or(CopySpread {
            operand,
            vector_bytes,
            vectors: stored.lines * (row_bytes / vector_bytes),
            vectors_per_row: row_bytes / vector_bytes,
            threads,
        })
    };
    let (a, b) = StoredTile::of(tile, layout);
    Ok((copy('A', a)?, copy('B', b)?))
}

/// Whether an XOR swizzle (`32B`, `64B`, `128B`) can permute shared-memory rows of this many
/// bytes: rows of 16, 32, 64 or 128 bytes share 128-byte lines evenly, and rows of a multiple
/// of 128 bytes split into whole lines. (The tensor-core family's swizzle XORs the 16-byte
/// chunk index within a 128-byte line with the line's index.)
pub fn xor_swizzle_fits_row(row_bytes: u32) -> bool {
    (row_bytes.is_power_of_two() && (16..=128).contains(&row_bytes))
        || (row_bytes > 0 && row_bytes.is_multiple_of(128))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_spread_when_threads_exceed_a_row() {
        let g = CopyGeometry::new(8, 128 * 4, 256, 16).unwrap();
        assert_eq!(g.vectors_per_row, 32);
        assert_eq!(g.copies_per_thread, 1);
        assert_eq!(CopyGeometry::new(8, 4 * 4, 256, 16), None);
        assert_eq!(CopyGeometry::new(3, 24 * 4, 32, 16), None);
        assert_eq!(CopyGeometry::new(u32::MAX, 32, 32, 16), None);
    }

    #[test]
    fn narrow_vectors_spread_more_copies() {
        // 128 rows of 32 bytes (BK = 8 f32) over 256 threads: 1, 2, 4 copies per thread.
        for (vector, per_row, copies) in [(16, 2, 1), (8, 4, 2), (4, 8, 4)] {
            let g = CopyGeometry::new(128, 32, 256, vector).unwrap();
            assert_eq!((g.vectors_per_row, g.copies_per_thread), (per_row, copies));
        }
        // Rows stay whole 16-byte chunks, and vectors are powers of two up to 16.
        assert_eq!(CopyGeometry::new(128, 24, 256, 4), None);
        assert_eq!(CopyGeometry::new(128, 32, 256, 12), None);
        assert_eq!(CopyGeometry::new(128, 32, 256, 32), None);
    }
}
