//! Timing a fused-epilogue kernel (`gemm-bench --fused`): the spec's kernel against
//! - the same spec without the epilogue (what fusing costs),
//! - that plain kernel followed by a separate elementwise kernel doing the epilogue (what
//!   fusing saves),
//! - cuBLASLt with the matching epilogue (`BIAS`, `RELU_BIAS`, `GELU_BIAS`, `GELU`, `RELU`,
//!   with α and β; `GELU_AUX_BIAS` where the spec stores the pre-activation too), and plain
//!   cuBLAS,
//!
//! all in one process on one stream, launches alternating, each timed by its own events; the
//! median counts. bf16 kernels, layout `rr`, C-in read in place (as cuBLASLt's C). Before
//! timing, the fused kernel's D (and aux) is compared with cuBLASLt's where cuBLASLt computes
//! the same epilogue.

use crate::baseline::cublas::{Cublas, CublasGemm};
use crate::baseline::gelu_aux::LtGeluAuxBias;
use crate::bench::{median, tflops, time_round_robin, Launcher, Rounds, Shape};
use crate::error::{DriverContext, Error};
use crate::verify::NormalRng;
use cudarc::cublaslt::{CudaBlasLT, Matmul as _, MatmulConfig};
use cudarc::driver::{
    CudaContext, CudaFunction, CudaSlice, CudaStream, LaunchConfig, PushKernelArg,
};
use gemm_dsl::pick::Problem;
use gemm_dsl::{Activation, Aux, Bias, BiasAlong, DType, GemmSpec, Layout, Scale};
use gemm_runtime::epilogue::{BiasArg, CIn, Epilogue, FusedSpec};
use gemm_runtime::{Batch, GemmKernel, LeadingDims, Matmul};
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
    /// The same for the pre-activation output, where the spec stores one and cuBLASLt's
    /// `GELU_AUX_BIAS` computes it.
    #[serde(default)]
    pub aux_rel_diff_to_cublaslt: Option<f64>,
    pub fused_tflops: f64,
    /// The fused and the plain kernel that ran: the spec's two, or the entry point's picks
    /// over a set (reports before `--fused --set` existed: empty).
    #[serde(default)]
    pub fused_kernel: String,
    #[serde(default)]
    pub plain_kernel: String,
}

/// What computes the fused product and its plain twin: one spec's kernel and the same spec
/// without its epilogue, or the entry point over a set with the epilogue and without.
pub enum FusedRunners<'k> {
    Kernels {
        fused: &'k GemmKernel<bf16, bf16>,
        plain: &'k GemmKernel<bf16, bf16>,
    },
    EntryPoint {
        fused: &'k Matmul<bf16, bf16>,
        plain: &'k Matmul<bf16, bf16>,
    },
}

/// The packed row-major `m x n x k` problem the runners compute.
fn row_major((m, n, k): (u32, u32, u32)) -> Problem {
    Problem::new(m, n, k, Layout::RowRow)
}

impl FusedRunners<'_> {
    /// The names of the fused and the plain kernel for the row-major `m x n x k` problem.
    fn names(&self, dims: (u32, u32, u32)) -> Result<(String, String), Error> {
        Ok(match self {
            FusedRunners::Kernels { fused, plain } => (
                fused.info().name().to_string(),
                plain.info().name().to_string(),
            ),
            FusedRunners::EntryPoint { fused, plain } => (
                fused.pick(&row_major(dims))?.kernel.to_string(),
                plain.pick(&row_major(dims))?.kernel.to_string(),
            ),
        })
    }

    /// `D = epilogue(A·B)` for packed row-major operands.
    fn run_fused(
        &self,
        stream: &Arc<CudaStream>,
        (a, b): (&CudaSlice<bf16>, &CudaSlice<bf16>),
        d: &mut CudaSlice<bf16>,
        (m, n, k): (u32, u32, u32),
        epilogue: &mut Epilogue<'_, bf16>,
    ) -> Result<(), Error> {
        match self {
            FusedRunners::Kernels { fused, .. } => {
                let lds = LeadingDims::packed(fused.info().launch(), m, n, k);
                fused.launch_fused(stream, a, b, d, m, n, k, lds, Batch::ONE, epilogue)?;
            }
            FusedRunners::EntryPoint { fused, .. } => {
                fused.run_fused(stream, a, b, d, &row_major((m, n, k)), epilogue)?;
            }
        }
        Ok(())
    }

    /// `D = A·B` for packed row-major operands.
    fn run_plain(
        &self,
        stream: &Arc<CudaStream>,
        (a, b): (&CudaSlice<bf16>, &CudaSlice<bf16>),
        d: &mut CudaSlice<bf16>,
        (m, n, k): (u32, u32, u32),
    ) -> Result<(), Error> {
        match self {
            FusedRunners::Kernels { plain, .. } => plain.launch(stream, a, b, d, m, n, k)?,
            FusedRunners::EntryPoint { plain, .. } => {
                plain.run(stream, a, b, d, &row_major((m, n, k)))?
            }
        }
        Ok(())
    }
}

