//! Staging an input whose lines are no multiple of 16 bytes (a row of 4099 bf16, a K of 259)
//! into scratch lines that are, so the 16-byte kernels take the product: a copy at HBM speed
//! against the narrow-access members' loads of 2 or 4 bytes, which keep one k tile in flight
//! (`results/any-alignment-2026-11-28/`: 0.38-0.66 of cuBLAS from 16 to 1000 rows, where
//! cuBLAS itself runs such lines at 15-280 TFLOP/s).
//!
//! The model prices the copies ([`Repack::seconds`]) beside the product on the staged lines,
//! and a route stages its inputs where that sum beats the narrow pick.

use super::{DeviceModel, Problem, LAUNCH_SECONDS};
use crate::abi::Operand;

/// The line alignment the 16-byte copies (TMA, `cp.async` of 16 bytes) need, in bytes.
pub const LINE_ALIGN_BYTES: u32 = 16;

/// A staged line's length, in bytes, is a multiple of this: each line starts a 128-byte
/// cache line, so no TMA box row of it splits over two (`Estimate::split_lines`, which the
/// model prices at twice the feed).
pub const STAGED_LINE_BYTES: u32 = 128;

/// The share of the HBM's peak bandwidth a copy reaches (its reads and writes together).
pub const COPY_BANDWIDTH_SHARE: f64 = 0.8;

/// Which inputs a route copies into scratch lines of whole 16-byte multiples before the
/// product.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Repack {
    pub a: bool,
    pub b: bool,
}

impl Repack {
    pub const NONE: Repack = Repack { a: false, b: false };

    /// The inputs of `problem` (elements of `input_bytes`) whose lines are no multiple of
    /// [`LINE_ALIGN_BYTES`], where every operand starts aligned: an operand that starts
    /// inside a 16-byte word (a view into a buffer) may be C, which no copy of an input
    /// helps, so such a problem stays with the narrow members.
    pub fn of(problem: &Problem, input_bytes: u32) -> Repack {
        let empty = problem.m == 0 || problem.n == 0 || problem.k == 0 || problem.batch == 0;
        if empty || problem.address_align < LINE_ALIGN_BYTES {
            return Repack::NONE;
        }
        let misaligned =
            |operand| !(u64::from(problem.ld(operand)) * u64::from(input_bytes)).is_multiple_of(16);
        Repack {
            a: misaligned(Operand::A),
            b: misaligned(Operand::B),
        }
    }

    pub fn any(self) -> bool {
        self.a || self.b
    }

    /// The operands copied.
    pub fn operands(self) -> impl Iterator<Item = Operand> {
        [(self.a, Operand::A), (self.b, Operand::B)]
            .into_iter()
            .filter_map(|(staged, operand)| staged.then_some(operand))
    }

    /// `problem` as the kernel after the copies sees it: each staged input's leading
    /// dimension rounded up to whole 128-byte lines ([`staged_ld`]), its batch's matrices
    /// back to back.
    pub fn staged(self, problem: &Problem, input_bytes: u32) -> Problem {
        let ld = |staged: bool, ld: u32| {
            if staged {
                staged_ld(ld, input_bytes)
            } else {
                ld
            }
        };
        Problem {
            lda: ld(self.a, problem.lda),
            ldb: ld(self.b, problem.ldb),
            ..*problem
        }
    }

    /// The copies' predicted time: each staged input read and written once at
    /// [`COPY_BANDWIDTH_SHARE`] of the HBM's bandwidth, one launch each.
    pub fn seconds(self, problem: &Problem, input_bytes: u32, device: &DeviceModel) -> f64 {
        self.operands()
            .map(|operand| {
                let (lines, line) = stored_dims(problem, operand);
                let elements = u64::from(lines) * u64::from(problem.batch);
                let read = elements * u64::from(line) * u64::from(input_bytes);
                let written = elements
                    * u64::from(staged_ld(problem.ld(operand), input_bytes))
                    * u64::from(input_bytes);
                LAUNCH_SECONDS
                    + (read + written) as f64 / (device.memory_bytes_per_s * COPY_BANDWIDTH_SHARE)
            })
            .sum()
    }
}

/// A staged line's leading dimension: `ld` elements of `input_bytes` rounded up to whole
/// [`STAGED_LINE_BYTES`].
pub const fn staged_ld(ld: u32, input_bytes: u32) -> u32 {
    let step = STAGED_LINE_BYTES / input_bytes;
    ld.div_ceil(step) * step
}

/// An input's lines and the elements each holds: rows of a row-major operand, columns of a
/// column-major one.
pub fn stored_dims(problem: &Problem, operand: Operand) -> (u32, u32) {
    let (m, n, k) = (problem.m, problem.n, problem.k);
    let (rows, cols, row_major) = match operand {
        Operand::A => (m, k, problem.layout.a_row_major()),
        Operand::B => (k, n, problem.layout.b_row_major()),
        Operand::C => (m, n, true),
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
    fn only_inputs_whose_lines_miss_16_bytes_are_staged() {
        let rr = Problem::new(777, 4099, 2048, Layout::RowRow);
        assert_eq!(Repack::of(&rr, 2), Repack { a: false, b: true });
        // An odd K misaligns A's rows in rr, and B's columns in rc.
        let odd_k = Problem::new(333, 517, 259, Layout::RowCol);
        assert_eq!(Repack::of(&odd_k, 2), Repack { a: true, b: true });
        // fp8 lines need 16 elements, f32 four.
        assert_eq!(
            Repack::of(&Problem::new(64, 4104, 4096, Layout::RowRow), 1),
            Repack { a: false, b: true }
        );
        assert_eq!(
            Repack::of(&Problem::new(64, 4100, 4096, Layout::RowRow), 4),
            Repack::NONE
        );
        // A view that starts inside a 16-byte word may be C's: no copy of an input helps.
        assert_eq!(Repack::of(&rr.with_address_align(2), 2), Repack::NONE);
    }

    #[test]
    fn staged_lines_round_up_to_16_bytes_and_keep_the_batch() {
        let problem = Problem::new(333, 517, 259, Layout::RowCol).with_batch(3);
        let staged = Repack::of(&problem, 2).staged(&problem, 2);
        assert_eq!((staged.lda, staged.ldb, staged.ldc), (320, 320, 517));
        assert_eq!(
            (staged.m, staged.n, staged.k, staged.batch),
            (333, 517, 259, 3)
        );
        assert_eq!(stored_dims(&problem, Operand::B), (517, 259));
    }

    #[test]
    fn the_copies_cost_their_bytes_at_hbm_speed() {
        let device = DeviceModel::h100_sxm();
        let problem = Problem::new(777, 4099, 2048, Layout::RowRow);
        let b_only = Repack { a: false, b: true }.seconds(&problem, 2, &device);
        let bytes = 2048.0 * (4099.0 + 4160.0) * 2.0;
        let expected = LAUNCH_SECONDS + bytes / (device.memory_bytes_per_s * COPY_BANDWIDTH_SHARE);
        assert!(
            (b_only - expected).abs() < 1e-12,
            "{b_only} against {expected}"
        );
        assert_eq!(Repack::NONE.seconds(&problem, 2, &device), 0.0);
    }
}
