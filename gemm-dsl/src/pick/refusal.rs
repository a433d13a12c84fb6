//! Why a candidate cannot compute a problem, and what would let one of a set compute it.

use super::{Candidate, Problem, Ranking};
use crate::abi::{Operand, StorageOrder};
use crate::Layout;
use std::fmt;

/// Why a kernel cannot compute a problem ([`Candidate::refusal`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The kernel takes another layout (this one).
    Layout(Layout),
    /// The kernel stores C in the other order (this one): a column-major C is the swapped
    /// product's ([`Problem::swapped`]).
    COrder(StorageOrder),
    /// Sizes the kernel's tiles or its schedule's indices do not admit.
    Size(String),
    /// A leading dimension shorter than the operand's lines.
    ShortLines {
        operand: Operand,
        ld: u32,
        line: u32,
    },
    /// Lines that do not start at the alignment the kernel's copies need.
    Misaligned {
        operand: Operand,
        ld: u32,
        element_bytes: u32,
        align_bytes: u32,
    },
    /// Operands that start at addresses less aligned than the kernel's copies need.
    MisalignedAddress {
        address_align: u32,
        align_bytes: u32,
    },
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::Layout(layout) => write!(f, "layout {}", layout.name()),
            Refusal::COrder(order) => write!(f, "C {}-major", order.line()),
            Refusal::Size(reason) => f.write_str(reason),
            Refusal::ShortLines { operand, ld, line } => {
                write!(f, "{operand}'s leading dimension {ld} < {line}")
            }
            Refusal::Misaligned {
                operand,
                ld,
                element_bytes,
                align_bytes,
            } => write!(
                f,
                "{operand}'s lines ({ld} x {element_bytes} B) are not {align_bytes}-byte aligned"
            ),
            Refusal::MisalignedAddress {
                address_align,
                align_bytes,
            } => write!(
                f,
                "operands start {address_align}-byte aligned, its copies need {align_bytes}"
            ),
        }
    }
}

/// What would let a candidate compute a problem that none computes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Remedy {
    /// No candidate takes the problem's layout; these are the layouts they take.
    Layouts(Vec<Layout>),
    /// The problem with its leading dimensions padded (the least of the candidates' paddings),
    /// which a candidate computes.
    PaddedLines(Problem),
}

impl Candidate {
    /// Why this kernel cannot run `problem`, if it cannot: another layout, sizes its tiles do
    /// not admit, or strides its copies cannot align to.
    pub fn refusal(&self, problem: &Problem) -> Option<Refusal> {
        if self.layout != problem.layout {
            return Some(Refusal::Layout(self.layout));
        }
        let shape = &self.launch;
        let c_order = StorageOrder::of_c_layout(problem.c_layout);
        if shape.c_order != c_order {
            return Some(Refusal::COrder(shape.c_order));
        }
        if let Err(reason) =
            shape.check_batched_dims(problem.m, problem.n, problem.k, problem.batch)
        {
            return Some(Refusal::Size(reason));
        }
        for operand in [Operand::A, Operand::B, Operand::C] {
            let (element_bytes, align_bytes) = self.line_alignment(operand);
            let (_, line) = shape.stored_dims(operand, problem.m, problem.n, problem.k);
            let ld = problem.ld(operand);
            if ld < line {
                return Some(Refusal::ShortLines { operand, ld, line });
            }
            if !(u64::from(ld) * u64::from(element_bytes)).is_multiple_of(u64::from(align_bytes)) {
                return Some(Refusal::Misaligned {
                    operand,
                    ld,
                    element_bytes,
                    align_bytes,
                });
            }
            // An operand starts at one of its elements, so at least that aligned.
            if !problem
                .address_align
                .max(element_bytes)
                .is_multiple_of(align_bytes)
            {
                return Some(Refusal::MisalignedAddress {
                    address_align: problem.address_align,
                    align_bytes,
                });
            }
        }
        None
    }

    /// Whether the kernel copies A and B in vectors narrower than 16 bytes, or stores a
    /// row-major C narrower than a pair of elements (`c_store`): it takes lines and addresses
    /// that others refuse, at a cost, so a picker turns to it only where no other kernel
    /// computes the problem ([`crate::pick::pick`]). A column-major C is stored element by
    /// element by design (its columns' neighbours lie in other threads), not as a narrowed
    /// kernel: only such kernels take it.
    pub fn narrow_access(&self) -> bool {
        let shape = &self.launch;
        let narrow_c = shape.c_order == StorageOrder::RowMajor
            && shape.output_align_bytes < 2 * shape.output_element_bytes;
        shape.operand_align_bytes < 16 || narrow_c
    }

