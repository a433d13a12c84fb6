//! Plan of the SIMT family (`mma: fma`): warp-tiled FFMA over f32.
//!
//! Shared memory holds, per stage, A and B as they lie in global memory ([`StoredTile`]), so
//! that 16-byte `cp.async` copies along each operand's contiguous dimension land whole: a
//! row-major A as `BM` rows of `BK`, a column-major A as `BK` lines of `BM`, a row-major B as
//! `BK` rows of `BN`, a column-major B in column quarters (see below). Lines are padded by
//! `pad(N)`.
//!
//! A warp's lanes form a 4 x 8 grid; lane (r, c) owns accumulator rows
//! `warp_m·WTM + r·TM + i` and column groups `warp_n·WTN + 4c + 32j`. The 8 lanes of a 128-bit
//! read phase share a lane row, so A reads broadcast; B reads of the 8 lane columns must hit
//! 8 different 16-byte bank groups.
//! - Row-major A: per group of four k, one 16-byte vector (4 k) per thread row.
//! - Column-major A: per k, the thread's TM consecutive rows as vectors of 4 (or 2, or 1).
//! - Row-major B: per k, the thread's TN columns as TN/4 vectors, 128 consecutive bytes per
//!   phase.
//! - Column-major B: per group of four k, one vector (4 k) per thread column. A column-major
//!   B tile holds, per group of four k, a group row of four quarters; the 16-byte chunk of
//!   column `n` sits at chunk `n / 4` of quarter `n % 4`, so the lane columns, whose columns
//!   lie 4 apart, read 8 consecutive chunks: conflict-free.

pub mod consumer;
pub mod copy;
pub mod epilogue;
mod explain;
mod probe;
pub mod write;

use crate::plan::batch::BatchPlan;
use crate::plan::copy::CopyAddressing;
use crate::plan::edges::{CopyVector, StagingWord};
use crate::plan::epilogue::FusedEpilogue;
use crate::plan::pipeline::CopyPipeline;
use crate::plan::{conflict_degree, conflict_degree_for, BankReport, LaunchContract, Ring};
use consumer::{consumer, StageLayout};
pub use consumer::{Consumer, Fma, FmaBlock, KGroup, KStep, VectorLoad};
use copy::operand_copy;
pub use copy::{OperandCopy, Quarters};
use epilogue::epilogue;
pub use epilogue::Epilogue;
use gemm_dsl::abi::{epilogue_params, KernelParam, Opcode, SassCheck, GEMM_PARAMS};
use gemm_dsl::family::simt::{SimtGeometry, SIMT_B_QUARTERS, SIMT_COLUMN_GROUP, SIMT_LANE_COLS};
use gemm_dsl::geometry::{StoredTile, COPY_VECTOR_BYTES};
use gemm_dsl::ValidSpec;
use serde::Serialize;

/// Bytes of one f32.
const F32_BYTES: u32 = 4;
/// Blocks below this many threads get an explicit register limit (see `max_registers`).
const SMALL_BLOCK_THREADS: u32 = 256;
/// k values one A vector read covers (16 bytes of f32).
const K_PER_A_VECTOR: u32 = COPY_VECTOR_BYTES / F32_BYTES;
/// Bytes from one of a thread's column groups to its next: lane column groups are 4 floats
/// wide and interleave across the 8 lane columns.
const COLUMN_GROUP_STRIDE_BYTES: u32 = SIMT_LANE_COLS * SIMT_COLUMN_GROUP * F32_BYTES;

