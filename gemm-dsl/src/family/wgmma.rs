//! The Hopper family (`mma: wgmma`): a producer warpgroup loads A and B tiles with the Tensor
//! Memory Accelerator into a ring of shared-memory stages guarded by mbarriers; one or two
//! consumer warpgroups multiply them with `wgmma.mma_async` straight from shared memory. Its
//! geometry, rules and budgets.

use crate::budget::{LedgerLine, Occupancy, RegisterBudget, RegisterLine, SmemLedger};
use crate::pick::family_cost::{Calibration, Candidate, FamilyCost, MathUnit};
use crate::rules::{Budgets, FamilyRules, Validator};
use crate::spec::*;

/// Threads of one warpgroup: the unit that issues a wgmma, and the producer's size.
pub const WARPGROUP_THREADS: u32 = 128;
/// Rows of A (and of the accumulator) one wgmma instruction covers.
pub const WGMMA_M: u32 = 64;
/// k of one wgmma instruction for 16-bit inputs.
pub const WGMMA_K: u32 = 16;
/// Bytes of K one wgmma instruction reads of each operand row, whatever the type: k16 of
/// 16-bit inputs, k32 of fp8.
pub const WGMMA_K_BYTES: u32 = 32;

/// k of one wgmma instruction for `dtype`: 16 for f16/bf16, 32 for fp8.
pub fn wgmma_k(dtype: DType) -> u32 {
    WGMMA_K_BYTES / dtype.size_bytes()
}
/// The widest N of one wgmma instruction.
pub const WGMMA_MAX_N: u32 = 256;
/// The widest block tile: a consumer's row of 64 is at most two wgmmas wide.
pub const WGMMA_MAX_TILE_N: u32 = 2 * WGMMA_MAX_N;
/// The most rows a tensor-map box may have.
pub const TMA_MAX_BOX_ROWS: u32 = 256;
/// Rows of one swizzle atom: a box, or a cluster block's slice of one, starts on an atom.
pub const ATOM_ROWS: u32 = 8;
/// Registers the producer warpgroup keeps after `setmaxnreg.dec`: it only counts tiles and
/// issues copies.
pub const PRODUCER_REGISTERS: u32 = 40;

/// Registers one wgmma needs besides its accumulators, as ptxas counts them (its C7602 for an
/// m64n224 under `.maxnreg 128` asks for 138, for an m64n208 130): ptxas places every
/// instruction under the kernel's `.maxnreg`, whatever `setmaxnreg` gives the consumers later.
pub const WGMMA_OPERAND_REGISTERS: u32 = 26;
/// Shared memory kept free to align the ring to 1024 bytes, the period of the 128-byte
/// swizzle that TMA writes and wgmma reads (the dynamic base is only 16-byte aligned).
pub const RING_ALIGN_BYTES: u32 = 1024;
/// Flag bytes after a block's stream-K partial sums: one 32-bit flag per consumer warpgroup
/// (at most two), padded so the next block's slots stay 16-byte aligned.
pub const STREAM_K_FLAG_BYTES: u32 = 16;

/// Rows of one buffer of a TMA-store epilogue: a warpgroup's rows of one wgmma row.
pub const STORE_BOX_ROWS: u32 = WGMMA_M;
pub use crate::geometry::{MBARRIER_BYTES, STAGING_ALIGN_BYTES};
/// Buffers each consumer warpgroup stages C through: it fills one while the TMA stores the
/// other.
pub const STORE_BUFFERS: u32 = 2;

/// A TMA-store epilogue's shared memory: each consumer writes its accumulators, one box of
/// [`STORE_BOX_ROWS`] rows by one swizzle span of C at a time, into [`STORE_BUFFERS`]
/// buffers in turn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StoreStaging {
    /// Columns of C in one box: one swizzle span.
    pub box_cols: u32,
    /// The box's swizzle: the widest of 128, 64, 32 bytes whose span divides BN.
    pub swizzle_bytes: u32,
    /// Boxes of one consumer's rows per output tile.
    pub boxes_per_tile: u32,
    /// `scale: alpha_beta`: C-in's boxes come by TMA into the buffers, each buffer with an
    /// mbarrier that counts the load's bytes.
    pub c_in_loads: bool,
}

impl StoreStaging {
    pub fn buffer_bytes(&self) -> u32 {
        STORE_BOX_ROWS * self.swizzle_bytes
    }

    /// All consumers' buffers.
    pub fn bytes(&self, consumers: u32) -> u32 {
        consumers * STORE_BUFFERS * self.buffer_bytes()
    }

    /// The mbarriers of C-in's loads: one per buffer of every consumer, or none.
    pub fn c_in_barrier_bytes(&self, consumers: u32) -> u32 {
        if self.c_in_loads {
            consumers * STORE_BUFFERS * MBARRIER_BYTES
        } else {
            0
        }
    }
}

/// One wgmma of a consumer's row of 64: columns `start .. start + n` of the block tile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NPiece {
    pub start: u32,
    pub n: u32,
}

/// Which dimension of an operand is contiguous in global memory, and so in the shared-memory
/// boxes the TMA writes: what a wgmma descriptor's transpose flag says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Major {
    /// K contiguous: row-major A, column-major B (`imm-trans = 0`).
    K,
    /// M or N contiguous: column-major A, row-major B (`imm-trans = 1`).
    MN,
}

impl Major {
    /// The wgmma `imm-trans-a` / `imm-trans-b` operand.
    pub fn transpose_flag(self) -> u32 {
        match self {
            Major::K => 0,
            Major::MN => 1,
        }
    }

    /// The majors of A and B under a spec's layout.
    pub fn of_layout(layout: Layout) -> (Major, Major) {
        match layout {
            Layout::RowRow => (Major::K, Major::MN),
            Layout::RowCol => (Major::K, Major::K),
            Layout::ColRow => (Major::MN, Major::MN),
            Layout::ColCol => (Major::MN, Major::K),
        }
    }
}

/// One operand's tensor-map boxes per stage: `boxes` swizzle spans along the contiguous
/// dimension, each holding every line of the other, and each span loaded as `line_parts`
/// boxes of `inner` elements by `outer` lines (one, unless a K-major B's BN rows are more
/// than a box's [`TMA_MAX_BOX_ROWS`]). A span's lines land consecutively, `swizzle_bytes`
/// each, whichever box brought them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OperandBoxes {
    pub inner: u32,
    pub outer: u32,
    pub boxes: u32,
    pub line_parts: u32,
}

impl OperandBoxes {
    /// The boxes of an operand tile of `mn` rows or columns (BM or BN) by `k`: swizzle spans
    /// of its contiguous dimension, each holding every line of the other, in as few equal
    /// boxes down the lines as the box limit allows.
    pub fn of(major: Major, mn: u32, k: u32, swizzle_elements: u32) -> OperandBoxes {
        let (contiguous, lines) = match major {
            Major::K => (k, mn),
            Major::MN => (mn, k),
        };
        let line_parts = lines.div_ceil(TMA_MAX_BOX_ROWS).max(1);
        debug_assert!(
            (lines / line_parts).is_multiple_of(ATOM_ROWS),
            "validation keeps each box whole atoms"
        );
        OperandBoxes {
            inner: swizzle_elements,
            outer: lines / line_parts,
            boxes: contiguous / swizzle_elements,
            line_parts,
        }
    }

    /// Bytes of one TMA box.
    pub fn bytes_per_box(&self, element_bytes: u32) -> u32 {
        self.inner * self.outer * element_bytes
    }

    /// Bytes of one swizzle span with all its lines: from one span to the next in a stage.
    pub fn span_bytes(&self, element_bytes: u32) -> u32 {
        self.line_parts * self.bytes_per_box(element_bytes)
    }

    /// The operand's bytes in one stage.
    pub fn stage_bytes(&self, element_bytes: u32) -> u32 {
        self.boxes * self.span_bytes(element_bytes)
    }
}

/// Which operand the blocks of a cluster share, and so load once and multicast: a `2x1`
/// cluster (two tiles down M) shares B's columns, a `1x2` cluster (two tiles along N) A's rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SharedOperand {
    A,
    B,
}

/// Blocks that share one operand's tiles: each loads `1 / blocks` of the shared operand's
/// boxes (a slice of their rows) and multicasts it to every block of the cluster.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClusterSharing {
    pub shape: Grid2,
    pub blocks: u32,
    pub shared: SharedOperand,
}

