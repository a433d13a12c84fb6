//! How the accumulators reach C. A consumer warpgroup's m64nN accumulator fragment gives
//! thread `(warp, lane)` rows `16·warp + lane/4` and `+8` of each wgmma row of 64, and
//! columns `8j + 2·(lane%4)`, `+1` for `j < N/8`: registers `4j`, `4j+1` (first row) and
//! `4j+2`, `4j+3` (second).
//!
//! - **direct**: each pair is one packed word (or two f32) stored to global memory; tiles at
//!   the matrix edge store element by element, each under its own bounds check.
//! - **tma**: the warpgroup writes its rows one box (64 rows by one swizzle span of C) at a
//!   time into a shared-memory buffer with `stmatrix` (each 8x8 matrix of a warp's 16x16
//!   piece is exactly such a fragment), and one thread hands the box to a TMA store, which
//!   clips it at the matrix edge. Two buffers per warpgroup alternate, so the warps fill one
//!   while the TMA reads the other; the warps go on to the next tile without waiting for the
//!   stores to land. A TMA store clips columns only at 16-byte granularity of the row: past
//!   an N whose rows end inside a 16-byte unit it would write up to that unit's end (into the
//!   padding of a padded C). So when N·sizeof(C) is not a multiple of 16, the boxes that
//!   cross column N are stored directly, element by element under bounds checks.
//! - **columns** (`c_layout: col`): C is column-major, so a thread's two elements of a pair
//!   lie a column apart, and neighbours in memory (rows `r`, `r + 1`) in other threads: each
//!   element is stored alone, column by column (a column is a line of C), after the fused
//!   math has run on every accumulator.

use crate::plan::epilogue::{AccElement, FusedEpilogue};
use crate::plan::store::{
    pair_elements, rows_with_steps, EpilogueRow, PairStore, StoreBox, StoreMatrices, StorePath,
    TmaStore,
};
use gemm_dsl::family::wgmma::WARPGROUP_THREADS;
use gemm_dsl::family::wgmma::{
    StoreStaging, WgmmaGeometry, MBARRIER_BYTES, STORE_BOX_ROWS, STORE_BUFFERS, WGMMA_M,
};
use gemm_dsl::{CLayout, DType, GemmSpec};
use serde::{Serialize, Serializer};

/// How a consumer's accumulators reach C: the fused epilogue's math, then the stores.
#[derive(Clone, Debug, Serialize)]
pub struct WgmmaEpilogue {
    /// C's element type, printed in the conversions' mnemonics.
    #[serde(serialize_with = "type_name")]
    pub out: DType,
    pub out_bytes: u32,
    /// 16-bit C: a pair of accumulators is stored as one packed word, and an edge element is
    /// converted alone.
    pub packs_pairs: bool,
    /// The thread's accumulator rows as direct stores, in increasing order.
    pub rows: Vec<EpilogueRow<PairStore>>,
    /// `c_layout: col`: the thread's accumulators by column instead, each element stored
    /// alone (the direct path's `rows` then only group the fused math).
    pub columns: Option<Vec<ColumnStores>>,
    /// `epilogue: direct`, or `epilogue: tma` (whose boxes carry their rows' direct stores
    /// for a ragged N).
    #[serde(flatten)]
    pub path: StorePath,
    /// `scale`, `bias`, `activation`: the math on the accumulators before they are stored.
    pub fused: Option<FusedEpilogue>,
    /// `scale: alpha_beta`: each consumer asks L2 for its rows of C-in when its tile starts,
    /// so that the epilogue's reads find them there rather than in DRAM.
    pub c_in_prefetch: Option<CInPrefetch>,
    /// `scale: alpha_beta` under TMA stores: C-in's boxes by TMA into the store buffers.
    pub c_in_loads: Option<CInLoads>,
}

