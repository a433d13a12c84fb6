//! The main loop's plan: the ring of stages, the TMA boxes that fill a stage, the wgmma
//! descriptors that read it, the k steps of one k tile and fp8 promotion.

use super::copy::{box_loads, BoxLoad};
use super::descriptor::{self, Major, OperandReads, SmemDescriptor, WgmmaKStep};
use super::epilogue::WgmmaEpilogue;
use super::promotion::Promotion;
use crate::plan::{Mbarriers, Ring};
use gemm_dsl::family::wgmma::{SharedOperand, WgmmaGeometry, WARPGROUP_THREADS};
use gemm_dsl::{DType, GemmSpec, Layout};
use serde::{Serialize, Serializer};

/// What producer and consumers do for each k tile of an output tile.
#[derive(Clone, Debug, Serialize)]
pub struct MainLoop {
    /// A's and B's element types (B's the other fp8 type of a mixed pair), and the storage
    /// orders: for the writer's instructions and header.
    #[serde(skip)]
    pub dtype: DType,
    #[serde(skip)]
    pub b_dtype: DType,
    #[serde(skip)]
    pub layout: Layout,
    pub in_bytes: u32,
    pub block_m: u32,
    pub block_n: u32,
    pub block_k: u32,
    /// Added to K before dividing by the tile: a partial last k tile counts (the TMA fills it
    /// with zeros). The walk's tile counts round M and N up the same way (`TileWalk`).
    pub k_round_up: u32,
    pub rows_per_consumer: u32,
    /// Rows from one consumer's first row of the tile to the next's: `rows_per_consumer`, or
    /// 0 where ping-pong consumers each compute the whole tile.
    pub consumer_row_step: u32,
    pub ring: Ring<Mbarriers>,
    /// The TMA boxes of one stage, A's then B's.
    pub a_loads: Vec<BoxLoad>,
    pub b_loads: Vec<BoxLoad>,
    /// Some box starts below its tile's first line (a K-major B over 256 rows).
    pub lines_split: bool,
    /// Which dimension of each operand is contiguous: its boxes run along K (K-major) or
    /// along M or N.
    #[serde(skip)]
    pub a_major: Major,
    #[serde(skip)]
    pub b_major: Major,
    pub a_k_major: bool,
    pub b_k_major: bool,
    /// wgmma descriptors of a consumer's first k step in stage 0, relative to the ring base.
    pub a_descriptor: SmemDescriptor,
    pub b_descriptor: SmemDescriptor,
    /// Bytes from one consumer's rows of A to the next's.
    pub consumer_a_bytes: u32,
    /// The descriptors' constant parts: low words without the start, and high words.
    pub a_desc_low: u32,
    pub a_desc_high: u32,
    pub b_desc_low: u32,
    pub b_desc_high: u32,
    /// `stage_bytes >> 4`: one stage in descriptor start-address units.
    pub stage_desc_units: u32,
    /// The bits of a shared-memory address the descriptor's start field takes (before `>> 4`).
    #[serde(serialize_with = "lower_hex")]
    pub descriptor_address_mask: u32,
    /// The N of each piece's wgmma (one piece, or two where BN is over 256), and the k of
    /// every wgmma (16, or 32 for fp8).
    pub wgmma_widths: Vec<u32>,
    pub wgmma_k: u32,
    /// wgmma's `imm-trans-a, imm-trans-b` operands; `None` for fp8, whose operands are
    /// always K-major and whose form has none.
    #[serde(skip)]
    pub transpose_immediates: Option<(u32, u32)>,
    pub accumulators: u32,
    /// The k steps of one k tile, written by the PTX writer (`write::wgmma_block`).
    #[serde(skip)]
    pub k_steps: Vec<WgmmaKStep>,
    /// `promote: K` (fp8): partial sums added into f32 registers every interval, with
    /// `quant: block`'s scales.
    pub promotion: Option<Promotion>,
    /// Which consumer threads arrive on a slot's empty barrier once they are done with it.
    #[serde(skip)]
    pub slot_release: SlotRelease,
    pub slot_release_each_thread: bool,
}

/// Who releases a ring slot to the producer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SlotRelease {
    /// Lane 0 of each consumer warp: the warp's wgmmas read the slot through the async proxy,
    /// and `wgmma.wait_group` retires the whole warp's reads at once.
    EachWarp,
    /// Every consumer thread, where each reads the slot with its own loads too (block scales).
    /// A warp sync before lane 0's arrival orders them as well under the PTX memory model,
    /// but compute-sanitizer's racecheck orders a read before the producer's next write only
    /// through the reader's own arrival, and reports the rest as races.
    EachThread,
}

impl SlotRelease {
    fn of(g: &WgmmaGeometry) -> SlotRelease {
        if g.block_scales {
            SlotRelease::EachThread
        } else {
            SlotRelease::EachWarp
        }
    }

