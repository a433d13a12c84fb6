//! Every catalog kernel through the real assembler: no errors, no spills, no local memory,
//! and the SASS the spec promises. These tests fail (never skip) when ptxas or nvdisasm are
//! missing: run `scripts/install-tools`.

use gemm_codegen::catalog::{CATALOG, DEFAULT_SPEC, FP8, NARROW};
use gemm_codegen::sass::{SassReport, INSTALL_HINT};
use gemm_codegen::{Opcode, SassCheck};
use gemm_dsl::family::wgmma::{STREAM_K_FLAG_BYTES, WARPGROUP_THREADS};

fn assemble_and_check(name: &str, spec: &str) -> SassReport {
    let emitted = gemm_codegen::emit_str(spec).expect("catalog specs are valid");
    let arch = emitted.spec().arch.name();
    let report = SassReport::from_ptx(emitted.ptx(), arch)
        .unwrap_or_else(|error| panic!("{name}: {error}\n(tools: {INSTALL_HINT})"));
    let resources = report
        .resources
        .as_ref()
        .expect("offline route has ptxas resources");
    assert!(!resources.spills(), "{name}: ptxas spilled: {resources}");
    assert_eq!(
        resources.stack_frame_bytes, 0,
        "{name}: stack frame: {resources}"
    );
    assert!(
        resources.warnings.is_empty(),
        "{name}: ptxas warnings: {resources}"
    );
    assert!(
        resources.registers > 0 && resources.registers <= 255,
        "{name}: {resources}"
    );
    if let Err(mismatch) = report.require(emitted.expected_sass()) {
        panic!("{name} ({arch}): {mismatch}");
    }
    println!("{name:<28} {arch:<7} {}", resources);
    report
}

#[test]
fn every_catalog_kernel_assembles_with_its_promised_sass() {
    for entry in CATALOG {
        let report = assemble_and_check(entry.name, entry.spec);
        let emitted = gemm_codegen::emit_str(entry.spec).unwrap();
        // The checks a kernel carries are the ones the design promises for its copy path.
        let promises = |opcode| {
            emitted
                .expected_sass()
                .contains(&SassCheck::Present(opcode))
        };
        if promises(Opcode::Ldgsts) {
            assert!(report.count(Opcode::Ldgsts) > 0);
            assert_eq!(
                report.count(Opcode::Ldg),
                0,
                "{}: operand LDG in a cp.async kernel",
                entry.name
            );
        } else if promises(Opcode::Utmaldg) {
            // TMA: operands reach shared memory through the copy engine alone. A stream-K
            // kernel's only loads are its partial sums (16 bytes per thread at a time) and
            // the poll of their flag.
            let launch = emitted.launch();
            let partial_loads = match launch.workspace_bytes_per_block {
                0 => 0,
                bytes => {
                    let slot_bytes = (bytes - STREAM_K_FLAG_BYTES) / emitted.spec().consumers;
                    slot_bytes / (WARPGROUP_THREADS * 16) + 1
                }
            };
            assert!(report.count(Opcode::Utmaldg) > 0);
            assert_eq!(report.count(Opcode::Ldgsts), 0);
            assert_eq!(
                report.count(Opcode::Ldg),
                partial_loads as usize,
                "{}: operand LDG in a TMA kernel",
                entry.name
            );
        } else {
            assert_eq!(report.count(Opcode::Ldgsts), 0);
            assert!(report.count(Opcode::Ldg) > 0 && report.count(Opcode::Sts) > 0);
        }
        assert_eq!(report.count(Opcode::Ldl) + report.count(Opcode::Stl), 0);
    }
}

