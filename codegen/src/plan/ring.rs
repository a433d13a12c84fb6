//! The ring of pipeline stages in dynamic shared memory, shared by every family: `stages`
//! slots of `stage_bytes`, refilled in turn. Fill `i` of the sequence of k tiles uses slot
//! `i % stages` in lap `i / stages`. What keeps a slot from being refilled while it is read,
//! and read before it is full, is the ring's guard:
//!
//! - [`CpAsyncGroups`] (SIMT, mma.sync): every thread copies; a prologue fills `stages - 1`
//!   slots, `cp.async.wait_group` lets `stages - 2` groups stay in flight while a slot is
//!   read, and a block barrier retires the reads of the slot refilled next.
//! - [`Mbarriers`] (wgmma): a producer fills each slot by TMA. A *full* mbarrier per slot
//!   completes its phase with the producer's one `arrive.expect_tx` plus the TMA's bytes; an
//!   *empty* one with one arrival per consumer warp. A barrier's phase flips each time it
//!   completes, so waits name the parity of the phase they wait for: consumers wait on
//!   full\[slot] for parity `lap % 2`, the producer on empty\[slot] for parity
//!   `(lap + 1) % 2`, which on lap 0 names the phase "before" a fresh barrier and returns at
//!   once.

use gemm_dsl::geometry::{MBARRIER_BYTES, STAGING_ALIGN_BYTES};
use serde::Serialize;

/// The ring of stages; the templates see the guard's fields beside the ring's own.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Ring<Guard> {
    pub stages: u32,
    pub stage_bytes: u32,
    /// Bytes of all stages.
    pub ring_bytes: u32,
    #[serde(flatten)]
    pub guard: Guard,
}

/// The guard of the cp.async families: groups in flight, a prologue and block barriers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CpAsyncGroups {
    /// More than one stage: loads of later tiles overlap the math on earlier ones.
    pub pipelined: bool,
    /// Stage offsets the prologue fills before the main loop (tiles 0 .. stages-1).
    pub prologue_offsets: Vec<u32>,
    /// Tiles in flight ahead of the one being computed (`stages - 1`).
    pub lookahead: u32,
    /// The stage the first main-loop iteration fills.
    pub first_write_offset: u32,
    /// `cp.async.wait_group` argument: groups that may stay in flight while a stage is read.
    pub groups_in_flight: u32,
}

/// The guard of the TMA family: a full and an empty mbarrier per slot, after the stages and
/// a TMA-store epilogue's buffers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Mbarriers {
    /// Offset of the epilogue's buffers from the ring base: the ring's end, on the 1024-byte
    /// period of their swizzle.
    pub staging_offset: u32,
    /// Offsets of the first full and the first empty barrier from the ring base.
    pub full_offset: u32,
    pub empty_offset: u32,
    /// Bytes one fill brings: every box of the stage, counted whole even where the TMA fills
    /// parts outside the matrix with zeros.
    pub expect_tx_bytes: u32,
    /// Arrivals that complete a full barrier's phase besides its bytes: the producer's
    /// `arrive.expect_tx`, and one more where `cp.async` copies arrive on it when they land.
    pub full_arrivals: u32,
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

impl<Guard> Ring<Guard> {
    pub fn fill(&self, fill: u64) -> Fill {
        Fill {
            slot: (fill % u64::from(self.stages)) as u32,
            lap: fill / u64::from(self.stages),
        }
    }
}

impl Ring<CpAsyncGroups> {
    /// A ring of `stages` guarded by cp.async groups.
    pub fn cp_async(stage_bytes: u32, stages: u32) -> Self {
        let prologue_stages = stages.saturating_sub(1);
        Ring {
            stages,
            stage_bytes,
            ring_bytes: stage_bytes * stages,
            guard: CpAsyncGroups {
                pipelined: stages > 1,
                lookahead: prologue_stages,
                prologue_offsets: (0..prologue_stages).map(|s| s * stage_bytes).collect(),
                first_write_offset: prologue_stages * stage_bytes,
                groups_in_flight: stages.saturating_sub(2),
            },
        }
    }
}

impl Ring<Mbarriers> {
    /// A ring guarded by mbarriers, followed by `staging_bytes` of epilogue buffers (0 for
    /// none).
    pub fn mbarriers(
        stages: u32,
        stage_bytes: u32,
        empty_arrivals: u32,
        staging_bytes: u32,
    ) -> Self {
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
            guard: Mbarriers {
                staging_offset,
                full_offset,
                empty_offset: full_offset + stages * MBARRIER_BYTES,
                expect_tx_bytes: stage_bytes,
                full_arrivals: 1,
                empty_arrivals,
                barrier_offsets: (0..stages).map(|slot| slot * MBARRIER_BYTES).collect(),
            },
        }
    }

    /// The ring with a second arrival on each full barrier: `cp.async` copies of the producer
    /// (`cp.async.mbarrier.arrive.noinc`) that land beside the stage's TMA boxes.
    pub fn with_copies_arriving(mut self) -> Self {
        self.guard.full_arrivals = 2;
        self
    }

    /// Bytes from the ring base to the end of the barriers.
    pub fn bytes_with_barriers(&self) -> u32 {
        self.guard.empty_offset + self.stages * MBARRIER_BYTES
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cp_async_ring_of_three_stages() {
        let ring = Ring::cp_async(1000, 3);
        assert_eq!(ring.guard.prologue_offsets, [0, 1000]);
        assert_eq!(ring.guard.first_write_offset, 2000);
        assert_eq!(ring.guard.groups_in_flight, 1);
        assert_eq!(ring.ring_bytes, 3000);
        let single = Ring::cp_async(1000, 1);
        assert!(!single.guard.pipelined);
        assert!(single.guard.prologue_offsets.is_empty());
    }

    #[test]
    fn mbarrier_ring_places_staging_then_barriers() {
        let ring = Ring::mbarriers(3, 1000, 8, 512);
        assert_eq!(ring.guard.staging_offset, 3072);
        assert_eq!(ring.guard.full_offset, 3584);
        assert_eq!(ring.guard.empty_offset, 3584 + 3 * MBARRIER_BYTES);
        assert_eq!(ring.bytes_with_barriers(), 3584 + 6 * MBARRIER_BYTES);
        let fill = ring.fill(7);
        assert_eq!((fill.slot, fill.lap), (1, 2));
        assert_eq!((fill.full_parity(), fill.empty_parity()), (0, 1));
    }

    #[test]
    fn templates_see_the_guard_beside_the_ring() {
        let ring = tera::to_value(Ring::cp_async(1000, 3)).unwrap();
        assert_eq!(ring["groups_in_flight"], 1);
        assert_eq!(ring["stage_bytes"], 1000);
        let ring = tera::to_value(Ring::mbarriers(2, 100, 4, 0)).unwrap();
        assert_eq!(ring["empty_arrivals"], 4);
        assert_eq!(ring["stages"], 2);
    }
}
