//! Timing an fp8 kernel (`gemm-bench --fp8`) against cuBLASLt's fp8 GEMM in the same process:
//! e4m3 or e5m2 A (row-major) and B (column-major, K contiguous, cuBLASLt's "TN"), of one type
//! or a mixed pair (`b_dtype`), one f32
//! dequantization scale each in device memory, a bf16, f16 or f32 D. cuBLASLt runs twice, with
//! and without its fast accumulation (which skips its own promotion of the partial sums). All
//! on one stream, launches alternating, each timed by its own events; the median counts.
//! Before timing, D is checked: no element left poisoned, and within the fp8 tolerance of
//! cuBLASLt's D. A `quant: block` kernel (DeepSeek-V3's scales, which cuBLASLt's per-tensor
//! GEMM does not take) runs with every block's scale equal to the tensor's, so its D is
//! cuBLASLt's too: the speed of the block-scaled path beside the per-tensor baseline (the GPU
//! tests check the scales' indexing with distinct values).

use crate::baseline::fp8::{Fp8Format, LtFp8Gemm, LtScales};
use crate::bench::{median, tflops, time_round_robin, Launcher, Rounds, Shape};
use crate::error::{DriverContext, Error};
use crate::verify::{NormalRng, Tolerance};
use cudarc::driver::{CudaContext, CudaSlice, CudaStream};
use gemm_dsl::{Activation, Aux, Bias, DType, GemmSpec, Layout, Quant, Scale};
use gemm_runtime::epilogue::Epilogue;
use gemm_runtime::fp8::{E4m3, E5m2};
use gemm_runtime::Element;
use gemm_runtime::GemmKernel;
use gemm_runtime::{Batch, LeadingDims};
use half::{bf16, f16};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// One shape's times in milliseconds (medians) and how far our D is from cuBLASLt's.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Fp8Row {
    pub shape: String,
    pub ours_ms: f64,
    /// cuBLASLt, full accumulation (its partial sums promoted to f32).
    pub cublaslt_ms: f64,
    /// cuBLASLt with `CUBLASLT_MATMUL_DESC_FAST_ACCUM`.
    pub cublaslt_fast_ms: f64,
    pub ours_tflops: f64,
    /// ‖D − D_Lt‖_F / ‖D_Lt‖_F, cuBLASLt with full accumulation.
    pub rel_diff_to_cublaslt: f64,
}

impl Fp8Row {
    /// Our speed over cuBLASLt's (full accumulation): above 1, ours is faster.
    pub fn ratio(&self) -> f64 {
        self.cublaslt_ms / self.ours_ms
    }
}

/// Times `spec` (fp8, layout rc, `quant: tensor` or `block`, no epilogue but `scale: alpha`,
/// run at α = 1) on `shape`.
pub fn time_fp8(
    ctx: &Arc<CudaContext>,
    stream: &Arc<CudaStream>,
    spec: &GemmSpec,
    shape: Shape,
    rounds: &Rounds,
) -> Result<Fp8Row, Error> {
    let unsupported = |why: String| Error::Baseline {
        action: format!("timing `{}`", spec.name),
        reason: why,
    };
    // α runs at 1, as cuBLASLt's: the fused epilogue's cost with the same result.
    let plain_epilogue = spec.scale != Scale::AlphaBeta
        && spec.bias == Bias::None
        && spec.activation == Activation::None
        && spec.aux == Aux::None;
    if !spec.dtype.is_fp8()
        || spec.layout != Layout::RowCol
        || spec.quant == Quant::None
        || !plain_epilogue
    {
        return Err(unsupported(
            "--fp8 times fp8 kernels with `quant: tensor` or `block` and no other epilogue than `scale: alpha` (layout rc), as cuBLASLt's scaled fp8 GEMM"
                .to_string(),
        ));
    }
    if shape.batch != 1 {
        return Err(unsupported(format!(
            "--fp8 takes single products, not {shape}"
        )));
    }
    match (spec.dtype, spec.b_dtype) {
        (DType::E4m3, DType::E4m3) => time_out::<E4m3, E4m3>(ctx, stream, spec, shape, rounds),
        (DType::E4m3, DType::E5m2) => time_out::<E4m3, E5m2>(ctx, stream, spec, shape, rounds),
        (DType::E5m2, DType::E4m3) => time_out::<E5m2, E4m3>(ctx, stream, spec, shape, rounds),
        (DType::E5m2, DType::E5m2) => time_out::<E5m2, E5m2>(ctx, stream, spec, shape, rounds),
        (a, b) => Err(unsupported(format!(
            "no fp8 launcher for {} x {}",
            a.name(),
            b.name()
        ))),
    }
}

