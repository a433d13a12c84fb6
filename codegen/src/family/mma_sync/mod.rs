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
//! Every shared-memory address is `(base ^ xor) + offset`: a per-thread base register
//! computed once from the thread's lane and warp through the swizzle, XORed with one of a few
//! constants, plus an immediate ([`decompose`] finds them and the tests prove they are exact
//! for every thread).

mod explain;
mod probe;
pub mod write;

use crate::plan::batch::BatchPlan;
use crate::plan::edges::{
    c_global_store, c_store_bytes, chunk_words, last_byte, ChunkWord, CopyVector, OperandSource,
};
use crate::plan::schedule::TileWalk;
use crate::plan::swizzle::{decompose, SmemSwizzle, XorOffset};
use crate::plan::{
    conflict_degree, conflict_degree_for, BankReport, LaunchContract, PlanCopy, SmemLayout,
};
use gemm_dsl::abi::{Opcode, SassCheck, GEMM_PARAMS};
use gemm_dsl::family::mma_sync::{EpilogueSlab, MmaSyncGeometry, EPILOGUE_BAND_ROWS};
use gemm_dsl::geometry::{CopyGeometry, StoredTile, COPY_VECTOR_BYTES};
use gemm_dsl::{DType, GemmSpec, Layout, Schedule, ValidSpec};
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
    pub layout_note: &'static str,
    /// Where the lanes' fragment reads start, for the kernel's comment.
    pub fragment_note: String,
    pub in_bytes: u32,
    pub out_bytes: u32,
    /// Bytes of one operand copy: 16, or the spec's narrower `vector`.
    pub vector_bytes: u32,
    /// The copy vector's instructions (`copy: sync`) and bounds.
    pub vector: CopyVector,
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
    pub smem: SmemLayout,
    pub copy: PlanCopy,
    /// `cp.async` cache qualifier (`cg` or `ca`); empty for `copy: sync`.
    pub cache_hint: &'static str,
    /// Each operand's copies into shared memory, where they come from and how far they reach.
    pub a_src: OperandSource<TileCopy>,
    pub b_src: OperandSource<TileCopy>,
    /// Added to K before dividing by BK: a partial last k tile counts.
    pub k_round_up: u32,
    /// Registers that stage one tile in flight for `copy: sync`.
    pub staging_registers: u32,
    /// The mma instruction, e.g. `mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32`.
    pub mma_instruction: &'static str,
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
}

/// How one operand's tile is copied: thread `t`'s first 16-byte vector is row
/// `t / vectors_per_row`, chunk `t % vectors_per_row` (the copy base); its `i`-th copy is
/// vector `t + i·threads`, addressed in shared memory from one of the `bases`.
#[derive(Clone, Debug, Serialize)]
pub struct TileCopy {
    pub vectors_per_row: u32,
    pub swizzle: SmemSwizzle,
    /// Offset of this operand inside a stage.
    pub smem_tile_offset: u32,
    /// XOR constants of the per-thread shared-memory base registers.
    pub bases: Vec<u32>,
    pub copies: Vec<TileCopyOp>,
}

#[derive(Clone, Debug, Serialize)]
pub struct TileCopyOp {
    /// The global step from the previous copy is `ld · ld_step_scale` bytes: the rows below
    /// the previous copy's row times the element size. One `mad.wide.u32` of the 32-bit
    /// leading dimension takes it, where a 64-bit byte stride would take three instructions.
    pub ld_step_scale: u32,
    /// Bytes right of the thread's first vector.
    pub global_col_bytes: u32,
    /// Index into `TileCopy::bases` and the immediate after it.
    pub base: usize,
    pub smem_offset: u32,
    /// Rows below the thread's first (the bounded copies check them against the matrix), and
    /// the global step to them from the first, `ld · ld_scale` bytes.
    pub rows: u32,
    pub ld_scale: u32,
    /// The staging registers of `copy: sync` as the load's and store's operand (braced when
    /// more than one).
    pub staging: String,
    pub staging_registers: Vec<String>,
    /// The same registers word by word, for a vector that crosses the matrix's edge.
    pub words: Vec<ChunkWord>,
}

/// How one operand's fragments are read from shared memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ReadKind {
    /// `ldmatrix.x4` over lines along M or N, 16-byte chunks along K: row-major A,
    /// column-major B.
    Ldmatrix,
    /// `ldmatrix.x4.trans` over lines along K (16-bit types): column-major A, row-major B.
    LdmatrixTrans,
    /// `ld.shared.b32` per register over lines along K (tf32, which no 32-bit
    /// `ldmatrix.trans` exists for).
    Scalar,
}

impl ReadKind {
    /// The read of an operand whose stored lines run along K or not, for `dtype`.
    pub fn of(lines_are_k: bool, dtype: DType) -> ReadKind {
        match (lines_are_k, dtype) {
            (false, _) => ReadKind::Ldmatrix,
            (true, DType::Tf32 | DType::F32) => ReadKind::Scalar,
            (true, _) => ReadKind::LdmatrixTrans,
        }
    }

    pub fn instruction(self) -> &'static str {
        match self {
            ReadKind::Ldmatrix => "ldmatrix.sync.aligned.m8n8.x4.shared.b16",
            ReadKind::LdmatrixTrans => "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16",
            ReadKind::Scalar => "ld.shared.b32",
        }
    }

    /// Bytes one lane's address covers: a 16-byte matrix row, or one 32-bit word.
    pub fn access_bytes(self) -> u32 {
        match self {
            ReadKind::Ldmatrix | ReadKind::LdmatrixTrans => COPY_VECTOR_BYTES,
            ReadKind::Scalar => 4,
        }
    }
}

/// Where a warp's lanes read fragments from, in the operand's stored lines: the base offset
/// of lane `l` of warp `(warp_m, warp_n)` is the swizzled position of line
/// `warp_m·warp_m_rows + warp_n·warp_n_rows + (l & lane_row_mask)`, byte column
/// `warp_m·warp_m_bytes + warp_n·warp_n_bytes + (l >> lane_col_shift)·lane_col_bytes`.
#[derive(Clone, Debug, Serialize)]
pub struct FragmentReads {
    pub kind: ReadKind,
    pub instruction: &'static str,
    /// ldmatrix takes its registers in braces, `ld.shared.b32` one bare register.
    pub vector: bool,
    pub swizzle: SmemSwizzle,
    pub smem_tile_offset: u32,
    pub warp_m_rows: u32,
    pub warp_n_rows: u32,
    pub warp_m_bytes: u32,
    pub warp_n_bytes: u32,
    pub lane_row_mask: u32,
    pub lane_col_shift: u32,
    pub lane_col_bytes: u32,
    /// XOR constants of the per-thread base registers.
    pub bases: Vec<u32>,
}

impl FragmentReads {
    /// The (row, byte column) lane `lane` of warp `(warp_m, warp_n)` starts from.
    pub fn lane_position(&self, warp_m: u32, warp_n: u32, lane: u32) -> (u32, u32) {
        (
            warp_m * self.warp_m_rows + warp_n * self.warp_n_rows + (lane & self.lane_row_mask),
            warp_m * self.warp_m_bytes
                + warp_n * self.warp_n_bytes
                + (lane >> self.lane_col_shift) * self.lane_col_bytes,
        )
    }

