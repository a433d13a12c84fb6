//! fp8 kernels (Hopper, `dtype: e4m3 | e5m2`) on the GPU: the catalog's fp8 specs and variants
//! of them (e5m2, the mixed pairs, f16 and f32 out, a fused epilogue after the scales, block
//! scales on stream-K units and in a cluster) on edge shapes, padded leading dimensions and
//! batches (block scales: one product with the padded leading dimensions; a batch is
//! refused, in a test of its own), against float64 on the decoded inputs, C poisoned first. The tests that are not
//! ignored check, without a GPU, what the specs promise; run the rest with `--ignored` on a
//! machine with an NVIDIA Hopper GPU.

use gemm_codegen::catalog::FP8;
use gemm_codegen::Emitted;
use gemm_dsl::abi::{ParamKind, StorageOrder};
use gemm_dsl::{DType, Layout};
use gemm_harness::verify::{
    verify_fused_batch, verify_fused_batch_through, FusedCase, Tolerance, BLOCK_SCALE_MAX,
};
use gemm_runtime::fp8::{E4m3, E5m2};
use gemm_runtime::{
    open_context, AnyKernel, Batch, CudaContext, CudaStream, Element, Epilogue, Error, FusedSpec,
    GemmKernel, KernelTypes, LeadingDims,
};
use half::{bf16, f16};
use std::sync::Arc;

/// The catalog's fp8 specs, then variants: e5m2, e4m3 x e5m2 and e5m2 x e4m3, f16 and f32 out
/// (f32 C stored from registers), and α, a column bias and GELU after the scales.
fn specs() -> Vec<String> {
    let persistent = FP8[0].spec;
    let mut specs: Vec<String> = FP8.iter().map(|entry| entry.spec.to_string()).collect();
    specs.push(
        persistent
            .replace(FP8[0].name, "fp8_e5m2")
            .replace("dtype: e4m3", "dtype: e5m2"),
    );
    for (name, types) in [
        ("fp8_e4m3_e5m2", "dtype: e4m3, b_dtype: e5m2"),
        ("fp8_e5m2_e4m3", "dtype: e5m2, b_dtype: e4m3"),
    ] {
        specs.push(
            catalog_spec("wgmma_e4m3_128x128x128_s6_pingpong")
                .replace("wgmma_e4m3_128x128x128_s6_pingpong", name)
                .replace("dtype: e4m3", types),
        );
    }
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
    let block = catalog_spec("wgmma_e4m3_128x128x128_s5_block");
    // Promotion every two k tiles, per-tensor scales.
    specs.push(
        block
            .replace("wgmma_e4m3_128x128x128_s5_block", "fp8_promote256")
            .replace("quant: block, promote: 128", "quant: tensor, promote: 256"),
    );
    // Block scales in two-block clusters, B multicast: each block copies its own scales.
    specs.push(
        block
            .replace("wgmma_e4m3_128x128x128_s5_block", "fp8_block_cluster")
            .replace("copy: tma,", "copy: tma(multicast = 2), cluster: 2x1,"),
    );
    // Variants of catalog specs: the catalog's name, the variant's, its edits.
    type Variant = (
        &'static str,
        &'static str,
        &'static [(&'static str, &'static str)],
    );
    const STREAMK: &str = "wgmma_e4m3_64x128x128_s6_streamk";
    const NARROW64: (&str, &str) = ("tile: 64x128x128", "tile: 64x64x128");
    let variants: [Variant; 5] = [
        // Block scales on stream-K units, which start mid-tile along K.
        (
            STREAMK,
            "fp8_block_streamk",
            &[("quant: tensor", "quant: block")],
        ),
        // Tiles narrower than the 128-byte swizzle span (B is K-major: any 16 columns): 64
        // columns with a stream-K tail, per tensor and with block scales (two tiles share a
        // block of B's scales); 16 for a decode problem's columns, alone and in two-block
        // clusters (each block loads one 8-row atom of B).
        (STREAMK, "fp8_narrow64_streamk", &[NARROW64]),
        (
            STREAMK,
            "fp8_narrow64_block",
            &[NARROW64, ("quant: tensor", "quant: block")],
        ),
        (
            "wgmma_e4m3_128x128x128_s6_pingpong",
            "fp8_narrow16",
            &[
                ("tile: 128x128x128", "tile: 128x16x128"),
                ("consumers: pingpong", "consumers: 2"),
                (", schedule: persistent(raster = m, group = 8)", ""),
            ],
        ),
        (
            "wgmma_e4m3_128x256x128_s4_cluster2x1",
            "fp8_narrow16_cluster",
            &[("tile: 128x256x128", "tile: 128x16x128")],
        ),
    ];
    for (base, name, edits) in variants {
        let spec = edits.iter().fold(
            catalog_spec(base).replace(base, name),
            |spec, (from, to)| spec.replace(from, to),
        );
        specs.push(spec);
    }
    // The fp8 set's small-M members that no catalog spec is: 64x128 and 64x64 tiles per block,
    // 64x256 tiles with a stream-K tail, 16-column tiles.
    let set = &gemm_runtime::sets::SM90_FP8;
    // The swapped product's members (C column-major), checked through the swap.
    for name in [
        "w64x128",
        "w64x64",
        "w64x256_sk",
        "w128x16",
        "w64x16",
        "swap64x16",
        "swap128x16_p",
    ] {
        let member = set
            .members
            .iter()
            .find(|member| member.name == name)
            .unwrap_or_else(|| panic!("{name} is a member of {}", set.name));
        specs.push(format!(
            "{}, quant: tensor",
            set.spec(member, DType::E4m3, DType::Bf16, Layout::RowCol)
        ));
    }
    specs
}

