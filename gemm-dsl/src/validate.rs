//! Validation: every rule the hardware (and the implemented kernel families) impose, each an
//! error at the offending token with a `help` proposing a legal value. The top of the rules:
//! the common checks and each family's flow (`crate::family`) build on `crate::rules`.

use crate::budget::{Occupancy, RegisterBudget, SmemLedger};
use crate::error::{SpecError, SpecErrors};
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
    validate_rules(spec, spans).map_err(|errors| {
        let mut errors = with_fixes(errors);
        for error in &mut errors {
            if !error.fix.is_empty() && !fix_holds(spec, spans, &error.fix) {
                error.fix.clear();
            }
        }
        SpecErrors(errors)
    })
}

/// Every rule, without the fixes' check.
fn validate_rules(spec: &GemmSpec, spans: &SpecSpans) -> Result<ValidSpec, Vec<SpecError>> {
    let mut v = Validator::new(spec, spans, crate::family::rules(spec.mma));
    v.common();
    if !v.errors.is_empty() {
        return Err(v.errors);
    }
    match crate::family::validate(&mut v) {
        Some((family, budgets)) if v.errors.is_empty() => Ok(ValidSpec {
            spec: spec.clone(),
            family,
            smem: budgets.smem,
            registers: budgets.registers,
            occupancy: budgets.occupancy,
        }),
        _ => Err(v.errors),
    }
}

/// Errors whose help is itself spec text (`stages: 4`, `copy: cp_async, stages: 3`) carry
/// it as their machine-applicable fix too, unless the rule set one.
fn with_fixes(mut errors: Vec<SpecError>) -> Vec<SpecError> {
    for error in &mut errors {
        if error.fix.is_empty() {
            if let Some(help) = &error.help {
                error.fix = fix_of(help).unwrap_or_default();
            }
        }
    }
    errors
}

/// Whether the spec with the fix applied passes every rule on the keys the fix sets: a
/// fix that only moves the error on to another rule of the same key (a tile that divides
/// but needs too many registers) is advice, not an edit to apply.
fn fix_holds(spec: &GemmSpec, spans: &SpecSpans, fix: &[(Key, String)]) -> bool {
    let text: Vec<String> = fix
        .iter()
        .map(|(key, value)| format!("{}: {value}", key.name()))
        .collect();
    let Ok(parsed) = crate::parse::parse_str(&text.join(", ")) else {
        return false;
    };
    let mut fixed = spec.clone();
    for (key, _) in fix {
        fixed.set(*key, &parsed.spec);
    }
    match validate_rules(&fixed, spans) {
        Ok(_) => true,
        Err(errors) => !errors.iter().any(|error| {
            error
                .key
                .is_some_and(|key| fix.iter().any(|(k, _)| *k == key))
        }),
    }
}

