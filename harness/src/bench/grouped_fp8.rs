//! fp8 grouped problems (`gemm-bench --grouped-fp8 FILE`): e4m3 experts with block scales
//! (`quant: block`), bf16 out, B as `[G, N, K]` (layout `rc`, DeepGEMM's), each problem of a
//! `shapes/moe.txt` list with its experts' rows as `gemm_dsl::grouped` draws them.
//!
//! Timed on one stream, launches alternating, each by its own events, the median counting:
//! every member of the fp8 grouped set (`gemm_dsl::grouped::sm90_grouped_fp8_specs`, as the
//! entry point `GroupedMatmul::<E4m3, bf16>::new_fused` holds it) in one `launch_grouped_with`
//! each, and a loop of cuBLASLt's fp8 GEMM (per-tensor scales, one call per expert with rows;
//! cuBLAS has no block-scaled grouped GEMM). The row reports the entry point's pick and the
//! fastest member. The block scales are all 1
//! here, so both compute the same products, and each member's D (poisoned first, every row no
//! expert holds still poisoned after) is checked against the loop's before timing; the
//! scales' arithmetic is checked against float64 by `harness/tests/grouped.rs`.

use super::grouped::{random_normals, rel_diff, RoutedRows};
use crate::baseline::fp8::{Fp8Format, LtFp8Gemm, LtScales};
use crate::bench::{median, time_round_robin, Launcher, Rounds};
use crate::error::{DriverContext, Error};
use crate::verify::NormalRng;
use cudarc::driver::{CudaSlice, CudaStream};
use gemm_dsl::grouped::{Distribution, GroupedProblem};
use gemm_dsl::{Layout, Quant};
use gemm_runtime::fp8::E4m3;
use gemm_runtime::{
    Element, Epilogue, FusedSpec, GemmKernel, GroupedDims, GroupedMatmul, Groups, LeadingDims,
};
use half::bf16;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::sync::Arc;

/// The fp8 grouped entry points (block scales, layout rc), every member loaded: contiguous
/// and masked.
pub struct Fp8GroupedKernels {
    contiguous: GroupedMatmul<E4m3, bf16>,
    masked: GroupedMatmul<E4m3, bf16>,
}

impl Fp8GroupedKernels {
    pub fn load(ctx: &Arc<cudarc::driver::CudaContext>) -> Result<Fp8GroupedKernels, Error> {
        let block_scales = FusedSpec {
            quant: Quant::Block,
            ..FusedSpec::NONE
        };
        let load = |groups| -> Result<GroupedMatmul<E4m3, bf16>, Error> {
            let experts = GroupedMatmul::new_fused(ctx, groups, Layout::RowCol, block_scales)?;
            for index in 0..experts.names().len() {
                experts.kernel(index)?;
            }
            Ok(experts)
        };
        Ok(Fp8GroupedKernels {
            contiguous: load(Groups::Contiguous)?,
            masked: load(Groups::Masked)?,
        })
    }
}

/// One problem's medians and speeds over the rows the experts have, and the check.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Fp8GroupedRow {
    pub problem: String,
    pub min_rows: u32,
    pub max_rows: u32,
    pub rows: u64,
    pub cublaslt_loop_ms: f64,
    pub cublaslt_loop_tflops: f64,
    /// The entry point's pick (`GroupedMatmul::pick`) and its speed (absent from runs
    /// before the entry point held fp8).
    #[serde(default)]
    pub picked_kernel: String,
    #[serde(default)]
    pub picked_tflops: f64,
    pub best_member_kernel: String,
    pub best_member_tflops: f64,
    /// Every member's speed, in the set's order.
    pub member_tflops: Vec<(String, f64)>,
    /// ‖D_ours − D_loop‖ / ‖D_loop‖, the largest over the members.
    pub ours_vs_loop: f64,
}