/// The Hopper family's split of the block tile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WgmmaGeometry {
    pub tile: Tile,
    pub consumers: u32,
    /// `consumers: pingpong`: the two consumers take alternate tiles, each the whole block
    /// tile, and turns at the tensor cores.
    pub pingpong: bool,
    /// A producer warpgroup and the consumers.
    pub threads: u32,
    /// Rows of the block tile each consumer warpgroup computes, in `m_wgmmas` wgmma rows of 64
    /// (all of them in ping-pong).
    pub rows_per_consumer: u32,
    pub m_wgmmas: u32,
    /// The block tile's width: one wgmma per row of 64, or two where BN is over
    /// [`WGMMA_MAX_N`] ([`WgmmaGeometry::n_pieces`]).
    pub n: u32,
    /// k of one wgmma: 16 for f16/bf16, 32 for fp8.
    pub k_per_wgmma: u32,
    /// wgmma k steps per k tile (`BK / k_per_wgmma`).
    pub k_steps: u32,
    /// A's and B's XOR swizzle spans of shared-memory rows (32, 64 or 128 bytes): the spec's
    /// swizzle, or for an M- or N-major operand whose tile extent that span does not divide,
    /// the widest narrower one that does ([`operand_swizzle_bytes`]).
    pub a_swizzle_bytes: u32,
    pub b_swizzle_bytes: u32,
    /// Which dimension of A and of B is contiguous (the spec's layout).
    pub a_major: Major,
    pub b_major: Major,
    /// A's boxes: K-major, `a_swizzle_bytes` of K by BM rows, `BK·sizeof / swizzle` of them;
    /// M-major, `a_swizzle_bytes` of M by BK rows, `BM·sizeof / swizzle` of them.
    pub a_boxes: OperandBoxes,
    /// B's boxes: N-major (row-major B), `b_swizzle_bytes` of N by BK rows; K-major,
    /// `b_swizzle_bytes` of K by BN rows.
    pub b_boxes: OperandBoxes,
    /// Registers per consumer thread: the kernel's even split, or what `setmaxnreg.inc`
    /// raises it to when the producer gives registers back.
    pub consumer_registers: u32,
    /// `setmaxnreg` values `(producer, consumers)` where the split pays.
    pub register_split: Option<(u32, u32)>,
    /// Thread-block clusters that multicast a shared operand, if any.
    pub cluster: Option<ClusterSharing>,
    /// `epilogue: tma`: C staged in shared memory for TMA stores.
    pub store_staging: Option<StoreStaging>,
    /// `tail = stream_k`: the persistent walk splits its last round's tiles along K, and
    /// the blocks meet in a global workspace ([`WgmmaGeometry::workspace_bytes_per_block`]).
    pub stream_k: bool,
    /// `promote: K` (fp8): k tiles between promotions of the partial sums into a second set
    /// of f32 registers.
    pub promote_k_tiles: Option<u32>,
    /// `quant: block`: the producer copies each k tile's scales into a slot beside its stage
    /// ([`WgmmaGeometry::block_scale_bytes`]).
    pub block_scales: bool,
    /// `quant: block`: the rows of A scales a slot holds. BM, or with `groups:` (whose tiles
    /// start at any row, and whose scales' copy must start on a 16-byte boundary) BM and the
    /// [`Quant::A_LINE_MULTIPLE`] rows before a tile's first row back to that boundary.
    pub block_scale_a_rows: u32,
}

/// The narrowest XOR swizzle an operand falls back to.
pub const MIN_SWIZZLE_BYTES: u32 = 32;

/// An operand's swizzle under the spec's `spec_bytes`: a K-major operand's rows are BK long,
/// which validation makes a multiple of the spec's span; an M- or N-major operand's rows are
/// its tile extent `mn` (BM or BN), and where the spec's span does not divide it the operand
/// takes the widest narrower span that does. So 192x96 tiles of bf16 read A through 128-byte
/// rows (whole 128-byte TMA requests) while B's 96 columns take 64-byte ones; with one swizzle
/// for both, A's requests were 64 bytes too, and the 64-byte swizzle cost 128x128 ping-pong
/// 29 % at 2048³ (H100, `results/two-speeds-2026-11-26/swizzle-small.txt`).
pub fn operand_swizzle_bytes(spec_bytes: u32, major: Major, mn: u32, element: u32) -> u32 {
    match major {
        Major::K => spec_bytes,
        Major::MN => widest_swizzle_bytes(mn, element, spec_bytes),
    }
}

/// The widest XOR swizzle of at most `at_most` bytes whose span of `element`-byte values
/// divides `extent` values, or the narrowest one.
pub fn widest_swizzle_bytes(extent: u32, element: u32, at_most: u32) -> u32 {
    [128, 64, MIN_SWIZZLE_BYTES]
        .into_iter()
        .filter(|&bytes| bytes <= at_most)
        .find(|&bytes| extent.is_multiple_of(bytes / element))
        .unwrap_or(MIN_SWIZZLE_BYTES)
}

/// Why a spec has no wgmma geometry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WgmmaGeometryError {
    /// wgmma from shared memory takes f16, bf16 or fp8 here.
    Dtype,
    /// fp8 wgmma reads both operands K-major: `layout: rc`.
    Fp8Layout,
    /// TMA and wgmma share an XOR swizzle; `none` and padding are not implemented.
    Swizzle,
    Consumers,
    /// BM is not `64 x consumers` rows per consumer, or over a box's 256 rows.
    TileM,
    TileN {
        step: u32,
    },
    TileK {
        step: u32,
    },
    /// An M- or N-major operand's box holds BK rows, at most [`TMA_MAX_BOX_ROWS`].
    TileKRows,
    /// Only `1x1`, and `2x1` / `1x2` with `copy: tma(multicast = 2)`.
    Cluster,
    /// Ping-pong consumers alternate the tiles of a persistent walk whose tiles are whole.
    PingPongSchedule,
    /// Promotions happen at k-tile boundaries: the interval is a multiple of BK.
    PromoteInterval,
    /// `quant: block`: B's scales cover 128 columns, so a tile holds whole blocks of them or
    /// lies within one.
    BlockScaleColumns,
    /// `quant: block`: one k tile is one block of 128 k, so that every stream-K unit's tiles
    /// start on a block.
    BlockScaleK,
}

impl WgmmaGeometry {
    pub fn new(spec: &GemmSpec) -> Result<WgmmaGeometry, WgmmaGeometryError> {
        let element = match spec.dtype {
            DType::F16 | DType::Bf16 | DType::E4m3 | DType::E5m2 => spec.dtype.size_bytes(),
            DType::Tf32 | DType::F32 => return Err(WgmmaGeometryError::Dtype),
        };
        if spec.dtype.is_fp8() && spec.layout != Layout::RowCol {
            return Err(WgmmaGeometryError::Fp8Layout);
        }
        let k_per_wgmma = wgmma_k(spec.dtype);
        let swizzle_bytes = spec
            .swizzle
            .xor_width_bytes()
            .ok_or(WgmmaGeometryError::Swizzle)?;
        let tile = spec.tile;
        let consumers = spec.consumers;
        if !(1..=3).contains(&consumers) {
            return Err(WgmmaGeometryError::Consumers);
        }
        // Ping-pong consumers each compute the whole tile; others split its rows.
        let splitting_consumers = if spec.pingpong { 1 } else { consumers };
        if spec.pingpong {
            let whole_tiles = matches!(
                spec.schedule,
                Schedule::Persistent {
                    tail: Tail::Whole,
                    ..
                }
            );
            if !whole_tiles {
                return Err(WgmmaGeometryError::PingPongSchedule);
            }
        }
        if tile.m == 0
            || tile.m > TMA_MAX_BOX_ROWS
            || !tile.m.is_multiple_of(WGMMA_M * splitting_consumers)
        {
            return Err(WgmmaGeometryError::TileM);
        }
        let (a_major, b_major) = Major::of_layout(spec.layout);
        let swizzle_elements = swizzle_bytes / element;
        let n_step = tile_n_step(element, swizzle_bytes);
        // Over 256 columns a row takes two wgmmas, and a K-major B's rows two boxes; where a
        // 2x1 cluster's blocks each load half of every box, each half is whole 8-row atoms.
        let n_step = if b_major == Major::K && tile.n > TMA_MAX_BOX_ROWS {
            n_step.max(ATOM_ROWS * 2 * spec.cluster.rows)
        } else {
            n_step
        };
        if tile.n == 0 || tile.n > WGMMA_MAX_TILE_N || !tile.n.is_multiple_of(n_step) {
            return Err(WgmmaGeometryError::TileN { step: n_step });
        }
        // A lands as boxes of one swizzle span of K each; wgmma steps 32 bytes of k at a time.
        let k_step = swizzle_elements.max(k_per_wgmma);
        if tile.k == 0 || !tile.k.is_multiple_of(k_step) {
            return Err(WgmmaGeometryError::TileK { step: k_step });
        }
        if (a_major == Major::MN || b_major == Major::MN) && tile.k > TMA_MAX_BOX_ROWS {
            return Err(WgmmaGeometryError::TileKRows);
        }
        let threads = WARPGROUP_THREADS * (consumers + 1);
        let even_split = RegisterBudget::limit_for(threads);
        let register_split = (consumers > 1).then(|| {
            let freed = WARPGROUP_THREADS * (even_split - PRODUCER_REGISTERS);
            let raised = even_split + freed / (WARPGROUP_THREADS * consumers);
            (
                PRODUCER_REGISTERS,
                (raised / 8 * 8).min(RegisterBudget::LIMIT / 8 * 8),
            )
        });
        let cluster = match (spec.cluster, spec.copy) {
            (Grid2 { rows: 1, cols: 1 }, Copy::Tma { multicast: 1 }) => None,
            (shape @ Grid2 { rows: 2, cols: 1 }, Copy::Tma { multicast: 2 }) => {
                Some(ClusterSharing {
                    shape,
                    blocks: 2,
                    shared: SharedOperand::B,
                })
            }
            (shape @ Grid2 { rows: 1, cols: 2 }, Copy::Tma { multicast: 2 }) => {
                Some(ClusterSharing {
                    shape,
                    blocks: 2,
                    shared: SharedOperand::A,
                })
            }
            _ => return Err(WgmmaGeometryError::Cluster),
        };
        let promote_k_tiles = match spec.promote {
            None => None,
            Some(k) if k.is_multiple_of(tile.k) => Some(k / tile.k),
            Some(_) => return Err(WgmmaGeometryError::PromoteInterval),
        };
        let block = Quant::BLOCK;
        if spec.quant == Quant::Block {
            if tile.k != block {
                return Err(WgmmaGeometryError::BlockScaleK);
            }
            if !(tile.n.is_multiple_of(block) || block.is_multiple_of(tile.n)) {
                return Err(WgmmaGeometryError::BlockScaleColumns);
            }
        }
        let rows_per_consumer = tile.m / splitting_consumers;
        let a_swizzle_bytes = operand_swizzle_bytes(swizzle_bytes, a_major, tile.m, element);
        let b_swizzle_bytes = operand_swizzle_bytes(swizzle_bytes, b_major, tile.n, element);
        let store_staging = (spec.epilogue == Epilogue::Tma).then(|| {
            let out = spec.out.size_bytes();
            let swizzle_bytes = widest_swizzle_bytes(tile.n, out, 128);
            let box_cols = swizzle_bytes / out;
            StoreStaging {
                box_cols,
                swizzle_bytes,
                boxes_per_tile: (rows_per_consumer / STORE_BOX_ROWS) * tile.n / box_cols,
                c_in_loads: spec.scale.reads_c(),
            }
        });
        Ok(WgmmaGeometry {
            tile,
            consumers,
            pingpong: spec.pingpong,
            threads,
            rows_per_consumer,
            m_wgmmas: rows_per_consumer / WGMMA_M,
            n: tile.n,
            k_per_wgmma,
            k_steps: tile.k / k_per_wgmma,
            a_swizzle_bytes,
            b_swizzle_bytes,
            a_major,
            b_major,
            a_boxes: OperandBoxes::of(a_major, tile.m, tile.k, a_swizzle_bytes / element),
            b_boxes: OperandBoxes::of(b_major, tile.n, tile.k, b_swizzle_bytes / element),
            consumer_registers: register_split.map_or(even_split, |(_, consumer)| consumer),
            register_split,
            cluster,
            store_staging,
            stream_k: matches!(
                spec.schedule,
                Schedule::Persistent {
                    tail: Tail::StreamK,
                    ..
                }
            ),
            promote_k_tiles,
            block_scales: spec.quant == Quant::Block,
            block_scale_a_rows: if spec.groups.is_grouped() {
                tile.m + Quant::A_LINE_MULTIPLE
            } else {
                tile.m
            },
        })
    }

