//! The epilogue: accumulators to C, straight from registers or staged through each warp's
//! shared-memory slabs into row-segment stores.

use super::MmaSyncPlan;
use crate::plan::edges::c_store_bytes;
use crate::plan::edges::{c_global_store, last_byte};
use crate::plan::epilogue::AccElement;
use crate::plan::{CpAsyncGroups, Ring};
use gemm_dsl::family::mma_sync::{EpilogueSlab, MmaSyncGeometry, EPILOGUE_BAND_ROWS};
use gemm_dsl::geometry::COPY_VECTOR_BYTES;
use gemm_dsl::{GemmSpec, Schedule};
use serde::Serialize;

/// Accumulators to global memory. Staged through shared memory where the warp tile allows
/// (see [`EpilogueSlab`]); otherwise straight from the registers: one row pointer per 8-row
/// group, one store per n8 tile.
#[derive(Clone, Debug, Default, Serialize)]
pub struct MmaEpilogue {
    /// Rows from one group to the next: 8 (then 16 per mma tile).
    pub row_step: u32,
    /// A copy vector narrower than an accumulator pair: each pair is stored as its two
    /// elements (`lo` at `offset`, `hi` at `hi_offset`).
    pub split_pairs: bool,
    pub rows: Vec<EpilogueRow>,
    pub staged: Option<StagedEpilogue>,
}

/// The epilogue through each warp's two shared-memory slabs, one 16-row band of accumulators
/// at a time. Lane `(g, t)` writes rows `g`, `g + 8`, columns `2t, 2t + 1` of each n8 tile
/// (from its write base `g·pitch + t·2·out_bytes`); lane `l` then reads 16-byte vector `l`
/// (and `l + 32`, ...) of the band, row `l / vectors_per_row`, chunk `l % vectors_per_row`,
/// and stores it to the same place in C: as one 16-byte store, or as several no wider than
/// a narrower copy vector.
#[derive(Clone, Debug, Serialize)]
pub struct StagedEpilogue {
    /// Where the slabs start in shared memory: 0 (over the drained ring) or, for a persistent
    /// schedule, after the ring, which then already holds the next tile's first copies.
    pub smem_offset: u32,
    pub pitch: u32,
    pub vectors_per_row: u32,
    pub bytes_per_warp: u32,
    /// Bytes of C from one warp column to the next (the warp tile's row).
    pub warp_col_bytes: u32,
    /// `st.shared.b32` of a packed pair, or `st.shared.v2.f32`.
    pub pair_bytes: u32,
    /// The `st.global` of one piece of a read vector, e.g. `st.global.v4.b32`.
    pub global_store: String,
    pub bands: Vec<EpilogueBand>,
}

impl StagedEpilogue {
    /// The slabs lie over the ring, so every read of the ring must be retired first.
    pub fn over_ring(&self) -> bool {
        self.smem_offset == 0
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct EpilogueBand {
    /// Pairs into the slab, `offset` bytes from the lane's write base.
    pub writes: Vec<PairStore>,
    pub reads: Vec<SlabRead>,
}

/// One 16-byte vector from the slab to C, in `stores`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SlabRead {
    /// Bytes from the lane's read base.
    pub smem_offset: u32,
    /// Rows of C below the previous read's (the first read of the epilogue: below the lane's
    /// first row).
    pub global_row_delta: u32,
    /// Bytes right of the lane's first column.
    pub global_col_bytes: u32,
    /// Rows below the lane's first: an edge block skips the vector when it lies past M.
    pub row: u32,
    pub stores: Vec<SlabStore>,
}

/// One global store of (part of) a vector read from the slab: an edge block stores it whole
/// when its row is in M and its `last_byte` in N, else word by word (`words`, empty for a
/// one-element store).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SlabStore {
    /// Bytes right of the lane's first column.
    pub offset: u32,
    pub last_byte: u32,
    /// `{ %ep0, %ep1, %ep2, %ep3 }`, `{ %ep0, %ep1 }`, `%ep0`, or a 16-bit half `%h0`.
    pub operand: String,
    /// For 2-byte stores: the word to split into `%h0`, `%h1` before its first half's store.
    pub unpack: Option<String>,
    pub words: Vec<StoreWord>,
}

/// One 32-bit word of a vector an edge block stores on its own: whole (f32), or as its low
/// and high 16-bit halves, each when the row's bytes left exceed its offset.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct StoreWord {
    pub register: String,
    pub offset: u32,
    /// The high half's offset, for 16-bit elements.
    pub high_half: Option<u32>,
}

#[derive(Clone, Debug, Serialize)]
pub struct EpilogueRow {
    /// Rows below the thread's first accumulator row.
    pub row: u32,
    pub stores: Vec<PairStore>,
}

