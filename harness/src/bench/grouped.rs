//! Grouped (mixture-of-experts) problems against cuBLAS in one process (`gemm-bench
//! --grouped FILE`), bf16 in and out: this project's grouped kernels (`groups:`), the
//! baselines, and the ceiling.
//!
//! Each problem of a `shapes/moe.txt` list gets its experts' rows as `gemm_dsl::grouped`
//! draws them. Expert `g` computes `D_g = A_g · B_g`: A's rows of the expert (contiguous: one
//! expert after another; masked: `g · cap` on), B the expert's `K x N` row-major weight of a
//! `[G, K, N]` buffer (layout `rr`), D as A. Timed on one stream, launches alternating, each by
//! its own events, the median counting:
//!
//! - `cublasGemmGroupedBatchedEx` (cuBLAS 12.5+), one call over the experts that have rows;
//! - a loop of `cublasGemmEx`, one call per expert with rows;
//! - the ceiling: this project's `Matmul` over the strided batch of `G` products of the same
//!   total rows split evenly (the balanced problem a grouped kernel would match at best);
//! - ours: every member of the Hopper grouped set (`gemm_dsl::grouped::sm90_grouped_specs`)
//!   of the problem's layout (contiguous or masked), each in one `launch_grouped`; the row
//!   reports the entry point's pick (`GroupedMatmul::pick`) and the fastest member;
//! - ours with a down projection's epilogue: the entry point over the set with each expert's
//!   bias and the router's weight per row (`GroupedMatmul::new_fused`, `bias: col, row_scale:
//!   f32`), its pick, against the plain member of the same tile: what the epilogue costs. Its
//!   bias is 0 and its weights 1, so its D must equal that member's bit for bit (the values
//!   the epilogue computes are checked against float64 by `harness/tests/grouped.rs`).
//!
//! Checked first: the grouped call's D and each of ours against the loop's (ours with D
//! poisoned, every row no expert holds still poisoned after), and the ceiling's D against a
//! loop of `cublasGemmEx` over the balanced buffers. A and the weights hold random normals; for
//! the largest weights (DeepSeek-V3's 256 experts take 15 GB) a 64 MiB block of them repeats.

use crate::baseline::cublas::{Cublas, CublasGemm};
use crate::bench::{median, time_round_robin, Launcher, Rounds};
use crate::error::{DriverContext, Error};
use crate::verify::NormalRng;
use cudarc::cublas::sys::{cublasComputeType_t, cublasOperation_t, cudaDataType};
use cudarc::driver::{CudaSlice, CudaStream, DevicePtr, DevicePtrMut, DeviceRepr, ValidAsZeroBits};
use gemm_dsl::grouped::{Distribution, GroupRows, GroupedProblem};
use gemm_dsl::pick::Problem;
use gemm_dsl::{Bias, BiasAlong, DType, Layout, RowScale};
use gemm_runtime::{
    BiasArg, Element, Epilogue, FusedSpec, GroupedDims, GroupedMatmul, Groups, LeadingDims, Matmul,
    Storage,
};
use half::bf16;
use serde::{Deserialize, Serialize};
use std::ffi::{c_int, c_void};
use std::sync::Arc;

/// This project's grouped entry points over the Hopper grouped set, layout `rr` as the
/// baselines': contiguous, then masked; plain and with a down projection's epilogue.
pub struct GroupedKernels {
    contiguous: GroupedMatmul<bf16, bf16>,
    masked: GroupedMatmul<bf16, bf16>,
    contiguous_fused: GroupedMatmul<bf16, bf16>,
    masked_fused: GroupedMatmul<bf16, bf16>,
}

/// A down projection's epilogue: each expert's bias, the router's weight per row.
pub const DOWN_PROJECTION: FusedSpec = FusedSpec {
    bias: Bias::Vector {
        along: BiasAlong::Col,
        dtype: DType::Bf16,
    },
    row_scale: RowScale::F32,
    ..FusedSpec::NONE
};

impl GroupedKernels {
    pub fn load(ctx: &Arc<cudarc::driver::CudaContext>) -> Result<GroupedKernels, Error> {
        let fused = |groups| GroupedMatmul::new_fused(ctx, groups, Layout::RowRow, DOWN_PROJECTION);
        Ok(GroupedKernels {
            contiguous: GroupedMatmul::new(ctx, Groups::Contiguous, Layout::RowRow)?,
            masked: GroupedMatmul::new(ctx, Groups::Masked, Layout::RowRow)?,
            contiguous_fused: fused(Groups::Contiguous)?,
            masked_fused: fused(Groups::Masked)?,
        })
    }
}

