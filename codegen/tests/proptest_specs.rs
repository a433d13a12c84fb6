//! Property tests over random specs: a valid spec always emits (and, with the tools, assembles
//! to its promised SASS); an invalid one is always an error located in the text, never a panic.

use proptest::prelude::*;

fn value(choices: &'static [&'static str]) -> impl Strategy<Value = String> {
    proptest::sample::select(choices).prop_map(str::to_string)
}

/// Spec text from plausible (sometimes illegal) values of every key.
fn spec_text() -> impl Strategy<Value = String> {
    const DIMS: [u32; 7] = [4, 8, 16, 32, 64, 128, 256];
    (
        value(&["sm_80", "sm_86", "sm_89", "sm_90", "sm_90a"]),
        value(&["f32", "f32", "f32", "bf16", "tf32"]),
        (
            proptest::sample::select(&DIMS[2..]),
            proptest::sample::select(&DIMS[2..]),
            proptest::sample::select(&DIMS[..5]),
        ),
        // Mostly the default warp grid, which fits most tiles.
        prop_oneof![3 => Just(None), 1 => (1u32..=8, 1u32..=8).prop_map(Some)],
        0u32..=9,
        value(&["none", "none", "pad(16)", "pad(32)", "pad(4)", "128B"]),
        value(&["cp_async", "cp_async", "cp_async(ca)", "sync", "tma"]),
        value(&["fma", "fma", "fma", "fma", "mma_sync", "wgmma"]),
    )
        .prop_map(
            |(arch, dtype, (m, n, k), warps, stages, swizzle, copy, mma)| {
                let warps = warps.map_or(String::new(), |(r, c)| format!(", warps: {r}x{c}"));
                format!(
                    "name: prop, arch: {arch}, dtype: {dtype}, tile: {m}x{n}x{k}{warps}, \
                 stages: {stages}, swizzle: {swizzle}, copy: {copy}, mma: {mma}"
                )
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn valid_specs_emit_and_invalid_ones_are_located_errors(text in spec_text()) {
        match gemm_dsl::check_str(&text) {
            Ok(valid) => {
                let emitted = codegen::emit(&valid);
                prop_assert!(emitted.ptx.contains(".visible .entry prop("));
                prop_assert_eq!(emitted.launch.threads_per_block, valid.threads_per_block());
            }
            Err(errors) => {
                prop_assert!(!errors.0.is_empty());
                for error in errors.iter() {
                    prop_assert_eq!(error.span.start().line, 1, "{}", error.message);
                    prop_assert!(error.help.is_some(), "no help for: {}", error.message);
                }
                let rendered = errors.render(&text, "prop");
                prop_assert!(rendered.contains('^'));
            }
        }
    }

    #[test]
    fn arbitrary_text_never_panics(text in ".{0,120}") {
        if let Err(errors) = gemm_dsl::check_str(&text) {
            prop_assert!(!errors.0.is_empty());
            let _ = errors.render(&text, "prop");
        }
    }

    #[test]
    fn key_value_soup_never_panics(
        pairs in proptest::collection::vec(
            ("[a-z_]{1,9}", "[a-z0-9_()=, x]{0,12}"),
            0..6,
        )
    ) {
        let text: Vec<String> = pairs.iter().map(|(k, v)| format!("{k}: {v}")).collect();
        let text = text.join(", ");
        let _ = gemm_dsl::check_str(&text);
    }
}

proptest! {
    // Each case runs ptxas and nvdisasm (about 0.1 s): fewer cases.
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn valid_specs_assemble_to_their_promised_sass(text in spec_text()) {
        let valid = gemm_dsl::check_str(&text);
        prop_assume!(valid.is_ok());
        let valid = valid.unwrap();
        let emitted = codegen::emit(&valid);
        let report = codegen::sass::SassReport::from_ptx(&emitted.ptx, valid.spec.arch.name())
            .unwrap_or_else(|error| panic!("{text}: {error}"));
        let resources = report.resources.as_ref().unwrap();
        prop_assert!(!resources.spills(), "{}: {}", text, resources);
        prop_assert!(report.require(&emitted.expected_sass).is_ok(), "{}", text);
    }
}
