//! What a user of `gemm!` sees from the compiler, pinned in `*.stderr`: one invalid spec per
//! rule class, each with its rustc output (message, span, help); and the kernel descriptions
//! safe code cannot build.

#[test]
fn invalid_specs_are_compile_errors_at_the_offending_token() {
    let cases = trybuild::TestCases::new();
    cases.compile_fail("tests/ui/*.rs");
    cases.compile_fail("tests/kernel_info/*.rs");
}
