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

use serde::Serialize;

/// Bytes of one copy vector, and of the 32-bit words a partial vector is loaded by.
const VECTOR_BYTES: u32 = 16;
const WORD_BYTES: u32 = 4;

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