/// Every number the SIMT template prints.
#[derive(Clone, Debug, Serialize)]
pub struct SimtPlan {
    /// The validated geometry the plan was made from (for `explain`; templates never read it).
    #[serde(skip)]
    pub geometry: SimtGeometry,
    pub threads: u32,
    /// `.maxnreg` for blocks of fewer than eight warps: for those, ptxas otherwise aims at an
    /// occupancy its register cap cannot keep and spills (seen at 32, 64 and 128 threads). Larger
    /// blocks keep ptxas's own choice, which measured faster (128 instead of 138 registers
    /// for 128x128x8: two blocks per SM instead of one).
    pub max_registers: Option<u32>,
    pub element_bytes: u32,
    /// Bytes of one operand copy: 16, or the spec's narrower `vector`.
    pub vector_bytes: u32,
    /// Bytes of one C store: four accumulators (16 bytes), or as many as the spec's
    /// narrower copy vector holds, so C's rows need only the vector's alignment.
    pub c_store_bytes: u32,
    pub block_m: u32,
    pub block_n: u32,
    pub block_k: u32,
    /// How A and B lie in memory, for the kernel's header comment (`all row-major` for rr).
    pub layout_note: String,
    /// The ring, copy path and vector, and each operand's copies (flattened: templates read
    /// `p.smem`, `p.a_src`, ..).
    #[serde(flatten)]
    pub pipeline: CopyPipeline<OperandCopy>,
    /// The product of a strided batch the block computes, and its operands' strides.
    pub batch: BatchPlan,
    /// The math and the epilogue are large; the PTX writer hands them to the templates on
    /// their own so that partials called per copy don't carry (and clone) them.
    #[serde(skip)]
    pub consumer: Consumer,
    #[serde(skip)]
    pub epilogue: Epilogue,
    /// `scale`, `bias`, `activation`: the math on the accumulators, row by row before each
    /// row's stores.
    pub fused: Option<FusedEpilogue>,
    #[serde(skip)]
    pub epilogue_params: Vec<KernelParam>,
}

pub fn plan(valid: &ValidSpec, g: &SimtGeometry) -> SimtPlan {
    let spec = &valid.spec;
    let tile = spec.tile;
    let pad = spec.swizzle.pad_bytes();
    let (a_stored, b_stored) = StoredTile::of(tile, spec.layout);
    let a_row_bytes = a_stored.line_elements * F32_BYTES + pad;
    let b_row_bytes = b_stored.line_elements * F32_BYTES + pad;
    let a_tile_bytes = a_stored.lines * a_row_bytes;
    let smem = Ring::cp_async(valid.smem.bytes_per_stage(), spec.stages);
    let a_row_major = !a_stored.lines_are_k;
    let b_row_major = b_stored.lines_are_k;
    // Column quarters of BN / 4 chunks each, padded by pad(N).
    let copy_vector = CopyVector::new(g.a_copy.vector_bytes, StagingWord::F32);
    let b_quarters = (!b_row_major).then(|| {
        let quarter_bytes = tile.n / SIMT_B_QUARTERS * COPY_VECTOR_BYTES + pad;
        Quarters {
            quarter_bytes,
            group_bytes: SIMT_B_QUARTERS * quarter_bytes,
            vectors_in_chunk: g.b_copy.vector_bytes < COPY_VECTOR_BYTES,
        }
    });

    let a_copy = operand_copy(&g.a_copy, &copy_vector, g.threads, a_row_bytes, None, 0, 0);
    let b_copy = operand_copy(
        &g.b_copy,
        &copy_vector,
        g.threads,
        b_row_bytes,
        b_quarters,
        a_tile_bytes,
        g.a_copy.copies_per_thread,
    );

    let consumer = consumer(
        g,
        tile.k,
        &StageLayout {
            a_row_major,
            b_row_major,
            a_row_bytes,
            b_row_bytes,
            b_quarters,
        },
    );
    let (epilogue, c_store_bytes, fused_rows) = epilogue(g, &copy_vector, spec.c_store);
    let fused = FusedEpilogue::of(spec, &fused_rows, c_store_bytes);

    let batch = BatchPlan::new(spec.schedule, F32_BYTES, F32_BYTES);
    SimtPlan {
        geometry: *g,
        threads: g.threads,
        max_registers: (g.threads < SMALL_BLOCK_THREADS).then_some(valid.registers.limit),
        element_bytes: F32_BYTES,
        vector_bytes: copy_vector.bytes,
        c_store_bytes,
        block_m: tile.m,
        block_n: tile.n,
        block_k: tile.k,
        layout_note: crate::plan::layout_note(spec.layout, spec.c_layout),
        pipeline: CopyPipeline::new(
            spec,
            (g.copy, copy_vector, CopyAddressing::PointerPerCopy),
            smem,
            (a_stored, b_stored),
            (a_copy, b_copy),
            g.a_copy.copies_per_thread + g.b_copy.copies_per_thread,
            &batch,
        ),
        batch,
        consumer,
        epilogue,
        fused,
        epilogue_params: epilogue_params(spec),
    }
}

