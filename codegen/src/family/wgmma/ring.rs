//! The stage ring: `stages` slots of A and B boxes, each guarded by a *full* mbarrier (the
//! producer's one `arrive.expect_tx` plus the TMA's bytes complete its phase) and an *empty*
//! one (one arrival per consumer warp completes its phase).
//!
//! Producer and consumers walk the same sequence of k tiles, output tile after output tile;
//! fill `i` of that sequence uses slot `i % stages` in lap `i / stages`. A barrier's phase
//! flips each time it completes, so waits name the parity of the phase they wait for: the
//! consumers wait on full\[slot] for parity `lap % 2`, the producer on empty\[slot] for parity
//! `(lap + 1) % 2`, which on lap 0 names the phase "before" a fresh barrier and returns at once.

use gemm_dsl::family::wgmma::{MBARRIER_BYTES, STAGING_ALIGN_BYTES};
use serde::Serialize;

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Ring {
    pub stages: u32,
    pub stage_bytes: u32,
    /// Bytes of all stages; a TMA-store epilogue's buffers follow, then the barriers.
    pub ring_bytes: u32,
    /// Offset of the epilogue's buffers from the ring base: the ring's end, on the 1024-byte
    /// period of their swizzle.
    pub staging_offset: u32,
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
    /// A ring followed by `staging_bytes` of epilogue buffers (0 for none).
    pub fn new(stages: u32, stage_bytes: u32, empty_arrivals: u32, staging_bytes: u32) -> Ring {
        let ring_bytes = stages * stage_bytes;
        let staging_offset = if staging_bytes > 0 {
            ring_bytes.next_multiple_of(STAGING_ALIGN_BYTES)
        } else {
            ring_bytes
        };
        let full_offset = staging_offset + staging_bytes;
        Ring {
            stages,
            stage_bytes,
            ring_bytes,
            staging_offset,
            full_offset,
            empty_offset: full_offset + stages * MBARRIER_BYTES,
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
