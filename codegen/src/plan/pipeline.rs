//! The copy pipeline of the cp.async families (SIMT and mma.sync): the ring of stages, the
//! copy path and vector, and where each operand's copies come from. Each family's plan holds
//! one, flattened into its template context, with its own per-thread copy type `C`.

use super::batch::BatchPlan;
use super::copy::CopyAddressing;
use super::edges::{CopyVector, OperandSource};
use super::flags::flags;
use super::{CpAsyncGroups, PlanCopy, Ring};
use gemm_dsl::geometry::StoredTile;
use gemm_dsl::{GemmSpec, ThreadCopy};
use serde::Serialize;

#[derive(Clone, Debug, Serialize)]
pub struct CopyPipeline<C> {
    pub smem: Ring<CpAsyncGroups>,
    #[serde(serialize_with = "flags")]
    pub copy: PlanCopy,
    #[serde(serialize_with = "flags")]
    pub addressing: CopyAddressing,
    /// `cp.async` cache qualifier (`cg` or `ca`); empty for `copy: sync`.
    pub cache_hint: &'static str,
    /// The copy vector's instructions (`copy: sync`) and bounds.
    pub vector: CopyVector,
    /// Each operand's copies into shared memory, where they come from and how far they reach.
    pub a_src: OperandSource<C>,
    pub b_src: OperandSource<C>,
    /// Added to K before dividing by BK: a partial last k tile counts.
    pub k_round_up: u32,
    /// Registers that stage one tile in flight for `copy: sync`.
    pub staging_registers: u32,
}

impl<C> CopyPipeline<C> {
    /// The pipeline of `spec` over `smem`: A and B stored as `stored`, copied as
    /// `thread_copy` in vectors `vector` by `copies` addressed as `addressing`, each thread
    /// issuing `copies_per_thread` copies per stage of both operands.
    pub fn new(
        spec: &GemmSpec,
        (thread_copy, vector, addressing): (ThreadCopy, CopyVector, CopyAddressing),
        smem: Ring<CpAsyncGroups>,
        (a_stored, b_stored): (StoredTile, StoredTile),
        (a_copy, b_copy): (C, C),
        copies_per_thread: u32,
        batch: &BatchPlan,
    ) -> CopyPipeline<C> {
        let (copy, cache_hint) = PlanCopy::of(thread_copy);
        let (tile_k, element_bytes) = (spec.tile.k, spec.dtype.size_bytes());
        CopyPipeline {
            smem,
            copy,
            addressing,
            cache_hint,
            staging_registers: vector.words * copies_per_thread,
            vector,
            a_src: OperandSource::of("a", a_stored, tile_k, element_bytes, a_copy, &batch.a),
            b_src: OperandSource::of("b", b_stored, tile_k, element_bytes, b_copy, &batch.b),
            k_round_up: tile_k - 1,
        }
    }
}