    /// The reads of an operand of `kind` whose tile starts `smem_tile_offset` bytes into a
    /// stage, with warp `(warp_m, warp_n)` starting `warp_rows` lines and `warp_bytes` bytes
    /// into it.
    fn new(
        kind: ReadKind,
        swizzle: SmemSwizzle,
        smem_tile_offset: u32,
        (warp_m_rows, warp_n_rows): (u32, u32),
        (warp_m_bytes, warp_n_bytes): (u32, u32),
    ) -> FragmentReads {
        // ldmatrix: lane l addresses line l % 16, chunk l / 16; ld.shared.b32: lane (g, t)
        // reads line t, word g.
        let (lane_row_mask, lane_col_shift, lane_col_bytes) = match kind {
            ReadKind::Ldmatrix | ReadKind::LdmatrixTrans => (15, 4, COPY_VECTOR_BYTES),
            ReadKind::Scalar => (3, 2, 4),
        };
        FragmentReads {
            kind,
            instruction: kind.instruction(),
            vector: kind != ReadKind::Scalar,
            swizzle,
            smem_tile_offset,
            warp_m_rows,
            warp_n_rows,
            warp_m_bytes,
            warp_n_bytes,
            lane_row_mask,
            lane_col_shift,
            lane_col_bytes,
            bases: Vec::new(),
        }
    }

    /// The tile-relative base offset, exactly as the kernel computes it.
    pub fn lane_base(&self, warp_m: u32, warp_n: u32, lane: u32) -> u32 {
        let (row, col) = self.lane_position(warp_m, warp_n, lane);
        self.swizzle.byte_offset(row, col)
    }
}

/// One fragment load: registers, base register index and immediate offset.
#[derive(Clone, Debug, Serialize)]
pub struct FragLoad {
    pub registers: String,
    pub base: usize,
    pub offset: u32,
}

/// `mma.sync` with accumulators `d` (also C), A registers `a` and B registers `b`.
#[derive(Clone, Debug, Serialize)]
pub struct MmaOp {
    pub d: String,
    pub a: String,
    pub b: String,
}

/// One k step: fragment loads, tf32 rounding, then the warp tile's mma instructions.
#[derive(Clone, Debug, Serialize)]
pub struct MmaKStep {
    pub a_loads: Vec<FragLoad>,
    pub b_loads: Vec<FragLoad>,
    /// Registers rounded to tf32 in place.
    pub rounds: Vec<String>,
    /// Written by the PTX writer itself (see `ptx::mma_block`), not through the templates.
    #[serde(skip)]
    pub mmas: Vec<MmaOp>,
}

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

fn tile_copy(
    geometry: &CopyGeometry,
    vector: &CopyVector,
    element_bytes: u32,
    threads: u32,
    swizzle: SmemSwizzle,
    smem_tile_offset: u32,
    first_staging_vector: u32,
) -> TileCopy {
    let vpr = geometry.vectors_per_row;
    let vb = geometry.vector_bytes;
    let position = |vector: u32| (vector / vpr, vector % vpr);
    // A vector narrower than a chunk lands at its byte offset inside the swizzled chunk.
    let offsets = |i: u32| -> Vec<u32> {
        (0..threads)
            .map(|t| {
                let (row, at) = position(t + i * threads);
                swizzle.byte_offset(row, at * vb)
            })
            .collect()
    };
    let first = offsets(0);
    let mut bases = Vec::new();
    let mut previous_row = 0;
    let copies = (0..geometry.copies_per_thread)
        .map(|i| {
            // Thread t's i-th vector sits a thread-independent number of rows and columns from
            // its first (CopyGeometry::new checks the divisibility that makes it so).
            let (rows, cols) = position(i * threads);
            let ld_step_scale = (rows - previous_row) * element_bytes;
            previous_row = rows;
            let XorOffset { xor, offset } =
                must_decompose(&first, &offsets(i), "cp.async destination");
            let staging: Vec<String> = (0..vector.words)
                .map(|w| format!("%stage{}", vector.words * (first_staging_vector + i) + w))
                .collect();
            TileCopyOp {
                ld_step_scale,
                global_col_bytes: cols * vb,
                base: base_slot(&mut bases, xor),
                smem_offset: offset,
                rows,
                ld_scale: rows * element_bytes,
                staging: vector.operand(&staging),
                words: chunk_words(&staging, element_bytes, vb),
                staging_registers: staging,
            }
        })
        .collect();
    TileCopy {
        vectors_per_row: vpr,
        swizzle,
        smem_tile_offset,
        bases,
        copies,
    }
}

/// Per-thread base offsets of a fragment-read pattern, for every thread of the block.
fn read_bases(reads: &FragmentReads, g: &MmaSyncGeometry) -> Vec<u32> {
    (0..g.threads)
        .map(|t| {
            let warp = t / 32;
            reads.lane_base(warp / g.warps.cols, warp % g.warps.cols, t % 32)
        })
        .collect()
}

/// Decomposes one read whose lane `l` of warp `(wm, wn)` reads tile position `at(wm, wn, l)`
/// against the per-thread `base`, adding its XOR constant to `bases`.
fn read_load(
    bases: &mut Vec<u32>,
    base: &[u32],
    g: &MmaSyncGeometry,
    registers: String,
    at: impl Fn(u32, u32, u32) -> u32,
) -> FragLoad {
    let target: Vec<u32> = (0..g.threads)
        .map(|t| {
            let warp = t / 32;
            at(warp / g.warps.cols, warp % g.warps.cols, t % 32)
        })
        .collect();
    let XorOffset { xor, offset } = must_decompose(base, &target, "fragment read");
    FragLoad {
        registers,
        base: base_slot(bases, xor),
        offset,
    }
}