pub fn time_grouped_fp8(
    stream: &Arc<CudaStream>,
    kernels: &Fp8GroupedKernels,
    problem: &GroupedProblem,
    rounds: &Rounds,
) -> Result<Fp8GroupedRow, Error> {
    let (n, k, groups) = (problem.n, problem.k, problem.groups);
    let routed = RoutedRows::of(problem);
    let (experts, real_rows) = (&routed.experts, routed.rows);
    let buffer_rows = u64::from(problem.rows);
    let mut rng = NormalRng::new(0x6E08_0000 ^ u64::from(n) ^ (u64::from(k) << 24));
    let mut e4m3 = || E4m3::from_f32(rng.next_normal() as f32);
    let a = random_normals(
        stream,
        (buffer_rows * u64::from(k)) as usize,
        "A",
        &mut e4m3,
    )?;
    let weights = u64::from(groups) * u64::from(n) * u64::from(k);
    let b = random_normals(stream, weights as usize, "the weights", &mut e4m3)?;
    let d_len = (buffer_rows * u64::from(n)) as usize;
    let alloc = |what: &str, len: usize| {
        stream
            .alloc_zeros::<bf16>(len.max(1))
            .during(|| format!("allocating {what}"))
    };
    let mut d_loop = alloc("D", d_len)?;
    let d_ours = alloc("D", d_len)?;
    let experts_set = match problem.distribution {
        Distribution::Masked { .. } => &kernels.masked,
        _ => &kernels.contiguous,
    };
    let members: Vec<(String, &GemmKernel<E4m3, bf16>)> = experts_set
        .names()
        .into_iter()
        .enumerate()
        .map(|(index, name)| Ok((name.to_string(), experts_set.kernel(index)?)))
        .collect::<Result<_, Error>>()?;
    let table = stream
        .clone_htod(&routed.table)
        .during(|| "copying the row table".to_string())?;
    // Block scales of 1: A's ceil(K/128) lines of the rows rounded up to 4, each expert's
    // ceil(N/128) lines of ceil(K/128).
    let k_blocks = u64::from(k.div_ceil(Quant::BLOCK));
    let a_lines = buffer_rows.next_multiple_of(u64::from(Quant::A_LINE_MULTIPLE));
    let b_lines = u64::from(groups) * u64::from(n.div_ceil(Quant::BLOCK));
    let ones = |len: u64, what: &str| {
        stream
            .clone_htod(&vec![1.0f32; len as usize])
            .during(|| format!("copying {what}"))
    };
    let a_scales = ones(k_blocks * a_lines, "A's block scales")?;
    let b_scales = ones(b_lines * k_blocks, "B's block scales")?;
    let tensor_scale = ones(1, "a per-tensor scale")?;
    let dims = GroupedDims {
        groups,
        rows: problem.rows,
        n,
        k,
    };
    let lds = LeadingDims {
        lda: k,
        ldb: k,
        ldc: n,
    };

    // The loop: one cuBLASLt plan per distinct row count.
    let mut plans: HashMap<u32, LtFp8Gemm<bf16>> = HashMap::new();
    for &(_, rows) in experts {
        if rows > 0 && !plans.contains_key(&rows) {
            let plan = LtFp8Gemm::new(
                stream,
                rows,
                n,
                k,
                Fp8Format::E4m3,
                Fp8Format::E4m3,
                false,
                LtScales::PerTensor,
            )?;
            plans.insert(rows, plan);
        }
    }
    let run_loop = |d: &mut CudaSlice<bf16>| -> Result<(), Error> {
        for (g, &(start, rows)) in experts.iter().enumerate() {
            if rows == 0 {
                continue;
            }
            let (start, rows_len) = (start as usize, rows as usize);
            let (n_len, k_len) = (n as usize, k as usize);
            let a_g = a.slice(start * k_len..(start + rows_len) * k_len);
            let b_g = b.slice(g * n_len * k_len..(g + 1) * n_len * k_len);
            let mut d_g = d.slice_mut(start * n_len..(start + rows_len) * n_len);
            plans[&rows].run(&a_g, &b_g, &tensor_scale, &tensor_scale, &mut d_g)?;
        }
        Ok(())
    };
    let launch_ours = |kernel: &GemmKernel<E4m3, bf16>, d: &mut CudaSlice<bf16>| {
        let mut epilogue = Epilogue::none().quant_scales(&a_scales, &b_scales);
        kernel.launch_grouped_with(stream, &a, &b, d, &table, dims, lds, &mut epilogue)
    };

    // Correct first.
    run_loop(&mut d_loop)?;
    let read = |d: &CudaSlice<bf16>| stream.clone_dtoh(d).during(|| "reading D back".to_string());
    let d_loop_host = read(&d_loop)?;
    let mut ours_vs_loop = 0.0f64;
    let d_ours = std::cell::RefCell::new(d_ours);
    for (name, kernel) in &members {
        let mut d = d_ours.borrow_mut();
        stream
            .memcpy_htod(&vec![bf16::poison(); d_len], &mut *d)
            .during(|| "poisoning D".to_string())?;
        launch_ours(kernel, &mut d)?;
        let d_host = read(&d)?;
        ours_vs_loop = ours_vs_loop.max(rel_diff(&d_host, &d_loop_host, experts, n));
        routed.check_untouched(&d_host, n, problem, name)?;
    }
    // Both round the same f32 sums (in different orders) to bf16; NaN fails too.
    let bound = 1e-2;
    if ours_vs_loop.is_nan() || ours_vs_loop > bound {
        return Err(Error::Baseline {
            action: format!("checking {problem}"),
            reason: format!("ours vs the cuBLASLt loop {ours_vs_loop:.2e} (bound {bound:.0e})"),
        });
    }

    let mut loop_launch = |_: usize| run_loop(&mut d_loop);
    let mut ours_launches: Vec<_> = members
        .iter()
        .map(|(_, kernel)| {
            let (launch_ours, d_ours) = (&launch_ours, &d_ours);
            move |_: usize| -> Result<(), Error> {
                Ok(launch_ours(kernel, &mut d_ours.borrow_mut())?)
            }
        })
        .collect();
    let mut competitors: Vec<&mut Launcher<'_>> = vec![&mut loop_launch];
    for launch in &mut ours_launches {
        competitors.push(launch);
    }
    let times = time_round_robin(stream, rounds, &mut competitors)?;
    let ms = |i: usize| median(&times[i]).unwrap_or(f64::NAN);
    let tflops = |ms: f64| 2.0 * real_rows as f64 * f64::from(n) * f64::from(k) / (ms * 1e9);
    let member_tflops: Vec<(String, f64)> = members
        .iter()
        .enumerate()
        .map(|(i, (name, _))| (name.clone(), tflops(ms(1 + i))))
        .collect();
    let best = member_tflops
        .iter()
        .max_by(|x, y| x.1.total_cmp(&y.1))
        .expect("at least one fp8 grouped kernel")
        .clone();
    let picked = experts_set.pick(&dims)?;
    let picked_tflops = member_tflops
        .iter()
        .find(|(name, _)| name == picked)
        .expect("the pick is a member")
        .1;
    Ok(Fp8GroupedRow {
        problem: problem.to_string(),
        min_rows: routed.extremes().0,
        max_rows: routed.extremes().1,
        rows: real_rows,
        cublaslt_loop_ms: ms(0),
        cublaslt_loop_tflops: tflops(ms(0)),
        picked_kernel: picked.to_string(),
        picked_tflops,
        best_member_kernel: best.0,
        best_member_tflops: best.1,
        member_tflops,
        ours_vs_loop,
    })
}

