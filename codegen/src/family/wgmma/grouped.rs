//! The grouped walk (`groups: contiguous | masked`): the experts of a mixture-of-experts
//! layer in one persistent launch. At its start every block reads the device's row table
//! (each expert's end, or its count), clamps it as [`GroupRows`] does, and builds two tables
//! in shared memory with block-wide scans: each expert's last row, and the row tiles of the
//! experts up to it. The walk then runs over every expert's row tiles as one tall product's
//! ([`GroupedTiles`]); each role finds a tile's expert by a binary search of the second
//! table and sets the tile's first row, its expert's end (the bound its stores keep to) and
//! its B matrix (the expert).
//!
//! [`GroupRows`]: gemm_dsl::grouped::GroupRows
//! [`GroupedTiles`]: gemm_dsl::grouped::GroupedTiles

use crate::plan::divide::ConstDivisor;
use gemm_dsl::grouped::{MAX_GROUPS, SCAN_WARPS};
use gemm_dsl::{GemmSpec, Groups};
use serde::Serialize;

/// The register the table build leaves the walk's row-tile count in.
pub const ROW_TILES_REGISTER: &str = "%group_row_tiles";

/// What the grouped templates (`templates/wgmma/schedule/grouped`) print.
#[derive(Clone, Debug, Serialize)]
pub struct GroupedWalk {
    /// `masked`: expert `g` owns rows from `g · capacity`; else each starts where the last
    /// ended.
    pub masked: bool,
    /// Offsets from the ring's base: per expert the end of its rows, the row tiles through
    /// it, and the scans' words per warp.
    pub ends_offset: u32,
    pub through_offset: u32,
    pub scan_offset: u32,
    /// The block's threads (each takes one expert of every `threads`) and warps.
    pub threads: u32,
    pub warps: u32,
    /// The row tile: rows round up to it, and a tile's walk row is its first row over it.
    pub tile_m: u32,
    pub tile_m_divide: ConstDivisor,
    /// Added to an expert's rows before dividing by the tile: its last tile may be partial.
    pub tile_m_round_up: u32,
    /// Offsets from the scans' words of each warp's word but the last's (a thread adds the
    /// totals of the warps before its own).
    pub scan_words_before_last: Vec<u32>,
}

impl GroupedWalk {
    /// The walk of `spec` (`None` without `groups:`), its tables from `tables_offset` (a
    /// 16-byte boundary past everything else in the block's shared memory).
    pub fn of(spec: &GemmSpec, threads: u32, tables_offset: u32) -> Option<GroupedWalk> {
        let masked = match spec.groups {
            Groups::None => return None,
            Groups::Contiguous => false,
            Groups::Masked => true,
        };
        let warps = threads / 32;
        assert!(
            warps <= SCAN_WARPS,
            "the scans keep a word for each of at most {SCAN_WARPS} warps"
        );
        assert_eq!(tables_offset % 16, 0);
        Some(GroupedWalk {
            masked,
            ends_offset: tables_offset,
            through_offset: tables_offset + 4 * MAX_GROUPS,
            scan_offset: tables_offset + 8 * MAX_GROUPS,
            threads,
            warps,
            tile_m: spec.tile.m,
            tile_m_divide: ConstDivisor::new(spec.tile.m),
            tile_m_round_up: spec.tile.m - 1,
            scan_words_before_last: (0..warps - 1).map(|warp| 4 * warp).collect(),
        })
    }
}
