//! Timing a fused-epilogue kernel (`gemm-bench --fused`): the spec's kernel against
//! - the same spec without the epilogue (what fusing costs),
//! - that plain kernel followed by a separate elementwise kernel doing the epilogue (what
//!   fusing saves),
//! - cuBLASLt with the matching epilogue (`BIAS`, `RELU_BIAS`, `GELU_BIAS`, `GELU`, `RELU`,
//!   with α and β), and plain cuBLAS,
//!
//! all in one process on one stream, launches alternating, each timed by its own events; the
//! median counts. bf16 kernels, layout `rr`, C-in read in place (as cuBLASLt's C). Before
//! timing, the fused kernel's D is compared with cuBLASLt's where cuBLASLt computes the same
//! epilogue.

use crate::bench::{median, tflops, time_round_robin, Launcher, Rounds, Shape};
use crate::blas::{Cublas, CublasGemm};
use crate::epilogue::{BiasArg, CIn, Epilogue, FusedSpec};
use crate::error::{DriverContext, Error};
use crate::kernel::GemmKernel;
use crate::verify::NormalRng;
use crate::{Batch, LeadingDims};
use cudarc::cublaslt::{CudaBlasLT, Matmul, MatmulConfig};
use cudarc::driver::{
    CudaContext, CudaFunction, CudaSlice, CudaStream, LaunchConfig, PushKernelArg,
};
use gemm_dsl::{Activation, Bias, BiasAlong, DType, GemmSpec, Layout, Scale};
use half::bf16;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// One shape's times, in milliseconds (medians), and how far the fused D is from cuBLASLt's.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FusedRow {
    pub shape: String,
    pub fused_ms: f64,
    pub plain_ms: f64,
    /// The plain kernel and the elementwise epilogue kernel, both launches.
    pub unfused_ms: f64,
    /// `None` where cuBLASLt has no matching epilogue (a row bias, SiLU, exact GELU).
    pub cublaslt_ms: Option<f64>,
    pub cublas_ms: f64,
    /// ‖D − D_cuBLASLt‖_F / ‖D_cuBLASLt‖_F, where cuBLASLt computes the same epilogue.
    pub rel_diff_to_cublaslt: Option<f64>,
    pub fused_tflops: f64,
}

/// The spec without its epilogue math, named `<name>_plain`.
pub fn plain_spec(spec: &GemmSpec) -> GemmSpec {
    GemmSpec {
        name: format!("{}_plain", spec.name),
        scale: Scale::None,
        bias: Bias::None,
        activation: Activation::None,
        ..spec.clone()
    }
}

/// The elementwise epilogue as a CUDA kernel, compiled at run time: 8 bf16 of D per thread,
/// `D = act(α·D + β·C + bias[col])` in place (C-in is D's earlier value, as in the fused
/// run, so β·C is β·D before the product overwrote it: the same traffic).
const ELEMENTWISE_SOURCE: &str = r#"
__device__ float from_bf16(unsigned short h) { return __uint_as_float(((unsigned int)h) << 16); }
__device__ unsigned short to_bf16(float f) {
    unsigned int u = __float_as_uint(f);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (unsigned short)(u >> 16);
}
__device__ float activate(float x, int act) {
    if (act == 1) return fmaxf(x, 0.0f);
    if (act == 2) return 0.5f * x * (1.0f + tanhf(0.7978845608f * (x + 0.044715f * x * x * x)));
    if (act == 3) return 0.5f * x * (1.0f + erff(x * 0.7071067812f));
    if (act == 4) return x / (1.0f + __expf(-x));
    return x;
}
extern "C" __global__ void epilogue_bf16(unsigned short* d, const unsigned short* c_in,
        const unsigned short* bias, unsigned long long vectors, unsigned int n, float alpha,
        float beta, int bias_along, int act) {
    unsigned long long v = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (v >= vectors) return;
    uint4 packed = ((uint4*)d)[v];
    uint4 c = c_in ? ((const uint4*)c_in)[v] : make_uint4(0, 0, 0, 0);
    unsigned short* h = (unsigned short*)&packed;
    unsigned short* ch = (unsigned short*)&c;
    unsigned long long first = v * 8;
    for (int i = 0; i < 8; ++i) {
        unsigned long long at = first + i;
        float x = alpha * from_bf16(h[i]);
        if (c_in) x += beta * from_bf16(ch[i]);
        if (bias_along == 1) x += from_bf16(bias[at / n]);
        if (bias_along == 2) x += from_bf16(bias[at % n]);
        h[i] = to_bf16(activate(x, act));
    }
    ((uint4*)d)[v] = packed;
}
"#;

