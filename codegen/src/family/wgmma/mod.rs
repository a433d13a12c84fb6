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

pub mod descriptor;
pub mod epilogue;

mod explain;
mod probe;
pub mod write;

use crate::plan::batch::{BatchPlan, WALK_BATCH_REGISTER};
use crate::plan::epilogue::FusedEpilogue;
use crate::plan::schedule::TileWalk;
use crate::plan::{LaunchContract, Mbarriers, Ring};
use descriptor::{Major, SmemDescriptor};
use epilogue::WgmmaEpilogue;
use gemm_dsl::abi::{
    epilogue_params, KernelParam, Opcode, Operand, ParamKind, SassCheck, Scalar, TensorMapBox,
    BATCH_PARAMS, SIZE_PARAMS,
};
use gemm_dsl::family::wgmma::{
    OperandBoxes, SharedOperand, WgmmaGeometry, STORE_BOX_ROWS, WARPGROUP_THREADS, WGMMA_K, WGMMA_M,
};
use gemm_dsl::{DType, ValidSpec};
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
    pub out_dtype: &'static str,
    pub in_bytes: u32,
    pub out_bytes: u32,
    pub block_m: u32,
    pub block_n: u32,
    pub block_k: u32,
    /// Added to M, N, K before dividing by the tile: partial last tiles count (the TMA fills
    /// them with zeros, the epilogue checks their edges).
    pub m_round_up: u32,
    pub n_round_up: u32,
    pub k_round_up: u32,
    pub rows_per_consumer: u32,
    pub ring: Ring<Mbarriers>,
    /// The TMA boxes of one stage, A's then B's.
    pub a_loads: Vec<BoxLoad>,
    pub b_loads: Vec<BoxLoad>,
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
    /// The descriptors' constant parts: low words without the start, and high words.
    pub a_desc_low: u32,
    pub a_desc_high: u32,
    pub b_desc_low: u32,
    pub b_desc_high: u32,
    /// `stage_bytes >> 4`: one stage in descriptor start-address units.
    pub stage_desc_units: u32,
    /// The bits of a shared-memory address the descriptor's start field takes (before `>> 4`).
    pub descriptor_address_mask: String,
    pub wgmma_instruction: String,
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
    #[serde(skip)]
    pub scale: gemm_dsl::Scale,
    #[serde(skip)]
    pub bias: gemm_dsl::Bias,
    #[serde(skip)]
    pub aux: gemm_dsl::Aux,
    /// `tail = stream_k`: the tail's split along K and the workspace the blocks meet in.
    pub stream_k: Option<StreamK>,
    /// The k steps of one k tile, written by the PTX writer (`ptx::wgmma_block`).
    #[serde(skip)]
    pub k_steps: Vec<WgmmaKStep>,
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
    fn new(rows: u32, cols: u32, out_bytes: u32) -> CInPrefetch {
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

/// Two blocks of a cluster compute neighbouring tiles that share one operand's tiles: block
/// rank `r` loads row slice `r` of each of that operand's boxes and multicasts it into both
/// blocks' stages, so each stage holds the whole tile in both, from half the loads. A slot is
/// refilled only when the consumers of both blocks have released it: each consumer warp
/// arrives on its own block's empty barrier and on the peer's.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ClusterPlan {
    pub blocks: u32,
    /// `.reqnctapercluster`: the launch's cluster shape along the grid's x and y.
    pub dims_x: u32,
    pub dims_y: u32,
    /// `a` or `b`.
    pub shared: &'static str,
    /// Rows of each shared box one block loads, and their bytes in shared memory.
    pub slice_rows: u32,
    pub slice_bytes: u32,
    /// Where block rank `r`'s tile sits in the cluster's: `r` times these, down M or along N.
    pub rank_tile_m: u32,
    pub rank_tile_n: u32,
    /// Every block of the cluster, as `.multicast::cluster`'s mask.
    pub cta_mask: u32,
}

