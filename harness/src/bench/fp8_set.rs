//! An fp8 kernel set through the entry point (`gemm-bench --set sm90_fp8 --set-types
//! e4m3->bf16 --layout rc`): per shape, the kernel `Matmul` picks, and (without `--auto`)
//! every member that admits the shape and every `--spec-file` candidate, against cuBLASLt's
//! fp8 GEMM with the same per-tensor scales, all in one rotation. The block-scaled set
//! (`--set sm90_fp8_block`) runs with DeepSeek-V3's block scales, drawn per block, against
//! cuBLASLt's block-scaled GEMM with the same scales where it takes the shape, and against its
//! per-tensor GEMM (the speed block scales are measured against). Each kernel's D is checked
//! against cuBLASLt's first (the block-scaled one's; where cuBLASLt has none for the shape,
//! the kernels take every block's scale equal to the tensor's and are checked against the
//! per-tensor D). Every launch reads the next of enough copies of the inputs to
//! keep them out of L2, whoever launches it, as the 16-bit set runs do: a decode problem's
//! weights would otherwise be read from L2, or from where the launch before left them.
//!
//! The rows keep each kernel's measured and predicted time: what the fp8 cost model is fitted
//! on.

use crate::baseline::fp8::{lt_block_scales, LtFp8Gemm, LtScales};
use crate::bench::fp8::{check_against_lt, format_of, quantized};
use crate::bench::{
    geomean, input_sets, median, tflops, time_round_robin, Launcher, Rounds, Shape,
};
use crate::error::{DriverContext, Error};
use crate::verify::NormalRng;
use cudarc::driver::{CudaContext, CudaSlice, CudaStream};
use gemm_dsl::abi::StorageOrder;
use gemm_dsl::pick::{estimate, Candidate, Problem};
use gemm_dsl::{DType, Layout, Quant, ValidSpec};
use gemm_runtime::epilogue::{Epilogue, FusedSpec};
use gemm_runtime::sets::{self, KernelSet};
use gemm_runtime::{Batch, Element, GemmKernel, LeadingDims, Matmul, PickSource};
use serde::{Deserialize, Serialize};
use std::cell::{Cell, RefCell};
use std::sync::Arc;

/// The epilogue every kernel of an fp8 set run takes: per-tensor scales.
pub const PER_TENSOR: FusedSpec = FusedSpec {
    quant: Quant::Tensor,
    ..FusedSpec::NONE
};

/// The epilogue of the block-scaled set's kernels: DeepSeek-V3's block scales.
pub const BLOCK_SCALES: FusedSpec = FusedSpec {
    quant: Quant::Block,
    ..FusedSpec::NONE
};

/// The scales an fp8 set's kernels are timed with: [`BLOCK_SCALES`] for the block-scaled set,
/// [`PER_TENSOR`] for the others.
pub fn scales_of(set: &KernelSet) -> FusedSpec {
    if set.name == sets::SM90_FP8_BLOCK.name {
        BLOCK_SCALES
    } else {
        PER_TENSOR
    }
}

/// One kernel's median time on a shape, and the cost model's prediction.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct KernelTime {
    pub kernel: String,
    pub ms: f64,
    pub predicted_ms: f64,
}

/// One shape: the entry point's pick, cuBLASLt, and every kernel timed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Fp8SetRow {
    pub shape: Shape,
    /// The kernel `Matmul` picks, and whether the model or the tuning cache chose it
    /// (`model`, `cache`).
    pub pick: String,
    pub pick_source: String,
    /// cuBLASLt, full accumulation (its partial sums promoted to f32), per-tensor scales.
    pub cublaslt_ms: f64,
    /// cuBLASLt with the kernels' block scales (block-scaled runs, where it takes the shape).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cublaslt_blocks_ms: Option<f64>,
    /// Why cuBLASLt's block-scaled GEMM did not run the shape, in a block-scaled run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cublaslt_blocks_refused: Option<String>,
    /// The timed kernels: the pick first.
    pub kernels: Vec<KernelTime>,
    /// The largest ‖D − D_Lt‖_F / ‖D_Lt‖_F among them.
    pub max_rel_diff: f64,
}

impl Fp8SetRow {
    fn time_of(&self, kernel: &str) -> Option<f64> {
        self.kernels
            .iter()
            .find(|timed| timed.kernel == kernel)
            .map(|timed| timed.ms)
    }