/// The fp8 kernels: QGMMA of their shape and types (no HGMMA), operands through TMA alone;
/// the only global loads are the two scales (and a stream-K kernel's partial sums and flag).
#[test]
fn fp8_kernels_assemble_to_qgmma() {
    for entry in FP8 {
        let report = assemble_and_check(entry.name, entry.spec);
        let emitted = gemm_codegen::emit_str(entry.spec).unwrap();
        let n = emitted.spec().tile.n;
        let qgmma = format!("QGMMA.64x{n}x32.F32.E4M3.E4M3");
        assert!(
            report.instructions.iter().any(|i| i.opcode == qgmma),
            "{}: no {qgmma}",
            entry.name
        );
        assert_eq!(report.count(Opcode::Hgmma), 0, "{}", entry.name);
        let partial_loads = match emitted.launch().workspace_bytes_per_block {
            0 => 0,
            bytes => (bytes - STREAM_K_FLAG_BYTES) / (WARPGROUP_THREADS * 16) + 1,
        };
        // Per-tensor scales: one load each in the epilogue. Block scales: the producer's
        // `cp.async` of each B block per k tile (A's rows come by one bulk copy).
        let spec = emitted.spec();
        let (scale_loads, scale_copies) = match spec.quant {
            gemm_dsl::Quant::Block => (0, (spec.tile.n / 128).max(1)),
            _ => (2, 0),
        };
        assert_eq!(
            report.count(Opcode::Ldg),
            (partial_loads + scale_loads) as usize,
            "{}: loads besides the scales",
            entry.name
        );
        assert_eq!(
            report.count(Opcode::Ldgsts),
            scale_copies as usize,
            "{}: copies of block scales",
            entry.name
        );
        if spec.promote.is_some() {
            assert!(
                report.count(Opcode::Ffma) > 0,
                "{}: no promotion",
                entry.name
            );
        }
        assert_eq!(report.count(Opcode::Ldl) + report.count(Opcode::Stl), 0);
    }
}

/// The mixed fp8 pairs (`b_dtype`): QGMMA with A's type then B's, as promised.
#[test]
fn mixed_fp8_pairs_assemble_to_their_qgmma() {
    for (a, b) in [("e4m3", "e5m2"), ("e5m2", "e4m3")] {
        let spec = format!(
            "name: mixed_{a}_{b}, arch: sm_90a, mma: wgmma, dtype: {a}, b_dtype: {b}, tile: 128x128x128, consumers: pingpong, stages: 6, schedule: persistent, quant: tensor"
        );
        let report = assemble_and_check(&format!("mixed {a} x {b}"), &spec);
        let qgmma = format!(
            "QGMMA.64x128x32.F32.{}.{}",
            a.to_uppercase(),
            b.to_uppercase()
        );
        assert!(
            report.instructions.iter().any(|i| i.opcode == qgmma),
            "{spec}: no {qgmma}"
        );
    }
}

#[test]
fn default_spec_assembles() {
    assemble_and_check("default", DEFAULT_SPEC);
}

#[test]
fn simt_kernels_assemble_for_every_arch() {
    // The same spec retargeted: the PTX must stay legal from sm_80 to sm_90a.
    for arch in ["sm_80", "sm_86", "sm_89", "sm_90", "sm_90a"] {
        let spec = format!("name: k_{arch}, arch: {arch}, tile: 128x128x16, stages: 3");
        assemble_and_check(&format!("k_{arch}"), &spec);
    }
}

