//! Runs the crate's `gemm!` kernels once on the GPU, alone and as a strided batch, and checks
//! them against a float64 product computed here: `cargo run -p examples --bin sgemm-demo [M N K]`.
//! A user's program needs the runtime alone; the workspace's own checks (C poisoned first,
//! float64 and cuBLAS references, every catalog kernel) are the `gemm-harness` crate's.

use examples::{sgemm_cp_async, sgemm_sync};
use gemm_runtime::{Batch, CudaStream, Error, GemmKernel, LeadingDims};
use std::process::ExitCode;
use std::sync::Arc;

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
        let errors = kernel.and_then(|kernel| run_batch(&kernel, &stream, (m, n, k), 1, false));
        failed |= report(&format!("{name} {m}x{n}x{k}"), errors, k);
    }
    // Four products in one launch, matrices back to back, B shared by all of them.
    let errors = sgemm_cp_async::load(&ctx)
        .and_then(|kernel| run_batch(&kernel, &stream, (m, n, k), 4, true));
    failed |= report(
        &format!("sgemm_cp_async 4 x {m}x{n}x{k}, B shared"),
        errors,
        k,
    );
    if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

/// The relative error an f32 product of `k` terms stays within against float64: rounding in
/// a length-k f32 sum grows like sqrt(k), about 1e-6 at k = 2048.
fn bound(k: u32) -> f64 {
    1e-5 * (f64::from(k) / 2048.0).sqrt().max(1.0)
}

/// Prints one line per run; whether it failed.
fn report(what: &str, errors: Result<Vec<f64>, Error>, k: u32) -> bool {
    match errors {
        Ok(errors) => {
            let worst = errors.iter().copied().fold(0.0, f64::max);
            let ok = worst <= bound(k);
            println!(
                "{what}: ‖C − A·B‖/‖A·B‖ = {worst:.1e} (bound {:.1e}) -> {}",
                bound(k),
                if ok { "ok" } else { "FAILED" }
            );
            !ok
        }
        Err(error) => {
            println!("{what}: {error}");
            true
        }
    }
}

/// `count` products `C_i = A_i·B` (B shared when `shared_b`, else one B per product) in one
/// launch on packed row-major operands; each product's relative Frobenius error against
/// float64.
fn run_batch(
    kernel: &GemmKernel<f32, f32>,
    stream: &Arc<CudaStream>,
    (m, n, k): (u32, u32, u32),
    count: u32,
    shared_b: bool,
) -> Result<Vec<f64>, Error> {
    let lds = LeadingDims::packed(kernel.info().launch(), m, n, k);
    let packed = Batch::packed(kernel.info().launch(), count, (m, n, k), lds);
    let batch = if shared_b {
        Batch {
            stride_b: 0,
            ..packed
        }
    } else {
        packed
    };
    let (mk, kn, mn) = ((m * k) as usize, (k * n) as usize, (m * n) as usize);
    let count = count as usize;
    let a = inputs(count * mk, 1);
    let b = inputs(if shared_b { kn } else { count * kn }, 2);
    let upload = |values: &[f32]| stream.clone_htod(values);
    let driver = |action: &str| {
        let action = action.to_string();
        move |source| Error::Driver { action, source }
    };
    let a_gpu = upload(&a).map_err(driver("copying A to the GPU"))?;
    let b_gpu = upload(&b).map_err(driver("copying B to the GPU"))?;
    let mut c_gpu = stream
        .alloc_zeros::<f32>(count * mn)
        .map_err(driver("allocating C"))?;
    kernel.launch_strided_batched(stream, &a_gpu, &b_gpu, &mut c_gpu, m, n, k, lds, batch)?;
    let c = stream
        .clone_dtoh(&c_gpu)
        .map_err(driver("copying C from the GPU"))?;
    Ok((0..count)
        .map(|i| {
            let b_i = if shared_b { &b[..] } else { &b[i * kn..][..kn] };
            relative_error(
                &a[i * mk..][..mk],
                b_i,
                &c[i * mn..][..mn],
                n as usize,
                k as usize,
            )
        })
        .collect())
}

/// Values in [-1, 1) from a fixed sequence (a 64-bit linear congruential generator), so every
/// run checks the same numbers.
fn inputs(len: usize, seed: u64) -> Vec<f32> {
    let mut state = seed;
    (0..len)
        .map(|_| {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (state >> 40) as f32 / (1u32 << 23) as f32 - 1.0
        })
        .collect()
}

/// `‖C − A·B‖ / ‖A·B‖` (Frobenius norms) of packed row-major `c` against the float64 product
/// of `a` (`m x k`) and `b` (`k x n`).
fn relative_error(a: &[f32], b: &[f32], c: &[f32], n: usize, k: usize) -> f64 {
    let (mut diff, mut norm) = (0.0, 0.0);
    let mut row = vec![0.0f64; n];
    for (a_row, c_row) in a.chunks_exact(k).zip(c.chunks_exact(n)) {
        row.fill(0.0);
        for (&x, b_row) in a_row.iter().zip(b.chunks_exact(n)) {
            for (sum, &y) in row.iter_mut().zip(b_row) {
                *sum += f64::from(x) * f64::from(y);
            }
        }
        for (&want, &got) in row.iter().zip(c_row) {
            diff += (f64::from(got) - want).powi(2);
            norm += want * want;
        }
    }
    (diff / norm).sqrt()
}
