//! Timing a fused-epilogue kernel (`gemm-bench --fused`): the spec's kernel against
//! - the same spec without the epilogue (what fusing costs),
//! - that plain kernel followed by a separate elementwise kernel doing the epilogue (what
//!   fusing saves),
//! - cuBLASLt with the matching epilogue (`BIAS`, `RELU_BIAS`, `GELU_BIAS`, `GELU`, `RELU`,
//!   with α and β; `GELU_AUX_BIAS` where the spec stores the pre-activation too), and plain
//!   cuBLAS,
//!
//! all in one process on one stream, launches alternating, each timed by its own events; the
//! median counts. bf16 kernels, layout `rr`, C-in read in place (as cuBLASLt's C). Operands are
//! packed, rows of exactly K (A) and N (B, C) elements whatever N and K are, as a caller's
//! tensors lie: an N or K that is no multiple of 8 leaves the rows unaligned to 16 bytes, which
//! every competitor then meets alike. A strided batch (`BxMxNxK`) lies back to back and shares
//! one bias vector among its products, as torch's `x @ W + b` broadcasts it. Before timing, the
//! fused kernel's D (and aux) is compared with cuBLASLt's, product by product, where cuBLASLt
//! computes the same epilogue. A competitor that cannot compute a shape (no kernel of ours
//! admits it, cuBLASLt finds no algorithm) is left out of that shape's rounds, and its row says
//! why ([`FusedRow::not_run`]).

use crate::baseline::cublas::{Cublas, CublasGemm};
use crate::baseline::gelu_aux::LtGeluAuxBias;
use crate::bench::{median, tflops, time_round_robin, Launcher, Rounds, Shape};
use crate::error::{DriverContext, Error};
use crate::verify::{NormalRng, Tolerance};
use cudarc::cublaslt::{CudaBlasLT, Matmul as _, MatmulConfig};
use cudarc::driver::{
    CudaContext, CudaFunction, CudaSlice, CudaStream, LaunchConfig, PushKernelArg,
};
use gemm_dsl::abi::KernelInfo;
use gemm_dsl::pick::{Candidate, Problem, Refusal};
use gemm_dsl::{Activation, Aux, Bias, BiasAlong, DType, GemmSpec, Layout, Scale};
use gemm_runtime::epilogue::{BiasArg, CIn, Epilogue, FusedSpec};
use gemm_runtime::{Batch, GemmKernel, LeadingDims, Matmul};
use half::bf16;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// One shape's times, in milliseconds (medians), and how far the fused D is from cuBLASLt's.
/// A time is `None` where its competitor did not run the shape; [`FusedRow::not_run`] says
/// why.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FusedRow {
    pub shape: String,
    /// `None` where no fused kernel of ours computes the shape.
    pub fused_ms: Option<f64>,
    /// `None` where no plain kernel of ours computes the shape.
    pub plain_ms: Option<f64>,
    /// The plain kernel and the elementwise epilogue kernel, both launches (`None` without a
    /// plain kernel).
    pub unfused_ms: Option<f64>,
    /// `None` where cuBLASLt has no matching epilogue (a row bias, SiLU, exact GELU) or no
    /// algorithm for the shape.
    pub cublaslt_ms: Option<f64>,
    pub cublas_ms: f64,
    /// ‖D − D_cuBLASLt‖_F / ‖D_cuBLASLt‖_F, the largest over the batch's products, where
    /// both ran the same epilogue.
    pub rel_diff_to_cublaslt: Option<f64>,
    /// The same for the pre-activation output, where the spec stores one and cuBLASLt's
    /// `GELU_AUX_BIAS` computes it.
    #[serde(default)]
    pub aux_rel_diff_to_cublaslt: Option<f64>,
    /// `None` without a fused kernel.
    pub fused_tflops: Option<f64>,
    /// The fused and the plain kernel that ran: the spec's two, or the entry point's picks
    /// over a set (reports before `--fused --set` existed, and a pick where the set has no
    /// kernel: empty).
    #[serde(default)]
    pub fused_kernel: String,
    #[serde(default)]
    pub plain_kernel: String,
    /// Each competitor that did not run the shape, as `who: why` (`ours: no fused kernel
    /// (..)`, `cuBLASLt: ..`): the rounds time the others, and the summaries leave the shape
    /// out where it lacks what they compare.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_run: Vec<String>,
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

/// The packed row-major problem of `shape` (a batch's matrices back to back) the runners
/// compute.
fn row_major(shape: Shape) -> Problem {
    Problem::new(shape.m, shape.n, shape.k, Layout::RowRow).with_batch(shape.batch)
}

/// The packed row-major operands of `shape`: rows of K (A) and N (B, C) elements, each
/// product's matrices right after the last one's (strides of one matrix, in elements).
fn row_major_batch(shape: Shape) -> Batch {
    let (m, n, k) = (u64::from(shape.m), u64::from(shape.n), u64::from(shape.k));
    Batch {
        count: shape.batch,
        stride_a: m * k,
        stride_b: k * n,
        stride_c: m * n,
    }
}

/// The elements a buffer of the whole batch holds, `stride` each product.
fn batch_len(batch: &Batch, stride: u64) -> usize {
    usize::try_from(u64::from(batch.count) * stride).expect("a buffer the host can address")
}

