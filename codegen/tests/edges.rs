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

/// A block of a short mma.sync tile that crosses M only copies a whole k tile with B's copies
/// exactly as the main loop issues them and A's predicated on the lines left, with no per-tile
/// address arithmetic (no parameter loads) on that path: at M = 1 every block takes it, two
/// warps per block, so whatever it computes sits on each k tile's critical path. Taller tiles
/// keep the single bounded path.
#[test]
fn short_tiles_that_cross_m_copy_b_as_the_main_loop_does() {
    let section = |ptx: &str, from: &str, to: &str| -> Vec<String> {
        let start = ptx.find(from).unwrap_or_else(|| panic!("no {from}"));
        let rest = &ptx[start + from.len()..];
        let end = rest
            .find(to)
            .unwrap_or_else(|| panic!("no {to} after {from}"));
        rest[..end].lines().map(|l| l.trim().to_string()).collect()
    };
    let b_copies = |lines: &[String]| -> Vec<String> {
        lines
            .iter()
            .filter(|l| l.contains("cp.async") && l.contains("[%b_dst"))
            .cloned()
            .collect()
    };
    let (mut short, mut tall) = (0, 0);
    for entry in CATALOG.iter().chain(gemm_codegen::catalog::NARROW) {
        let emitted = gemm_codegen::emit_str(entry.spec).unwrap();
        let spec = emitted.spec();
        let cp_async_ring = spec.copy.to_string().starts_with("cp_async") && spec.stages > 1;
        if spec.mma != Mma::MmaSync || !cp_async_ring {
            continue;
        }
        let ptx = emitted.ptx();
        if spec.tile.m > 64 {
            assert!(!ptx.contains("$L_rows_edge_copy"), "{}", entry.name);
            tall += 1;
            continue;
        }
        let rows_path = section(ptx, "$L_rows_edge_copy:", "bra.uni\t$L_copied;");
        let main_loop = section(ptx, "$L_main_loop:", "$L_copied:");
        assert!(!b_copies(&main_loop).is_empty(), "{}", entry.name);
        assert_eq!(b_copies(&rows_path), b_copies(&main_loop), "{}", entry.name);
        let a_copies: Vec<&String> = rows_path
            .iter()
            .filter(|l| l.contains("cp.async") && l.contains("[%a_dst"))
            .collect();
        assert!(!a_copies.is_empty(), "{}", entry.name);
        assert!(
            a_copies.iter().all(|l| l.starts_with("@%p_copy ")),
            "{}: {a_copies:?}",
            entry.name
        );
        assert!(
            rows_path.iter().all(|l| !l.starts_with("ld.param")),
            "{}: parameter loads on the rows-edge path",
            entry.name
        );
        short += 1;
    }
    // mma_bf16_16x64x64_s4, mma_bf16_64x64x64_s2 and two narrow kernels; 11 taller ones.
    assert_eq!((short, tall), (4, 11));
}