pub fn plan(valid: &ValidSpec, g: &MmaSyncGeometry) -> MmaSyncPlan {
    let spec = &valid.spec;
    let tile = spec.tile;
    let element = spec.dtype.size_bytes();
    let tf32 = spec.dtype == DType::Tf32;
    let (a_stored, b_stored) = StoredTile::of(tile, spec.layout);
    let a_swizzle = SmemSwizzle::new(spec.swizzle, a_stored.line_elements * element);
    let b_swizzle = SmemSwizzle::new(spec.swizzle, b_stored.line_elements * element);
    let a_tile_bytes = a_stored.lines * a_swizzle.pitch;
    let smem = SmemLayout::new(valid.smem.bytes_per_stage(), spec.stages);

    let copy_vector = CopyVector::new(g.a_copy.vector_bytes, "b32");
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
    let (copy, cache_hint) = PlanCopy::of(spec.copy);

    let (mi_count, ni_count) = (g.m_frags, g.n_frags);
    let (a_kind, b_kind) = read_kinds(spec);
    // A warp's first line and byte in each stored tile: along M (N) in lines where the lines
    // run along M (N), else in bytes.
    let a_warp = g.warp_tile_m * if a_stored.lines_are_k { element } else { 1 };
    let b_warp = g.warp_tile_n * if b_stored.lines_are_k { element } else { 1 };
    let (a_rows, a_bytes) = if a_stored.lines_are_k {
        ((0, 0), (a_warp, 0))
    } else {
        ((a_warp, 0), (0, 0))
    };
    let (b_rows, b_bytes) = if b_stored.lines_are_k {
        ((0, 0), (0, b_warp))
    } else {
        ((0, b_warp), (0, 0))
    };
    let mut a_read = FragmentReads::new(a_kind, a_swizzle, 0, a_rows, a_bytes);
    let mut b_read = FragmentReads::new(b_kind, b_swizzle, a_tile_bytes, b_rows, b_bytes);
    let a_base = read_bases(&a_read, g);
    let b_base = read_bases(&b_read, g);
    let fragment_note = fragment_note(&a_read, &b_read, spec.layout, g);
    let (mut a_bases, mut b_bases) = (Vec::new(), Vec::new());
    let a_regs_per_set = mi_count * 4;
    let b_regs_per_set = ni_count * 2;
    let fa = |set: u32, mi: u32, q: u32| set * a_regs_per_set + mi * 4 + q;
    let fb = |set: u32, ni: u32, h: u32| set * b_regs_per_set + ni * 2 + h;
    let k_lines_per_step = g.shape.k;
    let (a_reads, b_reads) = (&a_read, &b_read);
    let n_tile_bytes = g.shape.n * element;
    let m_tile_bytes = g.shape.m * element;

    let k_steps_plan: Vec<MmaKStep> = (0..g.k_steps)
        .map(|step| {
            let set = step % 2;
            // Stored (line, byte) of lane `lane` of warp (wm, wn) plus `(lines, bytes)`.
            let a_at = |lines: u32, bytes: u32| {
                move |wm: u32, wn: u32, lane: u32| {
                    let (row, col) = a_reads.lane_position(wm, wn, lane);
                    a_swizzle.byte_offset(row + lines, col + bytes)
                }
            };
            let b_at = |lines: u32, bytes: u32| {
                move |wm: u32, wn: u32, lane: u32| {
                    let (row, col) = b_reads.lane_position(wm, wn, lane);
                    b_swizzle.byte_offset(row + lines, col + bytes)
                }
            };
            let a_loads: Vec<FragLoad> = match a_kind {
                // 16 rows of M by the step's two k chunks: a0..a3.
                ReadKind::Ldmatrix => (0..mi_count)
                    .map(|mi| {
                        let regs = registers("fa", (0..4).map(|q| fa(set, mi, q)));
                        let at = a_at(mi * g.shape.m, step * K_STEP_BYTES);
                        read_load(&mut a_bases, &a_base, g, regs, at)
                    })
                    .collect(),
                // The step's 16 k lines by two chunks of M: matrices (k 0-7, m 0-7),
                // (k 8-15, m 0-7), (k 0-7, m 8-15), (k 8-15, m 8-15) are a0, a2, a1, a3.
                ReadKind::LdmatrixTrans => (0..mi_count)
                    .map(|mi| {
                        let regs = registers("fa", [0, 2, 1, 3].map(|q| fa(set, mi, q)));
                        let at = a_at(step * k_lines_per_step, mi * m_tile_bytes);
                        read_load(&mut a_bases, &a_base, g, regs, at)
                    })
                    .collect(),
                // tf32 a_q: k line t + 4·(q >> 1), m g + 8·(q & 1).
                ReadKind::Scalar => (0..mi_count)
                    .flat_map(|mi| (0..4).map(move |q| (mi, q)))
                    .map(|(mi, q)| {
                        let regs = registers("fa", [fa(set, mi, q)]);
                        let at = a_at(
                            step * k_lines_per_step + 4 * (q >> 1),
                            mi * m_tile_bytes + 8 * (q & 1) * element,
                        );
                        read_load(&mut a_bases, &a_base, g, regs, at)
                    })
                    .collect(),
            };
            let b_loads: Vec<FragLoad> = match b_kind {
                // 16 columns (lines) by the step's two k chunks: b0 of n8 tiles 2j and
                // 2j + 1, then b1 of both.
                ReadKind::Ldmatrix => (0..ni_count / 2)
                    .map(|j| {
                        let regs = registers(
                            "fb",
                            [
                                fb(set, 2 * j, 0),
                                fb(set, 2 * j + 1, 0),
                                fb(set, 2 * j, 1),
                                fb(set, 2 * j + 1, 1),
                            ],
                        );
                        let at = b_at(2 * j * g.shape.n, step * K_STEP_BYTES);
                        read_load(&mut b_bases, &b_base, g, regs, at)
                    })
                    .collect(),
                ReadKind::Scalar => (0..ni_count)
                    .flat_map(|ni| (0..2).map(move |h| (ni, h)))
                    .map(|(ni, h)| {
                        let regs = registers("fb", [fb(set, ni, h)]);
                        let at = b_at(step * k_lines_per_step + 4 * h, ni * n_tile_bytes);
                        read_load(&mut b_bases, &b_base, g, regs, at)
                    })
                    .collect(),
                ReadKind::LdmatrixTrans => (0..ni_count / 2)
                    .map(|j| {
                        // Matrices 0, 1: b0, b1 of n8 tile 2j; matrices 2, 3: of tile 2j + 1.
                        let regs = registers(
                            "fb",
                            [
                                fb(set, 2 * j, 0),
                                fb(set, 2 * j, 1),
                                fb(set, 2 * j + 1, 0),
                                fb(set, 2 * j + 1, 1),
                            ],
                        );
                        let at = b_at(step * k_lines_per_step, 2 * j * n_tile_bytes);
                        read_load(&mut b_bases, &b_base, g, regs, at)
                    })
                    .collect(),
            };
            let rounds = if tf32 {
                (0..mi_count)
                    .flat_map(|mi| (0..4).map(move |q| format!("%fa{}", fa(set, mi, q))))
                    .chain(
                        (0..ni_count)
                            .flat_map(|ni| (0..2).map(move |h| format!("%fb{}", fb(set, ni, h)))),
                    )
                    .collect()
            } else {
                Vec::new()
            };
            // Serpentine over n so consecutive mmas share an A or B fragment.
            let mmas = (0..mi_count)
                .flat_map(|mi| {
                    let columns: Vec<u32> = if mi % 2 == 0 {
                        (0..ni_count).collect()
                    } else {
                        (0..ni_count).rev().collect()
                    };
                    columns.into_iter().map(move |ni| (mi, ni))
                })
                .map(|(mi, ni)| {
                    let acc = (mi * ni_count + ni) * 4;
                    MmaOp {
                        d: registers("acc", acc..acc + 4),
                        a: registers("fa", (0..4).map(|q| fa(set, mi, q))),
                        b: registers("fb", (0..2).map(|h| fb(set, ni, h))),
                    }
                })
                .collect();
            MmaKStep {
                a_loads,
                b_loads,
                rounds,
                mmas,
            }
        })
        .collect();
    a_read.bases = a_bases;
    b_read.bases = b_bases;

    let out_bytes = spec.out.size_bytes();
    // C's stores are no wider than the copy vector (nor narrower than one element).
    let c_store_bytes = c_store_bytes(copy_vector.bytes, out_bytes);
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
    // Partial edge tiles: the tile counts round up.
    let persistent = TileWalk::of(spec.schedule, tile, true);

    let mma_instruction = match spec.dtype {
        DType::Bf16 => "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32",
        DType::F16 => "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32",
        DType::Tf32 => "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32",
        DType::F32 => unreachable!("validation rejects f32 inputs for mma_sync"),
    };
    let pack_instruction = match spec.out {
        DType::Bf16 => "cvt.rn.bf16x2.f32",
        DType::F16 => "cvt.rn.f16x2.f32",
        DType::F32 | DType::Tf32 => "",
    };

    // 16-byte row segments from the slabs, or accumulator pairs (8 bytes of f32, 4 of a
    // packed 16-bit pair) from the registers; either no wider than the copy vector.
    let c_store_bytes = if epilogue.staged.is_some() {
        c_store_bytes
    } else {
        c_store_bytes.min(2 * out_bytes)
    };
    let batch = BatchPlan::new(spec.schedule, element, out_bytes);
    MmaSyncPlan {
        geometry: *g,
        threads: g.threads,
        max_registers: valid.registers.limit,
        dtype: spec.dtype.name(),
        out_dtype: spec.out.name(),
        layout_note: crate::plan::layout_note(spec.layout),
        fragment_note,
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
        m_frags: mi_count,
        n_frags: ni_count,
        k_steps: g.k_steps,
        prefetch_across_barrier: g.k_steps.is_multiple_of(2),
        smem,
        copy,
        cache_hint,
        a_src: OperandSource::of("a", a_stored, tile.k, element, a_copy, &batch.a),
        b_src: OperandSource::of("b", b_stored, tile.k, element, b_copy, &batch.b),
        k_round_up: tile.k - 1,
        staging_registers: copy_vector.words
            * (g.a_copy.copies_per_thread + g.b_copy.copies_per_thread),
        vector: copy_vector,
        mma_instruction,
        round_tf32: tf32,
        a_read,
        b_read,
        accumulators: g.accumulators(),
        a_fragment_registers: 2 * a_regs_per_set,
        b_fragment_registers: 2 * b_regs_per_set,
        pack_instruction,
        persistent,
        batch,
        k_steps_plan,
        epilogue,
    }
}