/// The tensor-core family's PTX is the same for every target but the `.target` line: every
/// mma.sync catalog kernel is assembled for sm_80 and for sm_90, and must show the copy path
/// (LDGSTS + DEPBAR, or LDG + STS), ldmatrix (LDSM, .MT88 for B), the HMMA shape of its type,
/// and no local memory or spills.
#[test]
fn tensor_core_kernels_assemble_for_sm80_and_sm90() {
    let mut count = 0;
    for entry in CATALOG.iter().filter(|e| e.spec.contains("mma: mma_sync")) {
        let emitted = gemm_codegen::emit_str(entry.spec).expect("catalog specs are valid");
        let own = format!(".target {}\n", emitted.spec().arch.name());
        for arch in ["sm_80", "sm_90"] {
            let ptx = emitted.ptx().replace(&own, &format!(".target {arch}\n"));
            let report = SassReport::from_ptx(&ptx, arch)
                .unwrap_or_else(|error| panic!("{}: {error}\n(tools: {INSTALL_HINT})", entry.name));
            let resources = report.resources.as_ref().unwrap();
            let name = entry.name;
            assert!(!resources.spills(), "{name} {arch}: {resources}");
            assert_eq!(resources.stack_frame_bytes, 0, "{name} {arch}: {resources}");
            assert!(resources.warnings.is_empty(), "{name} {arch}: {resources}");
            assert!(resources.registers <= 255, "{name} {arch}: {resources}");
            if let Err(mismatch) = report.require(emitted.expected_sass()) {
                panic!("{name} ({arch}): {mismatch}");
            }
            let tf32 = entry.spec.contains("dtype: tf32");
            let hmma = if tf32 {
                "HMMA.1688.F32.TF32"
            } else {
                "HMMA.16816.F32"
            };
            assert!(report.count_variant(hmma) > 0, "{name} {arch}: no {hmma}");
            assert!(report.count_variant("LDSM.16.M88.4") > 0, "{name} {arch}");
            assert_eq!(
                report.count_variant("LDSM.16.MT88.4") > 0,
                !tf32,
                "{name} {arch}: B is ldmatrix.trans exactly for 16-bit types"
            );
            if entry.spec.contains("copy: sync") {
                assert_eq!(report.count(Opcode::Ldgsts), 0, "{name} {arch}");
                assert!(report.count(Opcode::Ldg) > 0 && report.count(Opcode::Sts) > 0);
            } else {
                // 16-byte copies that bypass L1 (cg); ptxas may add an L2 prefetch hint
                // (`LDGSTS.E.BYPASS.LTC128B.128`).
                let cg_copies = report
                    .instructions
                    .iter()
                    .filter(|i| {
                        i.opcode.starts_with("LDGSTS.E.BYPASS.") && i.opcode.ends_with(".128")
                    })
                    .count();
                assert!(cg_copies > 0, "{name} {arch}: no 16-byte cp.async.cg");
                assert!(report.count(Opcode::Depbar) > 0, "{name} {arch}: no DEPBAR");
                assert_eq!(report.count(Opcode::Ldg), 0, "{name} {arch}: operand LDG");
            }
            assert_eq!(report.count(Opcode::Ldl) + report.count(Opcode::Stl), 0);
            // Every mma of the main loop is in the SASS (nothing was optimized away).
            let p = gemm_codegen::family::plan(&gemm_dsl::check_str(entry.spec).unwrap());
            if let gemm_codegen::family::FamilyPlan::MmaSync(p) = &p.family {
                let mmas: usize = p.k_steps_plan.iter().map(|s| s.mmas.len()).sum();
                let hmmas = report.count(Opcode::Hmma);
                assert!(
                    hmmas >= mmas,
                    "{name} {arch}: {hmmas} HMMA < {mmas} mma.sync"
                );
            }
            println!("{name:<28} {arch:<7} {resources}");
            count += 1;
        }
    }
    let mma_sync_entries = CATALOG
        .iter()
        .filter(|e| e.spec.contains("mma: mma_sync"))
        .count();
    assert_eq!(
        count,
        2 * mma_sync_entries,
        "every mma.sync catalog kernel, twice"
    );
}

#[test]
fn tensor_core_kernels_assemble_for_every_arch() {
    for arch in ["sm_80", "sm_86", "sm_89", "sm_90", "sm_90a"] {
        for dtype in ["bf16", "f16", "tf32"] {
            let spec = format!(
                "name: k_{arch}_{dtype}, arch: {arch}, mma: mma_sync, dtype: {dtype}, tile: 64x64x32, stages: 3"
            );
            assemble_and_check(&format!("k_{arch}_{dtype}"), &spec);
        }
    }
}

