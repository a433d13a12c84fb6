//! Pieces every family's `explain` section uses: the block line, the budgets (ledger,
//! registers next to ptxas, occupancy), the cp.async ring's timeline and conflict verdicts.

use crate::plan::schedule::TileWalk;
use crate::plan::{CpAsyncGroups, PlanCopy, Ring};
use crate::sass::PtxasResources;
use gemm_dsl::{Occupancy, ValidSpec};
use std::fmt::Write;

/// A persistent walk's bands and the order inside them ([`gemm_dsl::Schedule::band_order`]).
pub fn bands(walk: &TileWalk) -> String {
    let (group, across, along) = (
        walk.group,
        walk.across.param.to_uppercase(),
        walk.along.param.to_uppercase(),
    );
    format!(
        "raster bands {group} tiles across {across} advancing along {along}, each band across first, or along first where it is shorter than {group} tiles, fits in one round of walkers and {across} is the longer side"
    )
}

pub fn verdict(degree: u32) -> String {
    if degree <= 1 {
        "conflict-free".to_string()
    } else {
        format!("{degree}-way conflict")
    }
}

pub fn block_line(out: &mut String, tile: gemm_dsl::Tile, threads: u32, warps: gemm_dsl::Grid2) {
    let _ = writeln!(
        out,
        "  block tile {tile}, {threads} threads = {} warps as {warps}",
        warps.count()
    );
}

/// The family-independent middle of an explanation: shared-memory ledger, register estimate
/// next to what ptxas reported, and occupancy.
pub fn budgets(out: &mut String, valid: &ValidSpec, ptxas: Result<&PtxasResources, &str>) {
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
    occupancy(out, valid, ptxas.ok());
    let _ = writeln!(out);
}

/// Occupancy at the registers ptxas allocated, where it ran: the block is launched with those,
/// not with the estimate. The validator's figure (from the estimate, or the `.maxnreg` split
/// under `setmaxnreg`) is what `check` and the cost model use, so it follows where it differs.
fn occupancy(out: &mut String, valid: &ValidSpec, ptxas: Option<&PtxasResources>) {
    let Some(resources) = ptxas else {
        let _ = writeln!(out, "{}", valid.occupancy);
        return;
    };
    let assembled = Occupancy::compute(
        valid.spec.arch,
        valid.threads_per_block(),
        resources.registers,
        valid.smem.total(),
    );
    let _ = writeln!(
        out,
        "{assembled} at ptxas's {} registers/thread",
        resources.registers
    );
    if assembled.blocks_per_sm != valid.occupancy.blocks_per_sm {
        let _ = writeln!(
            out,
            "  the estimate gives {} block(s)/SM (what `check` and the cost model use)",
            valid.occupancy.blocks_per_sm
        );
    }
}

/// The main loop as a table: which tile each step loads into which stage, which stage it
/// computes, and where the waits and barriers sit.
pub fn timeline(ring: &Ring<CpAsyncGroups>, copy: PlanCopy) -> String {
    let mut out = String::new();
    let stages = ring.stages;
    let copy_name = match copy {
        PlanCopy::Sync => "ld.global -> registers -> st.shared",
        PlanCopy::CpAsync => "cp.async",
    };
    let _ = writeln!(out, "pipeline: {stages} stage(s), {copy_name}");
    if !ring.guard.pipelined {
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
        ring.guard.lookahead - 1,
        ring.guard.lookahead - 1,
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
        let load_tile = k + ring.guard.lookahead;
        let load_stage = load_tile % stages;
        let compute_stage = k % stages;
        let before = match copy {
            PlanCopy::CpAsync => format!(
                "wait_group {}; bar.sync; tile {load_tile} -> stage {load_stage}",
                ring.guard.groups_in_flight
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

    fn budgets_with(spec: &str, ptxas: Result<&PtxasResources, &str>) -> String {
        let valid = gemm_dsl::check_str(spec).unwrap();
        let mut out = String::new();
        budgets(&mut out, &valid, ptxas);
        out
    }

    /// 256 threads at ptxas's 128 registers take 32768 of the SM's 65536: two blocks, though
    /// the estimate's 148 (152 allocated) leave room for one.
    #[test]
    fn occupancy_follows_the_registers_ptxas_allocated() {
        let spec = "name: k, arch: sm_80, tile: 128x128x8, warps: 4x2, stages: 2, mma: fma";
        let ptxas = PtxasResources {
            registers: 128,
            ..PtxasResources::default()
        };
        let text = budgets_with(spec, Ok(&ptxas));
        assert!(
            text.contains(
                "occupancy: 2 block(s)/SM, 16 warps/SM (limited by registers) at ptxas's 128 registers/thread\n  the estimate gives 1 block(s)/SM"
            ),
            "{text}"
        );
        // Without ptxas, the estimate's figure alone.
        let text = budgets_with(spec, Err("not run"));
        assert!(
            text.contains("occupancy: 1 block(s)/SM, 8 warps/SM (limited by registers)\n"),
            "{text}"
        );
    }
}