/// How A and B fragments are read under the spec's layout and type.
pub fn read_kinds(spec: &GemmSpec) -> (ReadKind, ReadKind) {
    let (a, b) = StoredTile::of(spec.tile, spec.layout);
    (
        ReadKind::of(a.lines_are_k, spec.dtype),
        ReadKind::of(b.lines_are_k, spec.dtype),
    )
}

/// The kernel's comment on where the lanes' fragment reads start.
fn fragment_note(
    a: &FragmentReads,
    b: &FragmentReads,
    layout: Layout,
    g: &MmaSyncGeometry,
) -> String {
    let lane = |r: &FragmentReads| {
        format!(
            "line (l & {}), byte column (l >> {})*{}",
            r.lane_row_mask, r.lane_col_shift, r.lane_col_bytes
        )
    };
    if layout == Layout::RowRow {
        return format!(
            "A lane l of warp (warp_m, warp_n) reads row warp_m*{} + (l & {}), 16-byte chunk l >> {};\n\t// B lane l reads k row l & {}, byte column warp_n*{} + (l >> {})*{}.",
            g.warp_tile_m,
            a.lane_row_mask,
            a.lane_col_shift,
            b.lane_row_mask,
            b.warp_n_bytes,
            b.lane_col_shift,
            b.lane_col_bytes
        );
    }
    let warp = |r: &FragmentReads| {
        format!(
            "lines warp_m*{} + warp_n*{}, bytes warp_m*{} + warp_n*{}",
            r.warp_m_rows, r.warp_n_rows, r.warp_m_bytes, r.warp_n_bytes
        )
    };
    format!(
        "A ({}) lane l of warp (warp_m, warp_n) reads {}, from {};\n\t// B ({}) lane l reads {}, from {}.",
        a.instruction,
        lane(a),
        warp(a),
        b.instruction,
        lane(b),
        warp(b)
    )
}