impl WgmmaEpilogue {
    /// The epilogue of geometry `g` for `spec`'s C and fused math; C-in's mbarriers, if any,
    /// start `c_in_barriers_offset` bytes from the ring base.
    pub(super) fn new(g: &WgmmaGeometry, spec: &GemmSpec, c_in_barriers_offset: u32) -> Self {
        let out_bytes = spec.out.size_bytes();
        let rows = direct_rows(g, out_bytes);
        let path = match g.store_staging {
            Some(staging) => StorePath::Tma(tma_store(g, &staging, out_bytes)),
            None => StorePath::Direct {},
        };
        let c_in_loads = CInLoads::of(g, &path, c_in_barriers_offset);
        // C's rows are 16-byte aligned (see `launch_contract`).
        let fused = FusedEpilogue::of(spec, &segments(&rows, &path), 16).map(|fused| {
            if c_in_loads.is_some() {
                fused.with_c_in_staged()
            } else {
                fused
            }
        });
        WgmmaEpilogue {
            out: spec.out,
            out_bytes,
            packs_pairs: out_bytes == 2,
            columns: (spec.c_layout == CLayout::Col).then(|| direct_columns(g, out_bytes)),
            rows,
            path,
            fused,
            c_in_prefetch: spec
                .scale
                .reads_c()
                .then(|| CInPrefetch::new(g.rows_per_consumer, spec.tile.n, out_bytes)),
            c_in_loads,
        }
    }
}

/// An element type as its name (`bf16`).
fn type_name<S: Serializer>(dtype: &DType, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(dtype.name())
}

/// The accumulator that holds row `row` (0..16 of the warp's rows) of column `col` of the
/// wgmma row `mi`: the first of its pair.
fn pair_at(g: &WgmmaGeometry, mi: u32, row: u32, col: u32) -> (u32, u32) {
    let lo = mi * (g.n / 2) + 4 * (col / 8) + 2 * (row / 8);
    (lo, lo + 1)
}

/// The TMA-store path of one consumer warpgroup: its boxes, each written by `stmatrix`.
fn tma_store(g: &WgmmaGeometry, staging: &StoreStaging, out_bytes: u32) -> TmaStore {
    let box_cols = staging.box_cols;
    let all_rows = direct_rows(g, out_bytes);
    let boxes = (0..g.rows_per_consumer / WGMMA_M)
        .flat_map(|mi| (0..g.n / box_cols).map(move |strip| (mi, strip)))
        .map(|(mi, strip)| StoreBox {
            row: mi * WGMMA_M,
            col: strip * box_cols,
            col_end: (strip + 1) * box_cols,
            row_end: mi * WGMMA_M + STORE_BOX_ROWS,
            matrices: (0..box_cols / 16)
                .map(|piece| {
                    let col = strip * box_cols + 16 * piece;
                    StoreMatrices {
                        address: piece,
                        pairs: [
                            pair_at(g, mi, 0, col),
                            pair_at(g, mi, 8, col),
                            pair_at(g, mi, 0, col + 8),
                            pair_at(g, mi, 8, col + 8),
                        ],
                    }
                })
                .collect(),
            direct_rows: all_rows
                .iter()
                .filter(|r| r.row / WGMMA_M == mi)
                .map(|r| EpilogueRow {
                    row: r.row,
                    ld_scale: r.row * out_bytes,
                    stores: r
                        .stores
                        .iter()
                        .filter(|s| s.col / box_cols == strip)
                        .copied()
                        .collect(),
                })
                .collect(),
        })
        .collect();
    let buffer_bytes = staging.buffer_bytes();
    TmaStore {
        box_rows: STORE_BOX_ROWS,
        box_cols,
        swizzle_bytes: staging.swizzle_bytes,
        row_shift: staging.swizzle_bytes.trailing_zeros(),
        swizzle_mask: staging.swizzle_bytes / 16 - 1,
        buffer_bytes,
        consumer_bytes: STORE_BUFFERS * buffer_bytes,
        boxes,
        matrices_per_box: box_cols / 16,
        piece_xors: (0..box_cols / 16).map(|piece| piece * 32).collect(),
        ragged_column_mask: 16 / out_bytes - 1,
    }
}