/// The SIMT kernel's SASS: its copy path, FFMA, and LDS for the shared-memory reads.
pub fn sass_promises(p: &SimtPlan) -> Vec<SassCheck> {
    let mut checks = p.pipeline.copy.sass_promises().to_vec();
    checks.extend(math_promises());
    checks.push(SassCheck::Present(Opcode::Lds));
    checks
}

pub fn math_promises() -> Vec<SassCheck> {
    vec![SassCheck::Present(Opcode::Ffma)]
}

impl SimtPlan {
    pub fn launch_contract(&self) -> LaunchContract {
        LaunchContract {
            tile_k: self.block_k,
            operand_align_bytes: self.vector_bytes,
            output_align_bytes: self.c_store_bytes,
            params: [GEMM_PARAMS, &self.epilogue_params].concat(),
            partial_tiles: true,
            cluster: (1, 1),
            workspace_bytes_per_block: 0,
        }
    }

    /// Bank-conflict degree of the warp's shared-memory accesses (warp 0, first of each kind).
    pub fn bank_conflicts(&self) -> Vec<BankReport> {
        let lanes = 0..32u32;
        let c = &self.consumer;
        let a_read: Vec<u32> = lanes
            .clone()
            .map(|lane| (lane / c.lane_cols) * c.a_lane_row_bytes)
            .collect();
        let b_read: Vec<u32> = lanes
            .clone()
            .map(|lane| (lane % c.lane_cols) * c.b_lane_col_bytes)
            .collect();
        let vb = self.vector_bytes;
        let copy_write = |copy: &OperandCopy| -> u32 {
            let addresses: Vec<u32> = lanes
                .clone()
                .map(|t| {
                    copy.byte_offset(t / copy.vectors_per_row, (t % copy.vectors_per_row) * vb)
                })
                .collect();
            conflict_degree_for(&addresses, vb)
        };
        vec![
            BankReport {
                access: "A fragment read (ld.shared.v4)",
                degree: conflict_degree(&a_read),
            },
            BankReport {
                access: "B fragment read (ld.shared.v4)",
                degree: conflict_degree(&b_read),
            },
            BankReport {
                access: copy_write_label('A', vb),
                degree: copy_write(&self.pipeline.a_src.copy),
            },
            BankReport {
                access: copy_write_label('B', vb),
                degree: copy_write(&self.pipeline.b_src.copy),
            },
        ]
    }
}

/// The bank report's name for an operand's copy writes of `vector_bytes`.
pub fn copy_write_label(operand: char, vector_bytes: u32) -> &'static str {
    match (operand, vector_bytes) {
        ('A', 16) => "A tile write (16-byte copies)",
        ('A', 8) => "A tile write (8-byte copies)",
        ('A', 4) => "A tile write (4-byte copies)",
        ('A', _) => "A tile write (2-byte copies)",
        (_, 16) => "B tile write (16-byte copies)",
        (_, 8) => "B tile write (8-byte copies)",
        (_, 4) => "B tile write (4-byte copies)",
        _ => "B tile write (2-byte copies)",
    }
}

#[cfg(test)]
mod tests;