/// The math-only probe of every catalog spec: it assembles without spills, runs the kernel's
/// math instruction (every one of a k tile's, nothing optimized away) and touches no memory
/// but its final store.
#[test]
fn math_only_probes_assemble_with_only_their_math() {
    for entry in CATALOG {
        let valid = gemm_dsl::check_str(entry.spec).expect("catalog specs are valid");
        let probe = gemm_codegen::emit_math_only(&valid);
        let arch = valid.spec.arch.name();
        let name = probe.kernel_name();
        let report = SassReport::from_ptx(probe.ptx(), arch)
            .unwrap_or_else(|error| panic!("{name}: {error}\n(tools: {INSTALL_HINT})"));
        let resources = report.resources.as_ref().unwrap();
        assert!(!resources.spills(), "{name}: {resources}");
        assert!(resources.warnings.is_empty(), "{name}: {resources}");
        if let Err(mismatch) = report.require(probe.expected_sass()) {
            panic!("{name} ({arch}): {mismatch}");
        }
        let plan = gemm_codegen::family::plan(&valid);
        let (opcode, per_trip) = match &plan.family {
            gemm_codegen::family::FamilyPlan::MmaSync(p) => (
                Opcode::Hmma,
                p.k_steps_plan.iter().map(|s| s.mmas.len()).sum::<usize>(),
            ),
            gemm_codegen::family::FamilyPlan::Simt(p) => {
                (Opcode::Ffma, (p.consumer.accumulators * p.block_k) as usize)
            }
            gemm_codegen::family::FamilyPlan::Wgmma(p) => (
                Opcode::Hgmma,
                p.main_loop
                    .k_steps
                    .iter()
                    .map(|s| s.mmas.len())
                    .sum::<usize>(),
            ),
        };
        assert!(
            report.count(opcode) >= per_trip,
            "{name}: {} {} < {per_trip} per k tile",
            report.count(opcode),
            opcode.mnemonic()
        );
    }
}

/// The HMMA promise names the input type: an f16 kernel's SASS (`HMMA.16816.F32`) breaks a
/// bf16 kernel's promise and a bf16 kernel's (`HMMA.16816.F32.BF16`) breaks an f16 one's.
#[test]
fn hmma_promises_tell_f16_from_bf16() {
    let shape = "arch: sm_80, mma: mma_sync, tile: 64x64x32, stages: 3";
    let [f16, bf16] = ["f16", "bf16"].map(|dtype| {
        let emitted = gemm_codegen::emit_str(&format!("name: k_{dtype}, dtype: {dtype}, {shape}"))
            .expect("valid spec");
        let report = SassReport::from_ptx(emitted.ptx(), "sm_80")
            .unwrap_or_else(|error| panic!("{dtype}: {error}\n(tools: {INSTALL_HINT})"));
        let hmma: Vec<SassCheck> = emitted
            .expected_sass()
            .iter()
            .copied()
            .filter(|check| {
                matches!(check, SassCheck::PresentVariant(op) | SassCheck::PresentExact(op)
                    if op.starts_with("HMMA."))
            })
            .collect();
        assert_eq!(hmma.len(), 1, "{dtype}: one HMMA variant promised");
        // Every HMMA of the kernel is the promised variant.
        assert!(report.require(&hmma).is_ok(), "{dtype}");
        (report, hmma)
    });
    let (f16_report, f16_promise) = f16;
    let (bf16_report, bf16_promise) = bf16;
    assert_eq!(f16_promise, [SassCheck::PresentExact("HMMA.16816.F32")]);
    assert_eq!(
        f16_report.count_exact("HMMA.16816.F32"),
        f16_report.count(Opcode::Hmma)
    );
    assert!(bf16_report.require(&f16_promise).is_err());
    assert!(f16_report.require(&bf16_promise).is_err());
}

/// A catalog spec re-specified in another layout, under its own name.
fn in_layout(spec: &str, name: &str, layout: &str) -> (String, String) {
    let renamed = format!("{name}_{layout}");
    let spec = spec.replacen(&format!("name: {name}"), &format!("name: {renamed}"), 1);
    (renamed, format!("{spec}, layout: {layout}"))
}

