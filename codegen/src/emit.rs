//! `emit`: a validated spec in, PTX and everything a launcher needs out.

use crate::plan::math_only::MathOnlyPlan;
use crate::plan::{self, FamilyPlan};
use crate::ptx;
use gemm_dsl::{Copy as CopyKind, DType, GemmSpec, Mma, Schedule, ValidSpec};

/// A SASS opcode that proves (or disproves) which hardware path a kernel takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Opcode {
    /// SIMT fused multiply-add.
    Ffma,
    /// Global load to registers.
    Ldg,
    /// Shared store from registers.
    Sts,
    /// Shared load to registers.
    Lds,
    /// `cp.async`: global to shared without registers.
    Ldgsts,
    /// `cp.async.commit_group`.
    Ldgdepbar,
    /// `cp.async.wait_group` (and other scoreboard waits).
    Depbar,
    /// `ldmatrix`.
    Ldsm,
    /// `mma.sync` tensor-core op.
    Hmma,
    /// `wgmma.mma_async`.
    Hgmma,
    /// TMA tensor load.
    Utmaldg,
    /// Local memory load / store: register spills or dynamically indexed arrays.
    Ldl,
    Stl,
}

impl Opcode {
    /// The SASS mnemonic without modifiers, as nvdisasm prints it.
    pub const fn mnemonic(self) -> &'static str {
        match self {
            Opcode::Ffma => "FFMA",
            Opcode::Ldg => "LDG",
            Opcode::Sts => "STS",
            Opcode::Lds => "LDS",
            Opcode::Ldgsts => "LDGSTS",
            Opcode::Ldgdepbar => "LDGDEPBAR",
            Opcode::Depbar => "DEPBAR",
            Opcode::Ldsm => "LDSM",
            Opcode::Hmma => "HMMA",
            Opcode::Hgmma => "HGMMA",
            Opcode::Utmaldg => "UTMALDG",
            Opcode::Ldl => "LDL",
            Opcode::Stl => "STL",
        }
    }
}

/// What the SASS of a kernel must (not) contain.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SassCheck {
    Present(Opcode),
    Absent(Opcode),
    /// An instruction whose opcode with modifiers is this text or starts with it followed by
    /// `.`, e.g. `HMMA.16816.F32.BF16` or `LDSM.16.MT88.4`: proves the exact variant.
    PresentVariant(&'static str),
    /// An instruction whose opcode with modifiers is exactly this text: for variants that are
    /// a prefix of others, e.g. the f16 `HMMA.16816.F32`, which `HMMA.16816.F32.BF16` would
    /// satisfy as a [`SassCheck::PresentVariant`].
    PresentExact(&'static str),
}

/// Launch geometry and argument rules of an emitted kernel. Plain data, so `gemm!` can write
/// it as a constant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LaunchShape {
    pub threads_per_block: u32,
    pub tile_m: u32,
    pub tile_n: u32,
    pub tile_k: u32,
    pub dynamic_smem_bytes: u32,
    /// Byte alignment operand pointers and leading dimensions (in bytes) must have.
    pub operand_align_bytes: u32,
    /// Bytes of one A/B element and of one C element.
    pub input_element_bytes: u32,
    pub output_element_bytes: u32,
    /// Compute capability the kernel is built for (`major * 10 + minor`).
    pub compute_capability: u32,
    /// `sm_90a`-style targets run on exactly their compute capability, nowhere newer.
    pub arch_specific: bool,
    pub schedule: GridSchedule,
}

/// How the grid covers the output tiles.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GridSchedule {
    /// One block per tile: x walks N tiles, y walks M tiles.
    Tiles,
    /// A one-dimensional grid of at most as many blocks as the device holds at once, each
    /// looping over tiles in raster bands `group` tiles across (`schedule: persistent`).
    Persistent { group: u32 },
}

impl LaunchShape {
    /// Grid for an `m x n x k` problem. `resident_blocks` is how many blocks of this kernel
    /// the device holds at once (SMs times blocks per SM): a persistent grid launches no more,
    /// a one-tile-per-block grid ignores it.
    pub const fn grid(&self, m: u32, n: u32, _k: u32, resident_blocks: u32) -> (u32, u32, u32) {
        let (tiles_n, tiles_m) = (n.div_ceil(self.tile_n), m.div_ceil(self.tile_m));
        match self.schedule {
            GridSchedule::Tiles => (tiles_n, tiles_m, 1),
            GridSchedule::Persistent { .. } => {
                let tiles = tiles_m.saturating_mul(tiles_n);
                let blocks = if resident_blocks < tiles {
                    resident_blocks
                } else {
                    tiles
                };
                (if blocks == 0 { 1 } else { blocks }, 1, 1)
            }
        }
    }

