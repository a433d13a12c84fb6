//! The mma.sync family's `explain` section.

use super::MmaSyncPlan;
use crate::explain::common::{bands, block_line, budgets, timeline, verdict};
use crate::plan::PlanCopy;
use crate::sass::PtxasResources;
use gemm_dsl::ValidSpec;
use std::fmt::Write;

impl MmaSyncPlan {
    pub fn explain(
        &self,
        out: &mut String,
        valid: &ValidSpec,
        ptxas: Result<&PtxasResources, &str>,
    ) {
        let (spec, g, p) = (&valid.spec, &self.geometry, self);
        let _ = writeln!(
            out,
            "family: Ampere tensor cores (mma: mma_sync), {} in, f32 accumulate, {} out",
            spec.dtype.name(),
            spec.out.name()
        );
        let _ = writeln!(out, "  {}", p.mma_instruction);
        block_line(out, spec.tile, g.threads, g.warps);
        let _ = writeln!(
            out,
            "  warp tile {}x{} = {}x{} mma tiles of m{}n{}k{}, {} k steps per block tile, {} f32 accumulators per thread",
            g.warp_tile_m,
            g.warp_tile_n,
            g.m_frags,
            g.n_frags,
            g.shape.m,
            g.shape.n,
            g.shape.k,
            g.k_steps,
            g.accumulators()
        );
        use crate::family::mma_sync::ReadKind;
        let load = |kind: ReadKind, loads: usize| match kind {
            ReadKind::Ldmatrix => format!("{loads} ldmatrix.x4"),
            ReadKind::LdmatrixTrans => format!("{loads} ldmatrix.x4.trans"),
            ReadKind::Scalar => {
                format!("{loads} ld.shared.b32 (tf32 has no 32-bit ldmatrix.trans)")
            }
        };
        let first_step = &p.k_steps_plan[0];
        let a_load = load(p.a_read.kind, first_step.a_loads.len());
        let b_load = load(p.b_read.kind, first_step.b_loads.len());
        let _ = writeln!(
            out,
            "  per k step and warp: {a_load} (A), {b_load} (B), {} mma.sync",
            g.m_frags * g.n_frags
        );
        let _ = writeln!(
            out,
            "  per stage each thread copies A {} x {vector} B and B {} x {vector} B ({})",
            g.a_copy.copies_per_thread,
            g.b_copy.copies_per_thread,
            spec.copy,
            vector = g.a_copy.vector_bytes,
        );
        let layout = |s: &crate::plan::swizzle::SmemSwizzle| {
            if s.xor_bits > 0 && s.line_shift > 0 {
                format!(
                    "rows of {} B, 16-byte chunk ^= (row >> {}) & {}",
                    s.row_bytes, s.line_shift, s.xor_mask
                )
            } else if s.xor_bits > 0 {
                format!(
                    "rows of {} B, 16-byte chunk ^= row & {} per 128-byte line",
                    s.row_bytes, s.xor_mask
                )
            } else if s.pitch > s.row_bytes {
                format!("rows of {} B padded to {} B", s.row_bytes, s.pitch)
            } else {
                format!("rows of {} B, no swizzle", s.row_bytes)
            }
        };
        let _ = writeln!(
            out,
            "  shared layout (swizzle: {}): A {}; B {}",
            spec.swizzle,
            layout(&p.pipeline.a_src.copy.swizzle),
            layout(&p.pipeline.b_src.copy.swizzle)
        );
        let pairs = if p.pack_instruction.is_empty() {
            "f32 pairs".to_string()
        } else {
            format!("{} (round to nearest even)", p.pack_instruction)
        };
        let _ = match p.epilogue.path.staged() {
            Some(e) => writeln!(
                out,
                "  epilogue: {pairs} into 2 shared slabs per warp (16 rows of {} B each), read back as 16-byte vectors, st.global.v4 of whole {}-byte row segments",
                e.pitch,
                e.vectors_per_row * 16
            ),
            None => writeln!(
                out,
                "  epilogue: {pairs}, st.global straight from the registers ({} B per store; warp tile rows are not whole 16-byte vectors the lanes can share)",
                p.out_bytes * 2
            ),
        };
        if let Some(walk) = &p.persistent {
            let _ = writeln!(
                out,
                "  schedule: persistent, grid = min(tiles, SMs x {} block(s)/SM); each block walks tiles blockIdx.x, + gridDim.x, .. in {}; after a tile's main loop, bar.sync, then the next tile's prologue copies, then this tile's epilogue",
                valid.occupancy.blocks_per_sm,
                bands(walk)
            );
        }
        budgets(out, valid, ptxas);
        if p.pipeline.smem.guard.pipelined && p.pipeline.copy == PlanCopy::CpAsync {
            out.push_str(&mma_ring_timeline(p));
        } else {
            out.push_str(&timeline(&p.pipeline.smem, p.pipeline.copy));
        }
        let _ = writeln!(out);
        let _ = writeln!(
            out,
            "shared-memory bank conflicts (bank = (addr >> 2) & 31; worst over all warps and instructions;"
        );
        let _ = writeln!(
            out,
            "16-byte accesses and each ldmatrix 8x8 matrix are served 8 lanes per phase, 4-byte accesses 32):"
        );
        for report in p.bank_conflicts() {
            let _ = writeln!(out, "  {:<36} {}", report.access, verdict(report.degree));
        }
        let _ = writeln!(out);
        let _ = writeln!(
            out,
            "first bank of each lane, warp 0, first instruction (tile offset -> bank; | separates phases):"
        );
        for (access, bytes, addresses) in p.first_phases() {
            let lanes_per_phase = (128 / bytes) as usize;
            let phases: Vec<String> = addresses
                .chunks(lanes_per_phase)
                .map(|phase| {
                    phase
                        .iter()
                        .map(|&a| crate::plan::bank(a).to_string())
                        .collect::<Vec<_>>()
                        .join(" ")
                })
                .collect();
            let _ = writeln!(out, "  {access}:");
            let _ = writeln!(out, "    {}", phases.join(" | "));
        }
    }
}

