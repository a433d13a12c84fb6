//! fp8 kernels (Hopper, `dtype: e4m3 | e5m2`) on the GPU: the catalog's fp8 specs and variants
//! of them (e5m2, f16 and f32 out, a fused epilogue after the scales) on edge shapes and
//! batches, against float64 on the decoded inputs, C poisoned first. The tests that are not
//! ignored check, without a GPU, what the specs promise; run the rest with `--ignored` on a
//! machine with an NVIDIA Hopper GPU.

use gemm_codegen::catalog::FP8;
use gemm_codegen::Emitted;
use gemm_dsl::abi::ParamKind;
use gemm_runtime::fp8::{E4m3, E5m2};
use gemm_runtime::verify::{verify_fused_batch, FusedCase, Tolerance};
use gemm_runtime::{
    open_context, AnyKernel, Batch, CudaContext, CudaStream, Element, Epilogue, Error, FusedSpec,
    GemmKernel, KernelTypes, LeadingDims,
};
use half::{bf16, f16};
use std::sync::Arc;

/// The catalog's fp8 specs, then variants: e5m2, f16 and f32 out (f32 C stored from
/// registers), and α, a column bias and GELU after the scales.
fn specs() -> Vec<String> {
    let persistent = FP8[0].spec;
    let mut specs: Vec<String> = FP8.iter().map(|entry| entry.spec.to_string()).collect();
    specs.push(
        persistent
            .replace(FP8[0].name, "fp8_e5m2")
            .replace("dtype: e4m3", "dtype: e5m2"),
    );
    specs.push(
        persistent
            .replace(FP8[0].name, "fp8_f16_out")
            .replace("out: bf16", "out: f16"),
    );
    specs.push(format!(
        "{}, epilogue: direct",
        persistent
            .replace(FP8[0].name, "fp8_f32_out")
            .replace("out: bf16", "out: f32")
    ));
    specs.push(format!(
        "{}, scale: alpha, bias: col, activation: gelu",
        persistent.replace(FP8[0].name, "fp8_fused")
    ));
    specs
}

fn emitted() -> Vec<Emitted> {
    specs()
        .iter()
        .map(|spec| gemm_codegen::emit_str(spec).unwrap_or_else(|e| panic!("{spec}: {e}")))
        .collect()
}

#[test]
fn fp8_specs_take_scales_and_launch_with_their_types() {
    for e in emitted() {
        let names: Vec<&str> = e.params().iter().map(|p| p.name).collect();
        assert!(
            names.ends_with(&["a_scale", "b_scale"])
                || names.windows(2).any(|w| w == ["a_scale", "b_scale"]),
            "{}: {names:?}",
            e.kernel_name()
        );
        assert!(e
            .params()
            .iter()
            .all(|p| !matches!(p.kind, ParamKind::Pointer(gemm_dsl::abi::Operand::A))));
        let types = KernelTypes::of_spec(e.spec()).unwrap();
        assert!(types.input().is_fp8(), "{}", e.kernel_name());
        assert_eq!(e.launch().input_element_bytes, 1);
        assert_eq!(FusedSpec::of_spec(e.spec()).quant, gemm_dsl::Quant::Tensor);
    }
}

fn gpu() -> (Arc<CudaContext>, Arc<CudaStream>) {
    let ctx = open_context(0).expect("these tests need a CUDA GPU");
    let stream = ctx.default_stream();
    (ctx, stream)
}

/// Shapes: whole tiles, partial tiles on every side, M = 1, a deep K, a batch of 3 with
/// padded leading dimensions and gaps between the matrices. K is a multiple of 16 and N of 8
/// (fp8 and 16-bit rows of whole 16-byte units, as the TMA needs).
const SHAPES: &[(u32, u32, u32, u32)] = &[
    (256, 512, 512, 1),
    (200, 264, 400, 1),
    (1, 136, 4096, 1),
    (333, 520, 1040, 3),
];

