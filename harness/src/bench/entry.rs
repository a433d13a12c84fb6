//! The entry point as a caller runs it (`gemm-bench --entry`): `Matmul::run` over a set on
//! packed row-major operands (layout rr, bf16), whatever its route (the copies of staged
//! operands included), against cuBLAS's `GemmEx` on the same buffers in the same process. Each D is
//! checked against cuBLAS's first (C poisoned before), then both are timed round-robin.
//!
//! `gemm-bench --set ... --auto` times the picked kernel alone; this times what `run` does,
//! which differs where a route stages operands in 128-byte lines (`Repack`): there `run` on
//! the staged problem itself (operands already in such lines, the same kernel) is timed
//! too, and the table gives the copies' share of the time.

use crate::baseline::cublas::{Cublas, CublasGemm};
use crate::bench::fused::{rel_diff, upload};
use crate::bench::{median, tflops, time_round_robin, Launcher, Rounds, Shape};
use crate::error::{DriverContext, Error};
use crate::verify::NormalRng;
use cudarc::driver::CudaStream;
use gemm_dsl::pick::Problem;
use gemm_dsl::{DType, Layout};
use gemm_runtime::{KernelTypes, Matmul};
use half::bf16;
use serde::Serialize;
use std::sync::Arc;

/// The largest ‖D − D_cuBLAS‖_F / ‖D_cuBLAS‖_F a row passes with: both round a float sum to
/// bf16 (a relative 2^-9 each), in another order.
pub const MAX_REL_DIFF: f64 = 1e-2;

/// One problem: the route `run` took and both times.
#[derive(Clone, Debug, Serialize)]
pub struct EntryRow {
    pub shape: String,
    pub kernel: String,
    /// The operands `run` staged in 128-byte lines (`A`, `B`, `C`, joined by `+`; empty for
    /// none).
    pub staged: String,
    pub ours_ms: f64,
    /// Where `run` stages operands: `run` on the staged problem itself (operands already in
    /// 128-byte lines), i.e. the product without the copies.
    pub staged_product_ms: Option<f64>,
    pub cublas_ms: f64,
    pub ours_tflops: f64,
    pub cublas_tflops: f64,
    pub rel_diff_to_cublas: f64,
}