/// `key: value, key: value` as the edits it makes, if the text parses as exactly those
/// keys (so advice such as "use arch: sm_90a, or mma: mma_sync" is none).
fn fix_of(help: &str) -> Option<Vec<(Key, String)>> {
    let parsed = crate::parse::parse_str(help).ok()?;
    let mut entries = Vec::new();
    let mut depth = 0i32;
    let mut start = 0;
    for (i, c) in help.char_indices().chain([(help.len(), ',')]) {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                let (key, value) = help[start..i].split_once(':')?;
                let key = Key::from_name(key.trim())?;
                if !parsed.spans.given(key) {
                    return None;
                }
                entries.push((key, value.trim().to_string()));
                start = i + 1;
            }
            _ => {}
        }
    }
    Some(entries)
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn fused_epilogue_keys_parse_validate_and_write_back() {
        let plain = check_str("name: k, mma: wgmma, arch: sm_90a").unwrap();
        assert_eq!(
            (plain.spec.scale, plain.spec.bias, plain.spec.activation),
            (Scale::None, Bias::None, Activation::None)
        );
        assert!(!plain.spec.to_spec_text().contains("bias"));
        let text =
            "name: k, mma: wgmma, arch: sm_90a, scale: alpha_beta, bias: col, activation: gelu";
        let fused = check_str(text).unwrap();
        let bf16_col = Bias::Vector {
            along: BiasAlong::Col,
            dtype: DType::Bf16,
        };
        assert_eq!(fused.spec.bias, bf16_col);
        let written = fused.spec.to_spec_text();
        assert!(
            written.ends_with(", scale: alpha_beta, bias: col(bf16), activation: gelu"),
            "{written}"
        );
        assert_eq!(check_str(&written).unwrap().spec, fused.spec);
        for (bias, along, dtype) in [
            ("row(f32)", BiasAlong::Row, DType::F32),
            ("col(bf16)", BiasAlong::Col, DType::Bf16),
        ] {
            let spec = check_str(&format!("mma: wgmma, arch: sm_90a, bias: {bias}")).unwrap();
            assert_eq!(spec.spec.bias, Bias::Vector { along, dtype });
        }
        let aux = check_str("activation: relu, aux: pre_activation").unwrap();
        assert_eq!(aux.spec.aux, Aux::PreActivation);
        assert!(aux
            .spec
            .to_spec_text()
            .ends_with(", activation: relu, aux: pre_activation"));
        let pointless = errors("aux: pre_activation");
        assert!(
            pointless[0].message.contains("would be D itself"),
            "{pointless:?}"
        );
        assert_eq!(pointless[0].fix, [(Key::Activation, "gelu".to_string())]);
        let rows = check_str("activation: silu, row_scale: f32").unwrap();
        assert_eq!(rows.spec.row_scale, RowScale::F32);
        assert!(rows
            .spec
            .to_spec_text()
            .ends_with(", activation: silu, row_scale: f32"));
        let bad_rows = errors("row_scale: bf16");
        assert!(bad_rows[0].message.contains("row scale"), "{bad_rows:?}");
        // `c_store` narrows C's stores of SIMT and mma.sync kernels; it is written back.
        let narrow_stores = check_str("mma: mma_sync, copy: cp_async, c_store: 2").unwrap();
        assert_eq!(narrow_stores.spec.c_store, Some(2));
        assert!(narrow_stores
            .spec
            .to_spec_text()
            .contains(", copy: cp_async(cg), c_store: 2, mma: mma_sync"));
        assert!(errors("c_store: 3")[0].message.contains("C store width"));
        let hopper = errors("mma: wgmma, arch: sm_90a, c_store: 2");
        assert!(
            hopper[0]
                .message
                .contains("wgmma kernels store C in 16-byte vectors"),
            "{hopper:?}"
        );
        // `c_layout: col`: the Hopper family's direct stores by column, written back; every
        // conflict named at the key that conflicts, with the fix.
        let hopper = "mma: wgmma, arch: sm_90a";
        let columns =
            check_str(&format!("{hopper}, c_layout: col, scale: alpha, bias: row")).unwrap();
        assert_eq!(columns.spec.c_layout, CLayout::Col);
        assert_eq!(
            columns.spec.epilogue,
            Epilogue::Direct,
            "stored by the threads"
        );
        let text = columns.spec.to_spec_text();
        assert!(
            text.contains(", layout: rr, c_layout: col, tile:"),
            "{text}"
        );
        assert_eq!(check_str(&text).unwrap().spec, columns.spec);
        assert!(!check_str(hopper)
            .unwrap()
            .spec
            .to_spec_text()
            .contains("c_layout"));
        assert!(errors("c_layout: diagonal")[0].message.contains("C layout"));
        for (conflict, says, help) in [
            (
                "mma: mma_sync",
                "stores C's rows",
                "mma: wgmma, arch: sm_90a",
            ),
            (
                "epilogue: tma",
                "TMA store writes boxes of C's rows",
                "epilogue: direct",
            ),
            ("scale: alpha_beta", "reads C-in", "scale: alpha"),
            (
                "activation: gelu, aux: pre_activation",
                "aux output",
                "aux: none",
            ),
            (
                "groups: contiguous, schedule: persistent",
                "grouped walk",
                "groups: none",
            ),
        ] {
            let arch = if conflict.starts_with("mma") {
                "arch: sm_90"
            } else {
                hopper
            };
            let found = errors(&format!("{arch}, c_layout: col, {conflict}"));
            assert!(found[0].message.contains(says), "{conflict}: {found:?}");
            assert_eq!(found[0].help.as_deref(), Some(help), "{conflict}");
        }
        for activation in Activation::ALL {
            let spec = check_str(&format!("activation: {}", activation.name())).unwrap();
            assert_eq!(spec.spec.activation, activation);
        }
        // A bias is the output type or f32; the help is the fix.
        let wrong = errors("mma: wgmma, arch: sm_90a, bias: row(f16)");
        assert_eq!(wrong.len(), 1, "{wrong:?}");
        assert!(wrong[0].message.contains("a f16 bias with bf16 output"));
        assert_eq!(wrong[0].help.as_deref(), Some("bias: row(bf16)"));
        assert_eq!(wrong[0].fix, [(Key::Bias, "row(bf16)".to_string())]);
        for (text, message) in [
            ("bias: diagonal", "`diagonal` is not a valid bias"),
            ("bias: col(f8)", "`col(f8)` is not a valid bias"),
            ("scale: beta", "`beta` is not a valid scale"),
            ("activation: tanh", "`tanh` is not a valid activation"),
        ] {
            assert_eq!(message_of_parse(text), message, "{text}");
        }
    }

    fn message_of_parse(text: &str) -> String {
        crate::parse_str(text).unwrap_err().0[0].message.clone()
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

    /// Helps that led to another error: each now proposes an edit that holds.
    #[test]
    fn helps_propose_edits_that_hold() {
        let e = &errors("tile: 100x128x8, warps: 4x2")[0];
        assert_eq!(e.fix, [(Key::Tile, "128x128x8".to_string())]);
        assert!(check_str("tile: 128x128x8, warps: 4x2").is_ok());
        let e = &errors("arch: sm_90a, mma: wgmma, dtype: f32")[0];
        assert_eq!(e.help.as_deref(), Some("dtype: bf16 or f16, or mma: fma"));
        let e = &errors("arch: sm_80, copy: tma")[0];
        assert_eq!(e.fix, [(Key::Copy, "cp_async(cg)".to_string())]);
        let e = &errors("arch: sm_80, mma: wgmma, copy: tma")
            .into_iter()
            .find(|e| e.message.contains("`copy: tma` needs"))
            .unwrap();
        assert_eq!(e.fix, [(Key::Arch, "sm_90a".to_string())]);
        assert_eq!(
            message("arch: sm_90a, mma: wgmma, stages: 9"),
            "stages must be between 2 and 8, not 9"
        );
    }

    /// The stage count an over-budget help proposes costs what the kernel would use: the
    /// ledger at that count, its per-stage mbarriers and alignment included.
    #[test]
    fn smem_help_counts_the_bytes_of_the_stages_it_proposes() {
        let e = &errors("arch: sm_90a, mma: wgmma, stages: 8")[0];
        let fits = check_str("arch: sm_90a, mma: wgmma, stages: 4").unwrap();
        assert_eq!(
            e.help.as_deref(),
            Some(
                format!(
                    "stages: 4 fits ({} B); or a smaller tile",
                    fits.smem.total()
                )
                .as_str()
            )
        );
        assert_eq!(fits.smem.total(), 230464);
    }
}