    /// The pick's speed over cuBLASLt's: above 1, ours is faster.
    pub fn pick_ratio(&self) -> f64 {
        self.cublaslt_ms / self.time_of(&self.pick).unwrap_or(f64::NAN)
    }

    /// The pick's speed over cuBLASLt's block-scaled GEMM, where that ran.
    pub fn pick_ratio_to_blocks(&self) -> Option<f64> {
        let pick = self.time_of(&self.pick)?;
        self.cublaslt_blocks_ms.map(|blocks| blocks / pick)
    }

    /// The fastest kernel timed.
    pub fn best(&self) -> &KernelTime {
        self.kernels
            .iter()
            .min_by(|a, b| a.ms.total_cmp(&b.ms))
            .expect("a row holds its pick")
    }
}

/// What became of one shape.
#[derive(Clone, Debug, PartialEq)]
pub enum Fp8SetOutcome {
    Timed(Fp8SetRow),
    /// Not run, and why: a batch, or a problem cuBLASLt's fp8 GEMM or every member refuses.
    Skipped(String),
}

/// A quantized B: its N x K, values and scale.
struct QuantizedB<In> {
    dims: (u32, u32),
    values: CudaSlice<In>,
    scale: CudaSlice<f32>,
}

/// What every shape of the run shares: the set's `Matmul` (per-tensor or block scales), the
/// extra candidates and the device's L2 size.
pub struct Fp8SetRun<'a, In: Element, Out: Element> {
    stream: &'a Arc<CudaStream>,
    matmul: Matmul<In, Out>,
    /// `quant: tensor` or `quant: block`, every kernel's.
    quant: Quant,
    /// `--spec-file` kernels, timed beside the members: (model view, kernel).
    candidates: Vec<(Candidate, GemmKernel<In, Out>)>,
    /// Time only the pick.
    auto: bool,
    l2_bytes: u64,
    max_input_sets: u32,
    /// The element types, for the check's tolerance.
    types: (DType, DType),
    /// The last shape's B, for the next shape of the same N x K.
    last_b: RefCell<Option<QuantizedB<In>>>,
}

/// One kernel timed on a shape: its name and the model's time.
struct Timed<'k, In, Out> {
    name: String,
    predicted: f64,
    kernel: &'k GemmKernel<In, Out>,
}

impl<In: Element, Out: Element> Timed<'_, In, Out> {
    /// A kernel that stores C column-major runs the swapped product.
    fn swapped(&self) -> bool {
        self.kernel.info().launch().c_order == StorageOrder::ColMajor
    }

    /// `D = s_A·s_B·A·B` for the row-major `m x n x k` problem with leading dimensions `lds`:
    /// as given, or swapped (`Dᵀ = Bᵀ·Aᵀ`, D column-major where it lies). The scales go in as
    /// given either way, as `Matmul::run_fused` passes them: per-tensor scales multiply.
    fn launch(
        &self,
        stream: &Arc<CudaStream>,
        (a, b): (&CudaSlice<In>, &CudaSlice<In>),
        (a_scale, b_scale): (&CudaSlice<f32>, &CudaSlice<f32>),
        d: &mut CudaSlice<Out>,
        (m, n, k): (u32, u32, u32),
        lds: LeadingDims,
    ) -> Result<(), Error> {
        let mut epilogue = Epilogue::none().quant_scales(a_scale, b_scale);
        if self.swapped() {
            let lds = lds.exchanged();
            self.kernel
                .launch_fused(stream, b, a, d, n, m, k, lds, Batch::ONE, &mut epilogue)?;
        } else {
            self.kernel
                .launch_fused(stream, a, b, d, m, n, k, lds, Batch::ONE, &mut epilogue)?;
        }
        Ok(())
    }
}