fn act_code(activation: Activation) -> i32 {
    match activation {
        Activation::None => 0,
        Activation::Relu => 1,
        Activation::Gelu => 2,
        Activation::GeluErf => 3,
        Activation::Silu => 4,
    }
}

fn elementwise_kernel(ctx: &Arc<CudaContext>) -> Result<CudaFunction, Error> {
    let ptx = cudarc::nvrtc::compile_ptx(ELEMENTWISE_SOURCE).map_err(|error| Error::Baseline {
        action: "compiling the elementwise epilogue with NVRTC".to_string(),
        reason: format!("{error:?}"),
    })?;
    let module = ctx
        .load_module(ptx)
        .during(|| "loading the elementwise epilogue".to_string())?;
    module
        .load_function("epilogue_bf16")
        .during(|| "finding the elementwise epilogue".to_string())
}

/// cuBLASLt's epilogue for the spec, if it has one: a column bias of the output type (its
/// `BIAS` runs along our columns, cuBLAS's rows) and ReLU or the tanh GELU.
fn cublaslt_epilogue(fused: &FusedSpec) -> Option<Option<cudarc::cublaslt::Activation>> {
    let bias_ok = match fused.bias {
        Bias::None => true,
        Bias::Vector { along, dtype } => along == BiasAlong::Col && dtype == DType::Bf16,
    };
    let activation = match fused.activation {
        Activation::None => None,
        Activation::Relu => Some(cudarc::cublaslt::Activation::Relu),
        Activation::Gelu => Some(cudarc::cublaslt::Activation::Gelu),
        Activation::GeluErf | Activation::Silu => return None,
    };
    bias_ok.then_some(activation)
}

fn upload(
    stream: &Arc<CudaStream>,
    len: usize,
    rng: &mut NormalRng,
    what: &str,
) -> Result<CudaSlice<bf16>, Error> {
    let values: Vec<bf16> = (0..len)
        .map(|_| bf16::from_f32(rng.next_normal() as f32))
        .collect();
    stream
        .clone_htod(&values)
        .during(|| format!("copying {what} to the device"))
}