    /// Whether the kernel copies A and B in vectors narrower than 16 bytes (the part of
    /// [`Candidate::narrow_access`] that staging the inputs in 128-byte lines avoids).
    pub fn narrow_copies(&self) -> bool {
        self.launch.operand_align_bytes < 16
    }

    /// [`Candidate::refusal`] as text.
    pub fn refuses(&self, problem: &Problem) -> Option<String> {
        self.refusal(problem).map(|refusal| refusal.to_string())
    }

    /// An operand's element size and the alignment its lines must start at, in bytes.
    fn line_alignment(&self, operand: Operand) -> (u32, u32) {
        let shape = &self.launch;
        let (element_bytes, align_bytes) = match operand {
            Operand::A | Operand::B => (shape.input_element_bytes, shape.operand_align_bytes),
            Operand::C => (shape.output_element_bytes, shape.output_align_bytes),
        };
        (element_bytes, align_bytes.max(1))
    }

    /// `problem` with each leading dimension raised to at least its line and rounded up to
    /// the alignment this kernel's copies need.
    fn padded(&self, problem: &Problem) -> Problem {
        let ld = |operand: Operand| {
            let (element_bytes, align_bytes) = self.line_alignment(operand);
            let (_, line) = self
                .launch
                .stored_dims(operand, problem.m, problem.n, problem.k);
            // Lines start aligned where ld * element_bytes is a multiple of align_bytes.
            let step = align_bytes / gcd(align_bytes, element_bytes.max(1));
            problem.ld(operand).max(line).div_ceil(step) * step
        };
        problem.with_leading_dims(ld(Operand::A), ld(Operand::B), ld(Operand::C))
    }
}

fn gcd(a: u32, b: u32) -> u32 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