    /// `quant: block`: one stage's scales in shared memory, beside the ring: the tile's
    /// rows' A scales (one bulk copy, [`WgmmaGeometry::block_scale_a_rows`]), then its column
    /// blocks' B scales, padded to 16 bytes.
    pub fn block_scale_slot_bytes(&self) -> u32 {
        (self.block_scale_a_rows * 4 + (self.block_scale_col_blocks() * 4).next_multiple_of(16))
            .next_multiple_of(16)
    }

    /// `quant: block`: B's scale blocks a tile spans (1 where BN divides 128).
    pub fn block_scale_col_blocks(&self) -> u32 {
        (self.n / Quant::BLOCK).max(1)
    }

    /// `quant: block`: one slot of scales per stage of the ring; 0 otherwise.
    pub fn block_scale_bytes(&self, stages: u32) -> u32 {
        if !self.block_scales {
            return 0;
        }
        stages * self.block_scale_slot_bytes()
    }

    /// Global workspace a stream-K kernel needs per launched block: one slot of partial
    /// sums per consumer warpgroup (its f32 accumulators, 16 bytes per thread at a time), then
    /// 16 bytes of flags that say a slot is ready. 0 without stream-K.
    pub fn workspace_bytes_per_block(&self) -> u32 {
        if !self.stream_k {
            return 0;
        }
        self.consumers * self.partial_slot_bytes() + STREAM_K_FLAG_BYTES
    }

    /// Bytes of one consumer warpgroup's partial sums: every thread's accumulators.
    pub fn partial_slot_bytes(&self) -> u32 {
        self.accumulators() * WARPGROUP_THREADS * 4
    }

    /// wgmmas per row of 64, each a piece of the tile's columns.
    pub fn n_piece_count(&self) -> u32 {
        self.n.div_ceil(WGMMA_MAX_N)
    }

    /// Columns a piece's width and start are a multiple of: an N-major B's box (a piece reads
    /// whole swizzle atoms), or an atom's rows of a K-major B.
    pub fn n_piece_step(&self) -> u32 {
        match self.b_major {
            Major::MN => self.b_boxes.inner,
            Major::K => ATOM_ROWS,
        }
    }

    /// The wgmmas of one row of 64, left to right: as equal as their step allows, the wider
    /// first (320 columns of an N-major B in 64-column boxes: 192 and 128).
    pub fn n_pieces(&self) -> Vec<NPiece> {
        let step = self.n_piece_step();
        let steps = self.n / step;
        let count = self.n_piece_count();
        let mut start = 0;
        (0..count)
            .map(|i| {
                let n = (steps / count + u32::from(i < steps % count)) * step;
                let piece = NPiece { start, n };
                start += n;
                piece
            })
            .collect()
    }

    /// f32 accumulator registers per consumer thread: N/2 per wgmma row of 64.
    pub fn accumulators(&self) -> u32 {
        self.m_wgmmas * self.n / 2
    }

    /// Bytes the TMA writes into one stage: A's and B's boxes.
    pub fn stage_bytes(&self, element_bytes: u32) -> u32 {
        self.a_boxes.stage_bytes(element_bytes) + self.b_boxes.stage_bytes(element_bytes)
    }
}

/// The Hopper family's defaults and scope.
pub(crate) struct Wgmma;

impl FamilyRules for Wgmma {
    fn describe(&self) -> &'static str {
        "`mma: wgmma` (Hopper)"
    }

    fn scope_note(&self) -> &'static str {
        "only f16/bf16 inputs with f32 accumulators, out f32 or the input type, \
             fp8 (e4m3, e5m2) inputs with out bf16, f16 or f32, \
             copy tma, clusters 1x1, 2x1 or 1x2, is"
    }

    fn scope(&self, v: &Validator<'_>) -> Vec<(Key, String, bool)> {
        let s = v.spec;
        let out_ok = s.out == DType::F32
            || s.out == s.dtype
            || (s.dtype.is_fp8() && s.out.size_bytes() == 2);
        let two_block_cluster = [Grid2 { rows: 2, cols: 1 }, Grid2 { rows: 1, cols: 2 }];
        vec![
            (Key::Out, s.out.name().to_string(), out_ok),
            (
                Key::Copy,
                s.copy.to_string(),
                matches!(s.copy, Copy::Tma { .. }),
            ),
            (
                Key::Cluster,
                s.cluster.to_string(),
                s.cluster.count() == 1 || two_block_cluster.contains(&s.cluster),
            ),
        ]
    }

    fn dtype(&self) -> DType {
        DType::Bf16
    }

    /// One 128-byte swizzle span of K per k tile.
    fn tile(&self, dtype: DType) -> Tile {
        Tile {
            m: 128,
            n: 256,
            k: 128 / dtype.size_bytes(),
        }
    }

    fn consumers(&self) -> u32 {
        2
    }

    /// A producer warpgroup's worth of rows per consumer. Saturating: validation rejects
    /// out-of-range numbers at their token, so a default derived from one only has to be
    /// computed without overflow.
    fn warps(&self, _tile: Tile, consumers: u32) -> Grid2 {
        Grid2 {
            rows: consumers.saturating_mul(4),
            cols: 1,
        }
    }

    fn stages(&self) -> u32 {
        4
    }

    /// The TMA ring needs a stage to fill while the consumers read another.
    fn min_stages(&self, _spec: &GemmSpec) -> u32 {
        2
    }

    /// The widest XOR swizzle that divides a K row.
    fn swizzle(&self, dtype: DType, tile: Tile) -> Swizzle {
        let row_bytes = tile.k.saturating_mul(dtype.size_bytes());
        if row_bytes.is_multiple_of(128) {
            Swizzle::Xor128
        } else if row_bytes.is_multiple_of(64) {
            Swizzle::Xor64
        } else if row_bytes.is_multiple_of(32) {
            Swizzle::Xor32
        } else {
            Swizzle::None
        }
    }

    fn copy(&self, arch: Arch) -> Copy {
        if arch.has_tma() {
            Copy::Tma { multicast: 1 }
        } else {
            Copy::CP_ASYNC_CG
        }
    }

    /// 16-bit C is staged through shared memory for a TMA store; f32 C is stored from
    /// registers.
    fn epilogue(&self, out: DType) -> Epilogue {
        match out.size_bytes() {
            2 => Epilogue::Tma,
            _ => Epilogue::Direct,
        }
    }

    fn threads_key(&self) -> Key {
        Key::Consumers
    }

    fn math_target(&self) -> Option<(Arch, Mma)> {
        Some((Arch::Sm90a, Mma::MmaSync))
    }

    fn tma_target(&self) -> Option<Arch> {
        Some(Arch::Sm90a)
    }

    /// wgmma takes 16-bit and fp8 inputs only here.
    fn f32_inputs_help(&self) -> Option<&'static str> {
        Some("dtype: bf16 or f16, or mma: fma")
    }

    fn multiplies_fp8(&self) -> bool {
        true
    }
}

impl FamilyCost for Wgmma {
    fn math_unit(&self) -> MathUnit {
        MathUnit::TensorCores
    }

    /// By consumer warpgroups' share of the tile: a 128-row share per consumer reads the
    /// fewest shared-memory bytes per flop, a 64x128 one the most.
    fn main_loop_efficiency(
        &self,
        fitted: &Calibration,
        candidate: &Candidate,
        _blocks_on_sm: f64,
    ) -> f64 {
        let (bm, bn) = (candidate.launch.tile_m, candidate.launch.tile_n);
        let consumers = candidate.consumers;
        if candidate.pingpong {
            fitted.wgmma_pingpong
        } else if consumers >= 2 && bm / consumers >= 128 {
            fitted.wgmma_128_rows_per_consumer
        } else if consumers >= 2 && bn >= 256 {
            fitted.wgmma_two_consumers_256_wide
        } else if consumers >= 2 {
            fitted.wgmma_two_consumers
        } else {
            fitted.wgmma_one_consumer
        }
    }

