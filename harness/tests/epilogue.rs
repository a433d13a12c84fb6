//! Fused epilogues on the GPU: `D = act(α·A·B + β·C + bias)` in every family, with edges,
//! layouts, batches (a strided bias) and C-in read in place, against float64. The test that is
//! not ignored checks, without a GPU, that every spec here emits and keeps its SASS promises'
//! shape (no local memory); run the rest with `--ignored` on a machine with an NVIDIA GPU.

use gemm_codegen::Emitted;
use gemm_dsl::Mma;
use gemm_harness::verify::{verify_fused_batch, FusedCase, Tolerance};
use gemm_runtime::{
    open_context, with_kernel, AnyKernel, Batch, BiasArg, CIn, CudaContext, CudaStream, Epilogue,
    FusedSpec, LeadingDims,
};
use std::sync::Arc;

/// One spec per family and path: TMA-store, direct and stream-K Hopper kernels, a cluster,
/// f16 and f32 outputs, C-in loaded by TMA in the ping-pong, stream-K and cluster schedules; staged, direct, narrow and persistent mma.sync kernels and tf32;
/// SIMT with a wide and a narrow copy vector. Between them every key value and both bias
/// types, in every layout; the rows' factors in each family (with a stream-K tail, a cluster
/// and an aux output too).
const SPECS: &[&str] = &[
    "name: ep_wgmma_tma, mma: wgmma, arch: sm_90a, schedule: persistent, scale: alpha_beta, bias: col, activation: gelu",
    "name: ep_wgmma_aux, mma: wgmma, arch: sm_90a, layout: rc, schedule: persistent, bias: col, activation: gelu, aux: pre_activation",
    "name: ep_wgmma_sk, mma: wgmma, arch: sm_90a, layout: rc, schedule: persistent(tail = stream_k), scale: alpha, bias: row(f32), activation: silu, row_scale: f32",
    "name: ep_wgmma_f32, mma: wgmma, arch: sm_90a, out: f32, layout: cr, scale: alpha_beta, bias: col(f32), activation: gelu_erf",
    "name: ep_wgmma_cluster, mma: wgmma, arch: sm_90a, layout: cc, schedule: persistent, cluster: 2x1, copy: tma(multicast = 2), bias: col, activation: relu",
    "name: ep_wgmma_direct, mma: wgmma, arch: sm_90a, tile: 64x128x64, consumers: 1, epilogue: direct, scale: alpha_beta, activation: gelu",
    "name: ep_wgmma_f16, mma: wgmma, arch: sm_90a, dtype: f16, scale: alpha_beta, bias: row, activation: gelu_erf",
    "name: ep_wgmma_pingpong, mma: wgmma, arch: sm_90a, tile: 128x128x64, consumers: pingpong, stages: 6, schedule: persistent, scale: alpha_beta, bias: col, activation: gelu",
    "name: ep_wgmma_sk_c_in, mma: wgmma, arch: sm_90a, tile: 64x128x64, consumers: 1, stages: 6, layout: cr, schedule: persistent(tail = stream_k), scale: alpha_beta",
    "name: ep_wgmma_cluster_c_in, mma: wgmma, arch: sm_90a, layout: rc, schedule: persistent, cluster: 1x2, copy: tma(multicast = 2), scale: alpha_beta, activation: silu, row_scale: f32",
    "name: ep_mma, mma: mma_sync, arch: sm_80, scale: alpha_beta, bias: col, activation: gelu",
    "name: ep_mma_f32, mma: mma_sync, arch: sm_80, out: f32, layout: cr, scale: alpha_beta, bias: row, activation: gelu_erf",
    "name: ep_mma_narrow, mma: mma_sync, arch: sm_80, layout: rc, warps: 2x4, copy: cp_async(ca, vector = 4), scale: alpha_beta, bias: col, activation: silu, row_scale: f32",
    "name: ep_mma_persistent, mma: mma_sync, arch: sm_80, layout: cc, schedule: persistent, scale: alpha_beta, bias: col(f32), activation: gelu",
    "name: ep_mma_tf32, mma: mma_sync, arch: sm_80, dtype: tf32, scale: alpha, bias: col, activation: relu",
    "name: ep_simt, arch: sm_80, scale: alpha_beta, bias: row, activation: gelu_erf",
    "name: ep_simt_aux, arch: sm_80, layout: rc, scale: alpha, bias: col, activation: relu, aux: pre_activation, row_scale: f32",
    "name: ep_mma_aux, mma: mma_sync, arch: sm_80, out: f32, scale: alpha_beta, activation: silu, aux: pre_activation",
    "name: ep_simt_narrow, arch: sm_80, layout: cc, copy: sync(vector = 4), scale: alpha_beta, bias: col, activation: gelu",
];

