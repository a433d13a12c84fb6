//! Plan of the Hopper family (`mma: wgmma`).
//!
//! Warpgroup 0 is the producer: one thread walks the block's k tiles (and, persistent, its
//! output tiles), waits for a free stage of the ring, announces the stage's bytes on its
//! *full* mbarrier (`arrive.expect_tx`) and issues the TMA boxes of A and B into it. Warpgroups
//! 1.. are consumers: each waits for a stage's full barrier, issues the k tile's wgmmas on
//! its rows straight from shared memory ([`descriptor`]), keeps one group in flight, and once
//! the previous k tile's group has retired (`wgmma.wait_group 1`) releases that stage on its
//! *empty* mbarrier, one arrival per warp. The ring's slots and phases are the shared
//! [`Ring`]`<`[`Mbarriers`]`>`; the stores of the accumulators, in [`epilogue`], take a path of
//! [`crate::plan::store`].

pub mod copy;
pub mod descriptor;
pub mod epilogue;
pub mod promotion;
pub mod schedule;

mod explain;
mod probe;
pub mod write;

use crate::plan::batch::{BatchPlan, WALK_BATCH_REGISTER};
use crate::plan::epilogue::FusedEpilogue;
use crate::plan::schedule::TileWalk;
use crate::plan::{LaunchContract, Mbarriers, Ring};
use copy::{box_loads, coordinates};
pub use copy::{BoxCoordinates, BoxLoad, ClusterPlan};
use descriptor::{Major, OperandReads, SmemDescriptor};
pub use descriptor::{WgmmaKStep, WgmmaOp};
use epilogue::WgmmaEpilogue;
pub use epilogue::{BoxOrigin, CInLoads, CInPrefetch};
use gemm_dsl::abi::{
    epilogue_params, KernelParam, Opcode, Operand, ParamKind, SassCheck, Scalar, TensorMapBox,
    BATCH_PARAMS, SIZE_PARAMS,
};
use gemm_dsl::family::wgmma::{
    OperandBoxes, SharedOperand, WgmmaGeometry, STORE_BOX_ROWS, WARPGROUP_THREADS, WGMMA_M,
};
use gemm_dsl::{DType, ValidSpec};
pub use promotion::Promotion;
pub use schedule::{PartialVector, PingPong, ScheduleKind, StreamK};
use serde::Serialize;
use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