/// The mma.sync kernel's SASS: its copy path, the HMMA shape of its input type, and the
/// ldmatrix forms its layout reads fragments with (`.MT88`, transposed, for 16-bit operands
/// stored along K).
pub fn sass_promises(spec: &GemmSpec) -> Vec<SassCheck> {
    let copy = PlanCopy::of(spec.copy).0;
    let mut checks = copy.sass_promises().to_vec();
    checks.extend(math_promises(spec));
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
pub fn math_promises(spec: &GemmSpec) -> Vec<SassCheck> {
    vec![
        SassCheck::Present(Opcode::Hmma),
        match spec.dtype {
            DType::Tf32 => SassCheck::PresentVariant("HMMA.1688.F32.TF32"),
            // nvdisasm names no input type for f16 inputs with f32 accumulators: only the
            // exact opcode tells it from the bf16 form.
            DType::F16 => SassCheck::PresentExact("HMMA.16816.F32"),
            _ => SassCheck::PresentVariant("HMMA.16816.F32.BF16"),
        },
    ]
}

impl MmaSyncPlan {
    pub fn launch_contract(&self) -> LaunchContract {
        LaunchContract {
            tile_k: self.block_k,
            operand_align_bytes: self.vector_bytes,
            output_align_bytes: self.c_store_bytes,
            params: GEMM_PARAMS.to_vec(),
            partial_tiles: true,
            cluster: (1, 1),
            workspace_bytes_per_block: 0,
        }
    }
}

fn staged_epilogue(
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
fn slab_stores(col: u32, out_bytes: u32, store_bytes: u32) -> Vec<SlabStore> {
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
fn staged_epilogue_addresses(e: &StagedEpilogue) -> (Vec<Vec<u32>>, Vec<Vec<u32>>) {
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

impl MmaSyncPlan {
    /// Per-lane tile-relative addresses of every access of one kind over the whole block: for
    /// each warp and each instruction, the 32 lanes' byte offsets.
    fn read_addresses(&self, reads: &FragmentReads, loads: &[&FragLoad]) -> Vec<Vec<u32>> {
        let warps = self.threads / 32;
        let mut all = Vec::new();
        for warp in 0..warps {
            let (wm, wn) = (warp / self.warp_cols, warp % self.warp_cols);
            for load in loads {
                let xor = reads.bases[load.base];
                all.push(
                    (0..32)
                        .map(|lane| (reads.lane_base(wm, wn, lane) ^ xor) + load.offset)
                        .collect(),
                );
            }
        }
        all
    }

    fn copy_addresses(&self, copy: &TileCopy) -> Vec<Vec<u32>> {
        let mut all = Vec::new();
        for warp in 0..self.threads / 32 {
            for op in &copy.copies {
                let xor = copy.bases[op.base];
                all.push(
                    (0..32)
                        .map(|lane| {
                            let t = warp * 32 + lane;
                            let row = t / copy.vectors_per_row;
                            let chunk = t % copy.vectors_per_row;
                            (copy.swizzle.chunk_offset(row, chunk) ^ xor) + op.smem_offset
                        })
                        .collect(),
                );
            }
        }
        all
    }

    /// Bank-conflict degree of each shared-memory access pattern: the worst over all warps and
    /// instructions of the kind (tile-relative addresses; every tile starts on a 128-byte line).
    pub fn bank_conflicts(&self) -> Vec<BankReport> {
        let a_loads: Vec<&FragLoad> = self.k_steps_plan.iter().flat_map(|s| &s.a_loads).collect();
        let b_loads: Vec<&FragLoad> = self.k_steps_plan.iter().flat_map(|s| &s.b_loads).collect();
        let worst = |sets: Vec<Vec<u32>>, bytes: u32| {
            sets.iter()
                .map(|lanes| conflict_degree_for(lanes, bytes))
                .max()
                .unwrap_or(0)
        };
        let read_name = |kind, a: bool| match (kind, a) {
            (ReadKind::Ldmatrix, true) => "A fragment read (ldmatrix.x4)",
            (ReadKind::LdmatrixTrans, true) => "A fragment read (ldmatrix.x4.trans)",
            (ReadKind::Scalar, true) => "A fragment read (ld.shared.b32)",
            (ReadKind::Ldmatrix, false) => "B fragment read (ldmatrix.x4)",
            (ReadKind::LdmatrixTrans, false) => "B fragment read (ldmatrix.x4.trans)",
            (ReadKind::Scalar, false) => "B fragment read (ld.shared.b32)",
        };
        let copy_name = |a: bool| match (self.copy, a) {
            (PlanCopy::CpAsync, true) => "A tile write (cp.async 16 B)",
            (PlanCopy::CpAsync, false) => "B tile write (cp.async 16 B)",
            (PlanCopy::Sync, true) => "A tile write (st.shared.v4)",
            (PlanCopy::Sync, false) => "B tile write (st.shared.v4)",
        };
        let mut reports = vec![
            BankReport {
                access: read_name(self.a_read.kind, true),
                degree: worst(
                    self.read_addresses(&self.a_read, &a_loads),
                    self.a_read.kind.access_bytes(),
                ),
            },
            BankReport {
                access: read_name(self.b_read.kind, false),
                degree: worst(
                    self.read_addresses(&self.b_read, &b_loads),
                    self.b_read.kind.access_bytes(),
                ),
            },
            BankReport {
                access: copy_name(true),
                degree: worst(self.copy_addresses(&self.a_src.copy), 16),
            },
            BankReport {
                access: copy_name(false),
                degree: worst(self.copy_addresses(&self.b_src.copy), 16),
            },
        ];
        if let Some(e) = &self.epilogue.staged {
            let (writes, reads) = staged_epilogue_addresses(e);
            reports.push(BankReport {
                access: if e.pair_bytes == 8 {
                    "C staging write (st.shared.v2.f32)"
                } else {
                    "C staging write (st.shared.b32)"
                },
                degree: worst(writes, e.pair_bytes),
            });
            reports.push(BankReport {
                access: "C staging read (ld.shared.v4)",
                degree: worst(reads, 16),
            });
        }
        reports
    }

    /// The 32 lane addresses of the first instruction of each access kind of warp 0, for
    /// showing banks: (name, access bytes, addresses).
    pub fn first_phases(&self) -> Vec<(&'static str, u32, Vec<u32>)> {
        let reports = self.bank_conflicts();
        let first_step = &self.k_steps_plan[0];
        let a = self.read_addresses(&self.a_read, &[&first_step.a_loads[0]]);
        let b = self.read_addresses(&self.b_read, &[&first_step.b_loads[0]]);
        vec![
            (
                reports[0].access,
                self.a_read.kind.access_bytes(),
                a[0].clone(),
            ),
            (
                reports[1].access,
                self.b_read.kind.access_bytes(),
                b[0].clone(),
            ),
            (
                reports[2].access,
                16,
                self.copy_addresses(&self.a_src.copy)[0].clone(),
            ),
            (
                reports[3].access,
                16,
                self.copy_addresses(&self.b_src.copy)[0].clone(),
            ),
        ]
    }
}

/// Conflict degree of the `ldmatrix` pattern alone (16-byte rows, 8 lanes per phase).
pub fn ldmatrix_conflict_degree(addresses: &[u32]) -> u32 {
    conflict_degree(addresses)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    fn mma(text: &str) -> MmaSyncPlan {
        let text = format!("mma: mma_sync, {text}");
        let valid = gemm_dsl::check_str(&text).unwrap_or_else(|e| panic!("{text}: {e}"));
        let gemm_dsl::Family::MmaSync(g) = valid.family else {
            panic!("{text} is not an mma_sync spec");
        };
        plan(&valid, &g)
    }

    /// The element of the stored (row-major) 8x8 b16 matrix that lane `lane` receives in
    /// half `h` of its register: row `lane / 4`, column `2·(lane % 4) + h`; with `.trans` the
    /// matrix is read column-major: row `2·(lane % 4) + h`, column `lane / 4`.
    fn ldmatrix_element(lane: u32, h: u32, trans: bool) -> (u32, u32) {
        let (g, t) = (lane / 4, lane % 4);
        if trans {
            (2 * t + h, g)
        } else {
            (g, 2 * t + h)
        }
    }

    /// PTX ISA fragment layouts (groupID g = lane / 4, threadID_in_group t = lane % 4).
    /// m16n8k16 A (f16/bf16): register q, half h -> (row, k).
    fn mma_a_16(lane: u32, q: u32, h: u32) -> (u32, u32) {
        let (g, t) = (lane / 4, lane % 4);
        (g + 8 * (q & 1), 2 * t + h + 8 * (q >> 1))
    }
    /// m16n8k16 B: register q, half h -> (k, n).
    fn mma_b_16(lane: u32, q: u32, h: u32) -> (u32, u32) {
        let (g, t) = (lane / 4, lane % 4);
        (2 * t + h + 8 * q, g)
    }
    /// m16n8k8 tf32 A: register q -> (row, k).
    fn mma_a_tf32(lane: u32, q: u32) -> (u32, u32) {
        let (g, t) = (lane / 4, lane % 4);
        (g + 8 * (q & 1), t + 4 * (q >> 1))
    }
    /// m16n8k8 tf32 B: register q -> (k, n).
    fn mma_b_tf32(lane: u32, q: u32) -> (u32, u32) {
        let (g, t) = (lane / 4, lane % 4);
        (t + 4 * q, g)
    }

    #[test]
    fn ldmatrix_lane_rows_cover_each_matrix_once_and_match_the_mma_fragments() {
        let p = mma("tile: 128x128x32, warps: 2x2, dtype: bf16");
        // A: lane l supplies row l % 16, chunk l / 16: matrix q = l / 8 gets rows
        // 8·(q & 1) .. +8 of chunk q >> 1, each exactly once.
        let mut seen = BTreeSet::new();
        for lane in 0..32 {
            let (row, col) = p.a_read.lane_position(0, 0, lane);
            let q = lane / 8;
            assert_eq!((row, col / 16), (8 * (q & 1) + lane % 8, q >> 1));
            assert!(seen.insert((row, col)));
        }
        assert_eq!(seen.len(), 32);
        // What lane l then holds in register q is the mma A fragment element.
        for lane in 0..32 {
            for q in 0..4 {
                for h in 0..2 {
                    let (r, c) = ldmatrix_element(lane, h, false);
                    // Row r of matrix q is the row lane 8q + r supplied.
                    let (row, col) = p.a_read.lane_position(0, 0, 8 * q + r);
                    assert_eq!((row, col / 2 + c), mma_a_16(lane, q, h));
                }
            }
        }
        // B (.trans): lane l supplies k row l % 16 and n chunk l / 16; registers 0, 1 are b0, b1
        // of n8 tile 0 and registers 2, 3 those of n8 tile 1.
        for lane in 0..32 {
            for q in 0..4 {
                for h in 0..2 {
                    let (r, c) = ldmatrix_element(lane, h, true);
                    let (k, col) = p.b_read.lane_position(0, 0, 8 * q + r);
                    let (n_tile, reg) = (q >> 1, q & 1);
                    let (want_k, want_n) = mma_b_16(lane, reg, h);
                    assert_eq!((k, col / 2 + c), (want_k, want_n + 8 * n_tile));
                }
            }
        }
    }

    /// Register indices of a load's `%fa3, %fa7, ..` list.
    fn register_indices(list: &str, prefix: &str) -> Vec<u32> {
        list.split(", ")
            .map(|r| r.trim_start_matches(prefix).parse().unwrap())
            .collect()
    }

    /// Runs one block tile of a plan on paper, per operand: the copies write every (line,
    /// byte) of the stored tile into shared memory where the plan's copy bases and offsets
    /// say, and every fragment register of every lane of every warp, in every k step, read
    /// through the plan's fragment loads (ldmatrix with or without `.trans`, or 32-bit loads),
    /// finds the element the PTX ISA's mma fragment layout puts there.
    fn assert_fragments_read_what_the_copies_wrote(spec: &str) {
        let p = mma(spec);
        let e = p.in_bytes;
        let tf32 = p.round_tf32;
        let warps = p.threads / 32;
        let a_per_set = p.m_frags * 4;
        let b_per_set = p.n_frags * 2;
        for (source, reads) in [(&p.a_src, &p.a_read), (&p.b_src, &p.b_read)] {
            let (is_a, copy) = (source.name == "a", &source.copy);
            // Shared byte (tile-relative) -> (stored line, byte of the line).
            let mut smem = std::collections::HashMap::new();
            let (vpr, vb) = (copy.vectors_per_row, p.vector_bytes);
            for t in 0..p.threads {
                // The thread's first vector, narrower ones inside their swizzled chunk.
                let base = copy.swizzle.byte_offset(t / vpr, (t % vpr) * vb);
                for op in &copy.copies {
                    let line = t / vpr + op.rows;
                    let col = (t % vpr) * vb + op.global_col_bytes;
                    let at = (base ^ copy.bases[op.base]) + op.smem_offset;
                    for byte in 0..vb {
                        assert!(
                            smem.insert(at + byte, (line, col + byte)).is_none(),
                            "{spec}"
                        );
                    }
                }
            }
            // (stored line, byte) -> (m or n, k) of the block tile.
            let logical = |(line, byte): (u32, u32)| {
                assert_eq!(byte % e, 0, "{spec}: read splits an element");
                if source.lines_are_k {
                    (byte / e, line)
                } else {
                    (line, byte / e)
                }
            };
            let word = |at: u32| -> (u32, u32) {
                logical(
                    *smem
                        .get(&at)
                        .unwrap_or_else(|| panic!("{spec}: {at} never written")),
                )
            };
            for warp in 0..warps {
                let (wm, wn) = (warp / p.warp_cols, warp % p.warp_cols);
                let lane_address = |lane: u32, load: &FragLoad| {
                    (reads.lane_base(wm, wn, lane) ^ reads.bases[load.base]) + load.offset
                };
                for (step, k_step) in p.k_steps_plan.iter().enumerate() {
                    let loads = if is_a {
                        &k_step.a_loads
                    } else {
                        &k_step.b_loads
                    };
                    let prefix = if is_a { "%fa" } else { "%fb" };
                    for load in loads {
                        let regs = register_indices(&load.registers, prefix);
                        for lane in 0..32 {
                            for (q, &reg) in regs.iter().enumerate() {
                                let q = q as u32;
                                // (m or n, k) of each 16-bit half (one word for tf32) that
                                // lane receives in register q.
                                let halves: Vec<(u32, u32)> = match reads.kind {
                                    ReadKind::Scalar => vec![word(lane_address(lane, load))],
                                    ReadKind::Ldmatrix | ReadKind::LdmatrixTrans => (0..2)
                                        .map(|h| {
                                            let (row_lane, byte) =
                                                if reads.kind == ReadKind::Ldmatrix {
                                                    (8 * q + lane / 4, (lane % 4) * 4 + 2 * h)
                                                } else {
                                                    (8 * q + 2 * (lane % 4) + h, (lane / 4) * 2)
                                                };
                                            let at = lane_address(row_lane, load) + byte;
                                            let (line, col) = smem[&at];
                                            // A 16-bit half of a tf32 word: its element.
                                            logical((line, col - col % e))
                                        })
                                        .take(if tf32 { 1 } else { 2 })
                                        .collect(),
                                };
                                let (g, t) = (lane / 4, lane % 4);
                                for (h, &got) in halves.iter().enumerate() {
                                    let h = h as u32;
                                    let want = if is_a {
                                        let (set, rest) = (reg / a_per_set, reg % a_per_set);
                                        assert_eq!(set, step as u32 % 2);
                                        let (mi, aq) = (rest / 4, rest % 4);
                                        let (row, k) = if tf32 {
                                            (g + 8 * (aq & 1), t + 4 * (aq >> 1))
                                        } else {
                                            (g + 8 * (aq & 1), 2 * t + h + 8 * (aq >> 1))
                                        };
                                        (wm * p.warp_tile_m + 16 * mi + row, k)
                                    } else {
                                        let (set, rest) = (reg / b_per_set, reg % b_per_set);
                                        assert_eq!(set, step as u32 % 2);
                                        let (ni, bq) = (rest / 2, rest % 2);
                                        let k = if tf32 { t + 4 * bq } else { 2 * t + h + 8 * bq };
                                        (wn * p.warp_tile_n + 8 * ni + g, k)
                                    };
                                    let k_step = if tf32 { 8 } else { 16 };
                                    let want = (want.0, want.1 + step as u32 * k_step);
                                    assert_eq!(
                                        got,
                                        want,
                                        "{spec}: {} warp {warp} lane {lane} reg {reg}",
                                        if is_a { 'A' } else { 'B' }
                                    );
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn every_layout_reads_the_fragments_the_copies_wrote() {
        for layout in ["rr", "rc", "cr", "cc"] {
            for spec in [
                "tile: 128x128x32, warps: 2x2",
                "tile: 128x256x64, warps: 2x4, stages: 3",
                "tile: 64x64x64, warps: 2x2, stages: 2, swizzle: 64B",
                "tile: 128x128x32, warps: 2x2, swizzle: pad(16)",
                "tile: 64x128x16, warps: 1x2, swizzle: none, dtype: f16",
                "dtype: tf32, tile: 128x128x16, warps: 2x2, stages: 4",
                "dtype: tf32, tile: 64x64x32, warps: 2x2, swizzle: pad(16)",
                "dtype: tf32, tile: 64x32x32, warps: 2x2, swizzle: 32B",
                // Narrower copy vectors, inside swizzled and padded chunks.
                "tile: 128x128x32, warps: 2x4, copy: cp_async(ca, vector = 4)",
                "tile: 64x64x64, warps: 2x2, swizzle: 64B, copy: cp_async(ca, vector = 8)",
                "tile: 64x64x32, warps: 2x2, swizzle: pad(16), copy: sync(vector = 2)",
                "tile: 64x128x16, warps: 1x4, swizzle: 32B, copy: sync(vector = 4)",
                "dtype: tf32, tile: 64x64x32, warps: 2x2, copy: cp_async(ca, vector = 4)",
            ] {
                let spec = format!("layout: {layout}, {spec}");
                if gemm_dsl::check_str(&format!("mma: mma_sync, {spec}")).is_ok() {
                    assert_fragments_read_what_the_copies_wrote(&spec);
                } else {
                    panic!("{spec} is not valid");
                }
            }
        }
    }

    #[test]
    fn each_layout_reads_with_its_ldmatrix() {
        let kinds = |spec: &str| {
            let p = mma(spec);
            (p.a_read.kind, p.b_read.kind)
        };
        use ReadKind::{Ldmatrix as N, LdmatrixTrans as T, Scalar as S};
        assert_eq!(kinds("layout: rr"), (N, T));
        assert_eq!(kinds("layout: rc"), (N, N));
        assert_eq!(kinds("layout: cr"), (T, T));
        assert_eq!(kinds("layout: cc"), (T, N));
        assert_eq!(kinds("dtype: tf32, layout: rr"), (N, S));
        assert_eq!(kinds("dtype: tf32, layout: rc"), (N, N));
        assert_eq!(kinds("dtype: tf32, layout: cr"), (S, S));
        assert_eq!(kinds("dtype: tf32, layout: cc"), (S, N));
        // A column-major A lies as BK lines of BM: the swizzle spans its 256-byte lines.
        let p = mma("layout: cc, tile: 128x128x32");
        assert_eq!(p.a_src.copy.swizzle.row_bytes, 256);
        assert_eq!(p.b_src.copy.swizzle.row_bytes, 64);
        assert_eq!(p.a_src.tile_step, "%a_tile_step");
        assert_eq!(p.b_src.tile_step, "64");
        let degrees: Vec<u32> = p.bank_conflicts().iter().map(|r| r.degree).collect();
        assert_eq!(degrees[..4], [1, 1, 1, 1], "{:?}", p.bank_conflicts());
    }

    #[test]
    fn tf32_fragments_match_the_mma_layouts() {
        let p = mma("name: t, dtype: tf32, tile: 128x128x32, warps: 2x2");
        assert!(p.b_read.kind == ReadKind::Scalar && p.round_tf32);
        // A through ldmatrix: a b16 matrix row is 4 tf32; lane l's 32-bit word is tf32 l % 4.
        for lane in 0..32 {
            for q in 0..4 {
                let (r, c) = ldmatrix_element(lane, 0, false);
                let (row, col) = p.a_read.lane_position(0, 0, 8 * q + r);
                assert_eq!((row, col / 4 + c / 2), mma_a_tf32(lane, q));
            }
        }
        // B by 32-bit loads: registers b0, b1 of n tile ni read (k = t + 4q, n = 8 ni + g).
        let step = &p.k_steps_plan[1];
        for (i, load) in step.b_loads.iter().enumerate() {
            let (ni, q) = (i as u32 / 2, i as u32 % 2);
            for lane in 0..32 {
                let got =
                    (p.b_read.lane_base(0, 0, lane) ^ p.b_read.bases[load.base]) + load.offset;
                let (k, n) = mma_b_tf32(lane, q);
                let want = p.b_read.swizzle.byte_offset(8 + k, (8 * ni + n) * 4);
                assert_eq!(got, want, "ni {ni} q {q} lane {lane}");
            }
        }
    }

    #[test]
    fn accumulators_cover_the_warp_tile_once() {
        for spec in [
            "tile: 128x128x32, warps: 2x2",
            "tile: 128x256x32, warps: 2x4, out: f32",
            "dtype: tf32, tile: 64x64x16, warps: 2x2",
        ] {
            let p = mma(spec);
            let mut seen = BTreeSet::new();
            for lane in 0..32 {
                for acc in 0..p.accumulators {
                    let (row, col) = accumulator_position(&p, lane, acc).unwrap();
                    assert!(row < p.warp_tile_m && col < p.warp_tile_n, "{spec}");
                    assert!(seen.insert((row, col)), "{spec}: ({row}, {col}) twice");
                    // The mma C fragment: c0, c1 row g, c2, c3 row g + 8, columns 2t, 2t + 1.
                    let (mi, ni, q) = (acc / 4 / p.n_frags, acc / 4 % p.n_frags, acc % 4);
                    let want = (
                        16 * mi + lane / 4 + 8 * (q >> 1),
                        8 * ni + 2 * (lane % 4) + (q & 1),
                    );
                    assert_eq!((row, col), want, "{spec}");
                }
            }
            assert_eq!(seen.len() as u32, p.warp_tile_m * p.warp_tile_n);
        }
    }

    /// Runs the staged epilogue of one warp on paper: every byte a lane reads back from its
    /// slab holds the accumulator element that belongs at the C position the lane stores it to,
    /// and every element of the warp tile is stored exactly once.
    #[test]
    fn staged_epilogue_stores_every_accumulator_in_its_place() {
        for spec in [
            "tile: 128x128x32, warps: 2x2",
            "tile: 128x256x64, warps: 2x4, stages: 3",
            "tile: 64x64x64, warps: 2x2, stages: 2",
            "tile: 128x128x32, warps: 2x2, out: f32",
            "dtype: tf32, tile: 128x128x16, warps: 2x2",
            "tile: 32x256x16, warps: 1x2, swizzle: 64B",
            "tile: 32x256x16, warps: 1x2, swizzle: 64B, out: f32",
            "tile: 64x128x16, warps: 2x1, out: f32",
            "tile: 16x256x16, warps: 1x1, out: f32",
            "tile: 64x32x64, warps: 2x2",
            "tile: 128x128x32, warps: 2x4, copy: cp_async(ca, vector = 4)",
            "tile: 64x64x32, warps: 2x2, stages: 2, copy: sync(vector = 2)",
            "tile: 64x64x32, warps: 2x2, stages: 2, out: f32, copy: sync(vector = 2)",
            "dtype: tf32, tile: 128x128x16, warps: 2x2, copy: cp_async(ca, vector = 8)",
        ] {
            let p = mma(spec);
            let e = p
                .epilogue
                .staged
                .as_ref()
                .unwrap_or_else(|| panic!("{spec}"));
            let ob = p.out_bytes;
            let vpr = e.vectors_per_row;
            let mut stored = BTreeSet::new();
            let mut rows_down = 0;
            for band in &e.bands {
                // Slab byte -> (row, column) of the warp tile whose element it holds.
                let mut slab = std::collections::BTreeMap::new();
                for lane in 0..32 {
                    let base = (lane / 4) * e.pitch + (lane % 4) * e.pair_bytes;
                    for w in &band.writes {
                        for (i, acc) in [w.lo, w.hi].into_iter().enumerate() {
                            let element = accumulator_position(&p, lane, acc).unwrap();
                            for byte in 0..ob {
                                let at = base + w.offset + i as u32 * ob + byte;
                                assert!(at < e.bytes_per_warp, "{spec}");
                                assert!(slab.insert(at, element).is_none(), "{spec}: {at} twice");
                            }
                        }
                    }
                }
                let first_read_rows = rows_down;
                for lane in 0..32 {
                    let base = (lane / vpr) * e.pitch + (lane % vpr) * 16;
                    let (first_row, first_col) = (lane / vpr, (lane % vpr) * 16);
                    let mut down = first_read_rows;
                    for r in &band.reads {
                        down += r.global_row_delta;
                        // The vector's stores, each `c_store_bytes` wide, cover it in order.
                        let offsets: Vec<u32> = r.stores.iter().map(|s| s.offset).collect();
                        let want_offsets: Vec<u32> = (0..16 / p.c_store_bytes)
                            .map(|i| r.global_col_bytes + i * p.c_store_bytes)
                            .collect();
                        assert_eq!(offsets, want_offsets, "{spec}");
                        for s in &r.stores {
                            assert_eq!(s.last_byte, s.offset + p.c_store_bytes - 1, "{spec}");
                            let word_bytes: u32 = s.words.len() as u32 * 4;
                            assert!(word_bytes == 0 || word_bytes == p.c_store_bytes, "{spec}");
                        }
                        for byte in 0..16 {
                            let want = (
                                first_row + down,
                                (first_col + r.global_col_bytes + byte) / ob,
                            );
                            assert_eq!(
                                slab.get(&(base + r.smem_offset + byte)),
                                Some(&want),
                                "{spec}"
                            );
                            stored.insert(want);
                        }
                    }
                    rows_down = down;
                }
            }
            assert_eq!(stored.len() as u32, p.warp_tile_m * p.warp_tile_n, "{spec}");
            // The padded rows keep the fragment-ordered writes conflict-free, and the reads
            // too once a phase of 8 lanes reads within one row.
            let reports = p.bank_conflicts();
            assert_eq!(reports[4].degree, 1, "{spec}: {}", reports[4].access);
            if vpr >= 8 {
                assert_eq!(reports[5].degree, 1, "{spec}: {}", reports[5].access);
            }
        }
    }

    /// C's stores are no wider than the copy vector (and at least one element), so the
    /// launch asks C's rows for no more alignment than A's and B's lines.
    #[test]
    fn narrow_vectors_narrow_c_stores() {
        for (spec, staged, store_bytes, split) in [
            ("tile: 128x128x32, warps: 2x2", true, 16, false),
            ("tile: 128x128x32, warps: 2x4, copy: cp_async(ca, vector = 8)", true, 8, false),
            ("tile: 128x128x32, warps: 2x4, copy: cp_async(ca, vector = 4)", true, 4, false),
            ("tile: 64x64x32, warps: 2x2, stages: 2, copy: sync(vector = 2)", true, 2, true),
            // f32 C takes one element, 4 bytes, even behind a 2-byte vector.
            ("tile: 64x64x32, warps: 2x2, stages: 2, out: f32, copy: sync(vector = 2)", true, 4, true),
            // From the registers: pairs, split where the vector is narrower than a pair (the
            // flag is set for staged kernels too, which store no pairs to C).
            ("dtype: tf32, tile: 48x24x32, warps: 3x1, stages: 2", false, 8, false),
            ("dtype: tf32, tile: 48x24x32, warps: 3x1, stages: 2, copy: cp_async(ca, vector = 8)", false, 8, false),
            ("dtype: tf32, tile: 48x24x32, warps: 3x1, stages: 2, copy: cp_async(ca, vector = 4)", false, 4, true),
        ] {
            let p = mma(spec);
            assert_eq!(p.epilogue.staged.is_some(), staged, "{spec}");
            assert_eq!(p.c_store_bytes, store_bytes, "{spec}");
            assert_eq!(p.launch_contract().output_align_bytes, store_bytes, "{spec}");
            assert_eq!(p.epilogue.split_pairs, split, "{spec}");
            if let Some(e) = &p.epilogue.staged {
                let want = match store_bytes {
                    16 => "st.global.v4.b32",
                    8 => "st.global.v2.b32",
                    4 => "st.global.b32",
                    _ => "st.global.b16",
                };
                assert_eq!(e.global_store, want, "{spec}");
            }
        }
    }

    #[test]
    fn warp_tiles_without_whole_shared_vectors_store_from_registers() {
        // 24 f32 columns are 6 16-byte vectors per row, which 32 lanes cannot share out.
        let p = mma("dtype: tf32, tile: 48x24x32, warps: 3x1, stages: 2");
        assert_eq!(p.warp_tile_n, 24);
        assert!(p.epilogue.staged.is_none());
        assert!(!p.epilogue.rows.is_empty());
    }

    #[test]
    fn copies_cover_the_tile_once() {
        for spec in [
            "tile: 128x128x32, warps: 2x2",
            "tile: 64x64x64, warps: 2x2, stages: 2",
            "dtype: tf32, tile: 128x128x32, warps: 2x2",
            "tile: 128x256x64, warps: 2x4, stages: 3",
            "tile: 32x256x16, warps: 1x2, swizzle: 64B",
        ] {
            let p = mma(spec);
            for (copy, rows) in [(&p.a_src.copy, p.block_m), (&p.b_src.copy, p.block_k)] {
                let addresses: Vec<u32> = p.copy_addresses(copy).into_iter().flatten().collect();
                let distinct: BTreeSet<u32> = addresses.iter().copied().collect();
                assert_eq!(distinct.len(), addresses.len(), "{spec}");
                assert!(addresses.iter().all(|a| a % 16 == 0));
                assert_eq!(
                    addresses.len() as u32 * 16,
                    rows * copy.swizzle.row_bytes,
                    "{spec}"
                );
            }
        }
    }

    #[test]
    fn bank_conflicts_follow_the_swizzle() {
        // 128B XOR: every read and write conflict-free, for A rows of 64 B and B rows of 256 B.
        let p = mma("tile: 128x128x32, warps: 2x2, swizzle: 128B");
        let degrees: Vec<u32> = p.bank_conflicts().iter().map(|r| r.degree).collect();
        assert_eq!(degrees, [1, 1, 1, 1, 1, 1]);
        // Plain rows: A rows of 64 B put 4 of 8 rows on the same banks, B rows of 256 B all 8.
        let p = mma("tile: 128x128x32, warps: 2x2, swizzle: none");
        let degrees: Vec<u32> = p.bank_conflicts().iter().map(|r| r.degree).collect();
        assert_eq!(degrees, [4, 8, 1, 1, 1, 1]);
        // A 64B XOR suits the 64-byte A rows, not the 256-byte B rows.
        let p = mma("tile: 128x128x32, warps: 2x2, swizzle: 64B");
        assert_eq!(p.bank_conflicts()[0].degree, 1);
        assert_eq!(p.bank_conflicts()[1].degree, 2);
        // Padding by 16 B: reads conflict-free, copy writes of 8 lanes straddle rows.
        let p = mma("tile: 128x128x32, warps: 2x2, swizzle: pad(16)");
        let degrees: Vec<u32> = p.bank_conflicts().iter().map(|r| r.degree).collect();
        assert_eq!(degrees[..2], [1, 1]);
        assert_eq!(degrees[2], 2);
        // tf32 B, 32-bit loads of 4 k rows x 8 columns: the 128B XOR leaves pairs of rows
        // on the same banks.
        let p = mma("dtype: tf32, tile: 128x128x32, warps: 2x2");
        assert_eq!(p.bank_conflicts()[0].degree, 1);
        assert_eq!(p.bank_conflicts()[1].degree, 2);
    }

    #[test]
    fn every_valid_layout_decomposes() {
        // plan() panics if an address does not decompose: sweep tiles, warps, swizzles, types.
        let mut planned = 0;
        for dtype in ["bf16", "f16", "tf32"] {
            for tile in [
                "64x64x16",
                "64x64x32",
                "64x64x64",
                "128x128x32",
                "128x128x64",
                "128x256x32",
                "256x128x32",
                "64x256x128",
                "32x32x16",
                "128x64x16",
                "64x128x8",
                "192x192x64",
            ] {
                for warps in [
                    "1x1", "2x1", "1x2", "2x2", "2x4", "4x2", "4x1", "1x4", "3x4",
                ] {
                    for swizzle in ["none", "pad(16)", "pad(32)", "32B", "64B", "128B"] {
                        let text = format!(
                            "mma: mma_sync, dtype: {dtype}, tile: {tile}, warps: {warps}, \
                             swizzle: {swizzle}, stages: 2"
                        );
                        if let Ok(valid) = gemm_dsl::check_str(&text) {
                            let gemm_dsl::Family::MmaSync(g) = valid.family else {
                                unreachable!()
                            };
                            let p = plan(&valid, &g);
                            assert!(p.a_read.bases.len() <= 8 && p.b_read.bases.len() <= 8);
                            planned += 1;
                        }
                    }
                }
            }
        }
        assert!(planned > 300, "{planned}");
    }

    #[test]
    fn plan_numbers_of_the_default_spec() {
        let p = mma("");
        assert_eq!((p.warp_tile_m, p.warp_tile_n), (64, 64));
        assert_eq!((p.m_frags, p.n_frags, p.k_steps), (4, 8, 2));
        assert_eq!(p.k_steps_plan[0].mmas.len(), 32);
        assert_eq!(p.k_steps_plan[0].a_loads.len(), 4);
        assert_eq!(p.k_steps_plan[0].b_loads.len(), 4);
        // The second k step reads chunks 2, 3 of the 64-byte A rows: an XOR of 32 bytes.
        assert_eq!(p.a_read.bases, [0, 32]);
        assert_eq!(p.k_steps_plan[1].a_loads[1].offset, 16 * 64);
        assert_eq!(p.smem.groups_in_flight, 1);
        assert_eq!(p.pack_instruction, "cvt.rn.bf16x2.f32");
        assert_eq!(
            ldmatrix_conflict_degree(&[0, 16, 32, 48, 64, 80, 96, 112]),
            1
        );
    }
}
