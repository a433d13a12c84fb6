//! The SIMT family's `explain` section.

use super::SimtPlan;
use crate::explain::common::{block_line, budgets, timeline, verdict};
use crate::sass::PtxasResources;
use gemm_dsl::ValidSpec;
use std::fmt::Write;

impl SimtPlan {
    pub fn explain(
        &self,
        out: &mut String,
        valid: &ValidSpec,
        ptxas: Result<&PtxasResources, &str>,
    ) {
        let (spec, g, p) = (&valid.spec, &self.geometry, self);
        let _ = writeln!(out, "family: SIMT f32 FFMA (mma: fma)");
        block_line(out, spec.tile, g.threads, g.warps);
        let _ = writeln!(
            out,
            "  warp tile {}x{}, lanes 4x8, {}x{} accumulators per thread",
            g.warp_tile_m, g.warp_tile_n, g.thread_tile_m, g.thread_tile_n
        );
        let _ = writeln!(
            out,
            "  per stage each thread copies A {} x {vector} B and B {} x {vector} B ({})",
            g.a_copy.copies_per_thread,
            g.b_copy.copies_per_thread,
            spec.copy,
            vector = g.a_copy.vector_bytes,
        );
        budgets(out, valid, ptxas);
        out.push_str(&timeline(&p.pipeline.smem, p.pipeline.copy));
        let _ = writeln!(out);
        let _ = writeln!(
            out,
            "shared-memory bank conflicts (bank = (addr >> 2) & 31; 16-byte accesses are served 8 lanes per phase):"
        );
        for report in p.bank_conflicts() {
            let _ = writeln!(out, "  {:<36} {}", report.access, verdict(report.degree));
        }
    }
}
