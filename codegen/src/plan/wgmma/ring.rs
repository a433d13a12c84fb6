//! The stage ring: `stages` slots of A and B boxes, each guarded by a *full* mbarrier (the
//! producer's one `arrive.expect_tx` plus the TMA's bytes complete its phase) and an *empty*
//! one (one arrival per consumer warp completes its phase).
//!
//! Producer and consumers walk the same sequence of k tiles, output tile after output tile;
//! fill `i` of that sequence uses slot `i % stages` in lap `i / stages`. A barrier's phase
//! flips each time it completes, so waits name the parity of the phase they wait for: the
//! consumers wait on full\[slot] for parity `lap % 2`, the producer on empty\[slot] for parity
//! `(lap + 1) % 2`, which on lap 0 names the phase "before" a fresh barrier and returns at once.

use gemm_dsl::family::wgmma::MBARRIER_BYTES;
use serde::Serialize;

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Ring {
    pub stages: u32,
    pub stage_bytes: u32,
    /// Bytes of all stages; the barriers follow.
    pub ring_bytes: u32,
    /// Offsets of the first full and the first empty barrier from the ring base.
    pub full_offset: u32,
    pub empty_offset: u32,
    /// Bytes one fill brings: every box of the stage, counted whole even where the TMA fills
    /// parts outside the matrix with zeros.
    pub expect_tx_bytes: u32,
    /// Arrivals that complete an empty barrier's phase: one per consumer warp of every block
    /// whose stage the slot's loads fill (the cluster's, under multicast).
    pub empty_arrivals: u32,
    /// Per slot, the byte offsets of its barriers from the first of their kind.
    pub barrier_offsets: Vec<u32>,
}

/// Where fill `fill` of the ring lands and which phases guard it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fill {
    pub slot: u32,
    pub lap: u64,
}

impl Fill {
    /// The parity a consumer waits for on the slot's full barrier.
    pub fn full_parity(self) -> u32 {
        (self.lap % 2) as u32
    }

    /// The parity the producer waits for on the slot's empty barrier.
    pub fn empty_parity(self) -> u32 {
        ((self.lap + 1) % 2) as u32
    }
}

impl Ring {
    pub fn new(stages: u32, stage_bytes: u32, empty_arrivals: u32) -> Ring {
        let ring_bytes = stages * stage_bytes;
        Ring {
            stages,
            stage_bytes,
            ring_bytes,
            full_offset: ring_bytes,
            empty_offset: ring_bytes + stages * MBARRIER_BYTES,
            expect_tx_bytes: stage_bytes,
            empty_arrivals,
            barrier_offsets: (0..stages).map(|slot| slot * MBARRIER_BYTES).collect(),
        }
    }

    /// Bytes from the ring base to the end of the barriers.
    pub fn bytes_with_barriers(&self) -> u32 {
        self.empty_offset + self.stages * MBARRIER_BYTES
    }

    pub fn fill(&self, fill: u64) -> Fill {
        Fill {
            slot: (fill % u64::from(self.stages)) as u32,
            lap: fill / u64::from(self.stages),
        }
    }
}