impl Ranking {
    /// What would let one of `candidates` (those ranked) compute the problem, when none does:
    /// the layouts they take, when none takes the problem's; else the least padding of the
    /// leading dimensions under which one computes it, when its lines are what refuse it.
    pub fn remedy(&self, candidates: &[Candidate]) -> Option<Remedy> {
        if !self.ranked.is_empty() {
            return None;
        }
        let problem = &self.problem;
        let mut layouts: Vec<Layout> = Vec::new();
        for candidate in candidates {
            if !layouts.contains(&candidate.layout) {
                layouts.push(candidate.layout);
            }
        }
        if !layouts.is_empty() && !layouts.contains(&problem.layout) {
            return Some(Remedy::Layouts(layouts));
        }
        let extra_elements = |padded: &Problem| {
            [Operand::A, Operand::B, Operand::C]
                .map(|operand| u64::from(padded.ld(operand) - problem.ld(operand)))
                .iter()
                .sum::<u64>()
        };
        candidates
            .iter()
            .filter(|candidate| candidate.layout == problem.layout)
            .map(|candidate| (candidate, candidate.padded(problem)))
            .filter(|(candidate, padded)| padded != problem && candidate.refusal(padded).is_none())
            .min_by_key(|(_, padded)| extra_elements(padded))
            .map(|(_, padded)| Remedy::PaddedLines(padded))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi::{CopyPath, GridSchedule, LaunchShape, StorageOrder};
    use crate::pick::{rank, DeviceModel};

    /// A 64x64x16 f32 kernel in `layout` whose copies and stores need 16-byte lines.
    fn simt(layout: Layout) -> Candidate {
        let valid = crate::check_str(&format!(
            "name: k, arch: sm_80, dtype: f32, layout: {}, tile: 64x64x16, warps: 2x1, mma: fma",
            layout.name()
        ))
        .unwrap();
        let order = |row_major| {
            if row_major {
                StorageOrder::RowMajor
            } else {
                StorageOrder::ColMajor
            }
        };
        let launch = LaunchShape {
            threads_per_block: 64,
            tile_m: 64,
            tile_n: 64,
            tile_k: 16,
            dynamic_smem_bytes: 16384,
            operand_align_bytes: 16,
            output_align_bytes: 16,
            copy_path: CopyPath::CpAsync,
            input_element_bytes: 4,
            output_element_bytes: 4,
            compute_capability: 80,
            arch_specific: false,
            schedule: GridSchedule::Tiles,
            cluster: (1, 1),
            partial_tiles: true,
            a_order: order(layout.a_row_major()),
            b_order: order(layout.b_row_major()),
            c_order: StorageOrder::RowMajor,
            workspace_bytes_per_block: 0,
        };
        Candidate::of(&valid, launch)
    }

    #[test]
    fn misaligned_lines_are_refused_and_padded() {
        let kernels = [simt(Layout::RowRow)];
        let kernel = &kernels[0];
        let problem = Problem::new(777, 1001, 520, Layout::RowRow);
        let refusal = kernel.refusal(&problem).unwrap();
        assert_eq!(
            refusal,
            Refusal::Misaligned {
                operand: Operand::B,
                ld: 1001,
                element_bytes: 4,
                align_bytes: 16
            }
        );
        assert_eq!(
            refusal.to_string(),
            "B's lines (1001 x 4 B) are not 16-byte aligned"
        );
        let ranking = rank(&kernels, &problem, &DeviceModel::a100_sxm());
        // A's 520 columns are 16-byte lines already; B's and C's 1001 grow to 1004.
        let padded = problem.with_leading_dims(520, 1004, 1004);
        assert_eq!(ranking.remedy(&kernels), Some(Remedy::PaddedLines(padded)));
        assert_eq!(kernel.refusal(&padded), None);
        assert_eq!(
            rank(&kernels, &padded, &DeviceModel::a100_sxm()).remedy(&kernels),
            None,
            "a problem a candidate computes needs no remedy"
        );
    }

    #[test]
    fn short_lines_are_refused_and_lengthened() {
        let kernels = [simt(Layout::RowCol)];
        let kernel = &kernels[0];
        // B column-major: K = 520 elements a line, so ldb 500 is short.
        let problem = Problem::new(64, 64, 520, Layout::RowCol).with_leading_dims(520, 500, 64);
        assert_eq!(
            kernel.refuses(&problem).as_deref(),
            Some("B's leading dimension 500 < 520")
        );
        let ranking = rank(&kernels, &problem, &DeviceModel::a100_sxm());
        assert_eq!(
            ranking.remedy(&kernels),
            Some(Remedy::PaddedLines(problem.with_leading_dims(520, 520, 64)))
        );
    }

    #[test]
    fn the_remedy_pads_for_a_candidate_that_then_computes_the_problem() {
        // Whole tiles only: its padding (16-byte lines) would be the least, but 777 rows are
        // no multiple of its 64, so padding does not let it compute the problem.
        let mut whole_tiles = simt(Layout::RowRow);
        whole_tiles.launch.partial_tiles = false;
        // 32-byte lines: more padding, and then it computes the problem.
        let mut wide_lines = simt(Layout::RowRow);
        wide_lines.launch.operand_align_bytes = 32;
        wide_lines.launch.output_align_bytes = 32;
        let kernels = [whole_tiles, wide_lines];
        let problem = Problem::new(777, 1001, 520, Layout::RowRow);
        let ranking = rank(&kernels, &problem, &DeviceModel::a100_sxm());
        let padded = problem.with_leading_dims(520, 1008, 1008);
        assert_eq!(ranking.remedy(&kernels), Some(Remedy::PaddedLines(padded)));
        assert!(kernels[0]
            .refusal(&problem.with_leading_dims(520, 1004, 1004))
            .is_some());
        assert_eq!(kernels[1].refusal(&padded), None);
    }

    #[test]
    fn a_layout_no_candidate_takes_names_those_they_take() {
        let candidates = [simt(Layout::RowCol), simt(Layout::ColCol)];
        let problem = Problem::new(4096, 4096, 4096, Layout::RowRow);
        let ranking = rank(&candidates, &problem, &DeviceModel::a100_sxm());
        assert_eq!(ranking.refused[0].1, Refusal::Layout(Layout::RowCol));
        assert_eq!(
            ranking.remedy(&candidates),
            Some(Remedy::Layouts(vec![Layout::RowCol, Layout::ColCol]))
        );
    }
}