/// A stream-K walk (`schedule: persistent(.., tail = stream_k)`). The tiles of the whole
/// rounds go whole, as in any persistent walk; the `T mod grid` tiles left over are split
/// along K where they are at most half the grid (more would keep most walkers busy anyway,
/// and the split's partial sums cost more than the idle ones): with `U` their k tiles in
/// walk order, walker `w` (block, or cluster) takes positions `[w·U / grid, (w+1)·U / grid)`,
/// one unit per tile it touches. A unit that
/// starts inside its tile writes its accumulators to the walker's record in the workspace
/// and raises its consumer's flag; the unit that starts the tile (its *finisher*) waits for
/// the flags of the walkers after it that share the tile, adds their sums in walker order
/// (so results do not depend on timing), clears the flags and stores C. Only a walker's
/// first tail unit can start inside a tile and only its last can finish one, so no walker
/// waits before it has written what others wait for: with the whole grid resident, the walk
/// cannot deadlock.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct StreamK {
    /// Workspace bytes per block: `consumers` slots of partial sums, then the flags.
    pub record_bytes: u32,
    /// One consumer warpgroup's slot: every thread's accumulators.
    pub slot_bytes: u32,
    /// Where the record's flags start (one 32-bit flag per consumer).
    pub flags_offset: u32,
    /// Bytes from one of a thread's 16-byte vectors to its next: a warpgroup's 128 threads
    /// store each vector side by side, so a warp's stores and loads are 512 contiguous bytes.
    pub vector_stride_bytes: u32,
    /// A thread's accumulators as 16-byte vectors, vector `i` at `i x vector_stride_bytes`.
    pub vectors: Vec<PartialVector>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PartialVector {
    pub offset: u32,
    /// The four accumulator registers, `%accN`.
    pub registers: Vec<String>,
}

impl StreamK {
    fn of(g: &WgmmaGeometry) -> Option<StreamK> {
        let vector_stride_bytes = WARPGROUP_THREADS * 16;
        g.stream_k.then(|| StreamK {
            record_bytes: g.workspace_bytes_per_block(),
            slot_bytes: g.partial_slot_bytes(),
            flags_offset: g.consumers * g.partial_slot_bytes(),
            vector_stride_bytes,
            vectors: (0..g.accumulators() / 4)
                .map(|i| PartialVector {
                    offset: i * vector_stride_bytes,
                    registers: (4 * i..4 * i + 4).map(|r| format!("%acc{r}")).collect(),
                })
                .collect(),
        })
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct RegisterSplit {
    pub producer: u32,
    pub consumer: u32,
}

/// One TMA box of a stage: where it lands in the stage and how far along the operand's
/// contiguous dimension it starts from the tile's first element.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct BoxLoad {
    pub smem_offset: u32,
    pub inner_offset: u32,
    /// Bytes the box brings into each block's stage.
    pub bytes: u32,
    /// The box belongs to the operand a cluster shares: this block loads only its row slice
    /// and multicasts it.
    pub multicast: bool,
}

/// Where an operand's boxes start in its global matrix, as registers of the producer: the
/// k tile's first K (`%k_coord`) and the output tile's first row or column, and the matrix of
/// the batch (`z`, the product's index, or 0 for an operand every product shares).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct BoxCoordinates {
    pub x: &'static str,
    pub y: &'static str,
    pub z: &'static str,
}

/// A K-major operand's boxes run along K and down its rows (M or N); an M/N-major operand's
/// along M or N and down K.
fn coordinates(major: Major, tile_origin: &'static str, matrix: &'static str) -> BoxCoordinates {
    match major {
        Major::K => BoxCoordinates {
            x: "%k_coord",
            y: tile_origin,
            z: matrix,
        },
        Major::MN => BoxCoordinates {
            x: tile_origin,
            y: "%k_coord",
            z: matrix,
        },
    }
}

/// The wgmmas of one k16 step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WgmmaKStep {
    /// The first k step of a k tile: its scale-d predicate is "accumulate unless this is the
    /// tile's first k tile"; later steps always accumulate.
    pub first: bool,
    /// Descriptor start offsets (16-byte units) from the consumer's stage bases.
    pub b_offset_units: u32,
    pub mmas: Vec<WgmmaOp>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WgmmaOp {
    /// The accumulator registers, `{ %acc.., .. }`.
    pub accumulators: String,
    pub a_offset_units: u32,
}

/// The TMA boxes of one operand in a stage that starts its tile at `smem_start`.
fn box_loads(
    boxes: &OperandBoxes,
    element_bytes: u32,
    smem_start: u32,
    multicast: bool,
) -> Vec<BoxLoad> {
    let bytes = boxes.bytes_per_box(element_bytes);
    (0..boxes.boxes)
        .map(|i| BoxLoad {
            smem_offset: smem_start + i * bytes,
            inner_offset: i * boxes.inner,
            bytes,
            multicast,
        })
        .collect()
}

