//! GPU tests of loading: the driver's SASS of every catalog kernel keeps its spec's promises,
//! a debug build checks them at load, and PTX the driver rejects reports the JIT's log. Run
//! with `cargo test -p gemm-runtime --test gpu -- --ignored` on a machine with an NVIDIA GPU
//! (or `.gpu/run-gpu-tests` on the lent device). What the kernels compute is checked by
//! `gemm-harness`'s GPU tests, against float64 and cuBLAS.

use gemm_codegen::catalog::{CatalogSpec, CATALOG};
use gemm_codegen::{Emitted, KernelInfo, KernelParts, LaunchShape, SassCheck, GEMM_PARAMS};
use gemm_dsl::Mma;
use gemm_runtime::{
    open_context, AnyKernel, CudaContext, CudaStream, Error, GemmKernel, KernelTypes, Opcode,
    SassOrigin, SassReport,
};
use std::sync::Arc;

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

#[test]
#[ignore = "needs a CUDA GPU"]
fn driver_sass_keeps_the_specs_promises() {
    let (ctx, _stream) = gpu();
    let mut failures = Vec::new();
    for entry in CATALOG {
        let emitted = emit(entry);
        let kernel = load(&ctx, entry);
        let info = kernel.info();
        let driver = match kernel.check_sass() {
            Ok(driver) => driver,
            Err(error) => {
                failures.push(format!("{}: {error}", entry.name));
                continue;
            }
        };
        // The check reads the code that runs: the driver's JIT cache holds it unless the
        // cache is turned off.
        if !cache_disabled() && !matches!(driver.origin, SassOrigin::LoadedModule { .. }) {
            failures.push(format!("{}: SASS read from {}", entry.name, driver.origin));
        }
        let report = &driver.report;
        eprintln!(
            "{:<28} {:<10} LDGSTS {:>3}  LDG {:>3}  STS {:>3}  LDS {:>3}  LDSM {:>3}  FFMA {:>5}  HMMA {:>4}  HGMMA {:>3}  UTMALDG {:>2}  LDL {}  STL {}  ({} instructions)",
            entry.name,
            kernel.types().to_string(),
            report.count(Opcode::Ldgsts),
            report.count(Opcode::Ldg),
            report.count(Opcode::Sts),
            report.count(Opcode::Lds),
            report.count(Opcode::Ldsm),
            report.count(Opcode::Ffma),
            report.count(Opcode::Hmma),
            report.count(Opcode::Hgmma),
            report.count(Opcode::Utmaldg),
            report.count(Opcode::Ldl),
            report.count(Opcode::Stl),
            report.instructions.len()
        );
        assert!(
            !info.expected_sass().is_empty(),
            "{} promises nothing",
            entry.name
        );
        // The copy and math paths stated outright: cp.async specs must show LDGSTS, mma.sync
        // specs HMMA.
        if emitted.spec_text().contains("copy: cp_async") {
            assert!(
                info.expected_sass()
                    .contains(&SassCheck::Present(Opcode::Ldgsts)),
                "{} is cp_async but does not promise LDGSTS",
                entry.name
            );
        }
        if emitted.spec().mma == Mma::MmaSync {
            assert!(
                info.expected_sass()
                    .contains(&SassCheck::Present(Opcode::Hmma)),
                "{} is mma_sync but does not promise HMMA",
                entry.name
            );
        }
        if emitted.spec().mma == Mma::Wgmma {
            for opcode in [Opcode::Hgmma, Opcode::Utmaldg, Opcode::Syncs] {
                assert!(
                    info.expected_sass().contains(&SassCheck::Present(opcode)),
                    "{} is wgmma but does not promise {}",
                    entry.name,
                    opcode.mnemonic()
                );
            }
        }
    }
    assert!(
        failures.is_empty(),
        "SASS mismatches:\n{}",
        failures.join("\n")
    );
}

fn cache_disabled() -> bool {
    std::env::var("CUDA_CACHE_DISABLE").is_ok_and(|value| value.trim() == "1")
}

