//! Plan of the Ampere tensor-core family (`mma: mma_sync`).
//!
//! Per stage, shared memory holds A and B in their global layout ([`StoredTile`]: a row-major
//! A as `BM` rows of `BK`, a column-major A as `BK` lines of `BM`; a row-major B as `BK` rows
//! of `BN`, a column-major B as `BN` lines of `BK`), with 16-byte chunks placed by one
//! [`SmemSwizzle`] per operand over its stored lines, so 16-byte `cp.async` copies land in
//! place and the same function tells the readers where they went.
//!
//! Warp `(warp_m, warp_n)` owns a `WM x WN` warp tile of `WM/16 x WN/8` mma tiles. Per k step
//! (16 k for f16/bf16, 8 k for tf32; 32 bytes of a K-contiguous line either way) it loads:
//! - A row-major with one `ldmatrix.x4` per 16 rows: lane `l` addresses row `l % 16`, chunk
//!   `l / 16`, so the four 8x8 matrices are (rows 0-7, k-chunk 0), (rows 8-15, chunk 0),
//!   (rows 0-7, chunk 1), (rows 8-15, chunk 1): exactly registers a0..a3 of the mma A
//!   fragment (for tf32 an 8x8 b16 matrix is 8 rows x 4 tf32, and the same four matrices are
//!   a0..a3 of m16n8k8).
//! - B row-major (f16/bf16) with one `ldmatrix.x4.trans` per 16 columns: lane `l` addresses
//!   k row `l % 16`, n chunk `l / 16`; the transposed matrices give b0, b1 of two n8 tiles.
//! - B row-major (tf32) with `ld.shared.b32`: lane `(g, t) = (l / 4, l % 4)` reads k rows `t`
//!   and `t + 4` of column `g` of each n8 tile (ldmatrix has no 32-bit transpose).
//! - A column-major is read as B row-major is, with M in place of N: `ldmatrix.x4.trans` over
//!   16 k lines by two m chunks, whose matrices (k 0-7, m 0-7), (k 8-15, m 0-7), (k 0-7,
//!   m 8-15), (k 8-15, m 8-15) are a0, a2, a1, a3; tf32 by `ld.shared.b32`, lane `(g, t)`
//!   reading k line `t` (`t + 4` for a2, a3) at m `g` (`g + 8` for a1, a3).
//! - B column-major is read as A row-major is, with N in place of M: one `ldmatrix.x4` per
//!   16 columns over lines `l % 16`, k chunk `l / 16`, whose matrices are b0 of n8 tiles
//!   `2j`, `2j + 1`, then b1 of both (for tf32 too: a matrix is 8 columns x 4 tf32 of k).
//!
//! Then `WM/16 x WN/8` mma instructions accumulate in f32. The epilogue writes each
//! accumulator pair (row `g`, columns `2t, 2t+1`) as one 8-byte f32 store or, converted with
//! round-to-nearest-even to a packed bf16x2/f16x2, one 4-byte store.
//!
//! `stages: 1` loads, waits and computes in turn; `copy: sync` with 2 or more stages holds
//! the next tile in registers across the math (the SIMT family's pipelines). The cp.async
//! ring (2 or more stages) keeps fragments one k step ahead of the math in two alternating
//! register sets: a prologue of `stages - 1` groups, then per k tile the copies of tile
//! `k + stages - 1` into the stage tile `k - 1` used and one commit (empty past the end of
//! K) at k step 0, and `wait_group stages - 2` plus `bar.sync` before the last k step, after
//! which the next tile's first fragments load while the last k step computes. One barrier
//! per tile both publishes tile `k + 1` and retires every read of tile `k - 1`'s stage.
//!
//! Edges: a block whose tile crosses M or N, and every block's partial last k tile, copy out
//! of line through bounded copies. On a cp.async ring with tiles of at most 64 rows, a block
//! that crosses M only copies its whole k tiles out of line with A's lines past M skipped
//! (bounds worked out once per tile) and B's copies unchanged: decode's M of a few rows puts
//! every block there ([`MmaSyncPlan::rows_edge_copies`]).
//!
//! Every shared-memory address is `(base ^ xor) + offset`: a per-thread base register
//! computed once from the thread's lane and warp through the swizzle, XORed with one of a few
//! constants, plus an immediate ([`decompose`] finds them and the tests prove they are exact
//! for every thread).

