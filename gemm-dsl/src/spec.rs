//! The typed tile spec: what a `gemm! { .. }` body means once parsed, before any rule is checked.

use std::fmt;

/// GPU architecture the kernel is written for (`arch:`). Default: `sm_80`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Arch {
    Sm80,
    Sm86,
    Sm89,
    Sm90,
    /// Hopper with the architecture-specific features (wgmma, setmaxnreg).
    Sm90a,
}

impl Arch {
    pub const ALL: [Arch; 5] = [Arch::Sm80, Arch::Sm86, Arch::Sm89, Arch::Sm90, Arch::Sm90a];

    /// The PTX `.target` name.
    pub fn name(self) -> &'static str {
        match self {
            Arch::Sm80 => "sm_80",
            Arch::Sm86 => "sm_86",
            Arch::Sm89 => "sm_89",
            Arch::Sm90 => "sm_90",
            Arch::Sm90a => "sm_90a",
        }
    }

    /// Compute capability as `major * 10 + minor`.
    pub fn compute_capability(self) -> u32 {
        match self {
            Arch::Sm80 => 80,
            Arch::Sm86 => 86,
            Arch::Sm89 => 89,
            Arch::Sm90 | Arch::Sm90a => 90,
        }
    }

    /// Architecture-specific (`a`) targets run only on exactly their compute capability.
    pub fn is_arch_specific(self) -> bool {
        matches!(self, Arch::Sm90a)
    }

    pub fn has_cp_async(self) -> bool {
        self.compute_capability() >= 80
    }

    pub fn has_tma(self) -> bool {
        self.compute_capability() >= 90
    }

    pub fn has_wgmma(self) -> bool {
        self == Arch::Sm90a
    }

    /// Largest dynamic shared memory one block may opt into, in bytes.
    pub fn max_smem_per_block(self) -> u32 {
        match self {
            Arch::Sm80 => 163 * 1024,
            Arch::Sm86 | Arch::Sm89 => 99 * 1024,
            Arch::Sm90 | Arch::Sm90a => 227 * 1024,
        }
    }

    /// Shared memory of one SM, in bytes (each resident block also costs 1 KB of it).
    pub fn smem_per_sm(self) -> u32 {
        match self {
            Arch::Sm80 => 164 * 1024,
            Arch::Sm86 | Arch::Sm89 => 100 * 1024,
            Arch::Sm90 | Arch::Sm90a => 228 * 1024,
        }
    }

    pub fn max_threads_per_sm(self) -> u32 {
        match self {
            Arch::Sm86 | Arch::Sm89 => 1536,
            _ => 2048,
        }
    }

    pub fn max_blocks_per_sm(self) -> u32 {
        match self {
            Arch::Sm86 => 16,
            Arch::Sm89 => 24,
            _ => 32,
        }
    }

    pub fn registers_per_sm(self) -> u32 {
        65536
    }
}

/// Element type of A, B, the accumulator or C.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DType {
    F16,
    Bf16,
    /// f32 storage, rounded to tf32 by the tensor cores.
    Tf32,
    F32,
    /// OCP 8-bit float, 4 exponent and 3 mantissa bits (max 448, no infinities).
    E4m3,
    /// OCP 8-bit float, 5 exponent and 2 mantissa bits (max 57344).
    E5m2,
}

impl DType {
    pub const ALL: [DType; 6] = [
        DType::F16,
        DType::Bf16,
        DType::Tf32,
        DType::F32,
        DType::E4m3,
        DType::E5m2,
    ];

    pub fn name(self) -> &'static str {
        match self {
            DType::F16 => "f16",
            DType::Bf16 => "bf16",
            DType::Tf32 => "tf32",
            DType::F32 => "f32",
            DType::E4m3 => "e4m3",
            DType::E5m2 => "e5m2",
        }
    }

    pub fn size_bytes(self) -> u32 {
        match self {
            DType::E4m3 | DType::E5m2 => 1,
            DType::F16 | DType::Bf16 => 2,
            DType::Tf32 | DType::F32 => 4,
        }
    }

    /// An 8-bit float: a multiply input only (Hopper's fp8 wgmma), never an output.
    pub fn is_fp8(self) -> bool {
        matches!(self, DType::E4m3 | DType::E5m2)
    }
}

/// Storage order of A and B: `rr` = A row-major (K contiguous), B row-major (N contiguous).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Layout {
    RowRow,
    RowCol,
    ColRow,
    ColCol,
}

impl Layout {
    /// A is row-major (K contiguous).
    pub fn a_row_major(self) -> bool {
        matches!(self, Layout::RowRow | Layout::RowCol)
    }

    /// B is row-major (N contiguous).
    pub fn b_row_major(self) -> bool {
        matches!(self, Layout::RowRow | Layout::ColRow)
    }

    pub fn name(self) -> &'static str {
        match self {
            Layout::RowRow => "rr",
            Layout::RowCol => "rc",
            Layout::ColRow => "cr",
            Layout::ColCol => "cc",
        }
    }
}

/// How C lies in memory (`c_layout:`). Column-major C is the swapped product's: `C = A·B`
/// computed as `Cᵀ = Bᵀ·Aᵀ` for a few rows of C (decode), so the weights' many rows fill the
/// tile's M side and the few tokens its N side, and `Cᵀ` is written column-major where the
/// caller's row-major C lies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CLayout {
    Row,
    /// Element (row, col) at `col·ldc + row`: each column of C is a line.
    Col,
}

impl CLayout {
    pub fn name(self) -> &'static str {
        match self {
            CLayout::Row => "row",
            CLayout::Col => "col",
        }
    }
}

/// How the accumulators reach C.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Epilogue {
    /// Each thread stores its accumulators to global memory itself.
    Direct,
    /// Each warp writes its accumulators into a swizzled shared-memory buffer with
    /// `stmatrix`, and one thread hands the buffer to a TMA store that runs on while the
    /// warps go on to the next tile (the Hopper family, 16-bit C).
    Tma,
}

impl Epilogue {
    pub fn name(self) -> &'static str {
        match self {
            Epilogue::Direct => "direct",
            Epilogue::Tma => "tma",
        }
    }
}