/// Every SIMT and mma.sync catalog kernel in the layouts with a column-major operand: ptxas
/// assembles it without spills or local memory, cp.async stays LDGSTS, and the tensor-core
/// kernels read their fragments with the ldmatrix forms their layout calls for (`.trans`
/// for a 16-bit operand whose lines run along K; tf32 such operands by 32-bit loads) into
/// the HMMA of their type.
#[test]
fn simt_and_mma_sync_catalog_kernels_assemble_in_every_layout() {
    let mut count = 0;
    let entries: Vec<_> = CATALOG
        .iter()
        .filter(|e| e.spec.contains("mma: fma") || e.spec.contains("mma: mma_sync"))
        .collect();
    for entry in &entries {
        for layout in ["rc", "cr", "cc"] {
            let (name, spec) = in_layout(entry.spec, entry.name, layout);
            if let Err(error) = gemm_dsl::check_str(&spec) {
                // 16x8 accumulators per thread with both operands read along K (rc) do not
                // fit the registers: refused, not spilled.
                assert_eq!(name, "simt_128x256x8_cp2_rc", "{error}");
                assert!(
                    error.to_string().contains("registers per thread"),
                    "{error}"
                );
                continue;
            }
            let report = assemble_and_check(&name, &spec);
            let emitted = gemm_codegen::emit_str(&spec).unwrap();
            let s = emitted.spec();
            assert_eq!(
                report.count(Opcode::Ldl) + report.count(Opcode::Stl),
                0,
                "{name}"
            );
            if s.copy.is_cp_async() {
                assert!(report.count(Opcode::Ldgsts) > 0, "{name}: no LDGSTS");
                assert_eq!(report.count(Opcode::Ldg), 0, "{name}: operand LDG");
            } else {
                assert_eq!(report.count(Opcode::Ldgsts), 0, "{name}");
                assert!(report.count(Opcode::Ldg) > 0 && report.count(Opcode::Sts) > 0);
            }
            if s.mma == gemm_dsl::Mma::Fma {
                assert!(report.count(Opcode::Ffma) > 0, "{name}: no FFMA");
            } else {
                let tf32 = s.dtype == gemm_dsl::DType::Tf32;
                let hmma = match s.dtype {
                    gemm_dsl::DType::Tf32 => "HMMA.1688.F32.TF32",
                    gemm_dsl::DType::F16 => "HMMA.16816.F32",
                    _ => "HMMA.16816.F32.BF16",
                };
                let hmmas = if s.dtype == gemm_dsl::DType::F16 {
                    report.count_exact(hmma)
                } else {
                    report.count_variant(hmma)
                };
                assert!(hmmas > 0, "{name}: no {hmma}");
                let a_col = !s.layout.a_row_major();
                let b_col = !s.layout.b_row_major();
                // ldmatrix without .trans reads row-major A and column-major B; with .trans,
                // 16-bit column-major A and row-major B.
                assert_eq!(
                    report.count_variant("LDSM.16.M88.4") > 0,
                    !a_col || b_col,
                    "{name}: LDSM.16.M88.4"
                );
                assert_eq!(
                    report.count_variant("LDSM.16.MT88.4") > 0,
                    !tf32 && (a_col || !b_col),
                    "{name}: LDSM.16.MT88.4"
                );
            }
            count += 1;
        }
    }
    // Every entry in every layout, but the one refused.
    assert!(entries.len() >= 23, "{}", entries.len());
    assert_eq!(count, 3 * entries.len() - 1);
}

/// The narrow-vector kernels: each in its own layout and in every other, no spills or local
/// memory, and the copies of their width: `cp.async` stays LDGSTS (8-byte `LDGSTS.E.64`,
/// 4-byte `LDGSTS.E` with no width, never the 16-byte `.128`), `copy: sync` LDG of the
/// vector's width (`.64`, none, or `.U16`) and no LDGSTS. C's stores (STG) are no wider
/// than the launch's output alignment, and the widest is that wide.
#[test]
fn narrow_vector_kernels_assemble_to_copies_of_their_width() {
    let (mut count, mut refused) = (0, Vec::new());
    for entry in NARROW {
        for layout in ["rr", "rc", "cr", "cc"] {
            // The entry's own layout (if it names one) gives way to each of the four.
            let own: String = entry
                .spec
                .split(", ")
                .filter(|part| !part.starts_with("layout:"))
                .collect::<Vec<_>>()
                .join(", ");
            let (name, spec) = in_layout(&own, entry.name, layout);
            if gemm_dsl::check_str(&spec).is_err() {
                refused.push(name);
                continue;
            }
            let report = assemble_and_check(&name, &spec);
            let emitted = gemm_codegen::emit_str(&spec).unwrap();
            let vector = emitted.spec().copy.vector_bytes();
            let width = |opcode: &str| {
                report
                    .instructions
                    .iter()
                    .filter(|i| i.opcode.split('.').next() == Some(opcode))
                    .map(|i| {
                        let parts: Vec<&str> = i.opcode.split('.').collect();
                        if parts.contains(&"128") {
                            16
                        } else if parts.contains(&"64") {
                            8
                        } else if parts.contains(&"U16") {
                            2
                        } else {
                            4
                        }
                    })
                    .collect::<std::collections::BTreeSet<u32>>()
            };
            if emitted.spec().copy.is_cp_async() {
                assert_eq!(report.count(Opcode::Ldg), 0, "{name}: operand LDG");
                assert_eq!(width("LDGSTS"), [vector].into(), "{name}");
            } else {
                assert_eq!(report.count(Opcode::Ldgsts), 0, "{name}");
                assert_eq!(width("LDG"), [vector].into(), "{name}");
            }
            let stores = width("STG");
            assert_eq!(
                stores.last().copied(),
                Some(emitted.launch().output_align_bytes),
                "{name}: {stores:?}"
            );
            assert!(
                emitted.launch().output_align_bytes
                    <= vector.max(emitted.launch().output_element_bytes),
                "{name}"
            );
            count += 1;
        }
    }
    assert_eq!(refused, Vec::<String>::new(), "refused");
    assert_eq!(count, 4 * NARROW.len() - refused.len());
}