pub fn plan(valid: &ValidSpec, g: &WgmmaGeometry) -> WgmmaPlan {
    let spec = &valid.spec;
    let element = spec.dtype.size_bytes();
    let w = g.swizzle_bytes;
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
    // Every consumer warp of every block the slot's multicast reaches releases it.
    let staging_bytes = g.store_staging.map_or(0, |st| st.bytes(g.consumers));
    let ring = Ring::mbarriers(
        spec.stages,
        stage_bytes,
        g.consumers * 4 * cluster_blocks,
        staging_bytes,
    );
    let cluster = g.cluster.map(|c| {
        let (boxes, rank_tile_m, rank_tile_n) = match c.shared {
            SharedOperand::A => (&g.a_boxes, 0, spec.tile.n),
            SharedOperand::B => (&g.b_boxes, spec.tile.m, 0),
        };
        let slice_rows = boxes.outer / c.blocks;
        let (dims_x, dims_y) = match spec.schedule {
            gemm_dsl::Schedule::Tile => (c.shape.cols, c.shape.rows),
            gemm_dsl::Schedule::Persistent { .. } => (c.blocks, 1),
        };
        ClusterPlan {
            blocks: c.blocks,
            dims_x,
            dims_y,
            shared: match c.shared {
                SharedOperand::A => "a",
                SharedOperand::B => "b",
            },
            slice_rows,
            slice_bytes: slice_rows * g.swizzle_bytes,
            rank_tile_m,
            rank_tile_n,
            cta_mask: (1 << c.blocks) - 1,
        }
    });
    let (walk_tile_m, walk_tile_n) = match g.cluster {
        Some(c) => (spec.tile.m * c.shape.rows, spec.tile.n * c.shape.cols),
        None => (spec.tile.m, spec.tile.n),
    };

    // K-major operands step 32 bytes of K along a box row per k16 (into the next box past a
    // swizzle span) and their 8-row atoms lie SBO apart; M/N-major operands step 16 box rows
    // per k16 and their swizzle spans of M or N lie LBO (one box) apart.
    let a_box_bytes = g.a_boxes.bytes_per_box(element);
    let b_box_bytes = g.b_boxes.bytes_per_box(element);
    let descriptor_of = |major: Major, start_bytes: u32, box_bytes: u32| SmemDescriptor {
        start_bytes,
        leading_bytes: match major {
            Major::K => 16,
            Major::MN => box_bytes,
        },
        stride_bytes: 8 * w,
        swizzle_bytes: w,
    };
    let a_descriptor = descriptor_of(g.a_major, 0, a_box_bytes);
    let b_descriptor = descriptor_of(g.b_major, a_tile_bytes, b_box_bytes);
    let k_step_bytes = |major: Major, step: u32, box_bytes: u32| match major {
        Major::K => {
            let k_byte = step * WGMMA_K * element;
            (k_byte / w) * box_bytes + k_byte % w
        }
        Major::MN => step * WGMMA_K * w,
    };
    // Bytes from one block of `rows` rows of M (a consumer's, or a wgmma row of 64) to the next.
    let m_rows_bytes = |rows: u32| match g.a_major {
        Major::K => rows * w,
        Major::MN => rows * element / w * a_box_bytes,
    };
    let acc_per_wgmma = g.n / 2;
    let k_steps = (0..g.k_steps)
        .map(|step| {
            let a_step_bytes = k_step_bytes(g.a_major, step, a_box_bytes);
            WgmmaKStep {
                first: step == 0,
                b_offset_units: k_step_bytes(g.b_major, step, b_box_bytes) / 16,
                mmas: (0..g.m_wgmmas)
                    .map(|mi| WgmmaOp {
                        accumulators: (mi * acc_per_wgmma..(mi + 1) * acc_per_wgmma)
                            .map(|i| format!("%acc{i}"))
                            .collect::<Vec<_>>()
                            .join(", "),
                        a_offset_units: (a_step_bytes + m_rows_bytes(mi * WGMMA_M)) / 16,
                    })
                    .collect(),
            }
        })
        .collect();
    let type_name = spec.dtype.name();
    let wgmma_instruction = format!(
        "wgmma.mma_async.sync.aligned.m{WGMMA_M}n{}k{WGMMA_K}.f32.{type_name}.{type_name}",
        g.n
    );
    // The shared operand's map loads one block's row slice of each box.
    let tensor_box = |operand, boxes: &OperandBoxes, shared_here: bool| TensorMapBox {
        operand,
        inner: boxes.inner,
        outer: if shared_here {
            boxes.outer / cluster_blocks
        } else {
            boxes.outer
        },
        swizzle_bytes: w,
    };
    let pack_instruction = match spec.out {
        DType::Bf16 => "cvt.rn.bf16x2.f32",
        DType::F16 => "cvt.rn.f16x2.f32",
        DType::F32 | DType::Tf32 => "",
    };
    let epilogue = WgmmaEpilogue::new(g, spec.out.size_bytes(), pack_instruction);
    // C's rows are 16-byte aligned (see `launch_contract`).
    let fused = FusedEpilogue::of(spec, &epilogue.fused_segments(), 16);
    WgmmaPlan {
        geometry: *g,
        threads: g.threads,
        max_registers: gemm_dsl::RegisterBudget::limit_for(g.threads),
        register_split: g
            .register_split
            .map(|(producer, consumer)| RegisterSplit { producer, consumer }),
        consumers: g.consumers,
        dtype: spec.dtype.name(),
        out_dtype: spec.out.name(),
        in_bytes: element,
        out_bytes: spec.out.size_bytes(),
        block_m: spec.tile.m,
        block_n: spec.tile.n,
        block_k: spec.tile.k,
        m_round_up: walk_tile_m - 1,
        n_round_up: walk_tile_n - 1,
        k_round_up: spec.tile.k - 1,
        rows_per_consumer: g.rows_per_consumer,
        ring,
        a_loads,
        b_loads,
        a_box: tensor_box(Operand::A, &g.a_boxes, shared == Some(SharedOperand::A)),
        b_box: tensor_box(Operand::B, &g.b_boxes, shared == Some(SharedOperand::B)),
        c_box: g.store_staging.map(|staging| TensorMapBox {
            operand: Operand::C,
            inner: staging.box_cols,
            outer: STORE_BOX_ROWS,
            swizzle_bytes: staging.swizzle_bytes,
        }),
        consumer_a_bytes: m_rows_bytes(g.rows_per_consumer),
        a_major: g.a_major,
        b_major: g.b_major,
        layout_note: crate::plan::layout_note(spec.layout),
        a_coords: coordinates(g.a_major, "%block_m", "%a_matrix"),
        b_coords: coordinates(g.b_major, "%block_n", "%b_matrix"),
        a_desc_low: a_descriptor.low_word_fields(),
        a_desc_high: a_descriptor.high_word(),
        b_desc_low: b_descriptor.low_word_fields(),
        b_desc_high: b_descriptor.high_word(),
        a_descriptor,
        b_descriptor,
        stage_desc_units: stage_bytes / 16,
        descriptor_address_mask: format!("{:#x}", descriptor::START_ADDRESS_MASK),
        wgmma_instruction,
        accumulators: g.accumulators(),
        persistent: TileWalk::of(
            spec.schedule,
            gemm_dsl::Tile {
                m: walk_tile_m,
                n: walk_tile_n,
                k: spec.tile.k,
            },
            true,
        ),
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
        scale: spec.scale,
        bias: spec.bias,
        aux: spec.aux,
        stream_k: StreamK::of(g),
        k_steps,
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
        params.extend(epilogue_params(self.scale, self.bias, self.aux));
        params
    }

    /// The `m64nNk16` HGMMA with the input type as nvdisasm prints it:
    /// `HGMMA.64x256x16.F32.BF16` for bf16, `HGMMA.64x256x16.F32` for f16.
    pub fn hgmma_variant(&self) -> &'static str {
        let suffix = if self.dtype == "bf16" { ".BF16" } else { "" };
        hgmma_variant(self.block_n, suffix)
    }
}

