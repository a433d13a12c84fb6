//! Host time per call: what a serving loop pays on the CPU for one GEMM, ours beside cuBLAS's,
//! in one process (`gemm-bench --host-cost`).
//!
//! Each call is enqueued back to back, `calls` in a row, and the loop's wall time divided by
//! `calls` is one sample (the GPU works behind: the launch queue holds every call of a
//! round, so the host never waits for it); the median of `rounds` samples counts. Measured
//! for four callers on the same buffers and stream: `Matmul::run` (warm: its pick memoized and
//! its kernel loaded), the picked `GemmKernel`'s own launch, cuBLAS's `GemmEx`, and an empty
//! kernel through `cuLaunchKernel` (the driver's floor). Each in a context that tracks buffer
//! uses with events (cudarc's default) and one that does not (what a CUDA graph capture
//! needs), both on a stream of their own.

use crate::baseline::cublas::{Cublas, CublasGemm};
use crate::bench::median;
use crate::error::{DriverContext, Error};
use cudarc::driver::{sys, CudaContext, CudaFunction, CudaStream};
use cudarc::nvrtc::Ptx;
use gemm_dsl::pick::sets::KernelSet;
use gemm_dsl::pick::Problem;
use gemm_dsl::Layout;
use gemm_runtime::{open_context, Element, KernelTypes, LeadingDims, Matmul};
use serde::Serialize;
use std::sync::Arc;
use std::time::Instant;

/// One problem's host time per call, in microseconds, in one tracking mode.
#[derive(Clone, Debug, Serialize)]
pub struct HostCostRow {
    pub problem: String,
    /// The kernel `Matmul` picked.
    pub kernel: String,
    /// Whether the context tracked buffer uses with events.
    pub event_tracking: bool,
    pub matmul_run_us: f64,
    pub kernel_launch_us: f64,
    pub cublas_us: f64,
    pub empty_launch_us: f64,
}

/// How many calls make a sample, and how many samples make the median.
#[derive(Clone, Copy, Debug)]
pub struct HostCostRounds {
    pub calls: usize,
    pub rounds: usize,
}

const EMPTY_KERNEL: &str = "empty_kernel";
const EMPTY_PTX: &str = "
.version 7.8
.target sm_80
.address_size 64
.visible .entry empty_kernel()
{
    ret;
}
";

/// The host time of every problem (packed, row-major A and B, layout `rr`) with `set`'s
/// kernels of `types` (those of `In -> Out`), first with event tracking, then without.
pub fn measure<In: Element, Out: Element>(
    device: usize,
    set: &KernelSet,
    types: KernelTypes,
    problems: &[(u32, u32, u32)],
    rounds: HostCostRounds,
) -> Result<Vec<HostCostRow>, Error> {
    let gemm = CublasGemm::baseline(types).ok_or_else(|| Error::Baseline {
        action: "timing cuBLAS's host cost".to_string(),
        reason: format!("no cuBLAS GEMM of the types {types}"),
    })?;
    let mut rows = Vec::new();
    for event_tracking in [true, false] {
        // A context object of its own: the tracking flag is the object's, and buffers
        // follow the flag they were allocated under.
        let ctx = open_context(device)?;
        if !event_tracking {
            // SAFETY: every buffer of this context is used on the one stream made below.
            unsafe { ctx.disable_event_tracking() };
        }
        let stream = ctx.new_stream().during(|| "making a stream".to_string())?;
        let matmul = Matmul::<In, Out>::with_set(&ctx, set)?;
        let cublas = Cublas::new(&stream)?;
        let empty = empty_kernel(&ctx)?;
        for &(m, n, k) in problems {
            rows.push(measure_problem(
                &stream,
                &matmul,
                &cublas,
                gemm,
                &empty,
                (m, n, k),
                rounds,
                event_tracking,
            )?);
        }
    }
    Ok(rows)
}