/// The epilogue's factors (`scale:`): `D = act(α·A·B + β·C + bias)`, α and β launch
/// arguments. Without `alpha_beta` the kernel reads no C.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Scale {
    None,
    /// `D = act(α·A·B + bias)`.
    Alpha,
    /// `D = act(α·A·B + β·C + bias)`: C is read (C-in, shaped and strided as D) before D
    /// is written.
    AlphaBeta,
}

impl Scale {
    pub const ALL: [Scale; 3] = [Scale::None, Scale::Alpha, Scale::AlphaBeta];

    pub fn name(self) -> &'static str {
        match self {
            Scale::None => "none",
            Scale::Alpha => "alpha",
            Scale::AlphaBeta => "alpha_beta",
        }
    }

    pub fn has_alpha(self) -> bool {
        self != Scale::None
    }

    pub fn reads_c(self) -> bool {
        self == Scale::AlphaBeta
    }
}

/// Which way a bias vector runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BiasAlong {
    /// One value per row of D (length M), the same across the row.
    Row,
    /// One value per column of D (length N), broadcast down the rows: cuBLASLt's `BIAS`.
    Col,
}

impl BiasAlong {
    pub const ALL: [BiasAlong; 2] = [BiasAlong::Row, BiasAlong::Col];

    pub fn name(self) -> &'static str {
        match self {
            BiasAlong::Row => "row",
            BiasAlong::Col => "col",
        }
    }
}

/// A bias vector added to the accumulators (`bias:`), of the output type or f32; a launch
/// argument, shared by a batch's products or strided through them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Bias {
    None,
    Vector { along: BiasAlong, dtype: DType },
}

impl Bias {
    pub fn vector(self) -> Option<(BiasAlong, DType)> {
        match self {
            Bias::None => None,
            Bias::Vector { along, dtype } => Some((along, dtype)),
        }
    }
}

impl fmt::Display for Bias {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Bias::None => f.write_str("none"),
            Bias::Vector { along, dtype } => write!(f, "{}({})", along.name(), dtype.name()),
        }
    }
}

/// The function applied last, after scale and bias (`activation:`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Activation {
    None,
    /// `max(x, 0)`.
    Relu,
    /// The tanh approximation `x/2·(1 + tanh(√(2/π)·(x + 0.044715·x³)))`, as cuBLASLt's GELU.
    Gelu,
    /// The exact `x/2·(1 + erf(x/√2))`.
    GeluErf,
    /// `x·sigmoid(x)`.
    Silu,
}

impl Activation {
    pub const ALL: [Activation; 5] = [
        Activation::None,
        Activation::Relu,
        Activation::Gelu,
        Activation::GeluErf,
        Activation::Silu,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Activation::None => "none",
            Activation::Relu => "relu",
            Activation::Gelu => "gelu",
            Activation::GeluErf => "gelu_erf",
            Activation::Silu => "silu",
        }
    }
}

/// A second output the fused epilogue writes (`aux:`), as cuBLASLt's `GELU_AUX` does for a
/// backward pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Aux {
    None,
    /// The value before the activation, `α·A·B + β·C + bias`, in the output type, laid out as
    /// C (C's leading dimension and batch stride).
    PreActivation,
}

impl Aux {
    pub const ALL: [Aux; 2] = [Aux::None, Aux::PreActivation];

    pub fn name(self) -> &'static str {
        match self {
            Aux::None => "none",
            Aux::PreActivation => "pre_activation",
        }
    }
}

/// A factor per row of D (`row_scale:`), applied last: `D = s[row]·act(α·A·B + β·C + bias)`.
/// A mixture-of-experts layer's down projection scales each routed row by its router
/// weight this way, with no kernel of its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RowScale {
    None,
    /// One f32 per row of D, in device memory: M per product, product after product; a
    /// grouped kernel's one per row of A (every expert's rows; masked: experts x capacity).
    F32,
}

impl RowScale {
    pub const ALL: [RowScale; 2] = [RowScale::None, RowScale::F32];

    pub fn name(self) -> &'static str {
        match self {
            RowScale::None => "none",
            RowScale::F32 => "f32",
        }
    }
}

/// How fp8 operands are scaled back (`quant:`): `D = s_A·s_B·(A·B)` before the rest of the
/// epilogue, as cuBLASLt's scale pointers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Quant {
    None,
    /// One f32 dequantization scale for A and one for B, read from device memory at launch.
    Tensor,
    /// DeepSeek-V3's fine-grained scales, applied where the partial sums are promoted (every
    /// 128 k): A one f32 per row per 128 k (`ceil(K/128)` lines of M values, each line
    /// rounded up to a multiple of 4, 16-byte aligned), B one per block of 128 columns by
    /// 128 k (`ceil(N/128)` lines of `ceil(K/128)` values).
    Block,
}

impl Quant {
    pub const ALL: [Quant; 3] = [Quant::None, Quant::Tensor, Quant::Block];
    /// The k of one block scale (`quant: block`), and the columns of one of B's.
    pub const BLOCK: u32 = 128;
    /// `quant: block`: A's scale lines hold M rounded up to this many values, so that a tile's
    /// rows of them are whole 16-byte units.
    pub const A_LINE_MULTIPLE: u32 = 4;

    pub fn name(self) -> &'static str {
        match self {
            Quant::None => "none",
            Quant::Tensor => "tensor",
            Quant::Block => "block",
        }
    }
}

/// Grouped GEMM for mixture-of-experts layers (`groups:`): one launch multiplies each
/// expert's rows of A by the expert's own B, the rows each expert gets known only on the
/// device ([`crate::grouped`] has the walk and its proofs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Groups {
    /// One product (or a strided batch).
    None,
    /// A is `[rows, K]` with each expert's rows consecutive, D `[rows, N]`, B one matrix per
    /// expert; expert `g`'s rows end at `group_rows[g]` (an int32 prefix sum on the device,
    /// as `torch._grouped_mm`'s `offs`), with no padding.
    Contiguous,
    /// A is `[G, capacity, K]` and D `[G, capacity, N]`; expert `g` holds `group_rows[g]`
    /// tokens (an int32 count on the device) at the top of its `capacity` rows, and the rows
    /// past the count are neither read into results nor written.
    Masked,
}