/// The spec without its epilogue math or aux output, named `<name>_plain`.
pub fn plain_spec(spec: &GemmSpec) -> GemmSpec {
    GemmSpec {
        name: format!("{}_plain", spec.name),
        scale: Scale::None,
        bias: Bias::None,
        activation: Activation::None,
        aux: Aux::None,
        ..spec.clone()
    }
}

/// The elementwise epilogue as a CUDA kernel, compiled at run time: 8 bf16 of D per thread,
/// `D = act(α·D + β·C + bias[col])` in place (C-in is D's earlier value, as in the fused
/// run, so β·C is β·D before the product overwrote it: the same traffic), and the value before
/// the activation into `aux` where that is not null.
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
        const unsigned short* bias, unsigned short* aux, unsigned long long vectors,
        unsigned int n, float alpha, float beta, int bias_along, int act) {
    unsigned long long v = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (v >= vectors) return;
    uint4 packed = ((uint4*)d)[v];
    uint4 c = c_in ? ((const uint4*)c_in)[v] : make_uint4(0, 0, 0, 0);
    uint4 pre;
    unsigned short* h = (unsigned short*)&packed;
    unsigned short* ch = (unsigned short*)&c;
    unsigned short* pre_h = (unsigned short*)&pre;
    unsigned long long first = v * 8;
    for (int i = 0; i < 8; ++i) {
        unsigned long long at = first + i;
        float x = alpha * from_bf16(h[i]);
        if (c_in) x += beta * from_bf16(ch[i]);
        if (bias_along == 1) x += from_bf16(bias[at / n]);
        if (bias_along == 2) x += from_bf16(bias[at % n]);
        pre_h[i] = to_bf16(x);
        h[i] = to_bf16(activate(x, act));
    }
    ((uint4*)d)[v] = packed;
    if (aux) ((uint4*)aux)[v] = pre;
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

/// The cuBLASLt epilogue that computes what a spec fuses.
enum LtEpilogue {
    /// Through cudarc's safe API: `BIAS`, `RELU_BIAS`, `GELU_BIAS`, `RELU`, `GELU` or none.
    Safe(Option<cudarc::cublaslt::Activation>),
    /// `GELU_AUX_BIAS` ([`LtGeluAuxBias`]): the tanh GELU of the biased sum, the sum stored too.
    GeluAuxBias,
}

/// cuBLASLt's epilogue for the spec, if it has one: a column bias of the output type (its
/// `BIAS` runs along our columns, cuBLAS's rows) and ReLU or the tanh GELU; with the
/// pre-activation stored, only the biased GELU (cuBLASLt's `RELU_AUX` stores a bit mask, not
/// the value).
fn cublaslt_epilogue(fused: &FusedSpec) -> Option<LtEpilogue> {
    let col_bias = match fused.bias {
        Bias::None => false,
        Bias::Vector { along, dtype } => {
            if along != BiasAlong::Col || dtype != DType::Bf16 {
                return None;
            }
            true
        }
    };
    if fused.aux == Aux::PreActivation {
        return (col_bias && fused.activation == Activation::Gelu)
            .then_some(LtEpilogue::GeluAuxBias);
    }
    let activation = match fused.activation {
        Activation::None => None,
        Activation::Relu => Some(cudarc::cublaslt::Activation::Relu),
        Activation::Gelu => Some(cudarc::cublaslt::Activation::Gelu),
        Activation::GeluErf | Activation::Silu => return None,
    };
    Some(LtEpilogue::Safe(activation))
}

/// The fused kernel's launch arguments: α, β with C-in read in place, the bias (of the output
/// type, or `bias_wide` for an f32 bias), and the pre-activation written to `aux`.
fn fused_epilogue<'a>(
    spec: &GemmSpec,
    alpha: f32,
    beta: f32,
    bias: &'a CudaSlice<bf16>,
    bias_wide: &'a CudaSlice<f32>,
    aux: &'a mut CudaSlice<bf16>,
) -> Epilogue<'a, bf16> {
    let mut epilogue = Epilogue::none().alpha(alpha);
    if spec.aux != Aux::None {
        epilogue = epilogue.aux(aux);
    }
    if spec.scale.reads_c() {
        epilogue = epilogue.beta(beta, CIn::Output);
    }
    if let Some((_, dtype)) = spec.bias.vector() {
        epilogue = epilogue.bias(match dtype {
            DType::F32 => BiasArg::f32(bias_wide),
            _ => BiasArg::output(bias),
        });
    }
    epilogue
}

