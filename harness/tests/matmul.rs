//! GPU tests of the entry point that picks: every kernel of the built-in sets on edge shapes in
//! its own layout, and `Matmul::run` on real-model problems, each against float64 (or cuBLAS
//! for large sizes) with C poisoned first and fresh inputs per problem.

use gemm_dsl::abi::{Operand, StorageOrder};
use gemm_dsl::pick::sets::{self, KernelSet};
use gemm_dsl::Layout;
use gemm_harness::verify::{
    compare, padded_operand, reference_of, run_poisoned_with_ld, Problem as Inputs, Tolerance,
};
use gemm_runtime::{open_context, CudaContext, CudaStream, Element, KernelTypes, Matmul, Problem};
use half::bf16;
use std::sync::Arc;

fn gpu() -> (Arc<CudaContext>, Arc<CudaStream>) {
    let ctx = open_context(0).expect("these tests need a CUDA GPU");
    let stream = ctx.default_stream();
    (ctx, stream)
}

/// Sizes around the tiles of every member: one row, a partial tile, a K that leaves a partial
/// k tile, and a tile count that leaves a stream-K tail.
const EDGE_SHAPES: [(u32, u32, u32); 4] = [
    (1, 200, 136),
    (17, 264, 328),
    (130, 520, 1032),
    (300, 2056, 744),
];

/// Every member of `set` in every layout runs each edge shape within its types' tolerance;
/// returns how many (kernel, shape) pairs ran.
fn every_member_on_edges<In: Element, Out: Element>(
    ctx: &Arc<CudaContext>,
    stream: &Arc<CudaStream>,
    set: &KernelSet,
    seed: u64,
) -> usize {
    let matmul = Matmul::<In, Out>::with_set(ctx, set).expect("the set loads");
    let candidates = matmul.picker().candidates().to_vec();
    let mut ran = 0;
    for (index, candidate) in candidates.iter().enumerate() {
        let kernel = matmul
            .kernel(index)
            .unwrap_or_else(|e| panic!("{}: {e}", candidate.name));
        let types =
            KernelTypes::of_spec(&gemm_dsl::check_str(kernel.info().spec()).unwrap().spec).unwrap();
        let column_major_c = candidate.launch.c_order == StorageOrder::ColMajor;
        for (shape_index, &(m, n, k)) in EDGE_SHAPES.iter().enumerate() {
            // A kernel that stores C column-major takes the problem with C in that order: n
            // lines of m.
            let problem = Problem::new(m, n, k, candidate.layout);
            let problem = if column_major_c {
                Problem {
                    c_layout: gemm_dsl::CLayout::Col,
                    ldc: m,
                    ..problem
                }
            } else {
                problem
            }
            .with_lines_padded(16, In::BYTES, Out::BYTES);
            if let Some(reason) = candidate.refuses(&problem) {
                panic!("{} refuses {problem}: {reason}", candidate.name);
            }
            let inputs = Inputs::<In>::random(m, n, k, seed + (index * 16 + shape_index) as u64);
            let (reference, kind) = reference_of(stream, &inputs).unwrap();
            let lds = (problem.lda, problem.ldb, problem.ldc);
            let (c, reference, (rows, cols)) = if column_major_c {
                // C column-major: its n columns of ldc elements are the rows of Cᵀ.
                let c = run_column_major_c(kernel, stream, &inputs, lds)
                    .unwrap_or_else(|e| panic!("{} at {problem}: {e}", candidate.name));
                (c, transposed(&reference, m, n), (n, m))
            } else {
                let c = run_poisoned_with_ld(kernel, stream, &inputs, lds)
                    .unwrap_or_else(|e| panic!("{} at {problem}: {e}", candidate.name));
                (c, reference, (m, n))
            };
            let report = compare(&c, &reference, rows, cols, problem.ldc, kind).unwrap();
            report
                .check(&Tolerance::for_kernel(types, m, n, k))
                .unwrap_or_else(|broken| {
                    panic!("{} at {problem}: {broken} ({report})", candidate.name)
                });
            ran += 1;
        }
    }
    ran
}

