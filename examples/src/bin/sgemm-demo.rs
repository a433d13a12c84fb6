//! Runs the crate's `gemm!` kernels once on the GPU and checks them against a float64
//! reference: `cargo run -p examples --bin sgemm-demo [M N K]`.

use examples::{sgemm_cp_async, sgemm_sync};
use runtime::verify::{verify, Tolerance};
use std::process::ExitCode;

fn main() -> ExitCode {
    let dims: Vec<u32> = std::env::args()
        .skip(1)
        .map(|arg| arg.parse().expect("M N K are whole numbers"))
        .collect();
    let (m, n, k) = match dims[..] {
        [m, n, k] => (m, n, k),
        [] => (512, 512, 512),
        _ => {
            eprintln!("usage: sgemm-demo [M N K]");
            return ExitCode::from(2);
        }
    };
    let ctx = match runtime::open_context(0) {
        Ok(ctx) => ctx,
        Err(error) => {
            eprintln!("sgemm-demo needs a CUDA GPU: {error}");
            return ExitCode::from(1);
        }
    };
    let stream = ctx.default_stream();
    let mut failed = false;
    for (name, kernel) in [
        ("sgemm_cp_async", sgemm_cp_async::load(&ctx)),
        ("sgemm_sync", sgemm_sync::load(&ctx)),
    ] {
        let report = kernel.and_then(|kernel| verify(&kernel, &stream, m, n, k, 1));
        match report {
            Ok(report) => {
                let verdict = report.check(&Tolerance::f32_accumulation(k));
                println!("{name} {m}x{n}x{k}: {report} -> {verdict:?}");
                failed |= verdict.is_err();
            }
            Err(error) => {
                println!("{name}: {error}");
                failed = true;
            }
        }
    }
    if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}
