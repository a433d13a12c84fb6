//! GPU tests: every catalog kernel on the device, each with the element types its spec names,
//! against float64 and cuBLAS; the launch checks, the baselines, the math-only probes and the
//! bench's timing. Run with `cargo test -p gemm-harness --test gpu -- --ignored` on a machine
//! with an NVIDIA GPU (or `.gpu/run-gpu-tests` on the lent device). The tests that are not
//! ignored check, without a GPU, what the GPU tests launch. (The driver's SASS of each kernel
//! is the runtime's GPU tests'.)

use gemm_codegen::catalog::{CatalogSpec, CATALOG, NARROW};
use gemm_codegen::{Emitted, KernelInfo, LaunchShape};
use gemm_dsl::{DType, Mma};
use gemm_harness::baseline::cublas::{Cublas, CublasGemm};
use gemm_harness::verify::Shape;
use gemm_harness::verify::{
    check_against, compare, cpu_reference, cublas_reference, reference_of, run_poisoned,
    run_poisoned_with_ld, verify, verify_batch, ErrorReport, Problem, Reference, Tolerance,
};
use gemm_harness::Error;
use gemm_runtime::Error as RuntimeError;
use gemm_runtime::{
    open_context, with_kernel, AnyKernel, Batch, CudaContext, CudaStream, Element, GemmKernel,
    GridSchedule, KernelTypes, LeadingDims, Operand, SassReport,
};
use half::{bf16, f16};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::any::{Any, TypeId};
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

/// Problem sizes: small, non-square, the usual squares, and one that is a multiple of some
/// tiles only.
const SUITE: [Shape; 5] = [
    Shape::new(128, 128, 128),
    Shape::new(256, 384, 512),
    Shape::new(640, 1152, 768),
    Shape::new(1024, 1024, 1024),
    Shape::new(2048, 2048, 2048),
];

/// Each shape is checked with inputs from both seeds.
const SEEDS: [u64; 2] = [0x5EED_0001, 0x5EED_0002];

fn gpu() -> (Arc<CudaContext>, Arc<CudaStream>) {
    let ctx = open_context(0).expect("these tests need a CUDA GPU");
    let stream = ctx.default_stream();
    (ctx, stream)
}

fn emit(entry: &CatalogSpec) -> Emitted {
    gemm_codegen::emit_str(entry.spec).unwrap_or_else(|e| panic!("{}: {e}", entry.name))
}

/// A catalog kernel with its own element types.
fn load(ctx: &Arc<CudaContext>, entry: &CatalogSpec) -> AnyKernel {
    AnyKernel::from_emitted(ctx, &emit(entry)).unwrap_or_else(|e| panic!("{}: {e}", entry.name))
}

/// The first f32 SIMT kernel of the catalog, for the tests of launch mechanics.
fn simt_entry() -> &'static CatalogSpec {
    CATALOG
        .iter()
        .find(|entry| emit(entry).spec().mma == Mma::Fma)
        .expect("the catalog has a SIMT kernel")
}

fn load_simt(ctx: &Arc<CudaContext>) -> GemmKernel<f32, f32> {
    let entry = simt_entry();
    GemmKernel::from_emitted(ctx, &emit(entry)).unwrap_or_else(|e| panic!("{}: {e}", entry.name))
}

/// One catalog entry per pair of element types, the first of each.
fn one_entry_per_types() -> Vec<(&'static CatalogSpec, KernelTypes)> {
    let mut seen: Vec<(&CatalogSpec, KernelTypes)> = Vec::new();
    for entry in CATALOG {
        let types = KernelTypes::of_spec(emit(entry).spec()).unwrap();
        if !seen.iter().any(|(_, t)| *t == types) {
            seen.push((entry, types));
        }
    }
    seen
}

/// One shape and seed's random problems, one per input type (the f32 normals rounded to it),
/// each with its float64 reference: made on first use, shared by every kernel of the type.
struct Problems {
    shape: Shape,
    seed: u64,
    /// `(Problem<In>, reference)` by `TypeId::of::<In>()`.
    by_type: HashMap<TypeId, Box<dyn Any>>,
}

impl Problems {
    fn new(shape: Shape, seed: u64) -> Problems {
        Problems {
            shape,
            seed,
            by_type: HashMap::new(),
        }
    }

    fn get<In: Element>(&mut self) -> &(Problem<In>, Vec<f64>) {
        let Shape { m, n, k, .. } = self.shape;
        let seed = self.seed;
        self.by_type
            .entry(TypeId::of::<In>())
            .or_insert_with(|| {
                let problem = Problem::<In>::random(m, n, k, seed);
                let reference = cpu_reference(&problem).expect("a random problem is packed");
                Box::new((problem, reference))
            })
            .downcast_ref()
            .expect("entries are keyed by their type")
    }

