//! CUDA graphs: every launch path captured on a stream of its own and replayed, bitwise equal
//! to the eager launch, C poisoned between them; and the clear errors of what a capture
//! cannot hold (buffers tracked with events, a kernel's first load, the legacy stream). The
//! test that is not ignored checks, without a GPU, that the specs here emit; run the rest
//! with `--ignored` on a machine with an NVIDIA Hopper GPU.

use gemm_codegen::catalog::{CATALOG, FP8};
use gemm_dsl::{Activation, Bias, BiasAlong, DType, Layout};
use gemm_harness::verify::{
    assert_refused_and_capture_goes_on, compare, cpu_reference, Problem as Inputs,
    Reference::CpuF64, Tolerance,
};
use gemm_runtime::cudarc::driver::sys::{
    CUgraphInstantiate_flags, CUstreamCaptureMode, CUstreamCaptureStatus,
};
use gemm_runtime::fp8::E4m3;
use gemm_runtime::{
    begin_capture, open_context, Batch, BiasArg, CudaContext, CudaSlice, CudaStream, Element,
    Epilogue, Error, FusedSpec, GemmKernel, KernelTypes, LeadingDims, Matmul, Problem,
};
use half::bf16;
use std::sync::Arc;

const GLOBAL: CUstreamCaptureMode = CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_GLOBAL;
const THREAD_LOCAL: CUstreamCaptureMode = CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL;

/// Launches each capture records: a graph replays them in order.
const LAUNCHES_PER_CAPTURE: usize = 3;

/// A bias and GELU after the product, no C-in: repeated launches write the same D.
const BIAS_GELU_SPEC: &str =
    "name: graph_bias_gelu, mma: wgmma, arch: sm_90a, schedule: persistent, bias: col, activation: gelu";

/// A context whose buffers carry no events (allocated after tracking is off), and a stream of
/// its own: what a capture needs.
fn untracked_gpu() -> (Arc<CudaContext>, Arc<CudaStream>) {
    let ctx = open_context(0).expect("these tests need a CUDA GPU");
    // SAFETY: every test orders its work on its one stream.
    unsafe { ctx.disable_event_tracking() };
    let stream = ctx.new_stream().expect("a stream");
    (ctx, stream)
}