/// Why no kernel of `candidates` computes `problem`: each refusal with the count of kernels
/// it refuses (or their names, for one or two), first seen first. The kernels of other
/// layouts, which a set holds beside the problem's, are left out: they say nothing about it.
fn no_kernel_reason(candidates: &[Candidate], problem: &Problem) -> String {
    let mut reasons: Vec<(String, Vec<&str>)> = Vec::new();
    for candidate in candidates {
        let why = match candidate.refusal(problem) {
            None | Some(Refusal::Layout(_)) => continue,
            Some(refusal) => refusal.to_string(),
        };
        match reasons.iter_mut().find(|(reason, _)| *reason == why) {
            Some((_, kernels)) => kernels.push(&candidate.name),
            None => reasons.push((why, vec![&candidate.name])),
        }
    }
    if reasons.is_empty() {
        return "no kernel of this layout".to_string();
    }
    reasons
        .iter()
        .map(|(why, kernels)| match kernels.len() {
            1 | 2 => format!("{why}: `{}`", kernels.join("`, `")),
            count => format!("{why}: {count} kernels"),
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// The model's view of a kernel, from the spec its description carries: to ask whether it
/// admits a problem before launching it.
fn candidate_of(info: &KernelInfo<'_>) -> Result<Candidate, Error> {
    let valid = gemm_dsl::check_str(info.spec()).map_err(|errors| Error::Baseline {
        action: format!("reading the spec of `{}`", info.name()),
        reason: errors.render(info.spec(), info.name()),
    })?;
    Ok(Candidate::of(&valid, *info.launch()))
}

/// The kernel that runs a problem, or why none does (a set with no member that admits it,
/// a spec's kernel that refuses it).
type KernelOrWhy = Result<String, String>;

impl FusedRunners<'_> {
    /// The fused and the plain kernel for `problem`, each or why there is none.
    fn kernels(&self, problem: &Problem) -> Result<(KernelOrWhy, KernelOrWhy), Error> {
        let own = |kernel: &GemmKernel<bf16, bf16>| -> Result<KernelOrWhy, Error> {
            let candidate = candidate_of(kernel.info())?;
            Ok(match candidate.refuses(problem) {
                None => Ok(candidate.name),
                Some(why) => Err(format!("`{}` refuses it: {why}", candidate.name)),
            })
        };
        let pick = |matmul: &Matmul<bf16, bf16>| -> Result<KernelOrWhy, Error> {
            match matmul.pick(problem) {
                Ok(picked) => Ok(Ok(picked.kernel.to_string())),
                Err(gemm_runtime::Error::NoKernelFor { .. }) => {
                    Ok(Err(no_kernel_reason(matmul.picker().candidates(), problem)))
                }
                Err(error) => Err(error.into()),
            }
        };
        Ok(match self {
            FusedRunners::Kernels { fused, plain } => (own(fused)?, own(plain)?),
            FusedRunners::EntryPoint { fused, plain } => (pick(fused)?, pick(plain)?),
        })
    }

    /// `D = epilogue(A·B)` for the packed row-major `problem` (every product of a batch).
    fn run_fused(
        &self,
        stream: &Arc<CudaStream>,
        (a, b): (&CudaSlice<bf16>, &CudaSlice<bf16>),
        d: &mut CudaSlice<bf16>,
        problem: &Problem,
        epilogue: &mut Epilogue<'_, bf16>,
    ) -> Result<(), Error> {
        let (m, n, k) = (problem.m, problem.n, problem.k);
        match self {
            FusedRunners::Kernels { fused, .. } => {
                let launch = fused.info().launch();
                let lds = LeadingDims::packed(launch, m, n, k);
                let batch = Batch::packed(launch, problem.batch, (m, n, k), lds);
                fused.launch_fused(stream, a, b, d, m, n, k, lds, batch, epilogue)?;
            }
            FusedRunners::EntryPoint { fused, .. } => {
                fused.run_fused(stream, a, b, d, problem, epilogue)?;
            }
        }
        Ok(())
    }

    /// `D = A·B` for the packed row-major `problem`.
    fn run_plain(
        &self,
        stream: &Arc<CudaStream>,
        (a, b): (&CudaSlice<bf16>, &CudaSlice<bf16>),
        d: &mut CudaSlice<bf16>,
        problem: &Problem,
    ) -> Result<(), Error> {
        let (m, n, k) = (problem.m, problem.n, problem.k);
        match self {
            FusedRunners::Kernels { plain, .. } => {
                let launch = plain.info().launch();
                let lds = LeadingDims::packed(launch, m, n, k);
                let batch = Batch::packed(launch, problem.batch, (m, n, k), lds);
                plain.launch_strided_batched(stream, a, b, d, m, n, k, lds, batch)?;
            }
            FusedRunners::EntryPoint { plain, .. } => plain.run(stream, a, b, d, problem)?,
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
/// `D = act(α·D + β·C + bias)` in place (C-in is a copy of the C the fused run reads in place
/// from D: the same values and the same traffic), and the value before the
/// activation into `aux` where that is not null. D, C-in and aux are one packed buffer each
/// over the whole batch (`elements` = batch·M·N), so a thread's 8 elements may straddle rows
/// and products; it loads them as one 16-byte vector (the buffers start allocation-aligned),
/// and the last thread, short of 8, element by element: any N. The bias is one vector shared
/// by every product: column `at % N`, row `(at / N) % M`.
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
// One element at (row, col) of its product: the activated value, the pre-activation in *pre.
__device__ unsigned short epilogue_at(unsigned short d, unsigned short c, int has_c,
        const unsigned short* bias, unsigned int row, unsigned int col, float alpha,
        float beta, int bias_along, int act, unsigned short* pre) {
    float x = alpha * from_bf16(d);
    if (has_c) x += beta * from_bf16(c);
    if (bias_along == 1) x += from_bf16(bias[row]);
    if (bias_along == 2) x += from_bf16(bias[col]);
    *pre = to_bf16(x);
    return to_bf16(activate(x, act));
}
extern "C" __global__ void epilogue_bf16(unsigned short* d, const unsigned short* c_in,
        const unsigned short* bias, unsigned short* aux, unsigned long long elements,
        unsigned int m, unsigned int n, float alpha, float beta, int bias_along, int act) {
    unsigned long long first = ((unsigned long long)blockIdx.x * blockDim.x + threadIdx.x) * 8;
    if (first >= elements) return;
    unsigned int col = (unsigned int)(first % n);
    unsigned int row = (unsigned int)((first / n) % m);
    int has_c = c_in != 0;
    if (first + 8 <= elements) {
        unsigned long long v = first / 8;
        uint4 packed = ((uint4*)d)[v];
        uint4 c = has_c ? ((const uint4*)c_in)[v] : make_uint4(0, 0, 0, 0);
        uint4 pre;
        unsigned short* h = (unsigned short*)&packed;
        unsigned short* ch = (unsigned short*)&c;
        unsigned short* pre_h = (unsigned short*)&pre;
        for (int i = 0; i < 8; ++i) {
            h[i] = epilogue_at(h[i], ch[i], has_c, bias, row, col, alpha, beta, bias_along, act,
                               &pre_h[i]);
            if (++col == n) { col = 0; if (++row == m) row = 0; }
        }
        ((uint4*)d)[v] = packed;
        if (aux) ((uint4*)aux)[v] = pre;
        return;
    }
    for (unsigned long long at = first; at < elements; ++at) {
        unsigned short pre;
        d[at] = epilogue_at(d[at], has_c ? c_in[at] : 0, has_c, bias, row, col, alpha, beta,
                            bias_along, act, &pre);
        if (aux) aux[at] = pre;
        if (++col == n) { col = 0; if (++row == m) row = 0; }
    }
}
"#;

/// Threads per block of the elementwise epilogue.
const ELEMENTWISE_THREADS: u32 = 256;

/// The elementwise epilogue's blocks for `elements` values of D: a thread per 8, the last
/// thread's short of 8 included.
fn elementwise_blocks(elements: u64) -> u32 {
    let threads = elements.div_ceil(8);
    u32::try_from(threads.div_ceil(u64::from(ELEMENTWISE_THREADS)))
        .expect("shape_refusal keeps the elementwise grid within CUDA's")
}

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

/// cuBLASLt's epilogue for the spec, or why it has none: a column bias of the output type
/// (its `BIAS` runs along our columns, cuBLAS's rows) and ReLU or the tanh GELU; with the
/// pre-activation stored, only the biased GELU (cuBLASLt's `RELU_AUX` stores a bit mask, not
/// the value).
fn cublaslt_epilogue(fused: &FusedSpec) -> Result<LtEpilogue, String> {
    let col_bias = match fused.bias {
        Bias::None => false,
        Bias::Vector {
            along: BiasAlong::Row,
            ..
        } => {
            return Err(
                "its BIAS adds a value per column of D (`bias: col`), not per row".to_string(),
            )
        }
        Bias::Vector { dtype, .. } if dtype != DType::Bf16 => {
            return Err(format!(
                "cudarc's cuBLASLt epilogue reads a bias of D's type (bf16), not {}",
                dtype.name()
            ))
        }
        Bias::Vector { .. } => true,
    };
    if fused.aux == Aux::PreActivation {
        return if col_bias && fused.activation == Activation::Gelu {
            Ok(LtEpilogue::GeluAuxBias)
        } else {
            Err(
                "with the pre-activation stored, only GELU_AUX_BIAS (a column bias and the \
                 tanh GELU) is timed: RELU_AUX stores a bit mask"
                    .to_string(),
            )
        };
    }
    let activation = match fused.activation {
        Activation::None => None,
        Activation::Relu => Some(cudarc::cublaslt::Activation::Relu),
        Activation::Gelu => Some(cudarc::cublaslt::Activation::Gelu),
        Activation::GeluErf => return Err("its GELU is the tanh form, not erf".to_string()),
        Activation::Silu => return Err("it has no SiLU epilogue".to_string()),
    };
    Ok(LtEpilogue::Safe(activation))
}

/// cuBLASLt's configuration of the packed row-major `shape`. cuBLAS is column-major: D^T =
/// B^T·A^T, so its m is our N, its rows our columns, its A our B. A batch's matrices lie
/// back to back (its A's stride is our B's) and every product adds the same bias (stride 0).
fn lt_config(shape: Shape, (alpha, beta): (f32, f32)) -> MatmulConfig {
    let (m, n, k) = (shape.m, shape.n, shape.k);
    let batch = row_major_batch(shape);
    let batched = shape.batch > 1;
    let stride = |elements: u64| {
        batched.then(|| i64::try_from(elements).expect("two u32 sizes' product fits i64"))
    };
    MatmulConfig {
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
        stride_a: stride(batch.stride_b),
        stride_b: stride(batch.stride_a),
        stride_c: stride(batch.stride_c),
        stride_bias: batched.then_some(0),
        batch_size: batched
            .then(|| i32::try_from(shape.batch).expect("shape_refusal keeps the batch in i32")),
    }
}

/// The fused kernel's launch arguments: α, β with C-in read in place, the bias (of the output
/// type, or `bias_wide` for an f32 bias; one vector for every product of a batch), and the
/// pre-activation written to `aux`.
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

/// The largest ‖ours − theirs‖_F / ‖theirs‖_F over the `products` matrices the two buffers
/// hold back to back: one wrong product of a batch shows whole, not diluted by the others.
/// NaN where any product's is.
fn worst_product_rel_diff(ours: &[bf16], theirs: &[bf16], products: usize) -> f64 {
    let matrix = theirs.len() / products.max(1);
    ours.chunks(matrix.max(1))
        .zip(theirs.chunks(matrix.max(1)))
        .map(|(ours, theirs)| {
            let (mut diff, mut norm) = (0.0f64, 0.0f64);
            for (x, y) in ours.iter().zip(theirs) {
                let (x, y) = (x.to_f64(), y.to_f64());
                diff += (x - y) * (x - y);
                norm += y * y;
            }
            (diff / norm).sqrt()
        })
        .fold(0.0, |worst: f64, product| {
            if worst.is_nan() || product.is_nan() {
                f64::NAN
            } else {
                worst.max(product)
            }
        })
}

/// [`worst_product_rel_diff`] of two device buffers of `products` matrices each: ours and
/// the baseline's.
pub(crate) fn rel_diff(
    stream: &Arc<CudaStream>,
    (ours, theirs): (&CudaSlice<bf16>, &CudaSlice<bf16>),
    products: u32,
    what: &str,
) -> Result<f64, Error> {
    let ours = stream
        .clone_dtoh(ours)
        .during(|| format!("reading {what} back"))?;
    let theirs = stream
        .clone_dtoh(theirs)
        .during(|| format!("reading the baseline's {what} back"))?;
    Ok(worst_product_rel_diff(&ours, &theirs, products as usize))
}

/// `len` standard normal values from `rng`, rounded to bf16, on the device (`what` names them
/// in an error).
pub(crate) fn upload(
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

/// Times `spec` (bf16, layout rr) on `shape` against the plain kernel, the unfused pair,
/// cuBLASLt and cuBLAS; `balanced_grid` launches the fused and the plain kernel on a balanced
/// persistent grid (`GemmKernel::balance_grid`).
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

/// Why `--fused` cannot time `shape` at all, if it cannot: an empty product, or one past
/// what every competitor is timed through. cuBLAS and cuBLASLt take their sizes, batch
/// count and strides as C `int`s and `int64`s, and the elementwise kernel's grid holds at
/// most 2^31 − 1 blocks of 2048 elements. Competitors that cannot run a shape inside these
/// bounds (no kernel of ours admits it, cuBLASLt finds no algorithm) do not stop it: its row
/// says which did not run ([`FusedRow::not_run`]).
pub fn shape_refusal(shape: Shape) -> Option<String> {
    let dims = [shape.batch, shape.m, shape.n, shape.k];
    if dims.contains(&0) {
        return Some("an empty product (a size of 0): nothing to time".to_string());
    }
    let int_max = i32::MAX as u32;
    if dims.iter().any(|&size| size > int_max) {
        return Some(format!(
            "a size above {int_max}: cuBLAS and cuBLASLt take sizes and batch counts as C ints"
        ));
    }
    let elements = u64::from(shape.batch) * u64::from(shape.m) * u64::from(shape.n);
    let grid_elements = u64::from(i32::MAX as u32) * u64::from(ELEMENTWISE_THREADS) * 8;
    if elements > grid_elements {
        return Some(format!(
            "{elements} elements of D: the elementwise epilogue's grid covers at most {grid_elements}"
        ));
    }
    None
}

/// cuBLASLt refusing to plan a shape (no algorithm for it, aux's leading dimension): the
/// shape's, recorded in `not_run`, and no cuBLASLt baseline for it. Any other error (no
/// library) stops the run.
fn lt_refused<T>(error: Error, not_run: &mut Vec<String>) -> Result<Option<T>, Error> {
    match error {
        Error::Baseline { action, reason } => {
            not_run.push(format!("cuBLASLt: {action} failed: {reason}"));
            Ok(None)
        }
        error => Err(error),
    }
}

/// Whether cudarc's cuBLASLt matmul failed because its heuristic found no algorithm
/// (`CUBLAS_STATUS_NOT_SUPPORTED`, which the error's text carries).
fn no_algorithm_found(error: &Error) -> bool {
    matches!(error, Error::Baseline { reason, .. } if reason.contains("CUBLAS_STATUS_NOT_SUPPORTED"))
}

/// One of the timed competitors of a shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Competitor {
    Fused,
    Plain,
    Unfused,
    Cublas,
    Cublaslt,
}

/// Times the fused product of `spec`'s epilogue (bf16, layout rr) on `shape` (a strided
/// batch too) as `runners` compute it, against their plain product, the plain product
/// followed by the elementwise epilogue, cuBLASLt with the same epilogue and cuBLAS. Only
/// `spec`'s epilogue keys count when `runners` is the entry point over a set. Where ours or
/// cuBLASLt cannot compute the shape, the others are timed and the row says why
/// ([`FusedRow::not_run`]).
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
    let problem = row_major(shape);
    let batch = row_major_batch(shape);
    let fused_spec = FusedSpec::of_spec(spec);
    let (fused_kernel, plain_kernel) = runners.kernels(&problem)?;
    let mut not_run = Vec::new();
    if let Err(why) = &fused_kernel {
        not_run.push(format!("ours: no fused kernel ({why})"));
    }
    if let Err(why) = &plain_kernel {
        not_run.push(format!("ours plain: no kernel ({why})"));
        not_run.push("plain + elementwise: no plain kernel of ours".to_string());
    }
    // Batch 1 keeps the seed single products always had.
    let mut rng = NormalRng::new(
        0xF05E_D000 ^ u64::from(m) ^ (u64::from(n) << 20) ^ (u64::from(shape.batch - 1) << 40),
    );
    let a = upload(stream, batch_len(&batch, batch.stride_a), &mut rng, "A")?;
    let b = upload(stream, batch_len(&batch, batch.stride_b), &mut rng, "B")?;
    // One vector for the whole batch.
    let bias_len = match spec.bias.vector() {
        Some((BiasAlong::Row, _)) => m,
        _ => n,
    };
    let bias = upload(stream, bias_len as usize, &mut rng, "the bias")?;
    let bias_wide = stream
        .clone_htod(&vec![0.5f32; bias_len as usize])
        .during(|| "copying the f32 bias".to_string())?;
    let elements = u64::from(shape.batch) * batch.stride_c;
    let c_start = upload(stream, batch_len(&batch, batch.stride_c), &mut rng, "C")?;
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
        Err(why) => {
            not_run.push(format!("cuBLASLt: no matching epilogue ({why})"));
            None
        }
        Ok(LtEpilogue::Safe(activation)) => Some(LtBaseline::Safe(
            CudaBlasLT::new(stream.clone()).map_err(lt_error)?,
            activation,
        )),
        Ok(LtEpilogue::GeluAuxBias) => match LtGeluAuxBias::new(stream, shape.batch, m, n, k) {
            Ok(lt) => Some(LtBaseline::GeluAuxBias(lt)),
            Err(error) => lt_refused(error, &mut not_run)?,
        },
    };
    let config = lt_config(shape, (alpha, beta));
    let blas = Cublas::new(stream)?;
    let blas_gemm = CublasGemm::baseline(
        gemm_runtime::KernelTypes::new(DType::Bf16, DType::Bf16).expect("bf16 kernels"),
    )
    .expect("cuBLAS multiplies bf16");
    let elementwise = elementwise_kernel(ctx)?;
    let elementwise_config = LaunchConfig {
        grid_dim: (elementwise_blocks(elements), 1, 1),
        block_dim: (ELEMENTWISE_THREADS, 1, 1),
        shared_mem_bytes: 0,
    };
    let bias_along = match spec.bias.vector() {
        None => 0i32,
        Some((BiasAlong::Row, _)) => 1,
        Some((BiasAlong::Col, _)) => 2,
    };
    let act = act_code(spec.activation);
    let run_lt = |lt: &LtBaseline,
                  d: &mut CudaSlice<bf16>,
                  aux: &mut CudaSlice<bf16>|
     -> Result<(), Error> {
        match lt {
            LtBaseline::Safe(lt, activation) => {
                let bias = spec.bias.vector().map(|_| &bias);
                // SAFETY: the buffers hold the packed batch the configuration describes (A k x
                // n and B m x k in cuBLAS's column-major terms, a product's matrices one
                // stride after the last's), the bias N elements, shared by every product.
                unsafe { lt.matmul(config, &b, &a, d, bias, activation.as_ref()) }.map_err(
                    |source| Error::Baseline {
                        action: "cuBLASLt matmul with an epilogue".to_string(),
                        reason: format!("{source:?}"),
                    },
                )
            }
            LtBaseline::GeluAuxBias(lt) => lt.run(&a, &b, &bias, (alpha, beta), d, aux),
        }
    };

    // Correct first: the fused D (and aux) against cuBLASLt's, from the same C.
    let mut aux_fused = c_start.clone();
    let mut aux_lt = c_start.clone();
    if fused_kernel.is_ok() {
        runners.run_fused(
            stream,
            (&a, &b),
            &mut d_fused,
            &problem,
            &mut fused_epilogue(spec, alpha, beta, &bias, &bias_wide, &mut aux_fused),
        )?;
    }
    let lt = match lt {
        Some(baseline) => match run_lt(&baseline, &mut d_lt, &mut aux_lt) {
            Ok(()) => Some(baseline),
            // cudarc's safe API plans at its first call: its heuristic finding no algorithm
            // for the shape is cuBLASLt's refusal; any other failure (a launch, a buffer
            // check) stops the run.
            Err(error)
                if matches!(baseline, LtBaseline::Safe(..)) && no_algorithm_found(&error) =>
            {
                lt_refused(error, &mut not_run)?
            }
            Err(error) => return Err(error),
        },
        None => None,
    };
    let (rel_diff, aux_rel_diff) = match (&lt, fused_kernel.is_ok()) {
        (Some(baseline), true) => {
            let aux_diff = match baseline {
                LtBaseline::GeluAuxBias(_) => Some(rel_diff(
                    stream,
                    (&aux_fused, &aux_lt),
                    shape.batch,
                    "the pre-activation",
                )?),
                LtBaseline::Safe(..) => None,
            };
            let d_diff = rel_diff(stream, (&d_fused, &d_lt), shape.batch, "D")?;
            // Both round to bf16 once: a kernel off by more is wrong, not slow.
            let bound = Tolerance::for_types(
                DType::Bf16,
                DType::Bf16,
                u64::from(shape.m) * u64::from(shape.n),
                shape.k,
            )
            .rel_frobenius;
            for (what, diff) in [("D", Some(d_diff)), ("the pre-activation", aux_diff)] {
                if let Some(diff) = diff.filter(|diff| diff.is_nan() || *diff > bound) {
                    return Err(Error::Baseline {
                        action: format!("checking the fused kernel on {shape} against cuBLASLt"),
                        reason: format!(
                            "{what}: ‖ours − cuBLASLt‖/‖cuBLASLt‖ = {diff:.2e} (bound {bound:.1e}), in the worst product"
                        ),
                    });
                }
            }
            (Some(d_diff), aux_diff)
        }
        _ => (None, None),
    };
    let mut epilogue = fused_epilogue(spec, alpha, beta, &bias, &bias_wide, &mut aux_fused);

    let alpha_arg = alpha;
    let beta_arg = beta;
    let c_in_ptr: Option<&CudaSlice<bf16>> = spec.scale.reads_c().then_some(&c_in_copy);
    let mut fused_launch =
        |_: usize| runners.run_fused(stream, (&a, &b), &mut d_fused, &problem, &mut epilogue);
    let mut plain_launch = |_: usize| runners.run_plain(stream, (&a, &b), &mut d_plain, &problem);
    let mut d_unfused = c_start.clone();
    // The unfused pair stores the pre-activation too where the fused kernel does.
    let mut aux_unfused = (spec.aux != Aux::None).then(|| c_start.clone());
    let mut unfused_launch = |_: usize| -> Result<(), Error> {
        runners.run_plain(stream, (&a, &b), &mut d_unfused, &problem)?;
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
        builder.arg(&elements);
        builder.arg(&m);
        builder.arg(&n);
        builder.arg(&alpha_arg);
        builder.arg(&beta_arg);
        builder.arg(&bias_along);
        builder.arg(&act);
        // SAFETY: the kernel reads and writes the `elements` bf16 of D, C-in and aux (each
        // batch·m·n, packed, allocation-aligned for its 16-byte vectors; C-in and aux may be
        // null) and reads the bias at indices below M or N, its length.
        unsafe { builder.launch(elementwise_config) }
            .map(|_| ())
            .during(|| "launching the elementwise epilogue".to_string())
    };
    let mut lt_launch = |_: usize| match &lt {
        Some(baseline) => run_lt(baseline, &mut d_lt, &mut aux_lt),
        None => Ok(()),
    };
    let mut blas_launch = |_: usize| {
        if shape.batch == 1 {
            blas.gemm(blas_gemm, &a, &b, &mut d_blas, m, n, k)
        } else {
            let lds = LeadingDims {
                lda: k,
                ldb: n,
                ldc: n,
            };
            blas.gemm_strided_batched(blas_gemm, &a, &b, &mut d_blas, (m, n, k), lds, batch)
        }
    };
    let mut competitors: Vec<(Competitor, &mut Launcher<'_>)> = Vec::new();
    if fused_kernel.is_ok() {
        competitors.push((Competitor::Fused, &mut fused_launch));
    }
    if plain_kernel.is_ok() {
        competitors.push((Competitor::Plain, &mut plain_launch));
        competitors.push((Competitor::Unfused, &mut unfused_launch));
    }
    competitors.push((Competitor::Cublas, &mut blas_launch));
    if lt.is_some() {
        competitors.push((Competitor::Cublaslt, &mut lt_launch));
    }
    let (timed, mut launchers): (Vec<Competitor>, Vec<&mut Launcher<'_>>) =
        competitors.into_iter().unzip();
    let times = time_round_robin(stream, rounds, &mut launchers)?;
    let ms = |competitor: Competitor| {
        let index = timed.iter().position(|&one| one == competitor)?;
        Some(median(&times[index]).unwrap_or(f64::NAN))
    };
    let fused_ms = ms(Competitor::Fused);
    Ok(FusedRow {
        shape: shape.to_string(),
        fused_ms,
        plain_ms: ms(Competitor::Plain),
        unfused_ms: ms(Competitor::Unfused),
        cublas_ms: ms(Competitor::Cublas).expect("cuBLAS is timed on every shape"),
        cublaslt_ms: ms(Competitor::Cublaslt),
        rel_diff_to_cublaslt: rel_diff,
        aux_rel_diff_to_cublaslt: aux_rel_diff,
        fused_tflops: fused_ms.map(|ms| tflops(shape, ms)),
        fused_kernel: fused_kernel.unwrap_or_default(),
        plain_kernel: plain_kernel.unwrap_or_default(),
        not_run,
    })
}

/// `numerator / denominator` to three places, or `—` where either did not run.
fn ratio(numerator: Option<f64>, denominator: Option<f64>) -> String {
    match (numerator, denominator) {
        (Some(x), Some(y)) => format!("{:.3}", x / y),
        _ => "—".to_string(),
    }
}

/// The markdown table of a run; with the kernels that ran where they are the entry point's
/// picks rather than the spec's own kernel, and a column of the competitors that did not run
/// a shape, and why, where some did not.
pub fn fused_table(spec: &GemmSpec, rows: &[FusedRow]) -> String {
    let picks = rows
        .iter()
        .any(|row| !row.fused_kernel.is_empty() && row.fused_kernel != spec.name);
    let (pick_header, pick_rule) = if picks {
        (" fused pick (plain pick) |", "---|")
    } else {
        ("", "")
    };
    let not_run = rows.iter().any(|row| !row.not_run.is_empty());
    let (not_run_header, not_run_rule) = if not_run {
        (" not run |", "---|")
    } else {
        ("", "")
    };
    let mut out = format!(
        "spec: `{}`\n\nSpeeds are time ratios: above 1, the fused kernel is faster; its cost is its time over the plain kernel's. Batches share one bias vector; ‖D − D_Lt‖/‖D_Lt‖ is the worst of their products.\n\n| shape |{pick_header} fused TFLOP/s | speed vs cuBLASLt (same epilogue) | cost vs plain kernel | speed vs plain + elementwise | speed vs cuBLAS plain | ‖D − D_Lt‖/‖D_Lt‖ |{not_run_header}\n|---|{pick_rule}---:|---:|---:|---:|---:|---:|{not_run_rule}\n",
        spec.to_spec_text()
    );
    let kernel = |name: &str| match name {
        "" => "—".to_string(),
        name => format!("`{name}`"),
    };
    for row in rows {
        let diff = match (row.rel_diff_to_cublaslt, row.aux_rel_diff_to_cublaslt) {
            (None, _) => "—".to_string(),
            (Some(d), None) => format!("{d:.1e}"),
            (Some(d), Some(aux)) => format!("{d:.1e} (aux {aux:.1e})"),
        };
        let kernels = if picks {
            format!(
                " {} ({}) |",
                kernel(&row.fused_kernel),
                kernel(&row.plain_kernel)
            )
        } else {
            String::new()
        };
        let reasons = if not_run {
            format!(" {} |", row.not_run.join("; "))
        } else {
            String::new()
        };
        out.push_str(&format!(
            "| {} |{kernels} {} | {} | {} | {} | {} | {diff} |{reasons}\n",
            row.shape,
            row.fused_tflops
                .map_or("—".to_string(), |tflops| format!("{tflops:.1}")),
            ratio(row.cublaslt_ms, row.fused_ms),
            ratio(row.fused_ms, row.plain_ms),
            ratio(row.unfused_ms, row.fused_ms),
            ratio(Some(row.cublas_ms), row.fused_ms),
        ));
    }
    if let Some(geomean) = geomean_vs_cublaslt(rows) {
        out.push_str(&format!(
            "\nAgainst cuBLASLt with the same epilogue: geomean {:.3}, worst {:.3} ({} shapes).\n",
            geomean.0, geomean.1, geomean.2
        ));
    }
    let without_ours: Vec<&str> = rows
        .iter()
        .filter(|row| row.fused_ms.is_none())
        .map(|row| row.shape.as_str())
        .collect();
    if !without_ours.is_empty() {
        out.push_str(&format!(
            "\nNo fused kernel of ours (not counted): {}.\n",
            without_ours.join(", ")
        ));
    }
    out
}

/// Geomean and worst of cuBLASLt's time over the fused one, and the shapes counted (those
/// both computed).
fn geomean_vs_cublaslt(rows: &[FusedRow]) -> Option<(f64, f64, usize)> {
    let ratios: Vec<f64> = rows
        .iter()
        .filter_map(|row| Some(row.cublaslt_ms? / row.fused_ms?))
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
        let is_safe = |e: Result<LtEpilogue, String>| matches!(e, Ok(LtEpilogue::Safe(_)));
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
            Ok(LtEpilogue::GeluAuxBias)
        ));
        // cuBLASLt's RELU_AUX stores a bit mask, GELU_AUX without a bias is not timed, and
        // a row bias or SiLU has no cuBLASLt epilogue: each says so.
        for (bias, activation, aux, why) in [
            (col, Activation::Relu, Aux::PreActivation, "bit mask"),
            (
                Bias::None,
                Activation::Gelu,
                Aux::PreActivation,
                "GELU_AUX_BIAS",
            ),
            (row, Activation::Gelu, Aux::None, "not per row"),
            (col, Activation::Silu, Aux::None, "SiLU"),
            (col, Activation::GeluErf, Aux::None, "erf"),
        ] {
            match cublaslt_epilogue(&fused(bias, activation, aux)) {
                Err(reason) => assert!(reason.contains(why), "{reason}"),
                Ok(_) => panic!("{bias:?} {activation:?} {aux:?}"),
            }
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
    fn every_problem_of_the_models_list_is_timed() {
        // Batches and an N or K no multiple of 8 included: 32x512x512x128, 777x4099x2048, ...
        let list = include_str!("../../../shapes/models.txt");
        let shapes: Vec<Shape> = list
            .lines()
            .map(|line| line.split('#').next().unwrap().trim())
            .filter(|line| !line.is_empty())
            .map(|line| line.parse().unwrap())
            .collect();
        for odd in ["32x512x512x128", "16x1024x1024x1024", "4x4096x4096x512"]
            .into_iter()
            .chain(["777x4099x2048", "3000x5000x1234", "2047x4104x777"])
        {
            assert!(shapes.iter().any(|shape| shape.to_string() == odd), "{odd}");
        }
        for shape in shapes {
            assert_eq!(shape_refusal(shape), None, "{shape}");
        }
    }

    #[test]
    fn only_shapes_past_every_competitors_bounds_are_refused() {
        let shape = |batch, m, n, k| Shape { m, n, k, batch };
        assert_eq!(shape_refusal(shape(1, 777, 4099, 2048)), None);
        assert_eq!(shape_refusal(shape(65_536, 16, 16, 16)), None);
        let refusal = |shape| shape_refusal(shape).unwrap_or_default();
        assert!(refusal(shape(0, 16, 16, 16)).contains("empty"));
        assert!(refusal(shape(1, 16, 0, 16)).contains("empty"));
        assert!(refusal(shape(1, 16, 16, 1 << 31)).contains("C ints"));
        // 2^31 − 1 blocks of 2048 elements: about 4.4e12 elements of D.
        assert!(refusal(shape(1 << 12, 1 << 15, 1 << 15, 8)).contains("grid"));
        assert_eq!(shape_refusal(shape(1 << 11, 1 << 15, 1 << 15, 8)), None);
    }

    #[test]
    fn a_batch_lies_back_to_back_as_the_kernels_read_it() {
        let batch = row_major_batch(Shape::batched(32, 512, 256, 128));
        assert_eq!(
            batch,
            Batch {
                count: 32,
                stride_a: 512 * 128,
                stride_b: 128 * 256,
                stride_c: 512 * 256,
            }
        );
        assert_eq!(batch_len(&batch, batch.stride_c), 32 * 512 * 256);
        // Packed rows of any length: no padding where N or K is no multiple of 8.
        let odd = row_major_batch(Shape::new(777, 4099, 2048));
        assert_eq!(
            (odd.count, odd.stride_a, odd.stride_b, odd.stride_c),
            (1, 777 * 2048, 2048 * 4099, 777 * 4099)
        );
        // The runtime's packed batch of an rr kernel (what `Matmul::run_fused` launches) is
        // the one cuBLAS and cuBLASLt are given.
        let valid = gemm_dsl::check_str(
            "name: k, arch: sm_90a, dtype: bf16, tile: 128x128x64, stages: 4, swizzle: 128B, \
             copy: tma, mma: wgmma, bias: col, activation: gelu",
        )
        .unwrap();
        let launch = gemm_codegen::emit::launch_of(&valid);
        for (count, m, n, k) in [
            (32, 512, 256, 128),
            (4, 4096, 4096, 512),
            (1, 777, 4099, 2048),
        ] {
            let lds = LeadingDims::packed(&launch, m, n, k);
            assert_eq!(
                Batch::packed(&launch, count, (m, n, k), lds),
                row_major_batch(Shape::batched(count, m, n, k))
            );
        }
    }

    #[test]
    fn cublaslt_multiplies_the_transposed_batch_with_one_bias() {
        let single = lt_config(Shape::new(100, 200, 40), (1.25, 0.5));
        assert_eq!(
            (single.m, single.n, single.k, single.lda, single.ldb, single.ldc),
            (200, 100, 40, 200, 40, 200)
        );
        assert_eq!((single.alpha, single.beta), (1.25, 0.5));
        assert_eq!(
            (
                single.batch_size,
                single.stride_a,
                single.stride_b,
                single.stride_c,
                single.stride_bias
            ),
            (None, None, None, None, None)
        );
        // cuBLASLt's A is our B: its stride is K·N.
        let batched = lt_config(Shape::batched(3, 100, 200, 40), (1.0, 0.0));
        assert_eq!(
            (
                batched.batch_size,
                batched.stride_a,
                batched.stride_b,
                batched.stride_c,
                batched.stride_bias
            ),
            (
                Some(3),
                Some(40 * 200),
                Some(100 * 40),
                Some(100 * 200),
                Some(0)
            )
        );
        assert_eq!((batched.m, batched.n, batched.ldc), (200, 100, 200));
    }

    #[test]
    fn the_elementwise_grid_covers_every_element_once() {
        for elements in [1u64, 7, 8, 9, 2048, 2049, 777 * 4099, 32 * 512 * 512] {
            let blocks = u64::from(elementwise_blocks(elements));
            let per_block = u64::from(ELEMENTWISE_THREADS) * 8;
            assert!(blocks * per_block >= elements, "{elements}");
            assert!((blocks - 1) * per_block < elements, "{elements}");
        }
        assert_eq!(elementwise_blocks(777 * 4099), 1556);
    }

    #[test]
    fn the_check_takes_the_worst_product_of_a_batch() {
        let values = |xs: &[f32]| xs.iter().map(|&x| bf16::from_f32(x)).collect::<Vec<_>>();
        let theirs = values(&[2.0, 2.0, 1.0, 1.0]);
        // The second product is 10% off, the first exact: the whole buffer would say 4.5%.
        let ours = values(&[2.0, 2.0, 1.1, 1.1]);
        let worst = worst_product_rel_diff(&ours, &theirs, 2);
        assert!((worst - 0.1).abs() < 1e-2, "{worst}");
        let whole = worst_product_rel_diff(&ours, &theirs, 1);
        assert!(whole < 0.05, "{whole}");
        assert_eq!(worst_product_rel_diff(&theirs, &theirs, 2), 0.0);
        let nan = values(&[f32::NAN, 1.0, 2.0, 2.0]);
        assert!(worst_product_rel_diff(&nan, &theirs, 2).is_nan());
    }

    #[test]
    fn no_kernel_says_what_refuses_the_problem_in_its_layout() {
        let candidate = |name: &str, layout: &str| {
            let valid = gemm_dsl::check_str(&format!(
                "name: {name}, arch: sm_90a, dtype: bf16, layout: {layout}, tile: 128x128x64, \
                 stages: 4, swizzle: 128B, copy: tma, mma: wgmma"
            ))
            .unwrap();
            Candidate::of(&valid, gemm_codegen::emit::launch_of(&valid))
        };
        let problem = row_major(Shape::new(777, 4099, 2048));
        let two = [
            candidate("a", "rr"),
            candidate("b", "rr"),
            candidate("c", "rc"),
        ];
        let why = no_kernel_reason(&two, &problem);
        assert!(why.contains("4099 x 2 B"), "{why}");
        assert!(why.contains("16-byte"), "{why}");
        assert!(why.ends_with("`a`, `b`"), "{why}");
        assert!(!why.contains("layout"), "{why}");
        let three = [
            candidate("a", "rr"),
            candidate("b", "rr"),
            candidate("d", "rr"),
        ];
        assert!(no_kernel_reason(&three, &problem).ends_with(": 3 kernels"));
        assert_eq!(
            no_kernel_reason(&[candidate("c", "rc")], &problem),
            "no kernel of this layout"
        );
    }

    #[test]
    fn a_specs_own_kernel_is_asked_before_it_launches() {
        // What `--fused SPEC` without a set checks: a TMA kernel's 16-byte rows refuse an odd
        // N, and take a batch.
        let emitted = gemm_codegen::emit_str(
            "name: own, arch: sm_90a, dtype: bf16, tile: 128x128x64, stages: 4, swizzle: 128B, \
             copy: tma, mma: wgmma, bias: col, activation: gelu",
        )
        .unwrap();
        let candidate = candidate_of(&emitted.info()).unwrap();
        assert_eq!(candidate.name, "own");
        let why = candidate
            .refuses(&row_major(Shape::new(777, 4099, 2048)))
            .unwrap();
        assert!(why.contains("4099 x 2 B"), "{why}");
        assert_eq!(
            candidate.refuses(&row_major(Shape::batched(32, 512, 512, 128))),
            None
        );
    }

    fn row(shape: &str, fused_kernel: &str, lt_ms: Option<f64>) -> FusedRow {
        FusedRow {
            shape: shape.to_string(),
            fused_ms: Some(1.0),
            plain_ms: Some(0.9),
            unfused_ms: Some(1.2),
            cublaslt_ms: lt_ms,
            cublas_ms: 1.0,
            rel_diff_to_cublaslt: lt_ms.map(|_| 1e-4),
            aux_rel_diff_to_cublaslt: None,
            fused_tflops: Some(100.0),
            fused_kernel: fused_kernel.to_string(),
            plain_kernel: "plain".to_string(),
            not_run: Vec::new(),
        }
    }

    fn ffn() -> GemmSpec {
        gemm_dsl::parse_str(
            "name: ffn, arch: sm_90a, dtype: bf16, tile: 128x256x64, stages: 4, swizzle: 128B, \
             copy: tma, mma: wgmma, bias: col, activation: gelu",
        )
        .unwrap()
        .spec
    }

    #[test]
    fn the_table_names_the_entry_points_picks_and_sums_up_against_cublaslt() {
        let spec = ffn();
        // The spec's own kernel: no picks column.
        let own = fused_table(&spec, &[row("16x16x16", "ffn", Some(1.1))]);
        assert!(!own.contains("fused pick"));
        assert!(!own.contains("not run"));
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

    #[test]
    fn the_table_says_who_did_not_run_a_shape_and_counts_it_nowhere() {
        let spec = ffn();
        let no_fused = FusedRow {
            fused_ms: None,
            fused_tflops: None,
            fused_kernel: String::new(),
            rel_diff_to_cublaslt: None,
            not_run: vec![
                "ours: no fused kernel (B's lines (4099 x 2 B) are not 2-byte aligned: 3 kernels)"
                    .to_string(),
            ],
            ..row("777x4099x2048", "", Some(2.0))
        };
        let no_lt = FusedRow {
            not_run: vec!["cuBLASLt: planning failed: no algorithm".to_string()],
            ..row("3000x5000x1234", "sm90_n", None)
        };
        let table = fused_table(
            &spec,
            &[row("32x512x512x128", "sm90_a", Some(1.1)), no_fused, no_lt],
        );
        assert!(table.contains(
            "| 777x4099x2048 | — (`plain`) | — | — | — | — | — | — | ours: no fused kernel (B's lines"
        ));
        assert!(table.contains(
            "| 3000x5000x1234 | `sm90_n` (`plain`) | 100.0 | — | 1.111 | 1.200 | 1.000 | — | cuBLASLt: planning failed: no algorithm |"
        ));
        // Only the shape both ran counts against cuBLASLt; the one without ours is named.
        assert!(table.contains("geomean 1.100, worst 1.100 (1 shapes)"));
        assert!(table.contains("No fused kernel of ours (not counted): 777x4099x2048."));
        for line in table.lines().filter(|line| line.starts_with('|')) {
            assert_eq!(line.matches('|').count(), 10, "{line}");
        }
    }

    #[test]
    fn rows_written_before_not_run_read_back() {
        let old = r#"{"shape": "16x16x16", "fused_ms": 1.0, "plain_ms": 0.9, "unfused_ms": 1.2,
            "cublaslt_ms": null, "cublas_ms": 1.0, "rel_diff_to_cublaslt": null,
            "fused_tflops": 100.0}"#;
        let row: FusedRow = serde_json::from_str(old).unwrap();
        assert_eq!((row.fused_ms, row.not_run.len()), (Some(1.0), 0));
        let json = serde_json::to_string(&row).unwrap();
        assert!(!json.contains("not_run"), "{json}");
    }
}
