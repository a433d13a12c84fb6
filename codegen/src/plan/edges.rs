//! Partial tiles at the matrix edges, shared by the SIMT and mma.sync families.
//!
//! A block whose tile crosses M or N runs an edge copy of the main loop: it skips the copies
//! of A rows past M and of B chunks wholly past N (they feed only accumulators the epilogue
//! does not store, so whatever the stage held there is harmless) and copies a B chunk that
//! crosses N as its in-bounds bytes, zero-filled to 16. Interior blocks run the main loop
//! unchanged. When BK does not divide K, the main loop covers the whole k tiles and the last,
//! partial one is peeled: copied after the loop into stage 0 with every byte past K zero in A
//! and in B (so no pad times garbage reaches C), then computed once. Edge blocks store C
//! element by element where a vector would cross N, and skip rows past M.
//!
//! Every bound is a signed count of what is left from the thread's first copy (or first
//! accumulator): rows of A below it, bytes of a B or C row right of it, rows of B below it in
//! the peeled tile. A copy or store at offset `o` from there is in bounds when `left > o`.

use gemm_dsl::geometry::StoredTile;
use serde::Serialize;

/// Bytes of one copy vector, and of the 32-bit words a partial vector is loaded by.
const VECTOR_BYTES: u32 = 16;
const WORD_BYTES: u32 = 4;

/// Where one operand's copies come from in global memory and how far they may reach: the
/// tile lies as [`StoredTile`] lines, the copies run along each line's contiguous dimension.
/// Lines along M or N (row-major A, column-major B) start at the block's output tile and
/// step k tiles along the line, in bytes; lines along K (column-major A, row-major B) start
/// k tiles down, in lines (a runtime stride), and the block's tile along the line.
///
/// The bounds follow the dimensions, not the operand: lines past M or N are skipped and
/// bytes past K zero (`lines_left` counts lines, `bytes_left` bytes), or lines past K are
/// copied as zeros and chunks wholly past M or N skipped.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct OperandSource {
    /// `a` or `b`: the prefix of the operand's registers and kernel parameters.
    pub name: &'static str,
    pub lines_are_k: bool,
    /// The block's first row or column (`%block_m`, `%block_n`), and the kernel parameter
    /// that bounds it (`m`, `n`).
    pub block_origin: &'static str,
    pub mn_param: &'static str,
    /// Registers of the bounds, named by the dimension they count: lines or bytes left from
    /// the thread's first copy.
    pub lines_left: &'static str,
    pub bytes_left: &'static str,
    /// What one k tile adds to the main loop's copy pointers: an immediate byte count along
    /// the line, or the register holding `ld · BK` bytes (`%a_tile_step`, `%b_tile_step`).
    pub tile_step: String,
    /// Bytes one k tile moves along a line (`BK · element`), where lines run along M or N.
    pub tile_step_bytes: u32,
}

impl OperandSource {
    /// Operand A or B (`name`) of a `tile_k`-deep k tile of `element_bytes` elements.
    pub fn of(name: &'static str, stored: StoredTile, tile_k: u32, element_bytes: u32) -> Self {
        let (block_origin, mn_param, mn_left) = match name {
            "a" => ("%block_m", "m", "%a_rows_left"),
            _ => ("%block_n", "n", "%b_cols_left"),
        };
        let k_left = if name == "a" {
            "%a_k_left"
        } else {
            "%b_k_left"
        };
        let (lines_left, bytes_left) = if stored.lines_are_k {
            (k_left, mn_left)
        } else {
            (mn_left, k_left)
        };
        let tile_step_bytes = tile_k * element_bytes;
        OperandSource {
            name,
            lines_are_k: stored.lines_are_k,
            block_origin,
            mn_param,
            lines_left,
            bytes_left,
            tile_step: if stored.lines_are_k {
                format!("%{name}_tile_step")
            } else {
                tile_step_bytes.to_string()
            },
            tile_step_bytes,
        }
    }
}

/// One 32-bit word of a 16-byte chunk that `copy: sync` loads on its own when the chunk
/// crosses the matrix's edge: whole when at least `full_from` bytes of the chunk are in
/// bounds, its low half alone (16-bit elements) when exactly `half_at` are.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ChunkWord {
    pub register: String,
    pub offset: u32,
    pub full_from: u32,
    pub half_at: Option<u32>,
}

/// The words of a chunk staged in `registers` (four 32-bit registers), for elements of
/// `element_bytes`.
pub fn chunk_words(registers: &[String], element_bytes: u32) -> Vec<ChunkWord> {
    assert_eq!(registers.len() as u32 * WORD_BYTES, VECTOR_BYTES);
    registers
        .iter()
        .zip((0..).step_by(WORD_BYTES as usize))
        .map(|(register, offset)| ChunkWord {
            register: register.clone(),
            offset,
            full_from: offset + WORD_BYTES,
            half_at: (element_bytes < WORD_BYTES).then_some(offset + element_bytes),
        })
        .collect()
}

/// One element (or 16-bit half) of an edge block's vector store, stored when the row's bytes
/// left from the thread's first column exceed `offset`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ElementStore {
    /// Bytes right of the thread's first column (and of the C row pointer).
    pub offset: u32,
    pub register: String,
}

/// The byte an edge block checks before storing a vector whole: the vector's last.
pub const fn last_byte(offset: u32, bytes: u32) -> u32 {
    offset + bytes - 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunk_words_of_f32_and_of_16_bit_elements() {
        let registers: Vec<String> = (0..4).map(|i| format!("%s{i}")).collect();
        let words = chunk_words(&registers, 4);
        assert_eq!(
            words
                .iter()
                .map(|w| (w.offset, w.full_from))
                .collect::<Vec<_>>(),
            [(0, 4), (4, 8), (8, 12), (12, 16)]
        );
        assert!(words.iter().all(|w| w.half_at.is_none()));
        let words = chunk_words(&registers, 2);
        assert_eq!(words[3].half_at, Some(14));
        assert_eq!(words[3].register, "%s3");
        assert_eq!(last_byte(32, 16), 47);
    }
}