/// The innermost loop that holds `math` instructions: each opcode (with modifiers) and how
/// many times its body has it.
fn inner_math_loop(report: &SassReport, math: Opcode) -> std::collections::BTreeMap<String, usize> {
    let body = report
        .instructions
        .iter()
        .enumerate()
        .filter_map(|(end, i)| {
            let head = *report.labels.get(i.branch_target()?)?;
            (head <= end).then(|| &report.instructions[head..=end])
        })
        .filter(|body| body.iter().any(|i| i.mnemonic() == math.mnemonic()))
        .min_by_key(|body| body.len())
        .expect("the kernel has a main loop");
    let mut counts = std::collections::BTreeMap::new();
    for instruction in body {
        *counts.entry(instruction.opcode.clone()).or_insert(0) += 1;
    }
    counts
}

/// A fused epilogue adds instructions after the main loop and changes none in it: the
/// plain kernel's PTX lines all appear, in order, in the fused kernel's (besides the header
/// and parameter lines), and the SASS of the innermost math loop counts the same memory,
/// math and synchronization instructions, with at most 2% more integer bookkeeping. Every
/// fused kernel assembles without spills and keeps its promises.
#[test]
fn fused_epilogues_leave_the_main_loop_alone() {
    let families = [
        (
            "name: k, mma: wgmma, arch: sm_90a, schedule: persistent",
            Opcode::Hgmma,
        ),
        (
            "name: k, mma: wgmma, arch: sm_90a, tile: 128x128x64, out: f32, schedule: persistent(tail = stream_k)",
            Opcode::Hgmma,
        ),
        ("name: k, mma: mma_sync, arch: sm_80", Opcode::Hmma),
        (
            "name: k, mma: mma_sync, arch: sm_80, schedule: persistent",
            Opcode::Hmma,
        ),
        ("name: k, arch: sm_80", Opcode::Ffma),
    ];
    let epilogues = [
        "scale: alpha_beta, bias: col, activation: gelu",
        "scale: alpha, bias: row(f32), activation: gelu_erf",
        "activation: silu",
        "bias: col, row_scale: f32",
    ];
    let mut compared = 0;
    for (plain, math) in families {
        let plain_report = assemble_and_check(plain, plain);
        let plain_emitted = gemm_codegen::emit_str(plain).unwrap();
        let plain_loop = inner_math_loop(&plain_report, math);
        for epilogue in epilogues {
            let spec = format!("{plain}, {epilogue}");
            let report = assemble_and_check(&spec, &spec);
            let fused_loop = inner_math_loop(&report, math);
            // ptxas moves integer bookkeeping between its forms (a move as `IMAD.MOV` or
            // `MOV`, an add as `VIADD` or `IADD3`) with the registers around the loop, and
            // may add a few register moves (7 MOVs in the SIMT loop of 686 with `silu`: 1%);
            // the memory, math and synchronization instructions must be the same, and the loop
            // at most 2% (and 2 instructions) longer.
            let length = |counts: &std::collections::BTreeMap<String, usize>| -> usize {
                counts.values().sum()
            };
            assert!(
                length(&fused_loop) <= length(&plain_loop) + (length(&plain_loop) / 50).max(2),
                "{spec}: the main loop grew from {} to {} instructions: {:?}",
                length(&plain_loop),
                length(&fused_loop),
                plain_loop
                    .keys()
                    .chain(fused_loop.keys())
                    .filter(|op| plain_loop.get(*op) != fused_loop.get(*op))
                    .map(|op| format!("{op}: {:?} -> {:?}", plain_loop.get(op), fused_loop.get(op)))
                    .collect::<std::collections::BTreeSet<_>>()
            );
            let integer = |op: &String| {
                [
                    "IMAD", "MOV", "VIADD", "IADD3", "LOP3", "SHF", "LEA", "SEL", "ISETP",
                    "UIADD3", "UMOV", "ULOP3", "USEL", "UISETP", "UIMAD", "R2UR",
                ]
                .iter()
                .any(|prefix| op == prefix || op.starts_with(&format!("{prefix}.")))
            };
            let without_integer = |counts: &std::collections::BTreeMap<String, usize>| {
                counts
                    .iter()
                    .filter(|(op, _)| !integer(op))
                    .map(|(op, n)| (op.clone(), *n))
                    .collect::<std::collections::BTreeMap<_, _>>()
            };
            let (plain_loop, fused_loop) =
                (without_integer(&plain_loop), without_integer(&fused_loop));
            if fused_loop != plain_loop {
                let differs: Vec<_> = plain_loop
                    .keys()
                    .chain(fused_loop.keys())
                    .filter(|op| plain_loop.get(*op) != fused_loop.get(*op))
                    .map(|op| format!("{op}: {:?} -> {:?}", plain_loop.get(op), fused_loop.get(op)))
                    .collect();
                panic!("{spec}: the main loop changed: {differs:?}");
            }
            let fused = gemm_codegen::emit_str(&spec).unwrap();
            let mut fused_lines = fused.ptx().lines();
            for line in plain_emitted.ptx().lines() {
                if line.starts_with("// spec:") || line.trim_start().starts_with(".param") {
                    continue;
                }
                assert!(
                    fused_lines.any(|fused_line| fused_line == line),
                    "{spec}: the plain kernel's line `{line}` is not in the fused kernel, in order"
                );
            }
            compared += 1;
        }
    }
    assert_eq!(compared, 20);
}

