//! `emit`: a validated spec in, PTX and everything a launcher needs out.

use crate::family::{self, FamilyPlan};
use crate::plan::math_only::MathOnlyPlan;
use crate::plan::LaunchContract;
use crate::ptx;
use gemm_dsl::abi::{
    CopyPath, GridSchedule, KernelInfo, KernelParam, KernelParts, LaunchShape, Opcode, SassCheck,
    StorageOrder,
};
use gemm_dsl::{GemmSpec, Schedule, ValidSpec};

/// Everything generated for one spec. Read-only: the parts describe each other, and
/// [`Emitted::info`] hands them to the runtime as a [`KernelInfo`].
#[derive(Clone, Debug)]
pub struct Emitted {
    spec: GemmSpec,
    spec_text: String,
    ptx: String,
    kernel_name: String,
    launch: LaunchShape,
    params: Vec<KernelParam>,
    expected_sass: Vec<SassCheck>,
}

impl Emitted {
    /// The kernel's description for the runtime.
    ///
    /// ```
    /// let emitted = gemm_codegen::emit_str("name: k, arch: sm_80").unwrap();
    /// let info = emitted.info();
    /// assert_eq!(info.name(), "k");
    /// assert!(info.ptx().contains(".visible .entry k("));
    /// // A hand-edited variant: the caller vouches for the edit.
    /// let mut parts = info.parts();
    /// let edited = info.ptx().replace("bar.sync\t0;", "bar.sync\t0;\n\tbar.sync\t0;");
    /// parts.ptx = &edited;
    /// // SAFETY: one more barrier changes neither the entry, its parameters nor what the kernel
    /// // reads and writes at this launch shape.
    /// let variant = unsafe { gemm_codegen::KernelInfo::from_parts(parts) };
    /// assert_eq!(variant.launch(), info.launch());
    /// ```
    pub fn info(&self) -> KernelInfo<'_> {
        let parts = KernelParts {
            name: &self.kernel_name,
            ptx: &self.ptx,
            spec: &self.spec_text,
            launch: self.launch,
            params: &self.params,
            expected_sass: &self.expected_sass,
        };
        // SAFETY: every part was written by one `emit` of one validated spec: the PTX's entry
        // and parameters are the plan's, its launch shape and SASS promises the same plan's.
        unsafe { KernelInfo::from_parts(parts) }
    }

    pub fn spec(&self) -> &GemmSpec {
        &self.spec
    }

    /// The validated spec, every key explicit.
    pub fn spec_text(&self) -> &str {
        &self.spec_text
    }

    pub fn ptx(&self) -> &str {
        &self.ptx
    }

    /// The PTX entry point (the spec's `name`).
    pub fn kernel_name(&self) -> &str {
        &self.kernel_name
    }

    pub fn launch(&self) -> &LaunchShape {
        &self.launch
    }

    pub fn params(&self) -> &[KernelParam] {
        &self.params
    }

    pub fn expected_sass(&self) -> &[SassCheck] {
        &self.expected_sass
    }
}

/// Plans and writes the kernel of a validated spec.
pub fn emit(valid: &ValidSpec) -> Emitted {
    let plan = family::plan(valid);
    let ptx = ptx::write(&plan);
    let spec = &valid.spec;
    let contract = plan.family.launch_contract();
    Emitted {
        spec: spec.clone(),
        spec_text: plan.spec_text.clone(),
        kernel_name: spec.name.clone(),
        launch: launch_shape(valid, &contract),
        params: contract.params,
        expected_sass: plan.family.sass_promises(spec),
        ptx,
    }
}

/// The launch shape [`emit`] gives a spec, without writing its PTX: what the kernel picker's
/// cost model reads ([`crate::pick`]).
pub fn launch_of(valid: &ValidSpec) -> LaunchShape {
    launch_shape(valid, &family::plan(valid).family.launch_contract())
}