impl WgmmaEpilogue {
    /// Where a consumer thread's accumulators lie from its first row and column, grouped as
    /// they are stored: one group per TMA store box, or per row for direct stores. The fused
    /// epilogue transforms each group just before its store.
    pub fn fused_segments(&self) -> Vec<Vec<AccElement>> {
        segments(&self.rows, &self.path)
    }
}

/// [`WgmmaEpilogue::fused_segments`] of direct stores `rows` on store path `path`.
fn segments(rows: &[EpilogueRow<PairStore>], path: &StorePath) -> Vec<Vec<AccElement>> {
    match path {
        StorePath::Tma(tma) => tma
            .boxes
            .iter()
            .map(|b| pair_elements(&b.direct_rows))
            .collect(),
        StorePath::Direct {} | StorePath::Staged(_) => rows
            .iter()
            .map(|row| pair_elements(std::slice::from_ref(row)))
            .collect(),
    }
}

/// `scale: alpha_beta` under TMA stores: C-in's boxes come by TMA into the store buffers, and
/// each thread reads its elements back with `ldmatrix` at the addresses its `stmatrix` will
/// write D to (the same fragments). The first two boxes load at the epilogue's start, one into
/// each buffer; box b + 1 loads at box b's start into the buffer box b - 1's store has read.
/// Each buffer has an mbarrier that counts its load's bytes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CInLoads {
    /// Offset of consumer 0's first mbarrier from the ring base; a consumer's two lie 8 B apart
    /// and the next consumer's 16 B on.
    pub barriers_offset: u32,
    /// Every consumer's mbarriers, from the ring base (to initialise them).
    pub barrier_offsets: Vec<u32>,
    /// Bytes of one mbarrier, and of one consumer's.
    pub barrier_bytes: u32,
    pub consumer_bytes: u32,
    /// Bytes one load brings: the whole box (parts past the matrix are zero-filled, and count).
    pub box_bytes: u32,
    /// The boxes loaded at the epilogue's start, in box order.
    pub first: Vec<BoxOrigin>,
    /// Per box, the box whose C-in its start loads into the other buffer, if any.
    pub ahead: Vec<Option<BoxOrigin>>,
}

/// A store box's first row and column within the consumer's part of the tile.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct BoxOrigin {
    pub row: u32,
    pub col: u32,
}

impl CInLoads {
    /// The loads of a consumer's boxes `tma`, with the consumers' barriers from
    /// `barriers_offset`; `None` without C-in or TMA stores.
    pub fn of(g: &WgmmaGeometry, path: &StorePath, barriers_offset: u32) -> Option<CInLoads> {
        let staging = g.store_staging.filter(|staging| staging.c_in_loads)?;
        let StorePath::Tma(tma) = path else {
            return None;
        };
        let origins: Vec<BoxOrigin> = tma
            .boxes
            .iter()
            .map(|b| BoxOrigin {
                row: b.row,
                col: b.col,
            })
            .collect();
        let first = origins
            .iter()
            .take(STORE_BUFFERS as usize)
            .copied()
            .collect();
        let ahead = (0..origins.len())
            .map(|b| {
                (b + 1 >= STORE_BUFFERS as usize)
                    .then(|| origins.get(b + 1).copied())
                    .flatten()
            })
            .collect();
        Some(CInLoads {
            barriers_offset,
            barrier_offsets: (0..g.consumers * STORE_BUFFERS)
                .map(|i| barriers_offset + i * MBARRIER_BYTES)
                .collect(),
            barrier_bytes: MBARRIER_BYTES,
            consumer_bytes: STORE_BUFFERS * MBARRIER_BYTES,
            box_bytes: staging.buffer_bytes(),
            first,
            ahead,
        })
    }
}