/// The Hopper kernel's SASS: TMA loads, mbarrier traffic, the HGMMA shape, `setmaxnreg`
/// where the registers are split.
pub fn sass_promises(plan: &WgmmaPlan) -> Vec<SassCheck> {
    let mut checks = vec![
        SassCheck::Present(Opcode::Utmaldg),
        SassCheck::Present(Opcode::Syncs),
        SassCheck::Absent(Opcode::Ldgsts),
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

/// HGMMA of the kernel's exact shape and type (f16 has no type suffix, so only the exact
/// opcode tells it from bf16).
pub fn math_promises(plan: &WgmmaPlan) -> Vec<SassCheck> {
    let variant = plan.hgmma_variant();
    vec![
        SassCheck::Present(Opcode::Hgmma),
        if plan.dtype == "f16" {
            SassCheck::PresentExact(variant)
        } else {
            SassCheck::PresentVariant(variant)
        },
    ]
}

/// `HGMMA.64x{n}x16.F32{type_suffix}` as a `'static` string (SASS promises are plain data):
/// each distinct variant, at most one per legal N and type, is made once per process.
fn hgmma_variant(n: u32, type_suffix: &str) -> &'static str {
    static VARIANTS: OnceLock<Mutex<HashMap<String, &'static str>>> = OnceLock::new();
    let text = format!("HGMMA.{WGMMA_M}x{n}x{WGMMA_K}.F32{type_suffix}");
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