mod banks;
pub mod copy;
pub mod epilogue;
mod explain;
pub mod fragments;
mod probe;
pub mod write;

use copy::tile_copy;
pub use copy::TileCopy;
use epilogue::staged_epilogue_addresses;
pub use epilogue::{accumulator_position, MmaEpilogue};
use fragments::FragmentPlan;
pub use fragments::{
    ldmatrix_conflict_degree, read_kinds, FragLoad, FragmentReads, MmaKStep, MmaOp, ReadKind,
};

use crate::plan::batch::BatchPlan;
use crate::plan::copy::CopyAddressing;
use crate::plan::edges::{CopyVector, StagingWord};
use crate::plan::epilogue::FusedEpilogue;
use crate::plan::pipeline::CopyPipeline;
use crate::plan::schedule::TileWalk;
use crate::plan::swizzle::{decompose, SmemSwizzle, XorOffset};
use crate::plan::{LaunchContract, PlanCopy, Ring};
use gemm_dsl::abi::{epilogue_params, KernelParam, Opcode, SassCheck, GEMM_PARAMS};
use gemm_dsl::family::mma_sync::{MmaInput, MmaSyncGeometry};
use gemm_dsl::geometry::StoredTile;
use gemm_dsl::{DType, GemmSpec, ValidSpec};
use serde::Serialize;

/// Bytes of A (or of a B column block) one mma k step consumes per row: 16 f16/bf16 or 8 tf32.
const K_STEP_BYTES: u32 = 32;

/// Every number the mma.sync template prints.
#[derive(Clone, Debug, Serialize)]
pub struct MmaSyncPlan {
    /// The validated geometry the plan was made from (for `explain`; templates never read it).
    #[serde(skip)]
    pub geometry: MmaSyncGeometry,
    pub threads: u32,
    /// `.maxnreg`: the per-thread register limit of the block size. Without it ptxas may aim
    /// for a higher occupancy than the kernel's registers allow, and spill.
    pub max_registers: u32,
    pub dtype: &'static str,
    pub out_dtype: &'static str,
    /// How A and B lie in memory, for the kernel's header comment (`all row-major` for rr).
    pub layout_note: String,
    /// The ring, copy path and vector, and each operand's copies (flattened: templates read
    /// `p.smem`, `p.a_src`, ..).
    #[serde(flatten)]
    pub pipeline: CopyPipeline<TileCopy>,
    /// Where the lanes' fragment reads start, for the kernel's comment.
    pub fragment_note: String,
    pub in_bytes: u32,
    pub out_bytes: u32,
    /// Bytes of one operand copy: 16, or the spec's narrower `vector`.
    pub vector_bytes: u32,
    /// Bytes of C's widest store: 16-byte row segments when staged through shared memory,
    /// else an accumulator pair; never wider than the copy vector (nor narrower than one
    /// element), so C's rows need only the vector's alignment.
    pub c_store_bytes: u32,
    pub block_m: u32,
    pub block_n: u32,
    pub block_k: u32,
    pub warp_cols: u32,
    pub warp_tile_m: u32,
    pub warp_tile_n: u32,
    pub m_frags: u32,
    pub n_frags: u32,
    pub k_steps: u32,
    /// The cp.async ring loads the next tile's first fragments between the barrier and the
    /// last k step's math. Fragment sets alternate per k step, so this needs an even number
    /// of k steps (the next tile's step 0 reuses the set of the current tile's step 0).
    pub prefetch_across_barrier: bool,
    /// A block whose tile crosses M but not N copies its whole k tiles with A's copies
    /// bounded and B's as in the main loop, rather than every copy bounded: decode (M of a
    /// few rows) runs every block on that path. Tiles of at most
    /// [`ROWS_EDGE_MAX_TILE_M`] rows on a cp.async ring: a taller tile has few such blocks, and
    /// the second out-of-line path costs registers that its accumulators may need.
    pub rows_edge_copies: bool,
    /// The mma instruction, e.g. `mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32`.
    pub mma_instruction: String,
    /// tf32: inputs are f32 bit patterns, rounded with `cvt.rna.tf32.f32` before the mma.
    pub round_tf32: bool,
    pub a_read: FragmentReads,
    pub b_read: FragmentReads,
    pub accumulators: u32,
    pub a_fragment_registers: u32,
    pub b_fragment_registers: u32,
    /// The conversion that packs two f32 into one 32-bit word of the output type, or empty
    /// for f32 output.
    pub pack_instruction: &'static str,
    /// `schedule: persistent`: the block's walk over output tiles; `None` for one tile per
    /// block.
    pub persistent: Option<TileWalk>,
    /// The product of a strided batch the block (or the tile walk) is at, and its operands'
    /// strides.
    pub batch: BatchPlan,
    /// The math and the epilogue, handed to the templates on their own.
    #[serde(skip)]
    pub k_steps_plan: Vec<MmaKStep>,
    #[serde(skip)]
    pub epilogue: MmaEpilogue,
    /// `scale`, `bias`, `activation`: the math on the accumulators, per row (direct stores)
    /// or per band (staged stores) before they are stored.
    pub fused: Option<FusedEpilogue>,
    #[serde(skip)]
    pub epilogue_params: Vec<KernelParam>,
}