    /// Arrivals one consumer warpgroup makes on a slot's empty barrier.
    pub fn arrivals_per_consumer(self) -> u32 {
        match self {
            SlotRelease::EachWarp => WARPGROUP_THREADS / 32,
            SlotRelease::EachThread => WARPGROUP_THREADS,
        }
    }
}

/// The ring of geometry `g`: `stages` stages, then the epilogue's buffers of C, then a full
/// and an empty mbarrier per stage.
pub(super) fn ring(g: &WgmmaGeometry, element_bytes: u32, stages: u32) -> Ring<Mbarriers> {
    // Every consumer warp that reads the slot, in every block the slot's multicast reaches,
    // releases it: a ping-pong slot belongs to one consumer's tile.
    let reading_consumers = if g.pingpong { 1 } else { g.consumers };
    let cluster_blocks = g.cluster.map_or(1, |c| c.blocks);
    let ring = Ring::mbarriers(
        stages,
        g.stage_bytes(element_bytes),
        reading_consumers * SlotRelease::of(g).arrivals_per_consumer() * cluster_blocks,
        g.store_staging.map_or(0, |st| st.bytes(g.consumers)),
    );
    if g.block_scales {
        // The producer's copies of B's block scales arrive on the full barrier.
        ring.with_copies_arriving()
    } else {
        ring
    }
}

impl MainLoop {
    /// The main loop of geometry `g` over `ring`; block scales are promoted into the
    /// `epilogue`'s accumulator elements.
    pub(super) fn new(
        g: &WgmmaGeometry,
        spec: &GemmSpec,
        ring: Ring<Mbarriers>,
        epilogue: &WgmmaEpilogue,
    ) -> MainLoop {
        let element = spec.dtype.size_bytes();
        let [a_loads, b_loads] = stage_loads(g, element);
        let a_tile_bytes: u32 = a_loads.iter().map(|l| l.bytes).sum();
        let reads = OperandReads::new(g, element, a_tile_bytes);
        let slot_release = SlotRelease::of(g);
        // Block scales' slots follow the ring's barriers and C-in's.
        let c_in_barrier_bytes = g
            .store_staging
            .map_or(0, |staging| staging.c_in_barrier_bytes(g.consumers));
        let scale_slots_offset = ring.bytes_with_barriers() + c_in_barrier_bytes;
        MainLoop {
            dtype: spec.dtype,
            b_dtype: spec.b_dtype,
            layout: spec.layout,
            in_bytes: element,
            block_m: spec.tile.m,
            block_n: spec.tile.n,
            block_k: spec.tile.k,
            k_round_up: spec.tile.k - 1,
            rows_per_consumer: g.rows_per_consumer,
            consumer_row_step: if g.pingpong { 0 } else { g.rows_per_consumer },
            stage_desc_units: ring.stage_bytes / 16,
            promotion: Promotion::of(g, spec, epilogue, scale_slots_offset),
            ring,
            lines_split: a_loads.iter().chain(&b_loads).any(|l| l.outer_offset > 0),
            a_loads,
            b_loads,
            a_major: g.a_major,
            b_major: g.b_major,
            a_k_major: g.a_major == Major::K,
            b_k_major: g.b_major == Major::K,
            a_desc_low: reads.a_descriptor.low_word_fields(),
            a_desc_high: reads.a_descriptor.high_word(),
            b_desc_low: reads.b_descriptor.low_word_fields(),
            b_desc_high: reads.b_descriptor.high_word(),
            a_descriptor: reads.a_descriptor,
            b_descriptor: reads.b_descriptor,
            consumer_a_bytes: reads.consumer_a_bytes,
            descriptor_address_mask: descriptor::START_ADDRESS_MASK,
            wgmma_widths: g.n_pieces().iter().map(|piece| piece.n).collect(),
            wgmma_k: g.k_per_wgmma,
            transpose_immediates: (!spec.dtype.is_fp8())
                .then(|| (g.a_major.transpose_flag(), g.b_major.transpose_flag())),
            accumulators: g.accumulators(),
            k_steps: reads.k_steps,
            slot_release,
            slot_release_each_thread: slot_release == SlotRelease::EachThread,
        }
    }
}

/// The TMA boxes of a stage, A's then B's after them; a cluster's shared operand's boxes
/// are multicast.
fn stage_loads(g: &WgmmaGeometry, element: u32) -> [Vec<BoxLoad>; 2] {
    let shared = g.cluster.map(|c| c.shared);
    let a_loads = box_loads(&g.a_boxes, element, 0, shared == Some(SharedOperand::A));
    let a_tile_bytes = a_loads.iter().map(|l| l.bytes).sum();
    let b_loads = box_loads(
        &g.b_boxes,
        element,
        a_tile_bytes,
        shared == Some(SharedOperand::B),
    );
    [a_loads, b_loads]
}

/// A number as a lower-case hexadecimal literal: `0x3ffff`.
fn lower_hex<S: Serializer>(value: &u32, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(&format!("{value:#x}"))
}
