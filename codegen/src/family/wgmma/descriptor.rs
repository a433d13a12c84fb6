//! The wgmma shared-memory matrix descriptor, and the layouts it and the TMA agree on.
//!
//! A descriptor is 64 bits: bits 0-13 the start address, 16-29 the leading-dimension byte
//! offset (LBO), 32-45 the stride-dimension byte offset (SBO), each in 16-byte units, and
//! bits 62-63 the swizzle (1 = 128B, 2 = 64B, 3 = 32B). With a `W`-byte swizzle, rows of `W`
//! bytes are grouped in 8-row atoms of `8·W` bytes; inside an atom the 16-byte chunk index is
//! XORed with the row (address bits 4.. with bits 7..), exactly as the TMA writes a box.
//!
//! - **K-major** (A, K contiguous): an m64k16 operand is 8 atoms down M, `SBO = 8·W` apart;
//!   a k16 step moves the start 32 bytes along the row (into the next box past `W`). LBO is
//!   unused by swizzled K-major layouts and set to 1.
//! - **MN-major** (B row-major or A column-major, N or M contiguous; `imm-trans = 1`): an
//!   m64 or n`N` by k16 operand is `MN·size/W` boxes of `W` bytes of M or N side by side,
//!   `LBO` apart (one box of BK rows each), and two 8-row atoms down K, `SBO = 8·W` apart; a
//!   k16 step moves the start 16 rows.
//!
//! The same two layouts serve both operands: K-major B (column-major) is read as A is, and
//! M-major A as B is.

use gemm_dsl::family::wgmma::{WgmmaGeometry, WGMMA_K_BYTES, WGMMA_M};
use serde::Serialize;
use std::ops::Range;

pub use gemm_dsl::family::wgmma::Major;

/// A descriptor's fields in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct SmemDescriptor {
    pub start_bytes: u32,
    pub leading_bytes: u32,
    pub stride_bytes: u32,
    pub swizzle_bytes: u32,
}

/// The descriptor's swizzle field for a swizzle span.
pub fn layout_type(swizzle_bytes: u32) -> u64 {
    match swizzle_bytes {
        128 => 1,
        64 => 2,
        32 => 3,
        _ => 0,
    }
}

const FIELD_MASK: u64 = 0x3FFF;

/// The address bits the 14-bit start field covers: `(address & START_ADDRESS_MASK) >> 4`.
/// A block's shared-window address may carry more (its rank within a cluster).
pub const START_ADDRESS_MASK: u32 = 0x3FFFF;

impl SmemDescriptor {
    pub fn encode(&self) -> u64 {
        let field = |bytes: u32| (u64::from(bytes) >> 4) & FIELD_MASK;
        field(self.start_bytes)
            | field(self.leading_bytes) << 16
            | field(self.stride_bytes) << 32
            | layout_type(self.swizzle_bytes) << 62
    }

    pub fn decode(bits: u64) -> SmemDescriptor {
        let field = |shift: u32| (((bits >> shift) & FIELD_MASK) << 4) as u32;
        SmemDescriptor {
            start_bytes: field(0),
            leading_bytes: field(16),
            stride_bytes: field(32),
            swizzle_bytes: match bits >> 62 {
                1 => 128,
                2 => 64,
                3 => 32,
                _ => 0,
            },
        }
    }

    /// The descriptor's low word without the start address: the kernel adds `start >> 4`.
    pub fn low_word_fields(&self) -> u32 {
        (SmemDescriptor {
            start_bytes: 0,
            ..*self
        })
        .encode() as u32
    }

    /// The descriptor's high word: SBO and swizzle.
    pub fn high_word(&self) -> u32 {
        (self.encode() >> 32) as u32
    }

    /// The shared-memory byte of element `(mn, k)` of the operand this descriptor describes
    /// (rows of `mn` and k16 columns of `k`, in elements of `element_bytes`), swizzle applied:
    /// the layout wgmma reads.
    pub fn element_address(&self, major: Major, mn: u32, k: u32, element_bytes: u32) -> u32 {
        let w = self.swizzle_bytes;
        let linear = match major {
            Major::K => {
                let k_byte = k * element_bytes;
                self.start_bytes + (mn % 8) * w + (mn / 8) * self.stride_bytes + k_byte
            }
            Major::MN => {
                let per_span = w / element_bytes;
                self.start_bytes
                    + (mn % per_span) * element_bytes
                    + (mn / per_span) * self.leading_bytes
                    + (k % 8) * w
                    + (k / 8) * self.stride_bytes
            }
        };
        swizzle(linear, w)
    }
}