/// The row-major `m x n` matrix `values` transposed (row-major `n x m`).
fn transposed<T: Copy>(values: &[T], m: u32, n: u32) -> Vec<T> {
    let (m, n) = (m as usize, n as usize);
    (0..n * m).map(|i| values[(i % m) * n + i / m]).collect()
}

/// [`run_poisoned_with_ld`] for a kernel that stores C column-major: `n` columns of `ldc`
/// elements, returned as they lie (the rows of Cᵀ).
fn run_column_major_c<In: Element, Out: Element>(
    kernel: &gemm_runtime::GemmKernel<In, Out>,
    stream: &Arc<CudaStream>,
    inputs: &Inputs<In>,
    (lda, ldb, ldc): (u32, u32, u32),
) -> Result<Vec<Out>, gemm_runtime::Error> {
    let Inputs { m, n, k, .. } = *inputs;
    let launch = kernel.info().launch();
    let dims = (m, n, k);
    let a = stream
        .clone_htod(&padded_operand(launch, Operand::A, &inputs.a, dims, lda))
        .unwrap();
    let b = stream
        .clone_htod(&padded_operand(launch, Operand::B, &inputs.b, dims, ldb))
        .unwrap();
    let mut c = stream
        .clone_htod(&vec![Out::poison(); n as usize * ldc as usize])
        .unwrap();
    kernel.launch_with_ld(stream, &a, &b, &mut c, m, n, k, lda, ldb, ldc)?;
    Ok(stream.clone_dtoh(&c).unwrap())
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn every_kernel_of_the_built_in_sets_computes_edge_shapes_in_every_layout() {
    let (ctx, stream) = gpu();
    let hopper = every_member_on_edges::<bf16, bf16>(&ctx, &stream, &sets::SM90_16BIT, 0x5E7_0001);
    assert_eq!(
        hopper,
        sets::SM90_16BIT.members.len() * 4 * EDGE_SHAPES.len()
    );
    let hopper_f32_out =
        every_member_on_edges::<half::f16, f32>(&ctx, &stream, &sets::SM90_16BIT, 0x5E7_0002);
    assert_eq!(hopper_f32_out, hopper);
    let ampere = every_member_on_edges::<bf16, bf16>(&ctx, &stream, &sets::SM80_16BIT, 0x5E7_0003);
    assert_eq!(
        ampere,
        sets::SM80_16BIT.members.len() * 4 * EDGE_SHAPES.len()
    );
    let simt = every_member_on_edges::<f32, f32>(&ctx, &stream, &sets::SM80_F32, 0x5E7_0004);
    assert_eq!(simt, sets::SM80_F32.members.len() * 4 * EDGE_SHAPES.len());
}

/// `Matmul::run` on packed row-major operands, checked against the reference.
fn run_and_check<In: Element, Out: Element>(
    matmul: &Matmul<In, Out>,
    stream: &Arc<CudaStream>,
    (m, n, k): (u32, u32, u32),
    seed: u64,
) -> String {
    let inputs = Inputs::<In>::random(m, n, k, seed);
    let (reference, kind) = reference_of(stream, &inputs).unwrap();
    let a = stream.clone_htod(&inputs.a).unwrap();
    let b = stream.clone_htod(&inputs.b).unwrap();
    let mut c = stream
        .clone_htod(&vec![Out::poison(); m as usize * n as usize])
        .unwrap();
    let problem = Problem::new(m, n, k, Layout::RowRow);
    matmul.run(stream, &a, &b, &mut c, &problem).unwrap();
    let c = stream.clone_dtoh(&c).unwrap();
    let picked = matmul.pick(&problem).unwrap().kernel.to_string();
    let report = compare(&c, &reference, m, n, n, kind).unwrap();
    let spec = gemm_dsl::check_str(matmul.kernel_for(&problem).unwrap().info().spec()).unwrap();
    let types = KernelTypes::of_spec(&spec.spec).unwrap();
    report
        .check(&Tolerance::for_kernel(types, m, n, k))
        .unwrap_or_else(|broken| panic!("{picked} at {m}x{n}x{k}: {broken} ({report})"));
    picked
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn matmul_picks_and_computes_real_model_problems() {
    let (ctx, stream) = gpu();
    let matmul = Matmul::<bf16, bf16>::new(&ctx).unwrap();
    let mut picked = std::collections::BTreeSet::new();
    for (i, shape) in [
        (1, 4096, 4096),
        (16, 4096, 14336),
        (64, 6144, 4096),
        (128, 4096, 4096),
        (512, 4096, 4096),
        (777, 4104, 2048),
        (4096, 4096, 4096),
    ]
    .into_iter()
    .enumerate()
    {
        picked.insert(run_and_check(
            &matmul,
            &stream,
            shape,
            0x3A7_0000 + i as u64,
        ));
    }
    // Decode and prefill problems do not all get the same kernel.
    assert!(picked.len() >= 3, "{picked:?}");
    let sgemm = Matmul::<f32, f32>::new(&ctx).unwrap();
    // f32 lines must start 16-byte aligned: packed, K and N are multiples of 4.
    run_and_check(&sgemm, &stream, (333, 520, 260), 0x3A7_0100);
    // A second run of the same problem reuses the loaded kernel and gives the same bits.
    let inputs = Inputs::<bf16>::random(16, 4096, 14336, 7);
    let a = stream.clone_htod(&inputs.a).unwrap();
    let b = stream.clone_htod(&inputs.b).unwrap();
    let problem = Problem::new(16, 4096, 14336, Layout::RowRow);
    let mut first = stream.alloc_zeros::<bf16>(16 * 4096).unwrap();
    let mut second = stream.alloc_zeros::<bf16>(16 * 4096).unwrap();
    matmul.run(&stream, &a, &b, &mut first, &problem).unwrap();
    matmul.run(&stream, &a, &b, &mut second, &problem).unwrap();
    let (first, second) = (
        stream.clone_dtoh(&first).unwrap(),
        stream.clone_dtoh(&second).unwrap(),
    );
    assert!(first
        .iter()
        .zip(&second)
        .all(|(x, y)| x.to_bits() == y.to_bits()));
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn threads_share_one_matmul() {
    let (ctx, _) = gpu();
    // The Hopper set's whole-tile members (the four-stream test below runs the stream-K ones).
    let members: Vec<_> = sets::SM90_16BIT
        .members
        .iter()
        .filter(|member| !member.body.contains("stream_k"))
        .copied()
        .collect();
    let set = KernelSet {
        name: "sm90_whole",
        members: Box::leak(members.into_boxed_slice()),
        ..sets::SM90_16BIT
    };
    let matmul = Matmul::<bf16, bf16>::with_set(&ctx, &set).unwrap();
    let shapes = [
        (4096, 4096, 4096),
        (128, 4096, 4096),
        (16, 6144, 4096),
        (1000, 1000, 1000),
    ];
    std::thread::scope(|scope| {
        for (t, &shape) in shapes.iter().enumerate() {
            let matmul = &matmul;
            let ctx = &ctx;
            scope.spawn(move || {
                let stream = ctx.new_stream().unwrap();
                for round in 0..3 {
                    run_and_check(matmul, &stream, shape, 0x7EAD_0000 + (t * 8 + round) as u64);
                }
            });
        }
    });
}

/// Four threads, each on its own stream with its own stream-K kernel (every one splits its
/// tail, so its blocks wait for one another), launch over and over at once: the cooperative
/// launch must keep any grid from starting in part, so nothing hangs (the device script runs
/// this under a timeout), and every result is bitwise the first.
#[test]
#[ignore = "needs a CUDA GPU"]
fn stream_k_kernels_on_four_streams_at_once_finish_and_repeat_bitwise() {
    let (ctx, _) = gpu();
    let matmul = Matmul::<bf16, bf16>::with_set(&ctx, &sets::SM90_16BIT).unwrap();
    let candidates = matmul.picker().candidates();
    let stream_k: Vec<usize> = (0..candidates.len())
        .filter(|&i| candidates[i].stream_k && candidates[i].layout == Layout::RowRow)
        .collect();
    assert!(stream_k.len() >= 4, "{stream_k:?}");
    // Shapes whose leftover tiles are split for every tile size of the set.
    let shapes = [
        (16, 4096, 14336),
        (128, 4096, 4096),
        (16, 8192, 8192),
        (64, 4096, 14336),
    ];
    std::thread::scope(|scope| {
        for (t, &index) in stream_k.iter().take(4).enumerate() {
            let (matmul, ctx) = (&matmul, &ctx);
            let (m, n, k) = shapes[t];
            scope.spawn(move || {
                let stream = ctx.new_stream().unwrap();
                let kernel = matmul.kernel(index).unwrap();
                let name = &matmul.picker().candidates()[index].name;
                let inputs = Inputs::<bf16>::random(m, n, k, 0xC0_0000 + t as u64);
                let (reference, kind) = reference_of(&stream, &inputs).unwrap();
                let a = stream.clone_htod(&inputs.a).unwrap();
                let b = stream.clone_htod(&inputs.b).unwrap();
                let mut outputs = Vec::new();
                for _ in 0..12 {
                    let mut c = stream
                        .clone_htod(&vec![bf16::poison(); m as usize * n as usize])
                        .unwrap();
                    kernel.launch(&stream, &a, &b, &mut c, m, n, k).unwrap();
                    outputs.push(c);
                }
                let first = stream.clone_dtoh(&outputs[0]).unwrap();
                let report = compare(&first, &reference, m, n, n, kind).unwrap();
                let types = KernelTypes::new(gemm_dsl::DType::Bf16, gemm_dsl::DType::Bf16).unwrap();
                report
                    .check(&Tolerance::for_kernel(types, m, n, k))
                    .unwrap_or_else(|broken| panic!("{name} at {m}x{n}x{k}: {broken}"));
                for (i, c) in outputs.iter().enumerate().skip(1) {
                    let again = stream.clone_dtoh(c).unwrap();
                    assert!(
                        again
                            .iter()
                            .zip(&first)
                            .all(|(x, y)| x.to_bits() == y.to_bits()),
                        "{name}: launch {i} differs from the first"
                    );
                }
            });
        }
    });
}

/// A fused set (`Matmul::new_fused`): every sm90 member in layout rr, with C-in, a column bias,
/// GELU and the rows' factors, on edge shapes against the same epilogue in float64; then `run_fused` on a decode
/// and a prefill problem of the picked kernels, D in place over C-in, against float64 too.
#[test]
#[ignore = "needs a CUDA GPU"]
fn fused_sets_compute_the_epilogue_with_every_member() {
    use gemm_dsl::{Activation, Bias, BiasAlong, DType, Scale};
    use gemm_harness::verify::{verify_fused_batch, FusedCase};
    use gemm_runtime::{Batch, FusedSpec, LeadingDims};
    let (ctx, stream) = gpu();
    let fused = FusedSpec {
        scale: Scale::AlphaBeta,
        bias: Bias::Vector {
            along: BiasAlong::Col,
            dtype: DType::Bf16,
        },
        activation: Activation::Gelu,
        aux: gemm_dsl::Aux::None,
        quant: gemm_dsl::Quant::None,
        row_scale: gemm_dsl::RowScale::F32,
    };
    let matmul = Matmul::<bf16, bf16>::with_set_fused(&ctx, &sets::SM90_16BIT, fused)
        .expect("the fused set loads");
    let candidates = matmul.picker().candidates().to_vec();
    let mut ran = 0;
    for (index, candidate) in candidates.iter().enumerate() {
        if candidate.layout != Layout::RowRow {
            continue;
        }
        let kernel = matmul
            .kernel(index)
            .unwrap_or_else(|e| panic!("{}: {e}", candidate.name));
        for (seed, &(m, n, k)) in EDGE_SHAPES.iter().enumerate() {
            let lds = LeadingDims {
                lda: k,
                ldb: n.next_multiple_of(8),
                ldc: n.next_multiple_of(8),
            };
            let report = verify_fused_batch(
                kernel,
                &stream,
                m,
                n,
                k,
                lds,
                Batch::ONE,
                0xF5E7 + seed as u64,
                &FusedCase::for_spec(&fused),
            )
            .unwrap_or_else(|e| panic!("{} {m}x{n}x{k}: {e}", candidate.name));
            report
                .check(&Tolerance::for_kernel(
                    KernelTypes::new(DType::Bf16, DType::Bf16).unwrap(),
                    m,
                    n,
                    k,
                ))
                .unwrap_or_else(|broken| panic!("{} {m}x{n}x{k}: {broken}", candidate.name));
            ran += 1;
        }
    }
    // Every member that fuses, but those that store C column-major: C-in and the rows'
    // factors have no form on the swapped product, so the set leaves them out.
    let fusing = sets::SM90_16BIT
        .members
        .iter()
        .filter(|m| m.fuses && !m.body.contains("c_layout: col"))
        .count();
    assert!(fused.on_swapped_product().is_none());
    assert_eq!(ran, EDGE_SHAPES.len() * fusing);
    for (m, n, k) in [(16, 4096, 4096), (512, 2048, 1024)] {
        let problem = Problem::new(m, n, k, Layout::RowRow);
        let kernel = matmul.kernel_for(&problem).unwrap();
        let case = FusedCase {
            in_place: true,
            ..FusedCase::for_spec(&fused)
        };
        let lds = LeadingDims {
            lda: k,
            ldb: n,
            ldc: n,
        };
        let report = verify_fused_batch(kernel, &stream, m, n, k, lds, Batch::ONE, 7, &case)
            .unwrap_or_else(|e| panic!("{m}x{n}x{k}: {e}"));
        report
            .check(&Tolerance::for_kernel(
                KernelTypes::new(DType::Bf16, DType::Bf16).unwrap(),
                m,
                n,
                k,
            ))
            .unwrap_or_else(|broken| panic!("{m}x{n}x{k}: {broken}"));
        eprintln!(
            "{m}x{n}x{k}: {} {}",
            matmul.pick(&problem).unwrap().kernel,
            report.worst().unwrap()
        );
    }
    // `run_fused` itself: with A = 0, D = s[row]·gelu(β·C + bias) in place, element for
    // element.
    use gemm_runtime::{BiasArg, CIn, Epilogue};
    let (m, n, k) = (16u32, 4096u32, 4096u32);
    let problem = Problem::new(m, n, k, Layout::RowRow);
    let a = stream.alloc_zeros::<bf16>((m * k) as usize).unwrap();
    let b = stream.alloc_zeros::<bf16>((k * n) as usize).unwrap();
    let c_host: Vec<bf16> = (0..m * n)
        .map(|i| bf16::from_f32((i % 17) as f32 / 4.0 - 2.0))
        .collect();
    let bias_host: Vec<bf16> = (0..n)
        .map(|i| bf16::from_f32((i % 5) as f32 / 8.0))
        .collect();
    let factors_host: Vec<f32> = (0..m).map(|row| 0.25 + row as f32 / 16.0).collect();
    let mut c = stream.clone_htod(&c_host).unwrap();
    let bias = stream.clone_htod(&bias_host).unwrap();
    let factors = stream.clone_htod(&factors_host).unwrap();
    let mut epilogue = Epilogue::none()
        .alpha(3.0)
        .beta(0.5, CIn::Output)
        .bias(BiasArg::output(&bias))
        .row_scale(&factors);
    matmul
        .run_fused(&stream, &a, &b, &mut c, &problem, &mut epilogue)
        .unwrap();
    let d = stream.clone_dtoh(&c).unwrap();
    let mut worst = 0.0f64;
    for (i, value) in d.iter().enumerate() {
        let x = 0.5 * c_host[i].to_f64() + bias_host[i % n as usize].to_f64();
        let want = gemm_runtime::epilogue::activate(Activation::Gelu, x)
            * f64::from(factors_host[i / n as usize]);
        worst = worst.max((value.to_f64() - want).abs() / want.abs().max(1.0));
    }
    assert!(worst < 1e-2, "run_fused: worst relative error {worst}");
}

/// A fused set's swapped member reads a column bias along its own rows (the swapped product's,
/// `FusedSpec::on_swapped_product`): decode problems with a bias and GELU run swapped, in
/// layout rc (the `rc` instance) and rr (the `cc` one), and D = gelu(A·B + bias[col])
/// against float64, C poisoned first.
#[test]
#[ignore = "needs a CUDA GPU"]
fn fused_decode_runs_swapped_with_the_bias_along_its_rows() {
    use gemm_dsl::{Activation, Bias, BiasAlong, DType};
    use gemm_runtime::{BiasArg, Epilogue, FusedSpec};
    let (ctx, stream) = gpu();
    let fused = FusedSpec {
        bias: Bias::Vector {
            along: BiasAlong::Col,
            dtype: DType::Bf16,
        },
        activation: Activation::Gelu,
        ..FusedSpec::NONE
    };
    let matmul = Matmul::<bf16, bf16>::with_set_fused(&ctx, &sets::SM90_16BIT, fused)
        .expect("the fused set loads");
    let (m, n, k) = (16u32, 4096u32, 4096u32);
    let inputs = Inputs::<bf16>::random(m, n, k, 0xB1A5);
    let (product, _) = reference_of(&stream, &inputs).unwrap();
    let bias_host: Vec<bf16> = (0..n)
        .map(|col| bf16::from_f32((col % 7) as f32 / 4.0 - 0.75))
        .collect();
    let bias = stream.clone_htod(&bias_host).unwrap();
    let a = stream.clone_htod(&inputs.a).unwrap();
    for layout in [Layout::RowCol, Layout::RowRow] {
        let problem = Problem::new(m, n, k, layout);
        let picked = matmul.pick(&problem).unwrap().kernel.to_string();
        assert!(
            picked.contains("swap64x16") && picked.ends_with("_rowbf16_gelu"),
            "{}: the model routes {picked}, not the swapped member",
            layout.name()
        );
        // B as the layout stores it: K x N rows, or N rows of K (B column-major).
        let b_host = match layout {
            Layout::RowCol => transposed(&inputs.b, k, n),
            _ => inputs.b.clone(),
        };
        let b = stream.clone_htod(&b_host).unwrap();
        let mut d = stream
            .clone_htod(&vec![bf16::poison(); (m * n) as usize])
            .unwrap();
        let mut epilogue = Epilogue::none().bias(BiasArg::output(&bias));
        matmul
            .run_fused(&stream, &a, &b, &mut d, &problem, &mut epilogue)
            .unwrap();
        let d = stream.clone_dtoh(&d).unwrap();
        let mut worst = 0.0f64;
        for (i, value) in d.iter().enumerate() {
            let want = gemm_runtime::epilogue::activate(
                Activation::Gelu,
                product[i] + bias_host[i % n as usize].to_f64(),
            );
            let error = (value.to_f64() - want).abs() / want.abs().max(1.0);
            assert!(
                error.is_finite(),
                "{picked}: D[{i}] = {value} (never written?)"
            );
            worst = worst.max(error);
        }
        assert!(worst < 2e-2, "{picked}: worst relative error {worst}");
        eprintln!(
            "{}: {picked}, worst relative error {worst:.1e}",
            layout.name()
        );
    }
    // A problem whose own C is column-major would need the column bias on a column-major
    // kernel, which this set does not have (its carry the row bias): refused, nothing run.
    let column_major_c = Problem {
        c_layout: gemm_dsl::CLayout::Col,
        ..Problem::new(m, n, k, Layout::RowCol)
    };
    let b = stream.clone_htod(&inputs.b).unwrap();
    let mut d = stream.alloc_zeros::<bf16>((m * n) as usize).unwrap();
    let mut epilogue = Epilogue::none().bias(BiasArg::output(&bias));
    let refused = matmul
        .run_fused(&stream, &a, &b, &mut d, &column_major_c, &mut epilogue)
        .unwrap_err();
    assert!(
        matches!(refused, gemm_runtime::Error::NoKernelFor { .. }),
        "{refused}"
    );
}

/// One problem at any alignment: packed lines of any length in its layout, each operand a
/// view that starts `offsets` elements into its buffer.
struct Unaligned {
    shape: (u32, u32, u32),
    layout: Layout,
    offsets: [usize; 3],
}

/// `Matmul::run` on `case`: A and B laid out in the layout (NaN before each view), C poisoned
/// (before the view too); checked against the reference, and the poison before C's view left
/// alone. Returns the kernel the run launched.
fn run_unaligned<In: Element, Out: Element>(
    matmul: &Matmul<In, Out>,
    stream: &Arc<CudaStream>,
    case: &Unaligned,
    seed: u64,
) -> String {
    let (m, n, k) = case.shape;
    let [a_offset, b_offset, c_offset] = case.offsets;
    let packed = Problem::new(m, n, k, case.layout);
    let address_align = |offset: usize, bytes: u32| {
        let address = 256 + offset as u64 * u64::from(bytes);
        1u32 << address.trailing_zeros().min(8)
    };
    let align = [
        address_align(a_offset, In::BYTES),
        address_align(b_offset, In::BYTES),
        address_align(c_offset, Out::BYTES),
    ];
    let problem = packed.with_address_align(*align.iter().min().unwrap());
    let kernel = matmul.kernel_for(&problem).unwrap();
    // The operands in the problem's layout (a one-row run's kernel reads them in another).
    let launch = matmul
        .picker()
        .candidates()
        .iter()
        .find(|candidate| candidate.layout == case.layout)
        .unwrap()
        .launch;
    let inputs = Inputs::<In>::random(m, n, k, seed);
    let (reference, kind) = reference_of(stream, &inputs).unwrap();
    let view_of = |offset: usize, values: Vec<In>| {
        let mut buffer = vec![In::from_f32(f32::NAN); offset];
        buffer.extend(values);
        stream.clone_htod(&buffer).unwrap()
    };
    let lay_out =
        |operand, values: &[In], ld| padded_operand(&launch, operand, values, (m, n, k), ld);
    let a = view_of(a_offset, lay_out(Operand::A, &inputs.a, packed.lda));
    let b = view_of(b_offset, lay_out(Operand::B, &inputs.b, packed.ldb));
    let mut c = stream
        .clone_htod(&vec![Out::poison(); c_offset + m as usize * n as usize])
        .unwrap();
    matmul
        .run(
            stream,
            &a.slice(a_offset..),
            &b.slice(b_offset..),
            &mut c.slice_mut(c_offset..),
            &packed,
        )
        .unwrap_or_else(|e| panic!("{packed} at offsets {:?}: {e}", case.offsets));
    let c = stream.clone_dtoh(&c).unwrap();
    assert!(
        c[..c_offset].iter().all(|v| v.is_poison()),
        "{packed}: wrote before C"
    );
    let picked = matmul.pick(&problem).unwrap();
    let staged: Vec<&str> = picked.staged.operands().map(|o| o.name()).collect();
    let picked = format!("{} staged [{}]", picked.kernel, staged.join("+"));
    let types =
        KernelTypes::of_spec(&gemm_dsl::check_str(kernel.info().spec()).unwrap().spec).unwrap();
    let report = compare(&c[c_offset..], &reference, m, n, n, kind).unwrap();
    report
        .check(&Tolerance::for_kernel(types, m, n, k))
        .unwrap_or_else(|broken| {
            panic!(
                "{picked} at {problem} offsets {:?}: {broken} ({report})",
                case.offsets
            )
        });
    picked
}

/// Problems no 16-byte copy takes run through `Matmul::run`: packed lines of odd and even
/// lengths in every layout, M or N of 1, and operands that are views starting at an odd
/// element (which the run finds and picks again for). Inputs whose lines miss 16 bytes are
/// copied into scratch lines where the model predicts that faster (`Repack`), the others run
/// on the sets' narrow-copy members; a column of C runs as one row on a 16-byte kernel where
/// that takes it. Each is checked against the reference with C poisoned.
#[test]
#[ignore = "needs a CUDA GPU"]
fn matmul_computes_problems_at_any_alignment() {
    let (ctx, stream) = gpu();
    let case = |shape, layout, offsets| Unaligned {
        shape,
        layout,
        offsets,
    };
    let narrow = |name: &str| {
        ["_n128", "_n64", "_n16", "_cp4_", "_c2_"]
            .iter()
            .any(|member| name.contains(member))
    };
    let bf16s = Matmul::<bf16, bf16>::new(&ctx).unwrap();
    for (i, (unaligned, expect)) in [
        // B's and C's lines of 4099 elements: B copied into 128-byte lines first, C computed
        // in such lines and copied into its own after (`Repack`), on whichever 16-byte
        // member the model prices best there.
        (
            case((777, 4099, 2048), Layout::RowRow, [0, 0, 0]),
            "_bf16_rr staged [B+C]",
        ),
        // Even lines that are no multiple of 8: 4-byte cp.async.
        (case((257, 4098, 1000), Layout::RowRow, [0, 0, 0]), "_cp4"),
        // A column of C: the one-row problem, on the 16-row decode tiles.
        (case((4096, 1, 4096), Layout::RowRow, [0, 0, 0]), "_m16x64"),
        (case((3000, 1, 1000), Layout::ColCol, [0, 0, 0]), "_m16x64"),
        (
            case((4096, 1, 4095), Layout::RowRow, [0, 0, 0]),
            "_m64x16_bf16_rr staged [A+B+C]",
        ),
        // Only C's rows misaligned (layout rc, an odd N): at M = 1 the swapped product, whose
        // column-major C is stored element by element, with 16-byte copies; larger, C computed
        // in 128-byte lines and copied into its own.
        (
            case((1, 4099, 4096), Layout::RowCol, [0, 0, 0]),
            "_swap64x16",
        ),
        (
            case((777, 4099, 2048), Layout::RowCol, [0, 0, 0]),
            "_bf16_rc staged [C]",
        ),
        (
            case((333, 517, 259), Layout::ColCol, [0, 0, 0]),
            "_m16x64_c2_bf16_cc staged [A+B]",
        ),
        (case((129, 4097, 77), Layout::ColRow, [0, 0, 0]), "_sync2"),
        // Lines 16-byte aligned, operands that start at odd elements or 4 bytes in.
        (case((512, 512, 512), Layout::RowRow, [1, 3, 5]), "_sync2"),
        (case((300, 1000, 600), Layout::RowCol, [2, 0, 0]), "_cp4"),
        (
            case((2048, 2048, 2048), Layout::RowRow, [0, 0, 1]),
            "_sync2",
        ),
    ]
    .into_iter()
    .enumerate()
    {
        let picked = run_unaligned(&bf16s, &stream, &unaligned, 0xA11_0000 + i as u64);
        assert!(picked.contains(expect), "{picked}");
        // An expectation that names no tile (the staged lines of 4099) wants a 16-byte one.
        if expect.starts_with("_bf16_") {
            assert!(!narrow(&picked), "{picked}");
        }
    }
    // The same buffers at allocation starts get a 16-byte member.
    let aligned = Problem::new(512, 512, 512, Layout::RowRow);
    assert!(!narrow(bf16s.pick(&aligned).unwrap().kernel));
    let f16_f32 = Matmul::<half::f16, f32>::new(&ctx).unwrap();
    let picked = run_unaligned(
        &f16_f32,
        &stream,
        &case((129, 4097, 77), Layout::ColRow, [1, 1, 1]),
        0xA11_0100,
    );
    assert!(narrow(&picked), "{picked}");
    let picked = run_unaligned(
        &f16_f32,
        &stream,
        &case((16, 4097, 512), Layout::RowCol, [0, 0, 0]),
        0xA11_0101,
    );
    // f32 C's rows of 4097 elements: a decode problem runs swapped, C stored element by
    // element, A and B copied 16 bytes wide.
    assert!(picked.contains("_swap64x16"), "{picked}");
    assert!(!narrow(&picked), "{picked}");
    let sgemm = Matmul::<f32, f32>::new(&ctx).unwrap();
    for (i, unaligned) in [
        case((333, 521, 259), Layout::RowRow, [0, 0, 0]),
        case((64, 64, 64), Layout::ColCol, [1, 1, 1]),
        case((1000, 1, 333), Layout::RowCol, [0, 3, 0]),
    ]
    .iter()
    .enumerate()
    {
        let picked = run_unaligned(&sgemm, &stream, unaligned, 0xA11_0200 + i as u64);
        assert!(picked.contains("_cp4"), "{picked}");
    }
}