/// Every number the wgmma templates print.
#[derive(Clone, Debug, Serialize)]
pub struct WgmmaPlan {
    /// The validated geometry the plan was made from (for `explain`; templates never read it).
    #[serde(skip)]
    pub geometry: WgmmaGeometry,
    pub threads: u32,
    /// `.maxnreg`: the even split of the register file over the block's threads; ptxas honours
    /// `setmaxnreg` only under such a cap.
    pub max_registers: u32,
    /// `setmaxnreg` of the producer and the consumers, where the producer gives registers
    /// back.
    pub register_split: Option<RegisterSplit>,
    pub consumers: u32,
    pub dtype: &'static str,
    /// B's element type: `dtype`, or the other fp8 type of a mixed pair.
    pub b_dtype: &'static str,
    pub out_dtype: &'static str,
    pub in_bytes: u32,
    pub out_bytes: u32,
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
    #[serde(skip)]
    pub a_box: TensorMapBox,
    #[serde(skip)]
    pub b_box: TensorMapBox,
    /// `epilogue: tma`: the box of C one TMA store writes.
    #[serde(skip)]
    pub c_box: Option<TensorMapBox>,
    /// wgmma descriptors of a consumer's first k step in stage 0, relative to the ring base.
    pub a_descriptor: SmemDescriptor,
    pub b_descriptor: SmemDescriptor,
    /// Bytes from one consumer's rows of A to the next's.
    pub consumer_a_bytes: u32,
    #[serde(skip)]
    pub a_major: Major,
    #[serde(skip)]
    pub b_major: Major,
    /// The registers of a box's coordinates: `x` along the global matrix's contiguous
    /// dimension (the box's inner offset is added to it), `y` down its lines.
    pub a_coords: BoxCoordinates,
    pub b_coords: BoxCoordinates,
    /// The storage orders, for the kernel's header comment.
    pub layout_note: &'static str,
    /// The operands' swizzles for the kernel's header: one span, or A's and B's where B's
    /// columns took a narrower one.
    pub swizzle_note: String,
    /// The descriptors' constant parts: low words without the start, and high words.
    pub a_desc_low: u32,
    pub a_desc_high: u32,
    pub b_desc_low: u32,
    pub b_desc_high: u32,
    /// `stage_bytes >> 4`: one stage in descriptor start-address units.
    pub stage_desc_units: u32,
    /// The bits of a shared-memory address the descriptor's start field takes (before `>> 4`).
    pub descriptor_address_mask: String,
    /// The wgmma instruction of each piece of a row's columns ([`WgmmaOp::piece`]).
    pub wgmma_instructions: Vec<String>,
    /// wgmma's `imm-trans-a, imm-trans-b` operands; `None` for fp8, whose operands are
    /// always K-major and whose form has none.
    #[serde(skip)]
    pub transpose_immediates: Option<(u32, u32)>,
    pub accumulators: u32,
    pub persistent: Option<TileWalk>,
    /// The product of a strided batch a tile belongs to: its index is always in `%batch`
    /// (from `%ctaid.z`, or from the tile walk), since it is a TMA coordinate too.
    pub batch: BatchPlan,
    /// The output tiles a persistent block (or cluster) walks: one tile, or the cluster's.
    pub walk_tile_m: u32,
    pub walk_tile_n: u32,
    /// A two-block cluster that multicasts its shared operand.
    pub cluster: Option<ClusterPlan>,
    /// The register that numbers a persistent walk's units: the block, or its cluster.
    pub tile_index_register: &'static str,
    pub epilogue: WgmmaEpilogue,
    /// `scale`, `bias`, `activation`: the math on the accumulators before they are stored.
    pub fused: Option<FusedEpilogue>,
    /// `scale: alpha_beta`: each consumer asks L2 for its rows of C-in when its tile starts,
    /// so that the epilogue's reads find them there rather than in DRAM.
    pub c_in_prefetch: Option<CInPrefetch>,
    /// `scale: alpha_beta` under TMA stores: C-in's boxes by TMA into the store buffers.
    pub c_in_loads: Option<CInLoads>,
    #[serde(skip)]
    pub scale: gemm_dsl::Scale,
    #[serde(skip)]
    pub bias: gemm_dsl::Bias,
    #[serde(skip)]
    pub aux: gemm_dsl::Aux,
    #[serde(skip)]
    pub quant: gemm_dsl::Quant,
    /// Which entry template writes the kernel.
    #[serde(skip)]
    pub schedule: ScheduleKind,
    /// `tail = stream_k`: the tail's split along K and the workspace the blocks meet in.
    pub stream_k: Option<StreamK>,
    /// `consumers: pingpong`: alternate tiles, turns at the tensor cores.
    pub pingpong: Option<PingPong>,
    /// `promote: K` (fp8): partial sums added into f32 registers every interval, with
    /// `quant: block`'s scales.
    pub promotion: Option<Promotion>,
    /// Which consumer threads arrive on a slot's empty barrier once they are done with it.
    pub slot_release: SlotRelease,
    /// The k steps of one k tile, written by the PTX writer (`ptx::wgmma_block`).
    #[serde(skip)]
    pub k_steps: Vec<WgmmaKStep>,
}