/// The `W`-byte XOR swizzle on a shared-memory address whose atoms are `8·W`-aligned: the
/// 16-byte chunk bits (4 ..) XOR the row-in-atom bits (7 ..).
pub fn swizzle(address: u32, swizzle_bytes: u32) -> u32 {
    let bits = (swizzle_bytes / 16).trailing_zeros();
    let mask = (1 << bits) - 1;
    address ^ (((address >> 7) & mask) << 4)
}

/// Where the TMA puts element `(row, inner)` of a box that starts at `box_start` (aligned to
/// its atoms): rows of `swizzle_bytes`, swizzled.
pub fn tma_box_address(
    box_start: u32,
    row: u32,
    inner: u32,
    element_bytes: u32,
    swizzle_bytes: u32,
) -> u32 {
    swizzle(
        box_start + row * swizzle_bytes + inner * element_bytes,
        swizzle_bytes,
    )
}

/// The wgmmas of one k16 step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WgmmaKStep {
    /// The first k step of a k tile: its scale-d predicate is "accumulate unless this is the
    /// tile's first k tile"; later steps always accumulate.
    pub first: bool,
    /// Per piece of the tile's columns, per wgmma row of 64: one wgmma (the pieces in
    /// order, each starting at row 0).
    pub mmas: Vec<WgmmaOp>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WgmmaOp {
    /// The accumulators it writes: `%acc{i}` for `i` in the range.
    pub accumulators: Range<u32>,
    /// The consumer's wgmma row (of 64), and the piece of the tile's columns
    /// (`n_start .. n_start + n`) it covers.
    pub row: u32,
    pub piece: usize,
    pub n_start: u32,
    pub n: u32,
    /// Descriptor start offsets (16-byte units) from the consumer's stage bases.
    pub a_offset_units: u32,
    pub b_offset_units: u32,
}

/// How the consumers' wgmmas read a stage: each operand's descriptor, the k16 steps' start
/// offsets, and the bytes of A from one consumer's rows to the next's.
pub(super) struct OperandReads {
    pub a_descriptor: SmemDescriptor,
    pub b_descriptor: SmemDescriptor,
    pub k_steps: Vec<WgmmaKStep>,
    pub consumer_a_bytes: u32,
}

impl OperandReads {
    /// The reads of geometry `g`'s stage of `element`-byte operands, B `a_tile_bytes` in.
    pub(super) fn new(g: &WgmmaGeometry, element: u32, a_tile_bytes: u32) -> OperandReads {
        let stage = StageLayout::new(g, element);
        OperandReads {
            a_descriptor: stage.descriptor(g.a_major, 0, stage.a_box_bytes, g.a_swizzle_bytes),
            b_descriptor: stage.descriptor(
                g.b_major,
                a_tile_bytes,
                stage.b_box_bytes,
                g.b_swizzle_bytes,
            ),
            k_steps: (0..g.k_steps).map(|step| stage.k_step(step)).collect(),
            // Ping-pong consumers both read the whole tile of A.
            consumer_a_bytes: if g.pingpong {
                0
            } else {
                stage.m_rows_bytes(g.rows_per_consumer)
            },
        }
    }
}

/// Where the operands of a stage lie, in bytes, as the wgmmas step through them. K-major
/// operands step 32 bytes of K along a box row per wgmma (k16, or k32 of fp8; into the next
/// box past a swizzle span) and their 8-row atoms lie SBO apart; M/N-major operands (16-bit
/// only) step 16 box rows per k16 and their swizzle spans of M or N lie LBO (one box) apart.
/// Each operand has its own swizzle span `w`.
struct StageLayout<'g> {
    g: &'g WgmmaGeometry,
    element: u32,
    /// A swizzle span with all its lines (a K-major B over 256 rows: two boxes of them).
    a_box_bytes: u32,
    b_box_bytes: u32,
}

