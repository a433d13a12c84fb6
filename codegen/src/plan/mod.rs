//! The plan layer: every number the PTX needs, computed from a validated spec.
//! Templates only lay these out as text.

pub mod batch;
pub mod edges;
pub mod math_only;
pub mod mma_sync;
pub mod schedule;
pub mod simt;
pub mod swizzle;
pub mod wgmma;

use gemm_dsl::abi::{KernelParam, Opcode, SassCheck};
use gemm_dsl::geometry::COPY_VECTOR_BYTES;
use gemm_dsl::{Family, GemmSpec, ValidSpec};
use serde::Serialize;

/// PTX ISA version written into every kernel: 8.0 (CUDA 12.0) covers cp.async, mbarriers,
/// TMA and wgmma, and every driver of CUDA 12.0 or newer can JIT it.
pub const PTX_VERSION: &str = "8.0";

/// A kernel, ready to be written out.
#[derive(Clone, Debug, Serialize)]
pub struct KernelPlan {
    pub name: String,
    pub target: &'static str,
    pub ptx_version: &'static str,
    /// The validated spec, every key explicit; printed in the PTX header.
    pub spec_text: String,
    /// The entry's `.param` declarations, in order, written from the ABI's parameter list
    /// ([`LaunchContract::params`]), so the PTX and the launcher cannot disagree.
    pub entry_params: Vec<String>,
    pub family: FamilyPlan,
}

/// One plan is built per emitted kernel, so the variants' sizes don't matter.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum FamilyPlan {
    Simt(simt::SimtPlan),
    MmaSync(mma_sync::MmaSyncPlan),
    Wgmma(wgmma::WgmmaPlan),
}

/// What the launcher must know of a family's kernel beyond the spec itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LaunchContract {
    /// The k depth one main-loop trip consumes (a K multiple for whole-tile families).
    pub tile_k: u32,
    /// Byte alignment of A's and B's addresses and line strides: the copy vector's.
    pub operand_align_bytes: u32,
    /// Byte alignment of C's address and row stride: its widest store.
    pub output_align_bytes: u32,
    pub params: Vec<KernelParam>,
    /// The kernel computes partial edge tiles (any M, N, K of at least 1).
    pub partial_tiles: bool,
    /// Output tiles one cluster covers, down M and along N.
    pub cluster: (u32, u32),
    /// Global workspace per block ([`crate::LaunchShape::workspace_bytes_per_block`]).
    pub workspace_bytes_per_block: u32,
}

impl FamilyPlan {
    pub fn launch_contract(&self) -> LaunchContract {
        match self {
            FamilyPlan::Simt(p) => p.launch_contract(),
            FamilyPlan::MmaSync(p) => p.launch_contract(),
            FamilyPlan::Wgmma(p) => p.launch_contract(),
        }
    }

    /// The SASS the kernel promises: its copy and math paths, and never local memory.
    pub fn sass_promises(&self, spec: &GemmSpec) -> Vec<SassCheck> {
        let mut checks = match self {
            FamilyPlan::Simt(_) => simt::sass_promises(spec),
            FamilyPlan::MmaSync(_) => mma_sync::sass_promises(spec),
            FamilyPlan::Wgmma(p) => wgmma::sass_promises(p),
        };
        checks.extend([
            SassCheck::Absent(Opcode::Ldl),
            SassCheck::Absent(Opcode::Stl),
        ]);
        checks
    }

    /// The math instructions the kernel's main loop runs, as SASS (its math-only probe
    /// promises these too).
    pub fn math_promises(&self, spec: &GemmSpec) -> Vec<SassCheck> {
        match self {
            FamilyPlan::Simt(_) => simt::math_promises(),
            FamilyPlan::MmaSync(_) => mma_sync::math_promises(spec),
            FamilyPlan::Wgmma(p) => wgmma::math_promises(p),
        }
    }
}

/// How tiles reach shared memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PlanCopy {
    /// Global loads into registers, then shared stores.
    Sync,
    /// `cp.async` groups.
    CpAsync,
}

impl PlanCopy {
    /// What the copy path shows in SASS: every operand load through LDGSTS for cp.async (a
    /// plain LDG would mean the compiler fell back to the synchronous path), LDG + STS and no
    /// LDGSTS for `copy: sync`.
    pub fn sass_promises(self) -> [SassCheck; 3] {
        use SassCheck::{Absent, Present};
        match self {
            PlanCopy::CpAsync => [
                Present(Opcode::Ldgsts),
                Present(Opcode::Ldgdepbar),
                Absent(Opcode::Ldg),
            ],
            PlanCopy::Sync => [
                Present(Opcode::Ldg),
                Present(Opcode::Sts),
                Absent(Opcode::Ldgsts),
            ],
        }
    }

    /// The copy path and its `cp.async` cache qualifier (empty for `sync`) of a family that
    /// copies through `ld.global`/`st.shared` or `cp.async`.
    pub fn of(copy: gemm_dsl::Copy) -> (PlanCopy, &'static str) {
        match copy {
            gemm_dsl::Copy::Sync { .. } => (PlanCopy::Sync, ""),
            gemm_dsl::Copy::CpAsync { hint, .. } => (PlanCopy::CpAsync, hint.name()),
            gemm_dsl::Copy::Tma { .. } => {
                unreachable!("validation rejects copy: tma for the cp.async families")
            }
        }
    }
}

