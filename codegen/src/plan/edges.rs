//! Partial tiles at the matrix edges, shared by the SIMT and mma.sync families.
//!
//! A block whose tile crosses M or N runs an edge copy of the main loop: it skips the copies
//! of A rows past M and of B chunks wholly past N (they feed only accumulators the epilogue
//! does not store, so whatever the stage held there is harmless) and copies a B vector that
//! crosses N as its in-bounds bytes, zero-filled to the vector's width (16 bytes, or the
//! spec's narrower `vector`). Interior blocks run the main loop
//! unchanged. When BK does not divide K, the main loop covers the whole k tiles and the last,
//! partial one is peeled: copied after the loop into stage 0 with every byte past K zero in A
//! and in B (so no pad times garbage reaches C), then computed once. Edge blocks store C
//! element by element where a vector would cross N, and skip rows past M.
//!
//! Every bound is a signed count of what is left from the thread's first copy (or first
//! accumulator): rows of A below it, bytes of a B or C row right of it, rows of B below it in
//! the peeled tile. A copy or store at offset `o` from there is in bounds when `left > o`.

use super::batch::BatchOperand;
use super::flags::{flags, TemplateEnum};
use gemm_dsl::geometry::{StoredTile, COPY_VECTOR_BYTES};
use serde::Serialize;

/// Bytes of the 32-bit words a partial vector is loaded by.
const WORD_BYTES: u32 = 4;

/// The register type a family stages copy vectors and stores C in: 32-bit floats (SIMT) or
/// untyped words (mma.sync, whose 16-bit elements come in pairs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StagingWord {
    F32,
    B32,
}

impl TemplateEnum for StagingWord {
    const ALL: &'static [Self] = &[StagingWord::F32, StagingWord::B32];
    fn name(self) -> &'static str {
        match self {
            StagingWord::F32 => "f32",
            StagingWord::B32 => "b32",
        }
    }
}

/// One copy vector of `copy: sync` or `cp_async`: its width and, for `sync`, the instructions
/// that move it through the staging registers. The default 16 bytes are `ld.global.v4` and
/// `st.shared.v4` of four 32-bit registers; 8 bytes two, 4 bytes one, and a 2-byte vector
/// (one 16-bit element) one register through `ld.global.u16` / `st.shared.b16`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CopyVector {
    pub bytes: u32,
    /// The vector's last byte: a bounded copy with more than this many bytes left loads it
    /// whole.
    pub last_byte: u32,
    /// 32-bit staging registers of one vector.
    pub words: u32,
    /// `ld.global` and `st.shared` of one vector, e.g. `ld.global.v4.f32`.
    pub global_load: String,
    pub shared_store: String,
    /// The staging registers' type (a partial vector is loaded word by word in it).
    #[serde(serialize_with = "flags")]
    pub word: StagingWord,
}

impl CopyVector {
    /// A vector of `bytes`, staged in registers of type `word`.
    pub fn new(bytes: u32, word: StagingWord) -> CopyVector {
        let word_type = word.name();
        let words = gemm_dsl::geometry::staging_words(bytes);
        let (load, store) = match words {
            4 => (format!("v4.{word_type}"), format!("v4.{word_type}")),
            2 => (format!("v2.{word_type}"), format!("v2.{word_type}")),
            _ if bytes < WORD_BYTES => ("u16".to_string(), "b16".to_string()),
            _ => (word_type.to_string(), word_type.to_string()),
        };
        CopyVector {
            bytes,
            last_byte: last_byte(0, bytes),
            words,
            global_load: format!("ld.global.{load}"),
            shared_store: format!("st.shared.{store}"),
            word,
        }
    }

    /// The staging registers of one vector as an instruction operand: `{ %r0, %r1 }` for a
    /// vector of several, the register alone for one.
    pub fn operand(&self, registers: &[String]) -> String {
        match registers {
            [one] => one.clone(),
            _ => format!("{{ {} }}", registers.join(", ")),
        }
    }
}

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
pub struct OperandSource<Copy> {
    /// `a` or `b`: the prefix of the operand's registers and kernel parameters.
    pub name: &'static str,
    /// The family's plan of the operand's copies into shared memory.
    pub copy: Copy,
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
    /// The operand's place in a strided batch: its base moves by the product's stride.
    pub batch: BatchOperand,
}