fn registers(prefix: &str, indices: impl IntoIterator<Item = u32>) -> String {
    indices
        .into_iter()
        .map(|i| format!("%{prefix}{i}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Adds `xor` to the list of bases if new; returns its index.
fn base_slot(bases: &mut Vec<u32>, xor: u32) -> usize {
    bases.iter().position(|&b| b == xor).unwrap_or_else(|| {
        bases.push(xor);
        bases.len() - 1
    })
}

/// Decomposes `target` against `base` (per thread) or panics: validation only admits layouts
/// whose accesses decompose, and the tests sweep them.
fn must_decompose(base: &[u32], target: &[u32], what: &str) -> XorOffset {
    decompose(base, target).unwrap_or_else(|| {
        panic!("{what}: shared-memory addresses do not decompose as (base ^ xor) + offset")
    })
}

/// The plan of a validated mma.sync spec: copies ([`copy`]), fragment reads and math
/// ([`fragments`]), the epilogue ([`epilogue`]), the ring and the tile walk.
pub fn plan(valid: &ValidSpec, g: &MmaSyncGeometry) -> MmaSyncPlan {
    let spec = &valid.spec;
    let tile = spec.tile;
    let element = spec.dtype.size_bytes();
    let tf32 = spec.dtype == DType::Tf32;
    let (a_stored, b_stored) = StoredTile::of(tile, spec.layout);
    let a_swizzle = SmemSwizzle::new(spec.swizzle, a_stored.line_elements * element);
    let b_swizzle = SmemSwizzle::new(spec.swizzle, b_stored.line_elements * element);
    let a_tile_bytes = a_stored.lines * a_swizzle.pitch;
    let smem = Ring::cp_async(valid.smem.bytes_per_stage(), spec.stages);

    let copy_vector = CopyVector::new(g.a_copy.vector_bytes, StagingWord::B32);
    let a_copy = tile_copy(&g.a_copy, &copy_vector, element, g.threads, a_swizzle, 0, 0);
    let b_copy = tile_copy(
        &g.b_copy,
        &copy_vector,
        element,
        g.threads,
        b_swizzle,
        a_tile_bytes,
        g.a_copy.copies_per_thread,
    );

    let out_bytes = spec.out.size_bytes();
    let fragments = FragmentPlan::new(spec, g, (a_stored, b_stored), (a_swizzle, b_swizzle));
    let (epilogue, c_store_bytes) = MmaEpilogue::new(spec, g, copy_vector.bytes, &smem);
    let fused = FusedEpilogue::of(spec, &epilogue.fused_segments(), c_store_bytes);
    // Partial edge tiles: the tile counts round up.
    let persistent = TileWalk::of(spec.schedule, tile, true, false);

    let input = g.shape.input.name();
    let mma_instruction = format!(
        "mma.sync.aligned.m{}n{}k{}.row.col.f32.{input}.{input}.f32",
        g.shape.m, g.shape.n, g.shape.k
    );
    let pack_instruction = match spec.out {
        DType::Bf16 => "cvt.rn.bf16x2.f32",
        DType::F16 => "cvt.rn.f16x2.f32",
        DType::F32 | DType::Tf32 => "",
        DType::E4m3 | DType::E5m2 => unreachable!("fp8 is an input type only (validated)"),
    };

    let batch = BatchPlan::new(spec.schedule, element, out_bytes);
    MmaSyncPlan {
        geometry: *g,
        threads: g.threads,
        max_registers: valid.registers.limit,
        dtype: spec.dtype.name(),
        out_dtype: spec.out.name(),
        layout_note: crate::plan::layout_note(spec.layout, spec.c_layout),
        fragment_note: fragments.note,
        in_bytes: element,
        out_bytes,
        vector_bytes: copy_vector.bytes,
        c_store_bytes,
        block_m: tile.m,
        block_n: tile.n,
        block_k: tile.k,
        warp_cols: g.warps.cols,
        warp_tile_m: g.warp_tile_m,
        warp_tile_n: g.warp_tile_n,
        m_frags: g.m_frags,
        n_frags: g.n_frags,
        k_steps: g.k_steps,
        prefetch_across_barrier: g.k_steps.is_multiple_of(2),
        rows_edge_copies: matches!(g.copy, gemm_dsl::ThreadCopy::CpAsync { .. })
            && spec.stages > 1
            && tile.m <= ROWS_EDGE_MAX_TILE_M,
        pipeline: CopyPipeline::new(
            spec,
            (g.copy, copy_vector, CopyAddressing::SteppedPointer),
            smem,
            (a_stored, b_stored),
            (a_copy, b_copy),
            g.a_copy.copies_per_thread + g.b_copy.copies_per_thread,
            &batch,
        ),
        mma_instruction,
        round_tf32: tf32,
        a_read: fragments.a_read,
        b_read: fragments.b_read,
        accumulators: g.accumulators(),
        a_fragment_registers: 2 * fragments.a_registers_per_set,
        b_fragment_registers: 2 * fragments.b_registers_per_set,
        pack_instruction,
        persistent,
        batch,
        k_steps_plan: fragments.k_steps,
        epilogue,
        fused,
        epilogue_params: epilogue_params(spec),
    }
}

/// The tallest tile whose M-edge blocks bound only A's copies ([`MmaSyncPlan::rows_edge_copies`]).
pub const ROWS_EDGE_MAX_TILE_M: u32 = 64;

/// The mma.sync kernel's SASS: its copy path, the HMMA shape of its input type, and the
/// ldmatrix forms its layout reads fragments with (`.MT88`, transposed, for 16-bit operands
/// stored along K).
pub fn sass_promises(p: &MmaSyncPlan, spec: &GemmSpec) -> Vec<SassCheck> {
    let copy = p.pipeline.copy;
    let mut checks = copy.sass_promises().to_vec();
    checks.extend(math_promises(p));
    let kinds = read_kinds(spec);
    let reads = |kind| kinds.0 == kind || kinds.1 == kind;
    if reads(ReadKind::Ldmatrix) || reads(ReadKind::LdmatrixTrans) {
        checks.push(SassCheck::Present(Opcode::Ldsm));
    }
    if reads(ReadKind::Ldmatrix) {
        checks.push(SassCheck::PresentVariant("LDSM.16.M88.4"));
    }
    if reads(ReadKind::LdmatrixTrans) {
        checks.push(SassCheck::PresentVariant("LDSM.16.MT88.4"));
    }
    if copy == PlanCopy::CpAsync {
        checks.push(SassCheck::Present(Opcode::Depbar));
    }
    checks
}

/// HMMA with the instruction shape and input type.
pub fn math_promises(p: &MmaSyncPlan) -> Vec<SassCheck> {
    vec![
        SassCheck::Present(Opcode::Hmma),
        match p.geometry.shape.input {
            MmaInput::Tf32 => SassCheck::PresentVariant("HMMA.1688.F32.TF32"),
            // nvdisasm names no input type for f16 inputs with f32 accumulators: only the
            // exact opcode tells it from the bf16 form.
            MmaInput::F16 => SassCheck::PresentExact("HMMA.16816.F32"),
            MmaInput::Bf16 => SassCheck::PresentVariant("HMMA.16816.F32.BF16"),
        },
    ]
}

impl MmaSyncPlan {
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
}

#[cfg(test)]
mod tests;
