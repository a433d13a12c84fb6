//! The kernel families of the code generator. Each family is a folder (its plan by concern,
//! its SASS promises, its `explain` section and math-only probe) beside its templates in
//! `templates/<family>/`. [`FamilyPlan`] is codegen's list of the families, the last of
//! three exhaustive enums that list them: gemm-dsl's `Mma` (the spec's `mma:` value) and
//! `Family` (a valid spec's geometry) come first, and [`plan`] turns a `Family` into a
//! `FamilyPlan`. Every match over [`FamilyPlan`] in the library is in this file, so after
//! the new variants the compiler points at each arm a new family needs; what it does not
//! point at (the templates' registration in [`FamilyPlan::TEMPLATES`], catalog entries,
//! tests) is listed in `docs/adding-a-family.md`.

pub mod mma_sync;
pub mod simt;
pub mod wgmma;

use crate::plan::math_only::MathOnlyPlan;
use crate::plan::{LaunchContract, PTX_VERSION};
use gemm_dsl::abi::{Opcode, SassCheck};
use gemm_dsl::{Family, GemmSpec, ValidSpec};
use serde::Serialize;

/// A kernel, ready to be written out.
#[derive(Clone, Debug, Serialize)]
pub struct KernelPlan {
    pub name: String,
    pub target: &'static str,
    pub ptx_version: &'static str,
    /// The validated spec, every key explicit; printed in the PTX header.
    pub spec_text: String,
    /// The entry's `.param` declarations, in order, written from the ABI's parameter list
    /// ([`LaunchContract::params`]), so the PTX and the launcher cannot disagree.
    pub entry_params: Vec<String>,
    pub family: FamilyPlan,
}

/// One plan is built per emitted kernel, so the variants' sizes don't matter.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum FamilyPlan {
    Simt(simt::SimtPlan),
    MmaSync(mma_sync::MmaSyncPlan),
    Wgmma(wgmma::WgmmaPlan),
}

impl FamilyPlan {
    /// Every family's templates, compiled into the binary.
    pub const TEMPLATES: [&'static [(&'static str, &'static str)]; 3] = [
        simt::write::TEMPLATES,
        mma_sync::write::TEMPLATES,
        wgmma::write::TEMPLATES,
    ];

    /// Fills the kernel template's context with the family's parts; returns its name.
    pub fn kernel_template(&self, context: &mut tera::Context) -> &'static str {
        match self {
            FamilyPlan::Simt(p) => p.kernel_template(context),
            FamilyPlan::MmaSync(p) => p.kernel_template(context),
            FamilyPlan::Wgmma(p) => p.kernel_template(context),
        }
    }

    /// The family's math blocks: the FFMAs of each k position of a group (SIMT), the
    /// mma.sync instructions of each k step, or the wgmmas of a k tile.
    pub fn math_blocks(&self) -> Vec<String> {
        match self {
            FamilyPlan::Simt(p) => p.math_blocks(),
            FamilyPlan::MmaSync(p) => p.math_blocks(),
            FamilyPlan::Wgmma(p) => p.math_blocks(),
        }
    }

    /// The math-only probe's template: register-operand probes share one.
    pub fn math_only_template(&self) -> &'static str {
        match self {
            FamilyPlan::Wgmma(_) => "wgmma/math_only.ptx.tera",
            FamilyPlan::Simt(_) | FamilyPlan::MmaSync(_) => "common/math_only.ptx.tera",
        }
    }

    /// The family's section of `gemm-codegen explain`.
    pub fn explain(
        &self,
        out: &mut String,
        valid: &ValidSpec,
        ptxas: Result<&crate::sass::PtxasResources, &str>,
    ) {
        match self {
            FamilyPlan::Simt(p) => p.explain(out, valid, ptxas),
            FamilyPlan::MmaSync(p) => p.explain(out, valid, ptxas),
            FamilyPlan::Wgmma(p) => p.explain(out, valid, ptxas),
        }
    }

    /// The numbers of the math-only probe named `name`.
    pub fn math_only(&self, name: String) -> MathOnlyPlan {
        match self {
            FamilyPlan::Simt(p) => p.math_only(name),
            FamilyPlan::MmaSync(p) => p.math_only(name),
            FamilyPlan::Wgmma(p) => p.math_only(name),
        }
    }

    pub fn launch_contract(&self) -> LaunchContract {
        match self {
            FamilyPlan::Simt(p) => p.launch_contract(),
            FamilyPlan::MmaSync(p) => p.launch_contract(),
            FamilyPlan::Wgmma(p) => p.launch_contract(),
        }
    }

    /// The SASS the kernel promises: its copy and math paths, and never local memory.
    pub fn sass_promises(&self, spec: &GemmSpec) -> Vec<SassCheck> {
        let mut checks = match self {
            FamilyPlan::Simt(p) => simt::sass_promises(p),
            FamilyPlan::MmaSync(p) => mma_sync::sass_promises(p, spec),
            FamilyPlan::Wgmma(p) => wgmma::sass_promises(p),
        };
        checks.extend([
            SassCheck::Absent(Opcode::Ldl),
            SassCheck::Absent(Opcode::Stl),
        ]);
        // A fused epilogue that reads C-in, a bias or the rows' factors loads through
        // registers after the main loop; the copy path's "no LDG" speaks of the main loop only then, and the test that
        // counts the main loop's instructions holds it.
        if crate::plan::epilogue::reads_memory(spec) {
            checks.retain(|check| *check != SassCheck::Absent(Opcode::Ldg));
        }
        checks
    }

    /// The math instructions the kernel's main loop runs, as SASS (its math-only probe
    /// promises these too).
    pub fn math_promises(&self) -> Vec<SassCheck> {
        match self {
            FamilyPlan::Simt(_) => simt::math_promises(),
            FamilyPlan::MmaSync(p) => mma_sync::math_promises(p),
            FamilyPlan::Wgmma(p) => wgmma::math_promises(p),
        }
    }
}

pub fn plan(valid: &ValidSpec) -> KernelPlan {
    let family = match &valid.family {
        Family::Simt(geometry) => FamilyPlan::Simt(simt::plan(valid, geometry)),
        Family::MmaSync(geometry) => FamilyPlan::MmaSync(mma_sync::plan(valid, geometry)),
        Family::Wgmma(geometry) => FamilyPlan::Wgmma(wgmma::plan(valid, geometry)),
    };
    let name = valid.spec.name.clone();
    let entry_params = family
        .launch_contract()
        .params
        .iter()
        .map(|param| param.ptx_declaration(&name))
        .collect();
    KernelPlan {
        name,
        target: valid.spec.arch.name(),
        ptx_version: PTX_VERSION,
        spec_text: valid.spec.to_spec_text(),
        entry_params,
        family,
    }
}