impl<Copy> OperandSource<Copy> {
    /// Operand A or B (`name`) of a `tile_k`-deep k tile of `element_bytes` elements, copied
    /// by `copy`, `batch` its batch stride.
    pub fn of(
        name: &'static str,
        stored: StoredTile,
        tile_k: u32,
        element_bytes: u32,
        copy: Copy,
        batch: &BatchOperand,
    ) -> Self {
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
            copy,
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
            batch: batch.clone(),
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

/// The words of a vector staged in `registers` (one 32-bit register per 4 bytes), for
/// elements of `element_bytes`. A vector of one element has none: it is in bounds whole or
/// not at all.
pub fn chunk_words(registers: &[String], element_bytes: u32, vector_bytes: u32) -> Vec<ChunkWord> {
    if vector_bytes <= element_bytes {
        return Vec::new();
    }
    assert_eq!(registers.len() as u32 * WORD_BYTES, vector_bytes);
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

/// Bytes of one C store of a kernel copying `vector_bytes` vectors: no wider than the copy
/// vector (so C's rows need only the alignment A's and B's lines need), the spec's
/// `c_store` where it gives one, nor 16 bytes, and at least one `out_bytes` element.
pub fn c_store_bytes(vector_bytes: u32, c_store: Option<u32>, out_bytes: u32) -> u32 {
    vector_bytes
        .min(c_store.unwrap_or(COPY_VECTOR_BYTES))
        .min(COPY_VECTOR_BYTES)
        .max(out_bytes)
}

/// The `st.global` of one C store of `bytes`, in registers of type `word`: four, two or one
/// 32-bit registers, or a 16-bit half.
pub fn c_global_store(bytes: u32, word: StagingWord) -> String {
    let word_type = word.name();
    match bytes {
        16 => format!("st.global.v4.{word_type}"),
        8 => format!("st.global.v2.{word_type}"),
        4 => format!("st.global.{word_type}"),
        2 => "st.global.b16".to_string(),
        _ => unreachable!("C stores are 2, 4, 8 or 16 bytes, not {bytes}"),
    }
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
        let words = chunk_words(&registers, 4, 16);
        assert_eq!(
            words
                .iter()
                .map(|w| (w.offset, w.full_from))
                .collect::<Vec<_>>(),
            [(0, 4), (4, 8), (8, 12), (12, 16)]
        );
        assert!(words.iter().all(|w| w.half_at.is_none()));
        let words = chunk_words(&registers, 2, 16);
        assert_eq!(words[3].half_at, Some(14));
        assert_eq!(words[3].register, "%s3");
        assert_eq!(last_byte(32, 16), 47);
    }

    #[test]
    fn narrow_vectors_stage_fewer_words() {
        let one = ["%s0".to_string()];
        // Two bf16 in one word: the low half alone when 2 bytes are in bounds.
        let words = chunk_words(&one, 2, 4);
        assert_eq!((words[0].full_from, words[0].half_at), (4, Some(2)));
        // One element per vector: whole or nothing.
        assert!(chunk_words(&one, 4, 4).is_empty());
        assert!(chunk_words(&one, 2, 2).is_empty());
        let v = CopyVector::new(16, StagingWord::F32);
        assert_eq!(
            (v.global_load.as_str(), v.last_byte, v.words),
            ("ld.global.v4.f32", 15, 4)
        );
        let v = CopyVector::new(8, StagingWord::B32);
        assert_eq!(
            (v.global_load.as_str(), v.shared_store.as_str()),
            ("ld.global.v2.b32", "st.shared.v2.b32")
        );
        let v = CopyVector::new(2, StagingWord::B32);
        assert_eq!(
            (v.global_load.as_str(), v.shared_store.as_str(), v.words),
            ("ld.global.u16", "st.shared.b16", 1)
        );
        assert_eq!(v.operand(&one), "%s0");
        assert_eq!(
            CopyVector::new(8, StagingWord::B32).operand(&["%a".into(), "%b".into()]),
            "{ %a, %b }"
        );
    }
}