impl Groups {
    pub const ALL: [Groups; 3] = [Groups::None, Groups::Contiguous, Groups::Masked];

    pub fn name(self) -> &'static str {
        match self {
            Groups::None => "none",
            Groups::Contiguous => "contiguous",
            Groups::Masked => "masked",
        }
    }

    pub fn is_grouped(self) -> bool {
        self != Groups::None
    }
}

/// Block tile `BM x BN x BK`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Tile {
    pub m: u32,
    pub n: u32,
    pub k: u32,
}

impl Tile {
    /// The longest side a block tile may have. No longer side fits: every operand row is whole
    /// 16-byte vectors, so a side of 16384 makes an A or B tile of at least 256 KiB, more than
    /// a block's shared memory. The bound keeps the families' tile arithmetic within 32 bits.
    pub const MAX_SIDE: u32 = 16384;
}

impl fmt::Display for Tile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}x{}x{}", self.m, self.n, self.k)
    }
}

/// A `ROWSxCOLS` grid, used for the warp grid and the cluster shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Grid2 {
    pub rows: u32,
    pub cols: u32,
}

impl Grid2 {
    /// Cells of the grid. Saturates at `u32::MAX`, so a grid of user numbers too large to
    /// count still fails every range check instead of wrapping into one (65536x65536 would
    /// wrap to 0) or panicking.
    pub fn count(self) -> u32 {
        self.rows.saturating_mul(self.cols)
    }
}

impl fmt::Display for Grid2 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}x{}", self.rows, self.cols)
    }
}

/// Shared-memory layout of the operand tiles (`swizzle:`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Swizzle {
    None,
    /// Every shared-memory row padded by this many bytes.
    Pad(u32),
    /// XOR of the 16-byte chunk index with row bits, over 32-, 64- or 128-byte rows.
    Xor32,
    Xor64,
    Xor128,
}

impl Swizzle {
    /// The most padding a shared-memory row may have (`pad(BYTES)`).
    pub const MAX_PAD_BYTES: u32 = 1024;

    /// Bytes per swizzled row for the XOR modes.
    pub fn xor_width_bytes(self) -> Option<u32> {
        match self {
            Swizzle::Xor32 => Some(32),
            Swizzle::Xor64 => Some(64),
            Swizzle::Xor128 => Some(128),
            Swizzle::None | Swizzle::Pad(_) => None,
        }
    }

    pub fn pad_bytes(self) -> u32 {
        match self {
            Swizzle::Pad(bytes) => bytes,
            _ => 0,
        }
    }
}

impl fmt::Display for Swizzle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Swizzle::None => f.write_str("none"),
            Swizzle::Pad(bytes) => write!(f, "pad({bytes})"),
            Swizzle::Xor32 => f.write_str("32B"),
            Swizzle::Xor64 => f.write_str("64B"),
            Swizzle::Xor128 => f.write_str("128B"),
        }
    }
}

/// Cache policy of `cp.async`: `cg` bypasses L1 (16-byte copies only), `ca` caches in L1.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CacheHint {
    Cg,
    Ca,
}

impl CacheHint {
    pub fn name(self) -> &'static str {
        match self {
            CacheHint::Cg => "cg",
            CacheHint::Ca => "ca",
        }
    }
}

/// How operand tiles move from global to shared memory (`copy:`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Copy {
    /// `ld.global` into registers, then `st.shared` (SASS `LDG` + `STS`), `vector` bytes per
    /// load.
    Sync { vector: u32 },
    /// `cp.async` (SASS `LDGSTS`), `vector` bytes per copy.
    CpAsync { hint: CacheHint, vector: u32 },
    /// Tensor Memory Accelerator bulk copies (SASS `UTMALDG`); multicast over the cluster when > 1.
    Tma { multicast: u32 },
}

impl Copy {
    /// The widest copy vector, and the default: 16 bytes (`ld.global.v4`, `cp.async ... 16`).
    pub const WIDEST_VECTOR: u32 = 16;
    /// `copy: sync` with 16-byte vectors.
    pub const SYNC: Copy = Copy::Sync {
        vector: Copy::WIDEST_VECTOR,
    };
    /// `copy: cp_async(cg)` and `copy: cp_async(ca)` with 16-byte vectors.
    pub const CP_ASYNC_CG: Copy = Copy::CpAsync {
        hint: CacheHint::Cg,
        vector: Copy::WIDEST_VECTOR,
    };
    pub const CP_ASYNC_CA: Copy = Copy::CpAsync {
        hint: CacheHint::Ca,
        vector: Copy::WIDEST_VECTOR,
    };

    /// Bytes one copy moves along an operand's contiguous dimension: the `vector` of `sync`
    /// and `cp_async`, 16 for the TMA (whose strides must be 16-byte multiples).
    pub fn vector_bytes(self) -> u32 {
        match self {
            Copy::Sync { vector } | Copy::CpAsync { vector, .. } => vector,
            Copy::Tma { .. } => Copy::WIDEST_VECTOR,
        }
    }

    pub fn is_sync(self) -> bool {
        matches!(self, Copy::Sync { .. })
    }

    pub fn is_cp_async(self) -> bool {
        matches!(self, Copy::CpAsync { .. })
    }

    /// The copy as the families whose threads copy take it; `None` for the TMA.
    pub fn thread_copy(self) -> Option<ThreadCopy> {
        match self {
            Copy::Sync { vector } => Some(ThreadCopy::Sync { vector }),
            Copy::CpAsync { hint, vector } => Some(ThreadCopy::CpAsync { hint, vector }),
            Copy::Tma { .. } => None,
        }
    }
}

/// `copy:` of the families whose threads move the tiles themselves (SIMT, mma.sync): every
/// value but the TMA. Their geometries carry it, so their plans have no case for `tma`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ThreadCopy {
    /// `ld.global` into registers, then `st.shared`, `vector` bytes per load.
    Sync { vector: u32 },
    /// `cp.async`, `vector` bytes per copy.
    CpAsync { hint: CacheHint, vector: u32 },
}