    fn k_tile_overhead_clk(&self, _blocks_on_sm: f64) -> f64 {
        40.0
    }

    fn ring_latency_share(&self, _fitted: &Calibration) -> f64 {
        1.0
    }
}

impl Validator<'_> {
    /// The Hopper family: f16/bf16 in, f32 accumulate, any layout, TMA into an XOR-swizzled
    /// ring of 2 to 8 stages, one to three consumer warpgroups, one tile per block or
    /// persistent, clusters of two blocks that multicast the operand they share.
    pub(crate) fn wgmma(&mut self) -> Option<(WgmmaGeometry, Budgets)> {
        let s = self.spec;
        if self.spans.given(Key::Warps) {
            self.help(
                Key::Warps,
                "`warps:` does not apply to `mma: wgmma`: its threads are a producer warpgroup and consumer warpgroups",
                format!(
                    "leave `warps:` out: `consumers: {}` sets the threads (warpgroups of 4 warps that split BM)",
                    s.consumers
                ),
            );
        }
        if s.epilogue == Epilogue::Tma && s.out.size_bytes() != 2 {
            self.help(
                Key::Epilogue,
                format!(
                    "`epilogue: tma` stages 16-bit C through `stmatrix`; `out: {}` is stored from registers",
                    s.out.name()
                ),
                "epilogue: direct",
            );
        }
        if s.stages < 2 {
            self.help(
                Key::Stages,
                format!(
                    "the TMA ring needs 2 or more stages so copies overlap the math, not {}",
                    s.stages
                ),
                "stages: 4",
            );
        }
        if s.groups.is_grouped() {
            self.grouped();
        }
        if !self.errors.is_empty() {
            return None;
        }
        let geometry = match WgmmaGeometry::new(s) {
            Ok(g) => g,
            Err(error) => {
                self.wgmma_geometry_error(error);
                return None;
            }
        };
        // The ledger at any stage count: the over-budget help proposes one.
        let smem = |stages| {
            wgmma_smem_ledger(
                &GemmSpec {
                    stages,
                    ..s.clone()
                },
                &geometry,
            )
        };
        let widest_wgmma = geometry.n_pieces().iter().map(|piece| piece.n).max();
        let maxnreg = RegisterBudget::limit_for(geometry.threads);
        if let Some(widest) = widest_wgmma.filter(|n| n / 2 + WGMMA_OPERAND_REGISTERS > maxnreg) {
            let fits = (maxnreg - WGMMA_OPERAND_REGISTERS) * 2 / 16 * 16;
            let error = self.error(
                Key::Tile,
                format!(
                    "one m64n{widest} wgmma needs {} registers ({} accumulators and its operands), \
                     over the {maxnreg} that ptxas compiles a block of {} threads under",
                    widest / 2 + WGMMA_OPERAND_REGISTERS,
                    widest / 2,
                    geometry.threads
                ),
            );
            error.notes.push(
                "ptxas places every instruction under the kernel's `.maxnreg` (the even split of \
                 the register file), whatever `setmaxnreg` gives the consumers later"
                    .to_string(),
            );
            error.help = Some(format!(
                "a BN of at most {fits} for {} consumers, or fewer consumers",
                geometry.consumers
            ));
            return None;
        }
        let registers = wgmma_register_budget(&geometry);
        let label = format!(
            "{} rows x {} columns per consumer = {} f32 accumulators per thread",
            geometry.rows_per_consumer,
            geometry.n,
            geometry.accumulators()
        );
        let smaller_tiles = || {
            (geometry.consumers == 1 && s.tile.m.is_multiple_of(2 * WGMMA_M))
                .then(|| "consumers: 2 splits the rows over two warpgroups".to_string())
        };
        let threads = geometry.threads;
        let mut budgets = self.finish(threads, smem, registers, label, smaller_tiles)?;
        if geometry.register_split.is_some() {
            // Under `setmaxnreg` every thread is allocated the kernel's `.maxnreg` (the even
            // split), whatever the consumers' estimate.
            budgets.occupancy = Occupancy::compute(
                s.arch,
                threads,
                RegisterBudget::limit_for(threads),
                budgets.smem.total(),
            );
        }
        Some((geometry, budgets))
    }

    /// `groups:` runs on a persistent walk (cooperative or ping-pong consumers, whole tiles or
    /// a stream-K tail): each tile's expert is found in tables the block builds from the
    /// device's counts. What the grouped kernel does not yet
    /// do is refused here, each with the spec that runs.
    fn grouped(&mut self) {
        let s = self.spec;
        let name = s.groups.name();
        // A stream-K tail splits the walk's last tiles whatever their experts: every block
        // counts the same tiles from the table, so every block splits them alike.
        match s.schedule {
            Schedule::Persistent { .. } => {}
            Schedule::Tile => self.help(
                Key::Schedule,
                format!(
                    "`groups: {name}` needs a persistent walk: its blocks take the tiles of every expert, whose rows only the device knows"
                ),
                "schedule: persistent",
            ),
        }
        if s.cluster.count() != 1 {
            self.help(
                Key::Cluster,
                format!(
                    "`groups: {name}`: a cluster's tiles may belong to two experts, whose operands differ; clusters are not grouped yet"
                ),
                "cluster: 1x1",
            );
        }
        if !s.layout.a_row_major() {
            self.help(
                Key::Layout,
                format!(
                    "`groups: {name}` takes A as `[rows, K]`, each expert's rows consecutive: A row-major"
                ),
                "layout: rc (B as `[G, N, K]`, nn.Linear's weights) or layout: rr (`[G, K, N]`)",
            );
        }
        if s.quant == Quant::Tensor {
            self.help(
                Key::Quant,
                format!(
                    "`groups: {name}` scales fp8 experts by blocks: one scale for every expert's B is not grouped"
                ),
                "quant: block (1x128 scales of A's rows, 128x128 of each expert's B)",
            );
        }
        // The fused epilogue runs per tile, whatever its expert: a column bias is the expert's
        // (strided by the expert's index), a row's factor the routed row's. A row bias would be
        // one per routed row, which no layer has.
        if let Some((BiasAlong::Row, _)) = s.bias.vector() {
            self.help(
                Key::Bias,
                format!(
                    "`groups: {name}` adds a bias per expert along N; a bias per routed row is not grouped"
                ),
                "bias: col (one vector per expert, strided by the expert's index)",
            );
        }
    }

    fn wgmma_geometry_error(&mut self, error: WgmmaGeometryError) {
        let s = self.spec;
        let element = s.dtype.size_bytes();
        match error {
            WgmmaGeometryError::Dtype => self.help(
                Key::Dtype,
                format!(
                    "`mma: wgmma` multiplies f16, bf16 or fp8 from shared memory, not {}",
                    s.dtype.name()
                ),
                "dtype: bf16",
            ),
            WgmmaGeometryError::Fp8Layout => {
                let error = self.error(
                    Key::Layout,
                    format!(
                        "fp8 wgmma reads A and B K-major: `layout: {}` would need a transposed copy",
                        s.layout.name()
                    ),
                );
                error.notes.push(
                    "wgmma's transpose immediates exist for f16/bf16 only, so an fp8 A must be row-major and an fp8 B column-major (K contiguous in both)"
                        .to_string(),
                );
                error.help = Some("layout: rc".to_string());
            }
            WgmmaGeometryError::Swizzle => {
                let widest = [Swizzle::Xor128, Swizzle::Xor64, Swizzle::Xor32]
                    .into_iter()
                    .find(|sw| {
                        (s.tile.k * element)
                            .is_multiple_of(sw.xor_width_bytes().unwrap_or(u32::MAX))
                    })
                    .unwrap_or(Swizzle::Xor32);
                let error = self.error(
                    Key::Swizzle,
                    format!(
                        "`swizzle: {}` is not a layout TMA and wgmma share",
                        s.swizzle
                    ),
                );
                error.notes.push(
                    "the Hopper family reads operands through 32-, 64- or 128-byte XOR swizzles"
                        .to_string(),
                );
                error.help = Some(format!("swizzle: {widest}"));
            }
            WgmmaGeometryError::Consumers => self.help(
                Key::Consumers,
                format!(
                    "consumers must be 1, 2 or 3 warpgroups for `mma: wgmma`, not {}",
                    s.consumers
                ),
                "consumers: 2",
            ),
            WgmmaGeometryError::PingPongSchedule => {
                let error = self.error(
                    Key::Schedule,
                    format!(
                        "`consumers: pingpong` alternates the tiles of a persistent walk of whole tiles, not `schedule: {}`",
                        s.schedule
                    ),
                );
                error.notes.push(
                    "consumer c takes tiles c, c + 2, .. of its block's walk; a stream-K tail's pieces are not implemented for it".to_string(),
                );
                error.help = Some("schedule: persistent".to_string());
            }
            WgmmaGeometryError::TileM => {
                let error = self.error(
                    Key::Tile,
                    format!(
                        "BM = {} is not a multiple of 64 rows per consumer warpgroup ({}) up to {TMA_MAX_BOX_ROWS}",
                        s.tile.m,
                        if s.pingpong {
                            "ping-pong consumers each compute the whole tile".to_string()
                        } else {
                            format!("{} consumer(s)", s.consumers)
                        }
                    ),
                );
                error.notes.push(
                    "each consumer warpgroup computes its rows 64 at a time (wgmma m64), and A's tensor-map box holds at most 256 rows"
                        .to_string(),
                );
                error.help = Some(format!("tile: {}", legal_tile(s)));
            }
            WgmmaGeometryError::TileN { step } => {
                let error = self.error(
                    Key::Tile,
                    format!(
                        "BN = {} is not a multiple of {step} up to {WGMMA_MAX_TILE_N}",
                        s.tile.n
                    ),
                );
                if s.tile.n > TMA_MAX_BOX_ROWS && Major::of_layout(s.layout).1 == Major::K {
                    error.notes.push(format!(
                        "a K-major B over {TMA_MAX_BOX_ROWS} rows comes as two boxes of BN / 2 rows{}, each whole {ATOM_ROWS}-row swizzle atoms",
                        if s.cluster.rows > 1 {
                            ", and each block of a 2x1 cluster loads half of every box"
                        } else {
                            ""
                        }
                    ));
                }
                let width = format!(
                    "one wgmma is at most {WGMMA_MAX_N} wide: a row of 64 over {WGMMA_MAX_N} columns takes two"
                );
                error.notes.push(if element == 2 {
                    format!(
                        "an N-major B lands in boxes of one swizzle span of N (the spec's, or the widest narrower one that divides BN, down to {step} {} columns), and C's staging boxes are at least as wide; {width}",
                        s.dtype.name()
                    )
                } else if element == 1 {
                    format!(
                        "an fp8 B is K-major: its rows may be any multiple of {step}, the narrowest of C's staging boxes; {width}"
                    )
                } else {
                    format!(
                        "B lands in boxes of one {}-byte swizzle span ({step} {} columns); {width}",
                        step * element,
                        s.dtype.name()
                    )
                });
                error.help = Some(format!("tile: {}", legal_tile(s)));
            }
            WgmmaGeometryError::Cluster => {
                let blocks = s.cluster.count();
                let (key, message, help) = match s.copy {
                    Copy::Tma { multicast } if multicast != blocks => (
                        Key::Copy,
                        format!(
                            "a cluster of {blocks} block(s) shares its operand tiles through `copy: tma(multicast = {blocks})`, not `copy: {}`",
                            s.copy
                        ),
                        if blocks == 1 {
                            "copy: tma, or cluster: 2x1".to_string()
                        } else {
                            format!("copy: tma(multicast = {blocks})")
                        },
                    ),
                    _ => (
                        Key::Cluster,
                        format!("`cluster: {}` is not a cluster the Hopper family multicasts over", s.cluster),
                        "cluster: 2x1 (two tiles down M share B) or 1x2 (two tiles along N share A)".to_string(),
                    ),
                };
                self.help(key, message, help);
            }
            WgmmaGeometryError::PromoteInterval => {
                let promote = s.promote.unwrap_or(s.tile.k);
                let error = self.error(
                    Key::Promote,
                    format!(
                        "`promote: {promote}` is not a multiple of BK = {}",
                        s.tile.k
                    ),
                );
                error.notes.push(
                    "the partial sums are promoted between k tiles, when a tile's wgmmas have retired"
                        .to_string(),
                );
                error.help = Some(format!(
                    "promote: {}",
                    promote.next_multiple_of(s.tile.k.max(1))
                ));
            }
            WgmmaGeometryError::BlockScaleK => {
                let error = self.error(
                    Key::Tile,
                    format!(
                        "`quant: block` takes k tiles of one 128-k block of scales, not BK = {}",
                        s.tile.k
                    ),
                );
                error.notes.push(
                    "each k tile's partial sums are scaled and promoted at its end".to_string(),
                );
                error.help = Some(format!("tile: {}x{}x128", s.tile.m, s.tile.n));
            }
            WgmmaGeometryError::BlockScaleColumns => {
                let error = self.error(
                    Key::Tile,
                    format!(
                        "BN = {} neither holds whole 128-column blocks of B's scales nor lies within one",
                        s.tile.n
                    ),
                );
                error
                    .notes
                    .push("`quant: block` scales B per block of 128 columns by 128 k".to_string());
                let n = if s.tile.n > Quant::BLOCK {
                    s.tile.n / Quant::BLOCK * Quant::BLOCK
                } else {
                    [64, 32, 16, 8]
                        .into_iter()
                        .find(|&n| n < s.tile.n)
                        .unwrap_or(8)
                };
                error.help = Some(format!("tile: {}x{n}x{}", s.tile.m, s.tile.k));
            }
            WgmmaGeometryError::TileKRows => {
                let error = self.error(
                    Key::Tile,
                    format!("BK = {} is over {TMA_MAX_BOX_ROWS}", s.tile.k),
                );
                error.notes.push(format!(
                    "with `layout: {}` an M- or N-contiguous operand lands in TMA boxes of BK rows, and a box holds at most {TMA_MAX_BOX_ROWS}",
                    s.layout.name()
                ));
                error.help = Some(format!("tile: {}", legal_tile(s)));
            }
            WgmmaGeometryError::TileK { step } => {
                let error = self.error(
                    Key::Tile,
                    format!("BK = {} is not a multiple of {step}", s.tile.k),
                );
                error.notes.push(format!(
                    "A lands in boxes of one `swizzle: {}` span ({step} {} values of K), read {} k at a time",
                    s.swizzle,
                    s.dtype.name(),
                    wgmma_k(s.dtype)
                ));
                error.help = Some(format!("tile: {}", legal_tile(s)));
            }
        }
    }
}

