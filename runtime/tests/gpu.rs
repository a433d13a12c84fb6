//! GPU tests: every catalog kernel on the device. Run with `cargo test -p runtime -- --ignored`
//! on a machine with an NVIDIA GPU (or `.gpu/run-gpu-tests` on the lent device).

use codegen::catalog::{CatalogSpec, CATALOG};
use codegen::{Emitted, KernelInfo, LaunchShape, SassCheck, GEMM_PARAMS};
use runtime::bench::Shape;
use runtime::verify::{
    check_against, compare, cpu_reference, cublas_reference, verify, Problem, Reference, Tolerance,
};
use runtime::{open_context, CudaContext, CudaStream, Element, Error, GemmKernel, Opcode, Operand};
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
    codegen::emit_str(entry.spec).unwrap_or_else(|e| panic!("{}: {e}", entry.name))
}

fn load(ctx: &Arc<CudaContext>, entry: &CatalogSpec) -> GemmKernel<f32, f32> {
    GemmKernel::from_emitted(ctx, &emit(entry)).unwrap_or_else(|e| panic!("{}: {e}", entry.name))
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn every_catalog_kernel_matches_float64_on_the_shape_suite() {
    let (ctx, stream) = gpu();
    let kernels: Vec<GemmKernel<f32, f32>> = CATALOG.iter().map(|e| load(&ctx, e)).collect();
    let mut failures = Vec::new();
    let mut checked = vec![0usize; kernels.len()];
    for shape in SUITE {
        // K <= 2048 throughout: 1e-5 relative, about 10x the expected f32 rounding error.
        let tolerance = Tolerance::f32_accumulation(shape.k);
        for seed in SEEDS {
            // One reference per (shape, seed), shared by every kernel that admits the shape.
            let problem = Problem::<f32>::random(shape.m, shape.n, shape.k, seed);
            let reference = cpu_reference(&problem);
            for (index, kernel) in kernels.iter().enumerate() {
                let name = kernel.info().name;
                if shape.admitted_by(&kernel.info().launch).is_err() {
                    continue;
                }
                let report =
                    check_against(kernel, &stream, &problem, &reference, Reference::CpuF64)
                        .unwrap_or_else(|e| panic!("{name} at {shape}: {e}"));
                eprintln!("{name:<28} {shape:>15} seed {seed:#x}: {report}");
                checked[index] += 1;
                if let Err(broken) = report.check(&tolerance) {
                    failures.push(format!("{name} at {shape}, seed {seed:#x}: {broken}"));
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
        // Every kernel admits at least 1024³ and 2048³, each with two seeds.
        assert!(
            *count >= 4,
            "{} was checked only {count} times",
            kernel.info().name
        );
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn padded_leading_dimensions_compute_and_leave_the_gaps_alone() {
    let (ctx, stream) = gpu();
    for entry in CATALOG {
        let kernel = load(&ctx, entry);
        let launch = kernel.info().launch;
        let (m, n, k) = (2 * launch.tile_m, 2 * launch.tile_n, 4 * launch.tile_k);
        // Strides padded by whole 16-byte vectors, so they stay aligned.
        let (lda, ldb, ldc) = (k + 4, n + 8, n + 12);
        let problem = Problem::<f32>::random(m, n, k, 7);
        let reference = cpu_reference(&problem);
        // NaN in the padding of A and B: a kernel that reads past a row's end computes NaNs.
        let pad = |values: &[f32], rows: u32, cols: u32, ld: u32| -> Vec<f32> {
            let mut padded = vec![f32::NAN; (rows * ld) as usize];
            for row in 0..rows as usize {
                let cols = cols as usize;
                padded[row * ld as usize..][..cols].copy_from_slice(&values[row * cols..][..cols]);
            }
            padded
        };
        let a = stream.clone_htod(&pad(&problem.a, m, k, lda)).unwrap();
        let b = stream.clone_htod(&pad(&problem.b, k, n, ldb)).unwrap();
        let mut c = stream
            .clone_htod(&vec![f32::poison(); (m * ldc) as usize])
            .unwrap();
        kernel
            .launch_with_ld(&stream, &a, &b, &mut c, m, n, k, lda, ldb, ldc)
            .unwrap_or_else(|e| panic!("{}: {e}", entry.name));
        let c = stream.clone_dtoh(&c).unwrap();
        let report = compare(&c, &reference, m, n, ldc, Reference::CpuF64);
        eprintln!(
            "{:<28} {m}x{n}x{k} lda {lda} ldb {ldb} ldc {ldc}: {report}",
            entry.name
        );
        report
            .check(&Tolerance::f32_accumulation(k))
            .unwrap_or_else(|broken| panic!("{} with padded strides: {broken}", entry.name));
        let gap_writes = (0..m as usize)
            .flat_map(|row| &c[row * ldc as usize + n as usize..(row + 1) * ldc as usize])
            .filter(|value| !value.is_poison())
            .count();
        assert_eq!(gap_writes, 0, "{} wrote into the padding of C", entry.name);
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn driver_sass_keeps_the_specs_promises() {
    let (ctx, _stream) = gpu();
    let mut failures = Vec::new();
    for entry in CATALOG {
        let kernel = load(&ctx, entry);
        let info = kernel.info();
        let report = kernel
            .sass()
            .unwrap_or_else(|e| panic!("{}: driver SASS: {e}", entry.name));
        eprintln!(
            "{:<28} LDGSTS {:>3}  LDG {:>3}  STS {:>3}  LDS {:>3}  FFMA {:>5}  LDL {}  STL {}  ({} instructions)",
            entry.name,
            report.count(Opcode::Ldgsts),
            report.count(Opcode::Ldg),
            report.count(Opcode::Sts),
            report.count(Opcode::Lds),
            report.count(Opcode::Ffma),
            report.count(Opcode::Ldl),
            report.count(Opcode::Stl),
            report.instructions.len()
        );
        assert!(
            !info.expected_sass.is_empty(),
            "{} promises nothing",
            entry.name
        );
        if let Err(mismatch) = report.require(info.expected_sass) {
            failures.push(format!("{}: {mismatch}", entry.name));
        }
        // The copy path stated outright: cp.async specs must show LDGSTS.
        if entry.spec.contains("cp_async") {
            assert!(
                info.expected_sass
                    .contains(&SassCheck::Present(Opcode::Ldgsts)),
                "{} is cp_async but does not promise LDGSTS",
                entry.name
            );
        }
    }
    assert!(
        failures.is_empty(),
        "SASS mismatches:\n{}",
        failures.join("\n")
    );
}

/// A kernel with the GEMM ABI whose body uses an undeclared register.
const BROKEN_PTX: &str = "\
.version 8.0
.target sm_80
.address_size 64

.visible .entry broken_gemm(
\t.param .u64 a, .param .u64 b, .param .u64 c,
\t.param .u32 m, .param .u32 n, .param .u32 k,
\t.param .u32 lda, .param .u32 ldb, .param .u32 ldc
)
{
\t.reg .b32 %r<2>;
\tmov.u32 %r1, %undeclared_register;
\tret;
}
";

fn broken_info(launch: LaunchShape) -> KernelInfo<'static> {
    KernelInfo {
        name: "broken_gemm",
        ptx: BROKEN_PTX,
        spec: "name: broken_gemm, dtype: f32, out: f32",
        launch,
        params: GEMM_PARAMS,
        expected_sass: &[],
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn bad_ptx_reports_the_driver_jit_log() {
    let (ctx, _stream) = gpu();
    let launch = emit(&CATALOG[0]).launch;
    let error = GemmKernel::<f32, f32>::load(&ctx, &broken_info(launch)).unwrap_err();
    let message = error.to_string();
    eprintln!("{message}");
    let Error::Jit { log, .. } = &error else {
        panic!("expected a JIT error, got {error:?}");
    };
    // The driver's own words: the line and the symbol it could not resolve.
    assert!(log.contains("undeclared_register"), "log: {log}");
    assert!(log.contains("line 12"), "log: {log}");
    assert!(message.contains(log.trim_end()), "{message}");
    assert!(message.contains("CUDA_ERROR_INVALID_PTX"), "{message}");
    // The SASS route compiles through the same JIT and reports the same way.
    let error = runtime::jit_cubin(&ctx, BROKEN_PTX, "broken_gemm").unwrap_err();
    assert!(
        matches!(&error, Error::Jit { log, .. } if log.contains("undeclared_register")),
        "{error}"
    );
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn bad_launch_arguments_are_refused() {
    let (ctx, stream) = gpu();
    let entry = &CATALOG[0];
    let kernel = load(&ctx, entry);
    let launch = kernel.info().launch;
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

    let refused = |result: Result<(), Error>, what: &str| -> Error {
        let error = result.expect_err(what);
        eprintln!("{what}: {error}");
        error
    };
    let error = refused(
        kernel.launch(&stream, &a, &b, &mut c, m + 8, n, k),
        "M not a tile multiple",
    );
    assert!(matches!(error, Error::Dims { .. }), "{error:?}");

    let short_a = stream.alloc_zeros::<f32>(mk - 1).unwrap();
    let error = refused(
        kernel.launch(&stream, &short_a, &b, &mut c, m, n, k),
        "A one short",
    );
    assert!(
        matches!(error, Error::BufferTooSmall { operand: Operand::A, needed, .. } if needed == mk as u64),
        "{error:?}"
    );

    let error = refused(
        kernel.launch_with_ld(&stream, &a, &b, &mut c, m, n, k, k, n - 4, n),
        "ldb shorter than a row",
    );
    assert!(
        matches!(
            error,
            Error::LeadingDimTooSmall {
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
        matches!(error, Error::MisalignedLeadingDim { operand: Operand::C, ld, .. } if ld == n + 1),
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
            Error::MisalignedPointer {
                operand: Operand::A,
                align: 16,
                ..
            }
        ),
        "{error:?}"
    );

    // The kernel's element type is f32; loading it as bf16 is refused before any JIT work.
    let error = GemmKernel::<half::bf16, f32>::from_emitted(&ctx, &emit(entry)).unwrap_err();
    assert!(
        matches!(error, Error::ElementType { role: "input", .. }),
        "{error:?}"
    );

    // Compute capabilities the device does not have: a newer plain target, and an
    // arch-specific target other than the device's own.
    let device_cc = {
        let (major, minor) = ctx.compute_capability().unwrap();
        (major * 10 + minor) as u32
    };
    for (kernel_cc, arch_specific) in [(device_cc + 10, false), (device_cc - 10, true)] {
        let mut probe = emit(entry);
        probe.launch.compute_capability = kernel_cc;
        probe.launch.arch_specific = arch_specific;
        let error = GemmKernel::<f32, f32>::from_emitted(&ctx, &probe).unwrap_err();
        eprintln!("cc {kernel_cc} arch-specific {arch_specific}: {error}");
        assert!(
            matches!(error, Error::ArchMismatch { device_cc: d, .. } if d == device_cc),
            "{error:?}"
        );
    }

    // After every refusal the same buffers still launch and compute correctly.
    kernel.launch(&stream, &a, &b, &mut c, m, n, k).unwrap();
    let result = stream.clone_dtoh(&c).unwrap();
    let report = compare(
        &result,
        &cpu_reference(&problem),
        m,
        n,
        n,
        Reference::CpuF64,
    );
    report.check(&Tolerance::f32_accumulation(k)).unwrap();
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn cublas_reference_agrees_with_float64() {
    let (_ctx, stream) = gpu();
    // Non-square, so swapped operands or exchanged m and n would show.
    let problem = Problem::<f32>::random(384, 256, 640, 3);
    let from_cublas = cublas_reference(&stream, &problem).unwrap();
    let exact = cpu_reference(&problem);
    let as_f32: Vec<f32> = from_cublas.iter().map(|&v| v as f32).collect();
    let report = compare(&as_f32, &exact, 384, 256, 256, Reference::CpuF64);
    eprintln!("cuBLAS SGEMM vs float64: {report}");
    report.check(&Tolerance::f32_accumulation(640)).unwrap();
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn verify_picks_cublas_for_large_problems_and_passes() {
    let (ctx, stream) = gpu();
    let kernel = load(&ctx, &CATALOG[0]);
    let report = verify(&kernel, &stream, 2048, 2048, 2048, 9).unwrap();
    eprintln!("{} 2048³ vs cuBLAS: {report}", CATALOG[0].name);
    assert_eq!(report.reference, Reference::Cublas);
    report.check(&Tolerance::f32_accumulation(2048)).unwrap();
    let small = verify(&kernel, &stream, 256, 256, 256, 9).unwrap();
    assert_eq!(small.reference, Reference::CpuF64);
    small.check(&Tolerance::f32_accumulation(256)).unwrap();
}