impl<'a, In: Element, Out: Element> Fp8SetRun<'a, In, Out> {
    /// `set`'s members with their scales ([`scales_of`]), and `extra` (fp8 specs of these
    /// types, layout rc, the same `quant`). `types` are `In` and `Out` as spec types.
    pub fn load(
        ctx: &Arc<CudaContext>,
        stream: &'a Arc<CudaStream>,
        set: &KernelSet,
        extra: &[ValidSpec],
        types: (DType, DType),
        auto: bool,
        max_input_sets: u32,
    ) -> Result<Self, Error> {
        let scales = scales_of(set);
        let matmul = Matmul::<In, Out>::with_set_fused(ctx, set, scales)?;
        let candidates = extra
            .iter()
            .map(|valid| {
                let spec = &valid.spec;
                if spec.layout != Layout::RowCol
                    || spec.quant != scales.quant
                    || (spec.dtype, spec.b_dtype, spec.out) != (types.0, types.0, types.1)
                {
                    return Err(Error::Baseline {
                        action: format!("loading `{}`", spec.name),
                        reason: format!(
                            "a candidate beside an fp8 set is what its members are here: dtype {}, out {}, layout rc, `quant: {}`",
                            types.0.name(),
                            types.1.name(),
                            scales.quant.name()
                        ),
                    });
                }
                let emitted = gemm_codegen::emit(valid);
                let kernel = GemmKernel::<In, Out>::from_emitted(ctx, &emitted)?;
                Ok((Candidate::of(valid, *kernel.info().launch()), kernel))
            })
            .collect::<Result<Vec<_>, Error>>()?;
        let l2_bytes = u64::from(gemm_runtime::DeviceInfo::query(ctx)?.l2_cache_bytes);
        Ok(Fp8SetRun {
            stream,
            matmul,
            quant: scales.quant,
            candidates,
            auto,
            l2_bytes,
            max_input_sets,
            types,
            last_b: RefCell::new(None),
        })
    }