/// A tile near the spec's that the Hopper geometry takes, each side rounded down to its
/// step (up to one step, down to its limit): one help for whichever side the geometry
/// rejected first, so applying it fixes the others too; rounding down never grows the
/// registers or shared memory the spec already needed.
/// The narrowest tile a B of C's staging boxes takes: 16 columns.
const MIN_TILE_N: u32 = 16;

/// What BN is a multiple of (before the rule for tiles over 256 columns). A 16-bit B's BN is
/// a multiple of the narrowest span (16 columns): an N-major B lands as boxes of one span of N
/// each, the spec's or, where that does not divide BN, the widest narrower one that does (96
/// columns: 64 bytes); a K-major B's rows may be any such multiple (C's staging boxes are at
/// least [`MIN_TILE_N`] columns). An fp8 B is K-major: its rows too (a decode problem's 16
/// columns need not take a 128-wide tile). A tf32 B keeps the spec's span.
fn tile_n_step(element: u32, swizzle_bytes: u32) -> u32 {
    let swizzle_elements = swizzle_bytes / element;
    match element {
        2 => (MIN_SWIZZLE_BYTES / element).min(swizzle_elements),
        1 => MIN_TILE_N,
        _ => swizzle_elements,
    }
    .max(8)
}

fn legal_tile(s: &GemmSpec) -> Tile {
    let element = s.dtype.size_bytes();
    let swizzle_bytes = s.swizzle.xor_width_bytes().unwrap_or(128);
    let swizzle_elements = swizzle_bytes / element;
    let round = |side: u32, step: u32, max: u32| (side / step).clamp(1, (max / step).max(1)) * step;
    let per_consumer = if s.pingpong {
        WGMMA_M
    } else {
        WGMMA_M * s.consumers.clamp(1, 3)
    };
    let (a_major, b_major) = Major::of_layout(s.layout);
    let k_max = if a_major == Major::MN || b_major == Major::MN {
        TMA_MAX_BOX_ROWS
    } else {
        Tile::MAX_SIDE
    };
    Tile {
        m: round(s.tile.m, per_consumer, TMA_MAX_BOX_ROWS),
        n: round(
            s.tile.n,
            tile_n_step(element, swizzle_bytes),
            WGMMA_MAX_TILE_N,
        ),
        k: round(s.tile.k, swizzle_elements.max(wgmma_k(s.dtype)), k_max),
    }
}

/// Shared memory of the Hopper family: per stage A's and B's boxes exactly as TMA writes them
/// (a swizzle costs no bytes), then one full and one empty mbarrier per stage, and room to
/// align the ring.
pub fn wgmma_smem_ledger(s: &GemmSpec, g: &WgmmaGeometry) -> SmemLedger {
    let element = s.dtype.size_bytes();
    let line =
        |operand: char, rows: u32, cols: u32, boxes: &OperandBoxes, swizzle: u32| LedgerLine {
            what: format!(
                "{operand} tile {rows}x{cols} {}, {} box(es) of {}x{}, {swizzle}B swizzle",
                s.dtype.name(),
                boxes.boxes * boxes.line_parts,
                boxes.outer,
                boxes.inner,
            ),
            bytes: boxes.stage_bytes(element),
        };
    SmemLedger {
        per_stage: vec![
            line('A', s.tile.m, s.tile.k, &g.a_boxes, g.a_swizzle_bytes),
            line('B', s.tile.k, s.tile.n, &g.b_boxes, g.b_swizzle_bytes),
        ],
        stages: s.stages,
        fixed: vec![
            LedgerLine {
                what: format!(
                    "mbarriers: full and empty per stage, {} x 2 x 8 B",
                    s.stages
                ),
                bytes: 2 * s.stages * MBARRIER_BYTES,
            },
            LedgerLine {
                what: format!("alignment of the ring to {RING_ALIGN_BYTES} B"),
                bytes: RING_ALIGN_BYTES,
            },
        ]
        .into_iter()
        .chain(g.block_scales.then(|| LedgerLine {
            what: format!(
                "block scales: {} stages x ({} rows + {} column block(s)) f32, 16 B aligned",
                s.stages,
                s.tile.m,
                g.block_scale_col_blocks()
            ),
            bytes: g.block_scale_bytes(s.stages),
        }))
        .chain(g.store_staging.map(|staging| {
            let ring_bytes = s.stages * g.stage_bytes(element);
            let align = ring_bytes.next_multiple_of(STAGING_ALIGN_BYTES) - ring_bytes;
            LedgerLine {
                what: format!(
                    "epilogue: {} consumer(s) x {STORE_BUFFERS} buffers of C, {STORE_BOX_ROWS}x{} {}, {}B swizzle{}",
                    g.consumers,
                    staging.box_cols,
                    s.out.name(),
                    staging.swizzle_bytes,
                    if align > 0 { format!(", {align} B to align them") } else { String::new() }
                ),
                bytes: staging.bytes(g.consumers) + align,
            }
        }))
        .chain(s.groups.is_grouped().then(|| LedgerLine {
            what: format!(
                "grouped walk: per expert (up to {}) its rows' end and row tiles through it, scan words",
                crate::grouped::MAX_GROUPS
            ),
            bytes: crate::grouped::TABLE_BYTES,
        }))
        .chain(
            g.store_staging
                .filter(|staging| staging.c_in_loads)
                .map(|staging| LedgerLine {
                    what: format!(
                        "C-in loads: {} consumer(s) x {STORE_BUFFERS} mbarriers x {MBARRIER_BYTES} B",
                        g.consumers
                    ),
                    bytes: staging.c_in_barrier_bytes(g.consumers),
                }),
        )
        .collect(),
        overlay: None,
        limit: s.arch.max_smem_per_block(),
        arch: s.arch,
    }
}

