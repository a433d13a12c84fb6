//! Validation: every rule the hardware (and the implemented kernel families) impose, each an
//! error at the offending token with a `help` proposing a legal value. The top of the rules:
//! the common checks and each family's flow (`crate::family`) build on `crate::rules`.

use crate::budget::{Occupancy, RegisterBudget, SmemLedger};
use crate::error::SpecErrors;
pub use crate::family::Family;
use crate::parse::ParsedSpec;
use crate::rules::Validator;
pub use crate::rules::{MAX_RASTER_GROUP, MAX_STAGES};
use crate::spans::SpecSpans;
use crate::spec::*;

/// A spec that passed every rule, with the budgets computed on the way.
#[derive(Clone, Debug)]
pub struct ValidSpec {
    pub spec: GemmSpec,
    pub family: Family,
    pub smem: SmemLedger,
    pub registers: RegisterBudget,
    pub occupancy: Occupancy,
}

impl ValidSpec {
    pub fn threads_per_block(&self) -> u32 {
        self.family.threads()
    }
}

impl ParsedSpec {
    pub fn validate(&self) -> Result<ValidSpec, SpecErrors> {
        validate(&self.spec, &self.spans)
    }
}

impl GemmSpec {
    /// Validates a spec built in code; errors point at the call site.
    pub fn validate(&self) -> Result<ValidSpec, SpecErrors> {
        validate(self, &SpecSpans::synthetic(proc_macro2::Span::call_site()))
    }
}

/// Parses and validates spec text in one step.
pub fn check_str(text: &str) -> Result<ValidSpec, SpecErrors> {
    crate::parse::parse_str(text)?.validate()
}

pub fn validate(spec: &GemmSpec, spans: &SpecSpans) -> Result<ValidSpec, SpecErrors> {
    let mut v = Validator::new(spec, spans);
    v.common();
    if !v.errors.is_empty() {
        return Err(SpecErrors(v.errors));
    }
    match crate::family::validate(&mut v) {
        Some((family, budgets)) if v.errors.is_empty() => Ok(ValidSpec {
            spec: spec.clone(),
            family,
            smem: budgets.smem,
            registers: budgets.registers,
            occupancy: budgets.occupancy,
        }),
        _ => Err(SpecErrors(v.errors)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::SpecError;

    fn errors(text: &str) -> Vec<SpecError> {
        check_str(text).expect_err("spec must be invalid").0
    }

    fn message(text: &str) -> String {
        errors(text)[0].message.clone()
    }

    #[test]
    fn defaults_are_valid() {
        let v = check_str("").unwrap();
        assert_eq!(v.threads_per_block(), 256);
        assert_eq!(v.smem.total(), 2 * (128 * 32 + 8 * 512));
    }

    #[test]
    fn arch_rules() {
        assert!(message("arch: sm_80, copy: tma").contains("needs sm_90"));
        assert!(message("arch: sm_90, mma: wgmma").contains("needs arch sm_90a"));
        assert!(message("arch: sm_86, cluster: 2x1").contains("clusters need sm_90"));
    }

    #[test]
    fn copy_vector_rules() {
        let first = |text: &str| errors(text).remove(0);
        let e = first("copy: cp_async(cg, vector = 4)");
        assert_eq!(
            e.message,
            "`cp.async.cg` copies only 16 bytes, not a 4-byte vector"
        );
        assert_eq!(e.help.as_deref(), Some("copy: cp_async(ca, vector = 4)"));
        assert_eq!(e.notes, ["`.ca` (cached in L1) copies 4, 8 or 16 bytes"]);
        let e = first("mma: mma_sync, copy: cp_async(ca, vector = 2)");
        assert_eq!(
            e.message,
            "`cp.async` copies vectors of 4, 8 or 16 bytes, not 2"
        );
        assert_eq!(e.help.as_deref(), Some("copy: sync(vector = 2)"));
        let e = first("copy: sync(vector = 2)");
        assert_eq!(
            e.message,
            "a 2-byte vector is less than one f32 element (4 bytes)"
        );
        assert_eq!(e.help.as_deref(), Some("copy: sync(vector = 4)"));
        let e = first("copy: sync(vector = 6)");
        assert_eq!(
            e.message,
            "`copy: sync` loads vectors of 2, 4, 8 or 16 bytes, not 6"
        );
        assert_eq!(e.help.as_deref(), Some("copy: sync(vector = 4)"));
        let e = first("copy: cp_async(ca, vector = 32)");
        assert_eq!(e.help.as_deref(), Some("copy: cp_async(ca)"));
        assert_eq!(
            first("copy: cp_async(ca, vector = 0)").help.as_deref(),
            Some("copy: cp_async(ca, vector = 4)")
        );
        // Every legal width validates, in both families.
        for spec in [
            "copy: cp_async(ca, vector = 4)",
            "copy: cp_async(ca, vector = 8), layout: cc",
            "copy: sync(vector = 4), layout: rc",
            "mma: mma_sync, tile: 64x64x32, copy: cp_async(ca, vector = 4), layout: cr",
            "mma: mma_sync, tile: 64x64x32, copy: sync(vector = 2)",
            "mma: mma_sync, dtype: tf32, tile: 64x64x32, copy: cp_async(ca, vector = 8)",
        ] {
            let valid = check_str(spec).unwrap_or_else(|e| panic!("{spec}: {e:?}"));
            assert!(valid.spec.copy.vector_bytes() < 16, "{spec}");
        }
    }

    #[test]
    fn unimplemented_values_parse_then_fail_validation() {
        for spec in [
            "mma: mma_sync, arch: sm_90, copy: tma",
            "mma: mma_sync, out: f16",
            "mma: mma_sync, dtype: tf32, out: tf32",
            "mma: mma_sync, acc: f16",
            "mma: mma_sync, arch: sm_90, cluster: 2x1",
            "dtype: bf16",
            "arch: sm_90, copy: tma",
            "swizzle: 32B",
            "schedule: persistent",
            "arch: sm_90, cluster: 2x1",
            "consumers: 2",
            "out: bf16",
        ] {
            let all = errors(spec);
            assert!(
                all.iter()
                    .any(|e| e.message.contains("not implemented yet for this family")),
                "{spec}: {all:?}"
            );
        }
    }

    #[test]
    fn smem_overflow_suggests_a_stage_count() {
        let e = &errors("arch: sm_80, tile: 128x128x32, stages: 6")[0];
        assert!(e.message.starts_with("shared memory over budget for sm_80"));
        assert_eq!(e.label.as_deref(), Some("6 stages x 32768 B = 196608 B"));
        assert_eq!(
            e.help.as_deref(),
            Some("stages: 5 fits (163840 B); or a smaller tile")
        );
    }

    #[test]
    fn geometry_rules_have_help() {
        let e = &errors("tile: 128x128x6")[0];
        assert_eq!(e.help.as_deref(), Some("tile: 128x128x8"));
        let e = &errors("tile: 128x128x8, warps: 3x2")[0];
        assert!(e.message.contains("does not divide"));
        assert_eq!(e.help.as_deref(), Some("warps: 4x2"));
        let e = &errors("swizzle: pad(4)")[0];
        assert_eq!(e.help.as_deref(), Some("swizzle: pad(16)"));
        let e = &errors("tile: 256x256x8, warps: 1x1")[0];
        assert!(e.message.contains("registers per thread"), "{e:?}");
        assert!(message("stages: 9").contains("between 1 and 8"));
        assert!(message("tile: 64x64x8, warps: 1x4").contains("warp tile 64x16"));
    }
}