/// Who releases a ring slot to the producer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
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
    /// Arrivals one consumer warpgroup makes on a slot's empty barrier.
    pub fn arrivals_per_consumer(self) -> u32 {
        match self {
            SlotRelease::EachWarp => WARPGROUP_THREADS / 32,
            SlotRelease::EachThread => WARPGROUP_THREADS,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct RegisterSplit {
    pub producer: u32,
    pub consumer: u32,
}

pub fn plan(valid: &ValidSpec, g: &WgmmaGeometry) -> WgmmaPlan {
    let spec = &valid.spec;
    let element = spec.dtype.size_bytes();
    let shared = g.cluster.map(|c| c.shared);
    let a_loads = box_loads(&g.a_boxes, element, 0, shared == Some(SharedOperand::A));
    let a_tile_bytes: u32 = a_loads.iter().map(|l| l.bytes).sum();
    let b_loads = box_loads(
        &g.b_boxes,
        element,
        a_tile_bytes,
        shared == Some(SharedOperand::B),
    );
    let stage_bytes = g.stage_bytes(element);
    let cluster_blocks = g.cluster.map_or(1, |c| c.blocks);
    // Every consumer warp that reads the slot, in every block the slot's multicast reaches,
    // releases it: a ping-pong slot belongs to one consumer's tile.
    let staging_bytes = g.store_staging.map_or(0, |st| st.bytes(g.consumers));
    let reading_consumers = if g.pingpong { 1 } else { g.consumers };
    let slot_release = if g.block_scales {
        SlotRelease::EachThread
    } else {
        SlotRelease::EachWarp
    };
    let mut ring = Ring::mbarriers(
        spec.stages,
        stage_bytes,
        reading_consumers * slot_release.arrivals_per_consumer() * cluster_blocks,
        staging_bytes,
    );
    if g.block_scales {
        // The producer's copies of B's block scales arrive on the full barrier.
        ring = ring.with_copies_arriving();
    }
    let cluster = g.cluster.map(|c| ClusterPlan::new(c, g, spec));
    let reads = OperandReads::new(g, element, a_tile_bytes);
    let (walk_tile_m, walk_tile_n) = match g.cluster {
        Some(c) => (spec.tile.m * c.shape.rows, spec.tile.n * c.shape.cols),
        None => (spec.tile.m, spec.tile.n),
    };
    let persistent = TileWalk::of(
        spec.schedule,
        gemm_dsl::Tile {
            m: walk_tile_m,
            n: walk_tile_n,
            k: spec.tile.k,
        },
        true,
        g.cluster.is_some(),
    );

    // One instruction per piece of a row's columns (two where BN is over 256).
    let wgmma_instructions: Vec<String> = g
        .n_pieces()
        .iter()
        .map(|piece| wgmma_instruction(piece.n, g.k_per_wgmma, spec.dtype, spec.b_dtype))
        .collect();
    // The shared operand's map loads one block's row slice of each box.
    let tensor_box =
        |operand, boxes: &OperandBoxes, swizzle_bytes: u32, shared_here: bool| TensorMapBox {
            operand,
            inner: boxes.inner,
            outer: if shared_here {
                boxes.outer / cluster_blocks
            } else {
                boxes.outer
            },
            swizzle_bytes,
        };
    let pack_instruction = match spec.out {
        DType::Bf16 => "cvt.rn.bf16x2.f32",
        DType::F16 => "cvt.rn.f16x2.f32",
        DType::F32 | DType::Tf32 => "",
        DType::E4m3 | DType::E5m2 => unreachable!("fp8 is an input type only (validated)"),
    };
    let epilogue = WgmmaEpilogue::new(g, spec.out.size_bytes(), pack_instruction);
    // C's rows are 16-byte aligned (see `launch_contract`).
    // C-in's mbarriers follow the ring's; block scales' slots follow them.
    let c_in_loads = CInLoads::of(g, &epilogue.path, ring.bytes_with_barriers());
    let fused = FusedEpilogue::of(spec, &epilogue.fused_segments(), 16).map(|fused| {
        if c_in_loads.is_some() {
            fused.with_c_in_staged()
        } else {
            fused
        }
    });
    let c_in_barrier_bytes = g
        .store_staging
        .map_or(0, |staging| staging.c_in_barrier_bytes(g.consumers));
    let promotion = Promotion::of(
        g,
        spec.quant,
        &epilogue,
        ring.bytes_with_barriers() + c_in_barrier_bytes,
    );
    WgmmaPlan {
        geometry: *g,
        threads: g.threads,
        max_registers: gemm_dsl::RegisterBudget::limit_for(g.threads),
        register_split: g
            .register_split
            .map(|(producer, consumer)| RegisterSplit { producer, consumer }),
        consumers: g.consumers,
        dtype: spec.dtype.name(),
        b_dtype: spec.b_dtype.name(),
        out_dtype: spec.out.name(),
        in_bytes: element,
        out_bytes: spec.out.size_bytes(),
        block_m: spec.tile.m,
        block_n: spec.tile.n,
        block_k: spec.tile.k,
        k_round_up: spec.tile.k - 1,
        rows_per_consumer: g.rows_per_consumer,
        consumer_row_step: if g.pingpong { 0 } else { g.rows_per_consumer },
        ring,
        lines_split: a_loads.iter().chain(&b_loads).any(|l| l.outer_offset > 0),
        a_loads,
        b_loads,
        a_box: tensor_box(
            Operand::A,
            &g.a_boxes,
            g.a_swizzle_bytes,
            shared == Some(SharedOperand::A),
        ),
        b_box: tensor_box(
            Operand::B,
            &g.b_boxes,
            g.b_swizzle_bytes,
            shared == Some(SharedOperand::B),
        ),
        c_box: g.store_staging.map(|staging| TensorMapBox {
            operand: Operand::C,
            inner: staging.box_cols,
            outer: STORE_BOX_ROWS,
            swizzle_bytes: staging.swizzle_bytes,
        }),
        consumer_a_bytes: reads.consumer_a_bytes,
        a_major: g.a_major,
        b_major: g.b_major,
        layout_note: crate::plan::layout_note(spec.layout),
        swizzle_note: if g.a_swizzle_bytes == g.b_swizzle_bytes {
            format!("{}-byte swizzle", g.a_swizzle_bytes)
        } else {
            format!(
                "{}-byte swizzle for A, {}-byte for B",
                g.a_swizzle_bytes, g.b_swizzle_bytes
            )
        },
        a_coords: coordinates(g.a_major, "%block_m", "%a_matrix"),
        b_coords: coordinates(g.b_major, "%block_n", "%b_matrix"),
        a_desc_low: reads.a_descriptor.low_word_fields(),
        a_desc_high: reads.a_descriptor.high_word(),
        b_desc_low: reads.b_descriptor.low_word_fields(),
        b_desc_high: reads.b_descriptor.high_word(),
        a_descriptor: reads.a_descriptor,
        b_descriptor: reads.b_descriptor,
        stage_desc_units: stage_bytes / 16,
        descriptor_address_mask: format!("{:#x}", descriptor::START_ADDRESS_MASK),
        wgmma_instructions,
        transpose_immediates: (!spec.dtype.is_fp8())
            .then(|| (g.a_major.transpose_flag(), g.b_major.transpose_flag())),
        accumulators: g.accumulators(),
        schedule: ScheduleKind::of(g, persistent.is_some()),
        persistent,
        batch: BatchPlan {
            index: WALK_BATCH_REGISTER,
            ..BatchPlan::new(spec.schedule, element, spec.out.size_bytes())
        },
        walk_tile_m,
        walk_tile_n,
        tile_index_register: if g.cluster.is_some() {
            "%clusterid.x"
        } else {
            "%ctaid.x"
        },
        cluster,
        epilogue,
        fused,
        c_in_prefetch: spec
            .scale
            .reads_c()
            .then(|| CInPrefetch::new(g.rows_per_consumer, spec.tile.n, spec.out.size_bytes())),
        c_in_loads,
        scale: spec.scale,
        bias: spec.bias,
        aux: spec.aux,
        quant: spec.quant,
        stream_k: StreamK::of(g),
        pingpong: PingPong::of(g),
        promotion,
        slot_release,
        k_steps: reads.k_steps,
    }
}

impl WgmmaPlan {
    pub fn launch_contract(&self) -> LaunchContract {
        LaunchContract {
            tile_k: self.block_k,
            // TMA: global addresses 16-byte aligned, row strides multiples of 16 bytes.
            operand_align_bytes: 16,
            // The TMA's strides and the direct stores' 16-byte vectors alike.
            output_align_bytes: 16,
            params: self.params(),
            partial_tiles: true,
            cluster: (
                self.walk_tile_m / self.block_m,
                self.walk_tile_n / self.block_n,
            ),
            workspace_bytes_per_block: self.stream_k.as_ref().map_or(0, |s| s.record_bytes),
        }
    }

    /// Tensor maps over A and B (and C, for TMA stores); C's pointer; the sizes; C's row
    /// stride; the batch.
    fn params(&self) -> Vec<KernelParam> {
        let mut params = vec![
            KernelParam {
                name: "a_map",
                kind: ParamKind::TensorMap(self.a_box),
                meaning: match self.a_major {
                    Major::K => "tensor map over A (M x K, row-major)",
                    Major::MN => "tensor map over A (M x K, column-major)",
                },
            },
            KernelParam {
                name: "b_map",
                kind: ParamKind::TensorMap(self.b_box),
                meaning: match self.b_major {
                    Major::MN => "tensor map over B (K x N, row-major)",
                    Major::K => "tensor map over B (K x N, column-major)",
                },
            },
        ];
        if let Some(c_box) = self.c_box {
            params.push(KernelParam {
                name: "c_map",
                kind: ParamKind::TensorMap(c_box),
                meaning: "tensor map over C (M x N, row-major, written)",
            });
            if self.c_in_loads.is_some() {
                params.push(KernelParam {
                    name: "c_in_map",
                    kind: ParamKind::CInTensorMap(c_box),
                    meaning: "tensor map over C-in (laid out as C, read), C's box",
                });
            }
        }
        params.push(KernelParam {
            name: "c",
            kind: ParamKind::Pointer(Operand::C),
            meaning: match self.c_box {
                Some(_) => "C, M x N, device pointer (written where N ends inside 16 bytes)",
                None => "C, M x N, device pointer (written)",
            },
        });
        params.extend(SIZE_PARAMS);
        params.push(KernelParam {
            name: "ldc",
            kind: ParamKind::U32(Scalar::Ldc),
            meaning: "C row stride, elements",
        });
        params.extend(BATCH_PARAMS);
        if self.stream_k.is_some() {
            params.push(KernelParam {
                name: "workspace",
                kind: ParamKind::Workspace,
                meaning: match self.consumers {
                    1 => "stream-K workspace: per block, the partial sums of its consumer and a flag",
                    _ => "stream-K workspace: per block, the partial sums of its consumers and their flags",
                },
            });
        }
        params.extend(epilogue_params(self.scale, self.bias, self.aux, self.quant));
        params
    }

    /// The wgmma's SASS opcode with its shape and types as nvdisasm prints it:
    /// `HGMMA.64x256x16.F32.BF16` for bf16, `HGMMA.64x256x16.F32` for f16,
    /// `QGMMA.64x256x32.F32.E4M3.E4M3` for fp8 (A's type, then B's).
    pub fn gmma_variant(&self) -> &'static str {
        let k = self.geometry.k_per_wgmma;
        // A row of two pieces promises its first (the wider) one.
        let n = self.geometry.n_pieces()[0].n;
        let text = match self.dtype {
            "bf16" => format!("HGMMA.{WGMMA_M}x{n}x{k}.F32.BF16"),
            "f16" => format!("HGMMA.{WGMMA_M}x{n}x{k}.F32"),
            a => format!(
                "QGMMA.{WGMMA_M}x{n}x{k}.F32.{}.{}",
                a.to_uppercase(),
                self.b_dtype.to_uppercase()
            ),
        };
        interned(text)
    }
}

/// The Hopper kernel's SASS: TMA loads, mbarrier traffic, the HGMMA shape, `setmaxnreg`
/// where the registers are split.
pub fn sass_promises(plan: &WgmmaPlan) -> Vec<SassCheck> {
    // Operands come by TMA alone; block scales come by `cp.async`.
    let block_scales = plan
        .promotion
        .as_ref()
        .is_some_and(|promotion| promotion.block.is_some());
    let mut checks = vec![
        SassCheck::Present(Opcode::Utmaldg),
        SassCheck::Present(Opcode::Syncs),
        if block_scales {
            SassCheck::Present(Opcode::Ldgsts)
        } else {
            SassCheck::Absent(Opcode::Ldgsts)
        },
    ];
    checks.extend(math_promises(plan));
    if plan.register_split.is_some() {
        checks.push(SassCheck::Present(Opcode::Usetmaxreg));
    }
    if plan.epilogue.path.tma().is_some() {
        checks.push(SassCheck::Present(Opcode::Stsm));
        checks.push(SassCheck::Present(Opcode::Utmastg));
    }
    checks
}

/// The wgmma instruction of width `n`, `k` per instruction, A and B of these types.
pub(super) fn wgmma_instruction(n: u32, k: u32, a: DType, b: DType) -> String {
    format!(
        "wgmma.mma_async.sync.aligned.m{WGMMA_M}n{n}k{k}.f32.{}.{}",
        a.name(),
        b.name()
    )
}

/// The GMMA of the kernel's exact shape and types: HGMMA for 16-bit inputs (f16 has no type
/// suffix, so only the exact opcode tells it from bf16), QGMMA for fp8.
pub fn math_promises(plan: &WgmmaPlan) -> Vec<SassCheck> {
    let variant = plan.gmma_variant();
    match plan.dtype {
        "f16" => vec![
            SassCheck::Present(Opcode::Hgmma),
            SassCheck::PresentExact(variant),
        ],
        "bf16" => vec![
            SassCheck::Present(Opcode::Hgmma),
            SassCheck::PresentVariant(variant),
        ],
        _ => vec![
            SassCheck::Present(Opcode::Qgmma),
            SassCheck::PresentVariant(variant),
            SassCheck::Absent(Opcode::Hgmma),
        ],
    }
}

/// `text` as a `'static` string (SASS promises are plain data): each distinct GMMA variant,
/// at most one per legal N and type, is made once per process.
fn interned(text: String) -> &'static str {
    static VARIANTS: OnceLock<Mutex<HashMap<String, &'static str>>> = OnceLock::new();
    let mut variants = VARIANTS
        .get_or_init(Default::default)
        .lock()
        .expect("no panics while held");
    variants
        .entry(text.clone())
        .or_insert_with(|| Box::leak(text.into_boxed_str()))
}

/// A wgmma spec of the tests: `text` after a name, `sm_90a` and `mma: wgmma`.
#[cfg(test)]
fn test_spec(text: &str) -> (ValidSpec, WgmmaGeometry) {
    let text = format!("name: w, arch: sm_90a, mma: wgmma, {text}");
    let valid = gemm_dsl::check_str(&text).unwrap_or_else(|e| panic!("{text}: {e}"));
    let gemm_dsl::Family::Wgmma(g) = valid.family else {
        panic!("{text} is not a wgmma spec");
    };
    (valid, g)
}

#[cfg(test)]
mod tests;