fn direct_rows(g: &WgmmaGeometry, out_bytes: u32) -> Vec<EpilogueRow<PairStore>> {
    let acc_per_wgmma = g.n / 2;
    rows_with_steps(
        (0..g.m_wgmmas)
            .flat_map(|mi| (0..2).map(move |h| (mi, h)))
            .map(|(mi, h)| {
                let stores = (0..g.n / 8)
                    .map(|j| PairStore::at(mi * acc_per_wgmma + 4 * j + 2 * h, 8 * j, out_bytes, 0))
                    .collect();
                (mi * WGMMA_M + 8 * h, stores)
            }),
        out_bytes,
    )
}

/// One column of a column-major C in a thread's accumulators: column `col` right of the
/// thread's first, `ldc · ld_scale` bytes from the column before it (the first: from the
/// thread's first column), and its elements in increasing rows.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ColumnStores {
    pub col: u32,
    pub ld_scale: u32,
    pub stores: Vec<ElementStore>,
}

/// One accumulator of a column: `acc` at row `row` below the thread's first, `offset` bytes
/// into the column.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct ElementStore {
    pub acc: u32,
    pub row: u32,
    pub offset: u32,
}

/// `c_layout: col`: the thread's columns `8j + e` (`e` of 2) right of its first, in
/// increasing order, each holding the rows `64·mi + 8·h` of the fragment.
fn direct_columns(g: &WgmmaGeometry, out_bytes: u32) -> Vec<ColumnStores> {
    let acc_per_wgmma = g.n / 2;
    let mut previous = 0;
    (0..g.n / 8)
        .flat_map(|j| (0..2).map(move |e| (j, e)))
        .map(|(j, e)| {
            let col = 8 * j + e;
            let stores = (0..g.m_wgmmas)
                .flat_map(|mi| (0..2).map(move |h| (mi, h)))
                .map(|(mi, h)| {
                    let row = mi * WGMMA_M + 8 * h;
                    ElementStore {
                        acc: mi * acc_per_wgmma + 4 * j + 2 * h + e,
                        row,
                        offset: row * out_bytes,
                    }
                })
                .collect();
            let ld_scale = (col - previous) * out_bytes;
            previous = col;
            ColumnStores {
                col,
                ld_scale,
                stores,
            }
        })
        .collect()
}

/// A consumer warpgroup's L2 prefetch of its rows of C-in: 128-byte lines, thread `t` takes
/// line `t % lines_per_row` of rows `t / lines_per_row + rows_per_pass · i`, `i < passes`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CInPrefetch {
    pub lines_per_row: u32,
    pub rows_per_pass: u32,
    pub passes: u32,
    /// Elements of C in one line.
    pub line_elements: u32,
    pub out_bytes: u32,
    /// `rows_per_pass · out_bytes`: times `ldc`, the bytes from one pass's row to the next's.
    pub pass_step_bytes: u32,
}

/// The L2's line.
const L2_LINE_BYTES: u32 = 128;

impl CInPrefetch {
    pub(super) fn new(rows: u32, cols: u32, out_bytes: u32) -> CInPrefetch {
        let lines_per_row = (cols * out_bytes).div_ceil(L2_LINE_BYTES);
        let rows_per_pass = (WARPGROUP_THREADS / lines_per_row).max(1);
        CInPrefetch {
            lines_per_row,
            rows_per_pass,
            passes: rows.div_ceil(rows_per_pass),
            line_elements: L2_LINE_BYTES / out_bytes,
            out_bytes,
            pass_step_bytes: rows_per_pass * out_bytes,
        }
    }
}
#[cfg(test)]
mod tests {
    use super::super::descriptor::tma_box_address;
    use super::*;

    /// The epilogue of the wgmma spec `text`, and its geometry.
    fn epilogue(text: &str) -> (WgmmaEpilogue, WgmmaGeometry) {
        let (valid, g) = super::super::test_spec(text);
        (WgmmaEpilogue::new(&g, &valid.spec, 0), g)
    }

