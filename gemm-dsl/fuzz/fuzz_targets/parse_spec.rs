//! Fuzzes the gemm-dsl spec parser and validator (`gemm_dsl::check_str`).
//!
//! For every UTF-8 input:
//! - `Err(errs)`: the error list is non-empty and `errs.render(input, "fuzz")` (and each
//!   error's own `render`) does not panic;
//! - `Ok(valid)`: `valid.spec.to_spec_text()` checks again, and yields an equal `GemmSpec`
//!   (and the same canonical text).

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(s) = std::str::from_utf8(data) {
        check(s);
    }
    // proc-macro2's span-location tables are thread-local and grow with every parsed string;
    // clear them once nothing from this iteration is alive, so memory stays flat and the
    // 32-bit source positions never wrap.
    proc_macro2::extra::invalidate_current_thread_spans();
});

fn check(s: &str) {
    match gemm_dsl::check_str(s) {
        Err(errs) => {
            assert!(!errs.0.is_empty(), "check_str returned an empty error list for {s:?}");
            for e in errs.iter() {
                let _ = e.render(s, "fuzz");
            }
            let rendered = errs.render(s, "fuzz");
            assert!(!rendered.is_empty());
        }
        Ok(valid) => {
            let text = valid.spec.to_spec_text();
            let again = match gemm_dsl::check_str(&text) {
                Ok(again) => again,
                Err(errs) => panic!(
                    "canonical text of a valid spec does not check\ninput: {s:?}\ntext: {text:?}\n{}",
                    errs.render(&text, "canonical")
                ),
            };
            assert_eq!(
                valid.spec, again.spec,
                "round trip changed the spec\ninput: {s:?}\ntext: {text:?}"
            );
            assert_eq!(
                text,
                again.spec.to_spec_text(),
                "canonical text is not a fixed point"
            );
        }
    }
}
