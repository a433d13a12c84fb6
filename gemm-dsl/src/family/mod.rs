//! Kernel families. A family is one module here holding its geometry (how a block tile
//! splits over warps and copies), its rules and its budgets; [`validate`] is the one place
//! that picks a family from the spec's `mma:`. The common checks (ranges, architecture
//! features) run before, and [`Validator::finish`] after, every family's own flow.

pub mod mma_sync;
pub mod simt;
pub mod wgmma;

use crate::spec::Mma;
use crate::validate::{ValidSpec, Validator};
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

/// The family's validation flow for the spec's `mma:` value.
pub(crate) fn validate(v: &mut Validator<'_>) -> Option<ValidSpec> {
    match v.spec.mma {
        Mma::Fma => v.simt(),
        Mma::MmaSync => v.mma_sync(),
        Mma::Wgmma => v.wgmma(),
    }
}