/// Registers of a consumer thread: the accumulators of its rows, the shared-memory
/// descriptors and ring counters, and the epilogue's addressing. The producer runs on
/// [`PRODUCER_REGISTERS`] where the split applies.
pub fn wgmma_register_budget(g: &WgmmaGeometry) -> RegisterBudget {
    RegisterBudget {
        lines: vec![
            RegisterLine {
                what: if g.n_piece_count() == 1 {
                    format!(
                        "accumulators {} x m64n{} (f32, {} per wgmma row)",
                        g.m_wgmmas,
                        g.n,
                        g.n / 2
                    )
                } else {
                    format!(
                        "accumulators {} rows of 64 x {} columns, {} wgmmas a row (f32, {} per row)",
                        g.m_wgmmas,
                        g.n,
                        g.n_piece_count(),
                        g.n / 2
                    )
                },
                registers: g.accumulators(),
            },
            RegisterLine {
                what: "descriptors, ring stage and phase, tile walk".to_string(),
                registers: 24,
            },
            match g.store_staging {
                Some(staging) => RegisterLine {
                    what: "epilogue: stmatrix offsets, buffers, packing".to_string(),
                    registers: 8 + staging.box_cols / 16,
                },
                None => RegisterLine {
                    what: "epilogue: row pointer, bounds, packing".to_string(),
                    registers: 8,
                },
            },
        ]
        .into_iter()
        .chain(g.stream_k.then(|| RegisterLine {
            what: "stream-K: tail position and end, k range, partial-sum addresses".to_string(),
            registers: 10,
        }))
        .chain(g.promote_k_tiles.map(|_| RegisterLine {
            what: "promoted sums: the accumulators again, in f32".to_string(),
            registers: g.accumulators(),
        }))
        .collect(),
        limit: g.consumer_registers,
    }
}

#[cfg(test)]
mod tests {
    use super::SharedOperand;
    use crate::{check_str, Epilogue, Family, Groups, Schedule, SpecError, Swizzle, Tail};

    fn errors(text: &str) -> Vec<SpecError> {
        check_str(text).expect_err("spec must be invalid").0
    }

    /// `text` is refused with an error whose message holds `message` and whose help starts
    /// with `help`.
    fn assert_refused_with_help(text: &str, message: &str, help: &str) {
        let all = errors(text);
        let e = all
            .iter()
            .find(|e| e.message.contains(message))
            .unwrap_or_else(|| panic!("{text}: {all:?}"));
        assert!(
            e.help.as_deref().is_some_and(|h| h.starts_with(help)),
            "{text}: {e:?}"
        );
    }

    const HOPPER: &str = "arch: sm_90a, mma: wgmma";

    #[test]
    fn an_n_major_b_whose_columns_the_swizzle_span_does_not_divide_takes_a_narrower_one() {
        let swizzles = |text: &str| {
            let v = check_str(&format!("{HOPPER}, {text}")).unwrap_or_else(|e| panic!("{e:?}"));
            let Family::Wgmma(g) = v.family else {
                unreachable!()
            };
            (g.a_swizzle_bytes, g.b_swizzle_bytes, g.a_boxes, g.b_boxes)
        };
        // 96 columns of bf16: two 64-byte spans' worth is 64 columns, so B takes 64 bytes, in
        // three boxes of 32 columns; A keeps 128-byte rows of K.
        let (a, b, a_boxes, b_boxes) =
            swizzles("tile: 192x96x64, swizzle: 128B, consumers: pingpong, schedule: persistent");
        assert_eq!((a, b), (128, 64));
        assert_eq!((a_boxes.inner, a_boxes.outer, a_boxes.boxes), (64, 192, 1));
        assert_eq!((b_boxes.inner, b_boxes.outer, b_boxes.boxes), (32, 64, 3));
        // 160 columns: 64 bytes; 208 columns: 32 bytes.
        assert_eq!(swizzles("tile: 256x160x64, swizzle: 128B").1, 64);
        assert_eq!(swizzles("tile: 128x208x64, swizzle: 128B").1, 32);
        // Never wider than the spec's, and a K-major B keeps it, whatever its BN.
        assert_eq!(swizzles("tile: 128x128x32, swizzle: 64B").0, 64);
        assert_eq!(swizzles("tile: 128x128x32, swizzle: 64B").1, 64);
        assert_eq!(swizzles("tile: 128x192x64, layout: rc").1, 128);
        let (_, b, _, b_boxes) = swizzles("tile: 192x96x64, consumers: 1, layout: cc");
        assert_eq!((b, b_boxes.inner, b_boxes.outer), (128, 64, 96));
    }

    #[test]
    fn default_hopper_spec() {
        let v = check_str(HOPPER).unwrap();
        let Family::Wgmma(g) = v.family else {
            panic!("not the wgmma family")
        };
        assert_eq!(v.threads_per_block(), 384);
        assert_eq!((g.consumers, g.rows_per_consumer, g.m_wgmmas), (2, 64, 1));
        assert_eq!(
            (g.n, g.k_steps, g.a_swizzle_bytes, g.b_swizzle_bytes),
            (256, 4, 128, 128)
        );
        assert_eq!(v.spec.swizzle, Swizzle::Xor128);
        assert_eq!(
            (g.a_boxes.inner, g.a_boxes.outer, g.a_boxes.boxes),
            (64, 128, 1)
        );
        assert_eq!(
            (g.b_boxes.inner, g.b_boxes.outer, g.b_boxes.boxes),
            (64, 64, 4)
        );
        assert_eq!(g.accumulators(), 128);
        assert_eq!(g.register_split, Some((40, 232)));
        // 4 stages of 16 KB of A and 32 KB of B, 8 mbarriers, 1 KB to align the ring, and
        // two 64x64 bf16 buffers of C per consumer for the TMA stores.
        let staging = g.store_staging.expect("bf16 C is stored by TMA");
        assert_eq!((staging.box_cols, staging.swizzle_bytes), (64, 128));
        assert_eq!(staging.boxes_per_tile, 4);
        assert_eq!(v.smem.total(), 4 * 49152 + 64 + 1024 + 2 * 2 * 8192);
        assert_eq!(v.occupancy.blocks_per_sm, 1);
    }

    #[test]
    fn epilogues_by_family_and_output() {
        let direct = |text: &str| {
            let v = check_str(text).unwrap();
            assert_eq!(v.spec.epilogue, crate::Epilogue::Direct, "{text}");
            let Family::Wgmma(g) = v.family else {
                return;
            };
            assert_eq!(g.store_staging, None, "{text}");
        };
        direct(&format!("{HOPPER}, dtype: f16, out: f32"));
        direct(&format!("{HOPPER}, epilogue: direct"));
        direct("arch: sm_80, mma: mma_sync");
        // C's box follows the widest swizzle whose span divides BN.
        let v = check_str(&format!("{HOPPER}, tile: 128x96x32, swizzle: 64B")).unwrap();
        let Family::Wgmma(g) = v.family else {
            unreachable!()
        };
        let staging = g.store_staging.unwrap();
        assert_eq!((staging.box_cols, staging.swizzle_bytes), (32, 64));
        // The ring's end rounds up to the buffers' 1024-byte period, in the ledger too.
        let v = check_str(&format!(
            "{HOPPER}, tile: 64x48x16, consumers: 1, swizzle: 32B, stages: 3"
        ))
        .unwrap();
        let ring = 3 * (64 * 16 + 16 * 48) * 2;
        assert_eq!(ring % 1024, 512);
        assert_eq!(v.smem.total(), ring + 512 + 2 * 64 * 32 + 48 + 1024);

        for (text, message, help) in [
            (
                format!("{HOPPER}, dtype: f16, out: f32, epilogue: tma"),
                "`epilogue: tma` stages 16-bit C",
                "epilogue: direct",
            ),
            (
                "arch: sm_80, mma: mma_sync, epilogue: tma".to_string(),
                "epilogue: tma",
                "",
            ),
        ] {
            let errs = errors(&text);
            let e = errs
                .iter()
                .find(|e| e.message.contains(message))
                .unwrap_or_else(|| panic!("{text}: {errs:?}"));
            if !help.is_empty() {
                assert_eq!(e.help.as_deref(), Some(help), "{text}");
            }
        }
    }