/// [`time_typed`] at the spec's output type.
fn time_out<In: Element, InB: Element>(
    ctx: &Arc<CudaContext>,
    stream: &Arc<CudaStream>,
    spec: &GemmSpec,
    shape: Shape,
    rounds: &Rounds,
) -> Result<Fp8Row, Error> {
    match spec.out {
        DType::Bf16 => time_typed::<In, bf16, InB>(ctx, stream, spec, shape, rounds),
        DType::F16 => time_typed::<In, f16, InB>(ctx, stream, spec, shape, rounds),
        DType::F32 => time_typed::<In, f32, InB>(ctx, stream, spec, shape, rounds),
        out => Err(Error::Baseline {
            action: format!("timing `{}`", spec.name),
            reason: format!("no fp8 launcher writes {}", out.name()),
        }),
    }
}

/// The cuBLASLt format of an fp8 element type, and its largest finite value.
pub(crate) fn format_of<E: Element>() -> (Fp8Format, f32) {
    match E::STORAGE {
        gemm_runtime::Storage::E5m2 => (Fp8Format::E5m2, E5m2::MAX.to_f32()),
        _ => (Fp8Format::E4m3, E4m3::MAX.to_f32()),
    }
}

/// `len` standard normals quantized to `In` with the per-tensor scale that maps their largest
/// magnitude to the format's largest value, and that scale.
pub(crate) fn quantized<In: Element>(
    stream: &Arc<CudaStream>,
    len: usize,
    format_max: f32,
    rng: &mut NormalRng,
    what: &str,
) -> Result<(CudaSlice<In>, CudaSlice<f32>), Error> {
    let values: Vec<f32> = (0..len).map(|_| rng.next_normal() as f32).collect();
    let scale = gemm_runtime::fp8::amax_scale(&values, format_max);
    let quantized: Vec<In> = values.iter().map(|&v| In::from_f32(v / scale)).collect();
    let data = stream
        .clone_htod(&quantized)
        .during(|| format!("copying {what} to the device"))?;
    let scale = stream
        .clone_htod(&[scale])
        .during(|| format!("copying {what}'s scale to the device"))?;
    Ok((data, scale))
}

fn time_typed<In: Element, Out: Element, InB: Element>(
    ctx: &Arc<CudaContext>,
    stream: &Arc<CudaStream>,
    spec: &GemmSpec,
    shape: Shape,
    rounds: &Rounds,
) -> Result<Fp8Row, Error> {
    let (m, n, k) = (shape.m, shape.n, shape.k);
    let (a_format, a_max) = format_of::<In>();
    let (b_format, b_max) = format_of::<InB>();
    let emitted = gemm_codegen::emit_str(&spec.to_spec_text()).map_err(|e| Error::Baseline {
        action: format!("emitting `{}`", spec.name),
        reason: e.to_string(),
    })?;
    let kernel = GemmKernel::<In, Out, InB>::from_emitted(ctx, &emitted)?;
    let lt = LtFp8Gemm::<Out>::new(
        stream,
        m,
        n,
        k,
        a_format,
        b_format,
        false,
        LtScales::PerTensor,
    )?;
    let lt_fast = LtFp8Gemm::<Out>::new(
        stream,
        m,
        n,
        k,
        a_format,
        b_format,
        true,
        LtScales::PerTensor,
    )?;

    let mut rng = NormalRng::new(0xF8F8_0000 ^ u64::from(m) ^ (u64::from(n) << 20));
    let (m_us, n_us, k_us) = (m as usize, n as usize, k as usize);
    let (a, a_scale) = quantized::<In>(stream, m_us * k_us, a_max, &mut rng, "A")?;
    // B column-major: N lines of K.
    let (b, b_scale) = quantized::<InB>(stream, n_us * k_us, b_max, &mut rng, "B")?;
    // Block scales all equal to the tensor's: ceil(K/128) lines of M (rounded up to 4) for A,
    // ceil(N/128) lines of ceil(K/128) for B.
    let block_scales = |scale: &CudaSlice<f32>, len: usize, what: &str| {
        let value = stream
            .clone_dtoh(scale)
            .during(|| format!("reading {what}'s scale back"))?[0];
        stream
            .clone_htod(&vec![value; len])
            .during(|| format!("copying {what}'s block scales to the device"))
    };
    let k_blocks = k.div_ceil(Quant::BLOCK) as usize;
    let (a_kernel_scale, b_kernel_scale) = if spec.quant == Quant::Block {
        (
            block_scales(
                &a_scale,
                k_blocks * m_us.next_multiple_of(Quant::A_LINE_MULTIPLE as usize),
                "A",
            )?,
            block_scales(&b_scale, n.div_ceil(Quant::BLOCK) as usize * k_blocks, "B")?,
        )
    } else {
        (a_scale.clone(), b_scale.clone())
    };
    let poisoned = vec![Out::poison(); m_us * n_us];
    let mut d_ours = stream
        .clone_htod(&poisoned)
        .during(|| "writing the poisoned D".to_string())?;
    let mut d_lt = d_ours.clone();
    let mut d_lt_fast = d_ours.clone();
    let lds = LeadingDims {
        lda: k,
        ldb: k,
        ldc: n,
    };
    let mut epilogue = Epilogue::none().quant_scales(&a_kernel_scale, &b_kernel_scale);
    let launch_ours = |d: &mut CudaSlice<Out>, epilogue: &mut Epilogue<'_, Out>| {
        kernel.launch_fused(stream, &a, &b, d, m, n, k, lds, Batch::ONE, epilogue)
    };

    // Correct first: every element written, and near cuBLASLt's.
    launch_ours(&mut d_ours, &mut epilogue)?;
    lt.run(&a, &b, &a_scale, &b_scale, &mut d_lt)?;
    let ours = stream
        .clone_dtoh(&d_ours)
        .during(|| format!("copying D of `{}` back", spec.name))?;
    let theirs = stream
        .clone_dtoh(&d_lt)
        .during(|| "reading cuBLASLt's D back".to_string())?;
    let rel_diff = check_against_lt(&ours, &theirs, &spec.name, spec.dtype, spec.out, shape)?;

    let mut ours_launch = |_: usize| Ok(launch_ours(&mut d_ours, &mut epilogue)?);
    let mut lt_launch = |_: usize| lt.run(&a, &b, &a_scale, &b_scale, &mut d_lt);
    let mut lt_fast_launch = |_: usize| lt_fast.run(&a, &b, &a_scale, &b_scale, &mut d_lt_fast);
    let mut competitors: Vec<&mut Launcher<'_>> =
        vec![&mut ours_launch, &mut lt_launch, &mut lt_fast_launch];
    let times = time_round_robin(stream, rounds, &mut competitors)?;
    let ms = |i: usize| median(&times[i]).unwrap_or(f64::NAN);
    Ok(Fp8Row {
        shape: shape.to_string(),
        ours_ms: ms(0),
        cublaslt_ms: ms(1),
        cublaslt_fast_ms: ms(2),
        ours_tflops: tflops(shape, ms(0)),
        rel_diff_to_cublaslt: rel_diff,
    })
}