/// Accumulators `lo` (column `2t`) and `hi` (column `2t + 1`) stored `offset` bytes right of
/// the thread's first column; an edge block stores `lo` alone where `last_byte` lies past N.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct PairStore {
    pub lo: u32,
    pub hi: u32,
    pub offset: u32,
    /// Where `hi` goes when the pair is stored as two elements.
    pub hi_offset: u32,
    pub last_byte: u32,
}

pub(super) fn staged_epilogue(
    g: &MmaSyncGeometry,
    slab: &EpilogueSlab,
    out_bytes: u32,
    store_bytes: u32,
    smem_offset: u32,
) -> StagedEpilogue {
    let vpr = slab.vectors_per_row;
    let slab_bytes = EPILOGUE_BAND_ROWS * slab.pitch;
    let vector_position = |v: u32| (v / vpr, v % vpr);
    let lane_read_base = |lane: u32| {
        let (row, chunk) = vector_position(lane);
        row * slab.pitch + chunk * COPY_VECTOR_BYTES
    };
    let reads_per_band = EPILOGUE_BAND_ROWS * vpr / 32;
    let mut previous_row = 0;
    let bands = (0..g.m_frags)
        .map(|band| {
            let slab_offset = (band % 2) * slab_bytes;
            let writes = (0..2)
                .flat_map(|h| (0..g.n_frags).map(move |ni| (h, ni)))
                .map(|(h, ni)| {
                    let acc = (band * g.n_frags + ni) * 4 + 2 * h;
                    let offset = slab_offset + h * 8 * slab.pitch + ni * g.shape.n * out_bytes;
                    PairStore {
                        lo: acc,
                        hi: acc + 1,
                        offset,
                        hi_offset: offset + out_bytes,
                        last_byte: last_byte(offset, 2 * out_bytes),
                    }
                })
                .collect();
            let reads = (0..reads_per_band)
                .map(|j| {
                    // Lane l's j-th vector sits a lane-independent distance from its first,
                    // because 32 and the vectors per row divide one another.
                    let (rows, chunks) = vector_position(32 * j);
                    let row = band * EPILOGUE_BAND_ROWS + rows;
                    let col = chunks * COPY_VECTOR_BYTES;
                    let read = SlabRead {
                        smem_offset: slab_offset + lane_read_base(32 * j),
                        global_row_delta: row - previous_row,
                        global_col_bytes: col,
                        row,
                        stores: slab_stores(col, out_bytes, store_bytes),
                    };
                    previous_row = row;
                    read
                })
                .collect();
            EpilogueBand { writes, reads }
        })
        .collect();
    StagedEpilogue {
        smem_offset,
        pitch: slab.pitch,
        vectors_per_row: vpr,
        bytes_per_warp: slab.bytes_per_warp,
        warp_col_bytes: slab.row_bytes,
        pair_bytes: 2 * out_bytes,
        global_store: c_global_store(store_bytes, "b32"),
        bands,
    }
}