/// One problem's medians (ms), speeds over the rows the experts have, and the checks.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GroupedRow {
    pub problem: String,
    pub min_rows: u32,
    pub max_rows: u32,
    /// Rows the experts have, in all (the flops count these).
    pub rows: u64,
    pub cublas_grouped_ms: f64,
    pub cublas_loop_ms: f64,
    /// The balanced strided batch of the same total rows, ours.
    pub ceiling_ms: f64,
    pub ceiling_kernel: String,
    /// Ours: the entry point's pick (`GroupedMatmul::pick`), and the fastest member.
    pub ours_ms: f64,
    pub ours_kernel: String,
    pub ours_tflops: f64,
    pub best_member_kernel: String,
    pub best_member_tflops: f64,
    /// Every member's speed, in the set's order.
    pub member_tflops: Vec<(String, f64)>,
    /// ‖D_ours − D_loop‖ / ‖D_loop‖, the largest over the members.
    pub ours_vs_loop: f64,
    /// Ours with the down projection's epilogue ([`DOWN_PROJECTION`]): the pick, its speed,
    /// and the speed of the plain member of the same tile (absent from runs before it was
    /// measured).
    #[serde(default)]
    pub fused_kernel: String,
    #[serde(default)]
    pub fused_tflops: f64,
    #[serde(default)]
    pub fused_plain_tflops: f64,
    pub cublas_grouped_tflops: f64,
    pub cublas_loop_tflops: f64,
    pub ceiling_tflops: f64,
    /// ‖D_grouped − D_loop‖ / ‖D_loop‖.
    pub grouped_vs_loop: f64,
    /// ‖D_ceiling − D_cuBLAS‖ / ‖D_cuBLAS‖ on the balanced buffers.
    pub ceiling_vs_cublas: f64,
}

/// Where expert `g`'s rows start in A and D, and how many it has.
fn expert_rows(problem: &GroupedProblem, sizes: &[u32]) -> Vec<(u64, u32)> {
    let mut start = 0u64;
    sizes
        .iter()
        .enumerate()
        .map(|(g, &rows)| match problem.distribution {
            Distribution::Masked { cap, .. } => (g as u64 * u64::from(cap), rows),
            _ => {
                let here = start;
                start += u64::from(rows);
                (here, rows)
            }
        })
        .collect()
}

/// A device buffer of `len` values from `next` (random normals): a block of them, repeated.
pub(crate) fn random_normals<T: DeviceRepr + ValidAsZeroBits + Clone + Unpin>(
    stream: &Arc<CudaStream>,
    len: usize,
    what: &str,
    next: impl FnMut() -> T,
) -> Result<CudaSlice<T>, Error> {
    const BLOCK_BYTES: usize = 64 << 20;
    let block_len = (BLOCK_BYTES / size_of::<T>()).min(len);
    let block: Vec<T> = std::iter::repeat_with(next).take(block_len).collect();
    let mut buffer = stream
        .alloc_zeros::<T>(len.max(1))
        .during(|| format!("allocating {what} ({len} elements)"))?;
    let mut at = 0;
    while at < len {
        let chunk = block.len().min(len - at);
        let mut view = buffer.slice_mut(at..at + chunk);
        stream
            .memcpy_htod(&block[..chunk], &mut view)
            .during(|| format!("copying {what} to the device"))?;
        at += chunk;
    }
    Ok(buffer)
}

/// A device buffer of `len` bf16 random normals.
fn random_bf16(
    stream: &Arc<CudaStream>,
    len: usize,
    rng: &mut NormalRng,
    what: &str,
) -> Result<CudaSlice<bf16>, Error> {
    random_normals(stream, len, what, || bf16::from_f64(rng.next_normal()))
}

/// A problem's routed rows: each expert's count, where its rows lie in A and D, their sum,
/// and the row table the kernels read (masked: the counts; contiguous: the ends).
pub(crate) struct RoutedRows {
    pub sizes: Vec<u32>,
    pub experts: Vec<(u64, u32)>,
    pub rows: u64,
    pub table: Vec<i32>,
}