    /// Times `shape`, or says why it is not run.
    pub fn time(&self, shape: Shape, rounds: &Rounds) -> Result<Fp8SetOutcome, Error> {
        let stream = self.stream;
        let (m, n, k) = (shape.m, shape.n, shape.k);
        if shape.batch != 1 {
            return Ok(Fp8SetOutcome::Skipped(
                "fp8 sets are timed on single products".to_string(),
            ));
        }
        let (format, format_max) = format_of::<In>();
        let lt = match LtFp8Gemm::<Out>::new(
            stream,
            m,
            n,
            k,
            format,
            format,
            false,
            LtScales::PerTensor,
        ) {
            Ok(lt) => lt,
            Err(why) => return Ok(Fp8SetOutcome::Skipped(format!("cuBLASLt: {why}"))),
        };
        // Where cuBLASLt refuses the block-scaled shape, the row says so and goes on.
        let (lt_blocks, lt_blocks_refused) = match self.quant {
            Quant::Block => {
                match LtFp8Gemm::<Out>::new(
                    stream,
                    m,
                    n,
                    k,
                    format,
                    format,
                    false,
                    LtScales::Blocks,
                ) {
                    Ok(lt) => (Some(lt), None),
                    Err(why) => (None, Some(why.to_string())),
                }
            }
            Quant::None | Quant::Tensor => (None, None),
        };
        let problem = Problem::new(m, n, k, Layout::RowCol);
        let picked = match self.matmul.pick(&problem) {
            Ok(picked) => picked,
            Err(why) => return Ok(Fp8SetOutcome::Skipped(why.to_string())),
        };
        let picker = self.matmul.picker();
        let members = picker.candidates();
        let pick_index = members
            .iter()
            .position(|candidate| candidate.name == picked.kernel)
            .expect("the pick is a member");
        // A kernel that stores C column-major runs the swapped product `Cᵀ = Bᵀ·Aᵀ` (A and B
        // swapped at launch), as `Matmul` routes it.
        let swapped = problem.swapped();
        let routed = |candidate: &Candidate| {
            if candidate.launch.c_order == StorageOrder::ColMajor {
                &swapped
            } else {
                &problem
            }
        };
        // Every kernel timed, the pick first.
        let mut kernels: Vec<Timed<'_, In, Out>> = Vec::new();
        let member_indices = std::iter::once(pick_index).chain(
            (0..members.len())
                .filter(|&index| !self.auto && index != pick_index)
                .filter(|&index| members[index].refusal(routed(&members[index])).is_none()),
        );
        for index in member_indices {
            let candidate = &members[index];
            kernels.push(Timed {
                name: candidate.name.clone(),
                predicted: estimate(candidate, routed(candidate), picker.device()).seconds,
                kernel: self.matmul.kernel(index)?,
            });
        }
        if !self.auto {
            for (candidate, kernel) in &self.candidates {
                if candidate.refusal(routed(candidate)).is_none() {
                    kernels.push(Timed {
                        name: candidate.name.clone(),
                        predicted: estimate(candidate, routed(candidate), picker.device()).seconds,
                        kernel,
                    });
                }
            }
        }

        let mut rng = NormalRng::new(0xF8F8_5E70 ^ u64::from(m) ^ (u64::from(n) << 20));
        let (m_us, n_us, k_us) = (m as usize, n as usize, k as usize);
        let (a, a_scale) = quantized::<In>(stream, m_us * k_us, format_max, &mut rng, "A")?;
        // A weight is quantized on the host once for the shapes that share it (a model's
        // list takes each N x K at several M): the largest take seconds to draw.
        let (b, b_scale) = {
            let mut last = self.last_b.borrow_mut();
            if last.as_ref().is_none_or(|kept| kept.dims != (n, k)) {
                *last = None;
                let (values, scale) =
                    quantized::<In>(stream, n_us * k_us, format_max, &mut rng, "B")?;
                *last = Some(QuantizedB {
                    dims: (n, k),
                    values,
                    scale,
                });
            }
            let kept = last.as_ref().expect("kept above");
            (
                stream
                    .clone_dtod(&kept.values)
                    .during(|| "copying B".to_string())?,
                stream
                    .clone_dtod(&kept.scale)
                    .during(|| "copying B's scale".to_string())?,
            )
        };
        // The kernels' scales: the tensors' own, or per block (each block's drawn around
        // its tensor's where cuBLASLt takes the same blocks; else all equal to it, so that
        // the per-tensor D checks them), with cuBLASLt's copy in its layouts.
        let (kernel_scales, lt_blocks_scales) = match self.quant {
            Quant::Block => {
                let tensor = |scale: &CudaSlice<f32>, what: &str| -> Result<f32, Error> {
                    Ok(stream
                        .clone_dtoh(scale)
                        .during(|| format!("reading {what}'s scale back"))?[0])
                };
                let (a_blocks, b_blocks) = block_scales(
                    (tensor(&a_scale, "A")?, tensor(&b_scale, "B")?),
                    (m, n, k),
                    lt_blocks.is_some().then_some(&mut rng),
                );
                // Our A's and B's scales in cuBLASLt's layouts (`run` hands them to its B and A).
                let (a_for_lt, b_for_lt) = lt_block_scales((&a_blocks, &b_blocks), (m, n, k));
                let upload = |values: &[f32], what: &str| {
                    stream
                        .clone_htod(values)
                        .during(|| format!("copying {what} block scales to the device"))
                };
                (
                    (upload(&a_blocks, "A's")?, upload(&b_blocks, "B's")?),
                    Some((
                        upload(&a_for_lt, "A's (cuBLASLt's layout)")?,
                        upload(&b_for_lt, "B's (cuBLASLt's layout)")?,
                    )),
                )
            }
            Quant::None | Quant::Tensor => ((a_scale.clone(), b_scale.clone()), None),
        };
        let input_bytes = (m_us + n_us) as u64 * k_us as u64 * u64::from(In::BYTES);
        let copies = input_sets(input_bytes, self.l2_bytes, self.max_input_sets);
        let mut inputs: Vec<(CudaSlice<In>, CudaSlice<In>)> = vec![(a, b)];
        for _ in 1..copies {
            let (a, b) = &inputs[0];
            let copy = (
                stream.clone_dtod(a).during(|| "copying A".to_string())?,
                stream.clone_dtod(b).during(|| "copying B".to_string())?,
            );
            inputs.push(copy);
        }
        let poisoned = vec![Out::poison(); m_us * n_us];
        let mut d_lt = stream
            .clone_htod(&poisoned)
            .during(|| "writing the poisoned D".to_string())?;
        let lds = LeadingDims {
            lda: k,
            ldb: k,
            ldc: n,
        };
        let (a0, b0) = &inputs[0];
        lt.run(a0, b0, &a_scale, &b_scale, &mut d_lt)?;
        let mut d_lt_blocks = stream
            .clone_htod(&poisoned)
            .during(|| "writing the poisoned D".to_string())?;
        let reference = match (&lt_blocks, &lt_blocks_scales) {
            (Some(lt_blocks), Some((a_for_lt, b_for_lt))) => {
                // cuBLASLt's A scale is our B's: `run` takes ours and exchanges them.
                lt_blocks.run(a0, b0, a_for_lt, b_for_lt, &mut d_lt_blocks)?;
                &d_lt_blocks
            }
            _ => &d_lt,
        };
        let theirs = stream
            .clone_dtoh(reference)
            .during(|| "reading cuBLASLt's D back".to_string())?;
        let (a_kernel_scale, b_kernel_scale) = &kernel_scales;

        // Correct first: each kernel on fresh poison, near cuBLASLt's D.
        let mut outputs = Vec::with_capacity(kernels.len());
        let mut max_rel_diff = 0.0f64;
        for timed in &kernels {
            let mut d = stream
                .clone_htod(&poisoned)
                .during(|| "writing the poisoned D".to_string())?;
            timed.launch(
                stream,
                (a0, b0),
                (a_kernel_scale, b_kernel_scale),
                &mut d,
                (m, n, k),
                lds,
            )?;
            let name = &timed.name;
            let ours = stream
                .clone_dtoh(&d)
                .during(|| format!("copying D of `{name}` back"))?;
            let (dtype, out) = self.types;
            let rel_diff = check_against_lt(&ours, &theirs, name, dtype, out, shape)?;
            max_rel_diff = max_rel_diff.max(rel_diff);
            outputs.push(d);
        }

        // Every launch takes the next copy, whoever launches it: no competitor reads the
        // operands the launch before it just pulled into L2.
        let launches = Cell::new(0usize);
        let next_inputs = || {
            let launch = launches.get();
            launches.set(launch + 1);
            &inputs[launch % inputs.len()]
        };
        let mut lt_launch = |_: usize| {
            let (a, b) = next_inputs();
            lt.run(a, b, &a_scale, &b_scale, &mut d_lt)
        };
        let mut lt_blocks_launch = |_: usize| {
            let (a, b) = next_inputs();
            match (&lt_blocks, &lt_blocks_scales) {
                (Some(lt_blocks), Some((a_for_lt, b_for_lt))) => {
                    lt_blocks.run(a, b, a_for_lt, b_for_lt, &mut d_lt_blocks)
                }
                _ => unreachable!("timed only where planned"),
            }
        };
        let mut ours: Vec<Box<Launcher<'_>>> = Vec::new();
        for (timed, d) in kernels.iter().zip(outputs.iter_mut()) {
            let next_inputs = &next_inputs;
            ours.push(Box::new(move |_: usize| {
                let (a, b) = next_inputs();
                timed.launch(
                    stream,
                    (a, b),
                    (a_kernel_scale, b_kernel_scale),
                    d,
                    (m, n, k),
                    lds,
                )
            }));
        }
        let mut competitors: Vec<&mut Launcher<'_>> = vec![&mut lt_launch];
        let baselines = if lt_blocks.is_some() {
            competitors.push(&mut lt_blocks_launch);
            2
        } else {
            1
        };
        competitors.extend(ours.iter_mut().map(|launch| &mut **launch));
        let times = time_round_robin(stream, rounds, &mut competitors)?;
        let ms = |i: usize| median(&times[i]).unwrap_or(f64::NAN);
        Ok(Fp8SetOutcome::Timed(Fp8SetRow {
            shape,
            pick: picked.kernel.to_string(),
            pick_source: match picked.source {
                PickSource::Model => "model",
                PickSource::Cache => "cache",
            }
            .to_string(),
            cublaslt_ms: ms(0),
            cublaslt_blocks_ms: (baselines == 2).then(|| ms(1)),
            cublaslt_blocks_refused: lt_blocks_refused,
            kernels: kernels
                .iter()
                .enumerate()
                .map(|(i, timed)| KernelTime {
                    kernel: timed.name.clone(),
                    ms: ms(i + baselines),
                    predicted_ms: timed.predicted * 1e3,
                })
                .collect(),
            max_rel_diff,
        }))
    }
}