    /// Whether the kernel can compute this problem (every family so far needs whole tiles).
    pub fn check_dims(&self, m: u32, n: u32, k: u32) -> Result<(), String> {
        for (dim, value, tile) in [
            ("M", m, self.tile_m),
            ("N", n, self.tile_n),
            ("K", k, self.tile_k),
        ] {
            if value == 0 || value % tile != 0 {
                return Err(format!(
                    "{dim} = {value} is not a positive multiple of the tile's {tile}"
                ));
            }
        }
        if let GridSchedule::Persistent { group } = self.schedule {
            // The kernel's tile index, the next index and a band's tile count are 32-bit.
            let (tiles_m, tiles_n) = (u64::from(m / self.tile_m), u64::from(n / self.tile_n));
            let band_tiles = u64::from(group) * tiles_m.max(tiles_n);
            if 2 * tiles_m * tiles_n + band_tiles > u64::from(i32::MAX as u32) {
                return Err(format!(
                    "{tiles_m} x {tiles_n} tiles overflow the persistent schedule's 32-bit tile index"
                ));
            }
        }
        Ok(())
    }
}

/// One kernel parameter, in order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelParam {
    pub name: &'static str,
    pub ptx_type: &'static str,
    pub meaning: &'static str,
}

/// The parameters of every GEMM kernel so far: `C = A·B`, row-major.
pub const GEMM_PARAMS: &[KernelParam] = &[
    KernelParam {
        name: "a",
        ptx_type: ".u64",
        meaning: "A, M x K, device pointer",
    },
    KernelParam {
        name: "b",
        ptx_type: ".u64",
        meaning: "B, K x N, device pointer",
    },
    KernelParam {
        name: "c",
        ptx_type: ".u64",
        meaning: "C, M x N, device pointer (written)",
    },
    KernelParam {
        name: "m",
        ptx_type: ".u32",
        meaning: "rows of A and C",
    },
    KernelParam {
        name: "n",
        ptx_type: ".u32",
        meaning: "columns of B and C",
    },
    KernelParam {
        name: "k",
        ptx_type: ".u32",
        meaning: "columns of A, rows of B",
    },
    KernelParam {
        name: "lda",
        ptx_type: ".u32",
        meaning: "A row stride, elements",
    },
    KernelParam {
        name: "ldb",
        ptx_type: ".u32",
        meaning: "B row stride, elements",
    },
    KernelParam {
        name: "ldc",
        ptx_type: ".u32",
        meaning: "C row stride, elements",
    },
];

/// A kernel as `gemm!` bakes it into a crate: borrowed data only, so it can be a `static`.
#[derive(Clone, Copy, Debug)]
pub struct KernelInfo<'a> {
    pub name: &'a str,
    pub ptx: &'a str,
    /// The validated spec, every key explicit.
    pub spec: &'a str,
    pub launch: LaunchShape,
    pub params: &'a [KernelParam],
    pub expected_sass: &'a [SassCheck],
}

/// Everything generated for one spec.
#[derive(Clone, Debug)]
pub struct Emitted {
    pub spec: GemmSpec,
    /// The validated spec, every key explicit.
    pub spec_text: String,
    pub ptx: String,
    pub kernel_name: String,
    pub launch: LaunchShape,
    pub params: &'static [KernelParam],
    pub expected_sass: Vec<SassCheck>,
}

impl Emitted {
    pub fn info(&self) -> KernelInfo<'_> {
        KernelInfo {
            name: &self.kernel_name,
            ptx: &self.ptx,
            spec: &self.spec_text,
            launch: self.launch,
            params: self.params,
            expected_sass: &self.expected_sass,
        }
    }
}

/// The SASS a spec promises: the copy path, the math path, and never local memory.
pub fn expected_sass(spec: &GemmSpec) -> Vec<SassCheck> {
    use SassCheck::{Absent, Present};
    let mut checks = Vec::new();
    match spec.copy {
        // Every global load of operands goes through LDGSTS: a plain LDG would mean the
        // compiler fell back to the synchronous path.
        CopyKind::CpAsync(_) => checks.extend([
            Present(Opcode::Ldgsts),
            Present(Opcode::Ldgdepbar),
            Absent(Opcode::Ldg),
        ]),
        CopyKind::Sync => checks.extend([
            Present(Opcode::Ldg),
            Present(Opcode::Sts),
            Absent(Opcode::Ldgsts),
        ]),
        CopyKind::Tma { .. } => checks.push(Present(Opcode::Utmaldg)),
    }
    checks.extend(math_sass(spec));
    match spec.mma {
        Mma::Fma => checks.push(Present(Opcode::Lds)),
        Mma::MmaSync => {
            // The ldmatrix forms of A and B.
            checks.push(Present(Opcode::Ldsm));
            checks.push(SassCheck::PresentVariant("LDSM.16.M88.4"));
            if spec.dtype != DType::Tf32 {
                checks.push(SassCheck::PresentVariant("LDSM.16.MT88.4"));
            }
            if let CopyKind::CpAsync(_) = spec.copy {
                checks.push(Present(Opcode::Depbar));
            }
        }
        Mma::Wgmma => {}
    }
    checks.extend([Absent(Opcode::Ldl), Absent(Opcode::Stl)]);
    checks
}