/// Every member of every kernel set that takes a fused epilogue (`SetMember::fuses`), with the
/// heaviest one (C-in, an f32 column bias and the exact GELU) and with a row bias, SiLU, aux
/// and the rows' factors (a member that stores C column-major: α, a row bias and an
/// activation, the swapped product's form of a column bias), assembles
/// without spills and keeps its promises: `Matmul::with_set_fused` builds exactly these kernels. A member that does not take one is shown to need it: it spills.
#[test]
fn every_set_member_assembles_with_a_fused_epilogue() {
    use gemm_codegen::pick::sets::{SM80_16BIT, SM80_F32, SM90_16BIT};
    use gemm_dsl::{DType, Layout};
    let mut assembled = 0;
    for (set, dtype) in [
        (&SM90_16BIT, DType::Bf16),
        (&SM80_16BIT, DType::Bf16),
        (&SM80_F32, DType::F32),
    ] {
        for member in set.members {
            if !member.fuses {
                let spec = format!(
                    "{}, scale: alpha_beta, bias: col(f32), activation: gelu_erf",
                    set.spec(member, dtype, dtype, Layout::RowRow)
                );
                let emitted = gemm_codegen::emit_str(&spec).expect("set specs are valid");
                let report = SassReport::from_ptx(emitted.ptx(), emitted.spec().arch.name())
                    .unwrap_or_else(|error| panic!("{}: {error}", member.name));
                let resources = report.resources.expect("offline route has ptxas resources");
                assert!(
                    resources.spills(),
                    "{}: marked as taking no fused epilogue, yet it assembles without spills: \
                     {resources}",
                    member.name
                );
                continue;
            }
            // A member that stores C column-major takes what the swapped product's epilogue
            // can be: a column bias read along its rows, α and an activation (`Matmul` leaves
            // it out of sets with C-in, aux or row factors).
            let epilogues = if member.body.contains("c_layout: col") {
                [
                    "scale: alpha, bias: row(f32), activation: gelu_erf",
                    "scale: alpha, bias: row, activation: silu",
                ]
            } else {
                [
                    "scale: alpha_beta, bias: col(f32), activation: gelu_erf",
                    "scale: alpha, bias: row, activation: silu, aux: pre_activation, row_scale: f32",
                ]
            };
            for epilogue in epilogues {
                let spec = format!(
                    "{}, {epilogue}",
                    set.spec(member, dtype, dtype, Layout::RowRow)
                );
                assemble_and_check(member.name, &spec);
                assembled += 1;
            }
        }
    }
    let fusing = [&SM90_16BIT, &SM80_16BIT, &SM80_F32]
        .iter()
        .flat_map(|set| set.members)
        .filter(|member| member.fuses)
        .count();
    assert_eq!(assembled, 2 * fusing);
}

