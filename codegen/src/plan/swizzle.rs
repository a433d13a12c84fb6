//! The shared-memory layout of one operand tile: where the 16-byte chunk `c` of tile row `r`
//! lives. The cp.async (or st.shared) writes and the ldmatrix / ld.shared reads use this one
//! function, so any permutation it applies is invisible to the math.
//!
//! `swizzle: 32B | 64B | 128B` are XOR swizzles in the CUTLASS `Swizzle<B, 4, 3>` sense with
//! `B` = 1, 2, 3: shared memory is a sequence of 128-byte lines (one pass over the 32 banks);
//! the low `B` bits of a chunk's index within its line are XORed with the low `B` bits of the
//! line's index. Rows of 16 to 128 bytes share a line (`row * row_bytes / 128` is the line
//! index, exactly CUTLASS's address bits 7..9); rows of a multiple of 128 bytes are split into
//! lines that all take the row's index, so that the 8 rows an ldmatrix phase reads land in
//! 8 different chunk positions whatever the row width. `pad(N)` adds N bytes to every row;
//! `none` is the plain row-major tile.
//!
//! Column reads of 8 consecutive rows (one ldmatrix phase) are conflict-free when
//! `2^B x (rows per line) >= 8`, i.e. when the XOR width is at least `min(row bytes, 128)`:
//! see [`SmemSwizzle::conflict_free_columns`].

use gemm_dsl::geometry::COPY_VECTOR_BYTES;
use gemm_dsl::Swizzle;
use serde::Serialize;

/// Bytes of one shared-memory line: one pass over the 32 four-byte banks.
pub const LINE_BYTES: u32 = 128;

/// The byte offset of every 16-byte chunk of one operand tile, relative to the tile's start.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct SmemSwizzle {
    /// Bytes of one tile row as in global memory.
    pub row_bytes: u32,
    /// Bytes from one row to the next in shared memory (`row_bytes` + padding).
    pub pitch: u32,
    /// `B`: the XOR acts on this many low bits of the chunk index (0: no XOR).
    pub xor_bits: u32,
    /// `2^B - 1`.
    pub xor_mask: u32,
    /// `log2(rows per 128-byte line)`: the line index of row `r` is `r >> line_shift`.
    pub line_shift: u32,
}

impl SmemSwizzle {
    /// The layout of a tile with rows of `row_bytes` (a multiple of 16). XOR swizzles need
    /// rows that [`gemm_dsl::geometry::xor_swizzle_fits_row`] accepts (validation checks).
    pub fn new(swizzle: Swizzle, row_bytes: u32) -> SmemSwizzle {
        let xor_bits = match swizzle {
            Swizzle::Xor32 => 1,
            Swizzle::Xor64 => 2,
            Swizzle::Xor128 => 3,
            Swizzle::None | Swizzle::Pad(_) => 0,
        };
        let line_shift = if xor_bits > 0 && row_bytes < LINE_BYTES {
            (LINE_BYTES / row_bytes).trailing_zeros()
        } else {
            0
        };
        SmemSwizzle {
            row_bytes,
            pitch: row_bytes + swizzle.pad_bytes(),
            xor_bits,
            xor_mask: (1 << xor_bits) - 1,
            line_shift,
        }
    }

    /// The XOR applied to the chunks of row `row`, already shifted to byte units.
    pub fn row_xor_bytes(&self, row: u32) -> u32 {
        ((row >> self.line_shift) & self.xor_mask) * COPY_VECTOR_BYTES
    }

    /// Byte offset of 16-byte chunk `chunk` of row `row`.
    pub fn chunk_offset(&self, row: u32, chunk: u32) -> u32 {
        (row * self.pitch + chunk * COPY_VECTOR_BYTES) ^ self.row_xor_bytes(row)
    }

    /// Byte offset of byte `byte` of row `row` (the XOR moves whole chunks).
    pub fn byte_offset(&self, row: u32, byte: u32) -> u32 {
        self.chunk_offset(row, byte / COPY_VECTOR_BYTES) + byte % COPY_VECTOR_BYTES
    }

    /// Whether 8 consecutive rows (from a multiple of 8) read at one chunk column hit 8
    /// different 16-byte bank groups: the promise of the layout for ldmatrix phases.
    pub fn conflict_free_columns(&self) -> bool {
        if self.xor_bits > 0 {
            (1 << self.xor_bits) << self.line_shift >= 8
        } else {
            // Rows step through 128 bytes by pitch/16 chunks: all 8 positions iff that is odd.
            (self.pitch / COPY_VECTOR_BYTES) % 2 == 1
        }
    }
}