/// A planned cuBLASLt baseline.
enum LtBaseline {
    Safe(CudaBlasLT, Option<cudarc::cublaslt::Activation>),
    GeluAuxBias(LtGeluAuxBias),
}

/// ‖ours − theirs‖_F / ‖theirs‖_F of two device buffers.
fn rel_diff(
    stream: &Arc<CudaStream>,
    ours: &CudaSlice<bf16>,
    theirs: &CudaSlice<bf16>,
    what: &str,
) -> Result<f64, Error> {
    let ours = stream
        .clone_dtoh(ours)
        .during(|| format!("reading {what} back"))?;
    let theirs = stream
        .clone_dtoh(theirs)
        .during(|| format!("reading cuBLASLt's {what} back"))?;
    let (mut diff, mut norm) = (0.0f64, 0.0f64);
    for (x, y) in ours.iter().zip(&theirs) {
        let (x, y) = (x.to_f64(), y.to_f64());
        diff += (x - y) * (x - y);
        norm += y * y;
    }
    Ok((diff / norm).sqrt())
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
    let runners = FusedRunners::Kernels {
        fused: &fused,
        plain: &plain,
    };
    time_fused_with(ctx, stream, spec, &runners, shape, rounds)
}

/// Why `--fused` cannot time `shape` (its elementwise epilogue kernel takes 16-byte vectors
/// of one product), if it cannot.
pub fn shape_refusal(shape: Shape) -> Option<String> {
    (shape.batch != 1 || !shape.n.is_multiple_of(8) || !shape.k.is_multiple_of(8))
        .then(|| "--fused takes single products with N and K multiples of 8".to_string())
}

