//! Edge tiles cost the interior tiles nothing but one uniform branch per k tile: the steady
//! state of every SIMT and mma.sync catalog kernel's main loop, in the SASS of the real
//! assembler, against the same kernel with the bounded copies cut off (the `bra.uni` into
//! them deleted, so ptxas drops them as dead code: the kernel as it would be for whole tiles
//! only). Fails, never skips, without ptxas and nvdisasm (`scripts/install-tools`).

use gemm_codegen::catalog::CATALOG;
use gemm_codegen::sass::{Instruction, SassReport, INSTALL_HINT};
use gemm_codegen::Opcode;
use gemm_dsl::Mma;
use std::collections::BTreeMap;

/// The PTX line that enters a k tile's bounded copies.
const INTO_BOUNDED_COPIES: &str = "@%p_bounded bra.uni\t$L_bounded_copy;";

fn assemble(name: &str, ptx: &str, arch: &str) -> SassReport {
    SassReport::from_ptx(ptx, arch)
        .unwrap_or_else(|error| panic!("{name}: {error}\n(tools: {INSTALL_HINT})"))
}

/// Opcode (without modifiers) counts of a path.
fn opcodes(path: &[&Instruction]) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for instruction in path {
        *counts
            .entry(instruction.mnemonic().to_string())
            .or_default() += 1;
    }
    counts
}

/// Memory and math instructions, and how many of them run under a predicate.
fn work(path: &[&Instruction]) -> BTreeMap<String, (usize, usize)> {
    const WORK: &[&str] = &[
        "FFMA",
        "HMMA",
        "LDS",
        "LDSM",
        "LDG",
        "STS",
        "LDGSTS",
        "LDGDEPBAR",
        "DEPBAR",
        "BAR",
    ];
    let mut counts = BTreeMap::new();
    for instruction in path.iter().filter(|i| WORK.contains(&i.mnemonic())) {
        let entry: &mut (usize, usize) = counts
            .entry(instruction.mnemonic().to_string())
            .or_default();
        entry.0 += 1;
        entry.1 += usize::from(instruction.predicated());
    }
    counts
}

#[test]
fn interior_tiles_run_the_whole_tile_main_loop() {
    let mut checked = 0;
    for entry in CATALOG {
        let emitted = gemm_codegen::emit_str(entry.spec).unwrap();
        let math = match emitted.spec().mma {
            Mma::Fma => Opcode::Ffma,
            Mma::MmaSync => Opcode::Hmma,
            Mma::Wgmma => continue,
        };
        let arch = emitted.spec().arch.name();
        let branches = emitted.ptx().matches(INTO_BOUNDED_COPIES).count();
        assert_eq!(
            branches, 1,
            "{}: one way into the bounded copies",
            entry.name
        );
        let whole_tiles = emitted.ptx().replace(INTO_BOUNDED_COPIES, "");
        let edges = assemble(entry.name, emitted.ptx(), arch);
        let whole = assemble(entry.name, &whole_tiles, arch);
        // Registers are printed, not compared: ptxas allocates for the whole kernel, the
        // out-of-line copies included, and moves a few either way.
        let registers = |report: &SassReport| report.resources.as_ref().unwrap().registers;
        let path = edges.steady_state_path(math).expect("a main loop");
        let reference = whole.steady_state_path(math).expect("a main loop");
        println!(
            "{:<28} steady state {} instructions ({} predicated), whole tiles only {} ({}); registers {} / {}",
            entry.name,
            path.len(),
            path.iter().filter(|i| i.predicated()).count(),
            reference.len(),
            reference.iter().filter(|i| i.predicated()).count(),
            registers(&edges),
            registers(&whole),
        );
        // The same copies, math and barriers, predicated no more than before: no
        // per-element predicate reaches the interior tiles' loop...
        assert_eq!(work(&path), work(&reference), "{}", entry.name);
        assert!(
            path.iter().all(|i| !i.opcode.contains("ZFILL")),
            "{}: a zero-filling copy on the steady-state path",
            entry.name
        );
        // ...which gains the uniform branch (a compare and a BRA) and what ptxas makes of
        // it (moves around the branch): at most 2% more instructions and 12.
        let (ours, theirs) = (opcodes(&path), opcodes(&reference));
        assert_eq!(
            ours["BRA"],
            theirs["BRA"] + 1,
            "{}: one more branch",
            entry.name
        );
        assert!(
            path.len() <= reference.len() + reference.len() / 50 + 12,
            "{}: {} instructions against {}",
            entry.name,
            path.len(),
            reference.len()
        );
        checked += 1;
    }
    // Every SIMT and mma.sync catalog kernel; the Hopper family has no bounded copies (its
    // TMA reads zeros past the edges).
    let cp_async_families = CATALOG
        .iter()
        .filter(|entry| !entry.spec.contains("mma: wgmma"))
        .count();
    assert_eq!(checked, cp_async_families);
}