impl ThreadCopy {
    /// `copy: cp_async(cg)` with 16-byte vectors.
    pub const CP_ASYNC_CG: ThreadCopy = ThreadCopy::CpAsync {
        hint: CacheHint::Cg,
        vector: Copy::WIDEST_VECTOR,
    };

    /// Bytes one copy moves along an operand's contiguous dimension.
    pub fn vector_bytes(self) -> u32 {
        match self {
            ThreadCopy::Sync { vector } | ThreadCopy::CpAsync { vector, .. } => vector,
        }
    }
}

impl fmt::Display for Copy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Copy::Sync {
                vector: Copy::WIDEST_VECTOR,
            } => f.write_str("sync"),
            Copy::Sync { vector } => write!(f, "sync(vector = {vector})"),
            Copy::CpAsync {
                hint,
                vector: Copy::WIDEST_VECTOR,
            } => write!(f, "cp_async({})", hint.name()),
            Copy::CpAsync { hint, vector } => {
                write!(f, "cp_async({}, vector = {vector})", hint.name())
            }
            Copy::Tma { multicast: 1 } => f.write_str("tma"),
            Copy::Tma { multicast } => write!(f, "tma(multicast = {multicast})"),
        }
    }
}

/// Which instructions do the multiply-accumulate (`mma:`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mma {
    /// SIMT `fma.rn.f32` (SASS `FFMA`).
    Fma,
    /// Warp-level tensor cores, `mma.sync` (SASS `HMMA`).
    MmaSync,
    /// Warpgroup tensor cores, `wgmma.mma_async` (SASS `HGMMA`).
    Wgmma,
}

impl Mma {
    pub fn name(self) -> &'static str {
        match self {
            Mma::Fma => "fma",
            Mma::MmaSync => "mma_sync",
            Mma::Wgmma => "wgmma",
        }
    }
}

/// Raster order of a persistent schedule: the direction its bands of `group` tiles advance.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Raster {
    /// Bands `group` tiles wide (in N) walk down M: tiles `0, 1, ..` cover the band's first
    /// tile row left to right, then its next row.
    M,
    /// Bands `group` tiles tall (in M) walk along N: tiles cover the band's first tile column
    /// top to bottom, then its next column.
    N,
}

/// The order of the tiles inside one band of a persistent walk ([`Schedule::band_order`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BandOrder {
    /// Across the band first: consecutive tiles share the tile row (raster `m`) or column
    /// (raster `n`) the band is at, so consecutive blocks read the same A (raster `m`) or B
    /// tiles.
    AcrossFirst,
    /// Along the band first: consecutive tiles share the tile column (raster `m`) or row
    /// (raster `n`), so consecutive blocks read the same B (raster `m`) or A tiles.
    AlongFirst,
}

/// How output tiles are assigned to thread blocks (`schedule:`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Schedule {
    /// One output tile per thread block.
    Tile,
    /// As many blocks as the GPU holds at once, each walking the tiles `blockIdx.x`,
    /// `blockIdx.x + gridDim.x`, .. in grouped raster order ([`Schedule::tile_at`]), so the
    /// blocks running together share rows of A and columns of B in L2. `tail` says how the
    /// last, partial round of tiles is shared out.
    Persistent {
        raster: Raster,
        group: u32,
        tail: Tail,
    },
}

/// How a persistent schedule shares out the tiles left over after its whole rounds (when
/// the tile count is no multiple of the grid).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Tail {
    /// Whole tiles: the last round's tiles go to the first blocks, the others idle.
    #[default]
    Whole,
    /// Stream-K: where the leftover tiles are at most half the grid ([`StreamKSplit`]), every
    /// block takes an equal share of their k tiles; the block that computed a tile's first k
    /// tile adds the others' partial sums (from a global workspace, in a fixed order) and
    /// stores C.
    StreamK,
}

/// How a stream-K walk of `tiles` tiles over `grid` walkers splits: the first `whole_tiles`
/// go whole, round after round (data-parallel); the k tiles of the other `split_tiles` are
/// spread evenly over every walker.
///
/// The rule: a leftover after the whole rounds that would keep more than half the walkers
/// busy goes whole too (splitting it saves less than the partial sums cost); a smaller one is
/// split, each of its tiles over `grid / leftover` walkers but at most
/// [`StreamKSplit::MAX_WALKERS_PER_TILE`] (measured: 2560³ with 128x128 tiles 0.58 -> 0.93 of
/// cuBLAS at 8, +8 % more at 4); with fewer tiles than walkers, every tile is split (split-K).
/// The kernel's `stream_k_setup` computes the same (`codegen/tests/stream_k_walk.rs` replays
/// it against this function).
///
/// Measured and not adopted (H100, 2026-11-25, `results/stream-k-2026-11-25/`): splitting
/// the last whole round together with a small leftover, so each split tile has two or three
/// pieces. It gained 4 % at 5120³ and lost up to half the speed elsewhere (512x10240x8192):
/// walkers at staggered k positions no longer share the operands' k slices in L2.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamKSplit {
    pub whole_tiles: u64,
    pub split_tiles: u64,
    /// The walkers that share the split tiles' k tiles: at most
    /// [`StreamKSplit::MAX_WALKERS_PER_TILE`] a split tile, at least one; the others idle.
    pub tail_walkers: u64,
}

impl StreamKSplit {
    /// The most walkers one split tile is shared by: its finisher reads one partial sum per
    /// other walker, so a few split tiles over the whole grid (16 walkers a tile at 5120³
    /// with 128x256 tiles, 33 at 2560³ with 128x128) cost more in partial sums than they
    /// save in k tiles. 4 against 8 (H100, the set's four stream-K members at ten problems
    /// with a split tail, `results/squares-2026-11-26/cap.txt`): up to +22 % (1536³,
    /// 128x128), +15 % at 512x10240x8192 (128x256), +5 % at 3072³, at most 2 % slower
    /// anywhere (noise level). 2 gains more on the smallest problems and loses up to 4 %
    /// on others.
    pub const MAX_WALKERS_PER_TILE: u32 = 4;

