//! Picking a grouped kernel: what the host knows of a grouped launch (the experts, the rows
//! in all, N, K; the rows each expert gets only the device knows) and the dense problem the
//! cost model prices it as.

use super::Problem;
use crate::spec::Layout;

/// What the host knows of a grouped launch, for picking its kernel: the experts, the rows of
/// A and D in all (masked: experts x capacity), N, K, the layout of A and B, and whether the
/// experts own equal slots (masked). The rows each expert gets only the device knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GroupedShape {
    pub groups: u32,
    pub rows: u32,
    pub n: u32,
    pub k: u32,
    pub layout: Layout,
    pub masked: bool,
}

impl GroupedShape {
    /// The experts expected to hold rows: a masked layout's every expert; else, with the rows
    /// routed at random, `G · (1 − (1 − 1/G)^rows)` of them (at least one).
    pub fn busy_experts(&self) -> u32 {
        if self.masked || self.groups <= 1 {
            return self.groups.max(1);
        }
        let groups = f64::from(self.groups);
        let idle = (1.0 - 1.0 / groups).powf(f64::from(self.rows));
        (groups * (1.0 - idle)).round().clamp(1.0, groups) as u32
    }

    /// The problem a grouped walk is priced as: the strided batch of the busy experts, each
    /// with an even share of the rows (a masked expert its capacity, what it may hold), each
    /// with its own B, as the walk reads them.
    pub fn priced_as(&self) -> Problem {
        let busy = self.busy_experts();
        let rows = if self.masked {
            self.rows / self.groups.max(1)
        } else {
            self.rows.div_ceil(busy)
        };
        Problem::new(rows.max(1), self.n, self.k, self.layout).with_batch(busy)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_grouped_launch_is_priced_as_the_batch_of_its_busy_experts() {
        let shape = |groups, rows, masked| GroupedShape {
            groups,
            rows,
            n: 4096,
            k: 7168,
            layout: Layout::RowCol,
            masked,
        };
        // Thousands of rows over 8 experts: every expert is busy, with an eighth of them.
        let prefill = shape(8, 32768, false).priced_as();
        assert_eq!((prefill.batch, prefill.m), (8, 4096));
        // 512 rows at random over 256 experts: about 221 hold rows
        // (256 · (1 − (255/256)^512)), 3 each.
        let decode = shape(256, 512, false);
        assert_eq!(decode.busy_experts(), 221);
        assert_eq!((decode.priced_as().batch, decode.priced_as().m), (221, 3));
        // One row for 128 experts: one busy.
        assert_eq!(shape(128, 1, false).busy_experts(), 1);
        // Masked: every expert, at its capacity.
        let masked = shape(4, 1024, true).priced_as();
        assert_eq!((masked.batch, masked.m), (4, 256));
    }
}
