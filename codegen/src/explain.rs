//! `gemm-codegen explain`: the numbers behind a spec, as text. Everything here is read from the
//! validated spec and its plan; ptxas's own resource line is appended when the tools exist.

use crate::plan::{self, FamilyPlan, PlanCopy, SmemLayout};
use crate::sass::PtxasResources;
use gemm_dsl::{Family, ValidSpec};
use std::fmt::Write;

/// Renders the explanation. `ptxas` is what ptxas reported for this kernel, or why it could
/// not be run.
pub fn explain(valid: &ValidSpec, ptxas: Result<&PtxasResources, &str>) -> String {
    let mut out = String::new();
    let spec = &valid.spec;
    let kernel_plan = plan::plan(valid);
    let _ = writeln!(out, "spec: {}", spec.to_spec_text());
    let _ = writeln!(out);
    match (&valid.family, &kernel_plan.family) {
        (Family::Simt(g), FamilyPlan::Simt(p)) => {
            let _ = writeln!(out, "family: SIMT f32 FFMA (mma: fma)");
            let _ = writeln!(
                out,
                "  block tile {}, {} threads = {} warps as {}",
                spec.tile,
                g.threads,
                g.warps.count(),
                g.warps
            );
            let _ = writeln!(
                out,
                "  warp tile {}x{}, lanes 4x8, {}x{} accumulators per thread",
                g.warp_tile_m, g.warp_tile_n, g.thread_tile_m, g.thread_tile_n
            );
            let _ = writeln!(
                out,
                "  per stage each thread copies A {} x 16 B and B {} x 16 B ({})",
                g.a_copy.copies_per_thread, g.b_copy.copies_per_thread, spec.copy
            );
            let _ = writeln!(out);
            let _ = writeln!(out, "{}", valid.smem);
            let _ = writeln!(out);
            let _ = writeln!(out, "{}", valid.registers);
            match ptxas {
                Ok(resources) => {
                    let _ = writeln!(out, "  ptxas: {resources}");
                }
                Err(reason) => {
                    let _ = writeln!(out, "  ptxas: not run ({reason})");
                }
            }
            let _ = writeln!(out);
            let _ = writeln!(out, "{}", valid.occupancy);
            let _ = writeln!(out);
            out.push_str(&timeline(&p.smem, p.copy));
            let _ = writeln!(out);
            let _ = writeln!(
                out,
                "shared-memory bank conflicts (bank = (addr >> 2) & 31; 16-byte accesses are served 8 lanes per phase):"
            );
            for report in p.bank_conflicts() {
                let verdict = if report.degree <= 1 {
                    "conflict-free".to_string()
                } else {
                    format!("{}-way conflict", report.degree)
                };
                let _ = writeln!(out, "  {:<36} {verdict}", report.access);
            }
        }
    }
    out
}

/// The main loop as a table: which tile each step loads into which stage, which stage it
/// computes, and where the waits and barriers sit.
fn timeline(ring: &SmemLayout, copy: PlanCopy) -> String {
    let mut out = String::new();
    let stages = ring.stages;
    let copy_name = match copy {
        PlanCopy::Sync => "ld.global -> registers -> st.shared",
        PlanCopy::CpAsync => "cp.async",
    };
    let _ = writeln!(out, "pipeline: {stages} stage(s), {copy_name}");
    if !ring.pipelined {
        let _ = writeln!(
            out,
            "  every step: load tile k -> stage 0; {}bar.sync; compute stage 0; bar.sync",
            if copy == PlanCopy::CpAsync {
                "commit; wait_group 0; "
            } else {
                ""
            }
        );
        return out;
    }
    let _ = writeln!(
        out,
        "  prologue: tiles 0..{} -> stages 0..{}{}",
        ring.lookahead - 1,
        ring.lookahead - 1,
        if copy == PlanCopy::CpAsync {
            ", one commit group each"
        } else {
            ", then bar.sync"
        }
    );
    let _ = writeln!(
        out,
        "  {:>5}  {:<44} {:<14}",
        "step", "before the math", "math"
    );
    let steps = stages + 2;
    for k in 0..steps {
        let load_tile = k + ring.lookahead;
        let load_stage = load_tile % stages;
        let compute_stage = k % stages;
        let before = match copy {
            PlanCopy::CpAsync => format!(
                "wait_group {}; bar.sync; tile {load_tile} -> stage {load_stage}",
                ring.groups_in_flight
            ),
            PlanCopy::Sync => format!("tile {load_tile} -> registers"),
        };
        let math = format!("stage {compute_stage} (tile {k})");
        let after = match copy {
            PlanCopy::CpAsync => String::new(),
            PlanCopy::Sync => format!("; registers -> stage {load_stage}; bar.sync"),
        };
        let _ = writeln!(out, "  {k:>5}  {before:<44} {math}{after}");
    }
    let _ = writeln!(
        out,
        "  {:>5}  (the ring repeats every {stages} steps)",
        "..."
    );
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
}
