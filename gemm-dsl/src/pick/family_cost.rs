//! What a kernel family states to the cost model, below both: the fitted numbers
//! ([`Calibration`]), the units an SM multiplies on, the model's view of one kernel
//! ([`Candidate`]) and the trait each family in `crate::family` implements ([`FamilyCost`]).
//! The families import this file and the model in `crate::pick` imports the families, so
//! nothing here names either.

use crate::abi::LaunchShape;
use crate::{DType, Layout, Mma};

/// The numbers of the model that are fitted to measurements rather than read off a
/// datasheet: `codegen/tests/pick.rs::refit_the_model_to_the_measurements` refits them to
/// the measured times of a `gemm-bench --set` run checked in beside it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Calibration {
    /// The fraction of the SM's peak math rate a family's main loop reaches (its math-only
    /// ceiling); the rest of the model says what else slows a tile down. wgmma by consumer
    /// warpgroups' share of the tile: a 128-row share per consumer reads the fewest
    /// shared-memory bytes per flop, a 64x128 one the most.
    pub wgmma_128_rows_per_consumer: f64,
    pub wgmma_two_consumers_256_wide: f64,
    /// Two consumers, or three (64 rows each of a 192-row tile).
    pub wgmma_two_consumers: f64,
    pub wgmma_one_consumer: f64,
    /// Ping-pong consumers, each with the whole tile (two m64 rows of it).
    pub wgmma_pingpong: f64,
    pub mma_sync: f64,
    /// The SIMT loop with many blocks resident on the SM; with b blocks it reaches
    /// `fma · b / (b + fma_barrier_blocks)`.
    pub fma: f64,
    /// What a SIMT block's barrier waits cost, in blocks: they stop only its own warps, which
    /// the other resident blocks' FFMAs fill (one block alone loses the most).
    pub fma_barrier_blocks: f64,
    /// Bytes per clock a stream-K finisher reads the other walkers' partial sums at (one
    /// block, each record after its flag).
    pub fixup_bytes_per_clk: f64,
    /// Clocks a split tail costs besides its sums: the flags' release and acquire, the
    /// finisher's wait for the slowest walker of its tile, the units' ring refills.
    pub stream_k_split_clk: f64,
    /// The share of its data-parallel twin's math rate a stream-K kernel's main loop reaches
    /// (its walk's bookkeeping), split tail or not; loops bound by feed or latency keep theirs.
    pub stream_k_loop_share: f64,
    /// The part of the shorter of SM work and DRAM traffic that the longer does not hide.
    pub overlap_slack: f64,
    /// SMs at which the DRAM bandwidth a grid pulls reaches half of what all reach.
    pub half_bandwidth_sms: f64,
    /// The fraction of peak DRAM bandwidth a stream of loads reaches.
    pub dram_efficiency: f64,
    /// The memory latency an mma.sync kernel's `cp.async` ring waits out, as a share of the
    /// TMA ring's (fitted on 16-row tiles at M <= 16; the SIMT family keeps the whole).
    pub mma_sync_latency_share: f64,
    /// Clocks a TMA ring's stage waits for its first bytes (a family's share of them), before
    /// the rest arrive at the SM's L2 feed rate; one SM streams at most its stages in flight
    /// per that sum.
    pub stage_latency_clk: f64,
}

/// The units an SM multiplies on, each with its own peak rate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MathUnit {
    /// The FP32 pipes (`fma.rn.f32`).
    Fma,
    /// The tensor cores, at the rate of the input type.
    TensorCores,
}

/// A family's numbers in the cost model, beside its rules: each family's module in
/// `crate::family` implements it, and `FamilyRules` requires it, so a new family is a
/// compile error until it states each.
pub(crate) trait FamilyCost {
    /// The unit the family's main loop multiplies on.
    fn math_unit(&self) -> MathUnit;
    /// The fraction of the unit's peak rate the candidate's main loop reaches (the
    /// [`Calibration`]'s fitted numbers), with `blocks_on_sm` of its blocks resident on an SM.
    fn main_loop_efficiency(
        &self,
        fitted: &Calibration,
        candidate: &Candidate,
        blocks_on_sm: f64,
    ) -> f64;
    /// Clocks a main-loop step pays besides its math and loads (barrier waits, the loop
    /// itself), with `blocks_on_sm` blocks resident on an SM.
    fn k_tile_overhead_clk(&self, blocks_on_sm: f64) -> f64;
    /// The share of the device's memory latency the family's ring waits out.
    fn ring_latency_share(&self, fitted: &Calibration) -> f64;
}

/// A kernel as the model sees it: its launch shape and the plan's numbers that set its speed.
#[derive(Clone, Debug, PartialEq)]
pub struct Candidate {
    pub name: String,
    pub launch: LaunchShape,
    pub mma: Mma,
    pub dtype: DType,
    pub out: DType,
    pub layout: Layout,
    /// wgmma consumer warpgroups (1 for the other families).
    pub consumers: u32,
    /// `consumers: pingpong`: each consumer computes whole tiles, and stores one while the
    /// other consumer multiplies.
    pub pingpong: bool,
    pub stages: u32,
    pub blocks_per_sm: u32,
    pub stream_k: bool,
}
