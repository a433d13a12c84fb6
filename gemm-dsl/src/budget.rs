//! Resource arithmetic: the itemized shared-memory ledger, the register estimate and occupancy.
//! All of it is plain integer arithmetic on the spec, so `explain` and the errors show the same
//! numbers the code generator uses.

use crate::spec::Arch;
use std::fmt;

/// One line of the shared-memory ledger.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LedgerLine {
    pub what: String,
    pub bytes: u32,
}

/// Shared memory of one thread block, itemized.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SmemLedger {
    /// Operand tiles of one pipeline stage (padding included in each line).
    pub per_stage: Vec<LedgerLine>,
    pub stages: u32,
    /// Bytes outside the stage ring: barriers, alignment slack.
    pub fixed: Vec<LedgerLine>,
    /// Storage used only after the main loop (epilogue staging), laid over the ring: it costs
    /// only what it needs beyond the ring.
    pub overlay: Option<LedgerLine>,
    pub limit: u32,
    pub arch: Arch,
}

impl SmemLedger {
    /// Saturates, as do the other sums of lines: a ledger built from outlandish numbers
    /// then reads as over budget rather than wrapping under it.
    pub fn bytes_per_stage(&self) -> u32 {
        sum_saturating(self.per_stage.iter().map(|line| line.bytes))
    }

    pub fn fixed_bytes(&self) -> u32 {
        sum_saturating(self.fixed.iter().map(|line| line.bytes))
    }

    pub fn total_for(&self, stages: u32) -> u64 {
        let ring = u64::from(stages) * u64::from(self.bytes_per_stage());
        let overlay = self
            .overlay
            .as_ref()
            .map_or(0, |line| u64::from(line.bytes));
        ring.max(overlay) + u64::from(self.fixed_bytes())
    }

    pub fn total(&self) -> u64 {
        self.total_for(self.stages)
    }

    pub fn fits(&self) -> bool {
        self.total() <= u64::from(self.limit)
    }

    /// The deepest pipeline (at most `max_stages`) that fits the per-block limit.
    pub fn max_stages_that_fit(&self, max_stages: u32) -> Option<u32> {
        (1..=max_stages)
            .rev()
            .find(|&s| self.total_for(s) <= u64::from(self.limit))
    }

    /// The itemized lines as one sentence, for error notes.
    pub fn itemized(&self) -> String {
        let mut parts: Vec<String> = self
            .per_stage
            .iter()
            .map(|line| format!("{} = {} B/stage", line.what, line.bytes))
            .collect();
        parts.extend(
            self.fixed
                .iter()
                .chain(&self.overlay)
                .map(|line| format!("{} {} B", line.what, line.bytes)),
        );
        parts.join(",\n")
    }
}

impl fmt::Display for SmemLedger {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "shared memory per block ({}):", self.arch.name())?;
        for line in &self.per_stage {
            writeln!(f, "  {:<52} {:>8} B/stage", line.what, line.bytes)?;
        }
        writeln!(
            f,
            "  {:<52} {:>8} B",
            format!("{} stages x {} B", self.stages, self.bytes_per_stage()),
            u64::from(self.stages) * u64::from(self.bytes_per_stage())
        )?;
        for line in &self.fixed {
            writeln!(f, "  {:<52} {:>8} B", line.what, line.bytes)?;
        }
        if let Some(line) = &self.overlay {
            writeln!(f, "  {:<52} {:>8} B (over the ring)", line.what, line.bytes)?;
        }
        writeln!(f, "  {:<52} {:>8} B", "total", self.total())?;
        write!(
            f,
            "  {:<52} {:>8} B ({})",
            format!("limit per block on {}", self.arch.name()),
            self.limit,
            if self.fits() { "fits" } else { "OVER" }
        )
    }
}

fn sum_saturating(values: impl Iterator<Item = u32>) -> u32 {
    values.fold(0, u32::saturating_add)
}

/// One line of the register estimate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RegisterLine {
    pub what: String,
    pub registers: u32,
}

/// 32-bit registers per thread, estimated from what the kernel keeps live at once.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RegisterBudget {
    pub lines: Vec<RegisterLine>,
    pub limit: u32,
}

impl RegisterBudget {
    /// The hardware's per-thread register limit.
    pub const LIMIT: u32 = 255;

    /// Registers one thread may use when `threads` run in one block: the 64K-register file
    /// is shared, allocated per warp in units of 256 (so per thread in steps of 8).
    pub fn limit_for(threads: u32) -> u32 {
        let per_thread = 65536 / threads.max(1).div_ceil(32) / 32;
        (per_thread / 8 * 8).min(Self::LIMIT)
    }

    pub fn total(&self) -> u32 {
        sum_saturating(self.lines.iter().map(|line| line.registers))
    }

    pub fn fits(&self) -> bool {
        self.total() <= self.limit
    }
}

impl fmt::Display for RegisterBudget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "registers per thread (estimate):")?;
        for line in &self.lines {
            writeln!(f, "  {:<52} {:>8}", line.what, line.registers)?;
        }
        writeln!(f, "  {:<52} {:>8}", "total", self.total())?;
        write!(
            f,
            "  {:<52} {:>8} ({})",
            "limit per thread (block size)",
            self.limit,
            if self.fits() { "fits" } else { "OVER" }
        )
    }
}