/// The math path's opcode and, for mma.sync, the instruction shape and input type.
fn math_sass(spec: &GemmSpec) -> Vec<SassCheck> {
    use SassCheck::{Present, PresentExact, PresentVariant};
    match spec.mma {
        Mma::Fma => vec![Present(Opcode::Ffma)],
        Mma::MmaSync => vec![
            Present(Opcode::Hmma),
            match spec.dtype {
                DType::Tf32 => PresentVariant("HMMA.1688.F32.TF32"),
                // nvdisasm names no input type for f16 inputs with f32 accumulators.
                DType::F16 => PresentExact("HMMA.16816.F32"),
                _ => PresentVariant("HMMA.16816.F32.BF16"),
            },
        ],
        Mma::Wgmma => vec![Present(Opcode::Hgmma)],
    }
}

/// Plans and writes the kernel of a validated spec.
pub fn emit(valid: &ValidSpec) -> Emitted {
    let plan = plan::plan(valid);
    let ptx = ptx::write(&plan);
    let spec = &valid.spec;
    let (tile_k, operand_align_bytes) = match &plan.family {
        FamilyPlan::Simt(p) => (p.block_k, p.vector_bytes),
        FamilyPlan::MmaSync(p) => (p.block_k, p.vector_bytes),
    };
    Emitted {
        spec: spec.clone(),
        spec_text: plan.spec_text.clone(),
        kernel_name: spec.name.clone(),
        launch: LaunchShape {
            threads_per_block: valid.threads_per_block(),
            tile_m: spec.tile.m,
            tile_n: spec.tile.n,
            tile_k,
            dynamic_smem_bytes: u32::try_from(valid.smem.total())
                .expect("validation keeps shared memory under the per-block limit"),
            operand_align_bytes,
            input_element_bytes: spec.dtype.size_bytes(),
            output_element_bytes: spec.out.size_bytes(),
            compute_capability: spec.arch.compute_capability(),
            arch_specific: spec.arch.is_arch_specific(),
            schedule: match spec.schedule {
                Schedule::Tile => GridSchedule::Tiles,
                Schedule::Persistent { group, .. } => GridSchedule::Persistent { group },
            },
        },
        params: GEMM_PARAMS,
        expected_sass: expected_sass(spec),
        ptx,
    }
}

/// Parses, validates and emits spec text in one step.
pub fn emit_str(text: &str) -> Result<Emitted, gemm_dsl::SpecErrors> {
    Ok(emit(&gemm_dsl::check_str(text)?))
}

/// A spec's main-loop math alone, as a kernel: see [`MathOnlyPlan`](crate::plan::math_only::MathOnlyPlan).
/// Parameters `(out: *mut f32, trips: u32)`; `out` holds one f32 per launched thread.
#[derive(Clone, Debug)]
pub struct MathOnly {
    pub kernel_name: String,
    pub ptx: String,
    pub threads_per_block: u32,
    /// Flops of one trip of one block (one k tile of the block tile).
    pub flops_per_trip: u64,
    /// The kernel's math opcode, and no memory traffic but the final store.
    pub expected_sass: Vec<SassCheck>,
}

pub fn emit_math_only(valid: &ValidSpec) -> MathOnly {
    let plan = plan::plan(valid);
    let math = MathOnlyPlan::of(&plan);
    MathOnly {
        ptx: ptx::write_math_only(&plan, &math),
        kernel_name: math.name,
        threads_per_block: math.threads,
        flops_per_trip: math.flops_per_trip,
        expected_sass: expected_math_only_sass(&valid.spec),
    }
}

fn expected_math_only_sass(spec: &GemmSpec) -> Vec<SassCheck> {
    let mut checks = math_sass(spec);
    checks.extend(
        [
            Opcode::Ldg,
            Opcode::Lds,
            Opcode::Ldsm,
            Opcode::Ldgsts,
            Opcode::Sts,
            Opcode::Ldl,
            Opcode::Stl,
        ]
        .map(SassCheck::Absent),
    );
    checks
}