impl RoutedRows {
    pub fn of(problem: &GroupedProblem) -> RoutedRows {
        let sizes = problem.group_rows();
        let table = match problem.distribution {
            Distribution::Masked { .. } => sizes.iter().map(|&s| s as i32).collect(),
            _ => GroupRows::offsets_of(&sizes),
        };
        RoutedRows {
            experts: expert_rows(problem, &sizes),
            rows: sizes.iter().map(|&s| u64::from(s)).sum(),
            table,
            sizes,
        }
    }

    /// Fewest and most rows an expert has.
    pub fn extremes(&self) -> (u32, u32) {
        let min = self.sizes.iter().copied().min().unwrap_or(0);
        (min, self.sizes.iter().copied().max().unwrap_or(0))
    }

    /// `Err` where `name` wrote an element of a row no expert holds in `d` (poisoned before
    /// the launch), `n` columns a row.
    pub fn check_untouched(
        &self,
        d: &[bf16],
        n: u32,
        problem: &GroupedProblem,
        name: &str,
    ) -> Result<(), Error> {
        let written_elsewhere = outside_rows(&self.experts, problem.rows)
            .flat_map(|row| &d[row * n as usize..(row + 1) * n as usize])
            .filter(|x| !x.is_poison())
            .count();
        if written_elsewhere > 0 {
            return Err(Error::Baseline {
                action: format!("checking {name} on {problem}"),
                reason: format!(
                    "{written_elsewhere} elements of rows no expert holds were written"
                ),
            });
        }
        Ok(())
    }
}

/// `‖x − y‖ / ‖y‖` over the rows of `experts` (`n` columns each).
pub(crate) fn rel_diff(x: &[bf16], y: &[bf16], experts: &[(u64, u32)], n: u32) -> f64 {
    let (mut diff, mut norm) = (0.0f64, 0.0f64);
    for &(start, rows) in experts {
        let from = (start * u64::from(n)) as usize;
        let to = from + rows as usize * n as usize;
        for (a, b) in x[from..to].iter().zip(&y[from..to]) {
            let (a, b) = (a.to_f64(), b.to_f64());
            diff += (a - b) * (a - b);
            norm += b * b;
        }
    }
    if norm == 0.0 {
        diff.sqrt()
    } else {
        (diff / norm).sqrt()
    }
}

/// The experts' products by a loop of `cublasGemmEx`.
#[allow(clippy::too_many_arguments)]
fn cublas_loop(
    cublas: &Cublas,
    a: &CudaSlice<bf16>,
    b: &CudaSlice<bf16>,
    d: &mut CudaSlice<bf16>,
    experts: &[(u64, u32)],
    n: u32,
    k: u32,
) -> Result<(), Error> {
    let gemm = CublasGemm::GemmEx {
        input: Storage::Bf16,
        output: Storage::Bf16,
    };
    let (n_us, k_us) = (n as usize, k as usize);
    for (g, &(start, rows)) in experts.iter().enumerate() {
        if rows == 0 {
            continue;
        }
        let (start, rows_us) = (start as usize, rows as usize);
        let a_g = a.slice(start * k_us..(start + rows_us) * k_us);
        let b_g = b.slice(g * k_us * n_us..(g + 1) * k_us * n_us);
        let mut d_g = d.slice_mut(start * n_us..(start + rows_us) * n_us);
        cublas
            .gemm_with_ld::<bf16, bf16, _, _, _>(gemm, &a_g, &b_g, &mut d_g, rows, n, k, k, n, n)?;
    }
    Ok(())
}

/// `cublasGemmGroupedBatchedEx` over the experts with rows: its device arrays of pointers
/// (B_g, A_g, D_g, in cuBLAS's column-major reading of row-major data) are made once.
struct GroupedCall {
    rows: Vec<c_int>,
    pointers: [CudaSlice<u64>; 3],
    n: u32,
    k: u32,
}