    #[test]
    fn fp8_reads_k_major_operands_32_k_per_wgmma() {
        let v = check_str(&format!("{HOPPER}, dtype: e4m3, quant: tensor")).unwrap();
        // The defaults an fp8 spec gets: K-major operands, bf16 out, one 128-byte span of K.
        assert_eq!(
            (v.spec.layout, v.spec.out, v.spec.tile.k),
            (crate::Layout::RowCol, crate::DType::Bf16, 128)
        );
        assert_eq!(v.spec.quant, crate::Quant::Tensor);
        assert!(v.spec.to_spec_text().ends_with("quant: tensor"));
        assert_eq!(check_str(&v.spec.to_spec_text()).unwrap().spec, v.spec);
        let Family::Wgmma(g) = v.family else {
            unreachable!()
        };
        assert_eq!((g.k_per_wgmma, g.k_steps), (32, 4));
        // The same bytes per stage as bf16 at BK = 64: 16 KB of A, 32 KB of B.
        assert_eq!(g.stage_bytes(1), 128 * 128 + 256 * 128);
        assert_eq!((g.a_major, g.b_major), (super::Major::K, super::Major::K));
        for out in ["f16", "f32"] {
            let text = format!("{HOPPER}, dtype: e5m2, out: {out}");
            assert!(check_str(&text).is_ok(), "{text}");
        }
        // The mixed pairs: B's type is written back only where it differs from A's.
        for (a, b) in [("e4m3", "e5m2"), ("e5m2", "e4m3")] {
            let v = check_str(&format!("{HOPPER}, dtype: {a}, b_dtype: {b}")).unwrap();
            assert_eq!((v.spec.dtype.name(), v.spec.b_dtype.name()), (a, b));
            let text = v.spec.to_spec_text();
            assert!(
                text.contains(&format!("dtype: {a}, b_dtype: {b}, acc")),
                "{text}"
            );
            assert_eq!(check_str(&text).unwrap().spec, v.spec);
        }
        let same = check_str(&format!("{HOPPER}, dtype: e4m3, b_dtype: e4m3")).unwrap();
        assert!(!same.spec.to_spec_text().contains("b_dtype"));
        // A K-major B's rows need not fill a swizzle span: any 16 columns (a decode problem's
        // N), not 8.
        for tile in ["128x16x128", "64x48x128", "64x64x256"] {
            let text = format!("{HOPPER}, dtype: e4m3, tile: {tile}, consumers: 1");
            assert!(check_str(&text).is_ok(), "{text}");
        }
        let e = &errors(&format!("{HOPPER}, dtype: e4m3, tile: 128x24x128"))[0];
        assert!(
            e.message.contains("BN = 24 is not a multiple of 16"),
            "{e:?}"
        );
        assert_eq!(e.help.as_deref(), Some("tile: 128x16x128"), "{e:?}");
        let e = &errors("arch: sm_90a, mma: mma_sync, dtype: e4m3")[0];
        assert!(e.message.contains("fp8 wgmma only"), "{e:?}");
        assert_eq!(
            e.help.as_deref(),
            Some("mma: wgmma, arch: sm_90a (or dtype: bf16)")
        );
    }

    #[test]
    fn block_scales_promote_every_128_k_into_a_second_set_of_sums() {
        let v = check_str(&format!(
            "{HOPPER}, dtype: e4m3, tile: 128x128x128, quant: block"
        ))
        .unwrap();
        assert_eq!(v.spec.promote, Some(128));
        assert!(v
            .spec
            .to_spec_text()
            .ends_with("quant: block, promote: 128"));
        assert_eq!(check_str(&v.spec.to_spec_text()).unwrap().spec, v.spec);
        let Family::Wgmma(g) = v.family else {
            unreachable!()
        };
        assert_eq!((g.promote_k_tiles, g.accumulators()), (Some(1), 64));
        // The promoted sums double the accumulators' registers.
        let plain = check_str(&format!("{HOPPER}, dtype: e4m3, tile: 128x128x128")).unwrap();
        assert_eq!(v.registers.total(), plain.registers.total() + 64);
        // Per stage, the tile's 128 row scales and one column block's, padded to 16 B.
        assert_eq!(g.block_scale_bytes(4), 4 * (512 + 16));
        assert_eq!(
            v.smem.total(),
            plain.smem.total() + u64::from(g.block_scale_bytes(4))
        );
        // Promotion alone, every two k tiles of 64.
        let v = check_str(&format!(
            "{HOPPER}, dtype: e5m2, tile: 128x128x64, swizzle: 64B, quant: tensor, promote: 128"
        ))
        .unwrap();
        let Family::Wgmma(g) = v.family else {
            unreachable!()
        };
        assert_eq!(g.promote_k_tiles, Some(2));
    }

    #[test]
    fn one_consumer_keeps_the_even_split() {
        let v = check_str(&format!("{HOPPER}, tile: 128x128x64, consumers: 1")).unwrap();
        let Family::Wgmma(g) = v.family else {
            unreachable!()
        };
        assert_eq!((g.m_wgmmas, g.n, g.threads), (2, 128, 256));
        assert_eq!(g.register_split, None);
        assert_eq!(g.consumer_registers, 255);
        let v = check_str(&format!(
            "{HOPPER}, tile: 128x128x32, swizzle: 64B, stages: 6"
        ))
        .unwrap();
        let Family::Wgmma(g) = v.family else {
            unreachable!()
        };
        assert_eq!((g.a_boxes.inner, g.b_boxes.boxes, g.k_steps), (32, 4, 2));
    }

    #[test]
    fn rows_over_256_columns_take_two_wgmmas() {
        let geometry = |text: &str| {
            let v = check_str(&format!("{HOPPER}, stages: 3, {text}")).unwrap();
            let Family::Wgmma(g) = v.family else {
                unreachable!()
            };
            g
        };
        let pieces = |g: &super::WgmmaGeometry| -> Vec<(u32, u32)> {
            g.n_pieces().iter().map(|p| (p.start, p.n)).collect()
        };
        // N-major B: pieces of whole 64-column boxes, the wider first.
        let g = geometry("tile: 128x320x64");
        assert_eq!(pieces(&g), [(0, 192), (192, 128)]);
        assert_eq!(
            (g.accumulators(), g.b_boxes.boxes, g.b_boxes.line_parts),
            (160, 5, 1)
        );
        // K-major B: halves, and its 320 rows in two boxes of 160.
        let g = geometry("tile: 128x320x64, layout: rc");
        assert_eq!(pieces(&g), [(0, 160), (160, 160)]);
        assert_eq!((g.b_boxes.outer, g.b_boxes.line_parts), (160, 2));
        assert_eq!(g.b_boxes.stage_bytes(2), 320 * 128);
        // Up to 256 columns: one wgmma, one box of lines.
        let g = geometry("tile: 128x256x64, layout: rc");
        assert_eq!(pieces(&g), [(0, 256)]);
        assert_eq!(g.b_boxes.line_parts, 1);
        // A K-major B's halves in a 2x1 cluster are sliced again: 272 rows would give slices
        // of 68, off the 8-row atoms.
        let cluster = "copy: tma(multicast = 2), cluster: 2x1, schedule: persistent";
        let refused = errors(&format!(
            "{HOPPER}, tile: 128x272x64, layout: rc, stages: 3, {cluster}"
        ));
        assert!(refused[0].message.contains("multiple of 32"), "{refused:?}");
        assert!(
            refused[0].notes.iter().any(|n| n.contains("2x1 cluster")),
            "{refused:?}"
        );
        let g = geometry(&format!("tile: 128x288x64, layout: rc, {cluster}"));
        assert_eq!((g.b_boxes.outer, g.b_boxes.line_parts), (144, 2));
        assert!(check_str(&format!(
            "{HOPPER}, tile: 128x272x64, layout: rc, stages: 3"
        ))
        .is_ok());
        // Past 512 columns, refused with the limit; 512 itself is over the registers.
        let errors = errors(&format!("{HOPPER}, tile: 64x576x64, consumers: 1"));
        assert!(errors[0].message.contains("up to 512"), "{errors:?}");
        assert!(check_str(&format!(
            "{HOPPER}, tile: 64x512x64, consumers: 1, stages: 2"
        ))
        .is_err());
    }

    #[test]
    fn two_block_clusters_share_an_operand() {
        for (cluster, shared) in [("2x1", SharedOperand::B), ("1x2", SharedOperand::A)] {
            let text = format!("{HOPPER}, cluster: {cluster}, copy: tma(multicast = 2)");
            let v = check_str(&text).unwrap();
            let Family::Wgmma(g) = v.family else {
                unreachable!()
            };
            let sharing = g.cluster.unwrap();
            assert_eq!((sharing.blocks, sharing.shared), (2, shared), "{text}");
        }
    }

    #[test]
    fn pingpong_consumers_each_take_the_whole_tile() {
        let text = format!(
            "{HOPPER}, tile: 128x128x64, consumers: pingpong, stages: 6, schedule: persistent"
        );
        let valid = check_str(&text).unwrap();
        assert!(valid.spec.pingpong);
        assert!(valid.spec.to_spec_text().contains("consumers: pingpong"));
        assert_eq!(
            check_str(&valid.spec.to_spec_text()).unwrap().spec,
            valid.spec
        );
        let Family::Wgmma(g) = valid.family else {
            unreachable!()
        };
        assert_eq!(
            (
                g.consumers,
                g.pingpong,
                g.threads,
                g.rows_per_consumer,
                g.m_wgmmas
            ),
            (2, true, 384, 128, 2)
        );
        assert_eq!(g.accumulators(), 128);
        // Each consumer stages its own tile's boxes of C: two consumers' buffers.
        let staging = g.store_staging.unwrap();
        assert_eq!(staging.boxes_per_tile, 2 * 128 / staging.box_cols);
        let cooperative = check_str(&text.replace("pingpong", "2")).unwrap();
        assert!(!cooperative.spec.pingpong);
        assert_eq!(valid.smem.total(), cooperative.smem.total());
        // Clusters share operands as for the cooperative kernel.
        assert!(check_str(&format!("{text}, cluster: 2x1, copy: tma(multicast = 2)")).is_ok());
    }

