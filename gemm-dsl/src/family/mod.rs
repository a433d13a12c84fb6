//! Kernel families. A family is one module here holding its defaults, its scope, its
//! geometry (how a block tile splits over warps and copies), its rules, its budgets and its
//! numbers in the cost model: one implementation of `FamilyRules` (and of its companion
//! `crate::pick::family_cost::FamilyCost`), whose methods have no default bodies, so a new family is a
//! compile error until it answers every question the shared rules and the cost model ask.
//! The families are listed three times, each list an exhaustive enum, so the compiler points
//! at each place a new family must fill: the spec's `mma:` value (`crate::spec::Mma`,
//! matched here to the family's rules and flow, the only matches on it in validation and
//! the cost model), [`Family`] here (the valid spec's geometry) and
//! `gemm_codegen::family::FamilyPlan` (the plan). `docs/adding-a-family.md` walks through every file. The families build on
//! `crate::rules` and import nothing from here; the common checks run before, and
//! `Validator::finish` after, every family's own flow.

pub mod mma_sync;
pub mod simt;
pub mod wgmma;

use crate::rules::{Budgets, FamilyRules, Validator};
use crate::spec::Mma;
use mma_sync::MmaSyncGeometry;
use simt::SimtGeometry;
use wgmma::WgmmaGeometry;

/// The kernel family a valid spec belongs to, with its geometry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    /// `mma: fma`: warp-tiled SIMT FFMA.
    Simt(SimtGeometry),
    /// `mma: mma_sync`: Ampere tensor cores, ldmatrix from swizzled shared memory.
    MmaSync(MmaSyncGeometry),
    /// `mma: wgmma`: Hopper, TMA into an mbarrier ring, warpgroup MMAs from shared memory.
    Wgmma(WgmmaGeometry),
}

impl Family {
    pub fn threads(&self) -> u32 {
        match self {
            Family::Simt(g) => g.threads,
            Family::MmaSync(g) => g.threads,
            Family::Wgmma(g) => g.threads,
        }
    }
}

/// The rules (defaults, scope, flow, cost numbers) of the family an `mma:` value picks.
pub(crate) fn rules(mma: Mma) -> &'static dyn FamilyRules {
    match mma {
        Mma::Fma => &simt::Simt,
        Mma::MmaSync => &mma_sync::MmaSync,
        Mma::Wgmma => &wgmma::Wgmma,
    }
}

/// The family's validation for the spec's `mma:` value: values outside its scope are
/// rejected here, for every family alike, then the family's own flow runs.
pub(crate) fn validate(v: &mut Validator<'_>) -> Option<(Family, Budgets)> {
    v.reject_unimplemented();
    match v.spec.mma {
        Mma::Fma => v.simt().map(|(g, b)| (Family::Simt(g), b)),
        Mma::MmaSync => v.mma_sync().map(|(g, b)| (Family::MmaSync(g), b)),
        Mma::Wgmma => v.wgmma().map(|(g, b)| (Family::Wgmma(g), b)),
    }
}
