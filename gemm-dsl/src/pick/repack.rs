//! Staging operands whose lines are no multiple of 16 bytes (a row of 4099 bf16, a K of 259)
//! in scratch lines that are, so the 16-byte kernels take the product: a copy at HBM speed
//! against the narrow-access members' loads of 2 or 4 bytes, which keep one k tile in flight
//! (`results/any-alignment-2026-11-28/`: 0.38-0.66 of cuBLAS from 16 to 1000 rows, where
//! cuBLAS itself runs such lines at 15-280 TFLOP/s), and their mma.sync stores of 2 bytes.
//!
//! An input is copied into scratch before the product; C is computed into scratch and
//! copied into the caller's lines after it. The model prices the copies
//! ([`Repack::seconds`]) beside the product on the staged lines, and a route stages where
//! that sum beats the narrow pick.

use super::{DeviceModel, Problem, LAUNCH_SECONDS};
use crate::abi::Operand;
use crate::CLayout;

/// The line alignment the 16-byte copies and stores (TMA, `cp.async` of 16 bytes) need, in
/// bytes.
pub const LINE_ALIGN_BYTES: u32 = 16;

/// A staged line's length, in bytes, is a multiple of this: each line starts a 128-byte
/// cache line, so no TMA box row of it splits over two (`Estimate::split_lines`, which the
/// model prices at twice the feed).
pub const STAGED_LINE_BYTES: u32 = 128;

/// The share of the HBM's peak bandwidth a copy reaches (its reads and writes together).
pub const COPY_BANDWIDTH_SHARE: f64 = 0.8;

/// Which operands a route stages in scratch lines of whole 128-byte multiples: inputs copied
/// in before the product, C copied out after it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Repack {
    pub a: bool,
    pub b: bool,
    pub c: bool,
}

impl Repack {
    pub const NONE: Repack = Repack {
        a: false,
        b: false,
        c: false,
    };

    /// The operands of `problem` (inputs of `input_bytes`, C of `output_bytes`) whose lines
    /// are no multiple of [`LINE_ALIGN_BYTES`], where every operand starts aligned (an
    /// operand that starts inside a 16-byte word is a view no copy of whole lines fixes) and
    /// C is row-major (a column-major C is the swapped product's, stored element by element
    /// by design).
    pub fn of(problem: &Problem, input_bytes: u32, output_bytes: u32) -> Repack {
        let empty = problem.m == 0 || problem.n == 0 || problem.k == 0 || problem.batch == 0;
        if empty || problem.address_align < LINE_ALIGN_BYTES {
            return Repack::NONE;
        }
        let misaligned = |operand, bytes: u32| {
            !(u64::from(problem.ld(operand)) * u64::from(bytes))
                .is_multiple_of(u64::from(LINE_ALIGN_BYTES))
        };
        Repack {
            a: misaligned(Operand::A, input_bytes),
            b: misaligned(Operand::B, input_bytes),
            c: problem.c_layout == CLayout::Row && misaligned(Operand::C, output_bytes),
        }
    }

    /// `self` without C.
    pub fn inputs(self) -> Repack {
        Repack { c: false, ..self }
    }

    pub fn any(self) -> bool {
        self.a || self.b || self.c
    }

    /// The operands staged.
    pub fn operands(self) -> impl Iterator<Item = Operand> {
        [
            (self.a, Operand::A),
            (self.b, Operand::B),
            (self.c, Operand::C),
        ]
        .into_iter()
        .filter_map(|(staged, operand)| staged.then_some(operand))
    }

    /// `problem` as the kernel between the copies sees it: each staged operand's leading
    /// dimension rounded up to whole 128-byte lines ([`staged_ld`]), its batch's matrices
    /// back to back.
    pub fn staged(self, problem: &Problem, input_bytes: u32, output_bytes: u32) -> Problem {
        let ld = |staged: bool, ld: u32, bytes: u32| {
            if staged {
                staged_ld(ld, bytes)
            } else {
                ld
            }
        };
        Problem {
            lda: ld(self.a, problem.lda, input_bytes),
            ldb: ld(self.b, problem.ldb, input_bytes),
            ldc: ld(self.c, problem.ldc, output_bytes),
            ..*problem
        }
    }

    /// The copies' predicted time: each staged operand read and written once at
    /// [`COPY_BANDWIDTH_SHARE`] of the HBM's bandwidth, one launch each.
    pub fn seconds(
        self,
        problem: &Problem,
        input_bytes: u32,
        output_bytes: u32,
        device: &DeviceModel,
    ) -> f64 {
        self.operands()
            .map(|operand| {
                let bytes = u64::from(match operand {
                    Operand::C => output_bytes,
                    _ => input_bytes,
                });
                let (lines, line) = stored_dims(problem, operand);
                let lines = u64::from(lines) * u64::from(problem.batch);
                let caller = lines * u64::from(line) * bytes;
                let scratch =
                    lines * u64::from(staged_ld(problem.ld(operand), bytes as u32)) * bytes;
                LAUNCH_SECONDS
                    + (caller + scratch) as f64 / (device.memory_bytes_per_s * COPY_BANDWIDTH_SHARE)
            })
            .sum()
    }
}