impl GroupedCall {
    fn new(
        stream: &Arc<CudaStream>,
        a: &CudaSlice<bf16>,
        b: &CudaSlice<bf16>,
        d: &mut CudaSlice<bf16>,
        experts: &[(u64, u32)],
        (n, k): (u32, u32),
    ) -> Result<GroupedCall, Error> {
        let (a_base, _a) = a.device_ptr(stream);
        let (b_base, _b) = b.device_ptr(stream);
        let (d_base, _d) = d.device_ptr_mut(stream);
        let bytes = 2u64;
        let (mut b_ptrs, mut a_ptrs, mut d_ptrs, mut rows) = (vec![], vec![], vec![], vec![]);
        for (g, &(start, count)) in experts.iter().enumerate() {
            if count == 0 {
                continue;
            }
            b_ptrs.push(b_base + g as u64 * u64::from(k) * u64::from(n) * bytes);
            a_ptrs.push(a_base + start * u64::from(k) * bytes);
            d_ptrs.push(d_base + start * u64::from(n) * bytes);
            rows.push(count as c_int);
        }
        let upload = |values: &[u64]| {
            stream
                .clone_htod(values)
                .during(|| "copying the grouped call's pointers".to_string())
        };
        Ok(GroupedCall {
            rows,
            pointers: [upload(&b_ptrs)?, upload(&a_ptrs)?, upload(&d_ptrs)?],
            n,
            k,
        })
    }

    /// Enqueues the call. The buffers the pointers name must outlive the work.
    fn run(&self, cublas: &Cublas) -> Result<(), Error> {
        let groups = self.rows.len();
        if groups == 0 {
            return Ok(());
        }
        let stream = cublas.stream();
        let ops = vec![cublasOperation_t::CUBLAS_OP_N; groups];
        let (n, k) = (self.n as c_int, self.k as c_int);
        let ns = vec![n; groups];
        let ks = vec![k; groups];
        let ones = vec![1 as c_int; groups];
        let alpha = vec![1.0f32; groups];
        let beta = vec![0.0f32; groups];
        let [b_ptrs, a_ptrs, d_ptrs] = &self.pointers;
        let (b_array, _b) = b_ptrs.device_ptr(stream);
        let (a_array, _a) = a_ptrs.device_ptr(stream);
        let (d_array, _d) = d_ptrs.device_ptr(stream);
        // SAFETY: every array holds `groups` entries; the pointer arrays name bf16 matrices
        // of the sizes and leading dimensions given (made by `new` from buffers that hold
        // them); alpha and beta are f32, the scale type of CUBLAS_COMPUTE_32F.
        unsafe {
            cudarc::cublas::sys::cublasGemmGroupedBatchedEx(
                cublas.handle(),
                ops.as_ptr(),
                ops.as_ptr(),
                ns.as_ptr(),
                self.rows.as_ptr(),
                ks.as_ptr(),
                alpha.as_ptr().cast::<c_void>(),
                b_array as *const *const c_void,
                cudaDataType::CUDA_R_16BF,
                ns.as_ptr(),
                a_array as *const *const c_void,
                cudaDataType::CUDA_R_16BF,
                ks.as_ptr(),
                beta.as_ptr().cast::<c_void>(),
                d_array as *const *mut c_void,
                cudaDataType::CUDA_R_16BF,
                ns.as_ptr(),
                groups as c_int,
                ones.as_ptr(),
                cublasComputeType_t::CUBLAS_COMPUTE_32F,
            )
        }
        .result()
        .map_err(|source| Error::Cublas {
            action: format!("cublasGemmGroupedBatchedEx over {groups} experts"),
            source,
        })
    }
}

