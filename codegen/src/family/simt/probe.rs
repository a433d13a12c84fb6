//! The SIMT family's math-only probe: its FFMA blocks on register operands.

use super::SimtPlan;
use crate::plan::math_only::{block_tile_flops, ptx_hex, MathOnlyPlan, F32_OPERAND_MASK};

impl SimtPlan {
    pub fn math_only(&self, name: String) -> MathOnlyPlan {
        let c = &self.consumer;
        MathOnlyPlan {
            name,
            threads: self.threads,
            max_registers: self.max_registers,
            accumulators: c.accumulators,
            a_registers: c.a_fragment_registers,
            b_registers: c.b_fragment_registers,
            operand_type: ".f32",
            operand_mask: ptx_hex(F32_OPERAND_MASK),
            // Each k group runs the FFMA block of each of its k positions in order.
            trip_blocks: c
                .k_groups
                .iter()
                .flat_map(|group| 0..group.k_steps.len())
                .collect(),
            flops_per_trip: block_tile_flops(self.block_m, self.block_n, self.block_k),
            smem_bytes: 0,
            smem_words: 0,
        }
    }
}