/// Block scales in the kernels' layout (`quant: block`: A ceil(K/128) lines of M rounded up
/// to 4, B ceil(N/128) lines of ceil(K/128)) around the tensors' scales: each block's its
/// tensor's times 2^(x/2), x a standard normal clamped to ±2, with `rng`; without, all equal
/// to the tensor's.
fn block_scales(
    (a_tensor, b_tensor): (f32, f32),
    (m, n, k): (u32, u32, u32),
    mut rng: Option<&mut NormalRng>,
) -> (Vec<f32>, Vec<f32>) {
    let k_blocks = k.div_ceil(Quant::BLOCK) as usize;
    let a_line = (m as usize).next_multiple_of(Quant::A_LINE_MULTIPLE as usize);
    let n_blocks = n.div_ceil(Quant::BLOCK) as usize;
    let mut draw = |tensor: f32, len: usize| -> Vec<f32> {
        (0..len)
            .map(|_| match rng.as_deref_mut() {
                Some(rng) => tensor * (rng.next_normal().clamp(-2.0, 2.0) as f32 / 2.0).exp2(),
                None => tensor,
            })
            .collect()
    };
    let a = draw(a_tensor, k_blocks * a_line);
    let b = draw(b_tensor, n_blocks * k_blocks);
    (a, b)
}