    /// One poisoned launch of `kernel` on the problem of its input type.
    fn check<In: Element, Out: Element>(
        &mut self,
        kernel: &GemmKernel<In, Out>,
        stream: &Arc<CudaStream>,
    ) -> Result<ErrorReport, Error> {
        let (problem, reference) = self.get::<In>();
        check_against(kernel, stream, problem, reference, Reference::CpuF64)
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn every_catalog_kernel_matches_float64_on_the_shape_suite() {
    let (ctx, stream) = gpu();
    let kernels: Vec<AnyKernel> = CATALOG.iter().map(|e| load(&ctx, e)).collect();
    let mut failures = Vec::new();
    let mut checked = vec![0usize; kernels.len()];
    for shape in SUITE {
        for seed in SEEDS {
            // One problem and reference per (shape, seed, input type), shared by every kernel
            // of that input type that admits the shape.
            let mut problems = Problems::new(shape, seed);
            for (index, kernel) in kernels.iter().enumerate() {
                let name = kernel.info().name();
                if shape.admitted_by(kernel.info().launch()).is_err() {
                    continue;
                }
                let types = kernel.types();
                // Keyed on the types and the problem: see `Tolerance::for_types`.
                let tolerance = Tolerance::for_kernel(types, shape.m, shape.n, shape.k);
                let report = with_kernel!(kernel, typed => problems.check(typed, &stream))
                    .unwrap_or_else(|e| panic!("{name} at {shape}: {e}"));
                eprintln!("{name:<28} {types:<10} {shape:>15} seed {seed:#x}: {report}");
                checked[index] += 1;
                if let Err(broken) = report.check(&tolerance) {
                    failures.push(format!(
                        "{name} ({types}) at {shape}, seed {seed:#x}: {broken}"
                    ));
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "wrong results:\n{}",
        failures.join("\n")
    );
    for (kernel, count) in kernels.iter().zip(&checked) {
        // Every family computes partial tiles, so every kernel admits every shape of the
        // suite, each with every seed: none may be skipped.
        assert_eq!(
            *count,
            SUITE.len() * SEEDS.len(),
            "{} was checked only {count} times",
            kernel.info().name()
        );
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn padded_leading_dimensions_compute_and_leave_the_gaps_alone() {
    let (ctx, stream) = gpu();
    for entry in CATALOG {
        let kernel = load(&ctx, entry);
        let types = kernel.types();
        with_kernel!(&kernel, typed => check_padded(typed, types, &stream));
    }
}

/// A launch with every leading dimension longer than its row: the result must be right, and
/// the padding of C untouched.
fn check_padded<In: Element, Out: Element>(
    kernel: &GemmKernel<In, Out>,
    types: KernelTypes,
    stream: &Arc<CudaStream>,
) {
    let launch = kernel.info().launch();
    let (m, n, k) = (2 * launch.tile_m, 2 * launch.tile_n, 4 * launch.tile_k);
    // Strides padded by whole vectors of the kernel's alignment, so they stay aligned.
    let vector = |bytes: u32| (launch.operand_align_bytes / bytes).max(1);
    let line = |operand| launch.stored_dims(operand, m, n, k).1;
    let ld = (
        line(Operand::A) + vector(In::BYTES),
        line(Operand::B) + 2 * vector(In::BYTES),
        n + 3 * vector(Out::BYTES),
    );
    check_with_ld(kernel, types, stream, Shape::new(m, n, k), ld, 7);
}

/// One launch of `shape` with leading dimensions `(lda, ldb, ldc)` on fresh inputs from
/// `seed`, A and B laid out as the kernel's layout says and padded with NaN, C poisoned: the
/// result must match the reference `reference_for` picks, and the padding of C stay
/// untouched.
fn check_with_ld<In: Element, Out: Element>(
    kernel: &GemmKernel<In, Out>,
    types: KernelTypes,
    stream: &Arc<CudaStream>,
    shape: Shape,
    ld: (u32, u32, u32),
    seed: u64,
) {
    let (problem, reference, kind) = problem_and_reference::<In>(stream, shape, seed);
    check_problem(kernel, types, stream, &problem, &reference, kind, ld);
}

/// Random inputs of `shape` from `seed` and the reference `reference_for` picks.
fn problem_and_reference<In: Element>(
    stream: &Arc<CudaStream>,
    shape: Shape,
    seed: u64,
) -> (Problem<In>, Vec<f64>, Reference) {
    let Shape { m, n, k, .. } = shape;
    let problem = Problem::<In>::random(m, n, k, seed);
    let (reference, kind) = reference_of(stream, &problem).unwrap();
    (problem, reference, kind)
}

/// One launch on `problem` with leading dimensions `(lda, ldb, ldc)`, A and B laid out as the
/// kernel's layout says and padded with NaN, C poisoned: the result must match `reference`,
/// and the padding of C stay untouched.
fn check_problem<In: Element, Out: Element>(
    kernel: &GemmKernel<In, Out>,
    types: KernelTypes,
    stream: &Arc<CudaStream>,
    problem: &Problem<In>,
    reference: &[f64],
    kind: Reference,
    (lda, ldb, ldc): (u32, u32, u32),
) {
    let name = kernel.info().name();
    let (m, n, k) = (problem.m, problem.n, problem.k);
    let shape = Shape::new(m, n, k);
    let c = run_poisoned_with_ld(kernel, stream, problem, (lda, ldb, ldc))
        .unwrap_or_else(|e| panic!("{name} at {shape}: {e}"));
    let report = compare(&c, reference, m, n, ldc, kind).unwrap();
    eprintln!("{name:<28} {types:<10} {shape:>15} lda {lda} ldb {ldb} ldc {ldc}: {report}");
    report
        .check(&Tolerance::for_kernel(types, m, n, k))
        .unwrap_or_else(|broken| panic!("{name} at {shape}, ld {lda}/{ldb}/{ldc}: {broken}"));
    let gap_writes = (0..m as usize)
        .flat_map(|row| &c[row * ldc as usize + n as usize..(row + 1) * ldc as usize])
        .filter(|value| !value.is_poison())
        .count();
    assert_eq!(
        gap_writes, 0,
        "{name} at {shape} wrote into the padding of C"
    );
}

/// The SIMT and mma.sync kernels of the catalog, with their pipeline depth.
fn edge_kernels(ctx: &Arc<CudaContext>) -> Vec<(AnyKernel, u32)> {
    let kernels: Vec<(AnyKernel, u32)> = CATALOG
        .iter()
        .filter_map(|entry| {
            let emitted = emit(entry);
            matches!(emitted.spec().mma, Mma::Fma | Mma::MmaSync)
                .then(|| (load(ctx, entry), emitted.spec().stages))
        })
        .collect();
    assert!(kernels.len() >= 20, "{} kernels", kernels.len());
    for (kernel, _) in &kernels {
        assert!(
            kernel.info().launch().partial_tiles,
            "{}",
            kernel.info().name()
        );
    }
    kernels
}

/// Shapes around a kernel's tiles (`stages` deep): 1x1x1; one under, at and one over the tile
/// in each dimension alone and in all three; K shorter than one k tile and than the ring;
/// two tiles and a bit; and the shapes of real models that are no tile's multiple, the large
/// ones against cuBLAS.
fn shapes_around_tiles(launch: &LaunchShape, stages: u32) -> Vec<Shape> {
    let (tm, tn, tk) = (launch.tile_m, launch.tile_n, launch.tile_k);
    let mut shapes = vec![Shape::new(1, 1, 1)];
    for delta in [-1i64, 0, 1] {
        let at = |t: u32| (i64::from(t) + delta).max(1) as u32;
        shapes.extend([
            Shape::new(at(tm), 2 * tn, 2 * tk),
            Shape::new(2 * tm, at(tn), 2 * tk),
            Shape::new(2 * tm, 2 * tn, at(tk)),
            Shape::new(at(tm), at(tn), at(tk)),
        ]);
    }
    let ring = (stages.max(2) - 1) * tk;
    shapes.extend([
        Shape::new(tm + 1, tn + 1, (tk / 2).max(1)),
        Shape::new(3 * tm - 1, tn - 1, ring.saturating_sub(1).max(1)),
        Shape::new(tm, 3 * tn + 1, ring + 1),
        Shape::new(2 * tm + 3, 2 * tn + 5, 3 * tk + 3),
        Shape::new(777, 4099, 2048),
        Shape::new(3000, 5000, 1234),
        Shape::new(16, 4096, 14336),
        Shape::new(64, 8192, 8192),
    ]);
    shapes
}

/// Every SIMT and mma.sync catalog kernel over shapes around its tiles, with rows padded to
/// its alignment and gaps between C's rows that must stay poisoned.
#[test]
#[ignore = "needs a CUDA GPU"]
fn simt_and_mma_sync_kernels_compute_shapes_around_their_tiles() {
    let (ctx, stream) = gpu();
    for (kernel, stages) in edge_kernels(&ctx) {
        let types = kernel.types();
        let shapes = shapes_around_tiles(kernel.info().launch(), stages);
        for (index, shape) in shapes.into_iter().enumerate() {
            with_kernel!(&kernel, typed => {
                let ld = layout_ld(typed, shape, (0, 0, 0));
                check_with_ld(typed, types, &stream, shape, ld, 0xED6E_0000 + index as u64)
            });
        }
    }
}

/// One size of a random sweep: 1 and the tile sizes (and their multiples) one under, at and
/// one over, most of the time; anything in `1..=max` otherwise.
fn biased_dim(rng: &mut StdRng, tiles: &[u32], max: u32) -> u32 {
    match rng.random_range(0..8) {
        0 => 1,
        1 | 2 => rng.random_range(1..=max),
        _ => {
            let tile = tiles[rng.random_range(0..tiles.len())];
            let multiple = tile * rng.random_range(1..=(max / tile).max(1));
            (multiple + rng.random_range(0..=2))
                .saturating_sub(1)
                .clamp(1, max)
        }
    }
}

/// The random shapes of the sweeps: M, N in 1..=4096, K in 1..=2048, biased (by
/// [`biased_dim`]) to 1 and to the tile sizes of the kernels swept and their multiples.
struct ShapeSampler {
    tiles_m: Vec<u32>,
    tiles_n: Vec<u32>,
    tiles_k: Vec<u32>,
}

impl ShapeSampler {
    fn of<'a>(launches: impl Iterator<Item = &'a LaunchShape> + Clone) -> ShapeSampler {
        let sizes = |pick: fn(&LaunchShape) -> u32| -> Vec<u32> {
            let mut sizes: Vec<u32> = launches.clone().map(pick).collect();
            sizes.sort_unstable();
            sizes.dedup();
            sizes
        };
        ShapeSampler {
            tiles_m: sizes(|l| l.tile_m),
            tiles_n: sizes(|l| l.tile_n),
            tiles_k: sizes(|l| l.tile_k),
        }
    }

    fn draw(&self, rng: &mut StdRng) -> Shape {
        Shape::new(
            biased_dim(rng, &self.tiles_m, 4096),
            biased_dim(rng, &self.tiles_n, 4096),
            biased_dim(rng, &self.tiles_k, 2048),
        )
    }
}

/// 200 random shapes (fixed seed) for every SIMT and mma.sync catalog kernel: M, N in
/// 1..=4096, K in 1..=2048, biased to 1 and to one under, at and one over the catalog's tile
/// sizes and their multiples. Each shape's inputs and reference are made once per input type
/// and shared by the kernels of that type.
#[test]
#[ignore = "needs a CUDA GPU"]
fn random_shapes_around_the_tiles_compute() {
    const SHAPES: usize = 200;
    let (ctx, stream) = gpu();
    let kernels = edge_kernels(&ctx);
    let sampler = ShapeSampler::of(kernels.iter().map(|(k, _)| k.info().launch()));
    let mut rng = StdRng::seed_from_u64(0x5EED_ED6E);
    let shapes: Vec<Shape> = (0..SHAPES).map(|_| sampler.draw(&mut rng)).collect();
    let mut checked = vec![0usize; kernels.len()];
    for (index, &shape) in shapes.iter().enumerate() {
        let mut problems = PaddedProblems::new(shape, 0xED6E_1000 + index as u64);
        for (slot, (kernel, _)) in kernels.iter().enumerate() {
            let types = kernel.types();
            with_kernel!(kernel, typed => problems.check(typed, types, &stream));
            checked[slot] += 1;
        }
    }
    assert!(checked.iter().all(|&count| count == SHAPES));
}

/// One shape's random problem and reference per input type, made on first use.
struct PaddedProblems {
    shape: Shape,
    seed: u64,
    by_type: HashMap<TypeId, Box<dyn Any>>,
}

impl PaddedProblems {
    fn new(shape: Shape, seed: u64) -> PaddedProblems {
        PaddedProblems {
            shape,
            seed,
            by_type: HashMap::new(),
        }
    }

    fn check<In: Element, Out: Element>(
        &mut self,
        kernel: &GemmKernel<In, Out>,
        types: KernelTypes,
        stream: &Arc<CudaStream>,
    ) {
        let ld = layout_ld(kernel, self.shape, (0, 0, 0));
        self.check_with_ld(kernel, types, stream, ld);
    }

    /// The same with leading dimensions `(lda, ldb, ldc)`.
    fn check_with_ld<In: Element, Out: Element>(
        &mut self,
        kernel: &GemmKernel<In, Out>,
        types: KernelTypes,
        stream: &Arc<CudaStream>,
        ld: (u32, u32, u32),
    ) {
        let (shape, seed) = (self.shape, self.seed);
        let (problem, reference, kind) = self
            .by_type
            .entry(TypeId::of::<In>())
            .or_insert_with(|| Box::new(problem_and_reference::<In>(stream, shape, seed)))
            .downcast_ref::<(Problem<In>, Vec<f64>, Reference)>()
            .expect("entries are keyed by their type");
        check_problem(kernel, types, stream, problem, reference, *kind, ld);
    }
}

/// Kernels that compute partial tiles take any M, N, K of at least 1: sizes one under and
/// over the tile, single rows and columns, a K shorter than one k tile, and the suite's two
/// shapes that are no tile's multiple. Leading dimensions are the sizes rounded up to the
/// kernel's alignment (the TMA needs 16-byte row strides).
#[test]
#[ignore = "needs a CUDA GPU"]
fn partial_tile_kernels_compute_any_shape() {
    let (ctx, stream) = gpu();
    let mut checked = 0;
    for entry in CATALOG {
        let kernel = load(&ctx, entry);
        // Every family computes partial tiles: every catalog kernel runs the shapes.
        assert!(kernel.info().launch().partial_tiles, "{}", entry.name);
        checked += check_any_shapes(&kernel, &stream);
    }
    assert_eq!(checked, ANY_SHAPES * CATALOG.len());
}

/// Hopper epilogues beyond the catalog's: TMA stores through 64- and 32-byte swizzled boxes of
/// C, f16 C, and bf16 C stored directly, over the same shapes.
#[test]
#[ignore = "needs a CUDA GPU"]
fn every_hopper_epilogue_computes_any_shape() {
    let (ctx, stream) = gpu();
    for spec in [
        "name: c_box64, arch: sm_90a, mma: wgmma, tile: 128x96x32, swizzle: 64B",
        "name: c_box32, arch: sm_90a, mma: wgmma, tile: 64x48x16, consumers: 1, swizzle: 32B, stages: 3",
        "name: c_f16, arch: sm_90a, mma: wgmma, dtype: f16, tile: 128x128x64, schedule: persistent",
        "name: c_direct, arch: sm_90a, mma: wgmma, epilogue: direct, schedule: persistent",
    ] {
        let emitted = gemm_codegen::emit_str(spec).unwrap_or_else(|e| panic!("{spec}: {e}"));
        let kernel =
            AnyKernel::from_emitted(&ctx, &emitted).unwrap_or_else(|e| panic!("{spec}: {e}"));
        assert_eq!(check_any_shapes(&kernel, &stream), 8, "{spec}");
    }
}

/// The Hopper family in every layout: column-major A and B through transposed tensor maps
/// and wgmma's transpose flags, on the suite, padded leading dimensions and partial tiles.
#[test]
#[ignore = "needs a CUDA GPU"]
fn hopper_kernels_compute_every_layout() {
    let (ctx, stream) = gpu();
    for layout in ["rc", "cr", "cc"] {
        for base in [
            "arch: sm_90a, mma: wgmma, schedule: persistent",
            "arch: sm_90a, mma: wgmma, tile: 128x128x32, swizzle: 64B, stages: 6",
            "arch: sm_90a, mma: wgmma, copy: tma(multicast = 2), cluster: 2x1, schedule: persistent",
            "arch: sm_90a, mma: wgmma, tile: 256x128x64, copy: tma(multicast = 2), cluster: 1x2, schedule: persistent",
            "arch: sm_90a, mma: wgmma, dtype: f16, out: f32, tile: 128x128x64, consumers: 1",
        ] {
            let spec = format!("name: l_{layout}, layout: {layout}, {base}");
            let emitted = gemm_codegen::emit_str(&spec).unwrap_or_else(|e| panic!("{spec}: {e}"));
            let kernel =
                AnyKernel::from_emitted(&ctx, &emitted).unwrap_or_else(|e| panic!("{spec}: {e}"));
            let types = kernel.types();
            for shape in [Shape::new(256, 384, 512), Shape::new(1024, 1024, 1024)] {
                for seed in SEEDS {
                    let report = with_kernel!(&kernel, typed => {
                        let problem = Problem::random(shape.m, shape.n, shape.k, seed);
                        let reference = cpu_reference(&problem).unwrap();
                        check_against(typed, &stream, &problem, &reference, Reference::CpuF64).unwrap()
                    });
                    eprintln!("{spec} at {shape}: {report}");
                    report
                        .check(&Tolerance::for_kernel(types, shape.m, shape.n, shape.k))
                        .unwrap_or_else(|broken| panic!("{spec} at {shape}: {broken}"));
                }
            }
            with_kernel!(&kernel, typed => check_padded(typed, types, &stream));
            assert_eq!(check_any_shapes(&kernel, &stream), 8, "{spec}");
        }
    }
}

/// The layouts with a column-major operand.
const COLUMN_MAJOR_LAYOUTS: [&str; 3] = ["rc", "cr", "cc"];

/// The only SIMT or mma.sync catalog kernel refused in some layout: a row-major A with a
/// column-major B reads both operands as vectors along K, and at 16x8 accumulators per
/// thread those do not fit the registers (validation says so rather than ptxas spilling).
const REFUSED_IN_LAYOUT: [&str; 1] = ["simt_128x256x8_cp2_rc"];

/// Every SIMT and mma.sync catalog spec re-specified in each layout with a column-major
/// operand, under the name `<catalog name>_<layout>`, with its stages: the emitted kernels,
/// and the names validation refused (each for its registers).
fn layout_specs() -> (Vec<(String, Emitted, u32)>, Vec<String>) {
    let mut emitted = Vec::new();
    let mut refused = Vec::new();
    for entry in CATALOG {
        if !matches!(emit(entry).spec().mma, Mma::Fma | Mma::MmaSync) {
            continue;
        }
        for layout in COLUMN_MAJOR_LAYOUTS {
            let name = format!("{}_{layout}", entry.name);
            let spec = entry.spec.replacen(
                &format!("name: {}", entry.name),
                &format!("name: {name}"),
                1,
            );
            match gemm_codegen::emit_str(&format!("{spec}, layout: {layout}")) {
                Ok(kernel) => {
                    let stages = kernel.spec().stages;
                    emitted.push((name, kernel, stages));
                }
                Err(error) => {
                    assert!(
                        error.to_string().contains("registers per thread"),
                        "{name}: {error}"
                    );
                    refused.push(name);
                }
            }
        }
    }
    (emitted, refused)
}

/// Without a GPU: what the layout tests launch. Every SIMT and mma.sync catalog spec emits
/// in rc, cr and cc but the one whose registers do not fit, every one computes partial tiles
/// and lays its operands out as its layout says.
#[test]
fn every_simt_and_mma_sync_catalog_spec_emits_in_every_layout() {
    let (emitted, refused) = layout_specs();
    assert_eq!(refused, REFUSED_IN_LAYOUT);
    let catalog_specs = CATALOG
        .iter()
        .filter(|entry| matches!(emit(entry).spec().mma, Mma::Fma | Mma::MmaSync))
        .count();
    assert!(catalog_specs >= 23, "{catalog_specs}");
    assert_eq!(
        emitted.len() + refused.len(),
        3 * catalog_specs,
        "{}",
        emitted.len()
    );
    for (name, kernel, _) in &emitted {
        let launch = kernel.launch();
        assert!(launch.partial_tiles, "{name}");
        let layout = kernel.spec().layout;
        let order = |row_major| {
            if row_major {
                gemm_codegen::StorageOrder::RowMajor
            } else {
                gemm_codegen::StorageOrder::ColMajor
            }
        };
        assert_eq!(launch.a_order, order(layout.a_row_major()), "{name}");
        assert_eq!(launch.b_order, order(layout.b_row_major()), "{name}");
    }
}

/// The layout kernels, loaded, with their stages.
fn layout_kernels(ctx: &Arc<CudaContext>) -> Vec<(AnyKernel, u32)> {
    let (emitted, refused) = layout_specs();
    assert_eq!(refused, REFUSED_IN_LAYOUT);
    emitted
        .into_iter()
        .map(|(name, kernel, stages)| {
            let loaded =
                AnyKernel::from_emitted(ctx, &kernel).unwrap_or_else(|e| panic!("{name}: {e}"));
            (loaded, stages)
        })
        .collect()
}

/// Leading dimensions for `shape` in the kernel's layout: each stored line (a row, or a
/// column of a column-major operand) rounded up to the kernel's alignment plus `extra`
/// vectors of it, and C's rows plus at least one vector, so C has gaps to stay poisoned.
fn layout_ld<In: Element, Out: Element>(
    kernel: &GemmKernel<In, Out>,
    shape: Shape,
    extra: (u32, u32, u32),
) -> (u32, u32, u32) {
    let launch = kernel.info().launch();
    // A and B lines align to the copy vector, C's rows to its stores.
    let vector = |bytes: u32| (launch.operand_align_bytes / bytes).max(1);
    let round = |value: u32, bytes: u32| value.div_ceil(vector(bytes)) * vector(bytes);
    let c_vector = (launch.output_align_bytes / Out::BYTES).max(1);
    let line = |operand| launch.stored_dims(operand, shape.m, shape.n, shape.k).1;
    (
        round(line(Operand::A), In::BYTES) + extra.0 * vector(In::BYTES),
        round(line(Operand::B), In::BYTES) + extra.1 * vector(In::BYTES),
        shape.n.div_ceil(c_vector) * c_vector + (1 + extra.2) * c_vector,
    )
}

/// Every SIMT and mma.sync catalog kernel in rc, cr and cc (column-major A with `lda >= M`,
/// column-major B with `ldb >= K`) over the shapes around its tiles: 1x1x1, one under, at and
/// one over the tile in each dimension alone and in all three, K shorter than one k tile and
/// than the ring, two tiles and a bit; padded leading dimensions, NaN in the padding of A and
/// B, poisoned gaps of C that must stay untouched, against float64.
#[test]
#[ignore = "needs a CUDA GPU"]
fn simt_and_mma_sync_kernels_compute_every_layout_around_their_tiles() {
    let (ctx, stream) = gpu();
    let kernels = layout_kernels(&ctx);
    let mut launches = 0;
    for (kernel, stages) in &kernels {
        let types = kernel.types();
        let launch = kernel.info().launch();
        // The shapes of real models stay with the row-major test: here the tiles' edges.
        let shapes: Vec<Shape> = shapes_around_tiles(launch, *stages)
            .into_iter()
            .filter(|s| u64::from(s.m) * u64::from(s.n) * u64::from(s.k) <= 1 << 27)
            .collect();
        assert!(shapes.len() >= 17, "{}", kernel.info().name());
        for (index, shape) in shapes.into_iter().enumerate() {
            with_kernel!(kernel, typed => {
                let ld = layout_ld(typed, shape, (index as u32 % 3, index as u32 % 2, 0));
                check_with_ld(typed, types, &stream, shape, ld, 0x1A70_0000 + index as u64)
            });
            launches += 1;
        }
    }
    eprintln!("{} layout kernels, {launches} launches", kernels.len());
}

/// Random shapes (fixed seed) for every SIMT and mma.sync catalog spec in the layouts with a
/// column-major operand: `GEMM_LAYOUT_SHAPES` shapes per spec (200 unless set), M, N in
/// 1..=4096, K in 1..=2048, biased to 1 and to one under, at and one over the catalog's tile
/// sizes and their multiples. Each shape runs in a layout that turns with the shape and the
/// spec (rc, cr, cc in turn: each layout gets a third of every spec's shapes, and every shape
/// runs in every layout across the specs; the row-major sweep is
/// `random_shapes_around_the_tiles_compute`), each operand's leading dimension padded by 0 to
/// 3 random vectors. Each shape's inputs and reference are made once per input type.
#[test]
#[ignore = "needs a CUDA GPU"]
fn random_shapes_compute_in_every_layout() {
    let shape_count: usize = std::env::var("GEMM_LAYOUT_SHAPES")
        .map(|v| v.parse().expect("GEMM_LAYOUT_SHAPES is a count"))
        .unwrap_or(200);
    let started = std::time::Instant::now();
    let (ctx, stream) = gpu();
    let kernels = layout_kernels(&ctx);
    // Per catalog spec, its kernels in rc, cr and cc (two where validation refused one).
    let specs: Vec<(&str, Vec<&AnyKernel>)> = CATALOG
        .iter()
        .filter_map(|entry| {
            let in_layouts: Vec<&AnyKernel> = COLUMN_MAJOR_LAYOUTS
                .iter()
                .filter_map(|layout| {
                    let name = format!("{}_{layout}", entry.name);
                    kernels
                        .iter()
                        .map(|(kernel, _)| kernel)
                        .find(|kernel| kernel.info().name() == name)
                })
                .collect();
            (!in_layouts.is_empty()).then_some((entry.name, in_layouts))
        })
        .collect();
    assert_eq!(
        specs.iter().map(|(_, k)| k.len()).sum::<usize>(),
        kernels.len()
    );
    let sampler = ShapeSampler::of(kernels.iter().map(|(k, _)| k.info().launch()));
    let mut rng = StdRng::seed_from_u64(0x1A70_5EED);
    let mut checked = vec![0usize; specs.len()];
    for index in 0..shape_count {
        let shape = sampler.draw(&mut rng);
        let mut problems = PaddedProblems::new(shape, 0x1A70_1000 + index as u64);
        for (slot, (_, in_layouts)) in specs.iter().enumerate() {
            let kernel = in_layouts[(index + slot) % in_layouts.len()];
            let types = kernel.types();
            let extra = (
                rng.random_range(0..=3),
                rng.random_range(0..=3),
                rng.random_range(0..=3),
            );
            with_kernel!(kernel, typed => {
                let ld = layout_ld(typed, shape, extra);
                problems.check_with_ld(typed, types, &stream, ld)
            });
            checked[slot] += 1;
        }
    }
    for ((name, _), count) in specs.iter().zip(&checked) {
        assert_eq!(*count, shape_count, "{name}");
    }
    eprintln!(
        "{} catalog specs x {shape_count} random shapes, layouts in turn ({} kernels), {:.0} s",
        specs.len(),
        kernels.len(),
        started.elapsed().as_secs_f64()
    );
}

/// The Hopper family's random sweep: 200 random shapes (fixed seed, biased like the SIMT and
/// mma.sync sweep) for every wgmma catalog kernel, each shape in a layout that turns with the
/// shape and the kernel (so every kernel runs every layout on 50 shapes), and the persistent
/// catalog kernel in all four layouts on every shape. Leading dimensions are random: the
/// stored line rounded up to the kernel's alignment plus 0 to 3 more vectors, with NaN in the
/// padding of A and B and poisoned gaps of C that must stay untouched.
#[test]
#[ignore = "needs a CUDA GPU"]
fn hopper_kernels_compute_random_shapes_in_every_layout() {
    const SHAPES: usize = 200;
    const LAYOUTS: [&str; 4] = ["rr", "rc", "cr", "cc"];
    const EVERY_LAYOUT: &str = "wgmma_bf16_128x256x64_s4_persistent";
    let started = std::time::Instant::now();
    let (ctx, stream) = gpu();
    // Per catalog entry, its kernel in each layout.
    let kernels: Vec<(&str, Vec<AnyKernel>)> = CATALOG
        .iter()
        .filter(|entry| emit(entry).spec().mma == Mma::Wgmma)
        .map(|entry| {
            let in_layouts = LAYOUTS
                .iter()
                .map(|layout| {
                    let spec = format!("{}, layout: {layout}", entry.spec);
                    let emitted =
                        gemm_codegen::emit_str(&spec).unwrap_or_else(|e| panic!("{spec}: {e}"));
                    AnyKernel::from_emitted(&ctx, &emitted)
                        .unwrap_or_else(|e| panic!("{spec}: {e}"))
                })
                .collect();
            (entry.name, in_layouts)
        })
        .collect();
    assert!(kernels.len() >= 8, "{} wgmma kernels", kernels.len());
    assert!(kernels.iter().any(|(name, _)| *name == EVERY_LAYOUT));
    let sampler = ShapeSampler::of(kernels.iter().map(|(_, k)| k[0].info().launch()));
    let mut rng = StdRng::seed_from_u64(0x5EED_40BB);
    let mut checked = vec![[0usize; 4]; kernels.len()];
    for index in 0..SHAPES {
        let shape = sampler.draw(&mut rng);
        let mut problems = PaddedProblems::new(shape, 0x40BB_1000 + index as u64);
        for (slot, (name, in_layouts)) in kernels.iter().enumerate() {
            let layouts: Vec<usize> = if *name == EVERY_LAYOUT {
                (0..LAYOUTS.len()).collect()
            } else {
                vec![(index + slot) % LAYOUTS.len()]
            };
            for layout in layouts {
                let kernel = &in_layouts[layout];
                let extra = (
                    rng.random_range(0..=3),
                    rng.random_range(0..=3),
                    rng.random_range(0..=3),
                );
                let types = kernel.types();
                with_kernel!(kernel, typed => {
                    let ld = layout_ld(typed, shape, extra);
                    problems.check_with_ld(typed, types, &stream, ld)
                });
                checked[slot][layout] += 1;
            }
        }
    }
    for ((name, _), counts) in kernels.iter().zip(&checked) {
        eprintln!("{name}: shapes checked in rr/rc/cr/cc: {counts:?}");
        let expected = if *name == EVERY_LAYOUT {
            SHAPES
        } else {
            SHAPES / 4
        };
        assert!(counts.iter().all(|&count| count == expected), "{name}");
    }
    eprintln!(
        "{} launches in {:.0} s",
        checked.iter().flatten().sum::<usize>(),
        started.elapsed().as_secs_f64()
    );
}

/// Sizes one under and over the tile, single rows and columns, a K shorter than one k tile,
/// and the suite's two shapes that are no tile's multiple, against float64 (or cuBLAS).
/// Leading dimensions are the sizes rounded up to the kernel's alignment (the TMA needs
/// 16-byte row strides), so C's rows end inside a 16-byte unit where N does. Returns the
/// shapes checked.
/// Shapes [`check_any_shapes`] runs per kernel.
const ANY_SHAPES: usize = 8;

fn check_any_shapes(kernel: &AnyKernel, stream: &Arc<CudaStream>) -> usize {
    let launch = kernel.info().launch();
    let (tm, tn, tk) = (launch.tile_m, launch.tile_n, launch.tile_k);
    let shapes: [Shape; ANY_SHAPES] = [
        Shape::new(1, 1, 1),
        Shape::new(tm - 1, tn + 1, tk + 1),
        Shape::new(tm + 1, tn - 1, 2 * tk - 1),
        Shape::new(2 * tm + 3, 3 * tn - 5, tk / 2 + 3),
        Shape::new(65, 257, 17),
        Shape::new(16, 4096, 2048),
        Shape::new(777, 4099, 2048),
        Shape::new(3000, 5000, 1234),
    ];
    let types = kernel.types();
    for (index, shape) in shapes.into_iter().enumerate() {
        let round = |value: u32, bytes: u32| {
            let vector = (launch.operand_align_bytes / bytes).max(1);
            value.div_ceil(vector) * vector
        };
        let line = |operand| launch.stored_dims(operand, shape.m, shape.n, shape.k).1;
        let ld = with_kernel!(kernel, typed => {
            let (input, output) = element_bytes(typed);
            (round(line(Operand::A), input), round(line(Operand::B), input), round(shape.n, output))
        });
        with_kernel!(kernel, typed => check_with_ld(typed, types, stream, shape, ld, 0xED6E + index as u64));
    }
    shapes.len()
}

/// The element sizes of a typed kernel's input and output.
fn element_bytes<In: Element, Out: Element>(_kernel: &GemmKernel<In, Out>) -> (u32, u32) {
    (In::BYTES, Out::BYTES)
}

/// Verification helpers take public, possibly inconsistent data: every mismatch is an error
/// before anything runs.
#[test]
#[ignore = "needs a CUDA GPU"]
fn verification_refuses_inconsistent_problems() {
    let (ctx, stream) = gpu();
    let kernel = load_simt(&ctx);
    let launch = kernel.info().launch();
    let (m, n, k) = (2 * launch.tile_m, 2 * launch.tile_n, 4 * launch.tile_k);
    let problem = Problem::<f32>::random(m, n, k, 12);
    let reference = cpu_reference(&problem).unwrap();
    let error = check_against(
        &kernel,
        &stream,
        &problem,
        &reference[1..],
        Reference::CpuF64,
    )
    .unwrap_err();
    assert!(
        matches!(
            error,
            Error::PackedSize {
                what: "the reference",
                ..
            }
        ),
        "{error:?}"
    );
    let mut short = problem.clone();
    short.b.pop();
    for error in [
        check_against(&kernel, &stream, &short, &reference, Reference::CpuF64).unwrap_err(),
        cublas_reference(&stream, &short).unwrap_err(),
    ] {
        eprintln!("{error}");
        assert!(
            matches!(
                error,
                Error::PackedSize {
                    what: "the problem's B",
                    ..
                }
            ),
            "{error:?}"
        );
    }
    let report = check_against(&kernel, &stream, &problem, &reference, Reference::CpuF64).unwrap();
    report.check(&Tolerance::f32_accumulation(k)).unwrap();
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn bad_launch_arguments_are_refused() {
    let (ctx, stream) = gpu();
    let entry = simt_entry();
    let kernel = load_simt(&ctx);
    let launch = kernel.info().launch();
    assert_eq!(
        launch.operand_align_bytes, 16,
        "the cases below assume 16-byte vectors"
    );
    let (m, n, k) = (2 * launch.tile_m, 2 * launch.tile_n, 4 * launch.tile_k);
    let (mn, mk) = ((m * n) as usize, (m * k) as usize);
    let problem = Problem::<f32>::random(m, n, k, 11);
    let a = stream.clone_htod(&problem.a).unwrap();
    let b = stream.clone_htod(&problem.b).unwrap();
    let mut c = stream.alloc_zeros::<f32>(mn).unwrap();

    let refused = |result: Result<(), RuntimeError>, what: &str| -> RuntimeError {
        let error = result.expect_err(what);
        eprintln!("{what}: {error}");
        error
    };
    let error = refused(kernel.launch(&stream, &a, &b, &mut c, 0, n, k), "M = 0");
    assert!(
        matches!(error, RuntimeError::Dims { m: 0, .. }),
        "{error:?}"
    );
    // Any positive M is computable, but not from buffers sized for m rows.
    let error = refused(
        kernel.launch(&stream, &a, &b, &mut c, m + 8, n, k),
        "M past the buffers",
    );
    assert!(
        matches!(
            error,
            RuntimeError::BufferTooSmall {
                operand: Operand::A,
                ..
            }
        ),
        "{error:?}"
    );

    let short_a = stream.alloc_zeros::<f32>(mk - 1).unwrap();
    let error = refused(
        kernel.launch(&stream, &short_a, &b, &mut c, m, n, k),
        "A one short",
    );
    assert!(
        matches!(error, RuntimeError::BufferTooSmall { operand: Operand::A, needed, .. } if needed == mk as u64),
        "{error:?}"
    );

    let error = refused(
        kernel.launch_with_ld(&stream, &a, &b, &mut c, m, n, k, k, n - 4, n),
        "ldb shorter than a row",
    );
    assert!(
        matches!(
            error,
            RuntimeError::LeadingDimTooSmall {
                operand: Operand::B,
                ..
            }
        ),
        "{error:?}"
    );

    let mut wide_c = stream
        .alloc_zeros::<f32>(m as usize * (n as usize + 1))
        .unwrap();
    let error = refused(
        kernel.launch_with_ld(&stream, &a, &b, &mut wide_c, m, n, k, k, n, n + 1),
        "ldc of an odd number of floats",
    );
    assert!(
        matches!(error, RuntimeError::MisalignedLeadingDim { operand: Operand::C, ld, .. } if ld == n + 1),
        "{error:?}"
    );

    let long_a = stream.alloc_zeros::<f32>(mk + 1).unwrap();
    let shifted_a = long_a.slice(1..);
    let error = refused(
        kernel.launch(&stream, &shifted_a, &b, &mut c, m, n, k),
        "A one float off",
    );
    assert!(
        matches!(
            error,
            RuntimeError::MisalignedPointer {
                operand: Operand::A,
                align: 16,
                ..
            }
        ),
        "{error:?}"
    );

    // The kernel's element type is f32; loading it as bf16 is refused before any JIT work.
    let error = GemmKernel::<bf16, f32>::from_emitted(&ctx, &emit(entry)).unwrap_err();
    assert!(
        matches!(error, RuntimeError::ElementType { role: "input", .. }),
        "{error:?}"
    );
    // And a 16-bit kernel loaded with the other 16-bit type, or as f32, is refused too.
    for (other, types) in one_entry_per_types() {
        let emitted = emit(other);
        let wrong = match (types.dtype(), types.out()) {
            (DType::Bf16, DType::Bf16) => {
                GemmKernel::<f16, f16>::from_emitted(&ctx, &emitted).map(drop)
            }
            (DType::F16, DType::F16) => {
                GemmKernel::<bf16, bf16>::from_emitted(&ctx, &emitted).map(drop)
            }
            (DType::Bf16 | DType::F16, DType::F32) => {
                GemmKernel::<f32, f32>::from_emitted(&ctx, &emitted).map(drop)
            }
            _ => continue,
        };
        let error = wrong.expect_err("wrong element types");
        eprintln!("{} ({types}) with wrong types: {error}", other.name);
        assert!(
            matches!(error, RuntimeError::ElementType { .. }),
            "{error:?}"
        );
    }

    // Compute capabilities the device does not have: a newer plain target, and an
    // arch-specific target other than the device's own.
    let device_cc = {
        let (major, minor) = ctx.compute_capability().unwrap();
        (major * 10 + minor) as u32
    };
    for (kernel_cc, arch_specific) in [(device_cc + 10, false), (device_cc - 10, true)] {
        let emitted: &'static Emitted = Box::leak(Box::new(emit(entry)));
        let mut parts = emitted.info().parts();
        parts.launch.compute_capability = kernel_cc;
        parts.launch.arch_specific = arch_specific;
        // SAFETY: load refuses the architecture before the PTX is compiled.
        let probe = unsafe { KernelInfo::from_parts(parts) };
        let error = GemmKernel::<f32, f32>::load(&ctx, &probe).unwrap_err();
        eprintln!("cc {kernel_cc} arch-specific {arch_specific}: {error}");
        assert!(
            matches!(error, RuntimeError::ArchMismatch { device_cc: d, .. } if d == device_cc),
            "{error:?}"
        );
    }

    // After every refusal the same buffers still launch and compute correctly.
    kernel.launch(&stream, &a, &b, &mut c, m, n, k).unwrap();
    let result = stream.clone_dtoh(&c).unwrap();
    let report = compare(
        &result,
        &cpu_reference(&problem).unwrap(),
        m,
        n,
        n,
        Reference::CpuF64,
    )
    .unwrap();
    report.check(&Tolerance::f32_accumulation(k)).unwrap();
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn cublas_reference_agrees_with_float64() {
    let (_ctx, stream) = gpu();
    // Non-square, so swapped operands or exchanged m and n would show.
    let (m, n, k) = (384, 256, 640);
    fn reference_error<In: Element>(stream: &Arc<CudaStream>, m: u32, n: u32, k: u32) {
        let problem = Problem::<In>::random(m, n, k, 3);
        let from_cublas = cublas_reference(stream, &problem).unwrap();
        let exact = cpu_reference(&problem).unwrap();
        let as_f32: Vec<f32> = from_cublas.iter().map(|&v| v as f32).collect();
        let report = compare(&as_f32, &exact, m, n, n, Reference::CpuF64).unwrap();
        eprintln!(
            "cuBLAS reference on {} inputs vs float64: {report}",
            In::NAME
        );
        report.check(&Tolerance::f32_accumulation(k)).unwrap();
    }
    reference_error::<f32>(&stream, m, n, k);
    reference_error::<bf16>(&stream, m, n, k);
    reference_error::<f16>(&stream, m, n, k);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn cublas_baselines_compute_the_same_product() {
    let (_ctx, stream) = gpu();
    let blas = Cublas::new(&stream).unwrap();
    let (m, n, k) = (384, 256, 640);
    /// The baseline of `types` on the row-major problem, against float64 within the
    /// tolerance a kernel of those types must meet.
    fn baseline_error<In: Element, Out: Element>(
        stream: &Arc<CudaStream>,
        blas: &Cublas,
        types: KernelTypes,
        (m, n, k): (u32, u32, u32),
    ) {
        let baseline = CublasGemm::baseline(types).expect("cuBLAS multiplies these types");
        let problem = Problem::<In>::random(m, n, k, 4);
        let a = stream.clone_htod(&problem.a).unwrap();
        let b = stream.clone_htod(&problem.b).unwrap();
        let mut c = stream
            .clone_htod(&vec![Out::poison(); (m * n) as usize])
            .unwrap();
        blas.gemm(baseline, &a, &b, &mut c, m, n, k).unwrap();
        let c = stream.clone_dtoh(&c).unwrap();
        let report = compare(
            &c,
            &cpu_reference(&problem).unwrap(),
            m,
            n,
            n,
            Reference::CpuF64,
        )
        .unwrap();
        eprintln!("{} ({types}) vs float64: {report}", baseline.short_name());
        report
            .check(&Tolerance::for_kernel(types, m, n, k))
            .unwrap_or_else(|broken| panic!("{}: {broken}", baseline.short_name()));
    }
    let types = |dtype, out| KernelTypes::new(dtype, out).unwrap();
    let dims = (m, n, k);
    baseline_error::<f32, f32>(&stream, &blas, types(DType::F32, DType::F32), dims);
    baseline_error::<f32, f32>(&stream, &blas, types(DType::Tf32, DType::F32), dims);
    baseline_error::<bf16, bf16>(&stream, &blas, types(DType::Bf16, DType::Bf16), dims);
    baseline_error::<bf16, f32>(&stream, &blas, types(DType::Bf16, DType::F32), dims);
    baseline_error::<f16, f16>(&stream, &blas, types(DType::F16, DType::F16), dims);
    baseline_error::<f16, f32>(&stream, &blas, types(DType::F16, DType::F32), dims);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn verify_picks_cublas_for_large_problems_and_passes() {
    let (ctx, stream) = gpu();
    for (entry, types) in one_entry_per_types() {
        let kernel = load(&ctx, entry);
        let launch = kernel.info().launch();
        let large = Shape::cube(2048);
        large.admitted_by(launch).unwrap();
        let small = Shape::new(2 * launch.tile_m, 2 * launch.tile_n, 4 * launch.tile_k);
        for (shape, reference) in [(large, Reference::Cublas), (small, Reference::CpuF64)] {
            let Shape { m, n, k, .. } = shape;
            let report =
                with_kernel!(&kernel, typed => verify(typed, &stream, m, n, k, 9)).unwrap();
            eprintln!("{} ({types}) {shape}: {report}", entry.name);
            assert_eq!(report.reference, reference);
            report
                .check(&Tolerance::for_kernel(types, m, n, k))
                .unwrap();
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn persistent_kernels_compute_every_tile_over_many_rounds() {
    let (ctx, stream) = gpu();
    // Rasters both ways, bands that do not divide the tile columns or rows, a direct
    // epilogue (48x24 warp tiles), f32 out, one k step per tile; and the catalog's own.
    let mut specs: Vec<String> = [
        "dtype: bf16, tile: 128x256x64, warps: 2x4, stages: 3, schedule: persistent(raster = m, group = 3)",
        "dtype: f16, tile: 128x128x32, warps: 2x2, stages: 4, schedule: persistent(raster = n, group = 5)",
        "dtype: bf16, out: f32, tile: 128x128x16, warps: 2x2, stages: 2, schedule: persistent(raster = m, group = 64)",
        "dtype: tf32, tile: 48x24x32, warps: 3x1, stages: 2, schedule: persistent(raster = n, group = 7)",
    ]
    .iter()
    .map(|body| format!("name: persistent, arch: sm_90, mma: mma_sync, {body}"))
    .collect();
    specs.extend(
        CATALOG
            .iter()
            .filter(|e| e.spec.contains("schedule: persistent"))
            .map(|e| e.spec.to_string()),
    );
    assert!(specs.len() >= 5);
    for spec in &specs {
        let emitted = gemm_codegen::emit_str(spec).unwrap_or_else(|e| panic!("{spec}: {e}"));
        let kernel = AnyKernel::from_emitted(&ctx, &emitted).unwrap();
        let launch = kernel.info().launch();
        let resident = with_kernel!(&kernel, typed => typed.resident_blocks());
        assert!(resident > 0, "{spec}");
        // At least three rounds of resident blocks, with a ragged last one.
        let Shape { m, n, k, .. } = Shape::rounds_of(launch, resident, 3, 8);
        assert!(
            (m / launch.tile_m) * (n / launch.tile_n) > 3 * resident,
            "{spec}"
        );
        let types = kernel.types();
        let report = with_kernel!(&kernel, typed => verify(typed, &stream, m, n, k, 0x9e55))
            .unwrap_or_else(|e| panic!("{spec} at {m}x{n}x{k}: {e}"));
        eprintln!("{spec}: {m}x{n}x{k}, {resident} resident blocks: {report}");
        report
            .check(&Tolerance::for_kernel(types, m, n, k))
            .unwrap_or_else(|broken| panic!("{spec} at {m}x{n}x{k}: {broken}"));
    }
}

/// A math-only probe runs its k tiles `trips` times: every thread's accumulator sum is finite,
/// not zero, and doubles (within f32 rounding) from one trip to two. Bad launches are refused.
#[test]
#[ignore = "needs a CUDA GPU"]
fn math_only_probes_loop_over_their_trips() {
    use gemm_harness::probe::MathOnlyKernel;
    let (ctx, stream) = gpu();
    for name in [
        "mma_bf16_128x256x64_s3_h100",
        "mma_tf32_128x128x16_s4",
        "simt_64x64x16_cp4_h100",
        "wgmma_bf16_128x256x64_s4_persistent",
        "wgmma_bf16_128x128x64_s4_c1",
    ] {
        let entry = gemm_codegen::catalog::find(name).unwrap();
        let valid = gemm_dsl::check_str(entry.spec).unwrap();
        let probe = MathOnlyKernel::load(&ctx, gemm_codegen::emit_math_only(&valid)).unwrap();
        let blocks = 3;
        let mut out = stream.alloc_zeros::<f32>(probe.out_len(blocks)).unwrap();
        let mut sums = Vec::new();
        for trips in [1, 2] {
            probe.launch(&stream, blocks, trips, &mut out).unwrap();
            sums.push(stream.clone_dtoh(&out).unwrap());
        }
        for (thread, (&one, &two)) in sums[0].iter().zip(&sums[1]).enumerate() {
            assert!(
                one.is_finite() && one != 0.0,
                "{name} thread {thread}: {one}"
            );
            assert!(
                (two - 2.0 * one).abs() <= 1e-3 * one.abs().max(1.0),
                "{name} thread {thread}: one trip {one}, two trips {two}"
            );
        }
        assert!(matches!(
            probe.launch(&stream, blocks, 0, &mut out),
            Err(Error::ProbeLaunch { .. })
        ));
        assert!(matches!(
            probe.launch(&stream, blocks + 1, 1, &mut out),
            Err(Error::ProbeLaunch { .. })
        ));
    }
}

/// The hold ahead of the timed rounds: it lasts as long as asked, and a launch the host is
/// slow to issue is timed alone behind it. Each launch below waits 100 µs on the host, then
/// runs a kernel of a few µs. Issued directly, its events time the host's wait; queued behind
/// the hold (which must first outgrow its 2 ms to cover 32 such launches), they do not.
#[test]
#[ignore = "needs a CUDA GPU"]
fn a_hold_times_the_kernels_not_the_host() {
    use gemm_harness::bench::{median, time_round_robin, LaunchHold, Launcher, Rounds};
    use gemm_runtime::cudarc::driver::sys::CUevent_flags;
    use std::time::Duration;
    let (ctx, stream) = gpu();
    let hold = Arc::new(LaunchHold::load(&ctx).unwrap());

    let start = ctx
        .new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
        .unwrap();
    let end = ctx
        .new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
        .unwrap();
    start.record(&stream).unwrap();
    hold.launch(&stream, Duration::from_millis(5)).unwrap();
    end.record(&stream).unwrap();
    let held_ms = start.elapsed_ms(&end).unwrap();
    assert!(
        (5.0..6.0).contains(&held_ms),
        "a 5 ms hold took {held_ms} ms"
    );

    let host_wait = Duration::from_micros(100);
    let mut slow_host = |_: usize| {
        std::thread::sleep(host_wait);
        hold.launch(&stream, Duration::ZERO)
    };
    let medians = |queued: Option<Arc<LaunchHold>>, slow_host: &mut Launcher<'_>| {
        let rounds = Rounds {
            warmup: 2,
            sustain: Duration::ZERO,
            iters: 40,
            hold: queued,
        };
        let times = time_round_robin(&stream, &rounds, &mut [slow_host]).unwrap();
        assert_eq!(times[0].len(), 40, "every timed round is reported");
        median(&times[0]).unwrap()
    };
    let direct_ms = medians(None, &mut slow_host);
    let held_ms = medians(Some(hold.clone()), &mut slow_host);
    assert!(
        direct_ms >= 0.09,
        "issued directly: {direct_ms} ms, less than the host's wait"
    );
    assert!(held_ms < 0.03, "queued behind the hold: {held_ms} ms");
}

/// Kernels of both cp.async families whose main loop the tests below break.
const SKIPPING_KERNELS: [&str; 2] = ["simt_128x128x16_cp3", "mma_bf16_128x128x32_s3"];

/// Two ways to skip k tiles, written into a kernel's PTX: the last k tile dropped (one trip
/// fewer), and the read stage never advancing (every trip computes stage 0, which holds every
/// `stages`-th tile). Either reads and writes only what the kernel does, inside the ring.
fn k_tile_skipping_edits(ptx: &str) -> [(&'static str, String); 2] {
    let count = ptx
        .lines()
        .find(|line| line.starts_with("\tdiv.u32\t%k_tiles, "))
        .expect("the kernel counts its k tiles");
    let dropped = ptx.replacen(
        count,
        &format!("{count}\n\tsub.u32\t%k_tiles, %k_tiles, 1;"),
        1,
    );
    let rotate = "\tadd.u32\t%read_stage, %read_stage, ";
    let stuck: String = ptx
        .lines()
        .map(|line| match line.strip_prefix(rotate) {
            Some(_) => format!("{rotate}0;\n"),
            None => format!("{line}\n"),
        })
        .collect();
    assert!(
        stuck.contains(&format!("{rotate}0;")),
        "the read stage rotates"
    );
    [
        ("last k tile dropped", dropped),
        ("read stage stuck", stuck),
    ]
}

/// The edited kernels the GPU test launches assemble, and keep every SASS promise of the
/// kernel they come from: what breaks is the result, not the code path.
#[test]
fn kernels_edited_to_skip_a_k_tile_assemble_with_their_promises() {
    for name in SKIPPING_KERNELS {
        let emitted = emit(gemm_codegen::catalog::find(name).unwrap());
        for (edit, ptx) in k_tile_skipping_edits(emitted.ptx()) {
            assert_ne!(ptx, emitted.ptx(), "{name}, {edit}");
            let report = SassReport::from_ptx(&ptx, emitted.spec().arch.name())
                .unwrap_or_else(|error| panic!("{name}, {edit}: {error}"));
            report
                .require(emitted.expected_sass())
                .unwrap_or_else(|mismatch| panic!("{name}, {edit}: {mismatch}"));
        }
    }
}

/// verify must be able to say no: a kernel whose main loop skips a k tile is off by far more
/// than any tolerance, while the same kernel unedited passes on the same problem.
#[test]
#[ignore = "needs a CUDA GPU"]
fn verify_fails_kernels_whose_main_loop_skips_a_k_tile() {
    let (ctx, stream) = gpu();
    for name in SKIPPING_KERNELS {
        let emitted: &'static Emitted =
            Box::leak(Box::new(emit(gemm_codegen::catalog::find(name).unwrap())));
        let launch = emitted.launch();
        // Four k tiles: dropping one leaves about half the norm of C wrong (sqrt(1/4)).
        let (m, n, k) = (2 * launch.tile_m, 2 * launch.tile_n, 4 * launch.tile_k);
        let seed = 0x5C1B;
        let kernel = AnyKernel::from_emitted(&ctx, emitted).unwrap();
        let types = kernel.types();
        let tolerance = Tolerance::for_kernel(types, m, n, k);
        let good = with_kernel!(&kernel, typed => verify(typed, &stream, m, n, k, seed)).unwrap();
        eprintln!("{name} ({types}) {m}x{n}x{k}: {good}");
        good.check(&tolerance)
            .unwrap_or_else(|broken| panic!("{name} unedited: {broken}"));
        for (edit, ptx) in k_tile_skipping_edits(emitted.ptx()) {
            let mut parts = emitted.info().parts();
            parts.ptx = Box::leak(ptx.into_boxed_str());
            // SAFETY: the edits only shorten the loop or keep the reads on one stage of the
            // ring: the kernel touches no memory the unedited one does not.
            let info = unsafe { KernelInfo::from_parts(parts) };
            let broken =
                AnyKernel::load(&ctx, &info).unwrap_or_else(|e| panic!("{name}, {edit}: {e}"));
            let report =
                with_kernel!(&broken, typed => verify(typed, &stream, m, n, k, seed)).unwrap();
            eprintln!("{name} ({types}) {m}x{n}x{k}, {edit}: {report}");
            assert!(
                report.rel_frobenius > 0.1,
                "{name}, {edit}: relative error {} passes for a skipped k tile",
                report.rel_frobenius
            );
            assert!(
                report.check(&tolerance).is_err(),
                "{name}, {edit}: {report}"
            );
        }
    }
}

/// Hopper kernels whose k tiles the test below breaks: wgmma bf16 (one consumer pair and
/// ping-pong), fp8 with per-tensor scales (ping-pong) and with block scales (promoted every
/// k tile).
const HOPPER_SKIPPING_KERNELS: [&str; 4] = [
    "wgmma_bf16_128x256x64_s4_persistent",
    "wgmma_bf16_128x128x64_s6_pingpong",
    "wgmma_e4m3_128x128x128_s6_pingpong",
    "wgmma_e4m3_128x128x128_s5_block",
];

/// Two ways to lose k tiles in a Hopper kernel, written into its PTX: the last k tile dropped
/// (producer and consumers both count one fewer: the ring stays in step), and each k tile's
/// first wgmma overwriting the accumulators instead of adding to them (only the last k tile
/// is left; kernels that promote every k tile restart there anyway, so they get the first
/// edit only). Neither touches memory the kernel does not.
fn hopper_k_tile_edits(ptx: &str) -> Vec<(&'static str, String)> {
    let count = ptx
        .lines()
        .find(|line| line.starts_with("\tdiv.u32\t%k_tiles, "))
        .expect("the kernel counts its k tiles");
    let mut edits = vec![(
        "last k tile dropped",
        ptx.replacen(
            count,
            &format!("{count}\n\tsub.u32\t%k_tiles, %k_tiles, 1;"),
            1,
        ),
    )];
    let accumulate = "%a_desc, %b_desc, %p_accumulate,";
    // Not on ping-pong kernels (those that hand over with %p_handoff): edited so, the bf16
    // one faulted with an illegal address on an H100 (2026-11-28) instead of computing a
    // wrong C, which tests nothing of verify and spoils the context for the next kernel.
    let pingpong = ptx.contains("%p_handoff");
    if ptx.contains(accumulate)
        && !pingpong
        && !ptx.contains("setp.ne.u32\t%p_accumulate, %k_interval, 0;")
    {
        edits.push((
            "accumulators restarted every k tile",
            ptx.replace(accumulate, "%a_desc, %b_desc, 0,"),
        ));
    }
    edits
}

/// The Hopper edits assemble and keep the SASS promises of the kernels they come from.
#[test]
fn hopper_kernels_edited_to_lose_k_tiles_assemble_with_their_promises() {
    for name in HOPPER_SKIPPING_KERNELS {
        let emitted = emit(gemm_codegen::catalog::find(name).unwrap());
        let edits = hopper_k_tile_edits(emitted.ptx());
        let one_edit = name.ends_with("_block") || name.ends_with("_pingpong");
        assert_eq!(edits.len(), if one_edit { 1 } else { 2 }, "{name}");
        for (edit, ptx) in edits {
            assert_ne!(ptx, emitted.ptx(), "{name}, {edit}");
            let report = SassReport::from_ptx(&ptx, emitted.spec().arch.name())
                .unwrap_or_else(|error| panic!("{name}, {edit}: {error}"));
            report
                .require(emitted.expected_sass())
                .unwrap_or_else(|mismatch| panic!("{name}, {edit}: {mismatch}"));
        }
    }
}

/// verify must be able to say no on Hopper too: wgmma and fp8 kernels that lose k tiles are
/// off by far more than their tolerance, while the same kernels unedited pass on the same
/// problem. (fp8 through the fused verification: its scales are launch arguments.)
#[test]
#[ignore = "needs a CUDA GPU"]
fn verify_fails_hopper_kernels_that_lose_k_tiles() {
    use gemm_harness::verify::{verify_fused_batch, FusedCase, BLOCK_SCALE_MAX};
    use gemm_runtime::fp8::E4m3;
    use gemm_runtime::FusedSpec;
    let (ctx, stream) = gpu();
    for name in HOPPER_SKIPPING_KERNELS {
        let emitted: &'static Emitted =
            Box::leak(Box::new(emit(gemm_codegen::catalog::find(name).unwrap())));
        let launch = emitted.launch();
        // Four k tiles: dropping one leaves about half the norm of C wrong (sqrt(1/4)); only
        // the last one kept, 0.87 of it.
        let (m, n, k) = (2 * launch.tile_m, 2 * launch.tile_n, 4 * launch.tile_k);
        let seed = 0x4095;
        let fp8 = emitted.spec().dtype == DType::E4m3;
        let fused = FusedSpec::of_spec(emitted.spec());
        let types = KernelTypes::of_spec(emitted.spec()).unwrap();
        let magnitude = if fused.quant == gemm_dsl::Quant::Block {
            f64::from(BLOCK_SCALE_MAX * BLOCK_SCALE_MAX)
        } else {
            1.0
        };
        let tolerance = Tolerance::for_kernel(types, m, n, k).for_magnitude(magnitude);
        let run = |info: &KernelInfo<'static>| -> ErrorReport {
            if fp8 {
                let kernel = GemmKernel::<E4m3, bf16>::load(&ctx, info)
                    .unwrap_or_else(|e| panic!("{name}: {e}"));
                let lds = LeadingDims::packed(launch, m, n, k);
                verify_fused_batch(
                    &kernel,
                    &stream,
                    m,
                    n,
                    k,
                    lds,
                    Batch::ONE,
                    seed,
                    &FusedCase::for_spec(&fused),
                )
                .unwrap_or_else(|e| panic!("{name}: {e}"))
                .worst()
                .copied()
                .expect("one product")
            } else {
                let kernel = AnyKernel::load(&ctx, info).unwrap_or_else(|e| panic!("{name}: {e}"));
                with_kernel!(&kernel, typed => verify(typed, &stream, m, n, k, seed)).unwrap()
            }
        };
        let good = run(&emitted.info());
        eprintln!("{name} ({types}) {m}x{n}x{k}: {good}");
        good.check(&tolerance)
            .unwrap_or_else(|broken| panic!("{name} unedited: {broken}"));
        for (edit, ptx) in hopper_k_tile_edits(emitted.ptx()) {
            let mut parts = emitted.info().parts();
            parts.ptx = Box::leak(ptx.into_boxed_str());
            // SAFETY: the edits only shorten both roles' loops alike or change what the
            // first wgmma of a k tile does with the accumulators: the kernel touches no
            // memory the unedited one does not.
            let info = unsafe { KernelInfo::from_parts(parts) };
            let report = run(&info);
            eprintln!("{name} ({types}) {m}x{n}x{k}, {edit}: {report}");
            assert!(
                report.rel_frobenius > 0.1,
                "{name}, {edit}: relative error {} passes for lost k tiles",
                report.rel_frobenius
            );
            assert!(
                report.check(&tolerance).is_err(),
                "{name}, {edit}: {report}"
            );
        }
    }
}

/// One poisoned launch on fresh inputs against float64.
fn against_float64<In: Element, Out: Element>(
    kernel: &GemmKernel<In, Out>,
    stream: &Arc<CudaStream>,
    shape: Shape,
    seed: u64,
) -> Result<ErrorReport, Error> {
    let problem = Problem::<In>::random(shape.m, shape.n, shape.k, seed);
    let reference = cpu_reference(&problem)?;
    check_against(kernel, stream, &problem, &reference, Reference::CpuF64)
}

/// Fewer k tiles than pipeline stages: the prologue's copies past K must stay unissued and the
/// loop must not wait on groups that never come. K of one, two and `stages - 1` k tiles for
/// every catalog kernel with more than one stage (every family: the Hopper kernels take any K).
#[test]
#[ignore = "needs a CUDA GPU"]
fn multi_stage_kernels_compute_ks_shorter_than_their_ring() {
    let (ctx, stream) = gpu();
    let mut failures = Vec::new();
    let mut kernels = 0;
    for entry in CATALOG {
        let emitted = emit(entry);
        let stages = emitted.spec().stages;
        if stages < 2 {
            continue;
        }
        kernels += 1;
        let kernel = load(&ctx, entry);
        let launch = *kernel.info().launch();
        let types = kernel.types();
        let ks: BTreeSet<u32> = [1, 2, stages - 1]
            .into_iter()
            .map(|tiles| tiles * launch.tile_k)
            .collect();
        for k in ks {
            let shape = Shape::new(2 * launch.tile_m, 2 * launch.tile_n, k);
            shape
                .admitted_by(&launch)
                .unwrap_or_else(|reason| panic!("{} at {shape}: {reason}", entry.name));
            let report = with_kernel!(&kernel, typed => against_float64(typed, &stream, shape, 0x5407 + u64::from(k)))
                .unwrap_or_else(|e| panic!("{} at {shape}: {e}", entry.name));
            eprintln!(
                "{:<28} {types:<10} {stages} stages {shape:>15}: {report}",
                entry.name
            );
            if let Err(broken) = report.check(&Tolerance::for_kernel(types, shape.m, shape.n, k)) {
                failures.push(format!(
                    "{} ({types}, {stages} stages) at {shape}: {broken}",
                    entry.name
                ));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "wrong results:\n{}",
        failures.join("\n")
    );
    assert!(kernels >= 20, "only {kernels} multi-stage catalog kernels");
}

/// One strided batch of `count` products of `shape` through `launch_strided_batched`: rows
/// rounded up to the kernel's alignment (C's one vector more, so its rows have gaps), each
/// operand's matrices a matrix and two vectors apart (the gaps between C's matrices must stay
/// poisoned), B shared by every product (stride 0) when `shared_b`. Each product against its
/// own float64 (or cuBLAS) reference.
fn check_batch(
    kernel: &AnyKernel,
    stream: &Arc<CudaStream>,
    shape: Shape,
    count: u32,
    shared_b: bool,
    seed: u64,
) {
    let launch = kernel.info().launch();
    let name = kernel.info().name();
    let (in_bytes, out_bytes) = (launch.input_element_bytes, launch.output_element_bytes);
    let vector = |bytes: u32| (launch.operand_align_bytes / bytes).max(1);
    let round = |value: u32, bytes: u32| value.div_ceil(vector(bytes)) * vector(bytes);
    let line = |operand| launch.stored_dims(operand, shape.m, shape.n, shape.k).1;
    let lds = LeadingDims {
        lda: round(line(Operand::A), in_bytes),
        ldb: round(line(Operand::B), in_bytes),
        ldc: round(shape.n, out_bytes) + vector(out_bytes),
    };
    let packed = Batch::packed(launch, count, (shape.m, shape.n, shape.k), lds);
    let batch = Batch {
        count,
        stride_a: packed.stride_a + 2 * u64::from(vector(in_bytes)),
        stride_b: if shared_b {
            0
        } else {
            packed.stride_b + 2 * u64::from(vector(in_bytes))
        },
        stride_c: packed.stride_c + 2 * u64::from(vector(out_bytes)),
    };
    let report = with_kernel!(kernel, typed => {
        verify_batch(typed, stream, shape.m, shape.n, shape.k, lds, batch, seed)
    })
    .unwrap_or_else(|e| panic!("{name}, {count} x {shape}: {e}"));
    let worst = report.worst().expect("a batch has products");
    eprintln!(
        "{name}: {count} x {shape}{}: worst product {worst}",
        if shared_b { ", B shared" } else { "" }
    );
    report
        .check(&Tolerance::for_kernel(
            kernel.types(),
            shape.m,
            shape.n,
            shape.k,
        ))
        .unwrap_or_else(|broken| panic!("{name}, {count} x {shape}: {broken}"));
}

/// The batch cases of one kernel: three products of two tiles and a bit, padded strides; an
/// edge shape with a B every product shares; and for a persistent kernel, more products'
/// tiles than its grid has blocks, so blocks walk from one product into the next.
fn check_batches(kernel: &AnyKernel, stream: &Arc<CudaStream>) {
    let launch = kernel.info().launch();
    let (tm, tn, tk) = (launch.tile_m, launch.tile_n, launch.tile_k);
    check_batch(
        kernel,
        stream,
        Shape::new(2 * tm, 2 * tn, 4 * tk),
        3,
        false,
        0xBA7C_0001,
    );
    check_batch(
        kernel,
        stream,
        Shape::new(tm + 5, tn - 3, 2 * tk + 7),
        2,
        true,
        0xBA7C_0002,
    );
    if let GridSchedule::Persistent { .. } = launch.schedule {
        let shape = Shape::new(2 * tm + 1, 2 * tn + 3, 2 * tk);
        let (tiles_m, tiles_n) = launch.tiles(shape.m, shape.n);
        let resident = with_kernel!(kernel, typed => typed.resident_blocks());
        let count = (2 * resident).div_ceil(tiles_m * tiles_n) + 1;
        assert!(
            launch
                .grid_batched(shape.m, shape.n, shape.k, count, resident)
                .0
                < count * tiles_m * tiles_n
        );
        check_batch(kernel, stream, shape, count, false, 0xBA7C_0003);
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn every_catalog_kernel_computes_a_strided_batch() {
    let (ctx, stream) = gpu();
    for entry in CATALOG {
        check_batches(&load(&ctx, entry), &stream);
    }
}

/// Every SIMT and mma.sync catalog kernel in rc, cr and cc batched the same way: the batch
/// offsets follow each operand's lines, whole-tile and bounded copies alike.
#[test]
#[ignore = "needs a CUDA GPU"]
fn simt_and_mma_sync_kernels_compute_a_strided_batch_in_every_layout() {
    let (ctx, stream) = gpu();
    for (kernel, _) in layout_kernels(&ctx) {
        check_batches(&kernel, &stream);
    }
}

/// The Hopper family's rank-3 tensor maps in every layout, with clusters and the persistent
/// walk, the TMA-store and the direct epilogue.
#[test]
#[ignore = "needs a CUDA GPU"]
fn hopper_kernels_compute_a_strided_batch_in_every_layout() {
    let (ctx, stream) = gpu();
    for layout in ["rr", "rc", "cr", "cc"] {
        for base in [
            "arch: sm_90a, mma: wgmma, schedule: persistent",
            "arch: sm_90a, mma: wgmma, tile: 128x128x64, epilogue: direct",
            "arch: sm_90a, mma: wgmma, copy: tma(multicast = 2), cluster: 2x1",
            "arch: sm_90a, mma: wgmma, tile: 256x128x64, copy: tma(multicast = 2), cluster: 1x2, schedule: persistent",
        ] {
            let spec = format!("name: batch_{layout}, layout: {layout}, {base}");
            let emitted = gemm_codegen::emit_str(&spec).unwrap_or_else(|e| panic!("{spec}: {e}"));
            let kernel =
                AnyKernel::from_emitted(&ctx, &emitted).unwrap_or_else(|e| panic!("{spec}: {e}"));
            check_batches(&kernel, &stream);
        }
    }
}

/// A narrow kernel's spec in `layout` (its own `layout:` dropped), named after both.
fn narrow_in_layout(entry: &CatalogSpec, layout: &str) -> String {
    let rest: Vec<&str> = entry
        .spec
        .split(", ")
        .filter(|part| !part.starts_with("layout:") && !part.starts_with("name:"))
        .collect();
    format!(
        "name: {}_{layout}, {}, layout: {layout}",
        entry.name,
        rest.join(", ")
    )
}

/// Copy vectors narrower than 16 bytes take leading dimensions that are no 16-byte
/// multiple: every narrow kernel (both families, every vector width) in its own layout and
/// one other, over the shapes around its tiles and odd shapes (odd K for a row-major A, odd
/// N for a row-major B, odd M for a column-major A), A and B packed exactly where the vector
/// allows (`lda = K` for a row-major A) or one vector longer; C, whose stores are no wider
/// than the vector, packed as tightly as they allow (`ldc = N` for f32 C, or odd N under
/// `sync(vector = 2)`) in two launches of three and with a poisoned gap between its rows in
/// the third; against float64. Most launches (some 230 of 308) break 16-byte alignment of
/// A or B, and every kernel has packed launches whose C rows are off 16 bytes.
#[test]
#[ignore = "needs a CUDA GPU"]
fn narrow_vector_kernels_compute_unaligned_leading_dims() {
    let (ctx, stream) = gpu();
    let (mut launches, mut unaligned, mut c_unaligned) = (0, 0, 0);
    for entry in NARROW {
        let own = entry
            .spec
            .split(", ")
            .find_map(|part| part.strip_prefix("layout: "))
            .unwrap_or("rr");
        let other = if own == "rr" { "cc" } else { "rr" };
        for layout in [own, other] {
            let spec = narrow_in_layout(entry, layout);
            let emitted = gemm_codegen::emit_str(&spec).unwrap_or_else(|e| panic!("{spec}: {e}"));
            let stages = emitted.spec().stages;
            let kernel =
                AnyKernel::from_emitted(&ctx, &emitted).unwrap_or_else(|e| panic!("{spec}: {e}"));
            let types = kernel.types();
            let launch = *kernel.info().launch();
            assert!(launch.operand_align_bytes < 16, "{spec}");
            // C's stores are no wider than the copy vector, nor narrower than one element.
            assert!(
                launch.output_align_bytes
                    <= launch.operand_align_bytes.max(launch.output_element_bytes),
                "{spec}"
            );
            let c_vector = launch.output_align_bytes / launch.output_element_bytes;
            let mut kernel_c_unaligned = 0;
            let (tm, tn, tk) = (launch.tile_m, launch.tile_n, launch.tile_k);
            let mut shapes: Vec<Shape> = shapes_around_tiles(&launch, stages)
                .into_iter()
                .filter(|s| u64::from(s.m) * u64::from(s.n) * u64::from(s.k) <= 1 << 27)
                .collect();
            shapes.extend([
                Shape::new(tm + 1, tn + 1, 2 * tk + 1),
                Shape::new(33, 17, 7),
                Shape::new(2 * tm - 1, 3 * tn + 3, 5 * tk - 3),
                Shape::new(5, 2 * tn + 7, 129),
                Shape::new(777, 1025, 333),
            ]);
            for (index, shape) in shapes.into_iter().enumerate() {
                with_kernel!(&kernel, typed => {
                    // Lines packed as tightly as the vector allows, every other shape one
                    // vector longer.
                    let extra = index as u32 % 2;
                    let mut ld = layout_ld(typed, shape, (extra, extra, index as u32 % 2));
                    // C packed (N rounded up to its store's elements) in two launches of
                    // three; the third keeps layout_ld's poisoned gap.
                    if index % 3 != 2 {
                        ld.2 = shape.n.div_ceil(c_vector) * c_vector;
                    }
                    let bytes = |ld: u32| u64::from(ld) * u64::from(launch.input_element_bytes);
                    if bytes(ld.0) % 16 != 0 || bytes(ld.1) % 16 != 0 {
                        unaligned += 1;
                    }
                    if u64::from(ld.2) * u64::from(launch.output_element_bytes) % 16 != 0 {
                        kernel_c_unaligned += 1;
                    }
                    check_with_ld(typed, types, &stream, shape, ld, 0x0A77_0000 + index as u64)
                });
                launches += 1;
            }
            assert!(
                kernel_c_unaligned > 0,
                "{spec}: every ldc was 16-byte aligned"
            );
            c_unaligned += kernel_c_unaligned;
        }
    }
    eprintln!(
        "{launches} narrow launches, {unaligned} with an A or B line stride off 16 bytes, \
         {c_unaligned} with C's"
    );
    assert!(unaligned * 3 >= launches * 2, "{unaligned} of {launches}");
}

/// A 16-byte-vector kernel refuses a leading dimension off 16 bytes before launching, and
/// names the narrower copy that takes it.
#[test]
#[ignore = "needs a CUDA GPU"]
fn narrow_leading_dims_are_refused_by_16_byte_kernels_with_the_spec_fix() {
    let (ctx, stream) = gpu();
    let kernel = load_simt(&ctx);
    let (m, n, k) = (64u32, 129u32, 16u32);
    let a = stream.alloc_zeros::<f32>((m * k) as usize).unwrap();
    let b = stream.alloc_zeros::<f32>((k * n) as usize).unwrap();
    let mut c = stream.alloc_zeros::<f32>((m * 132) as usize).unwrap();
    let error = kernel
        .launch_with_ld(&stream, &a, &b, &mut c, m, n, k, k, n, 132)
        .unwrap_err();
    assert!(
        matches!(
            error,
            RuntimeError::MisalignedLeadingDim {
                operand: Operand::B,
                ld: 129,
                ..
            }
        ),
        "{error:?}"
    );
    let text = error.to_string();
    assert!(text.contains("pad the rows to ldb = 132"), "{text}");
    assert!(text.contains("`copy: "), "{text}");
    assert!(text.contains("vector = 4)`"), "{text}");
}

/// Stream-K specs: the catalog's, one with a two-block cluster that multicasts B, and one
/// with a single consumer, f32 C stored from registers and the raster along N.
fn stream_k_specs() -> Vec<String> {
    let mut specs: Vec<String> = CATALOG
        .iter()
        .filter(|entry| entry.spec.contains("tail = stream_k"))
        .map(|entry| entry.spec.to_string())
        .collect();
    assert!(specs.len() >= 2, "{} stream-K catalog specs", specs.len());
    specs.extend(
        [
            "name: sk_cluster, arch: sm_90a, dtype: bf16, tile: 128x256x64, consumers: 2, stages: 4, swizzle: 128B, copy: tma(multicast = 2), mma: wgmma, schedule: persistent(raster = m, group = 8, tail = stream_k), cluster: 2x1",
            "name: sk_f32_direct, arch: sm_90a, dtype: f16, out: f32, tile: 128x128x64, consumers: 1, stages: 4, swizzle: 128B, copy: tma, mma: wgmma, epilogue: direct, schedule: persistent(raster = n, group = 3, tail = stream_k)",
        ]
        .map(String::from),
    );
    specs
}

/// The outputs of three launches on the same inputs, the last on another stream: a
/// stream-K kernel adds its partial sums in walker order, so they are bitwise equal.
fn repeats_bitwise<In: Element, Out: Element + PartialEq>(
    kernel: &GemmKernel<In, Out>,
    streams: [&Arc<CudaStream>; 2],
    shape: Shape,
) -> bool {
    let problem = Problem::<In>::random(shape.m, shape.n, shape.k, 0x5EED_5C00);
    let [first, second, third] = [streams[0], streams[0], streams[1]]
        .map(|stream| run_poisoned(kernel, stream, &problem, shape.n).unwrap());
    first == second && second == third
}

/// Stream-K tails of every kind, against float64 (or cuBLAS): one tile of 41 k tiles split
/// over the most walkers a tile takes (the finisher adds the others' sums); one tile left after whole
/// rounds; a third of a round left; one k tile per tile
/// (nothing to split); a leftover of all walkers but one (too many to split: the last round
/// goes whole); a strided batch whose tiles are all tail. Every shape runs again twice, once
/// on a second stream, with bitwise-equal results.
#[test]
#[ignore = "needs a CUDA GPU"]
fn stream_k_tails_compute_and_repeat_bitwise() {
    let (ctx, stream) = gpu();
    let other = ctx.new_stream().unwrap();
    for spec in stream_k_specs() {
        let emitted = gemm_codegen::emit_str(&spec).unwrap_or_else(|e| panic!("{spec}: {e}"));
        let kernel = AnyKernel::from_emitted(&ctx, &emitted).unwrap();
        let launch = *kernel.info().launch();
        let name = kernel.info().name().to_string();
        assert!(launch.workspace_bytes_per_block > 0, "{name}");
        let (cluster_m, cluster_n) = launch.cluster;
        let (walk_m, walk_n) = (launch.tile_m * cluster_m, launch.tile_n * cluster_n);
        let resident = with_kernel!(&kernel, typed => typed.resident_blocks());
        let walkers = resident / (cluster_m * cluster_n);
        let tk = launch.tile_k;
        // Packed rows need 16 bytes for the TMA: N and K stay multiples of 8.
        let shapes = [
            Shape::new(walk_m - 5, walk_n - 8, 40 * tk + 8),
            Shape::new(walk_m, (walkers + 1) * walk_n, 8 * tk),
            Shape::new(
                3 * walk_m - 1,
                ((2 * walkers + walkers / 3) / 3 + 1) * walk_n - 8,
                12 * tk - 8,
            ),
            Shape::new(3 * walk_m, (walkers / 3 + 2) * walk_n, tk / 2),
            Shape::new(walk_m, (walkers - 1) * walk_n, 4 * tk),
        ];
        let types = kernel.types();
        for (index, shape) in shapes.into_iter().enumerate() {
            let report = with_kernel!(&kernel, typed => {
                verify(typed, &stream, shape.m, shape.n, shape.k, 0x5C00 + index as u64)
            })
            .unwrap_or_else(|e| panic!("{name} at {shape}: {e}"));
            eprintln!("{name} ({walkers} walkers resident) at {shape}: {report}");
            report
                .check(&Tolerance::for_kernel(types, shape.m, shape.n, shape.k))
                .unwrap_or_else(|broken| panic!("{name} at {shape}: {broken}"));
            let repeats =
                with_kernel!(&kernel, typed => repeats_bitwise(typed, [&stream, &other], shape));
            assert!(
                repeats,
                "{name} at {shape}: launches on the same inputs differ"
            );
        }
        check_batch(
            &kernel,
            &stream,
            Shape::new(2 * walk_m - 7, 3 * walk_n + 1, 20 * tk + 5),
            3,
            false,
            0x5C10,
        );
    }
}