/// A staged line's leading dimension: `ld` elements of `element_bytes` rounded up to whole
/// [`STAGED_LINE_BYTES`].
pub const fn staged_ld(ld: u32, element_bytes: u32) -> u32 {
    let step = STAGED_LINE_BYTES / element_bytes;
    ld.div_ceil(step) * step
}

/// An operand's lines and the elements each holds: rows of a row-major operand, columns of a
/// column-major one (C row-major: [`Repack::of`] stages no other).
pub fn stored_dims(problem: &Problem, operand: Operand) -> (u32, u32) {
    let (m, n, k) = (problem.m, problem.n, problem.k);
    let (rows, cols, row_major) = match operand {
        Operand::A => (m, k, problem.layout.a_row_major()),
        Operand::B => (k, n, problem.layout.b_row_major()),
        Operand::C => (m, n, problem.c_layout == CLayout::Row),
    };
    if row_major {
        (rows, cols)
    } else {
        (cols, rows)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Layout;

    #[test]
    fn only_operands_whose_lines_miss_16_bytes_are_staged() {
        let rr = Problem::new(777, 4099, 2048, Layout::RowRow);
        let b_and_c = Repack {
            a: false,
            b: true,
            c: true,
        };
        assert_eq!(Repack::of(&rr, 2, 2), b_and_c);
        // An f32 C of 4099 is misaligned too; the inputs alone are what `inputs` keeps.
        assert_eq!(
            Repack::of(&rr, 2, 4).inputs(),
            Repack {
                c: false,
                ..b_and_c
            }
        );
        // An odd K misaligns A's rows in rr, and B's columns in rc.
        let odd_k = Problem::new(333, 512, 259, Layout::RowCol);
        assert_eq!(
            Repack::of(&odd_k, 2, 2),
            Repack {
                a: true,
                b: true,
                c: false
            }
        );
        // fp8 lines need 16 elements, f32 four.
        assert_eq!(
            Repack::of(&Problem::new(64, 4104, 4096, Layout::RowRow), 1, 2),
            Repack {
                a: false,
                b: true,
                c: false
            }
        );
        assert_eq!(
            Repack::of(&Problem::new(64, 4100, 4096, Layout::RowRow), 4, 4),
            Repack::NONE
        );
        // A view that starts inside a 16-byte word, or the swapped product's C.
        assert_eq!(Repack::of(&rr.with_address_align(2), 2, 2), Repack::NONE);
        assert!(!Repack::of(&rr.swapped(), 2, 2).c);
    }

    #[test]
    fn staged_lines_round_up_to_128_bytes_and_keep_the_batch() {
        let problem = Problem::new(333, 517, 259, Layout::RowCol).with_batch(3);
        let staged = Repack::of(&problem, 2, 4).staged(&problem, 2, 4);
        assert_eq!((staged.lda, staged.ldb, staged.ldc), (320, 320, 544));
        assert_eq!(
            (staged.m, staged.n, staged.k, staged.batch),
            (333, 517, 259, 3)
        );
        assert_eq!(stored_dims(&problem, Operand::B), (517, 259));
        assert_eq!(stored_dims(&problem, Operand::C), (333, 517));
    }

    #[test]
    fn the_copies_cost_their_bytes_at_hbm_speed() {
        let device = DeviceModel::h100_sxm();
        let problem = Problem::new(777, 4099, 2048, Layout::RowRow);
        let b_only = Repack {
            b: true,
            ..Repack::NONE
        };
        let bytes = 2048.0 * (4099.0 + 4160.0) * 2.0;
        let expected = LAUNCH_SECONDS + bytes / (device.memory_bytes_per_s * COPY_BANDWIDTH_SHARE);
        let seconds = b_only.seconds(&problem, 2, 2, &device);
        assert!(
            (seconds - expected).abs() < 1e-12,
            "{seconds} against {expected}"
        );
        let c_only = Repack {
            c: true,
            ..Repack::NONE
        };
        let bytes = 777.0 * (4099.0 + 4128.0) * 4.0;
        let expected = LAUNCH_SECONDS + bytes / (device.memory_bytes_per_s * COPY_BANDWIDTH_SHARE);
        let seconds = c_only.seconds(&problem, 2, 4, &device);
        assert!(
            (seconds - expected).abs() < 1e-12,
            "{seconds} against {expected}"
        );
        assert_eq!(Repack::NONE.seconds(&problem, 2, 2, &device), 0.0);
    }
}