fn emitted() -> Vec<Emitted> {
    SPECS
        .iter()
        .map(|spec| gemm_codegen::emit_str(spec).unwrap_or_else(|e| panic!("{spec}: {e}")))
        .collect()
}

#[test]
fn every_fused_spec_emits_for_every_family() {
    let all = emitted();
    for mma in [Mma::Fma, Mma::MmaSync, Mma::Wgmma] {
        assert!(all.iter().any(|e| e.spec().mma == mma), "{mma:?}");
    }
    for e in &all {
        let fused = FusedSpec::of_info(&e.info()).unwrap();
        assert!(!fused.is_none(), "{}", e.kernel_name());
        // The parameters after the plain kernel's are the epilogue's.
        let names: Vec<&str> = e.params().iter().map(|p| p.name).collect();
        assert_eq!(
            names.contains(&"c_in"),
            fused.scale.reads_c(),
            "{}",
            e.kernel_name()
        );
        assert_eq!(names.contains(&"bias"), fused.bias.vector().is_some());
        assert_eq!(names.contains(&"aux"), fused.aux != gemm_dsl::Aux::None);
        assert_eq!(
            names.contains(&"row_scale"),
            fused.row_scale != gemm_dsl::RowScale::None
        );
    }
}

fn gpu() -> (Arc<CudaContext>, Arc<CudaStream>) {
    let ctx = open_context(0).expect("these tests need a CUDA GPU");
    let stream = ctx.default_stream();
    (ctx, stream)
}