/// The markdown of a run: the picks against cuBLASLt (and, where more than the pick ran, the
/// measured best), then every kernel's speed per shape; `skipped` shapes and why last.
pub fn fp8_set_table(heading: &str, rows: &[Fp8SetRow], skipped: &[(String, String)]) -> String {
    let only_picks = rows.iter().all(|row| row.kernels.len() == 1);
    // Block-scaled runs add cuBLASLt's block-scaled GEMM beside its per-tensor one.
    let blocks = rows.iter().any(|row| row.cublaslt_blocks_ms.is_some());
    let mut out = format!(
        "{heading}\n\nSpeeds are time ratios against cuBLASLt's fp8 GEMM (full accumulation, the same per-tensor scales{}): above 1, ours is faster. Every launch reads the next of copies of the inputs that keep them out of L2.\n\n",
        if blocks {
            "; and, where it takes the shape, its block-scaled GEMM with the kernels' block scales"
        } else {
            ""
        }
    );
    let (blocks_head, blocks_rule) = if blocks {
        (
            " vs cuBLASLt blocks | cuBLASLt blocks TFLOP/s |",
            "---:|---:|",
        )
    } else {
        ("", "")
    };
    if only_picks {
        out.push_str(&format!("| shape | pick | TFLOP/s | vs cuBLASLt | cuBLASLt TFLOP/s |{blocks_head} ‖D − D_Lt‖/‖D_Lt‖ |\n|---|---|---:|---:|---:|{blocks_rule}---:|\n"));
    } else {
        out.push_str(&format!("| shape | pick | pick TFLOP/s | pick vs cuBLASLt | best timed | best TFLOP/s | best vs cuBLASLt | cuBLASLt TFLOP/s |{blocks_head} ‖D − D_Lt‖/‖D_Lt‖ (max) |\n|---|---|---:|---:|---|---:|---:|---:|{blocks_rule}---:|\n"));
    }
    for row in rows {
        let pick_tflops = tflops(row.shape, row.time_of(&row.pick).unwrap_or(f64::NAN));
        let lt_tflops = tflops(row.shape, row.cublaslt_ms);
        let blocks_cells = match (blocks, row.cublaslt_blocks_ms) {
            (false, _) => String::new(),
            (true, None) => " — | — |".to_string(),
            (true, Some(ms)) => format!(
                " {:.3} | {:.1} |",
                row.pick_ratio_to_blocks().unwrap_or(f64::NAN),
                tflops(row.shape, ms)
            ),
        };
        if only_picks {
            out.push_str(&format!(
                "| {} | {} | {pick_tflops:.1} | {:.3} | {lt_tflops:.1} |{blocks_cells} {:.1e} |\n",
                row.shape,
                row.pick,
                row.pick_ratio(),
                row.max_rel_diff,
            ));
        } else {
            let best = row.best();
            out.push_str(&format!(
                "| {} | {} | {pick_tflops:.1} | {:.3} | {} | {:.1} | {:.3} | {lt_tflops:.1} |{blocks_cells} {:.1e} |\n",
                row.shape,
                row.pick,
                row.pick_ratio(),
                best.kernel,
                tflops(row.shape, best.ms),
                row.cublaslt_ms / best.ms,
                row.max_rel_diff,
            ));
        }
    }
    let ratios: Vec<f64> = rows.iter().map(Fp8SetRow::pick_ratio).collect();
    if let (Some(mean), Some(worst)) = (
        geomean(&ratios),
        rows.iter()
            .min_by(|a, b| a.pick_ratio().total_cmp(&b.pick_ratio())),
    ) {
        out.push_str(&format!(
            "\npicks: geomean {mean:.3}x cuBLASLt over {} shapes, worst {:.3} ({}); {} below 0.85\n",
            rows.len(),
            worst.pick_ratio(),
            worst.shape,
            ratios.iter().filter(|&&ratio| ratio < 0.85).count(),
        ));
        let to_blocks: Vec<(f64, Shape)> = rows
            .iter()
            .filter_map(|row| Some((row.pick_ratio_to_blocks()?, row.shape)))
            .collect();
        if let (Some(mean), Some(&(worst, worst_shape))) = (
            geomean(
                &to_blocks
                    .iter()
                    .map(|&(ratio, _)| ratio)
                    .collect::<Vec<_>>(),
            ),
            to_blocks.iter().min_by(|a, b| a.0.total_cmp(&b.0)),
        ) {
            out.push_str(&format!(
                "picks against cuBLASLt's block-scaled GEMM: geomean {mean:.3}x over the {} shapes it takes, worst {worst:.3} ({worst_shape})\n",
                to_blocks.len(),
            ));
        }
        if !only_picks {
            let best: Vec<f64> = rows
                .iter()
                .map(|row| row.cublaslt_ms / row.best().ms)
                .collect();
            let pick_over_best: Vec<f64> = rows
                .iter()
                .map(|row| row.best().ms / row.time_of(&row.pick).unwrap_or(f64::NAN))
                .collect();
            out.push_str(&format!(
                "best timed: geomean {:.3}x; picks at the best timed: {} of {}, their speed over the best's geomean {:.3}\n",
                geomean(&best).unwrap_or(f64::NAN),
                rows.iter().filter(|row| row.best().kernel == row.pick).count(),
                rows.len(),
                geomean(&pick_over_best).unwrap_or(f64::NAN),
            ));
        }
    }
    for (shape, why) in skipped {
        out.push_str(&format!("\nnot run: {shape}: {why}"));
    }
    for row in rows {
        if let Some(why) = &row.cublaslt_blocks_refused {
            out.push_str(&format!(
                "\ncuBLASLt's block-scaled GEMM did not run {}: {why}",
                row.shape
            ));
        }
    }
    if !only_picks {
        out.push_str(&kernel_table(rows));
    }
    out
}