/// Resident blocks per SM and what limits them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Occupancy {
    pub blocks_per_sm: u32,
    pub warps_per_sm: u32,
    pub limited_by: &'static str,
}

impl Occupancy {
    /// Blocks per SM from threads, registers (allocated per warp in units of 256) and shared
    /// memory (each block also reserves 1 KB).
    pub fn compute(arch: Arch, threads: u32, registers: u32, smem_bytes: u64) -> Occupancy {
        let warps = threads.div_ceil(32);
        // In 64 bits: a block's register file need not fit 32 for numbers no spec passes.
        let registers_per_warp = (u64::from(registers.max(1)) * 32).div_ceil(256) * 256;
        let registers_per_block = (registers_per_warp * u64::from(warps)).max(1);
        let limits = [
            (arch.max_blocks_per_sm(), "blocks per SM"),
            (arch.max_threads_per_sm() / threads.max(1), "threads"),
            (
                (u64::from(arch.registers_per_sm()) / registers_per_block) as u32,
                "registers",
            ),
            (
                (u64::from(arch.smem_per_sm()) / (smem_bytes + 1024)) as u32,
                "shared memory",
            ),
        ];
        let (blocks_per_sm, limited_by) = limits
            .into_iter()
            .min_by_key(|&(blocks, _)| blocks)
            .expect("limits is not empty");
        Occupancy {
            blocks_per_sm,
            warps_per_sm: blocks_per_sm * warps,
            limited_by,
        }
    }
}

impl fmt::Display for Occupancy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "occupancy: {} block(s)/SM, {} warps/SM (limited by {})",
            self.blocks_per_sm, self.warps_per_sm, self.limited_by
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ledger(stages: u32) -> SmemLedger {
        SmemLedger {
            per_stage: vec![
                LedgerLine {
                    what: "A".into(),
                    bytes: 16384,
                },
                LedgerLine {
                    what: "B".into(),
                    bytes: 16384,
                },
            ],
            stages,
            fixed: vec![LedgerLine {
                what: "barriers".into(),
                bytes: 64,
            }],
            overlay: None,
            limit: 163 * 1024,
            arch: Arch::Sm80,
        }
    }

    #[test]
    fn ledger_totals_and_suggestion() {
        let l = ledger(6);
        assert_eq!(l.total(), 6 * 32768 + 64);
        assert!(!l.fits());
        assert_eq!(l.max_stages_that_fit(8), Some(5));
        assert!(ledger(5).fits());
    }

    #[test]
    fn an_overlay_costs_only_what_exceeds_the_ring() {
        let mut l = ledger(1);
        l.overlay = Some(LedgerLine {
            what: "epilogue".into(),
            bytes: 40000,
        });
        assert_eq!(l.total(), 40000 + 64);
        l.stages = 3;
        assert_eq!(l.total(), 3 * 32768 + 64);
        assert_eq!(l.max_stages_that_fit(8), Some(5));
    }

    #[test]
    fn register_limit_shrinks_with_block_size() {
        assert_eq!(RegisterBudget::limit_for(256), 255);
        assert_eq!(RegisterBudget::limit_for(512), 128);
        assert_eq!(RegisterBudget::limit_for(1024), 64);
    }

    #[test]
    fn occupancy_is_the_tightest_limit() {
        let o = Occupancy::compute(Arch::Sm80, 256, 128, 32 * 1024);
        assert_eq!(o.blocks_per_sm, 2);
        assert_eq!(o.limited_by, "registers");
        let o = Occupancy::compute(Arch::Sm90, 128, 32, 100 * 1024);
        assert_eq!(o.blocks_per_sm, 2);
        assert_eq!(o.limited_by, "shared memory");
        let o = Occupancy::compute(Arch::Sm90, 1024, u32::MAX, 0);
        assert_eq!((o.blocks_per_sm, o.limited_by), (0, "registers"));
    }

    /// 256 threads are 8 warps; a warp's registers are allocated in units of 256, so a thread
    /// holds a multiple of 8. At 128 registers a block takes 8 x 4096 = 32768 of the 65536:
    /// two blocks. At 148 (rounded up to 152) it takes 8 x 4864 = 38912: one.
    #[test]
    fn registers_are_allocated_per_warp_in_units_of_256() {
        let blocks =
            |registers| Occupancy::compute(Arch::Sm80, 256, registers, 16384).blocks_per_sm;
        assert_eq!(blocks(128), 2);
        assert_eq!(blocks(121), 2, "121 rounds up to 128");
        assert_eq!(
            blocks(129),
            1,
            "129 rounds up to 136: 8 x 4352 = 34816 registers"
        );
        assert_eq!(blocks(148), 1);
        let o = Occupancy::compute(Arch::Sm80, 256, 128, 16384);
        assert_eq!((o.warps_per_sm, o.limited_by), (16, "registers"));
    }

    #[test]
    fn sums_of_huge_lines_saturate_over_the_limit() {
        let mut l = ledger(1);
        l.per_stage[0].bytes = u32::MAX;
        assert_eq!(l.bytes_per_stage(), u32::MAX);
        assert!(!l.fits());
        let registers = RegisterBudget {
            lines: vec![
                RegisterLine {
                    what: "a".into(),
                    registers: u32::MAX,
                },
                RegisterLine {
                    what: "b".into(),
                    registers: 1,
                },
            ],
            limit: 255,
        };
        assert_eq!(registers.total(), u32::MAX);
        assert!(!registers.fits());
    }
}