    pub const fn of(tiles: u64, grid: u64) -> StreamKSplit {
        let grid = if grid == 0 { 1 } else { grid };
        let leftover = tiles % grid;
        let split_tiles = if 2 * leftover > grid { 0 } else { leftover };
        let capped = split_tiles * Self::MAX_WALKERS_PER_TILE as u64;
        let tail_walkers = if capped < grid { capped } else { grid };
        StreamKSplit {
            whole_tiles: tiles - split_tiles,
            split_tiles,
            tail_walkers: if tail_walkers == 0 { 1 } else { tail_walkers },
        }
    }
}

impl Tail {
    pub const fn name(self) -> &'static str {
        match self {
            Tail::Whole => "whole",
            Tail::StreamK => "stream_k",
        }
    }
}

impl Schedule {
    /// The order inside the bands of a walk over `tiles_m x tiles_n` tiles of
    /// `tile_m x tile_n` elements by `walkers` blocks (or clusters) at once.
    ///
    /// Where a whole band runs in one round, the order inside it does not change which tiles
    /// run together, only which blocks share an operand's tiles, and blocks with nearby
    /// indices share them best. Across first, the readers of one A tile (raster `m`) are
    /// consecutive and those of one B tile `group` blocks apart; along first, the B readers
    /// are consecutive and the A readers as many blocks apart as the band is long. So a band
    /// shorter than `group` tiles goes along first, where the across side is the longer one
    /// (the larger operand's readers consecutive). Measured (H100,
    /// `results/two-speeds-2026-11-26`): 128x128 ping-pong at 512x28672x4096 ran at 750 or
    /// 570 TFLOP/s across first (the slow launches read 100-130 MB more of B from DRAM), 760
    /// every time along first; 256x128 stream-K at 4096-row problems (bands 16 tiles long)
    /// lost 4-17 % along first.
    pub fn band_order(
        self,
        (tiles_m, tiles_n): (u32, u32),
        (tile_m, tile_n): (u32, u32),
        walkers: u32,
    ) -> BandOrder {
        let Schedule::Persistent { raster, group, .. } = self else {
            return BandOrder::AcrossFirst;
        };
        let extent_m = u64::from(tiles_m) * u64::from(tile_m);
        let extent_n = u64::from(tiles_n) * u64::from(tile_n);
        let (along_count, along_extent, across_extent) = match raster {
            Raster::M => (tiles_m, extent_m, extent_n),
            Raster::N => (tiles_n, extent_n, extent_m),
        };
        let band_tiles = u64::from(group) * u64::from(along_count);
        if band_tiles <= u64::from(walkers) && along_count < group && across_extent > along_extent {
            BandOrder::AlongFirst
        } else {
            BandOrder::AcrossFirst
        }
    }

    /// The (tile row, tile column) of tile `index` of a `tiles_m x tiles_n` output: row-major
    /// for `Tile` (`blockIdx.y`, `blockIdx.x`), grouped bands for `Persistent` (the last band
    /// is narrower where `group` does not divide the tile count), in `order` inside each band.
    /// `index` is below `tiles_m * tiles_n`.
    pub fn tile_at(self, index: u32, tiles_m: u32, tiles_n: u32, order: BandOrder) -> (u32, u32) {
        match self {
            Schedule::Tile => (index / tiles_n, index % tiles_n),
            Schedule::Persistent { raster, group, .. } => {
                // Work in (along, across): `along` is the direction the bands advance.
                let (along_count, across_count) = match raster {
                    Raster::M => (tiles_m, tiles_n),
                    Raster::N => (tiles_n, tiles_m),
                };
                // In 64 bits: a band of `group` x `along_count` tiles may not fit 32.
                let (index, group) = (u64::from(index), u64::from(group));
                let band_tiles = group * u64::from(along_count);
                let band_start = index / band_tiles * group;
                let width = group.min(u64::from(across_count) - band_start);
                let within = index % band_tiles;
                let (along, across) = match order {
                    BandOrder::AcrossFirst => (within / width, within % width),
                    BandOrder::AlongFirst => (
                        within % u64::from(along_count),
                        within / u64::from(along_count),
                    ),
                };
                // Both are below `along_count` and `across_count`, so they fit 32 bits.
                let (along, across) = (along as u32, (band_start + across) as u32);
                match raster {
                    Raster::M => (along, across),
                    Raster::N => (across, along),
                }
            }
        }
    }
}

impl Schedule {
    /// The (product, tile row, tile column) of tile `index` of a strided batch of products of
    /// `tiles_m x tiles_n` tiles each: the products one after another, each walked in
    /// [`Schedule::tile_at`] order. `index` is below `batch * tiles_m * tiles_n`.
    pub fn batched_tile_at(
        self,
        index: u32,
        tiles_m: u32,
        tiles_n: u32,
        order: BandOrder,
    ) -> (u32, u32, u32) {
        let per_product = tiles_m * tiles_n;
        let (row, col) = self.tile_at(index % per_product, tiles_m, tiles_n, order);
        (index / per_product, row, col)
    }
}

impl fmt::Display for Schedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Schedule::Tile => f.write_str("tile"),
            Schedule::Persistent {
                raster,
                group,
                tail,
            } => {
                let raster = match raster {
                    Raster::M => "m",
                    Raster::N => "n",
                };
                write!(f, "persistent(raster = {raster}, group = {group}")?;
                // The default tail stays unwritten, so older specs print as they did.
                match tail {
                    Tail::Whole => f.write_str(")"),
                    Tail::StreamK => write!(f, ", tail = {})", tail.name()),
                }
            }
        }
    }
}

