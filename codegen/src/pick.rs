//! The cost model ([`gemm_dsl::pick`], re-exported) over kernels planned here: a spec's
//! [`Candidate`] needs its launch shape, which the family's plan fixes.

pub use gemm_dsl::pick::*;

use crate::emit::launch_of;
use gemm_dsl::{check_str, DType, SpecErrors, ValidSpec};
use sets::KernelSet;

/// The model's view of `valid`'s kernel, planned (not emitted).
pub fn candidate(valid: &ValidSpec) -> Candidate {
    Candidate::of(valid, launch_of(valid))
}

/// [`KernelSet::specs`] validated and planned, as the model's candidates (in the same order).
pub fn set_candidates(
    set: &KernelSet,
    dtype: DType,
    out: DType,
) -> Result<Vec<Candidate>, SpecErrors> {
    set.specs(dtype, out)
        .iter()
        .map(|text| check_str(text).map(|valid| candidate(&valid)))
        .collect()
}
