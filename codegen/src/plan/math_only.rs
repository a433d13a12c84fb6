//! A kernel's main-loop math alone: the family's k-step instruction blocks over the kernel's
//! own registers and in its order, with no loads, copies or barriers. Timed next to an
//! mma.sync kernel, it shows how close the main loop comes to what its instruction stream
//! allows on that board at that moment (clocks, power limit). (The SIMT family's probe was
//! measured below its kernel on H100, so for SIMT it is a curiosity, not a ceiling.)

//!
//! Each family fills [`MathOnlyPlan`] in its `probe` module.

use serde::Serialize;

/// The top exponent bit of every element: clearing it keeps operands below 2 in magnitude,
/// so accumulators stay finite over any trip count while the bits stay varied.
pub const F32_OPERAND_MASK: u32 = 0xBFFF_FFFF;
pub const PACKED_16_BIT_OPERAND_MASK: u32 = 0xBFFF_BFFF;

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

/// Flops of one k tile of a block tile, `2·BM·BN·BK`.
pub fn block_tile_flops(m: u32, n: u32, k: u32) -> u64 {
    2 * u64::from(m) * u64::from(n) * u64::from(k)
}

/// A 32-bit value as PTX writes hex.
pub fn ptx_hex(value: u32) -> String {
    format!("0x{value:08X}")
}