/// The stores of the 16-byte vector read for C's bytes `col..col + 16`: one, or
/// `16 / store_bytes` narrower ones. Each store of several elements carries its 32-bit
/// words (16-bit halves for 16-bit elements) for an edge block's element-by-element path.
pub(super) fn slab_stores(col: u32, out_bytes: u32, store_bytes: u32) -> Vec<SlabStore> {
    const WORD: u32 = 4;
    (0..COPY_VECTOR_BYTES / store_bytes)
        .map(|i| {
            let offset = col + i * store_bytes;
            let first_word = i * store_bytes / WORD;
            let (operand, unpack) = match store_bytes {
                // A 16-bit half of word `first_word`: the even half splits the word first.
                2 => (
                    format!("%h{}", i % 2),
                    (i % 2 == 0).then(|| format!("%ep{first_word}")),
                ),
                4 => (format!("%ep{first_word}"), None),
                _ => (
                    format!(
                        "{{ {} }}",
                        (first_word..first_word + store_bytes / WORD)
                            .map(|w| format!("%ep{w}"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                    None,
                ),
            };
            let words = if store_bytes > out_bytes {
                (first_word..first_word + store_bytes / WORD)
                    .map(|w| StoreWord {
                        register: format!("%ep{w}"),
                        offset: col + WORD * w,
                        high_half: (out_bytes == 2).then_some(col + WORD * w + 2),
                    })
                    .collect()
            } else {
                Vec::new()
            };
            SlabStore {
                offset,
                last_byte: last_byte(offset, store_bytes),
                operand,
                unpack,
                words,
            }
        })
        .collect()
}

/// Slab-relative lane addresses of every staged-epilogue write and read instruction of a warp.
pub(super) fn staged_epilogue_addresses(e: &StagedEpilogue) -> (Vec<Vec<u32>>, Vec<Vec<u32>>) {
    let write_base = |lane: u32| (lane / 4) * e.pitch + (lane % 4) * e.pair_bytes;
    let read_base = |lane: u32| {
        (lane / e.vectors_per_row) * e.pitch + (lane % e.vectors_per_row) * COPY_VECTOR_BYTES
    };
    let bands = || e.bands.iter();
    let writes = bands()
        .flat_map(|band| &band.writes)
        .map(|w| (0..32).map(|lane| write_base(lane) + w.offset).collect())
        .collect();
    let reads = bands()
        .flat_map(|band| &band.reads)
        .map(|r| {
            (0..32)
                .map(|lane| read_base(lane) + r.smem_offset)
                .collect()
        })
        .collect();
    (writes, reads)
}

/// The warp-relative (row, column) of accumulator `acc` of lane `lane`, read back from the
/// epilogue plan: the lane's first element is row `lane / 4`, column `2·(lane % 4)` (the mma
/// C fragment), and the plan's row and byte offsets place the rest.
pub fn accumulator_position(p: &MmaSyncPlan, lane: u32, acc: u32) -> Option<(u32, u32)> {
    let (g, t) = (lane / 4, lane % 4);
    p.epilogue.rows.iter().find_map(|row| {
        row.stores.iter().find_map(|s| {
            let col = s.offset / p.out_bytes + 2 * t;
            if s.lo == acc {
                Some((row.row + g, col))
            } else if s.hi == acc {
                Some((row.row + g, col + 1))
            } else {
                None
            }
        })
    })
}

impl MmaEpilogue {
    /// Where the lane's accumulators lie from its first row and column, grouped as they are
    /// stored: per row for direct stores, per 16-row band for staged ones. The fused epilogue
    /// transforms each group just before its store.
    pub fn fused_segments(&self, out: gemm_dsl::DType) -> Vec<Vec<AccElement>> {
        let out_bytes = out.size_bytes();
        let elements = |row: &EpilogueRow| {
            row.stores
                .iter()
                .flat_map(|s| {
                    let col = s.offset / out_bytes;
                    [(s.lo, col), (s.hi, col + 1)].map(|(acc, col)| AccElement {
                        acc,
                        row: row.row,
                        col,
                    })
                })
                .collect::<Vec<_>>()
        };
        match &self.staged {
            // Band b holds rows 16b and 16b + 8.
            Some(_) => self
                .rows
                .chunks(2)
                .map(|band| band.iter().flat_map(elements).collect())
                .collect(),
            None => self.rows.iter().map(elements).collect(),
        }
    }

    /// The epilogue of a kernel whose copies are `copy_vector_bytes` wide, and the width of
    /// its stores of C.
    pub(super) fn new(
        spec: &GemmSpec,
        g: &MmaSyncGeometry,
        copy_vector_bytes: u32,
        smem: &Ring<CpAsyncGroups>,
    ) -> (MmaEpilogue, u32) {
        let (mi_count, ni_count) = (g.m_frags, g.n_frags);
        let out_bytes = spec.out.size_bytes();
        // C's stores are no wider than the copy vector (nor narrower than one element).
        let c_store_bytes = c_store_bytes(copy_vector_bytes, out_bytes);
        let epilogue = MmaEpilogue {
            row_step: 8,
            split_pairs: c_store_bytes < 2 * out_bytes,
            rows: (0..mi_count)
                .flat_map(|mi| (0..2).map(move |h| (mi, h)))
                .map(|(mi, h)| EpilogueRow {
                    row: mi * 16 + h * 8,
                    stores: (0..ni_count)
                        .map(|ni| {
                            let acc = (mi * ni_count + ni) * 4 + 2 * h;
                            let offset = ni * g.shape.n * out_bytes;
                            PairStore {
                                lo: acc,
                                hi: acc + 1,
                                offset,
                                hi_offset: offset + out_bytes,
                                last_byte: last_byte(offset, 2 * out_bytes),
                            }
                        })
                        .collect(),
                })
                .collect(),
            staged: g.epilogue_slab(spec.out).map(|slab| {
                let smem_offset = match spec.schedule {
                    Schedule::Tile => 0,
                    Schedule::Persistent { .. } => smem.ring_bytes,
                };
                staged_epilogue(g, &slab, out_bytes, c_store_bytes, smem_offset)
            }),
        };
        // 16-byte row segments from the slabs, or accumulator pairs (8 bytes of f32, 4 of a
        // packed 16-bit pair) from the registers; either no wider than the copy vector.
        let c_store_bytes = if epilogue.staged.is_some() {
            c_store_bytes
        } else {
            c_store_bytes.min(2 * out_bytes)
        };
        (epilogue, c_store_bytes)
    }
}