fn catalog_spec(name: &str) -> &'static str {
    FP8.iter()
        .find(|entry| entry.name == name)
        .unwrap_or_else(|| panic!("{name} is an fp8 catalog spec"))
        .spec
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
        assert_ne!(FusedSpec::of_spec(e.spec()).quant, gemm_dsl::Quant::None);
    }
}

/// The entry point over the block-scaled fp8 set (`Matmul::new_fused` with `Quant::Block`),
/// and that epilogue.
fn block_scaled_matmul(ctx: &Arc<CudaContext>) -> (gemm_runtime::Matmul<E4m3, bf16>, FusedSpec) {
    let fused = FusedSpec {
        quant: gemm_dsl::Quant::Block,
        ..FusedSpec::NONE
    };
    let matmul = gemm_runtime::Matmul::<E4m3, bf16>::new_fused(ctx, fused)
        .expect("the block-scaled fp8 set loads");
    (matmul, fused)
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

fn check<In: Element, Out: Element, InB: Element>(
    ctx: &Arc<CudaContext>,
    stream: &Arc<CudaStream>,
    emitted: &Emitted,
) -> usize {
    let kernel = GemmKernel::<In, Out, InB>::from_emitted(ctx, emitted)
        .unwrap_or_else(|e| panic!("{}: {e}", emitted.kernel_name()));
    let fused = FusedSpec::of_spec(emitted.spec());
    let case = FusedCase::for_spec(&fused);
    let types = KernelTypes::of_spec(emitted.spec()).unwrap();
    let mut checked = 0;
    for (seed, &(m, n, k, count)) in SHAPES.iter().enumerate() {
        let launch = kernel.info().launch();
        let padded = count > 1;
        // Block scales cover one product (the launch refuses a batch:
        // `fp8_block_scales_refuse_a_batch`): their padded case is one product with the
        // same padded leading dimensions.
        let count = if fused.quant == gemm_dsl::Quant::Block {
            1
        } else {
            count
        };
        // The kernel's own frame: a kernel that stores C column-major runs `C = A·B` swapped
        // (`n x m x k`, A and B exchanged), over the same lines.
        let swapped = launch.c_order == StorageOrder::ColMajor;
        let (frame_m, frame_n) = if swapped { (n, m) } else { (m, n) };
        let frame_lds = if padded {
            // 16 more bytes after every line, and (in a batch) a line's worth between the
            // matrices.
            LeadingDims {
                lda: k + 16,
                ldb: k + 16,
                ldc: n + 16 / Out::BYTES,
            }
        } else {
            LeadingDims::packed(launch, frame_m, frame_n, k)
        };
        let packed = Batch::packed(launch, count, (frame_m, frame_n, k), frame_lds);
        let frame_batch = if count == 1 {
            Batch::ONE
        } else {
            Batch {
                count,
                stride_a: packed.stride_a + 16,
                stride_b: packed.stride_b + 16,
                stride_c: packed.stride_c + u64::from(16 / Out::BYTES),
            }
        };
        // The caller's frame.
        let (lds, batch) = if swapped {
            (frame_lds.exchanged(), frame_batch.exchanged())
        } else {
            (frame_lds, frame_batch)
        };
        let report = match launch.c_order {
            StorageOrder::RowMajor => verify_fused_batch(
                &kernel,
                stream,
                m,
                n,
                k,
                lds,
                batch,
                seed as u64 + 11,
                &case,
            ),
            StorageOrder::ColMajor => {
                // A and B change places: one type (the loader refuses a mixed pair here).
                let one_type = GemmKernel::<In, Out, In>::from_emitted(ctx, emitted)
                    .unwrap_or_else(|e| panic!("{}: {e}", emitted.kernel_name()));
                verify_swapped(&one_type, stream, (m, n, k), lds, batch, seed, &case)
            }
        }
        .unwrap_or_else(|e| panic!("{} {m}x{n}x{k}x{count}: {e}", emitted.kernel_name()));
        let tolerance = match fused.quant {
            gemm_dsl::Quant::Block => Tolerance::for_kernel(types, m, n, k)
                .for_magnitude(f64::from(BLOCK_SCALE_MAX * BLOCK_SCALE_MAX)),
            _ => Tolerance::for_kernel(types, m, n, k),
        };
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

/// A kernel that stores C column-major computes the swapped product: `Cᵀ = Bᵀ·Aᵀ`, launched
/// with A and B (and their leading dimensions and strides) swapped, C where it lies, checked
/// as `C = A·B`.
fn verify_swapped<In: Element, Out: Element>(
    kernel: &GemmKernel<In, Out, In>,
    stream: &Arc<CudaStream>,
    (m, n, k): (u32, u32, u32),
    lds: LeadingDims,
    batch: Batch,
    seed: usize,
    case: &FusedCase,
) -> Result<gemm_harness::verify::BatchReport, gemm_harness::Error> {
    let (swapped_lds, swapped_batch) = (lds.exchanged(), batch.exchanged());
    verify_fused_batch_through(
        kernel,
        stream,
        (m, n, k),
        lds,
        batch,
        seed as u64 + 11,
        case,
        |a, b, c, epilogue| {
            kernel.launch_fused(
                stream,
                b,
                a,
                c,
                n,
                m,
                k,
                swapped_lds,
                swapped_batch,
                epilogue,
            )
        },
    )
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn fp8_kernels_match_float64_on_edges_and_batches() {
    let (ctx, stream) = gpu();
    let mut checked = 0;
    for e in emitted() {
        let spec = e.spec();
        use gemm_dsl::DType::{Bf16, E4m3 as A4, E5m2 as A5, F16, F32};
        checked += match (spec.dtype, spec.b_dtype, spec.out) {
            (A4, A4, Bf16) => check::<E4m3, bf16, E4m3>(&ctx, &stream, &e),
            (A4, A4, F16) => check::<E4m3, f16, E4m3>(&ctx, &stream, &e),
            (A4, A4, F32) => check::<E4m3, f32, E4m3>(&ctx, &stream, &e),
            (A5, A5, Bf16) => check::<E5m2, bf16, E5m2>(&ctx, &stream, &e),
            (A4, A5, Bf16) => check::<E4m3, bf16, E5m2>(&ctx, &stream, &e),
            (A5, A4, Bf16) => check::<E5m2, bf16, E4m3>(&ctx, &stream, &e),
            other => panic!("no case for {other:?}"),
        };
    }
    assert_eq!(checked, specs().len() * SHAPES.len());
}

/// How far fp8 accumulation drifts from float64 as K grows: without promotion, promoting the
/// partial sums every 128 k, and with block scales (promoted every 128 k too). Printed for the
/// results file. The unpromoted kernel is held to the fp8 tolerance, the promoted ones to the
/// promoted tolerance, which the unpromoted kernel must break where promotion matters (k of
/// 4096 and more): a kernel that stopped promoting would fail there.
#[test]
#[ignore = "needs a CUDA GPU"]
fn fp8_accumulation_error_over_long_k() {
    let (ctx, stream) = gpu();
    let block = catalog_spec("wgmma_e4m3_128x128x128_s5_block")
        .replace("wgmma_e4m3_128x128x128_s5_block", "fp8_acc")
        .replace("out: bf16", "out: f32")
        .replace(
            "persistent(raster = m, group = 8)",
            "persistent(raster = m, group = 8), epilogue: direct",
        );
    for (what, spec) in [
        (
            "no promotion",
            block.replace("quant: block, promote: 128", "quant: tensor"),
        ),
        (
            "promote: 128",
            block.replace("quant: block", "quant: tensor"),
        ),
        ("block scales", block.clone()),
    ] {
        let emitted = gemm_codegen::emit_str(&spec).unwrap();
        let kernel = GemmKernel::<E4m3, f32>::from_emitted(&ctx, &emitted).unwrap();
        let case = FusedCase::for_spec(&FusedSpec::of_spec(emitted.spec()));
        let promoted = emitted.spec().promote.is_some();
        assert_eq!(promoted, what != "no promotion", "{spec}");
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
                u64::from(k),
                &case,
            )
            .unwrap();
            eprintln!(
                "fp8 accumulation, e4m3 -> f32, {what}, {m}x{n}x{k}: {}",
                report.worst().expect("one product")
            );
            let magnitude = f64::from(if what == "block scales" {
                BLOCK_SCALE_MAX * BLOCK_SCALE_MAX
            } else {
                1.0
            });
            let promoted_bound = Tolerance::fp8_promoted_accumulation(k).for_magnitude(magnitude);
            if promoted {
                report
                    .check(&promoted_bound)
                    .unwrap_or_else(|broken| panic!("{what}, k = {k}: {broken}"));
            } else {
                report
                    .check(&Tolerance::fp8_accumulation(k).for_magnitude(magnitude))
                    .unwrap_or_else(|broken| panic!("{what}, k = {k}: {broken}"));
                if k >= 4096 {
                    assert!(
                        report.check(&promoted_bound).is_err(),
                        "without promotion at k = {k} the promoted bound holds: it would not \
                         catch a kernel that stopped promoting"
                    );
                }
            }
        }
    }
}

/// Block scales cover one product: a launch of a batch is refused, not run.
#[test]
#[ignore = "needs a CUDA GPU"]
fn fp8_block_scales_refuse_a_batch() {
    let (ctx, stream) = gpu();
    let emitted = gemm_codegen::emit_str(catalog_spec("wgmma_e4m3_128x128x128_s5_block")).unwrap();
    let kernel = GemmKernel::<E4m3, bf16>::from_emitted(&ctx, &emitted).unwrap();
    let case = FusedCase::for_spec(&FusedSpec::of_spec(emitted.spec()));
    let (m, n, k, count) = (333, 520, 1040, 3);
    let lds = LeadingDims {
        lda: k + 16,
        ldb: k + 16,
        ldc: n + 8,
    };
    let batch = Batch::packed(kernel.info().launch(), count, (m, n, k), lds);
    let refused = verify_fused_batch(&kernel, &stream, m, n, k, lds, batch, 1, &case)
        .expect_err("block scales take one product");
    assert!(
        refused
            .to_string()
            .contains("cover one product; this launch has 3"),
        "{refused}"
    );
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

/// The entry point over the fp8 set: per-tensor scales in every member, picked per problem,
/// against float64.
#[test]
#[ignore = "needs a CUDA GPU"]
fn matmul_picks_fp8_kernels_per_problem() {
    use gemm_harness::verify::{cpu_reference, NormalRng, Problem as Host};
    use gemm_runtime::{Matmul, Problem};
    let (ctx, stream) = gpu();
    let fused = FusedSpec {
        quant: gemm_dsl::Quant::Tensor,
        ..FusedSpec::NONE
    };
    let matmul = Matmul::<E4m3, bf16>::new_fused(&ctx, fused).expect("the fp8 set loads");
    // The set's swapped-product members alone: every problem runs swapped, as `Cᵀ = Bᵀ·Aᵀ`.
    let full = &gemm_runtime::sets::SM90_FP8;
    let swapped_only: &'static gemm_runtime::sets::KernelSet =
        Box::leak(Box::new(gemm_runtime::sets::KernelSet {
            name: "sm90_fp8_swapped",
            members: Box::leak(
                full.members
                    .iter()
                    .filter(|member| member.body.contains("c_layout: col"))
                    .cloned()
                    .collect::<Vec<_>>()
                    .into_boxed_slice(),
            ),
            ..*full
        }));
    assert_eq!(swapped_only.members.len(), 2);
    let swapped = Matmul::<E4m3, bf16>::with_set_fused(&ctx, swapped_only, fused)
        .expect("the swapped members load");
    let (a_scale, b_scale) = (0.5f32, 1.25f32);
    let scales = [
        stream.clone_htod(&[a_scale]).unwrap(),
        stream.clone_htod(&[b_scale]).unwrap(),
    ];
    let mut picked = Vec::new();
    let problems = [
        (64, 2112, 1024),
        (1, 520, 512),
        (1024, 1024, 1024),
        (16, 4096, 2048),
        (5, 4104, 1024),
        // C's rows (1001 bf16) are not 16-byte aligned: only the swapped product, stored
        // column-major element by element, computes it.
        (33, 1001, 512),
    ];
    // Lines that miss 16 bytes (K of 1000 fp8; C's rows of 1001 bf16 too): the set has no
    // narrow member, so the run stages them in 128-byte scratch lines.
    let staged_problems = [(100, 520, 1000), (300, 1001, 1000)];
    let runs = problems
        .iter()
        .map(|&dims| (&matmul, dims))
        .chain(problems.iter().map(|&dims| (&swapped, dims)))
        .chain(staged_problems.iter().map(|&dims| (&matmul, dims)));
    let mut staged = Vec::new();
    for (seed, (matmul, (m, n, k))) in runs.enumerate() {
        let mut rng = NormalRng::new(seed as u64 + 41);
        let mut normals = |len: u32| -> Vec<E4m3> {
            (0..len)
                .map(|_| E4m3::from_f32(rng.next_normal() as f32))
                .collect()
        };
        // A row-major; B column-major (N lines of K), as `layout: rc` lays it.
        let (a, b_lines) = (normals(m * k), normals(n * k));
        let b_rows: Vec<E4m3> = (0..k * n)
            .map(|i| b_lines[((i % n) * k + i / n) as usize])
            .collect();
        let host = Host {
            m,
            n,
            k,
            a: a.clone(),
            b: b_rows,
        };
        let reference = cpu_reference(&host).unwrap();
        let problem = Problem::new(m, n, k, gemm_dsl::Layout::RowCol);
        let pick = matmul.pick(&problem).unwrap();
        let kernel = pick.kernel.to_string();
        staged.push(pick.staged);
        let a = stream.clone_htod(&a).unwrap();
        let b = stream.clone_htod(&b_lines).unwrap();
        let mut c = stream
            .clone_htod(&vec![<bf16 as Element>::poison(); (m * n) as usize])
            .unwrap();
        let mut epilogue = Epilogue::none().quant_scales(&scales[0], &scales[1]);
        matmul
            .run_fused(&stream, &a, &b, &mut c, &problem, &mut epilogue)
            .unwrap_or_else(|e| panic!("{m}x{n}x{k}: {e}"));
        let c = stream.clone_dtoh(&c).unwrap();
        let factor = f64::from(a_scale) * f64::from(b_scale);
        let scaled: Vec<f64> = reference.iter().map(|x| x * factor).collect();
        let report = gemm_harness::verify::compare(
            &c,
            &scaled,
            m,
            n,
            n,
            gemm_harness::verify::Reference::CpuF64,
        )
        .unwrap();
        eprintln!("Matmul<E4m3, bf16> {m}x{n}x{k}: {kernel}: {report}");
        report
            .check(&Tolerance::fp8_accumulation(k).for_magnitude(factor))
            .unwrap_or_else(|broken| panic!("{kernel} {m}x{n}x{k}: {broken}"));
        picked.push(kernel);
    }
    // Every pick is a member of the fp8 set (which one is the model's: not calibrated for
    // fp8); decode problems and C's odd rows ran swapped; the swapped members' set ran every
    // problem swapped.
    assert!(
        picked.iter().all(|name| name.starts_with("sm90_fp8_")),
        "{picked:?}"
    );
    for (index, dims) in [(3, (16, 4096, 2048)), (5, (33, 1001, 512))] {
        assert!(picked[index].contains("_swap"), "{dims:?}: {picked:?}");
    }
    assert!(
        picked[problems.len()..2 * problems.len()]
            .iter()
            .all(|name| name.starts_with("sm90_fp8_swapped_swap")),
        "{picked:?}"
    );
    // Only the odd lines were staged: A and B (and C's odd rows).
    assert!(
        staged[..2 * problems.len()].iter().all(|s| !s.any()),
        "{staged:?}"
    );
    let odd = &staged[2 * problems.len()..];
    assert!(odd.iter().all(|s| s.a && s.b), "{staged:?}");
    assert!(!odd[0].c && odd[1].c, "{staged:?}");
}

/// The entry point over the block-scaled fp8 set (`Matmul::new_fused` with `Quant::Block`):
/// picked per problem, run through `Matmul::run_fused` with A's and B's block scales, against
/// float64 on the scaled inputs, C poisoned first; then every member of the set (the model,
/// not calibrated for fp8, picks one tile for all four problems) on one problem.
#[test]
#[ignore = "needs a CUDA GPU"]
fn matmul_picks_block_scaled_fp8_kernels_per_problem() {
    use gemm_harness::verify::verify_fused_batch_through;
    use gemm_runtime::Problem;
    let (ctx, stream) = gpu();
    let (matmul, fused) = block_scaled_matmul(&ctx);
    let case = FusedCase::for_spec(&fused);
    let mut picked = Vec::new();
    for (seed, (m, n, k)) in [
        (64, 2112, 1024),
        (1, 520, 512),
        (300, 1000, 1040),
        (2048, 2048, 2048),
    ]
    .into_iter()
    .enumerate()
    {
        let problem = Problem::new(m, n, k, gemm_dsl::Layout::RowCol);
        let kernel = matmul.kernel_for(&problem).unwrap();
        let lds = LeadingDims::packed(kernel.info().launch(), m, n, k);
        let report = verify_fused_batch_through(
            kernel,
            &stream,
            (m, n, k),
            lds,
            Batch::ONE,
            seed as u64 + 71,
            &case,
            |a, b, c, epilogue| matmul.run_fused(&stream, a, b, c, &problem, epilogue),
        )
        .unwrap_or_else(|e| panic!("{m}x{n}x{k}: {e}"));
        let types =
            KernelTypes::of_spec(&gemm_dsl::check_str(kernel.info().spec()).unwrap().spec).unwrap();
        let tolerance = Tolerance::for_kernel(types, m, n, k)
            .for_magnitude(f64::from(BLOCK_SCALE_MAX * BLOCK_SCALE_MAX));
        let name = kernel.info().name().to_string();
        let worst = report.worst().expect("one product");
        eprintln!("block-scaled Matmul {m}x{n}x{k}: {name}: worst {worst}");
        report
            .check(&tolerance)
            .unwrap_or_else(|broken| panic!("{name} {m}x{n}x{k}: {broken}"));
        picked.push(name);
    }
    assert!(
        picked
            .iter()
            .all(|name| name.starts_with("sm90_fp8_block_")),
        "{picked:?}"
    );
    let (m, n, k) = (300, 1000, 1040);
    let candidates = matmul.picker().candidates().to_vec();
    for (index, candidate) in candidates.iter().enumerate() {
        let kernel = matmul.kernel(index).unwrap();
        let lds = LeadingDims::packed(kernel.info().launch(), m, n, k);
        let report = verify_fused_batch(kernel, &stream, m, n, k, lds, Batch::ONE, 81, &case)
            .unwrap_or_else(|e| panic!("{}: {e}", candidate.name));
        let types =
            KernelTypes::of_spec(&gemm_dsl::check_str(kernel.info().spec()).unwrap().spec).unwrap();
        report
            .check(
                &Tolerance::for_kernel(types, m, n, k)
                    .for_magnitude(f64::from(BLOCK_SCALE_MAX * BLOCK_SCALE_MAX)),
            )
            .unwrap_or_else(|broken| panic!("{} {m}x{n}x{k}: {broken}", candidate.name));
    }
    assert_eq!(
        candidates.len(),
        gemm_dsl::pick::sets::SM90_FP8_BLOCK.members.len()
    );
}

/// The entry point over the fp8 set for the mixed pairs, `Matmul<E4m3, bf16, E5m2>` and
/// `Matmul<E5m2, bf16, E4m3>` (each member with `b_dtype`): per-tensor scales, picked per
/// problem and run through `Matmul::run_fused`, against float64 on the decoded inputs, C
/// poisoned first. A mixed pair runs every problem as given (the swapped product would
/// exchange A and B), so the kernel `run_fused` launches is `kernel_for`'s, and a problem
/// only the swapped product takes (C's rows of 1001 bf16) has no kernel.
#[test]
#[ignore = "needs a CUDA GPU"]
fn matmul_runs_mixed_fp8_pairs() {
    let (ctx, stream) = gpu();
    let fused = FusedSpec {
        quant: gemm_dsl::Quant::Tensor,
        ..FusedSpec::NONE
    };
    let e4m3_e5m2 =
        gemm_runtime::Matmul::<E4m3, bf16, E5m2>::new_fused(&ctx, fused).expect("the set loads");
    let e5m2_e4m3 =
        gemm_runtime::Matmul::<E5m2, bf16, E4m3>::new_fused(&ctx, fused).expect("the set loads");
    let mut picked = Vec::new();
    picked.extend(check_mixed_matmul(&e4m3_e5m2, &stream, fused));
    picked.extend(check_mixed_matmul(&e5m2_e4m3, &stream, fused));
    assert!(
        picked
            .iter()
            .all(|name| name.starts_with("sm90_fp8_") && !name.contains("_swap")),
        "{picked:?}"
    );
    assert!(
        picked.iter().any(|name| name.contains("_b_e5m2"))
            && picked.iter().any(|name| name.contains("_b_e4m3")),
        "{picked:?}"
    );
}

/// [`matmul_runs_mixed_fp8_pairs`] for one pair: the kernels picked, by name.
fn check_mixed_matmul<In: Element, InB: Element>(
    matmul: &gemm_runtime::Matmul<In, bf16, InB>,
    stream: &Arc<CudaStream>,
    fused: FusedSpec,
) -> Vec<String> {
    use gemm_runtime::Problem;
    let case = FusedCase::for_spec(&fused);
    let mut picked = Vec::new();
    for (seed, (m, n, k)) in [
        (128, 256, 512),
        (1, 520, 512),
        (16, 4096, 2048),
        (64, 2112, 1024),
        (1024, 1024, 1024),
    ]
    .into_iter()
    .enumerate()
    {
        let problem = Problem::new(m, n, k, Layout::RowCol);
        let kernel = matmul
            .kernel_for(&problem)
            .unwrap_or_else(|e| panic!("{m}x{n}x{k}: {e}"));
        let name = kernel.info().name().to_string();
        assert_eq!(matmul.pick(&problem).unwrap().kernel, name, "{problem}");
        let types =
            KernelTypes::of_spec(&gemm_dsl::check_str(kernel.info().spec()).unwrap().spec).unwrap();
        assert!(types.is_mixed(), "{name}");
        let lds = LeadingDims::packed(kernel.info().launch(), m, n, k);
        let report = verify_fused_batch_through(
            kernel,
            stream,
            (m, n, k),
            lds,
            Batch::ONE,
            seed as u64 + 91,
            &case,
            |a, b, c, epilogue| matmul.run_fused(stream, a, b, c, &problem, epilogue),
        )
        .unwrap_or_else(|e| panic!("{name} {m}x{n}x{k}: {e}"));
        eprintln!(
            "Matmul<{}, bf16, {}> {m}x{n}x{k}: {name}: worst {}",
            In::NAME,
            InB::NAME,
            report.worst().expect("one product")
        );
        report
            .check(&Tolerance::for_kernel(types, m, n, k))
            .unwrap_or_else(|broken| panic!("{name} {m}x{n}x{k}: {broken}"));
        picked.push(name);
    }
    // C's rows of 1001 bf16 miss 16 bytes, and no route exchanges a mixed pair's A and B: C
    // is computed in 128-byte scratch rows and copied into its own (the staged route's
    // results are checked against float64 in `matmul_picks_fp8_kernels_per_problem`).
    let odd_rows = Problem::new(33, 1001, 512, Layout::RowCol);
    let staged = matmul.pick(&odd_rows).unwrap();
    assert!(
        staged.staged.c && !staged.staged.a && !staged.staged.b && !staged.kernel.contains("_swap"),
        "{staged:?}"
    );
    picked
}

/// cuBLASLt's block-scaled GEMM (`LtScales::Blocks`, the block-scaled set bench's baseline)
/// given the kernels' block scales through `lt_block_scales`, against the block-scaled set's
/// pick with the same scales: K of nine 128-wide blocks (B's lines padded from 9 to 12 in
/// cuBLASLt's layout, and over two blocks of N) and of eight and a partial one, M and N in
/// fours; scales of 1/4 to 4 that differ from block to block, so a scale read from the wrong
/// place moves whole blocks of D. C poisoned first.
#[test]
#[ignore = "needs a CUDA GPU"]
fn cublaslt_block_scales_take_the_kernels_scales_through_padded_and_partial_blocks() {
    use gemm_harness::baseline::fp8::{lt_block_scales, Fp8Format, LtFp8Gemm, LtScales};
    use gemm_harness::verify::NormalRng;
    use gemm_runtime::Problem;
    let (ctx, stream) = gpu();
    let (matmul, _) = block_scaled_matmul(&ctx);
    for (seed, (m, n, k)) in [(128u32, 256u32, 1152u32), (260, 384, 1040)]
        .into_iter()
        .enumerate()
    {
        let mut rng = NormalRng::new(0xB10C + seed as u64);
        let mut fp8 = |len: u32| -> Vec<E4m3> {
            (0..len)
                .map(|_| E4m3::from_f32(rng.next_normal() as f32 * 8.0))
                .collect()
        };
        // A M rows of K, B N lines of K (layout rc).
        let (a, b) = (fp8(m * k), fp8(n * k));
        let k_blocks = k.div_ceil(128) as usize;
        let a_line = (m as usize).next_multiple_of(4);
        let a_scales: Vec<f32> = (0..k_blocks * a_line)
            .map(|i| 2f32.powi((i % 5) as i32 - 2))
            .collect();
        let b_scales: Vec<f32> = (0..n.div_ceil(128) as usize * k_blocks)
            .map(|i| 2f32.powi((i % 3) as i32 - 1))
            .collect();
        let (a_for_lt, b_for_lt) = lt_block_scales((&a_scales, &b_scales), (m, n, k));
        let upload_f32 = |values: &[f32]| stream.clone_htod(values).unwrap();
        let (a_dev, b_dev) = (
            stream.clone_htod(&a).unwrap(),
            stream.clone_htod(&b).unwrap(),
        );
        let poisoned = vec![bf16::poison(); (m * n) as usize];
        let mut d_ours = stream.clone_htod(&poisoned).unwrap();
        let mut d_lt = stream.clone_htod(&poisoned).unwrap();
        let (a_scales_dev, b_scales_dev) = (upload_f32(&a_scales), upload_f32(&b_scales));
        let problem = Problem::new(m, n, k, Layout::RowCol);
        let mut epilogue = Epilogue::none().quant_scales(&a_scales_dev, &b_scales_dev);
        matmul
            .run_fused(
                &stream,
                &a_dev,
                &b_dev,
                &mut d_ours,
                &problem,
                &mut epilogue,
            )
            .unwrap_or_else(|e| panic!("{m}x{n}x{k}: {e}"));
        let lt = LtFp8Gemm::<bf16>::new(
            &stream,
            m,
            n,
            k,
            Fp8Format::E4m3,
            Fp8Format::E4m3,
            false,
            LtScales::Blocks,
        )
        .unwrap_or_else(|e| panic!("{m}x{n}x{k}: {e}"));
        lt.run(
            &a_dev,
            &b_dev,
            &upload_f32(&a_for_lt),
            &upload_f32(&b_for_lt),
            &mut d_lt,
        )
        .unwrap_or_else(|e| panic!("{m}x{n}x{k}: {e}"));
        let (ours, theirs) = (
            stream.clone_dtoh(&d_ours).unwrap(),
            stream.clone_dtoh(&d_lt).unwrap(),
        );
        assert!(ours.iter().chain(&theirs).all(|x| !x.is_poison()));
        let (mut diff, mut norm) = (0.0f64, 0.0f64);
        for (x, y) in ours.iter().zip(&theirs) {
            let (x, y) = (x.to_f64(), y.to_f64());
            diff += (x - y) * (x - y);
            norm += y * y;
        }
        let rel_diff = (diff / norm).sqrt();
        let bound = Tolerance::for_types(DType::E4m3, DType::Bf16, u64::from(m * n), k);
        eprintln!("{m}x{n}x{k}: ‖D − D_Lt‖/‖D_Lt‖ = {rel_diff:.2e}");
        assert!(
            rel_diff <= bound.rel_frobenius,
            "{m}x{n}x{k}: {rel_diff:.2e} over {:.1e}",
            bound.rel_frobenius
        );
    }
}