fn check<In: Element, Out: Element>(
    ctx: &Arc<CudaContext>,
    stream: &Arc<CudaStream>,
    emitted: &Emitted,
) -> usize {
    let kernel = GemmKernel::<In, Out>::from_emitted(ctx, emitted)
        .unwrap_or_else(|e| panic!("{}: {e}", emitted.kernel_name()));
    let fused = FusedSpec::of_spec(emitted.spec());
    let case = FusedCase::for_spec(&fused);
    let types = KernelTypes::of_spec(emitted.spec()).unwrap();
    let mut checked = 0;
    for (seed, &(m, n, k, count)) in SHAPES.iter().enumerate() {
        let launch = kernel.info().launch();
        let lds = if count == 1 {
            LeadingDims::packed(launch, m, n, k)
        } else {
            // 16 more bytes after every line, and a line's worth between the matrices.
            LeadingDims {
                lda: k + 16,
                ldb: k + 16,
                ldc: n + 16 / Out::BYTES,
            }
        };
        let packed = Batch::packed(launch, count, (m, n, k), lds);
        let batch = if count == 1 {
            Batch::ONE
        } else {
            Batch {
                count,
                stride_a: packed.stride_a + 16,
                stride_b: packed.stride_b + 16,
                stride_c: packed.stride_c + u64::from(16 / Out::BYTES),
            }
        };
        let report = verify_fused_batch(
            &kernel,
            stream,
            m,
            n,
            k,
            lds,
            batch,
            seed as u64 + 11,
            &case,
        )
        .unwrap_or_else(|e| panic!("{} {m}x{n}x{k}x{count}: {e}", emitted.kernel_name()));
        let tolerance = types.tolerance(m, n, k);
        eprintln!(
            "{:<40} {count}x{m}x{n}x{k}: worst {}",
            emitted.kernel_name(),
            report.worst().expect("one product or more")
        );
        report
            .check(&tolerance)
            .unwrap_or_else(|broken| panic!("{}: {broken}", emitted.kernel_name()));
        checked += 1;
    }
    checked
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn fp8_kernels_match_float64_on_edges_and_batches() {
    let (ctx, stream) = gpu();
    let mut checked = 0;
    for e in emitted() {
        let spec = e.spec();
        checked += match (spec.dtype, spec.out) {
            (gemm_dsl::DType::E4m3, gemm_dsl::DType::Bf16) => {
                check::<E4m3, bf16>(&ctx, &stream, &e)
            }
            (gemm_dsl::DType::E4m3, gemm_dsl::DType::F16) => check::<E4m3, f16>(&ctx, &stream, &e),
            (gemm_dsl::DType::E4m3, gemm_dsl::DType::F32) => check::<E4m3, f32>(&ctx, &stream, &e),
            (gemm_dsl::DType::E5m2, gemm_dsl::DType::Bf16) => {
                check::<E5m2, bf16>(&ctx, &stream, &e)
            }
            other => panic!("no case for {other:?}"),
        };
    }
    assert_eq!(checked, specs().len() * SHAPES.len());
}

/// How far fp8 accumulation drifts from float64 as K grows (no promotion of the partial
/// sums): printed for the results file, and held to the fp8 tolerance.
#[test]
#[ignore = "needs a CUDA GPU"]
fn fp8_accumulation_error_over_long_k() {
    let (ctx, stream) = gpu();
    let emitted = gemm_codegen::emit_str(
        &FP8[0]
            .spec
            .replace(FP8[0].name, "fp8_f32_acc")
            .replace("out: bf16", "out: f32")
            .replace("quant: tensor", "quant: tensor, epilogue: direct"),
    )
    .unwrap();
    let kernel = GemmKernel::<E4m3, f32>::from_emitted(&ctx, &emitted).unwrap();
    let case = FusedCase::for_spec(&FusedSpec::of_spec(emitted.spec()));
    for k in [1024, 4096, 16384] {
        let (m, n) = (256, 256);
        let report = verify_fused_batch(
            &kernel,
            &stream,
            m,
            n,
            k,
            LeadingDims::packed(kernel.info().launch(), m, n, k),
            Batch::ONE,
            k as u64,
            &case,
        )
        .unwrap();
        eprintln!(
            "fp8 accumulation, e4m3 -> f32, {m}x{n}x{k}: {}",
            report.worst().expect("one product")
        );
        report.check(&Tolerance::fp8_accumulation(k)).unwrap();
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn fp8_kernels_refuse_missing_scales_and_the_run_time_typed_loader() {
    let (ctx, stream) = gpu();
    let emitted = gemm_codegen::emit_str(FP8[0].spec).unwrap();
    let kernel = GemmKernel::<E4m3, bf16>::from_emitted(&ctx, &emitted).unwrap();
    let (m, n, k) = (128, 256, 256);
    let a = stream.alloc_zeros::<E4m3>((m * k) as usize).unwrap();
    let b = stream.alloc_zeros::<E4m3>((k * n) as usize).unwrap();
    let mut c = stream.alloc_zeros::<bf16>((m * n) as usize).unwrap();
    let lds = LeadingDims::packed(kernel.info().launch(), m, n, k);
    let missing = kernel
        .launch_fused(
            &stream,
            &a,
            &b,
            &mut c,
            m,
            n,
            k,
            lds,
            Batch::ONE,
            &mut Epilogue::none(),
        )
        .unwrap_err();
    assert!(
        missing.to_string().contains("no scales were given"),
        "{missing}"
    );
    // The plain launch passes no scales either.
    assert!(kernel.launch(&stream, &a, &b, &mut c, m, n, k).is_err());
    let refused = AnyKernel::from_emitted(&ctx, &emitted).unwrap_err();
    assert!(
        matches!(refused, Error::Fp8NotDispatched { .. }),
        "{refused}"
    );
}