/// Times the fused product of `spec`'s epilogue (bf16, layout rr, batch 1) on `shape` as
/// `runners` compute it, against their plain product, the plain product followed by the
/// elementwise epilogue, cuBLASLt with the same epilogue and cuBLAS. Only `spec`'s epilogue
/// keys count when `runners` is the entry point over a set.
pub fn time_fused_with(
    ctx: &Arc<CudaContext>,
    stream: &Arc<CudaStream>,
    spec: &GemmSpec,
    runners: &FusedRunners<'_>,
    shape: Shape,
    rounds: &Rounds,
) -> Result<FusedRow, Error> {
    if let Some(why) = shape_refusal(shape) {
        return Err(Error::Baseline {
            action: format!("timing `{}`", spec.name),
            reason: why,
        });
    }
    let (m, n, k) = (shape.m, shape.n, shape.k);
    let fused_spec = FusedSpec::of_spec(spec);
    let (fused_kernel, plain_kernel) = runners.names((m, n, k))?;
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
    let lt_error = |source| Error::Baseline {
        action: "creating a cuBLASLt handle".to_string(),
        reason: format!("{source:?}"),
    };
    let lt = match cublaslt_epilogue(&fused_spec) {
        Some(LtEpilogue::Safe(activation)) => Some(LtBaseline::Safe(
            CudaBlasLT::new(stream.clone()).map_err(lt_error)?,
            activation,
        )),
        Some(LtEpilogue::GeluAuxBias) => Some(LtBaseline::GeluAuxBias(LtGeluAuxBias::new(
            stream, m, n, k,
        )?)),
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
    let run_lt = |d: &mut CudaSlice<bf16>, aux: &mut CudaSlice<bf16>| -> Result<(), Error> {
        match &lt {
            None => Ok(()),
            Some(LtBaseline::Safe(lt, activation)) => {
                let bias = spec.bias.vector().map(|_| &bias);
                // SAFETY: the buffers hold the packed matrices the configuration describes (A
                // k x n and B m x k in cuBLAS's column-major terms), the bias N elements.
                unsafe { lt.matmul(lt_config, &b, &a, d, bias, activation.as_ref()) }.map_err(
                    |source| Error::Baseline {
                        action: "cuBLASLt matmul with an epilogue".to_string(),
                        reason: format!("{source:?}"),
                    },
                )
            }
            Some(LtBaseline::GeluAuxBias(lt)) => lt.run(&a, &b, &bias, (alpha, beta), d, aux),
        }
    };

    // Correct first: the fused D (and aux) against cuBLASLt's, from the same C.
    let mut aux_fused = c_start.clone();
    let mut aux_lt = c_start.clone();
    runners.run_fused(
        stream,
        (&a, &b),
        &mut d_fused,
        (m, n, k),
        &mut fused_epilogue(spec, alpha, beta, &bias, &bias_wide, &mut aux_fused),
    )?;
    let (rel_diff, aux_rel_diff) = match &lt {
        None => (None, None),
        Some(baseline) => {
            run_lt(&mut d_lt, &mut aux_lt)?;
            let aux_diff = match baseline {
                LtBaseline::GeluAuxBias(_) => {
                    Some(rel_diff(stream, &aux_fused, &aux_lt, "the pre-activation")?)
                }
                LtBaseline::Safe(..) => None,
            };
            (Some(rel_diff(stream, &d_fused, &d_lt, "D")?), aux_diff)
        }
    };
    let mut epilogue = fused_epilogue(spec, alpha, beta, &bias, &bias_wide, &mut aux_fused);

    let alpha_arg = alpha;
    let beta_arg = beta;
    let c_in_ptr: Option<&CudaSlice<bf16>> = spec.scale.reads_c().then_some(&c_in_copy);
    let mut fused_launch =
        |_: usize| runners.run_fused(stream, (&a, &b), &mut d_fused, (m, n, k), &mut epilogue);
    let mut plain_launch = |_: usize| runners.run_plain(stream, (&a, &b), &mut d_plain, (m, n, k));
    let mut d_unfused = c_start.clone();
    // The unfused pair stores the pre-activation too where the fused kernel does.
    let mut aux_unfused = (spec.aux != Aux::None).then(|| c_start.clone());
    let mut unfused_launch = |_: usize| -> Result<(), Error> {
        runners.run_plain(stream, (&a, &b), &mut d_unfused, (m, n, k))?;
        let mut builder = stream.launch_builder(&elementwise);
        let null: u64 = 0;
        builder.arg(&mut d_unfused);
        match c_in_ptr {
            Some(c) => builder.arg(c),
            None => builder.arg(&null),
        };
        builder.arg(&bias);
        match aux_unfused.as_mut() {
            Some(aux) => builder.arg(aux),
            None => builder.arg(&null),
        };
        builder.arg(&vectors);
        builder.arg(&n);
        builder.arg(&alpha_arg);
        builder.arg(&beta_arg);
        builder.arg(&bias_along);
        builder.arg(&act);
        // SAFETY: the kernel reads and writes `vectors` 16-byte vectors of D, C-in and aux
        // (each m·n bf16, m·n a multiple of 8; C-in and aux may be null) and reads the bias
        // at indices below its length.
        unsafe { builder.launch(elementwise_config) }
            .map(|_| ())
            .during(|| "launching the elementwise epilogue".to_string())
    };
    let mut lt_launch = |_: usize| run_lt(&mut d_lt, &mut aux_lt);
    let mut blas_launch = |_: usize| {
        blas.gemm(
            CublasGemm::baseline(
                gemm_runtime::KernelTypes::new(DType::Bf16, DType::Bf16).expect("bf16 kernels"),
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
        aux_rel_diff_to_cublaslt: aux_rel_diff,
        fused_tflops: tflops(shape, ms(0)),
        fused_kernel,
        plain_kernel,
    })
}

/// The markdown table of a run; with the kernels that ran where they are the entry point's
/// picks rather than the spec's own kernel.
pub fn fused_table(spec: &GemmSpec, rows: &[FusedRow]) -> String {
    let picks = rows.iter().any(|row| row.fused_kernel != spec.name);
    let (pick_header, pick_rule) = if picks {
        (" fused pick (plain pick) |", "---|")
    } else {
        ("", "")
    };
    let mut out = format!(
        "spec: `{}`\n\nSpeeds are time ratios: above 1, the fused kernel is faster; its cost is its time over the plain kernel's.\n\n| shape |{pick_header} fused TFLOP/s | speed vs cuBLASLt (same epilogue) | cost vs plain kernel | speed vs plain + elementwise | speed vs cuBLAS plain | ‖D − D_Lt‖/‖D_Lt‖ |\n|---|{pick_rule}---:|---:|---:|---:|---:|---:|\n",
        spec.to_spec_text()
    );
    for row in rows {
        let lt = row
            .cublaslt_ms
            .map_or("—".to_string(), |lt| format!("{:.3}", lt / row.fused_ms));
        let diff = match (row.rel_diff_to_cublaslt, row.aux_rel_diff_to_cublaslt) {
            (None, _) => "—".to_string(),
            (Some(d), None) => format!("{d:.1e}"),
            (Some(d), Some(aux)) => format!("{d:.1e} (aux {aux:.1e})"),
        };
        let kernels = if picks {
            format!(" `{}` (`{}`) |", row.fused_kernel, row.plain_kernel)
        } else {
            String::new()
        };
        out.push_str(&format!(
            "| {} |{kernels} {:.1} | {lt} | {:.3} | {:.3} | {:.3} | {diff} |\n",
            row.shape,
            row.fused_tflops,
            row.fused_ms / row.plain_ms,
            row.unfused_ms / row.fused_ms,
            row.cublas_ms / row.fused_ms,
        ));
    }
    if let Some(geomean) = geomean_vs_cublaslt(rows) {
        out.push_str(&format!(
            "\nAgainst cuBLASLt with the same epilogue: geomean {:.3}, worst {:.3} ({} shapes).\n",
            geomean.0, geomean.1, geomean.2
        ));
    }
    out
}

/// Geomean and worst of cuBLASLt's time over the fused one, and the shapes counted (those
/// cuBLASLt computes).
fn geomean_vs_cublaslt(rows: &[FusedRow]) -> Option<(f64, f64, usize)> {
    let ratios: Vec<f64> = rows
        .iter()
        .filter_map(|row| row.cublaslt_ms.map(|lt| lt / row.fused_ms))
        .collect();
    if ratios.is_empty() {
        return None;
    }
    let geomean = (ratios.iter().map(|r| r.ln()).sum::<f64>() / ratios.len() as f64).exp();
    let worst = ratios.iter().copied().fold(f64::INFINITY, f64::min);
    Some((geomean, worst, ratios.len()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use gemm_dsl::Quant;

    fn fused(bias: Bias, activation: Activation, aux: Aux) -> FusedSpec {
        FusedSpec {
            scale: Scale::AlphaBeta,
            bias,
            activation,
            aux,
            quant: Quant::None,
            row_scale: gemm_dsl::RowScale::None,
        }
    }

    #[test]
    fn cublaslt_baselines_compute_what_the_spec_fuses() {
        let col = Bias::Vector {
            along: BiasAlong::Col,
            dtype: DType::Bf16,
        };
        let row = Bias::Vector {
            along: BiasAlong::Row,
            dtype: DType::Bf16,
        };
        let is_safe = |e: Option<LtEpilogue>| matches!(e, Some(LtEpilogue::Safe(_)));
        assert!(is_safe(cublaslt_epilogue(&fused(
            col,
            Activation::Gelu,
            Aux::None
        ))));
        assert!(is_safe(cublaslt_epilogue(&fused(
            Bias::None,
            Activation::None,
            Aux::None
        ))));
        assert!(matches!(
            cublaslt_epilogue(&fused(col, Activation::Gelu, Aux::PreActivation)),
            Some(LtEpilogue::GeluAuxBias)
        ));
        // cuBLASLt's RELU_AUX stores a bit mask, GELU_AUX without a bias is not timed, and
        // a row bias or SiLU has no cuBLASLt epilogue.
        for (bias, activation, aux) in [
            (col, Activation::Relu, Aux::PreActivation),
            (Bias::None, Activation::Gelu, Aux::PreActivation),
            (row, Activation::Gelu, Aux::None),
            (col, Activation::Silu, Aux::None),
        ] {
            assert!(
                cublaslt_epilogue(&fused(bias, activation, aux)).is_none(),
                "{bias:?} {activation:?} {aux:?}"
            );
        }
    }

    #[test]
    fn the_plain_twin_drops_every_epilogue_key() {
        let spec = gemm_dsl::parse_str(
            "name: k, arch: sm_90a, dtype: bf16, tile: 128x128x64, stages: 4, swizzle: 128B, \
             copy: tma, mma: wgmma, scale: alpha_beta, bias: col, activation: gelu, \
             aux: pre_activation",
        )
        .unwrap()
        .spec;
        let plain = plain_spec(&spec);
        assert_eq!(plain.name, "k_plain");
        assert_eq!(
            (plain.scale, plain.bias, plain.activation, plain.aux),
            (Scale::None, Bias::None, Activation::None, Aux::None)
        );
    }

    #[test]
    fn fused_runs_take_single_products_of_whole_vectors() {
        let shape = |batch, m, n, k| Shape { m, n, k, batch };
        assert_eq!(shape_refusal(shape(1, 777, 4096, 2048)), None);
        assert!(shape_refusal(shape(1, 777, 4099, 2048)).is_some());
        assert!(shape_refusal(shape(1, 16, 4096, 2044)).is_some());
        assert!(shape_refusal(shape(4, 16, 4096, 4096)).is_some());
    }

    #[test]
    fn the_table_names_the_entry_points_picks_and_sums_up_against_cublaslt() {
        let spec = gemm_dsl::parse_str(
            "name: ffn, arch: sm_90a, dtype: bf16, tile: 128x256x64, stages: 4, swizzle: 128B, \
             copy: tma, mma: wgmma, bias: col, activation: gelu",
        )
        .unwrap()
        .spec;
        let row = |shape: &str, fused_kernel: &str, lt_ms: Option<f64>| FusedRow {
            shape: shape.to_string(),
            fused_ms: 1.0,
            plain_ms: 0.9,
            unfused_ms: 1.2,
            cublaslt_ms: lt_ms,
            cublas_ms: 1.0,
            rel_diff_to_cublaslt: lt_ms.map(|_| 1e-4),
            aux_rel_diff_to_cublaslt: None,
            fused_tflops: 100.0,
            fused_kernel: fused_kernel.to_string(),
            plain_kernel: "plain".to_string(),
        };
        // The spec's own kernel: no picks column.
        let own = fused_table(&spec, &[row("16x16x16", "ffn", Some(1.1))]);
        assert!(!own.contains("fused pick"));
        assert!(own.contains("geomean 1.100, worst 1.100 (1 shapes)"));
        // The entry point's picks: a column, and the rows cuBLASLt computes in the summary.
        let picks = fused_table(
            &spec,
            &[
                row("16x16x16", "sm90_a", Some(0.8)),
                row("32x32x32", "sm90_b", Some(1.25)),
                row("64x64x64", "sm90_c", None),
            ],
        );
        assert!(picks.contains("| shape | fused pick (plain pick) | fused TFLOP/s |"));
        assert!(picks.contains("| 32x32x32 | `sm90_b` (`plain`) | 100.0 | 1.250 |"));
        assert!(picks.contains("geomean 1.000, worst 0.800 (2 shapes)"));
        for line in picks.lines().filter(|line| line.starts_with('|')) {
            assert_eq!(line.matches('|').count(), 9, "{line}");
        }
    }
}
