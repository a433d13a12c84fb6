//! `gemm!` diagnostics exactly as a user sees them: one invalid spec per rule class, each
//! with its rustc output (message, span, help) pinned in `ui/*.stderr`.

#[test]
fn invalid_specs_are_compile_errors_at_the_offending_token() {
    let cases = trybuild::TestCases::new();
    cases.compile_fail("tests/ui/*.rs");
}
