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
}

impl DType {
    pub fn name(self) -> &'static str {
        match self {
            DType::F16 => "f16",
            DType::Bf16 => "bf16",
            DType::Tf32 => "tf32",
            DType::F32 => "f32",
        }
    }

    pub fn size_bytes(self) -> u32 {
        match self {
            DType::F16 | DType::Bf16 => 2,
            DType::Tf32 | DType::F32 => 4,
        }
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
    pub fn name(self) -> &'static str {
        match self {
            Layout::RowRow => "rr",
            Layout::RowCol => "rc",
            Layout::ColRow => "cr",
            Layout::ColCol => "cc",
        }
    }
}

/// Block tile `BM x BN x BK`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Tile {
    pub m: u32,
    pub n: u32,
    pub k: u32,
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
    pub fn count(self) -> u32 {
        self.rows * self.cols
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
    /// `ld.global` into registers, then `st.shared` (SASS `LDG` + `STS`).
    Sync,
    /// `cp.async` (SASS `LDGSTS`).
    CpAsync(CacheHint),
    /// Tensor Memory Accelerator bulk copies (SASS `UTMALDG`); multicast over the cluster when > 1.
    Tma { multicast: u32 },
}

impl fmt::Display for Copy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Copy::Sync => f.write_str("sync"),
            Copy::CpAsync(CacheHint::Cg) => f.write_str("cp_async(cg)"),
            Copy::CpAsync(CacheHint::Ca) => f.write_str("cp_async(ca)"),
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

/// Raster order of a persistent schedule.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Raster {
    M,
    N,
}

/// How output tiles are assigned to thread blocks (`schedule:`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Schedule {
    /// One output tile per thread block.
    Tile,
    /// A grid of one block per SM walking the tiles in grouped raster order.
    Persistent { raster: Raster, group: u32 },
}

impl fmt::Display for Schedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Schedule::Tile => f.write_str("tile"),
            Schedule::Persistent { raster, group } => {
                let raster = match raster {
                    Raster::M => "m",
                    Raster::N => "n",
                };
                write!(f, "persistent(raster = {raster}, group = {group})")
            }
        }
    }
}

/// A complete tile spec: every key has a value, defaults filled in.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct GemmSpec {
    pub name: String,
    pub arch: Arch,
    pub dtype: DType,
    pub acc: DType,
    pub out: DType,
    pub layout: Layout,
    pub tile: Tile,
    pub warps: Grid2,
    pub consumers: u32,
    pub stages: u32,
    pub swizzle: Swizzle,
    pub copy: Copy,
    pub mma: Mma,
    pub schedule: Schedule,
    pub cluster: Grid2,
}

impl GemmSpec {
    /// The spec written back as a `gemm!` body, in canonical key order, every key that applies
    /// to its family explicit (`warps` for SIMT and mma.sync, `consumers` for wgmma).
    pub fn to_spec_text(&self) -> String {
        let threads = match self.mma {
            Mma::Wgmma => format!("consumers: {}", self.consumers),
            Mma::Fma | Mma::MmaSync => format!("warps: {}", self.warps),
        };
        format!(
            "name: {}, arch: {}, dtype: {}, acc: {}, out: {}, layout: {}, tile: {}, {threads}, \
             stages: {}, swizzle: {}, copy: {}, mma: {}, schedule: {}, cluster: {}",
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
    Acc,
    Out,
    Layout,
    Tile,
    Warps,
    Consumers,
    Stages,
    Swizzle,
    Copy,
    Mma,
    Schedule,
    Cluster,
}

impl Key {
    pub const ALL: [Key; 15] = [
        Key::Name,
        Key::Arch,
        Key::Dtype,
        Key::Acc,
        Key::Out,
        Key::Layout,
        Key::Tile,
        Key::Warps,
        Key::Consumers,
        Key::Stages,
        Key::Swizzle,
        Key::Copy,
        Key::Mma,
        Key::Schedule,
        Key::Cluster,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Key::Name => "name",
            Key::Arch => "arch",
            Key::Dtype => "dtype",
            Key::Acc => "acc",
            Key::Out => "out",
            Key::Layout => "layout",
            Key::Tile => "tile",
            Key::Warps => "warps",
            Key::Consumers => "consumers",
            Key::Stages => "stages",
            Key::Swizzle => "swizzle",
            Key::Copy => "copy",
            Key::Mma => "mma",
            Key::Schedule => "schedule",
            Key::Cluster => "cluster",
        }
    }

    pub fn from_name(name: &str) -> Option<Key> {
        Key::ALL.into_iter().find(|key| key.name() == name)
    }
}