fn launch_shape(valid: &ValidSpec, contract: &LaunchContract) -> LaunchShape {
    let spec = &valid.spec;
    LaunchShape {
        threads_per_block: valid.threads_per_block(),
        tile_m: spec.tile.m,
        tile_n: spec.tile.n,
        tile_k: contract.tile_k,
        dynamic_smem_bytes: u32::try_from(valid.smem.total())
            .expect("validation keeps shared memory under the per-block limit"),
        operand_align_bytes: contract.operand_align_bytes,
        output_align_bytes: contract.output_align_bytes,
        copy_path: CopyPath::of(spec.copy),
        input_element_bytes: spec.dtype.size_bytes(),
        output_element_bytes: spec.out.size_bytes(),
        compute_capability: spec.arch.compute_capability(),
        arch_specific: spec.arch.is_arch_specific(),
        schedule: match spec.schedule {
            Schedule::Tile => GridSchedule::Tiles,
            Schedule::Persistent { group, .. } => GridSchedule::Persistent { group },
        },
        cluster: contract.cluster,
        partial_tiles: contract.partial_tiles,
        a_order: StorageOrder::of_layout(spec.layout).0,
        b_order: StorageOrder::of_layout(spec.layout).1,
        c_order: StorageOrder::of_c_layout(spec.c_layout),
        workspace_bytes_per_block: contract.workspace_bytes_per_block,
    }
}

/// Parses, validates and emits spec text in one step.
pub fn emit_str(text: &str) -> Result<Emitted, gemm_dsl::SpecErrors> {
    Ok(emit(&gemm_dsl::check_str(text)?))
}

/// A spec's main-loop math alone, as a kernel: see [`MathOnlyPlan`].
/// Parameters `(out: *mut f32, trips: u32)`; `out` holds one f32 per launched thread.
/// Read-only, like [`Emitted`]: the runtime launches the PTX with this block size and sizes
/// `out` by it.
#[derive(Clone, Debug)]
pub struct MathOnly {
    kernel_name: String,
    ptx: String,
    threads_per_block: u32,
    flops_per_trip: u64,
    dynamic_smem_bytes: u32,
    expected_sass: Vec<SassCheck>,
}

impl MathOnly {
    pub fn kernel_name(&self) -> &str {
        &self.kernel_name
    }

    pub fn ptx(&self) -> &str {
        &self.ptx
    }

    pub fn threads_per_block(&self) -> u32 {
        self.threads_per_block
    }

    /// Flops of one trip of one block (one k tile of the block tile).
    pub fn flops_per_trip(&self) -> u64 {
        self.flops_per_trip
    }

    /// Dynamic shared memory per block (operands of a wgmma probe live there).
    pub fn dynamic_smem_bytes(&self) -> u32 {
        self.dynamic_smem_bytes
    }

    /// The kernel's math opcode, and no memory traffic but the final store.
    pub fn expected_sass(&self) -> &[SassCheck] {
        &self.expected_sass
    }
}

pub fn emit_math_only(valid: &ValidSpec) -> MathOnly {
    let plan = family::plan(valid);
    let math = plan.family.math_only(format!("{}_math_only", plan.name));
    let expected_sass = expected_math_only_sass(&plan.family, &math);
    MathOnly {
        ptx: ptx::write_math_only(&plan, &math),
        kernel_name: math.name,
        threads_per_block: math.threads,
        flops_per_trip: math.flops_per_trip,
        dynamic_smem_bytes: math.smem_bytes,
        expected_sass,
    }
}

/// The probe's math, and no memory traffic but its final store (a probe whose operands live
/// in shared memory fills them once, with STS, before the loop).
fn expected_math_only_sass(family: &FamilyPlan, math: &MathOnlyPlan) -> Vec<SassCheck> {
    let mut checks = family.math_promises();
    let mut absent = vec![
        Opcode::Ldg,
        Opcode::Lds,
        Opcode::Ldsm,
        Opcode::Ldgsts,
        Opcode::Utmaldg,
        Opcode::Ldl,
        Opcode::Stl,
    ];
    if math.smem_words == 0 {
        absent.push(Opcode::Sts);
    }
    checks.extend(absent.into_iter().map(SassCheck::Absent));
    checks
}