/// Times one grouped problem.
pub fn time_grouped(
    stream: &Arc<CudaStream>,
    cublas: &Cublas,
    matmul: &Matmul<bf16, bf16>,
    kernels: &GroupedKernels,
    problem: &GroupedProblem,
    rounds: &Rounds,
) -> Result<GroupedRow, Error> {
    let (n, k, groups) = (problem.n, problem.k, problem.groups);
    let routed = RoutedRows::of(problem);
    let (experts, real_rows) = (&routed.experts, routed.rows);
    let buffer_rows = u64::from(problem.rows);
    let mut rng = NormalRng::new(0x6E00_0000 ^ u64::from(n) ^ (u64::from(k) << 24));
    let a = random_bf16(stream, (buffer_rows * u64::from(k)) as usize, &mut rng, "A")?;
    let weights = u64::from(groups) * u64::from(k) * u64::from(n);
    let b = random_bf16(stream, weights as usize, &mut rng, "the weights")?;
    let d_len = (buffer_rows * u64::from(n)) as usize;
    let alloc = |what: &str, len: usize| {
        stream
            .alloc_zeros::<bf16>(len.max(1))
            .during(|| format!("allocating {what}"))
    };
    let mut d_grouped = alloc("D", d_len)?;
    let mut d_loop = alloc("D", d_len)?;
    let mut d_ours = alloc("D", d_len)?;
    let (grouped_matmul, fused_matmul) = match problem.distribution {
        Distribution::Masked { .. } => (&kernels.masked, &kernels.masked_fused),
        _ => (&kernels.contiguous, &kernels.contiguous_fused),
    };
    let names = grouped_matmul.names();
    let ours = (0..names.len())
        .map(|index| Ok((names[index], grouped_matmul.kernel(index)?)))
        .collect::<Result<Vec<_>, Error>>()?;
    let table = stream
        .clone_htod(&routed.table)
        .during(|| "copying the row table".to_string())?;
    let dims = GroupedDims {
        groups,
        rows: problem.rows,
        n,
        k,
    };
    let lds = LeadingDims {
        lda: k,
        ldb: n,
        ldc: n,
    };

    // The ceiling: G products of the same rows in all, split evenly.
    let balanced_rows = (problem.rows.div_ceil(groups)).max(1);
    let balanced = Problem::new(balanced_rows, n, k, Layout::RowRow).with_batch(groups);
    let balanced_experts: Vec<(u64, u32)> = (0..u64::from(groups))
        .map(|g| (g * u64::from(balanced_rows), balanced_rows))
        .collect();
    let balanced_len = u64::from(groups) * u64::from(balanced_rows);
    let a_balanced = random_bf16(
        stream,
        (balanced_len * u64::from(k)) as usize,
        &mut rng,
        "A",
    )?;
    let mut d_ceiling = alloc("D", (balanced_len * u64::from(n)) as usize)?;
    let mut d_ceiling_ref = alloc("D", (balanced_len * u64::from(n)) as usize)?;
    let ceiling_kernel = matmul.pick(&balanced)?.kernel.to_string();

    let grouped = GroupedCall::new(stream, &a, &b, &mut d_grouped, experts, (n, k))?;
    // Correct first.
    grouped.run(cublas)?;
    cublas_loop(cublas, &a, &b, &mut d_loop, experts, n, k)?;
    matmul.run(stream, &a_balanced, &b, &mut d_ceiling, &balanced)?;
    cublas_loop(
        cublas,
        &a_balanced,
        &b,
        &mut d_ceiling_ref,
        &balanced_experts,
        n,
        k,
    )?;
    let read = |d: &CudaSlice<bf16>| stream.clone_dtoh(d).during(|| "reading D back".to_string());
    let d_loop_host = read(&d_loop)?;
    let grouped_vs_loop = rel_diff(&read(&d_grouped)?, &d_loop_host, experts, n);
    // Ours, each on a poisoned D: the experts' rows as the loop's, every other row untouched.
    let mut ours_vs_loop = 0.0f64;
    for (name, kernel) in &ours {
        stream
            .memcpy_htod(&vec![bf16::poison(); d_len], &mut d_ours)
            .during(|| "poisoning D".to_string())?;
        kernel.launch_grouped(stream, &a, &b, &mut d_ours, &table, dims, lds)?;
        let d_host = read(&d_ours)?;
        ours_vs_loop = ours_vs_loop.max(rel_diff(&d_host, &d_loop_host, experts, n));
        routed.check_untouched(&d_host, n, problem, name)?;
    }
    // The down projection's epilogue with a bias of 0 and weights of 1: the D of the plain
    // member of the same tile (the sets list their members alike), ±0 alike.
    let bias = alloc(
        "the experts' bias",
        (u64::from(groups) * u64::from(n)) as usize,
    )?;
    let weights = stream
        .clone_htod(&vec![1.0f32; buffer_rows as usize])
        .during(|| "copying the router's weights".to_string())?;
    let fused_kernel = fused_matmul.pick(&dims)?.to_string();
    let run_fused = |d: &mut CudaSlice<bf16>| -> Result<(), Error> {
        let mut epilogue = Epilogue::none()
            .bias(BiasArg::output(&bias).strided(u64::from(n)))
            .row_scale(&weights);
        Ok(fused_matmul.run_with(stream, &a, &b, d, &table, dims, &mut epilogue)?)
    };
    let fused_index = fused_matmul
        .names()
        .iter()
        .position(|name| *name == fused_kernel)
        .expect("the pick is a member");
    let picked_plain = grouped_matmul.kernel(fused_index)?;
    stream
        .memcpy_htod(&vec![bf16::poison(); d_len], &mut d_ours)
        .during(|| "poisoning D".to_string())?;
    picked_plain.launch_grouped(stream, &a, &b, &mut d_ours, &table, dims, lds)?;
    let plain_host = read(&d_ours)?;
    stream
        .memcpy_htod(&vec![bf16::poison(); d_len], &mut d_ours)
        .during(|| "poisoning D".to_string())?;
    run_fused(&mut d_ours)?;
    let fused_host = read(&d_ours)?;
    let differ = plain_host
        .iter()
        .zip(&fused_host)
        .filter(|(x, y)| x.to_bits() != y.to_bits() && !(x.to_f32() == 0.0 && y.to_f32() == 0.0))
        .count();
    if differ != 0 {
        return Err(Error::Baseline {
            action: format!("checking {problem}"),
            reason: format!(
                "`{fused_kernel}` with a bias of 0 and weights of 1 differs from its plain member in {differ} elements"
            ),
        });
    }
    let ceiling_vs_cublas = rel_diff(
        &read(&d_ceiling)?,
        &read(&d_ceiling_ref)?,
        &balanced_experts,
        n,
    );
    let bound = 1e-2;
    if !(grouped_vs_loop <= bound && ceiling_vs_cublas <= bound && ours_vs_loop <= bound) {
        return Err(Error::Baseline {
            action: format!("checking {problem}"),
            reason: format!(
                "grouped vs loop {grouped_vs_loop:.2e}, ours vs loop {ours_vs_loop:.2e}, ceiling vs cuBLAS {ceiling_vs_cublas:.2e} (bound {bound:.0e})"
            ),
        });
    }

    let mut grouped_launch = |_: usize| grouped.run(cublas);
    let mut loop_launch = |_: usize| cublas_loop(cublas, &a, &b, &mut d_loop, experts, n, k);
    let mut ceiling_launch =
        |_: usize| Ok(matmul.run(stream, &a_balanced, &b, &mut d_ceiling, &balanced)?);
    let d_ours = std::cell::RefCell::new(d_ours);
    let mut ours_launches: Vec<_> = ours
        .iter()
        .map(|(_, kernel)| {
            let (a, b, table, d_ours) = (&a, &b, &table, &d_ours);
            move |_: usize| -> Result<(), Error> {
                let mut d = d_ours.borrow_mut();
                Ok(kernel.launch_grouped(stream, a, b, &mut *d, table, dims, lds)?)
            }
        })
        .collect();
    let mut fused_launch = |_: usize| run_fused(&mut d_ours.borrow_mut());
    let mut competitors: Vec<&mut Launcher<'_>> =
        vec![&mut grouped_launch, &mut loop_launch, &mut ceiling_launch];
    for launch in &mut ours_launches {
        competitors.push(launch);
    }
    competitors.push(&mut fused_launch);
    let times = time_round_robin(stream, rounds, &mut competitors)?;
    let ms = |i: usize| median(&times[i]).unwrap_or(f64::NAN);
    let tflops = |rows: u64, ms: f64| 2.0 * rows as f64 * f64::from(n) * f64::from(k) / (ms * 1e9);
    let member_tflops: Vec<(String, f64)> = names
        .iter()
        .enumerate()
        .map(|(i, name)| (name.to_string(), tflops(real_rows, ms(3 + i))))
        .collect();
    let picked = grouped_matmul.pick(&dims)?;
    let picked_index = names
        .iter()
        .position(|name| *name == picked)
        .expect("the pick is a member");
    let fused_plain_tflops = member_tflops[fused_index].1;
    let best = member_tflops
        .iter()
        .max_by(|x, y| x.1.total_cmp(&y.1))
        .expect("at least one grouped kernel")
        .clone();
    Ok(GroupedRow {
        problem: problem.to_string(),
        min_rows: routed.extremes().0,
        max_rows: routed.extremes().1,
        rows: real_rows,
        cublas_grouped_ms: ms(0),
        cublas_loop_ms: ms(1),
        ceiling_ms: ms(2),
        ceiling_kernel,
        cublas_grouped_tflops: tflops(real_rows, ms(0)),
        cublas_loop_tflops: tflops(real_rows, ms(1)),
        ceiling_tflops: tflops(balanced_len, ms(2)),
        ours_ms: ms(3 + picked_index),
        ours_kernel: picked.to_string(),
        ours_tflops: member_tflops[picked_index].1,
        best_member_kernel: best.0,
        best_member_tflops: best.1,
        member_tflops,
        ours_vs_loop,
        fused_kernel,
        fused_tflops: tflops(real_rows, ms(3 + names.len())),
        fused_plain_tflops,
        grouped_vs_loop,
        ceiling_vs_cublas,
    })
}