/// A complete tile spec: every key has a value, defaults filled in. Each field is the key of
/// the same name (the crate docs' table lists the values and defaults); a parsed spec is not
/// yet checked against the hardware's rules, a [`ValidSpec`](crate::ValidSpec)'s is.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct GemmSpec {
    /// The PTX entry and the `gemm!` module: a Rust identifier.
    pub name: String,
    /// The compute capability the PTX targets (`sm_90a` runs on exactly 9.0).
    pub arch: Arch,
    /// A's and B's element type (`tf32`: f32 in memory, rounded to tf32 for the math); A's
    /// alone where `b_dtype` differs.
    pub dtype: DType,
    /// B's element type: `dtype`, except in the fp8 pairs that mix e4m3 and e5m2.
    pub b_dtype: DType,
    /// The accumulator type: f32 for every family.
    pub acc: DType,
    /// C's element type.
    pub out: DType,
    /// How A and B lie in memory (row- or column-major each).
    pub layout: Layout,
    /// How C lies in memory: row-major, or column-major (wgmma, direct stores).
    pub c_layout: CLayout,
    /// The block tile, BM x BN x BK.
    pub tile: Tile,
    /// The warp grid over the block tile (SIMT and mma.sync).
    pub warps: Grid2,
    /// Consumer warpgroups, 1 to 3 (wgmma; the producer warpgroup comes on top).
    pub consumers: u32,
    /// `consumers: pingpong`: two consumer warpgroups that take alternate tiles of the
    /// persistent walk, each the whole block tile, and turns at the tensor cores, so one's
    /// epilogue runs under the other's MMAs (`consumers` is then 2).
    pub pingpong: bool,
    /// Shared-memory pipeline stages.
    pub stages: u32,
    /// The shared-memory layout: an XOR swizzle, padded lines, or none.
    pub swizzle: Swizzle,
    /// How A and B reach shared memory, and in vectors of how many bytes.
    pub copy: Copy,
    /// The widest store of C, in bytes (SIMT and mma.sync; `None`: as wide as the copy
    /// vector): 2 takes C's rows at any 16-bit element, with A and B still copied wide.
    pub c_store: Option<u32>,
    /// The math path, which picks the kernel family.
    pub mma: Mma,
    /// One output tile per block, or a persistent grid (raster, group, stream-K tail).
    pub schedule: Schedule,
    /// Blocks per thread-block cluster, down M and along N.
    pub cluster: Grid2,
    /// How the accumulators reach C (wgmma: direct stores or TMA stores).
    pub epilogue: Epilogue,
    /// α, or α and β with a read of C.
    pub scale: Scale,
    /// A row or column bias vector.
    pub bias: Bias,
    /// The function applied to each element last.
    pub activation: Activation,
    /// A second output: the values before the activation.
    pub aux: Aux,
    /// A factor per row of D, applied last.
    pub row_scale: RowScale,
    /// fp8 operands' dequantization scales.
    pub quant: Quant,
    /// fp8: the k between promotions of the tensor cores' partial sums into f32 registers
    /// (`None`: no promotion).
    pub promote: Option<u32>,
    /// Grouped GEMM over the experts of a mixture-of-experts layer (wgmma).
    pub groups: Groups,
}

impl GemmSpec {
    /// Sets one key's value to `from`'s.
    pub fn set(&mut self, key: Key, from: &GemmSpec) {
        match key {
            Key::Name => self.name = from.name.clone(),
            Key::Arch => self.arch = from.arch,
            Key::Dtype => self.dtype = from.dtype,
            Key::BDtype => self.b_dtype = from.b_dtype,
            Key::Acc => self.acc = from.acc,
            Key::Out => self.out = from.out,
            Key::Layout => self.layout = from.layout,
            Key::CLayout => self.c_layout = from.c_layout,
            Key::Tile => self.tile = from.tile,
            Key::Warps => self.warps = from.warps,
            Key::Consumers => {
                self.consumers = from.consumers;
                self.pingpong = from.pingpong;
            }
            Key::Stages => self.stages = from.stages,
            Key::Swizzle => self.swizzle = from.swizzle,
            Key::Copy => self.copy = from.copy,
            Key::CStore => self.c_store = from.c_store,
            Key::Mma => self.mma = from.mma,
            Key::Schedule => self.schedule = from.schedule,
            Key::Cluster => self.cluster = from.cluster,
            Key::Epilogue => self.epilogue = from.epilogue,
            Key::Scale => self.scale = from.scale,
            Key::Bias => self.bias = from.bias,
            Key::Activation => self.activation = from.activation,
            Key::Aux => self.aux = from.aux,
            Key::RowScale => self.row_scale = from.row_scale,
            Key::Quant => self.quant = from.quant,
            Key::Promote => self.promote = from.promote,
            Key::Groups => self.groups = from.groups,
        }
    }

    /// The `consumers:` value: a count, or `pingpong`.
    pub fn consumers_value(&self) -> String {
        if self.pingpong {
            "pingpong".to_string()
        } else {
            self.consumers.to_string()
        }
    }

    /// The spec written back as a `gemm!` body, in canonical key order, every key that applies
    /// to its family explicit (`warps` for SIMT and mma.sync, `consumers` and `epilogue` for
    /// wgmma); `b_dtype` where it is not `dtype`; `c_layout` where C is column-major; `c_store` where given; the fused epilogue's keys (`scale`, `bias`,
    /// `activation`, `aux`, `row_scale`), `quant` and `promote` where they are not `none`.
    pub fn to_spec_text(&self) -> String {
        let threads = match self.mma {
            Mma::Wgmma => format!("consumers: {}", self.consumers_value()),
            Mma::Fma | Mma::MmaSync => format!("warps: {}", self.warps),
        };
        let epilogue = match self.mma {
            Mma::Wgmma => format!(", epilogue: {}", self.epilogue.name()),
            Mma::Fma | Mma::MmaSync => String::new(),
        };
        let b_dtype = if self.b_dtype == self.dtype {
            String::new()
        } else {
            format!(", b_dtype: {}", self.b_dtype.name())
        };
        let c_layout = match self.c_layout {
            CLayout::Row => String::new(),
            CLayout::Col => ", c_layout: col".to_string(),
        };
        let c_store = self
            .c_store
            .map_or_else(String::new, |bytes| format!(", c_store: {bytes}"));
        let mut fused = String::new();
        if self.scale != Scale::None {
            fused.push_str(&format!(", scale: {}", self.scale.name()));
        }
        if self.bias != Bias::None {
            fused.push_str(&format!(", bias: {}", self.bias));
        }
        if self.activation != Activation::None {
            fused.push_str(&format!(", activation: {}", self.activation.name()));
        }
        if self.aux != Aux::None {
            fused.push_str(&format!(", aux: {}", self.aux.name()));
        }
        if self.row_scale != RowScale::None {
            fused.push_str(&format!(", row_scale: {}", self.row_scale.name()));
        }
        if self.quant != Quant::None {
            fused.push_str(&format!(", quant: {}", self.quant.name()));
        }
        if let Some(k) = self.promote {
            fused.push_str(&format!(", promote: {k}"));
        }
        if self.groups.is_grouped() {
            fused.push_str(&format!(", groups: {}", self.groups.name()));
        }
        format!(
            "name: {}, arch: {}, dtype: {}{b_dtype}, acc: {}, out: {}, layout: {}{c_layout}, tile: {}, {threads}, \
             stages: {}, swizzle: {}, copy: {}{c_store}, mma: {}, schedule: {}, cluster: {}{epilogue}{fused}",
            self.name,
            self.arch.name(),
            self.dtype.name(),
            self.acc.name(),
            self.out.name(),
            self.layout.name(),
            self.tile,
            self.stages,
            self.swizzle,
            self.copy,
            self.mma.name(),
            self.schedule,
            self.cluster,
        )
    }
}