/// The markdown table of a run.
pub fn fp8_table(spec: &GemmSpec, rows: &[Fp8Row]) -> String {
    let mut out = format!(
        "spec: `{}`\n\nSpeeds are time ratios: above 1, ours is faster.\n\n| shape | ours TFLOP/s | cuBLASLt TFLOP/s | speed vs cuBLASLt | cuBLASLt fast-accum TFLOP/s | speed vs fast-accum | ‖D − D_Lt‖/‖D_Lt‖ |\n|---|---:|---:|---:|---:|---:|---:|\n",
        spec.to_spec_text()
    );
    for row in rows {
        let shape: Shape = row.shape.parse().expect("rows hold shapes");
        out.push_str(&format!(
            "| {} | {:.1} | {:.1} | {:.3} | {:.1} | {:.3} | {:.1e} |\n",
            row.shape,
            row.ours_tflops,
            tflops(shape, row.cublaslt_ms),
            row.ratio(),
            tflops(shape, row.cublaslt_fast_ms),
            row.cublaslt_fast_ms / row.ours_ms,
            row.rel_diff_to_cublaslt,
        ));
    }
    out
}

/// Checks our D against cuBLASLt's: every element written, and ‖D − D_Lt‖_F / ‖D_Lt‖_F within
/// the tolerance of these types; returns that distance.
pub(crate) fn check_against_lt<Out: Element>(
    ours: &[Out],
    theirs: &[Out],
    kernel: &str,
    dtype: DType,
    out: DType,
    shape: Shape,
) -> Result<f64, Error> {
    let unwritten = ours.iter().filter(|x| x.is_poison()).count();
    let (mut diff, mut norm) = (0.0f64, 0.0f64);
    for (x, y) in ours.iter().zip(theirs) {
        let (x, y) = (x.to_f64(), y.to_f64());
        diff += (x - y) * (x - y);
        norm += y * y;
    }
    let rel_diff = (diff / norm).sqrt();
    let bound = Tolerance::for_types(dtype, out, u64::from(shape.m) * u64::from(shape.n), shape.k);
    if unwritten > 0 || rel_diff.is_nan() || rel_diff > bound.rel_frobenius {
        return Err(Error::Baseline {
            action: format!("checking `{kernel}` on {shape} against cuBLASLt"),
            reason: format!(
                "{unwritten} element(s) of D never written; ‖D − D_Lt‖/‖D_Lt‖ = {rel_diff:.2e} (bound {:.1e})",
                bound.rel_frobenius
            ),
        });
    }
    Ok(rel_diff)
}
