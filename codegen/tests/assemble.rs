//! Every catalog kernel through the real assembler: no errors, no spills, no local memory,
//! and the SASS the spec promises. These tests fail (never skip) when ptxas or nvdisasm are
//! missing: run `scripts/install-tools`.

use codegen::catalog::{CATALOG, DEFAULT_SPEC};
use codegen::sass::{SassReport, INSTALL_HINT};
use codegen::{Opcode, SassCheck};

fn assemble_and_check(name: &str, spec: &str) -> SassReport {
    let emitted = codegen::emit_str(spec).expect("catalog specs are valid");
    let arch = emitted.spec.arch.name();
    let report = SassReport::from_ptx(&emitted.ptx, arch)
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
    if let Err(mismatch) = report.require(&emitted.expected_sass) {
        panic!("{name} ({arch}): {mismatch}");
    }
    println!("{name:<28} {arch:<7} {}", resources);
    report
}

#[test]
fn every_catalog_kernel_assembles_with_its_promised_sass() {
    for entry in CATALOG {
        let report = assemble_and_check(entry.name, entry.spec);
        let emitted = codegen::emit_str(entry.spec).unwrap();
        // The checks a kernel carries are the ones the design promises for its copy path.
        let promises_ldgsts = emitted
            .expected_sass
            .contains(&SassCheck::Present(Opcode::Ldgsts));
        if promises_ldgsts {
            assert!(report.count(Opcode::Ldgsts) > 0);
            assert_eq!(
                report.count(Opcode::Ldg),
                0,
                "{}: operand LDG in a cp.async kernel",
                entry.name
            );
        } else {
            assert_eq!(report.count(Opcode::Ldgsts), 0);
            assert!(report.count(Opcode::Ldg) > 0 && report.count(Opcode::Sts) > 0);
        }
        assert_eq!(report.count(Opcode::Ldl) + report.count(Opcode::Stl), 0);
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