/// How one access is addressed from a per-thread base register: `(base ^ xor) + offset`.
/// The base is the tile-relative offset of the kernel's first access of that kind, computed
/// once per thread; XOR constants only touch bits 4..6, so each distinct one costs one
/// register, and the offset is an immediate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct XorOffset {
    pub xor: u32,
    pub offset: u32,
}

/// Finds `xor` and `offset` with `target[t] == (base[t] ^ xor) + offset` for every thread `t`,
/// trying XOR constants within one 128-byte line (multiples of 16 below 128).
pub fn decompose(base: &[u32], target: &[u32]) -> Option<XorOffset> {
    assert_eq!(base.len(), target.len());
    (0..LINE_BYTES / COPY_VECTOR_BYTES)
        .map(|x| x * COPY_VECTOR_BYTES)
        .find_map(|xor| {
            let offset = target.first()?.checked_sub(base.first()? ^ xor)?;
            base.iter()
                .zip(target)
                .all(|(&b, &t)| (b ^ xor).checked_add(offset) == Some(t))
                .then_some(XorOffset { xor, offset })
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::conflict_degree;
    use std::collections::BTreeSet;

    const MODES: [Swizzle; 5] = [
        Swizzle::None,
        Swizzle::Pad(16),
        Swizzle::Xor32,
        Swizzle::Xor64,
        Swizzle::Xor128,
    ];

    /// Every chunk of a `rows x row_bytes` tile, swizzled.
    fn offsets(s: &SmemSwizzle, rows: u32) -> Vec<u32> {
        (0..rows)
            .flat_map(|r| (0..s.row_bytes / 16).map(move |c| (r, c)))
            .map(|(r, c)| s.chunk_offset(r, c))
            .collect()
    }

    #[test]
    fn xor_swizzles_are_bijections_within_each_atom() {
        for mode in [Swizzle::Xor32, Swizzle::Xor64, Swizzle::Xor128] {
            for row_bytes in [16, 32, 64, 128, 256, 384, 512] {
                let s = SmemSwizzle::new(mode, row_bytes);
                // An atom is 8 lines: 1024 bytes of whole rows, or 8 rows of one 128-byte
                // column of a wide tile. The swizzle permutes chunks inside each atom.
                let rows_per_atom = (8 << s.line_shift).max(8);
                let rows = 4 * rows_per_atom;
                let all = offsets(&s, rows);
                let distinct: BTreeSet<u32> = all.iter().copied().collect();
                assert_eq!(distinct.len(), all.len(), "{mode} {row_bytes}");
                for r in 0..rows {
                    for c in 0..row_bytes / 16 {
                        let plain = r * row_bytes + c * 16;
                        let swizzled = s.chunk_offset(r, c);
                        // Same 128-byte line, and the same atom of 8 lines.
                        if row_bytes <= LINE_BYTES {
                            assert_eq!(swizzled / 1024, plain / 1024, "{mode} {row_bytes}");
                            assert_eq!(swizzled / LINE_BYTES, plain / LINE_BYTES);
                        } else {
                            assert_eq!(swizzled / row_bytes, r);
                            assert_eq!((swizzled % row_bytes) / 128, c / 8);
                        }
                        assert_eq!(swizzled % 16, 0);
                    }
                }
            }
        }
    }

    #[test]
    fn cutlass_128b_swizzle_on_128_byte_rows() {
        // Swizzle<3,4,3>: chunk c of row r lands at chunk c ^ (r % 8).
        let s = SmemSwizzle::new(Swizzle::Xor128, 128);
        assert_eq!(s.chunk_offset(0, 3), 48);
        assert_eq!(s.chunk_offset(5, 3), 5 * 128 + 16 * (3 ^ 5));
        assert_eq!(s.chunk_offset(13, 0), 13 * 128 + 16 * 5);
        // On 64-byte rows, two rows share a line: the line index is r / 2, and the XOR may
        // move a chunk into the other half of the line.
        let s = SmemSwizzle::new(Swizzle::Xor128, 64);
        assert_eq!(s.line_shift, 1);
        assert_eq!(s.chunk_offset(1, 0), 64);
        assert_eq!(s.chunk_offset(9, 0), (9 * 64) ^ (4 * 16));
        // Padding and none are plain row-major with a pitch.
        let s = SmemSwizzle::new(Swizzle::Pad(16), 64);
        assert_eq!(s.chunk_offset(3, 2), 3 * 80 + 32);
        assert_eq!(s.byte_offset(3, 37), 3 * 80 + 37);
    }

    /// The 32 lane addresses of one ldmatrix.x4 reading rows `0..16` and chunks `chunk0`,
    /// `chunk0 + 1` of a tile: lane l addresses row l % 16, chunk chunk0 + l / 16.
    fn ldmatrix_x4(s: &SmemSwizzle, first_row: u32, chunk0: u32) -> Vec<u32> {
        (0..32)
            .map(|lane| s.chunk_offset(first_row + lane % 16, chunk0 + lane / 16))
            .collect()
    }

    fn distinct_banks(phase: &[u32]) -> usize {
        phase
            .iter()
            .flat_map(|&a| (0..4).map(move |w| crate::plan::bank(a + 4 * w)))
            .collect::<BTreeSet<u32>>()
            .len()
    }

    #[test]
    fn ldmatrix_phases_are_conflict_free_where_the_layout_promises_it() {
        for mode in MODES {
            for row_bytes in [32, 64, 128, 256, 512] {
                let s = SmemSwizzle::new(mode, row_bytes);
                let mut worst = 0;
                for first_row in [0, 16, 48] {
                    for chunk0 in (0..row_bytes / 16).step_by(2) {
                        let lanes = ldmatrix_x4(&s, first_row, chunk0);
                        let degree = conflict_degree(&lanes);
                        worst = worst.max(degree);
                        if s.conflict_free_columns() {
                            assert_eq!(degree, 1, "{mode} rows of {row_bytes} B");
                            for phase in lanes.chunks(8) {
                                assert_eq!(distinct_banks(phase), 32, "{mode} {row_bytes}");
                            }
                        }
                    }
                }
                let expected = match (mode, row_bytes) {
                    (Swizzle::Pad(16), _) | (Swizzle::Xor128, _) => 1,
                    (Swizzle::Xor64, 32 | 64) | (Swizzle::Xor32, 32) => 1,
                    (Swizzle::Xor64, _) | (Swizzle::Xor32, 64) => 2,
                    (Swizzle::Xor32, _) => 4,
                    // Plain rows: 128 / row_bytes rows share a line, the rest collide.
                    (Swizzle::None, r) => 8 / (LINE_BYTES / r.min(LINE_BYTES)),
                    _ => unreachable!(),
                };
                assert_eq!(worst, expected, "{mode} rows of {row_bytes} B");
                assert_eq!(
                    s.conflict_free_columns(),
                    expected == 1,
                    "{mode} {row_bytes}"
                );
            }
        }
        // The cases the design calls out: plain 64- and 128-byte rows conflict.
        assert_eq!(
            conflict_degree(&ldmatrix_x4(&SmemSwizzle::new(Swizzle::None, 64), 0, 0)),
            4
        );
        assert_eq!(
            conflict_degree(&ldmatrix_x4(&SmemSwizzle::new(Swizzle::None, 128), 0, 0)),
            8
        );
    }

    #[test]
    fn row_writes_of_eight_lanes_are_conflict_free_for_every_xor() {
        // cp.async: 8 consecutive lanes write 8 consecutive chunks of the unswizzled tile.
        for mode in [
            Swizzle::None,
            Swizzle::Xor32,
            Swizzle::Xor64,
            Swizzle::Xor128,
        ] {
            for row_bytes in [32, 64, 128, 256] {
                let s = SmemSwizzle::new(mode, row_bytes);
                let per_row = row_bytes / 16;
                let lanes: Vec<u32> = (0..64)
                    .map(|v| s.chunk_offset(v / per_row, v % per_row))
                    .collect();
                assert_eq!(conflict_degree(&lanes), 1, "{mode} {row_bytes}");
            }
        }
    }

    #[test]
    fn decomposition_finds_xor_and_offset() {
        let s = SmemSwizzle::new(Swizzle::Xor128, 64);
        let base: Vec<u32> = (0..32).map(|l| s.chunk_offset(l % 16, l / 16)).collect();
        // The next k step reads chunks 2 and 3: an XOR of 32 bytes.
        let next: Vec<u32> = (0..32)
            .map(|l| s.chunk_offset(l % 16, 2 + l / 16))
            .collect();
        assert_eq!(
            decompose(&base, &next),
            Some(XorOffset { xor: 32, offset: 0 })
        );
        // 16 rows further down: a plain offset.
        let down: Vec<u32> = (0..32)
            .map(|l| s.chunk_offset(16 + l % 16, l / 16))
            .collect();
        assert_eq!(
            decompose(&base, &down),
            Some(XorOffset {
                xor: 0,
                offset: 1024
            })
        );
        assert_eq!(decompose(&[0, 16], &[16, 0]).map(|d| d.xor), Some(16));
        assert_eq!(decompose(&[0, 16], &[0, 48]), None);
    }
}
