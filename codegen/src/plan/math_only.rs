//! A kernel's main-loop math alone: the family's k-step instruction blocks over the kernel's
//! own registers and in its order, with no loads, copies or barriers. Timed next to an
//! mma.sync kernel, it shows how close the main loop comes to what its instruction stream
//! allows on that board at that moment (clocks, power limit). (The SIMT family's probe was
//! measured below its kernel on H100, so for SIMT it is a curiosity, not a ceiling.)

use super::{FamilyPlan, KernelPlan};
use gemm_dsl::family::wgmma::{RING_ALIGN_BYTES, WARPGROUP_THREADS};
use gemm_dsl::RegisterBudget;
use serde::Serialize;

/// The top exponent bit of every element: clearing it keeps operands below 2 in magnitude,
/// so accumulators stay finite over any trip count while the bits stay varied.
const F32_OPERAND_MASK: u32 = 0xBFFF_FFFF;
const PACKED_16_BIT_OPERAND_MASK: u32 = 0xBFFF_BFFF;

/// Every number the math-only template prints.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct MathOnlyPlan {
    /// Entry name: the kernel's name with `_math_only`.
    pub name: String,
    pub threads: u32,
    /// The kernel's own `.maxnreg`, where it has one.
    pub max_registers: Option<u32>,
    pub accumulators: u32,
    pub a_registers: u32,
    pub b_registers: u32,
    /// PTX type of the operand registers: `.b32` (packed or tf32 mma fragments) or `.f32`.
    pub operand_type: &'static str,
    /// ANDed into each operand register, as PTX hex.
    pub operand_mask: String,
    /// Indices into the writer's math blocks, in the order one k tile runs them.
    pub trip_blocks: Vec<usize>,
    /// Flops of one trip of one block: one k tile of the block tile, `2·BM·BN·BK`.
    pub flops_per_trip: u64,
    /// Dynamic shared memory of a probe whose operands live there (wgmma: one stage plus
    /// its alignment), and the 32-bit words the probe fills; 0 for register operands.
    pub smem_bytes: u32,
    pub smem_words: u32,
}

impl MathOnlyPlan {
    pub fn of(plan: &KernelPlan) -> MathOnlyPlan {
        let name = format!("{}_math_only", plan.name);
        match &plan.family {
            FamilyPlan::Simt(p) => {
                let c = &p.consumer;
                MathOnlyPlan {
                    name,
                    threads: p.threads,
                    max_registers: p.max_registers,
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
                    flops_per_trip: block_tile_flops(p.block_m, p.block_n, p.block_k),
                    smem_bytes: 0,
                    smem_words: 0,
                }
            }
            FamilyPlan::MmaSync(p) => MathOnlyPlan {
                name,
                threads: p.threads,
                max_registers: Some(p.max_registers),
                accumulators: p.accumulators,
                a_registers: p.a_fragment_registers,
                b_registers: p.b_fragment_registers,
                operand_type: ".b32",
                // tf32 fragments are f32 bit patterns; the others pack two 16-bit elements.
                operand_mask: ptx_hex(if p.round_tf32 {
                    F32_OPERAND_MASK
                } else {
                    PACKED_16_BIT_OPERAND_MASK
                }),
                trip_blocks: (0..p.k_steps as usize).collect(),
                flops_per_trip: block_tile_flops(p.block_m, p.block_n, p.block_k),
                smem_bytes: 0,
                smem_words: 0,
            },
            // The consumers alone, on one stage of shared memory.
            FamilyPlan::Wgmma(p) => MathOnlyPlan {
                name,
                threads: p.consumers * WARPGROUP_THREADS,
                max_registers: Some(RegisterBudget::limit_for(p.consumers * WARPGROUP_THREADS)),
                accumulators: p.accumulators,
                a_registers: 0,
                b_registers: 0,
                operand_type: ".b32",
                operand_mask: ptx_hex(PACKED_16_BIT_OPERAND_MASK),
                trip_blocks: vec![0],
                flops_per_trip: block_tile_flops(p.block_m, p.block_n, p.block_k),
                smem_bytes: p.ring.stage_bytes + RING_ALIGN_BYTES,
                smem_words: p.ring.stage_bytes / 4,
            },
        }
    }
}

fn block_tile_flops(m: u32, n: u32, k: u32) -> u64 {
    2 * u64::from(m) * u64::from(n) * u64::from(k)
}

fn ptx_hex(value: u32) -> String {
    format!("0x{value:08X}")
}