/// The rows of a `rows`-row buffer that no expert holds.
fn outside_rows(experts: &[(u64, u32)], rows: u32) -> impl Iterator<Item = usize> + '_ {
    (0..rows as usize).filter(move |&row| {
        !experts
            .iter()
            .any(|&(start, count)| (start..start + u64::from(count)).contains(&(row as u64)))
    })
}

/// The markdown table of a run.
pub fn grouped_table(rows: &[GroupedRow]) -> String {
    let mut out = String::from(
        "bf16 in and out, layout rr (B as `[G, K, N]`); TF/s over the rows the experts have (the ceiling: over its balanced rows).\n\n\
         | problem (G ROWS N K DIST) | rows per expert (min / max) | ours (picked) TF/s | ours / best cuBLAS | ours / ceiling | cuBLAS grouped TF/s | loop of GemmEx TF/s | ceiling: ours, balanced strided batch TF/s | picked kernel | best member (TF/s) | ceiling kernel | ours + bias + router weight TF/s (/ plain) | ours vs loop | grouped vs loop | ceiling vs cuBLAS |\n\
         |---|---|---:|---:|---:|---:|---:|---:|---|---|---|---:|---:|---:|---:|\n",
    );
    for row in rows {
        let best_cublas = row.cublas_grouped_tflops.max(row.cublas_loop_tflops);
        out.push_str(&format!(
            "| {} | {} / {} | {:.0} | {:.2} | {:.2} | {:.0} | {:.0} | {:.0} | `{}` | `{}` ({:.0}) | `{}` | {:.0} ({:.3}) | {:.1e} | {:.1e} | {:.1e} |\n",
            row.problem,
            row.min_rows,
            row.max_rows,
            row.ours_tflops,
            row.ours_tflops / best_cublas,
            row.ours_tflops / row.ceiling_tflops,
            row.cublas_grouped_tflops,
            row.cublas_loop_tflops,
            row.ceiling_tflops,
            row.ours_kernel,
            row.best_member_kernel,
            row.best_member_tflops,
            row.ceiling_kernel,
            row.fused_tflops,
            row.fused_tflops / row.fused_plain_tflops,
            row.ours_vs_loop,
            row.grouped_vs_loop,
            row.ceiling_vs_cublas
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn experts_lie_one_after_another_or_at_their_masked_slots() {
        let contiguous = GroupedProblem::parse_line("3 10 8 8 balanced")
            .unwrap()
            .unwrap();
        assert_eq!(
            expert_rows(&contiguous, &contiguous.group_rows()),
            vec![(0, 4), (4, 3), (7, 3)]
        );
        let masked = GroupedProblem::parse_line("2 512 8 8 masked:256:1")
            .unwrap()
            .unwrap();
        let sizes = masked.group_rows();
        assert_eq!(
            expert_rows(&masked, &sizes),
            vec![(0, sizes[0]), (256, sizes[1])]
        );
    }

    #[test]
    fn the_difference_counts_only_the_experts_rows() {
        let x: Vec<bf16> = [1.0, 2.0, 9.0, 4.0].map(bf16::from_f32).to_vec();
        let y: Vec<bf16> = [1.0, 2.0, 0.0, 4.0].map(bf16::from_f32).to_vec();
        // Rows 0 and 3 (one column): row 2 differs and is no expert's.
        assert_eq!(rel_diff(&x, &y, &[(0, 1), (3, 1)], 1), 0.0);
        assert!(rel_diff(&x, &y, &[(0, 3)], 1) > 1.0);
    }
}