#[allow(clippy::too_many_arguments)]
fn measure_problem<In: Element, Out: Element>(
    stream: &Arc<CudaStream>,
    matmul: &Matmul<In, Out>,
    cublas: &Cublas,
    gemm: CublasGemm,
    empty: &CudaFunction,
    (m, n, k): (u32, u32, u32),
    rounds: HostCostRounds,
    event_tracking: bool,
) -> Result<HostCostRow, Error> {
    let problem = Problem::new(m, n, k, Layout::RowRow);
    let elements = |rows: u32, cols: u32| (u64::from(rows) * u64::from(cols)) as usize;
    let during = || format!("allocating the operands of {problem}");
    let a = stream.alloc_zeros::<In>(elements(m, k)).during(during)?;
    let b = stream.alloc_zeros::<In>(elements(k, n)).during(during)?;
    let mut c = stream.alloc_zeros::<Out>(elements(m, n)).during(during)?;
    let kernel = matmul.kernel_for(&problem)?;
    let kernel_name = matmul.pick(&problem)?.kernel.to_string();
    let lds = LeadingDims {
        lda: k,
        ldb: n,
        ldc: n,
    };
    let synchronize = || stream.synchronize().during(|| "synchronizing".to_string());
    // One call of each first: a cold pick, a first launch and cuBLAS's heuristics are not
    // what a serving loop pays.
    matmul.run(stream, &a, &b, &mut c, &problem)?;
    kernel.launch_with_ld(stream, &a, &b, &mut c, m, n, k, lds.lda, lds.ldb, lds.ldc)?;
    cublas.gemm::<In, Out, _, _, _>(gemm, &a, &b, &mut c, m, n, k)?;
    launch_empty(stream, empty)?;
    synchronize()?;

    let mut per_call = [Vec::new(), Vec::new(), Vec::new(), Vec::new()];
    for _ in 0..rounds.rounds {
        let started = Instant::now();
        for _ in 0..rounds.calls {
            matmul.run(stream, &a, &b, &mut c, &problem)?;
        }
        per_call[0].push(micros_per_call(started, rounds.calls));
        synchronize()?;

        let started = Instant::now();
        for _ in 0..rounds.calls {
            kernel.launch_with_ld(stream, &a, &b, &mut c, m, n, k, lds.lda, lds.ldb, lds.ldc)?;
        }
        per_call[1].push(micros_per_call(started, rounds.calls));
        synchronize()?;

        let started = Instant::now();
        for _ in 0..rounds.calls {
            cublas.gemm::<In, Out, _, _, _>(gemm, &a, &b, &mut c, m, n, k)?;
        }
        per_call[2].push(micros_per_call(started, rounds.calls));
        synchronize()?;

        let started = Instant::now();
        for _ in 0..rounds.calls {
            launch_empty(stream, empty)?;
        }
        per_call[3].push(micros_per_call(started, rounds.calls));
        synchronize()?;
    }
    let [matmul_run, kernel_launch, cublas_call, empty_launch] =
        per_call.map(|samples| median(&samples).unwrap_or(f64::NAN));
    Ok(HostCostRow {
        problem: format!("{m}x{n}x{k}"),
        kernel: kernel_name,
        event_tracking,
        matmul_run_us: matmul_run,
        kernel_launch_us: kernel_launch,
        cublas_us: cublas_call,
        empty_launch_us: empty_launch,
    })
}

fn micros_per_call(started: Instant, calls: usize) -> f32 {
    (started.elapsed().as_secs_f64() * 1e6 / calls.max(1) as f64) as f32
}

fn empty_kernel(ctx: &Arc<CudaContext>) -> Result<CudaFunction, Error> {
    ctx.load_module(Ptx::from_src(EMPTY_PTX))
        .during(|| format!("loading `{EMPTY_KERNEL}`"))?
        .load_function(EMPTY_KERNEL)
        .during(|| format!("finding `{EMPTY_KERNEL}`"))
}

/// One block of one warp running `ret`, straight through `cuLaunchKernel`.
fn launch_empty(stream: &CudaStream, function: &CudaFunction) -> Result<(), Error> {
    // SAFETY: the kernel takes no parameters and touches no memory; the stream's context is
    // the one the module was loaded in, bound to this thread by the calls before.
    unsafe {
        sys::cuLaunchKernel(
            function.cu_function(),
            1,
            1,
            1,
            32,
            1,
            1,
            0,
            stream.cu_stream(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
        )
    }
    .result()
    .during(|| format!("launching `{EMPTY_KERNEL}`"))
}

/// The table of `rows`: one line per problem and tracking mode.
pub fn table(rows: &[HostCostRow], rounds: HostCostRounds) -> String {
    let mut out = format!(
        "Host time per call, µs: median of {} rounds of {} back-to-back calls on one stream (layout rr)\n\n\
         | problem | events tracked | kernel picked | `Matmul::run` | `GemmKernel` launch | cuBLAS `GemmEx` | empty `cuLaunchKernel` |\n\
         |---|---|---|---:|---:|---:|---:|\n",
        rounds.rounds, rounds.calls
    );
    for row in rows {
        out.push_str(&format!(
            "| {} | {} | `{}` | {:.2} | {:.2} | {:.2} | {:.2} |\n",
            row.problem,
            if row.event_tracking { "yes" } else { "no" },
            row.kernel,
            row.matmul_run_us,
            row.kernel_launch_us,
            row.cublas_us,
            row.empty_launch_us
        ));
    }
    out
}
