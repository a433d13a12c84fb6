//! How the cp.async families (SIMT, mma.sync) bring tiles into shared memory, and what that
//! path must show in SASS.

use gemm_dsl::abi::{Opcode, SassCheck};
use serde::Serialize;

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