/// The tensor-core cp.async ring, k step by k step: fragments run one k step ahead of the
/// math, so the wait and barrier sit before a tile's last k step, and the next tile's first
/// fragments load behind them while that step computes.
fn mma_ring_timeline(p: &MmaSyncPlan) -> String {
    let ring = &p.pipeline.smem;
    let stages = ring.stages;
    let last = p.k_steps - 1;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "pipeline: {stages} stages, cp.async; {} k step(s) per tile, fragments one k step ahead of the math{}",
        p.k_steps,
        if p.prefetch_across_barrier {
            " (2 register sets)"
        } else {
            " within a tile"
        }
    );
    let _ = writeln!(
        out,
        "  prologue: tiles 0..{} -> stages 0..{}, one commit group each; wait_group {}; bar.sync; fragments of tile 0 k step 0",
        ring.guard.lookahead - 1,
        ring.guard.lookahead - 1,
        ring.guard.groups_in_flight
    );
    let steps_before_last = match last {
        0 => None,
        1 => Some("k step 0".to_string()),
        _ => Some(format!("k steps 0..{}", last - 1)),
    };
    if let Some(steps) = steps_before_last {
        let _ = writeln!(
            out,
            "  {steps}: fragments of the next k step, then the math of this one"
        );
    }
    let next_fragments = if p.prefetch_across_barrier {
        "fragments of tile {next} k step 0, then the math"
    } else {
        "the math, then fragments of tile {next} k step 0 (odd k steps: no spare register set)"
    };
    let _ = writeln!(
        out,
        "  {:>4}  {:<32} then, at k step {last}",
        "tile", "k step 0 first copies"
    );
    for tile in 0..stages + 2 {
        let load_tile = tile + ring.guard.lookahead;
        let copies = format!("tile {load_tile} -> stage {}, commit", load_tile % stages);
        let next = tile + 1;
        let barrier = format!(
            "wait_group {}; bar.sync; {}",
            ring.guard.groups_in_flight,
            next_fragments.replace("{next}", &format!("{next} (stage {})", next % stages))
        );
        let _ = writeln!(out, "  {tile:>4}  {copies:<32} {barrier}");
    }
    let _ = writeln!(
        out,
        "  {:>4}  (tile k computes from stage k mod {stages}; the barrier before its last k step also retires the reads of stage k - 1, refilled at the next tile's k step 0)",
        "..."
    );
    out
}