/// The loaded code of a kernel that moves registers between warpgroups keeps `setmaxnreg`;
/// the copy compiled for linking drops it, so a check of that copy would check other code.
#[test]
#[ignore = "needs a CUDA GPU"]
fn sass_is_read_from_the_loaded_module_not_a_linked_copy() {
    let (ctx, _stream) = gpu();
    assert!(
        !cache_disabled(),
        "this test reads the driver's JIT cache: unset CUDA_CACHE_DISABLE"
    );
    let entry = CATALOG
        .iter()
        .find(|entry| entry.name == "wgmma_f16_128x256x64_s4_f32out")
        .expect("a catalog kernel with a setmaxnreg split");
    let kernel = load(&ctx, entry);
    assert!(
        kernel
            .info()
            .expected_sass()
            .contains(&SassCheck::Present(Opcode::Usetmaxreg)),
        "{} no longer promises USETMAXREG: pick another kernel",
        entry.name
    );
    let loaded = kernel.sass().unwrap();
    let SassOrigin::LoadedModule { cache_entry } = &loaded.origin else {
        panic!("{}: SASS read from {}", entry.name, loaded.origin);
    };
    eprintln!("{}: {}", entry.name, cache_entry.display());
    assert!(
        loaded.report.count(Opcode::Usetmaxreg) > 0,
        "{}",
        loaded.report.summary()
    );
    let linked = gemm_runtime::jit_cubin(&ctx, kernel.info().ptx(), entry.name).unwrap();
    let linked = SassReport::parse(&gemm_dsl::sass::disassemble(&linked).unwrap());
    assert_eq!(
        linked.count(Opcode::Usetmaxreg),
        0,
        "the linked copy keeps setmaxnreg now: the two routes agree, and the cache read may go"
    );
    // The standalone route reads the same entry.
    let standalone = gemm_runtime::driver_cubin(&ctx, kernel.info().ptx(), entry.name).unwrap();
    assert_eq!(standalone.origin, loaded.origin);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn load_checks_sass_promises_in_debug_builds() {
    let (ctx, _stream) = gpu();
    // The first kernel of each pair of element types.
    for (entry, types) in one_entry_per_types() {
        let emitted: &'static Emitted = Box::leak(Box::new(emit(entry)));
        // A promise no kernel keeps: each promises no local memory.
        let mut promises = emitted.expected_sass().to_vec();
        promises.push(SassCheck::Present(Opcode::Ldl));
        let mut parts = emitted.info().parts();
        parts.expected_sass = Box::leak(promises.into_boxed_slice());
        // SAFETY: the kernel is the spec's own; one promise more only makes load stricter.
        let info = unsafe { KernelInfo::from_parts(parts) };
        let result = AnyKernel::load(&ctx, &info);
        if cfg!(debug_assertions) {
            let error = result.expect_err("a debug build checks the SASS at load");
            eprintln!("{} ({types}): {error}", entry.name);
            assert!(matches!(error, Error::SassMismatch { .. }), "{error:?}");
            assert!(
                error
                    .to_string()
                    .contains("expected LDL in the SASS, found none"),
                "{error}"
            );
            // The kernel's true promises pass the same check.
            load(&ctx, entry);
        } else {
            result.expect("release builds do not check the SASS at load");
        }
    }
}

/// A kernel with the GEMM ABI whose body uses an undeclared register.
const BROKEN_PTX: &str = "\
.version 8.0
.target sm_80
.address_size 64

.visible .entry broken_gemm(
\t.param .u64 broken_gemm_a, .param .u64 broken_gemm_b, .param .u64 broken_gemm_c,
\t.param .u32 broken_gemm_m, .param .u32 broken_gemm_n, .param .u32 broken_gemm_k,
\t.param .u32 broken_gemm_lda, .param .u32 broken_gemm_ldb, .param .u32 broken_gemm_ldc,
\t.param .u32 broken_gemm_batch, .param .u64 broken_gemm_stride_a,
\t.param .u64 broken_gemm_stride_b, .param .u64 broken_gemm_stride_c
)
{
\t.reg .b32 %r<2>;
\tmov.u32 %r1, %undeclared_register;
\tret;
}
";

fn broken_info(launch: LaunchShape) -> KernelInfo<'static> {
    // SAFETY: the PTX does not assemble, so it never runs.
    unsafe {
        KernelInfo::from_parts(KernelParts {
            name: "broken_gemm",
            ptx: BROKEN_PTX,
            spec: "name: broken_gemm, dtype: f32, out: f32",
            launch,
            params: GEMM_PARAMS,
            expected_sass: &[],
        })
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn bad_ptx_reports_the_driver_jit_log() {
    let (ctx, _stream) = gpu();
    let launch = *emit(simt_entry()).launch();
    let error = GemmKernel::<f32, f32>::load(&ctx, &broken_info(launch)).unwrap_err();
    let message = error.to_string();
    eprintln!("{message}");
    let Error::Jit { log, .. } = &error else {
        panic!("expected a JIT error, got {error:?}");
    };
    // The driver's own words: the line and the symbol it could not resolve.
    assert!(log.contains("undeclared_register"), "log: {log}");
    let bad_line = 1 + BROKEN_PTX
        .lines()
        .position(|line| line.contains("%undeclared_register"))
        .expect("the broken PTX uses the register");
    assert!(log.contains(&format!("line {bad_line}")), "log: {log}");
    assert!(message.contains(log.trim_end()), "{message}");
    assert!(message.contains("CUDA_ERROR_INVALID_PTX"), "{message}");
    // The SASS route compiles through the same JIT and reports the same way.
    let error = gemm_runtime::jit_cubin(&ctx, BROKEN_PTX, "broken_gemm").unwrap_err();
    assert!(
        matches!(&error, Error::Jit { log, .. } if log.contains("undeclared_register")),
        "{error}"
    );
    // A name the driver cannot take is an error, not a panic.
    let error = gemm_runtime::jit_cubin(&ctx, BROKEN_PTX, "broken\0gemm").unwrap_err();
    assert!(
        matches!(&error, Error::Jit { log, .. } if log.contains("NUL")),
        "{error}"
    );
}