/// The ring of pipeline stages in dynamic shared memory.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SmemLayout {
    pub stages: u32,
    pub stage_bytes: u32,
    pub ring_bytes: u32,
    /// More than one stage: loads of later tiles overlap the math on earlier ones.
    pub pipelined: bool,
    /// Stage offsets the prologue fills before the main loop (tiles 0 .. stages-1).
    pub prologue_offsets: Vec<u32>,
    /// Tiles in flight ahead of the one being computed (`stages - 1`).
    pub lookahead: u32,
    /// The stage the first main-loop iteration fills.
    pub first_write_offset: u32,
    /// `cp.async.wait_group` argument: groups that may stay in flight while a stage is read.
    pub groups_in_flight: u32,
}

impl SmemLayout {
    pub fn new(stage_bytes: u32, stages: u32) -> SmemLayout {
        let prologue_stages = stages.saturating_sub(1);
        SmemLayout {
            stages,
            stage_bytes,
            ring_bytes: stage_bytes * stages,
            pipelined: stages > 1,
            lookahead: prologue_stages,
            prologue_offsets: (0..prologue_stages).map(|s| s * stage_bytes).collect(),
            first_write_offset: prologue_stages * stage_bytes,
            groups_in_flight: stages.saturating_sub(2),
        }
    }
}

pub fn plan(valid: &ValidSpec) -> KernelPlan {
    let family = match &valid.family {
        Family::Simt(geometry) => FamilyPlan::Simt(simt::plan(valid, geometry)),
        Family::MmaSync(geometry) => FamilyPlan::MmaSync(mma_sync::plan(valid, geometry)),
        Family::Wgmma(geometry) => FamilyPlan::Wgmma(wgmma::plan(valid, geometry)),
    };
    let name = valid.spec.name.clone();
    let entry_params = family
        .launch_contract()
        .params
        .iter()
        .map(|param| param.ptx_declaration(&name))
        .collect();
    KernelPlan {
        name,
        target: valid.spec.arch.name(),
        ptx_version: PTX_VERSION,
        spec_text: valid.spec.to_spec_text(),
        entry_params,
        family,
    }
}

/// Shared-memory banks and the width of one bank.
pub const BANKS: u32 = 32;
pub const BANK_BYTES: u32 = 4;

/// The bank of a shared-memory byte address: `(addr >> 2) & 31`.
pub const fn bank(address: u32) -> u32 {
    (address / BANK_BYTES) % BANKS
}

/// The conflict degree of one warp-wide shared-memory access: 1 means every bank is touched by
/// at most one distinct word in each phase (broadcasts are free).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BankReport {
    pub access: &'static str,
    pub degree: u32,
}

/// Conflict degree of 16-byte accesses at the given per-lane byte addresses: the worst phase
/// of 8 lanes (one 128-byte wavefront; for `ldmatrix`, one 8x8 matrix), each bank counting its
/// distinct words (bank = (addr >> 2) & 31).
pub fn conflict_degree(addresses: &[u32]) -> u32 {
    conflict_degree_for(addresses, COPY_VECTOR_BYTES)
}

/// Conflict degree of `access_bytes`-wide accesses (4, 8 or 16): the hardware serves
/// `128 / access_bytes` lanes per phase; the worst phase counts, each bank counting its
/// distinct words.
pub fn conflict_degree_for(addresses: &[u32], access_bytes: u32) -> u32 {
    let lanes_per_phase = (128 / access_bytes.max(BANK_BYTES)) as usize;
    let words_per_access = (access_bytes / BANK_BYTES).max(1);
    addresses
        .chunks(lanes_per_phase)
        .map(|phase| {
            let mut words_per_bank = vec![Vec::<u32>::new(); BANKS as usize];
            for &address in phase {
                for word in 0..words_per_access {
                    let word_address = address / BANK_BYTES + word;
                    let bank = &mut words_per_bank[(word_address % BANKS) as usize];
                    if !bank.contains(&word_address) {
                        bank.push(word_address);
                    }
                }
            }
            words_per_bank
                .iter()
                .map(|words| words.len() as u32)
                .max()
                .unwrap_or(0)
        })
        .max()
        .unwrap_or(0)
}

/// How A and B lie, for the kernel's header comment (C is always row-major).
pub(crate) fn layout_note(layout: gemm_dsl::Layout) -> &'static str {
    match layout {
        gemm_dsl::Layout::RowRow => "all row-major",
        gemm_dsl::Layout::RowCol => "A row-major, B column-major, C row-major",
        gemm_dsl::Layout::ColRow => "A column-major, B row-major, C row-major",
        gemm_dsl::Layout::ColCol => "A and B column-major, C row-major",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conflict_degree_of_narrow_accesses() {
        // 32 lanes reading consecutive words: one phase, conflict-free.
        let words: Vec<u32> = (0..32).map(|i| i * 4).collect();
        assert_eq!(conflict_degree_for(&words, 4), 1);
        // Four rows of 512 bytes, 8 words each: four words per bank.
        let rows: Vec<u32> = (0..32).map(|i| (i % 4) * 512 + (i / 4) * 4).collect();
        assert_eq!(conflict_degree_for(&rows, 4), 4);
        assert_eq!(bank(132), 1);
    }

    #[test]
    fn ring_of_three_stages() {
        let ring = SmemLayout::new(1000, 3);
        assert_eq!(ring.prologue_offsets, [0, 1000]);
        assert_eq!(ring.first_write_offset, 2000);
        assert_eq!(ring.groups_in_flight, 1);
        assert_eq!(ring.ring_bytes, 3000);
        let single = SmemLayout::new(1000, 1);
        assert!(!single.pipelined);
        assert!(single.prologue_offsets.is_empty());
    }
}