/// The fp8 set's members that store C column-major (they run swapped products) assemble with
/// the swapped product's form of a column bias and GELU, per-tensor scales and α: what
/// `Matmul::with_set_fused` builds for a biased fp8 set's decode problems.
#[test]
fn the_fp8_swapped_members_assemble_with_a_bias_along_their_rows() {
    use gemm_codegen::pick::sets::SM90_FP8;
    use gemm_dsl::{DType, Layout};
    let mut assembled = 0;
    for member in SM90_FP8
        .members
        .iter()
        .filter(|member| member.body.contains("c_layout: col"))
    {
        let spec = format!(
            "{}, quant: tensor, scale: alpha, bias: row, activation: gelu",
            SM90_FP8.spec(member, DType::E4m3, DType::Bf16, Layout::RowCol)
        );
        assemble_and_check(member.name, &spec);
        assembled += 1;
    }
    assert_eq!(assembled, 2);
}

/// Every member of the block-scaled fp8 set, with block scales alone and with a column bias,
/// assembles without spills and keeps its promises (QGMMA): `Matmul::new_fused` with
/// `Quant::Block` builds these kernels.
#[test]
fn every_block_scaled_fp8_member_assembles() {
    use gemm_codegen::pick::sets::SM90_FP8_BLOCK;
    use gemm_dsl::{DType, Layout};
    for member in SM90_FP8_BLOCK.members {
        for epilogue in ["quant: block", "quant: block, bias: col"] {
            let spec = format!(
                "{}, {epilogue}",
                SM90_FP8_BLOCK.spec(member, DType::E4m3, DType::Bf16, Layout::RowCol)
            );
            assemble_and_check(member.name, &spec);
        }
    }
}

/// Every member of the grouped sets (bf16 and fp8 block-scaled), with a mixture-of-experts
/// layer's epilogues (each expert's bias, the router's weight per row, SiLU; an f32 bias and
/// α), assembles without spills and keeps its promises: `GroupedMatmul::new_fused` builds
/// these kernels.
#[test]
fn every_grouped_member_assembles_with_an_experts_epilogue() {
    use gemm_dsl::grouped::{
        sm90_grouped_fp8_specs, sm90_grouped_specs, SM90_GROUPED_FP8_MEMBERS, SM90_GROUPED_MEMBERS,
    };
    use gemm_dsl::{DType, Groups, Layout};
    let mut assembled = 0;
    for groups in [Groups::Contiguous, Groups::Masked] {
        let members = sm90_grouped_specs(groups, Layout::RowCol, DType::Bf16)
            .into_iter()
            .chain(sm90_grouped_fp8_specs(groups));
        for member in members {
            for epilogue in [
                "bias: col, row_scale: f32, activation: silu",
                "scale: alpha, bias: col(f32), row_scale: f32",
            ] {
                assemble_and_check(&member, &format!("{member}, {epilogue}"));
                assembled += 1;
            }
        }
    }
    assert_eq!(
        assembled,
        2 * 2 * (SM90_GROUPED_MEMBERS.len() + SM90_GROUPED_FP8_MEMBERS.len())
    );
}