/// Checks and times `matmul` against cuBLAS on `shape` (one product, packed, layout rr).
pub fn time_entry(
    stream: &Arc<CudaStream>,
    matmul: &Matmul<bf16, bf16>,
    shape: Shape,
    rounds: &Rounds,
) -> Result<EntryRow, Error> {
    let (m, n, k) = (shape.m, shape.n, shape.k);
    let problem = Problem::new(m, n, k, Layout::RowRow);
    let elements = |rows: u32, cols: u32| rows as usize * cols as usize;
    let mut rng =
        NormalRng::new(0xE7_72E0 ^ u64::from(m) ^ (u64::from(n) << 20) ^ (u64::from(k) << 40));
    let a = upload(stream, elements(m, k), &mut rng, "A")?;
    let b = upload(stream, elements(k, n), &mut rng, "B")?;
    let poison = vec![bf16::NAN; elements(m, n)];
    let during = || "copying the poisoned C".to_string();
    let mut d_ours = stream.clone_htod(&poison).during(during)?;
    let mut d_blas = stream.clone_htod(&poison).during(during)?;
    let blas = Cublas::new(stream)?;
    let gemm = CublasGemm::baseline(KernelTypes::new(DType::Bf16, DType::Bf16).expect("bf16"))
        .expect("cuBLAS multiplies bf16");
    let picked = matmul.pick(&problem)?;
    let staged_names: Vec<&str> = picked.staged.operands().map(|o| o.name()).collect();
    matmul.run(stream, &a, &b, &mut d_ours, &problem)?;
    blas.gemm::<bf16, bf16, _, _, _>(gemm, &a, &b, &mut d_blas, m, n, k)?;
    let rel_diff = rel_diff(stream, (&d_ours, &d_blas), 1, "D")?;
    // A NaN (an element left poisoned) fails too.
    if rel_diff.is_nan() || rel_diff > MAX_REL_DIFF {
        return Err(Error::Timing(format!(
            "{shape}: `Matmul::run` ({}) gives a D {rel_diff:.2e} from cuBLAS's (at most {MAX_REL_DIFF:e})",
            picked.kernel
        )));
    }
    // The staged problem on operands already in its lines (contents do not matter here),
    // where `run` launches the same kernel for it: the product without the copies.
    let staged_problem = picked.staged.staged(&problem, 2, 2);
    let same_kernel = matmul.pick(&staged_problem)?.kernel == picked.kernel;
    let staged_operands = if picked.staged.any() && same_kernel {
        let len = |lines: u32, ld: u32| lines as usize * ld as usize;
        let during = || "allocating the staged problem's operands".to_string();
        Some((
            stream
                .alloc_zeros::<bf16>(len(m, staged_problem.lda))
                .during(during)?,
            stream
                .alloc_zeros::<bf16>(len(k, staged_problem.ldb))
                .during(during)?,
            stream
                .alloc_zeros::<bf16>(len(m, staged_problem.ldc))
                .during(during)?,
        ))
    } else {
        None
    };
    let mut run_ours = |_: usize| {
        matmul
            .run(stream, &a, &b, &mut d_ours, &problem)
            .map_err(Error::from)
    };
    let mut run_blas =
        |_: usize| blas.gemm::<bf16, bf16, _, _, _>(gemm, &a, &b, &mut d_blas, m, n, k);
    let mut run_staged = staged_operands.map(|(a, b, mut c)| {
        move |_: usize| {
            matmul
                .run(stream, &a, &b, &mut c, &staged_problem)
                .map_err(Error::from)
        }
    });
    let mut competitors: Vec<&mut Launcher<'_>> = vec![&mut run_ours, &mut run_blas];
    if let Some(run) = run_staged.as_mut() {
        competitors.push(run);
    }
    let times = time_round_robin(stream, rounds, &mut competitors)?;
    let ms = |samples: &[f32]| median(samples).unwrap_or(f64::NAN);
    let (ours_ms, cublas_ms) = (ms(&times[0]), ms(&times[1]));
    let staged_product_ms = times.get(2).map(|samples| ms(samples));
    Ok(EntryRow {
        shape: shape.to_string(),
        kernel: picked.kernel.to_string(),
        staged: staged_names.join("+"),
        ours_ms,
        staged_product_ms,
        cublas_ms,
        ours_tflops: tflops(shape, ours_ms),
        cublas_tflops: tflops(shape, cublas_ms),
        rel_diff_to_cublas: rel_diff,
    })
}

/// The rows as a markdown table, with the geomean of ours over cuBLAS.
pub fn entry_table(rows: &[EntryRow]) -> String {
    let mut out = String::from(
        "| shape | kernel `Matmul::run` launched | operands staged | ours TF/s | cuBLAS TF/s | ours / cuBLAS | copies' share of ours | ‖D − D_cuBLAS‖ rel |\n\
         |---|---|---|---:|---:|---:|---:|---:|\n",
    );
    for row in rows {
        out.push_str(&format!(
            "| {} | `{}` | {} | {:.1} | {:.1} | {:.3} | {} | {:.1e} |\n",
            row.shape,
            row.kernel,
            if row.staged.is_empty() {
                "-"
            } else {
                &row.staged
            },
            row.ours_tflops,
            row.cublas_tflops,
            row.cublas_ms / row.ours_ms,
            row.staged_product_ms
                .map_or("-".to_string(), |product| format!(
                    "{:.0} %",
                    100.0 * (1.0 - product / row.ours_ms)
                )),
            row.rel_diff_to_cublas
        ));
    }
    let ratios: Vec<f64> = rows.iter().map(|r| r.cublas_ms / r.ours_ms).collect();
    if let Some(geomean) = crate::bench::geomean(&ratios) {
        let worst = ratios.iter().copied().fold(f64::INFINITY, f64::min);
        out.push_str(&format!(
            "\n- ours over cuBLAS: geomean {geomean:.3}, worst {worst:.3}, {} of {} below 0.9\n",
            ratios.iter().filter(|&&r| r < 0.9).count(),
            ratios.len()
        ));
    }
    out
}
