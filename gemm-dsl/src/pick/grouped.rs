//! Picking a grouped kernel: what the host knows of a grouped launch (the experts, the rows
//! in all, N, K; the rows each expert gets only the device knows), the dense problems the
//! cost model prices it as, and the pick over them.

use super::{estimate, Candidate, DeviceModel, Problem};
use crate::spec::Layout;

/// The fills of its capacity a masked launch is priced at: its experts' counts are known only
/// on the device, so the price is the mean over a spread of them. Measured (H200,
/// `results/grouped-sk-2026-11-28/`, one to four experts of capacity 256 to 1024 holding
/// 114–580 rows): priced at full capacity alone, the model picked the fastest of four
/// members for none of the six masked problems of `shapes/moe.txt`; over these fills, four.
pub const MASKED_FILLS: [(u32, u32); 4] = [(1, 4), (2, 4), (3, 4), (4, 4)];

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

    /// The problems a grouped walk is priced as, the launch's price being the mean of their
    /// estimates: the strided batch of the busy experts, each with its own B as the walk reads
    /// them, and with an even share of the rows; masked, every expert at each of
    /// [`MASKED_FILLS`] of its capacity.
    pub fn priced_as(&self) -> Vec<Problem> {
        let priced = |rows: u32, batch: u32| {
            Problem::new(rows.max(1), self.n, self.k, self.layout).with_batch(batch)
        };
        if self.masked {
            let capacity = self.rows / self.groups.max(1);
            return MASKED_FILLS
                .iter()
                .map(|&(part, whole)| {
                    let rows = u64::from(capacity) * u64::from(part) / u64::from(whole);
                    priced(rows as u32, self.groups.max(1))
                })
                .collect();
        }
        let busy = self.busy_experts();
        vec![priced(self.rows.div_ceil(busy), busy)]
    }

    /// The index of the candidate with the least mean estimate over
    /// [`GroupedShape::priced_as`], among those that admit every priced problem.
    pub fn pick(&self, candidates: &[Candidate], device: &DeviceModel) -> Option<usize> {
        let problems = self.priced_as();
        let mut best: Option<(usize, f64)> = None;
        for (index, candidate) in candidates.iter().enumerate() {
            if problems.iter().any(|p| candidate.refuses(p).is_some()) {
                continue;
            }
            let seconds: f64 = problems
                .iter()
                .map(|p| estimate(candidate, p, device).seconds)
                .sum();
            if best.is_none_or(|(_, fastest)| seconds < fastest) {
                best = Some((index, seconds));
            }
        }
        best.map(|(index, _)| index)
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
        assert_eq!(prefill.len(), 1);
        assert_eq!((prefill[0].batch, prefill[0].m), (8, 4096));
        // 512 rows at random over 256 experts: about 221 hold rows
        // (256 · (1 − (255/256)^512)), 3 each.
        let decode = shape(256, 512, false);
        assert_eq!(decode.busy_experts(), 221);
        let decode = decode.priced_as();
        assert_eq!((decode[0].batch, decode[0].m), (221, 3));
        // One row for 128 experts: one busy.
        assert_eq!(shape(128, 1, false).busy_experts(), 1);
        // Masked: every expert, at a quarter to all of its capacity.
        let masked = shape(4, 1024, true).priced_as();
        let priced: Vec<(u32, u32)> = masked.iter().map(|p| (p.batch, p.m)).collect();
        assert_eq!(priced, [(4, 64), (4, 128), (4, 192), (4, 256)]);
    }
}