/// Leading dimensions with room after each line, and a batch whose matrices sit apart: what
/// a kernel must leave alone is poisoned, and counted afterwards.
fn padded(kernel: &AnyKernel, (m, n, k): (u32, u32, u32), count: u32) -> (LeadingDims, Batch) {
    let launch = kernel.info().launch();
    let (in_bytes, out_bytes) = (launch.input_element_bytes, launch.output_element_bytes);
    let vector =
        |bytes: u32| (launch.operand_align_bytes.max(launch.output_align_bytes) / bytes).max(1);
    let round = |value: u32, bytes: u32| value.div_ceil(vector(bytes)) * vector(bytes);
    let line = |operand| launch.stored_dims(operand, m, n, k).1;
    let lds = LeadingDims {
        lda: round(line(gemm_runtime::Operand::A), in_bytes),
        ldb: round(line(gemm_runtime::Operand::B), in_bytes),
        ldc: round(n, out_bytes) + vector(out_bytes),
    };
    let packed = Batch::packed(launch, count, (m, n, k), lds);
    let batch = Batch {
        count,
        stride_a: packed.stride_a + u64::from(vector(in_bytes)),
        stride_b: packed.stride_b + u64::from(vector(in_bytes)),
        stride_c: packed.stride_c + u64::from(vector(out_bytes)),
    };
    (lds, if count == 1 { Batch::ONE } else { batch })
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn fused_epilogues_match_float64_in_every_family() {
    let (ctx, stream) = gpu();
    let mut checked = 0;
    for emitted in emitted() {
        let name = emitted.kernel_name().to_string();
        let kernel =
            AnyKernel::from_emitted(&ctx, &emitted).unwrap_or_else(|e| panic!("{name}: {e}"));
        let fused = FusedSpec::of_info(kernel.info()).unwrap();
        let launch = *kernel.info().launch();
        let (tm, tn, tk) = (launch.tile_m, launch.tile_n, launch.tile_k);
        // Edges on every side, a tile and a bit, a one-row decode, and a batch of three.
        let cases = [
            ((tm + 3, tn + 9, 3 * tk + 5), 1, FusedCase::for_spec(&fused)),
            ((2 * tm, 2 * tn, 2 * tk), 1, FusedCase::for_spec(&fused)),
            ((1, tn - 6, tk + 1), 1, FusedCase::for_spec(&fused)),
            (
                (tm - 5, tn + 17, tk + 8),
                3,
                FusedCase {
                    in_place: fused.scale.reads_c(),
                    ..FusedCase::for_spec(&fused)
                },
            ),
        ];
        for (seed, ((m, n, k), count, case)) in cases.into_iter().enumerate() {
            let (lds, batch) = padded(&kernel, (m, n, k), count);
            let report = with_kernel!(&kernel, typed => {
                verify_fused_batch(typed, &stream, m, n, k, lds, batch, 0xE91_0000 + seed as u64, &case)
            })
            .unwrap_or_else(|e| panic!("{name} {count} x {m}x{n}x{k}: {e}"));
            let worst = report.worst().expect("a batch has products");
            eprintln!("{name} {count} x {m}x{n}x{k} {case:?}: worst {worst}");
            assert_eq!(report.gap_writes, 0, "{name}: wrote outside the products");
            report
                .check(&Tolerance::for_kernel(kernel.types(), m, n, k))
                .unwrap_or_else(|broken| panic!("{name} {count} x {m}x{n}x{k}: {broken}"));
            checked += 1;
        }
    }
    assert_eq!(checked, 4 * SPECS.len());
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn fused_kernels_refuse_missing_and_foreign_arguments() {
    let (ctx, stream) = gpu();
    let emitted = gemm_codegen::emit_str(SPECS[0]).unwrap();
    let kernel =
        gemm_runtime::GemmKernel::<half::bf16, half::bf16>::from_emitted(&ctx, &emitted).unwrap();
    let (m, n, k) = (128, 256, 64);
    let a = stream.alloc_zeros::<half::bf16>((m * k) as usize).unwrap();
    let b = stream.alloc_zeros::<half::bf16>((k * n) as usize).unwrap();
    let mut c = stream.alloc_zeros::<half::bf16>((m * n) as usize).unwrap();
    let bias = stream.alloc_zeros::<half::bf16>(n as usize).unwrap();
    let bias_f32 = stream.alloc_zeros::<f32>(n as usize).unwrap();
    let short_c_in = stream
        .alloc_zeros::<half::bf16>((m * n - 1) as usize)
        .unwrap();
    let lds = LeadingDims {
        lda: k,
        ldb: n,
        ldc: n,
    };
    let mut scratch = stream.alloc_zeros::<half::bf16>((m * n) as usize).unwrap();
    let mut error = |epilogue: &mut Epilogue<'_, half::bf16>| {
        let c = &mut scratch;
        kernel
            .launch_fused(&stream, &a, &b, c, m, n, k, lds, Batch::ONE, epilogue)
            .unwrap_err()
            .to_string()
    };
    // A plain launch of a kernel that reads C-in and a bias.
    let plain = kernel
        .launch(&stream, &a, &b, &mut c, m, n, k)
        .unwrap_err()
        .to_string();
    assert!(plain.contains("reads C-in"), "{plain}");
    let no_bias = error(&mut Epilogue::none().beta(0.5, CIn::Output));
    assert!(no_bias.contains("adds a col bias"), "{no_bias}");
    let wrong_type = error(
        &mut Epilogue::none()
            .beta(0.5, CIn::Output)
            .bias(BiasArg::f32(&bias_f32)),
    );
    assert!(
        wrong_type.contains("the bias holds f32, but the kernel reads bf16"),
        "{wrong_type}"
    );
    let short = error(
        &mut Epilogue::none()
            .beta(0.5, CIn::Buffer(&short_c_in))
            .bias(BiasArg::output(&bias)),
    );
    assert!(short.contains("C-in, laid out as C"), "{short}");
    kernel
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
            &mut Epilogue::none()
                .alpha(2.0)
                .beta(0.5, CIn::Output)
                .bias(BiasArg::output(&bias)),
        )
        .unwrap();
    stream.synchronize().unwrap();
}