/// Times `spec` (bf16, layout rr, batch 1) on `shape` against the plain kernel, the unfused
/// pair, cuBLASLt and cuBLAS; `balanced_grid` launches the fused and the plain kernel on a
/// balanced persistent grid (`GemmKernel::balance_grid`).
pub fn time_fused(
    ctx: &Arc<CudaContext>,
    stream: &Arc<CudaStream>,
    spec: &GemmSpec,
    shape: Shape,
    rounds: &Rounds,
    balanced_grid: bool,
) -> Result<FusedRow, Error> {
    let unsupported = |why: String| Error::Baseline {
        action: format!("timing `{}`", spec.name),
        reason: why,
    };
    if spec.dtype != DType::Bf16 || spec.out != DType::Bf16 || spec.layout != Layout::RowRow {
        return Err(unsupported(
            "--fused times bf16 -> bf16 kernels in layout rr".to_string(),
        ));
    }
    if shape.batch != 1 || !shape.n.is_multiple_of(8) || !shape.k.is_multiple_of(8) {
        return Err(unsupported(format!(
            "--fused takes single products with N and K multiples of 8, not {shape}"
        )));
    }
    let (m, n, k) = (shape.m, shape.n, shape.k);
    let fused_spec = FusedSpec::of_spec(spec);
    let mut fused = GemmKernel::<bf16, bf16>::from_emitted(
        ctx,
        &gemm_codegen::emit_str(&spec.to_spec_text()).map_err(|e| unsupported(e.to_string()))?,
    )?;
    let mut plain = GemmKernel::<bf16, bf16>::from_emitted(
        ctx,
        &gemm_codegen::emit_str(&plain_spec(spec).to_spec_text())
            .map_err(|e| unsupported(e.to_string()))?,
    )?;
    fused.balance_grid(balanced_grid);
    plain.balance_grid(balanced_grid);
    let mut rng = NormalRng::new(0xF05E_D000 ^ u64::from(m) ^ (u64::from(n) << 20));
    let a = upload(stream, (m * k) as usize, &mut rng, "A")?;
    let b = upload(stream, (k * n) as usize, &mut rng, "B")?;
    let bias_len = match spec.bias.vector() {
        Some((BiasAlong::Row, _)) => m,
        _ => n,
    };
    let bias = upload(stream, bias_len as usize, &mut rng, "the bias")?;
    let bias_wide = stream
        .clone_htod(&vec![0.5f32; bias_len as usize])
        .during(|| "copying the f32 bias".to_string())?;
    let c_start = upload(stream, (m * n) as usize, &mut rng, "C")?;
    let mut d_fused = c_start.clone();
    let mut d_plain = c_start.clone();
    let mut d_lt = c_start.clone();
    let mut d_blas = c_start.clone();
    let c_in_copy = c_start.clone();
    let (alpha, beta) = (
        if spec.scale.has_alpha() { 1.25 } else { 1.0 },
        if spec.scale.reads_c() { 0.5 } else { 0.0 },
    );
    let lds = LeadingDims {
        lda: k,
        ldb: n,
        ldc: n,
    };
    let mut aux = c_start.clone();
    let mut epilogue = Epilogue::none().alpha(alpha);
    if spec.aux != gemm_dsl::Aux::None {
        epilogue = epilogue.aux(&mut aux);
    }
    if spec.scale.reads_c() {
        epilogue = epilogue.beta(beta, CIn::Output);
    }
    if let Some((_, dtype)) = spec.bias.vector() {
        epilogue = epilogue.bias(match dtype {
            DType::F32 => BiasArg::f32(&bias_wide),
            _ => BiasArg::output(&bias),
        });
    }
    let lt_epilogue = cublaslt_epilogue(&fused_spec);
    let lt = match lt_epilogue {
        Some(_) => Some(
            CudaBlasLT::new(stream.clone()).map_err(|source| Error::Baseline {
                action: "creating a cuBLASLt handle".to_string(),
                reason: format!("{source:?}"),
            })?,
        ),
        None => None,
    };
    // cuBLAS is column-major: D^T = B^T·A^T, so cuBLAS's m is our N, its rows our columns.
    let lt_config = MatmulConfig {
        transa: false,
        transb: false,
        transc: false,
        m: u64::from(n),
        n: u64::from(m),
        k: u64::from(k),
        alpha,
        lda: i64::from(n),
        ldb: i64::from(k),
        beta,
        ldc: i64::from(n),
        stride_a: None,
        stride_b: None,
        stride_c: None,
        stride_bias: None,
        batch_size: None,
    };
    let blas = Cublas::new(stream)?;
    let elementwise = elementwise_kernel(ctx)?;
    let vectors = u64::from(m) * u64::from(n) / 8;
    let threads = 256u32;
    let elementwise_config = LaunchConfig {
        grid_dim: (vectors.div_ceil(u64::from(threads)) as u32, 1, 1),
        block_dim: (threads, 1, 1),
        shared_mem_bytes: 0,
    };
    let bias_along = match spec.bias.vector() {
        None => 0i32,
        Some((BiasAlong::Row, _)) => 1,
        Some((BiasAlong::Col, _)) => 2,
    };
    let act = act_code(spec.activation);
    let run_lt = |d: &mut CudaSlice<bf16>| -> Result<(), Error> {
        let (Some(lt), Some(activation)) = (&lt, &lt_epilogue) else {
            return Ok(());
        };
        let bias = spec.bias.vector().map(|_| &bias);
        // SAFETY: the buffers hold the packed matrices the configuration describes (A k x n
        // and B m x k in cuBLAS's column-major terms), the bias N elements.
        unsafe { lt.matmul(lt_config, &b, &a, d, bias, activation.as_ref()) }.map_err(|source| {
            Error::Baseline {
                action: "cuBLASLt matmul with an epilogue".to_string(),
                reason: format!("{source:?}"),
            }
        })
    };

    // Correct first: the fused D against cuBLASLt's, from the same C.
    fused.launch_fused(
        stream,
        &a,
        &b,
        &mut d_fused,
        m,
        n,
        k,
        lds,
        Batch::ONE,
        &mut epilogue,
    )?;
    let rel_diff = if lt.is_some() {
        run_lt(&mut d_lt)?;
        let ours = stream
            .clone_dtoh(&d_fused)
            .during(|| "reading D back".to_string())?;
        let theirs = stream
            .clone_dtoh(&d_lt)
            .during(|| "reading cuBLASLt's D back".to_string())?;
        let (mut diff, mut norm) = (0.0f64, 0.0f64);
        for (x, y) in ours.iter().zip(&theirs) {
            let (x, y) = (x.to_f64(), y.to_f64());
            diff += (x - y) * (x - y);
            norm += y * y;
        }
        Some((diff / norm).sqrt())
    } else {
        None
    };

    let alpha_arg = alpha;
    let beta_arg = beta;
    let c_in_ptr: Option<&CudaSlice<bf16>> = spec.scale.reads_c().then_some(&c_in_copy);
    let mut fused_launch = |_: usize| {
        fused.launch_fused(
            stream,
            &a,
            &b,
            &mut d_fused,
            m,
            n,
            k,
            lds,
            Batch::ONE,
            &mut epilogue,
        )
    };
    let mut plain_launch = |_: usize| plain.launch(stream, &a, &b, &mut d_plain, m, n, k);
    let mut d_unfused = c_start.clone();
    let mut unfused_launch = |_: usize| -> Result<(), Error> {
        plain.launch(stream, &a, &b, &mut d_unfused, m, n, k)?;
        let mut builder = stream.launch_builder(&elementwise);
        let null: u64 = 0;
        builder.arg(&mut d_unfused);
        match c_in_ptr {
            Some(c) => builder.arg(c),
            None => builder.arg(&null),
        };
        builder.arg(&bias);
        builder.arg(&vectors);
        builder.arg(&n);
        builder.arg(&alpha_arg);
        builder.arg(&beta_arg);
        builder.arg(&bias_along);
        builder.arg(&act);
        // SAFETY: the kernel reads and writes `vectors` 16-byte vectors of D and C-in (both
        // m·n bf16, m·n a multiple of 8) and reads the bias at indices below its length.
        unsafe { builder.launch(elementwise_config) }
            .map(|_| ())
            .during(|| "launching the elementwise epilogue".to_string())
    };
    let mut lt_launch = |_: usize| run_lt(&mut d_lt);
    let mut blas_launch = |_: usize| {
        blas.gemm(
            CublasGemm::baseline(
                crate::KernelTypes::new(DType::Bf16, DType::Bf16).expect("bf16 kernels"),
            )
            .expect("cuBLAS multiplies bf16"),
            &a,
            &b,
            &mut d_blas,
            m,
            n,
            k,
        )
    };
    let mut competitors: Vec<&mut Launcher<'_>> = vec![
        &mut fused_launch,
        &mut plain_launch,
        &mut unfused_launch,
        &mut blas_launch,
    ];
    if lt.is_some() {
        competitors.push(&mut lt_launch);
    }
    let times = time_round_robin(stream, rounds, &mut competitors)?;
    let ms = |i: usize| median(&times[i]).unwrap_or(f64::NAN);
    Ok(FusedRow {
        shape: shape.to_string(),
        fused_ms: ms(0),
        plain_ms: ms(1),
        unfused_ms: ms(2),
        cublas_ms: ms(3),
        cublaslt_ms: lt.is_some().then(|| ms(4)),
        rel_diff_to_cublaslt: rel_diff,
        fused_tflops: tflops(shape, ms(0)),
    })
}

/// The markdown table of a run.
pub fn fused_table(spec: &GemmSpec, rows: &[FusedRow]) -> String {
    let mut out = format!(
        "spec: `{}`\n\nSpeeds are time ratios: above 1, the fused kernel is faster; its cost is its time over the plain kernel's.\n\n| shape | fused TFLOP/s | speed vs cuBLASLt (same epilogue) | cost vs plain kernel | speed vs plain + elementwise | speed vs cuBLAS plain | ‖D − D_Lt‖/‖D_Lt‖ |\n|---|---:|---:|---:|---:|---:|---:|\n",
        spec.to_spec_text()
    );
    for row in rows {
        let lt = row
            .cublaslt_ms
            .map_or("—".to_string(), |lt| format!("{:.3}", lt / row.fused_ms));
        let diff = row
            .rel_diff_to_cublaslt
            .map_or("—".to_string(), |d| format!("{d:.1e}"));
        out.push_str(&format!(
            "| {} | {:.1} | {lt} | {:.3} | {:.3} | {:.3} | {diff} |\n",
            row.shape,
            row.fused_tflops,
            row.fused_ms / row.plain_ms,
            row.unfused_ms / row.fused_ms,
            row.cublas_ms / row.fused_ms,
        ));
    }
    out
}