impl StageLayout<'_> {
    fn new(g: &WgmmaGeometry, element: u32) -> StageLayout<'_> {
        StageLayout {
            g,
            element,
            a_box_bytes: g.a_boxes.span_bytes(element),
            b_box_bytes: g.b_boxes.span_bytes(element),
        }
    }

    fn descriptor(&self, major: Major, start_bytes: u32, box_bytes: u32, w: u32) -> SmemDescriptor {
        SmemDescriptor {
            start_bytes,
            leading_bytes: match major {
                Major::K => 16,
                Major::MN => box_bytes,
            },
            stride_bytes: 8 * w,
            swizzle_bytes: w,
        }
    }

    /// Bytes from an operand's first k step to k step `step`.
    fn k_step_bytes(&self, major: Major, step: u32, box_bytes: u32, w: u32) -> u32 {
        match major {
            Major::K => {
                let k_byte = step * WGMMA_K_BYTES;
                (k_byte / w) * box_bytes + k_byte % w
            }
            Major::MN => step * self.g.k_per_wgmma * w,
        }
    }

    /// Bytes from one block of `rows` rows of M (a consumer's, or a wgmma row of 64) to the next.
    fn m_rows_bytes(&self, rows: u32) -> u32 {
        let a_swizzle = self.g.a_swizzle_bytes;
        match self.g.a_major {
            Major::K => rows * a_swizzle,
            Major::MN => rows * self.element / a_swizzle * self.a_box_bytes,
        }
    }

    /// Bytes from B's first column to column `n` (a piece's start): whole boxes of an
    /// N-major B, rows of a K-major one.
    fn n_columns_bytes(&self, n: u32) -> u32 {
        match self.g.b_major {
            Major::K => n * self.g.b_swizzle_bytes,
            Major::MN => n / self.g.b_boxes.inner * self.b_box_bytes,
        }
    }

    /// The wgmmas of k step `step`: per piece of the tile's columns, per wgmma row of 64.
    fn k_step(&self, step: u32) -> WgmmaKStep {
        let g = self.g;
        let a_step_bytes = self.k_step_bytes(g.a_major, step, self.a_box_bytes, g.a_swizzle_bytes);
        let b_step_bytes = self.k_step_bytes(g.b_major, step, self.b_box_bytes, g.b_swizzle_bytes);
        // A row of 64 holds N/2 accumulators whichever wgmma writes them: a piece's start at
        // column c is its first register's index c/2 into the row, as in one wide wgmma.
        let acc_per_row = g.n / 2;
        let pieces = g.n_pieces();
        let mmas = pieces.iter().enumerate().flat_map(|(piece_index, piece)| {
            (0..g.m_wgmmas).map(move |mi| {
                let first = mi * acc_per_row + piece.start / 2;
                WgmmaOp {
                    accumulators: first..first + piece.n / 2,
                    row: mi,
                    piece: piece_index,
                    n_start: piece.start,
                    n: piece.n,
                    a_offset_units: (a_step_bytes + self.m_rows_bytes(mi * WGMMA_M)) / 16,
                    b_offset_units: (b_step_bytes + self.n_columns_bytes(piece.start)) / 16,
                }
            })
        });
        WgmmaKStep {
            first: step == 0,
            mmas: mmas.collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_round_trip_and_sit_where_the_isa_puts_them() {
        let d = SmemDescriptor {
            start_bytes: 0x1_2340,
            leading_bytes: 8192,
            stride_bytes: 1024,
            swizzle_bytes: 128,
        };
        let bits = d.encode();
        assert_eq!(bits & 0x3FFF, 0x1234);
        assert_eq!((bits >> 16) & 0x3FFF, 512);
        assert_eq!((bits >> 32) & 0x3FFF, 64);
        assert_eq!(bits >> 62, 1);
        assert_eq!(SmemDescriptor::decode(bits), d);
        assert_eq!(
            u64::from(d.high_word()) << 32 | u64::from(d.low_word_fields()) | 0x1234,
            bits
        );
        for (bytes, field) in [(128, 1), (64, 2), (32, 3), (0, 0)] {
            assert_eq!(layout_type(bytes), field);
        }
    }

    #[test]
    fn the_128_byte_swizzle_permutes_chunks_by_row() {
        // Row r of a 1024-byte atom: chunk c lands in chunk c ^ r.
        for row in 0..8 {
            for chunk in 0..8 {
                let address = tma_box_address(2048, row, chunk * 8, 2, 128);
                assert_eq!(address, 2048 + row * 128 + (chunk ^ row) * 16);
            }
        }
        // 64-byte rows: pairs of rows share a 128-byte line, chunk c ^ (row / 2).
        assert_eq!(tma_box_address(0, 2, 0, 2, 64), 2 * 64 + 16);
        assert_eq!(tma_box_address(0, 3, 8, 2, 64), 3 * 64);
    }
}