    #[test]
    fn stream_k_tails_size_a_workspace_per_block() {
        let geometry = |text: &str| {
            let Family::Wgmma(g) = check_str(text).unwrap().family else {
                unreachable!()
            };
            g
        };
        let whole = geometry(&format!("{HOPPER}, schedule: persistent"));
        assert_eq!(whole.workspace_bytes_per_block(), 0);
        // 128x256 over two consumers: 128 f32 accumulators per thread, 64 KB per consumer.
        let split = geometry(&format!("{HOPPER}, schedule: persistent(tail = stream_k)"));
        assert!(split.stream_k);
        assert_eq!(split.partial_slot_bytes(), 128 * 128 * 4);
        assert_eq!(
            split.workspace_bytes_per_block(),
            2 * 128 * 128 * 4 + super::STREAM_K_FLAG_BYTES
        );
        let budget = |g| crate::family::wgmma::wgmma_register_budget(&g).total();
        assert!(budget(split) > budget(whole));
    }

    #[test]
    fn grouped_specs_default_to_a_persistent_walk_with_direct_stores() {
        let valid = check_str(&format!("{HOPPER}, layout: rc, groups: contiguous")).unwrap();
        let s = &valid.spec;
        assert_eq!(s.groups, Groups::Contiguous);
        assert_eq!(s.epilogue, Epilogue::Direct);
        assert!(matches!(
            s.schedule,
            Schedule::Persistent {
                tail: Tail::Whole,
                ..
            }
        ));
        let text = s.to_spec_text();
        assert!(text.ends_with(", groups: contiguous"), "{text}");
        assert_eq!(check_str(&text).unwrap().spec, *s);
        // The tables: two words per expert and the scans' words, in the ledger.
        let plain = check_str(&format!(
            "{HOPPER}, layout: rc, schedule: persistent, epilogue: direct"
        ))
        .unwrap();
        assert_eq!(
            valid.smem.total() - plain.smem.total(),
            u64::from(crate::grouped::TABLE_BYTES)
        );
        let masked = check_str(&format!("{HOPPER}, groups: masked")).unwrap();
        assert!(masked.spec.to_spec_text().ends_with(", groups: masked"));
        // A stream-K tail splits the walk's last tiles, whichever experts they belong to.
        let split = check_str(&format!(
            "{HOPPER}, schedule: persistent(tail = stream_k), groups: masked"
        ))
        .unwrap();
        assert!(split.spec.to_spec_text().contains("tail = stream_k"));
        let Family::Wgmma(g) = split.family else {
            unreachable!()
        };
        assert!(g.workspace_bytes_per_block() > 0);
    }

    #[test]
    fn what_is_not_grouped_yet_is_refused_with_the_spec_that_runs() {
        for (spec, message, help) in [
            (
                "schedule: tile",
                "needs a persistent walk",
                "schedule: persistent",
            ),
            (
                "copy: tma(multicast = 2), cluster: 2x1",
                "clusters are not grouped yet",
                "cluster: 1x1",
            ),
            ("layout: cr", "A row-major", "layout: rc"),
            (
                "dtype: e4m3, layout: rc, tile: 128x128x128, quant: tensor",
                "one scale for every expert's B is not grouped",
                "quant: block",
            ),
            (
                "bias: row",
                "a bias per routed row is not grouped",
                "bias: col (one vector per expert, strided by the expert's index)",
            ),
        ] {
            assert_refused_with_help(
                &format!("{HOPPER}, groups: contiguous, {spec}"),
                message,
                help,
            );
        }
        let other_family = errors("arch: sm_80, mma: mma_sync, groups: masked");
        assert!(
            other_family
                .iter()
                .any(|e| e.message.contains("`mma: mma_sync` has no grouped kernel")),
            "{other_family:?}"
        );
        let bad_value = errors(&format!("{HOPPER}, groups: ragged"));
        assert!(
            bad_value[0].message.contains("grouped layout"),
            "{bad_value:?}"
        );
    }

    #[test]
    fn hopper_rules_have_help() {
        for (spec, message, help) in [
            (
                "tile: 96x256x64",
                "BM = 96 is not a multiple of 64 rows per consumer",
                "tile: 128x256x64",
            ),
            (
                "tile: 128x200x64",
                "BN = 200 is not a multiple of 16",
                "tile: 128x192x64",
            ),
            (
                "tile: 128x256x48, swizzle: 128B",
                "BK = 48 is not a multiple of 64",
                "tile: 128x256x64",
            ),
            ("dtype: tf32", "multiplies f16, bf16 or fp8", "dtype: bf16"),
            (
                "dtype: e4m3, layout: rr",
                "fp8 wgmma reads A and B K-major: `layout: rr` would need a transposed copy",
                "layout: rc",
            ),
            (
                "b_dtype: f16",
                "A and B differ in type only as an fp8 pair (e4m3 with e5m2); no instruction multiplies bf16 by f16",
                "b_dtype: bf16",
            ),
            (
                "dtype: e4m3, b_dtype: bf16",
                "no instruction multiplies e4m3 by bf16",
                "b_dtype: e4m3",
            ),
            (
                "dtype: e5m2, out: e5m2",
                "e5m2 is an input type: the kernels write bf16, f16 or f32",
                "out: bf16",
            ),
            (
                "quant: tensor",
                "`quant: tensor` scales fp8 operands back; bf16 operands need no scales",
                "quant: none",
            ),
            (
                "dtype: e4m3, tile: 128x256x64, swizzle: 128B",
                "BK = 64 is not a multiple of 128",
                "tile: 128x256x128",
            ),
            (
                "dtype: e4m3, tile: 128x128x128, quant: block, promote: 256",
                "`quant: block` applies its scales where the partial sums are promoted, every 128 k, not at `promote: 256`",
                "promote: 128",
            ),
            (
                "dtype: e4m3, tile: 128x128x128, promote: 64",
                "`promote: 64` is not a multiple of BK = 128",
                "promote: 128",
            ),
            (
                "promote: 128",
                "`promote: 128` adds fp8 partial sums into f32 registers; bf16 wgmma accumulates in f32 already",
                "promote: none",
            ),
            (
                "dtype: e4m3, tile: 128x192x128, swizzle: 64B, quant: block",
                "BN = 192 neither holds whole 128-column blocks of B's scales nor lies within one",
                "tile: 128x128x128",
            ),
            (
                "dtype: e4m3, tile: 128x128x64, swizzle: 64B, quant: block, promote: 128",
                "`quant: block` takes k tiles of one 128-k block of scales, not BK = 64",
                "tile: 128x128x128",
            ),
            (
                "dtype: e4m3, quant: block",
                "registers per thread",
                "use a smaller tile",
            ),
            (
                "swizzle: none",
                "not a layout TMA and wgmma share",
                "swizzle: 128B",
            ),
            ("consumers: 4", "1, 2 or 3 warpgroups", "consumers: 2"),
            (
                "tile: 192x224x64, consumers: 3, stages: 3",
                "one m64n224 wgmma needs 138 registers",
                "a BN of at most 192 for 3 consumers",
            ),
            ("stages: 1", "2 or more stages", "stages: 4"),
            (
                "warps: 4x1",
                "does not apply to `mma: wgmma`",
                "leave `warps:` out: `consumers: 2`",
            ),
            ("stages: 5", "shared memory over budget", "stages: 4 fits"),
            (
                "tile: 256x256x64, consumers: 2",
                "registers per thread",
                "use a smaller tile",
            ),
            ("copy: cp_async", "not implemented yet", "only f16/bf16"),
            (
                "cluster: 2x1",
                "shares its operand tiles through `copy: tma(multicast = 2)`",
                "copy: tma(multicast = 2)",
            ),
            (
                "cluster: 2x2, copy: tma(multicast = 4)",
                "not implemented yet",
                "only f16/bf16",
            ),
            (
                "layout: cr, tile: 64x64x320, consumers: 1, stages: 2",
                "BK = 320 is over 256",
                "tile: 64x64x256",
            ),
            (
                "tile: 64x64x320, consumers: 1, stages: 2",
                "BK = 320 is over 256",
                "tile: 64x64x256",
            ),
            (
                "tile: 128x128x64, consumers: pingpong",
                "alternates the tiles of a persistent walk of whole tiles, not `schedule: tile`",
                "schedule: persistent",
            ),
            (
                "tile: 128x128x64, consumers: pingpong, schedule: persistent(tail = stream_k)",
                "alternates the tiles of a persistent walk",
                "schedule: persistent",
            ),
            (
                "tile: 96x128x64, consumers: pingpong, schedule: persistent",
                "BM = 96 is not a multiple of 64 rows per consumer warpgroup (ping-pong consumers each compute the whole tile)",
                "tile: 64x128x64",
            ),
            (
                "consumers: pingpong, schedule: persistent",
                "registers per thread",
                "use a smaller tile",
            ),
        ] {
            assert_refused_with_help(&format!("{HOPPER}, {spec}"), message, help);
        }
    }
}
