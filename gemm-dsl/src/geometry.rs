//! Geometry every family shares: 16-byte operand copies spread over a block's threads, and
//! which rows an XOR swizzle can permute. Each family's own split of the block tile lives with
//! its rules in [`crate::family`].

use crate::spec::{Layout, Tile};

/// Bytes one copy instruction moves (`ld.global.v4` / `cp.async ... 16`).
pub const COPY_VECTOR_BYTES: u32 = 16;
/// The most warps a block may have (1024 threads).
pub const MAX_WARPS: u32 = 32;

/// How one operand tile is spread over the block's threads as 16-byte copies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CopyGeometry {
    /// Tile rows and 16-byte vectors per row (in global and shared memory alike).
    pub rows: u32,
    pub vectors_per_row: u32,
    /// Copies each thread issues per stage.
    pub copies_per_thread: u32,
}

impl CopyGeometry {
    /// `None` when the vectors don't spread evenly: every thread must issue the same copies,
    /// and thread `t`'s `i`-th copy (vector `t + i·threads`) must sit at a fixed row/column
    /// offset from its first, which holds when threads and vectors per row divide one another.
    pub fn new(rows: u32, row_bytes: u32, threads: u32) -> Option<CopyGeometry> {
        if !row_bytes.is_multiple_of(COPY_VECTOR_BYTES) || threads == 0 {
            return None;
        }
        let vectors_per_row = row_bytes / COPY_VECTOR_BYTES;
        let vectors = rows.checked_mul(vectors_per_row)?;
        let divides =
            threads.is_multiple_of(vectors_per_row) || vectors_per_row.is_multiple_of(threads);
        if vectors == 0 || !vectors.is_multiple_of(threads) || !divides {
            return None;
        }
        Some(CopyGeometry {
            rows,
            vectors_per_row,
            copies_per_thread: vectors / threads,
        })
    }
}

/// An operand tile whose 16-byte copies the block's threads cannot share out evenly.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CopySpread {
    pub operand: char,
    pub vectors: u32,
    pub vectors_per_row: u32,
    pub threads: u32,
}

/// An operand tile as it lies in global memory, and so in the shared memory of the families
/// that copy 16-byte vectors along its contiguous dimension: `lines` of `line_elements`
/// contiguous elements. A row-major A is `BM` lines of `BK`, a column-major A `BK` lines of
/// `BM`; a row-major B `BK` lines of `BN`, a column-major B `BN` lines of `BK`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StoredTile {
    pub lines: u32,
    pub line_elements: u32,
    /// The lines run along K (one line per k): column-major A, row-major B.
    pub lines_are_k: bool,
}

impl StoredTile {
    /// The stored tiles of A and B under `layout`.
    pub fn of(tile: Tile, layout: Layout) -> (StoredTile, StoredTile) {
        let line = |lines_are_k: bool, mn: u32| StoredTile {
            lines: if lines_are_k { tile.k } else { mn },
            line_elements: if lines_are_k { mn } else { tile.k },
            lines_are_k,
        };
        (
            line(!layout.a_row_major(), tile.m),
            line(layout.b_row_major(), tile.n),
        )
    }
}

/// The copies of A and B, each along its contiguous dimension ([`StoredTile`]).
pub(crate) fn operand_copies(
    tile: Tile,
    layout: Layout,
    element: u32,
    threads: u32,
) -> Result<(CopyGeometry, CopyGeometry), CopySpread> {
    let copy = |operand, stored: StoredTile| {
        let row_bytes = stored.line_elements * element;
        CopyGeometry::new(stored.lines, row_bytes, threads).ok_or(CopySpread {
            operand,
            vectors: stored.lines * row_bytes / COPY_VECTOR_BYTES,
            vectors_per_row: row_bytes / COPY_VECTOR_BYTES,
            threads,
        })
    };
    let (a, b) = StoredTile::of(tile, layout);
    Ok((copy('A', a)?, copy('B', b)?))
}

/// Whether an XOR swizzle (`32B`, `64B`, `128B`) can permute shared-memory rows of this many
/// bytes: rows of 16, 32, 64 or 128 bytes share 128-byte lines evenly, and rows of a multiple
/// of 128 bytes split into whole lines. (The tensor-core family's swizzle XORs the 16-byte
/// chunk index within a 128-byte line with the line's index.)
pub fn xor_swizzle_fits_row(row_bytes: u32) -> bool {
    (row_bytes.is_power_of_two() && (16..=128).contains(&row_bytes))
        || (row_bytes > 0 && row_bytes.is_multiple_of(128))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_spread_when_threads_exceed_a_row() {
        let g = CopyGeometry::new(8, 128 * 4, 256).unwrap();
        assert_eq!(g.vectors_per_row, 32);
        assert_eq!(g.copies_per_thread, 1);
        assert_eq!(CopyGeometry::new(8, 4 * 4, 256), None);
        assert_eq!(CopyGeometry::new(3, 24 * 4, 32), None);
        assert_eq!(CopyGeometry::new(u32::MAX, 32, 32), None);
    }
}