    /// Where accumulator `acc` of thread `(warp, lane)` sits in the consumer's rows: the
    /// wgmma fragment layout, independent of the epilogue's plan.
    fn fragment_position(g: &WgmmaGeometry, warp: u32, lane: u32, acc: u32) -> (u32, u32) {
        let per_wgmma = g.n / 2;
        let (mi, a) = (acc / per_wgmma, acc % per_wgmma);
        let (j, h, e) = (a / 4, (a % 4) / 2, a % 2);
        (
            WGMMA_M * mi + 16 * warp + lane / 4 + 8 * h,
            8 * j + 2 * (lane % 4) + e,
        )
    }

    /// Every accumulator of a consumer lands, through its `stmatrix`, on the byte of the
    /// box where the TMA store reads its (row, column), and every element of the
    /// consumer's rows is written exactly once: over all swizzles of C and row counts.
    #[test]
    fn stmatrix_writes_each_element_where_the_tma_store_reads_it() {
        for spec in [
            "tile: 128x256x64",
            "tile: 256x128x64",
            "tile: 128x128x64, consumers: 1",
            "tile: 64x96x64, consumers: 1, swizzle: 64B, stages: 3",
            "tile: 128x80x32, swizzle: 32B",
            "tile: 128x256x64, dtype: f16",
        ] {
            let (e, g) = epilogue(spec);
            let t = e.path.tma().expect("16-bit C is stored by TMA");
            let mut written = vec![0u32; (g.rows_per_consumer * g.n) as usize];
            for b in &t.boxes {
                for mat in &b.matrices {
                    for (i, &(lo, hi)) in mat.pairs.iter().enumerate() {
                        for warp in 0..4 {
                            for lane in 0..32 {
                                for (element, acc) in [(0, lo), (1, hi)] {
                                    let (row, col) = fragment_position(&g, warp, lane, acc);
                                    // Register i of lane l is row l/4 of matrix i, whose
                                    // address lane 8i + l/4 gives.
                                    let addressing_lane = 8 * i as u32 + lane / 4;
                                    let at = t.stmatrix_offset(warp, addressing_lane, mat.address)
                                        + (2 * (lane % 4) + element) * 2;
                                    let (box_row, box_col) = (row - b.row, col - b.col);
                                    assert!(box_row < t.box_rows && box_col < t.box_cols, "{spec}");
                                    let read =
                                        tma_box_address(0, box_row, box_col, 2, t.swizzle_bytes);
                                    assert_eq!(at, read, "{spec}: row {row} column {col}");
                                    written[(row * g.n + col) as usize] += 1;
                                }
                            }
                        }
                    }
                }
            }
            assert!(written.iter().all(|&n| n == 1), "{spec}: each element once");
            // The boxes' direct stores cover the same elements, each once, from the
            // registers the fragment layout puts them in.
            let mut stored = vec![0u32; (g.rows_per_consumer * g.n) as usize];
            for b in &t.boxes {
                for r in &b.direct_rows {
                    assert_eq!(r.ld_scale, r.row * 2, "{spec}");
                    for s in &r.stores {
                        for (acc, col) in [(s.lo, s.col), (s.hi, s.col_hi)] {
                            let (row, frag_col) = fragment_position(&g, 0, 0, acc);
                            assert_eq!((row, frag_col), (r.row, col), "{spec}");
                            assert!(col >= b.col && col < b.col + t.box_cols, "{spec}");
                            for warp in 0..4 {
                                for lane in 0..32 {
                                    let at =
                                        (r.row + 16 * warp + lane / 4) * g.n + col + 2 * (lane % 4);
                                    stored[at as usize] += 1;
                                }
                            }
                        }
                    }
                }
            }
            assert!(stored.iter().all(|&n| n == 1), "{spec}: each element once");
        }
    }