/// The keys of a spec, in canonical order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Key {
    Name,
    Arch,
    Dtype,
    BDtype,
    Acc,
    Out,
    Layout,
    CLayout,
    Tile,
    Warps,
    Consumers,
    Stages,
    Swizzle,
    Copy,
    CStore,
    Mma,
    Schedule,
    Cluster,
    Epilogue,
    Scale,
    Bias,
    Activation,
    Aux,
    RowScale,
    Quant,
    Promote,
    Groups,
}

impl Key {
    pub const ALL: [Key; 27] = [
        Key::Name,
        Key::Arch,
        Key::Dtype,
        Key::BDtype,
        Key::Acc,
        Key::Out,
        Key::Layout,
        Key::CLayout,
        Key::Tile,
        Key::Warps,
        Key::Consumers,
        Key::Stages,
        Key::Swizzle,
        Key::Copy,
        Key::CStore,
        Key::Mma,
        Key::Schedule,
        Key::Cluster,
        Key::Epilogue,
        Key::Scale,
        Key::Bias,
        Key::Activation,
        Key::Aux,
        Key::RowScale,
        Key::Quant,
        Key::Promote,
        Key::Groups,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Key::Name => "name",
            Key::Arch => "arch",
            Key::Dtype => "dtype",
            Key::BDtype => "b_dtype",
            Key::Acc => "acc",
            Key::Out => "out",
            Key::Layout => "layout",
            Key::CLayout => "c_layout",
            Key::Tile => "tile",
            Key::Warps => "warps",
            Key::Consumers => "consumers",
            Key::Stages => "stages",
            Key::Swizzle => "swizzle",
            Key::Copy => "copy",
            Key::CStore => "c_store",
            Key::Mma => "mma",
            Key::Schedule => "schedule",
            Key::Cluster => "cluster",
            Key::Epilogue => "epilogue",
            Key::Scale => "scale",
            Key::Bias => "bias",
            Key::Activation => "activation",
            Key::Aux => "aux",
            Key::RowScale => "row_scale",
            Key::Quant => "quant",
            Key::Promote => "promote",
            Key::Groups => "groups",
        }
    }

    pub fn from_name(name: &str) -> Option<Key> {
        Key::ALL.into_iter().find(|key| key.name() == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threads_copy_every_value_but_the_tma() {
        let narrow = Copy::CpAsync {
            hint: CacheHint::Ca,
            vector: 4,
        };
        assert_eq!(
            narrow.thread_copy(),
            Some(ThreadCopy::CpAsync {
                hint: CacheHint::Ca,
                vector: 4
            })
        );
        assert_eq!(
            Copy::SYNC.thread_copy().map(ThreadCopy::vector_bytes),
            Some(16)
        );
        assert_eq!(Copy::Tma { multicast: 2 }.thread_copy(), None);
        assert_eq!(
            Copy::CP_ASYNC_CG.thread_copy(),
            Some(ThreadCopy::CP_ASYNC_CG)
        );
    }

    #[test]
    fn every_schedule_visits_every_tile_once() {
        let schedules = [
            Schedule::Tile,
            Schedule::Persistent {
                raster: Raster::M,
                group: 1,
                tail: Tail::Whole,
            },
            Schedule::Persistent {
                raster: Raster::M,
                group: 8,
                tail: Tail::Whole,
            },
            Schedule::Persistent {
                raster: Raster::N,
                group: 3,
                tail: Tail::Whole,
            },
            Schedule::Persistent {
                raster: Raster::N,
                group: 64,
                tail: Tail::Whole,
            },
        ];
        for (schedule, order) in schedules.into_iter().flat_map(|schedule| {
            [BandOrder::AcrossFirst, BandOrder::AlongFirst].map(|order| (schedule, order))
        }) {
            for (tiles_m, tiles_n) in [(1, 1), (7, 11), (16, 8), (64, 32), (5, 100)] {
                let mut seen = vec![false; (tiles_m * tiles_n) as usize];
                for index in 0..tiles_m * tiles_n {
                    let (row, col) = schedule.tile_at(index, tiles_m, tiles_n, order);
                    assert!(
                        row < tiles_m && col < tiles_n,
                        "{schedule} {order:?} {index}"
                    );
                    let slot = &mut seen[(row * tiles_n + col) as usize];
                    assert!(!*slot, "{schedule} {order:?}: tile ({row}, {col}) twice");
                    *slot = true;
                }
            }
        }
    }

    #[test]
    fn a_batched_walk_visits_every_products_tiles_once() {
        let schedules = [
            Schedule::Tile,
            Schedule::Persistent {
                raster: Raster::M,
                group: 8,
                tail: Tail::Whole,
            },
            Schedule::Persistent {
                raster: Raster::N,
                group: 3,
                tail: Tail::Whole,
            },
        ];
        for (schedule, order) in schedules.into_iter().flat_map(|schedule| {
            [BandOrder::AcrossFirst, BandOrder::AlongFirst].map(|order| (schedule, order))
        }) {
            for (batch, tiles_m, tiles_n) in [(1, 7, 11), (3, 1, 1), (3, 5, 4), (17, 16, 8)] {
                let per_product = tiles_m * tiles_n;
                let mut seen = vec![false; (batch * per_product) as usize];
                for index in 0..batch * per_product {
                    let (product, row, col) =
                        schedule.batched_tile_at(index, tiles_m, tiles_n, order);
                    assert!(product < batch && row < tiles_m && col < tiles_n);
                    // Within a product the walk is the unbatched one.
                    assert_eq!(
                        (row, col),
                        schedule.tile_at(index - product * per_product, tiles_m, tiles_n, order)
                    );
                    let slot = &mut seen[(product * per_product + row * tiles_n + col) as usize];
                    assert!(
                        !*slot,
                        "{schedule} {order:?}: product {product} tile ({row}, {col}) twice"
                    );
                    *slot = true;
                }
                assert!(
                    seen.iter().all(|&s| s),
                    "{schedule} {order:?}: a tile never visited"
                );
            }
        }
    }

    #[test]
    fn raster_bands_advance_in_their_direction() {
        let across = BandOrder::AcrossFirst;
        let m = Schedule::Persistent {
            raster: Raster::M,
            group: 4,
            tail: Tail::Whole,
        };
        // 10 x 6 tiles: band 0 is columns 0-3, walked row by row; band 1 columns 4-5.
        let order: Vec<_> = (0..6).map(|i| m.tile_at(i, 10, 6, across)).collect();
        assert_eq!(order, [(0, 0), (0, 1), (0, 2), (0, 3), (1, 0), (1, 1)]);
        assert_eq!(m.tile_at(40, 10, 6, across), (0, 4));
        assert_eq!(m.tile_at(43, 10, 6, across), (1, 5));
        let n = Schedule::Persistent {
            raster: Raster::N,
            group: 4,
            tail: Tail::Whole,
        };
        let order: Vec<_> = (0..6).map(|i| n.tile_at(i, 6, 10, across)).collect();
        assert_eq!(order, [(0, 0), (1, 0), (2, 0), (3, 0), (0, 1), (1, 1)]);
        assert_eq!(n.tile_at(40, 6, 10, across), (4, 0));
    }

    #[test]
    fn bands_along_first_put_an_operands_readers_in_consecutive_tiles() {
        let along = BandOrder::AlongFirst;
        let m = Schedule::Persistent {
            raster: Raster::M,
            group: 4,
            tail: Tail::Whole,
        };
        // 3 x 6 tiles: band 0 is columns 0-3, walked column by column; band 1 columns 4-5.
        let order: Vec<_> = (0..6).map(|i| m.tile_at(i, 3, 6, along)).collect();
        assert_eq!(order, [(0, 0), (1, 0), (2, 0), (0, 1), (1, 1), (2, 1)]);
        assert_eq!(m.tile_at(12, 3, 6, along), (0, 4));
        assert_eq!(m.tile_at(17, 3, 6, along), (2, 5));
        let n = Schedule::Persistent {
            raster: Raster::N,
            group: 4,
            tail: Tail::Whole,
        };
        let order: Vec<_> = (0..4).map(|i| n.tile_at(i, 6, 3, along)).collect();
        assert_eq!(order, [(0, 0), (0, 1), (0, 2), (1, 0)]);
    }

    #[test]
    fn a_band_goes_along_first_where_it_runs_in_one_round_and_across_is_longer() {
        let walk = |raster| Schedule::Persistent {
            raster,
            group: 8,
            tail: Tail::Whole,
        };
        let (m, n) = (walk(Raster::M), walk(Raster::N));
        // 512x28672 in 128x128 tiles: bands of 4 x 8 tiles, 128 blocks.
        assert_eq!(
            m.band_order((4, 224), (128, 128), 128),
            BandOrder::AlongFirst
        );
        // 256-row tiles at 4096x28672: the band is 16 tiles long, longer than its 8 across.
        assert_eq!(
            m.band_order((16, 224), (256, 128), 132),
            BandOrder::AcrossFirst
        );
        // Its transpose: across (N) is the shorter side, A's readers are consecutive already.
        assert_eq!(
            m.band_order((224, 4), (128, 128), 128),
            BandOrder::AcrossFirst
        );
        assert_eq!(
            n.band_order((224, 4), (128, 128), 128),
            BandOrder::AlongFirst
        );
        // Squares: neither side is longer, whatever the tile's shape.
        assert_eq!(
            m.band_order((16, 16), (128, 128), 128),
            BandOrder::AcrossFirst
        );
        assert_eq!(
            m.band_order((16, 32), (256, 128), 132),
            BandOrder::AcrossFirst
        );
        // A band of 7 x 8 tiles spans rounds of 48 blocks.
        assert_eq!(
            m.band_order((7, 224), (128, 128), 48),
            BandOrder::AcrossFirst
        );
        assert_eq!(
            m.band_order((7, 224), (128, 128), 56),
            BandOrder::AlongFirst
        );
        assert_eq!(
            Schedule::Tile.band_order((4, 224), (128, 128), 128),
            BandOrder::AcrossFirst
        );
    }

    #[test]
    fn bands_of_more_than_u32_max_tiles_do_not_overflow() {
        let m = Schedule::Persistent {
            raster: Raster::M,
            group: 64,
            tail: Tail::Whole,
        };
        // One band of 64 x 2^26 = 2^32 tiles; the last tile is its bottom-right corner.
        assert_eq!(
            m.tile_at(u32::MAX, 1 << 26, 64, BandOrder::AcrossFirst),
            ((1 << 26) - 1, 63)
        );
    }

    #[test]
    fn grids_too_large_to_count_saturate() {
        let huge = Grid2 {
            rows: 65536,
            cols: 65536,
        };
        assert_eq!(huge.count(), u32::MAX);
        assert_eq!(Grid2 { rows: 4, cols: 2 }.count(), 8);
    }
}
