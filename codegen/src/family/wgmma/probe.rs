//! The Hopper family's math-only probe: the consumers alone, their wgmmas reading one stage
//! of shared memory that the probe fills once.

use super::WgmmaPlan;
use crate::plan::math_only::{block_tile_flops, ptx_hex, MathOnlyPlan, PACKED_16_BIT_OPERAND_MASK};
use gemm_dsl::family::wgmma::{RING_ALIGN_BYTES, WARPGROUP_THREADS};
use gemm_dsl::RegisterBudget;

impl WgmmaPlan {
    pub fn math_only(&self, name: String) -> MathOnlyPlan {
        let main_loop = &self.main_loop;
        let consumer_threads = self.launch.consumers * WARPGROUP_THREADS;
        MathOnlyPlan {
            name,
            threads: consumer_threads,
            max_registers: Some(RegisterBudget::limit_for(consumer_threads)),
            accumulators: main_loop.accumulators,
            a_registers: 0,
            b_registers: 0,
            operand_type: ".b32",
            operand_mask: ptx_hex(PACKED_16_BIT_OPERAND_MASK),
            trip_blocks: vec![0],
            flops_per_trip: block_tile_flops(
                main_loop.block_m,
                main_loop.block_n,
                main_loop.block_k,
            ),
            smem_bytes: main_loop.ring.stage_bytes + RING_ALIGN_BYTES,
            smem_words: main_loop.ring.stage_bytes / 4,
        }
    }
}