/// Every kernel's speed against cuBLASLt per shape, the model's predicted time over the
/// measured beside it, the pick marked.
fn kernel_table(rows: &[Fp8SetRow]) -> String {
    let mut names: Vec<&str> = Vec::new();
    for timed in rows.iter().flat_map(|row| &row.kernels) {
        if !names.contains(&timed.kernel.as_str()) {
            names.push(&timed.kernel);
        }
    }
    let mut out = String::from("\n\nEvery kernel timed: speed against cuBLASLt (the model's predicted time over the measured in parentheses; `*` the pick).\n\n| shape |");
    for name in &names {
        out.push_str(&format!(" {name} |"));
    }
    out.push_str("\n|---|");
    out.push_str(&"---:|".repeat(names.len()));
    out.push('\n');
    for row in rows {
        out.push_str(&format!("| {} |", row.shape));
        for name in &names {
            match row.kernels.iter().find(|timed| timed.kernel == *name) {
                Some(timed) => out.push_str(&format!(
                    " {:.3}{} ({:.2}) |",
                    row.cublaslt_ms / timed.ms,
                    if timed.kernel == row.pick { "*" } else { "" },
                    timed.predicted_ms / timed.ms
                )),
                None => out.push_str(" — |"),
            }
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(shape: &str, cublaslt_ms: f64, kernels: &[(&str, f64)]) -> Fp8SetRow {
        Fp8SetRow {
            shape: shape.parse().unwrap(),
            pick: kernels[0].0.to_string(),
            pick_source: "model".to_string(),
            cublaslt_ms,
            cublaslt_blocks_ms: None,
            cublaslt_blocks_refused: None,
            kernels: kernels
                .iter()
                .map(|&(kernel, ms)| KernelTime {
                    kernel: kernel.to_string(),
                    ms,
                    predicted_ms: 2.0 * ms,
                })
                .collect(),
            max_rel_diff: 1e-3,
        }
    }

    #[test]
    fn the_table_sums_up_picks_and_the_best_timed() {
        let rows = [
            row("16x4096x4096", 1.0, &[("a", 2.0), ("b", 1.0)]),
            row("64x4096x4096", 1.0, &[("a", 0.5), ("b", 1.0)]),
        ];
        let skipped = [("4x16x16x16".to_string(), "a batch".to_string())];
        let table = fp8_set_table("set `s`", &rows, &skipped);
        // Picks 0.5x and 2x: geomean 1; the best 1x and 2x: geomean 1.414; one pick is the
        // best, at half the best's speed on the other shape.
        assert!(
            table.contains("picks: geomean 1.000x cuBLASLt over 2 shapes, worst 0.500 (16x4096x4096); 1 below 0.85"),
            "{table}"
        );
        assert!(
            table.contains("best timed: geomean 1.414x; picks at the best timed: 1 of 2, their speed over the best's geomean 0.707"),
            "{table}"
        );
        assert!(table.contains("not run: 4x16x16x16: a batch"), "{table}");
        assert!(
            table.contains("| 16x4096x4096 | 0.500* (2.00) | 1.000 (2.00) |"),
            "{table}"
        );
    }

    #[test]
    fn block_scaled_rows_add_cublaslts_block_scaled_gemm() {
        let mut with_blocks = row("256x4096x4096", 1.0, &[("a", 0.8)]);
        with_blocks.cublaslt_blocks_ms = Some(1.6);
        // M = 1: cuBLASLt's block-scaled GEMM needs M in fours.
        let mut without = row("1x4096x4096", 1.0, &[("a", 1.0)]);
        without.cublaslt_blocks_refused = Some("M and N in fours".to_string());
        let table = fp8_set_table("set `s`", &[with_blocks, without], &[]);
        assert!(
            table.contains("| vs cuBLASLt blocks | cuBLASLt blocks TFLOP/s |"),
            "{table}"
        );
        assert!(table.contains("| 256x4096x4096 | a | "), "{table}");
        assert!(table.contains(" | 1.250 | 8.6 | 2.000 | 5.4 | "), "{table}");
        assert!(table.contains(" | — | — | "), "{table}");
        assert!(
            table
                .contains("cuBLASLt's block-scaled GEMM did not run 1x4096x4096: M and N in fours"),
            "{table}"
        );
        assert!(
            table.contains("picks against cuBLASLt's block-scaled GEMM: geomean 2.000x over the 1 shapes it takes, worst 2.000 (256x4096x4096)"),
            "{table}"
        );
        // Per-tensor runs keep their columns.
        let table = fp8_set_table("set `s`", &[row("1x4096x4096", 1.0, &[("a", 1.0)])], &[]);
        assert!(!table.contains("blocks"), "{table}");
    }

    #[test]
    fn block_scales_are_drawn_in_the_kernels_layout() {
        // M = 6 (lines of 8), N = 300 (3 blocks), K = 200 (2 blocks).
        let (a, b) = block_scales((2.0, 3.0), (6, 300, 200), None);
        assert_eq!((a.len(), b.len()), (2 * 8, 3 * 2));
        assert!(a.iter().all(|&s| s == 2.0) && b.iter().all(|&s| s == 3.0));
        let mut rng = NormalRng::new(7);
        let (a, b) = block_scales((2.0, 3.0), (6, 300, 200), Some(&mut rng));
        assert!(a.iter().all(|&s| (0.5..=8.0).contains(&s)), "{a:?}");
        assert!(b.iter().all(|&s| (0.75..=12.0).contains(&s)), "{b:?}");
        assert!(a.iter().any(|&s| s != 2.0));
    }

    #[test]
    fn picks_alone_take_the_short_table() {
        let rows = [row("1x4096x4096", 1.5, &[("a", 1.0)])];
        let table = fp8_set_table("set `s`", &rows, &[]);
        assert!(table.contains("| 1x4096x4096 | a | "), "{table}");
        assert!(!table.contains("best timed"), "{table}");
        assert!(!table.contains("Every kernel timed"), "{table}");
    }
}
