//! Runs the crate's `gemm!` kernels once on the GPU, alone and as a strided batch, and checks
//! them against a float64 reference: `cargo run -p examples --bin sgemm-demo [M N K]`.

use examples::{sgemm_cp_async, sgemm_sync};
use gemm_runtime::verify::{verify, verify_batch, Tolerance};
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
    let ctx = match gemm_runtime::open_context(0) {
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
    // Four products in one launch, matrices back to back, B shared by all of them.
    let lds = gemm_runtime::LeadingDims::packed(&sgemm_cp_async::LAUNCH, m, n, k);
    let batch = gemm_runtime::Batch {
        stride_b: 0,
        ..gemm_runtime::Batch::packed(&sgemm_cp_async::LAUNCH, 4, (m, n, k), lds)
    };
    let report = sgemm_cp_async::load(&ctx)
        .and_then(|kernel| verify_batch(&kernel, &stream, m, n, k, lds, batch, 2));
    match report {
        Ok(report) => {
            let verdict = report.check(&Tolerance::f32_accumulation(k));
            let worst = report
                .worst()
                .map_or(String::new(), |worst| worst.to_string());
            println!(
                "sgemm_cp_async 4 x {m}x{n}x{k}, B shared: worst product {worst} -> {verdict:?}"
            );
            failed |= verdict.is_err();
        }
        Err(error) => {
            println!("sgemm_cp_async batched: {error}");
            failed = true;
        }
    }
    if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}