    /// `c_layout: col`: walking a thread's columns from its first element's address (as the
    /// template does: each column's `ldc · ld_scale` step, then each element's offset) lands
    /// every accumulator on the column-major address of its (row, column) in the fragment
    /// layout, and every element of the consumer's rows is stored exactly once.
    #[test]
    fn column_stores_write_each_element_at_its_column_major_address() {
        for spec in [
            "c_layout: col, tile: 128x16x64",
            "c_layout: col, tile: 64x32x64, consumers: 1",
            "c_layout: col, tile: 128x256x64, out: f32",
            "c_layout: col, tile: 256x64x64",
            "c_layout: col, dtype: e4m3, layout: rc, tile: 128x16x128, quant: tensor",
        ] {
            let (e, g) = epilogue(spec);
            let columns = e.columns.as_ref().expect("c_layout: col stores by column");
            assert!(e.path.tma().is_none(), "{spec}: stored directly");
            let (ldc, out_bytes) = (1000, e.out_bytes);
            let mut written = vec![0u32; (g.rows_per_consumer * g.n) as usize];
            for warp in 0..4 {
                for lane in 0..32 {
                    let (row0, col0) = (16 * warp + lane / 4, 2 * (lane % 4));
                    let mut line = (col0 * ldc + row0) * out_bytes;
                    for column in columns {
                        line += ldc * column.ld_scale;
                        for store in &column.stores {
                            let (row, col) = fragment_position(&g, warp, lane, store.acc);
                            assert_eq!((row - row0, col - col0), (store.row, column.col));
                            assert_eq!(line + store.offset, (col * ldc + row) * out_bytes);
                            written[(row * g.n + col) as usize] += 1;
                        }
                    }
                }
            }
            assert!(written.iter().all(|&n| n == 1), "{spec}: each element once");
        }
    }

    #[test]
    fn f32_out_stores_directly() {
        let (e, _) = epilogue("dtype: f16, out: f32");
        assert!(e.path.tma().is_none());
        assert!(!e.packs_pairs);
        assert_eq!(e.rows.len(), 2);
    }
    /// C-in's loads: two boxes ahead at the epilogue's start, then each box's start loads the
    /// next into the buffer the box before it was stored from, so a buffer is loaded only
    /// after its previous box; the barriers follow the ring's and move the block-scale slots.
    #[test]
    fn c_in_loads_run_one_box_ahead_into_the_freed_buffer() {
        let (valid, g) = super::super::test_spec("scale: alpha_beta, schedule: persistent");
        let plan = super::super::plan(&valid, &g);
        let loads = plan
            .epilogue
            .c_in_loads
            .clone()
            .expect("alpha_beta under TMA stores loads C-in");
        let StorePath::Tma(tma) = &plan.epilogue.path else {
            unreachable!()
        };
        let origin = |b: &StoreBox| BoxOrigin {
            row: b.row,
            col: b.col,
        };
        assert_eq!(tma.boxes.len(), 4);
        assert_eq!(loads.first, [origin(&tma.boxes[0]), origin(&tma.boxes[1])]);
        assert_eq!(
            loads.ahead,
            [
                None,
                Some(origin(&tma.boxes[2])),
                Some(origin(&tma.boxes[3])),
                None
            ]
        );
        // Box b + 1 is loaded at box b's start into box b - 1's buffer: every box is loaded
        // exactly once, and into the buffer of its parity.
        let mut loaded: Vec<usize> = (0..loads.first.len()).collect();
        for (b, ahead) in loads.ahead.iter().enumerate() {
            if ahead.is_some() {
                assert!(b >= 1, "box 0's start has no freed buffer");
                loaded.push(b + 1);
            }
        }
        assert_eq!(loaded, [0, 1, 2, 3]);
        assert_eq!(loads.box_bytes, 64 * 128);
        assert_eq!(
            loads.barriers_offset,
            plan.main_loop.ring.bytes_with_barriers()
        );
        assert_eq!(
            loads.barrier_offsets,
            (0..4)
                .map(|i| loads.barriers_offset + 8 * i)
                .collect::<Vec<_>>()
        );
        // No C-in, or direct stores: loaded by each thread instead.
        for text in ["scale: alpha", "scale: alpha_beta, epilogue: direct"] {
            let (valid, g) = super::super::test_spec(text);
            let plan = super::super::plan(&valid, &g);
            assert_eq!(plan.epilogue.c_in_loads, None, "{text}");
        }
    }
}
