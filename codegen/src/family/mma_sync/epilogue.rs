//! The epilogue: accumulators to C, straight from registers or staged through each warp's
//! shared-memory slabs into row-segment stores.

use super::MmaSyncPlan;
use crate::plan::edges::{c_global_store, c_store_bytes, StagingWord};
use crate::plan::epilogue::AccElement;
use crate::plan::store::{
    pair_elements, rows_with_steps, slab_stores, EpilogueBand, EpilogueRow, PairStore, SlabRead,
    StagedEpilogue, StorePath,
};
use crate::plan::{CpAsyncGroups, Ring};
use gemm_dsl::family::mma_sync::{EpilogueSlab, MmaSyncGeometry, EPILOGUE_BAND_ROWS};
use gemm_dsl::geometry::COPY_VECTOR_BYTES;
use gemm_dsl::{GemmSpec, Schedule};
use serde::Serialize;

/// Accumulators to global memory. Staged through shared memory where the warp tile allows
/// (see [`EpilogueSlab`]); otherwise straight from the registers: one row pointer per 8-row
/// group, one store per n8 tile.
#[derive(Clone, Debug, Serialize)]
pub struct MmaEpilogue {
    /// Rows from one group to the next: 8 (then 16 per mma tile).
    pub row_step: u32,
    /// A copy vector narrower than an accumulator pair: each pair is stored as its two
    /// elements (`lo` at `offset`, `hi` at `offset_hi`).
    pub split_pairs: bool,
    /// Lane (g, t)'s accumulators: rows g and g + 8 of each m16 tile, a pair per n8 tile.
    pub rows: Vec<EpilogueRow<PairStore>>,
    /// Direct, or staged through the warps' slabs.
    #[serde(flatten)]
    pub path: StorePath,
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
                    let base = slab_offset + h * 8 * slab.pitch;
                    PairStore::at(acc, ni * g.shape.n, out_bytes, base)
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
        global_store: c_global_store(store_bytes, StagingWord::B32),
        bands,
    }
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
            if s.lo == acc {
                Some((row.row + g, s.col + 2 * t))
            } else if s.hi == acc {
                Some((row.row + g, s.col_hi + 2 * t))
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
    pub fn fused_segments(&self) -> Vec<Vec<AccElement>> {
        match self.path {
            // Band b holds rows 16b and 16b + 8.
            StorePath::Staged(_) => self.rows.chunks(2).map(pair_elements).collect(),
            StorePath::Direct {} | StorePath::Tma(_) => self
                .rows
                .iter()
                .map(|row| pair_elements(std::slice::from_ref(row)))
                .collect(),
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
        // C's stores are no wider than the copy vector or `c_store` (nor narrower than one
        // element).
        let c_store_bytes = c_store_bytes(copy_vector_bytes, spec.c_store, out_bytes);
        let epilogue = MmaEpilogue {
            row_step: 8,
            split_pairs: c_store_bytes < 2 * out_bytes,
            rows: rows_with_steps(
                (0..mi_count)
                    .flat_map(|mi| (0..2).map(move |h| (mi, h)))
                    .map(|(mi, h)| {
                        let stores = (0..ni_count)
                            .map(|ni| {
                                let acc = (mi * ni_count + ni) * 4 + 2 * h;
                                PairStore::at(acc, ni * g.shape.n, out_bytes, 0)
                            })
                            .collect();
                        (mi * 16 + h * 8, stores)
                    }),
                out_bytes,
            ),
            path: match g.epilogue_slab(spec.out) {
                Some(slab) => {
                    let smem_offset = match spec.schedule {
                        Schedule::Tile => 0,
                        Schedule::Persistent { .. } => smem.ring_bytes,
                    };
                    StorePath::Staged(staged_epilogue(
                        g,
                        &slab,
                        out_bytes,
                        c_store_bytes,
                        smem_offset,
                    ))
                }
                None => StorePath::Direct {},
            },
        };
        // 16-byte row segments from the slabs, or accumulator pairs (8 bytes of f32, 4 of a
        // packed 16-bit pair) from the registers; either no wider than the copy vector.
        let c_store_bytes = if epilogue.path.staged().is_some() {
            c_store_bytes
        } else {
            c_store_bytes.min(2 * out_bytes)
        };
        (epilogue, c_store_bytes)
    }
}
