//! `gemm-codegen explain`: the numbers behind a spec, as text. Everything here is read from the
//! validated spec and its plan; ptxas's own resource line is appended when the tools exist.
//! Each family writes its own section (`family::<name>::explain`) from [`common`]'s pieces.

pub mod common;

use crate::family;
use crate::sass::PtxasResources;
use gemm_dsl::ValidSpec;
use std::fmt::Write;

/// Renders the explanation. `ptxas` is what ptxas reported for this kernel, or why it could
/// not be run.
pub fn explain(valid: &ValidSpec, ptxas: Result<&PtxasResources, &str>) -> String {
    let mut out = String::new();
    let kernel_plan = family::plan(valid);
    let _ = writeln!(out, "spec: {}", valid.spec.to_spec_text());
    let _ = writeln!(out);
    kernel_plan.family.explain(&mut out, valid, ptxas);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn explains_ledger_timeline_and_banks() {
        let valid = gemm_dsl::check_str("name: k, tile: 128x128x16, stages: 3").unwrap();
        let text = explain(&valid, Err("tools not installed"));
        assert!(text.contains("3 stages x 16384 B"));
        assert!(text.contains("wait_group 1; bar.sync; tile 2 -> stage 2"));
        assert!(
            text.contains("A fragment read (ld.shared.v4)       conflict-free"),
            "{text}"
        );
        assert!(text.contains("ptxas: not run (tools not installed)"));
    }

    #[test]
    fn explains_a_stream_k_tail() {
        let valid = gemm_dsl::check_str(
            "name: k, arch: sm_90a, mma: wgmma, schedule: persistent(tail = stream_k)",
        )
        .unwrap();
        let text = explain(&valid, Err("tools not installed"));
        assert!(text.contains("131088 B per block"), "{text}");
        // setmaxnreg allocates every thread the even split: one block per SM.
        assert!(text.contains("occupancy: 1 block(s)/SM"), "{text}");
    }

    #[test]
    fn explains_the_hopper_family() {
        let valid = gemm_dsl::check_str("name: k, arch: sm_90a, mma: wgmma").unwrap();
        let text = explain(&valid, Err("tools not installed"));
        for needle in [
            "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16",
            "setmaxnreg.dec 40 in the producer, setmaxnreg.inc 232 in the consumers",
            "A 1 box(es) of 128 rows x 64 bf16 (16384 B each), B 4 box(es) of 64 rows x 64 bf16 (8192 B each); arrive.expect_tx 49152 B",
            "descriptor A (stage 0, first consumer, k step 0): 0x4000004000010000 = start +0 B, LBO 16 B, SBO 1024 B, 128-byte swizzle; K-major (imm-trans 0), +32 B per k step",
            "LBO 8192 B, SBO 1024 B, 128-byte swizzle; N-major (imm-trans 1), +2048 B per k step",
            "wait empty[0] parity 1 (fresh)",
            "wait full[0] parity 1",
            "4 stages x 49152 B",
        ] {
            assert!(text.contains(needle), "{needle}\n{text}");
        }
    }

    #[test]
    fn explains_the_tensor_core_family() {
        let valid =
            gemm_dsl::check_str("name: k, mma: mma_sync, tile: 128x128x32, stages: 3").unwrap();
        let text = explain(&valid, Err("tools not installed"));
        assert!(text.contains("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"));
        assert!(text.contains("3 stages x 16384 B"), "{text}");
        assert!(
            text.contains("tile 2 -> stage 2, commit")
                && text.contains("wait_group 1; bar.sync; fragments of tile 1 (stage 1) k step 0"),
            "{text}"
        );
        for access in [
            "A fragment read (ldmatrix.x4)",
            "B fragment read (ldmatrix.x4.trans)",
        ] {
            assert!(
                text.lines()
                    .any(|line| line.contains(access) && line.ends_with("conflict-free")),
                "{text}"
            );
        }
    }
}