fn catalog_kernel<In: Element, Out: Element>(
    ctx: &Arc<CudaContext>,
    name: &str,
) -> GemmKernel<In, Out> {
    let entry = CATALOG
        .iter()
        .chain(FP8)
        .find(|entry| entry.name == name)
        .unwrap_or_else(|| panic!("the catalog has {name}"));
    let emitted = gemm_codegen::emit_str(entry.spec).unwrap_or_else(|e| panic!("{name}: {e}"));
    GemmKernel::from_emitted(ctx, &emitted).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// The bytes of plain element values (f32, bf16, f16, fp8: no padding, every bit pattern
/// valid), for bitwise comparisons.
fn bytes<T: Element>(values: &[T]) -> &[u8] {
    // SAFETY: the element types are plain data of `T::BYTES` bytes each, without padding.
    unsafe { std::slice::from_raw_parts(values.as_ptr().cast(), std::mem::size_of_val(values)) }
}

/// Runs `launch` on `c` eagerly, poisons `c`, captures `launch` [`LAUNCHES_PER_CAPTURE`]
/// times in `mode`, checks the capture ran nothing, replays the graph once and checks `c`
/// bitwise equal to the eager result.
fn replays_bitwise<Out: Element>(
    what: &str,
    stream: &Arc<CudaStream>,
    c: &mut CudaSlice<Out>,
    mode: CUstreamCaptureMode,
    mut launch: impl FnMut(&mut CudaSlice<Out>) -> Result<(), Error>,
) {
    let poison = vec![Out::poison(); c.len()];
    stream.memcpy_htod(&poison, c).unwrap();
    launch(c).unwrap_or_else(|e| panic!("{what}, eager: {e}"));
    let eager = stream.clone_dtoh(c).unwrap();
    let unwritten = eager.iter().filter(|x| x.is_poison()).count();
    assert_eq!(
        unwritten, 0,
        "{what}: the eager launch left elements unwritten"
    );

    stream.memcpy_htod(&poison, c).unwrap();
    stream.synchronize().unwrap();
    begin_capture(stream, mode).unwrap_or_else(|e| panic!("{what}: {e}"));
    for _ in 0..LAUNCHES_PER_CAPTURE {
        launch(c).unwrap_or_else(|e| panic!("{what}, captured: {e}"));
    }
    assert_eq!(
        stream.capture_status().unwrap(),
        CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_ACTIVE,
        "{what}: the capture was invalidated"
    );
    let graph = stream
        .end_capture(CUgraphInstantiate_flags(0))
        .unwrap_or_else(|e| panic!("{what}: ending the capture: {e}"))
        .expect("the capture holds launches");
    let before_replay = stream.clone_dtoh(c).unwrap();
    assert!(
        before_replay.iter().all(|x| x.is_poison()),
        "{what}: the capture ran launches"
    );

    graph.launch().unwrap();
    stream.synchronize().unwrap();
    let replayed = stream.clone_dtoh(c).unwrap();
    assert!(
        bytes(&replayed) == bytes(&eager),
        "{what}: the replay differs from the eager launch in {} of {} elements",
        replayed
            .iter()
            .zip(&eager)
            .filter(|(r, e)| bytes(std::slice::from_ref(*r)) != bytes(std::slice::from_ref(*e)))
            .count(),
        eager.len()
    );
}

/// Random packed operands and an output for `m x n x k`, on `stream`.
fn operands<In: Element, Out: Element>(
    stream: &Arc<CudaStream>,
    (m, n, k): (u32, u32, u32),
    count: u32,
    seed: u64,
) -> (CudaSlice<In>, CudaSlice<In>, CudaSlice<Out>) {
    let inputs = Inputs::<In>::random(m * count, n, k, seed);
    let mut b = inputs.b.clone();
    for _ in 1..count {
        b.extend_from_slice(&inputs.b);
    }
    let a = stream.clone_htod(&inputs.a).unwrap();
    let b = stream.clone_htod(&b).unwrap();
    let c = stream.alloc_zeros::<Out>((m * n * count) as usize).unwrap();
    (a, b, c)
}

/// A plain launch of `name` at `dims`, in `mode`.
fn plain_launch_replays(name: &str, dims: (u32, u32, u32), mode: CUstreamCaptureMode) {
    let (ctx, stream) = untracked_gpu();
    let kernel = catalog_kernel::<bf16, bf16>(&ctx, name);
    let (m, n, k) = dims;
    let (a, b, mut c) = operands::<bf16, bf16>(&stream, dims, 1, 0x6A_0001);
    replays_bitwise(name, &stream, &mut c, mode, |c| {
        kernel.launch(&stream, &a, &b, c, m, n, k)
    });
}

#[test]
fn the_specs_captured_here_emit() {
    gemm_codegen::emit_str(BIAS_GELU_SPEC).unwrap();
    for name in [
        "mma_bf16_128x128x32_s3",
        "wgmma_bf16_128x256x64_s4_persistent",
        "wgmma_bf16_128x256x64_s4_cluster2x1",
        "wgmma_bf16_128x256x64_s4_streamk",
    ] {
        let entry = CATALOG.iter().find(|e| e.name == name).expect(name);
        gemm_codegen::emit_str(entry.spec).unwrap();
    }
    let streamk = CATALOG
        .iter()
        .find(|e| e.name == "wgmma_bf16_128x256x64_s4_streamk")
        .unwrap();
    // A stream-K kernel takes a workspace, so it launches cooperatively.
    let emitted = gemm_codegen::emit_str(streamk.spec).unwrap();
    assert!(emitted.info().launch().workspace_bytes_per_block > 0);
    let cluster = CATALOG
        .iter()
        .find(|e| e.name == "wgmma_bf16_128x256x64_s4_cluster2x1")
        .unwrap();
    let emitted = gemm_codegen::emit_str(cluster.spec).unwrap();
    assert_eq!(emitted.info().launch().cluster_dims(), (2, 1));
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn mma_sync_launch_capture_replays_bitwise() {
    plain_launch_replays("mma_bf16_128x128x32_s3", (256, 384, 512), GLOBAL);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn wgmma_tma_launch_capture_replays_bitwise_in_global_and_thread_local_mode() {
    for mode in [GLOBAL, THREAD_LOCAL] {
        plain_launch_replays(
            "wgmma_bf16_128x256x64_s4_persistent",
            (512, 1024, 768),
            mode,
        );
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn cluster_launch_capture_replays_bitwise() {
    plain_launch_replays(
        "wgmma_bf16_128x256x64_s4_cluster2x1",
        (512, 1024, 768),
        GLOBAL,
    );
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn cooperative_stream_k_launch_capture_replays_bitwise() {
    let name = "wgmma_bf16_128x256x64_s4_streamk";
    let (ctx, stream) = untracked_gpu();
    let kernel = catalog_kernel::<bf16, bf16>(&ctx, name);
    assert!(kernel.info().launch().workspace_bytes_per_block > 0);
    // Fewer tiles than multiprocessors: the grid splits K into stream-K units, every launch
    // reusing the workspace.
    let (m, n, k) = (1024, 1536, 2048);
    let (a, b, mut c) = operands::<bf16, bf16>(&stream, (m, n, k), 1, 0x6A_0002);
    replays_bitwise(name, &stream, &mut c, GLOBAL, |c| {
        kernel.launch(&stream, &a, &b, c, m, n, k)
    });
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn strided_batched_launch_capture_replays_bitwise() {
    let name = "mma_bf16_128x128x32_s3";
    let (ctx, stream) = untracked_gpu();
    let kernel = catalog_kernel::<bf16, bf16>(&ctx, name);
    let (m, n, k, count) = (200, 264, 328, 3);
    let launch = *kernel.info().launch();
    let lds = LeadingDims::packed(&launch, m, n, k);
    let batch = Batch::packed(&launch, count, (m, n, k), lds);
    let (a, b, mut c) = operands::<bf16, bf16>(&stream, (m, n, k), count, 0x6A_0003);
    replays_bitwise(name, &stream, &mut c, GLOBAL, |c| {
        kernel.launch_strided_batched(&stream, &a, &b, c, m, n, k, lds, batch)
    });
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn fused_bias_gelu_launch_capture_replays_bitwise() {
    let (ctx, stream) = untracked_gpu();
    let emitted = gemm_codegen::emit_str(BIAS_GELU_SPEC).unwrap();
    let kernel = GemmKernel::<bf16, bf16>::from_emitted(&ctx, &emitted).unwrap();
    let (m, n, k) = (384, 1024, 512);
    let (a, b, mut c) = operands::<bf16, bf16>(&stream, (m, n, k), 1, 0x6A_0004);
    let bias_host: Vec<bf16> = (0..n)
        .map(|i| bf16::from_f32((i % 7) as f32 / 8.0 - 0.4))
        .collect();
    let bias = stream.clone_htod(&bias_host).unwrap();
    let lds = LeadingDims::packed(kernel.info().launch(), m, n, k);
    replays_bitwise("bias + gelu", &stream, &mut c, GLOBAL, |c| {
        let mut epilogue = Epilogue::none().bias(BiasArg::output(&bias));
        kernel.launch_fused(&stream, &a, &b, c, m, n, k, lds, Batch::ONE, &mut epilogue)
    });
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn fp8_launch_capture_replays_bitwise() {
    let (ctx, stream) = untracked_gpu();
    let name = FP8[0].name;
    let kernel = catalog_kernel::<E4m3, bf16>(&ctx, name);
    let (m, n, k) = (256, 512, 512);
    let (a, b, mut c) = operands::<E4m3, bf16>(&stream, (m, n, k), 1, 0x6A_0005);
    let scales = [
        stream.clone_htod(&[0.5f32]).unwrap(),
        stream.clone_htod(&[1.25f32]).unwrap(),
    ];
    let lds = LeadingDims::packed(kernel.info().launch(), m, n, k);
    replays_bitwise(name, &stream, &mut c, GLOBAL, |c| {
        let mut epilogue = Epilogue::none().quant_scales(&scales[0], &scales[1]);
        kernel.launch_fused(&stream, &a, &b, c, m, n, k, lds, Batch::ONE, &mut epilogue)
    });
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn matmul_run_capture_replays_bitwise_for_decode_and_a_square() {
    let (ctx, stream) = untracked_gpu();
    let matmul = Matmul::<bf16, bf16>::new(&ctx).unwrap();
    for (seed, (m, n, k)) in [(16, 4096, 4096), (4096, 4096, 4096)]
        .into_iter()
        .enumerate()
    {
        let problem = Problem::new(m, n, k, Layout::RowRow);
        let picked = matmul.pick(&problem).unwrap().kernel.to_string();
        let (a, b, mut c) = operands::<bf16, bf16>(&stream, (m, n, k), 1, 0x6A_0010 + seed as u64);
        // The eager run loads the kernel; the capture then holds launches only.
        replays_bitwise(&picked, &stream, &mut c, GLOBAL, |c| {
            matmul.run(&stream, &a, &b, c, &problem)
        });
    }
}

/// A problem whose lines miss 16 bytes stages them in 128-byte scratch lines: the capture
/// holds the scratch's allocations, the copies in and out, the product and the frees, for a
/// single product (B and C staged), a batch (A too: K is odd) and a decode problem (B staged,
/// run as its swapped product); the replay is also checked against float64.
#[test]
#[ignore = "needs a CUDA GPU"]
fn matmul_run_capture_replays_bitwise_with_staged_inputs() {
    let (ctx, stream) = untracked_gpu();
    let matmul = Matmul::<bf16, bf16>::new(&ctx).unwrap();
    for (seed, (count, m, n, k)) in [
        (1, 777, 4099, 2048),
        (2, 256, 1001, 777),
        (1, 16, 4099, 4096),
    ]
    .into_iter()
    .enumerate()
    {
        let problem = Problem::new(m, n, k, Layout::RowRow).with_batch(count);
        let picked = matmul.pick(&problem).unwrap();
        assert!(picked.staged.b, "{problem}: {picked:?}");
        assert_eq!(picked.staged.a, k % 8 != 0, "{problem}: {picked:?}");
        let seed = 0x6A_0040 + seed as u64;
        let (a, b, mut c) = operands::<bf16, bf16>(&stream, (m, n, k), count, seed);
        let what = format!("{problem} staged on {}", picked.kernel);
        replays_bitwise(&what, &stream, &mut c, GLOBAL, |c| {
            matmul.run(&stream, &a, &b, c, &problem)
        });
        // The replay (bitwise the eager run) against float64: the batch's products share B,
        // so they are one product of A's stacked rows.
        let reference = cpu_reference(&Inputs::<bf16>::random(m * count, n, k, seed)).unwrap();
        let report = compare(
            &stream.clone_dtoh(&c).unwrap(),
            &reference,
            m * count,
            n,
            n,
            CpuF64,
        )
        .unwrap();
        let types = KernelTypes::new(DType::Bf16, DType::Bf16).unwrap();
        report
            .check(&Tolerance::for_kernel(types, m, n, k))
            .unwrap_or_else(|broken| panic!("{what}: {broken} ({report})"));
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn matmul_run_fused_capture_replays_bitwise() {
    let (ctx, stream) = untracked_gpu();
    let fused = FusedSpec {
        bias: Bias::Vector {
            along: BiasAlong::Col,
            dtype: DType::Bf16,
        },
        activation: Activation::Gelu,
        ..FusedSpec::NONE
    };
    let matmul = Matmul::<bf16, bf16>::new_fused(&ctx, fused).unwrap();
    let (m, n, k) = (128, 6144, 4096);
    let problem = Problem::new(m, n, k, Layout::RowRow);
    let (a, b, mut c) = operands::<bf16, bf16>(&stream, (m, n, k), 1, 0x6A_0020);
    let bias_host: Vec<bf16> = (0..n)
        .map(|i| bf16::from_f32((i % 5) as f32 / 8.0))
        .collect();
    let bias = stream.clone_htod(&bias_host).unwrap();
    replays_bitwise("run_fused", &stream, &mut c, GLOBAL, |c| {
        let mut epilogue = Epilogue::none().bias(BiasArg::output(&bias));
        matmul.run_fused(&stream, &a, &b, c, &problem, &mut epilogue)
    });
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn matmul_run_strided_capture_replays_bitwise() {
    let (ctx, stream) = untracked_gpu();
    let matmul = Matmul::<bf16, bf16>::new(&ctx).unwrap();
    let (m, n, k, count) = (64, 1024, 1024, 4);
    let problem = Problem::new(m, n, k, Layout::RowRow).with_batch(count);
    let launch = *matmul.kernel_for(&problem).unwrap().info().launch();
    let lds = LeadingDims {
        lda: problem.lda,
        ldb: problem.ldb,
        ldc: problem.ldc,
    };
    let batch = Batch::packed(&launch, count, (m, n, k), lds);
    let (a, b, mut c) = operands::<bf16, bf16>(&stream, (m, n, k), count, 0x6A_0030);
    replays_bitwise("run_strided", &stream, &mut c, GLOBAL, |c| {
        matmul.run_strided(&stream, &a, &b, c, &problem, batch)
    });
}

/// With event tracking on (the default) and a second stream, a launch inside a capture is
/// refused before it touches a buffer's events: the capture stays active, ends, and the
/// stream runs eagerly afterwards. The runtime's `begin_capture` refuses such a context and
/// the legacy stream up front.
#[test]
#[ignore = "needs a CUDA GPU"]
fn capture_with_event_tracking_is_refused_and_the_stream_stays_usable() {
    let ctx = open_context(0).expect("these tests need a CUDA GPU");
    let stream = ctx.new_stream().unwrap();
    assert!(ctx.is_managing_stream_synchronization());
    let name = "mma_bf16_128x128x32_s3";
    let kernel = catalog_kernel::<bf16, bf16>(&ctx, name);
    let (m, n, k) = (256, 384, 512);
    let (a, b, mut c) = operands::<bf16, bf16>(&stream, (m, n, k), 1, 0x6A_0040);
    kernel.launch(&stream, &a, &b, &mut c, m, n, k).unwrap();
    let eager = stream.clone_dtoh(&c).unwrap();

    let refused = begin_capture(&stream, GLOBAL).unwrap_err();
    assert!(
        matches!(refused, Error::CaptureNeedsUntrackedBuffers { .. }),
        "{refused}"
    );
    assert_eq!(
        stream.capture_status().unwrap(),
        CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE
    );
    let legacy = begin_capture(&ctx.default_stream(), GLOBAL).unwrap_err();
    assert!(
        matches!(legacy, Error::LegacyStreamCapture { .. }),
        "{legacy}"
    );

    // A capture begun without the runtime: the launch is refused, the capture goes on.
    stream.begin_capture(GLOBAL).unwrap();
    let refused = kernel.launch(&stream, &a, &b, &mut c, m, n, k).unwrap_err();
    assert!(
        refused.to_string().contains("disable_event_tracking()"),
        "{refused}"
    );
    assert_refused_and_capture_goes_on(&ctx, &stream, &refused);

    let poison = vec![bf16::poison(); c.len()];
    stream.memcpy_htod(&poison, &mut c).unwrap();
    kernel.launch(&stream, &a, &b, &mut c, m, n, k).unwrap();
    let after = stream.clone_dtoh(&c).unwrap();
    assert!(
        bytes(&after) == bytes(&eager),
        "the eager run after the refusal differs"
    );
}

/// A `Matmul`'s first run of a problem loads its kernel, which a capture cannot hold: refused
/// with the capture left active; loaded ahead, the same run captures.
#[test]
#[ignore = "needs a CUDA GPU"]
fn matmul_refuses_to_load_a_kernel_during_a_capture() {
    let (ctx, stream) = untracked_gpu();
    let matmul = Matmul::<bf16, bf16>::new(&ctx).unwrap();
    let (m, n, k) = (16, 4096, 4096);
    let problem = Problem::new(m, n, k, Layout::RowRow);
    let (a, b, mut c) = operands::<bf16, bf16>(&stream, (m, n, k), 1, 0x6A_0050);
    begin_capture(&stream, GLOBAL).unwrap();
    let refused = matmul.run(&stream, &a, &b, &mut c, &problem).unwrap_err();
    assert!(
        matches!(&refused, Error::CaptureLoadsKernel { kernel } if kernel == matmul.pick(&problem).unwrap().kernel),
        "{refused}"
    );
    assert_eq!(
        stream.capture_status().unwrap(),
        CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_ACTIVE
    );
    drop(stream.end_capture(CUgraphInstantiate_flags(0)).unwrap());
    matmul.kernel_for(&problem).unwrap();
    replays_bitwise("after loading", &stream, &mut c, GLOBAL, |c| {
        matmul.run(&stream, &a, &b, c, &problem)
    });
}

/// `Matmul::warm_up` loads every kernel the problems pick (each once, the distinct picks
/// side by side), so a capture of their first runs holds launches only and replays bitwise
/// equal to eager runs; warming up again loads nothing.
#[test]
#[ignore = "needs a CUDA GPU"]
fn warm_up_loads_every_picked_kernel_so_first_runs_capture() {
    let (ctx, stream) = untracked_gpu();
    let matmul = Matmul::<bf16, bf16>::new(&ctx).unwrap();
    let dims = [
        (16, 4096, 4096),
        (128, 6144, 4096),
        (512, 28672, 4096),
        (4096, 4096, 4096),
        (16, 4096, 4096),
    ];
    let problems: Vec<Problem> = dims
        .iter()
        .map(|&(m, n, k)| Problem::new(m, n, k, Layout::RowRow))
        .collect();
    let mut picked: Vec<String> = problems
        .iter()
        .map(|problem| matmul.pick(problem).unwrap().kernel.to_string())
        .collect();
    picked.sort();
    picked.dedup();
    let warm = matmul.warm_up(&problems).unwrap();
    let mut loaded = warm.loaded.clone();
    loaded.sort();
    assert_eq!(loaded, picked, "warm_up loads each distinct pick once");
    assert_eq!(warm.already_loaded, 0);

    let buffers: Vec<_> = dims
        .iter()
        .enumerate()
        .map(|(seed, &dims)| operands::<bf16, bf16>(&stream, dims, 1, 0x6A_0060 + seed as u64))
        .collect();
    let mut outputs: Vec<CudaSlice<bf16>> = buffers.iter().map(|(_, _, c)| c.clone()).collect();
    let poison = |outputs: &mut Vec<CudaSlice<bf16>>| {
        for c in outputs.iter_mut() {
            stream
                .memcpy_htod(&vec![bf16::poison(); c.len()], c)
                .unwrap();
        }
        stream.synchronize().unwrap();
    };
    poison(&mut outputs);
    begin_capture(&stream, GLOBAL).unwrap();
    for ((problem, (a, b, _)), c) in problems.iter().zip(&buffers).zip(outputs.iter_mut()) {
        matmul
            .run(&stream, a, b, c, problem)
            .unwrap_or_else(|e| panic!("{problem}, captured after warm_up: {e}"));
    }
    let graph = stream
        .end_capture(CUgraphInstantiate_flags(0))
        .unwrap()
        .expect("the capture holds launches");
    graph.launch().unwrap();
    stream.synchronize().unwrap();
    let replayed: Vec<Vec<bf16>> = outputs
        .iter()
        .map(|c| stream.clone_dtoh(c).unwrap())
        .collect();

    poison(&mut outputs);
    for ((problem, (a, b, _)), c) in problems.iter().zip(&buffers).zip(outputs.iter_mut()) {
        matmul.run(&stream, a, b, c, problem).unwrap();
    }
    for ((problem, c), replay) in problems.iter().zip(&outputs).zip(&replayed) {
        let eager = stream.clone_dtoh(c).unwrap();
        assert!(
            !eager.iter().any(|x| x.is_poison()),
            "{problem}: the eager run left elements unwritten"
        );
        assert!(
            bytes(&eager) == bytes(replay),
            "{problem}: the replay differs from the eager run"
        );
    }

    let again = matmul.warm_up(&problems).unwrap();
    assert!(again.loaded.is_empty(), "{again:?}");
    assert_eq!(again.already_loaded, picked.len());
}