/// The markdown table of a run.
pub fn grouped_fp8_table(rows: &[Fp8GroupedRow]) -> String {
    let mut out = String::from(
        "e4m3 in with block scales (all 1), bf16 out, layout rc (B as `[G, N, K]`); TF/s over the rows the experts have.\n\n\
         | problem (G ROWS N K DIST) | rows per expert (min / max) | ours (picked) TF/s | / cuBLASLt loop | picked / fastest member | fastest member TF/s | loop of cuBLASLt fp8 TF/s | picked | fastest member | every member (TF/s) | ours vs loop |\n\
         |---|---|---:|---:|---:|---:|---:|---|---|---|---:|\n",
    );
    for row in rows {
        let members: Vec<String> = row
            .member_tflops
            .iter()
            .map(|(name, tflops)| format!("{} {tflops:.0}", short_name(name)))
            .collect();
        out.push_str(&format!(
            "| {} | {} / {} | {:.0} | {:.2} | {:.2} | {:.0} | {:.0} | `{}` | `{}` | {} | {:.1e} |\n",
            row.problem,
            row.min_rows,
            row.max_rows,
            row.picked_tflops,
            row.picked_tflops / row.cublaslt_loop_tflops,
            row.picked_tflops / row.best_member_tflops,
            row.best_member_tflops,
            row.cublaslt_loop_tflops,
            short_name(&row.picked_kernel),
            short_name(&row.best_member_kernel),
            members.join(", "),
            row.ours_vs_loop
        ));
    }
    out
}

/// A member's name without the set's prefix and the layout's suffix.
fn short_name(kernel: &str) -> &str {
    let name = kernel.strip_prefix("sm90_grouped_fp8_").unwrap_or(kernel);
    name.strip_suffix("_contiguous")
        .or_else(|| name.strip_suffix("_masked"))
        .unwrap_or(name)
}
