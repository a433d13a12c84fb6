//! The mma.sync family's math-only probe: its k steps' mma.sync blocks on register
//! fragments.

use super::MmaSyncPlan;
use crate::plan::math_only::{
    block_tile_flops, ptx_hex, MathOnlyPlan, F32_OPERAND_MASK, PACKED_16_BIT_OPERAND_MASK,
};

impl MmaSyncPlan {
    pub fn math_only(&self, name: String) -> MathOnlyPlan {
        MathOnlyPlan {
            name,
            threads: self.threads,
            max_registers: Some(self.max_registers),
            accumulators: self.accumulators,
            a_registers: self.a_fragment_registers,
            b_registers: self.b_fragment_registers,
            operand_type: ".b32",
            // tf32 fragments are f32 bit patterns; the others pack two 16-bit elements.
            operand_mask: ptx_hex(if self.round_tf32 {
                F32_OPERAND_MASK
            } else {
                PACKED_16_BIT_OPERAND_MASK
            }),
            trip_blocks: (0..self.k_steps as usize).collect(),
            flops_per_trip: block_tile_flops(self.block_m, self.block_n, self.block_k),
            smem_bytes: 0,
            smem_words: 0,
        }
    }
}
