//! The ring of pipeline stages of the cp.async families: stage offsets, the prologue and
//! `cp.async.wait_group` depth.

use serde::Serialize;

/// The ring of pipeline stages in dynamic shared memory.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SmemLayout {
    pub stages: u32,
    pub stage_bytes: u32,
    pub ring_bytes: u32,
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

impl SmemLayout {
    pub fn new(stage_bytes: u32, stages: u32) -> SmemLayout {
        let prologue_stages = stages.saturating_sub(1);
        SmemLayout {
            stages,
            stage_bytes,
            ring_bytes: stage_bytes * stages,
            pipelined: stages > 1,
            lookahead: prologue_stages,
            prologue_offsets: (0..prologue_stages).map(|s| s * stage_bytes).collect(),
            first_write_offset: prologue_stages * stage_bytes,
            groups_in_flight: stages.saturating_sub(2),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ring_of_three_stages() {
        let ring = SmemLayout::new(1000, 3);
        assert_eq!(ring.prologue_offsets, [0, 1000]);
        assert_eq!(ring.first_write_offset, 2000);
        assert_eq!(ring.groups_in_flight, 1);
        assert_eq!(ring.ring_bytes, 3000);
        let single = SmemLayout::new(1000, 1);
        assert!(!single.pipelined);
        assert!(single.prologue_offsets.is_empty());
    }
}