/// Kernels whose fused epilogue the test below breaks: Hopper with C-in by TMA (ping-pong),
/// mma.sync and SIMT.
const BETA_DROPPING: [&str; 3] = [SPECS[7], SPECS[10], SPECS[15]];

/// `ptx` with β read as 0: C-in is still loaded, and left out of D.
fn without_beta(emitted: &Emitted) -> String {
    let load = format!(
        "\tld.param.f32\t%fe_beta, [{}_beta];",
        emitted.kernel_name()
    );
    assert!(emitted.ptx().contains(&load), "{}", emitted.kernel_name());
    emitted
        .ptx()
        .replace(&load, "\tmov.f32\t%fe_beta, 0f00000000;")
}

/// The edited kernels assemble and keep their promises: what breaks is D, not the code path.
#[test]
fn kernels_edited_to_drop_beta_assemble_with_their_promises() {
    for spec in BETA_DROPPING {
        let emitted = gemm_codegen::emit_str(spec).unwrap();
        let report =
            gemm_runtime::SassReport::from_ptx(&without_beta(&emitted), emitted.spec().arch.name())
                .unwrap_or_else(|error| panic!("{spec}: {error}"));
        report
            .require(emitted.expected_sass())
            .unwrap_or_else(|mismatch| panic!("{spec}: {mismatch}"));
    }
}

/// The fused verification must be able to say no: a kernel that leaves β·C-in out fails its
/// tolerance on the shapes the fused tests use, a decode and a prefill (where C-in's share of
/// D is smallest: the deepest K), while the unedited kernel passes the same problems.
#[test]
#[ignore = "needs a CUDA GPU"]
fn fused_verification_fails_kernels_that_drop_beta_c_in() {
    use gemm_codegen::KernelInfo;
    let (ctx, stream) = gpu();
    for spec in BETA_DROPPING {
        let emitted: &'static Emitted = Box::leak(Box::new(gemm_codegen::emit_str(spec).unwrap()));
        let name = emitted.kernel_name();
        let mut parts = emitted.info().parts();
        parts.ptx = Box::leak(without_beta(emitted).into_boxed_str());
        // SAFETY: the edit only sets β to 0 in a register: the kernel touches no memory the
        // unedited one does not.
        let broken_info = unsafe { KernelInfo::from_parts(parts) };
        let good = AnyKernel::from_emitted(&ctx, emitted).unwrap();
        let broken = AnyKernel::load(&ctx, &broken_info).unwrap();
        let fused = FusedSpec::of_info(good.info()).unwrap();
        let case = FusedCase::for_spec(&fused);
        for (m, n, k) in [(16, 4096, 4096), (512, 2048, 1024), (128, 256, 16384)] {
            let lds = LeadingDims {
                lda: k,
                ldb: n,
                ldc: n,
            };
            let run = |kernel: &AnyKernel| {
                with_kernel!(kernel, typed => {
                    verify_fused_batch(typed, &stream, m, n, k, lds, Batch::ONE, 0xBE7A, &case)
                })
                .unwrap_or_else(|e| panic!("{name} {m}x{n}x{k}: {e}"))
                .worst()
                .copied()
                .expect("one product")
            };
            let tolerance = Tolerance::for_kernel(good.types(), m, n, k);
            let (good_report, broken_report) = (run(&good), run(&broken));
            eprintln!("{name} {m}x{n}x{k}: {good_report}; without β·C-in: {broken_report}");
            good_report
                .check(&tolerance)
                .unwrap_or_else(|wrong| panic!("{name} {m}x{n}x{k} unedited: {wrong}"));
            assert!(
                broken_report.check(&tolerance).is_err(),
                "{name} {m}x{n}x{k}: without β·C-in it passes ({broken_report})"
            );
        }
    }
}
