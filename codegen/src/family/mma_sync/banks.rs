//! The shared-memory addresses every thread touches, for the bank-conflict reports of
//! `explain` and the tests.

use super::{staged_epilogue_addresses, FragLoad, FragmentReads, MmaSyncPlan, ReadKind, TileCopy};
use crate::plan::{conflict_degree_for, BankReport, PlanCopy};

impl MmaSyncPlan {
    /// Per-lane tile-relative addresses of every access of one kind over the whole block: for
    /// each warp and each instruction, the 32 lanes' byte offsets.
    pub(super) fn read_addresses(
        &self,
        reads: &FragmentReads,
        loads: &[&FragLoad],
    ) -> Vec<Vec<u32>> {
        let warps = self.threads / 32;
        let mut all = Vec::new();
        for warp in 0..warps {
            let (wm, wn) = (warp / self.warp_cols, warp % self.warp_cols);
            for load in loads {
                let xor = reads.bases[load.base];
                all.push(
                    (0..32)
                        .map(|lane| (reads.lane_base(wm, wn, lane) ^ xor) + load.offset)
                        .collect(),
                );
            }
        }
        all
    }

    pub(super) fn copy_addresses(&self, copy: &TileCopy) -> Vec<Vec<u32>> {
        let mut all = Vec::new();
        for warp in 0..self.threads / 32 {
            for op in &copy.copies {
                let xor = copy.bases[op.base];
                all.push(
                    (0..32)
                        .map(|lane| {
                            let t = warp * 32 + lane;
                            let row = t / copy.vectors_per_row;
                            let chunk = t % copy.vectors_per_row;
                            (copy.swizzle.chunk_offset(row, chunk) ^ xor) + op.smem_offset
                        })
                        .collect(),
                );
            }
        }
        all
    }

    /// Bank-conflict degree of each shared-memory access pattern: the worst over all warps and
    /// instructions of the kind (tile-relative addresses; every tile starts on a 128-byte line).
    pub fn bank_conflicts(&self) -> Vec<BankReport> {
        let a_loads: Vec<&FragLoad> = self.k_steps_plan.iter().flat_map(|s| &s.a_loads).collect();
        let b_loads: Vec<&FragLoad> = self.k_steps_plan.iter().flat_map(|s| &s.b_loads).collect();
        let worst = |sets: Vec<Vec<u32>>, bytes: u32| {
            sets.iter()
                .map(|lanes| conflict_degree_for(lanes, bytes))
                .max()
                .unwrap_or(0)
        };
        let read_name = |kind, a: bool| match (kind, a) {
            (ReadKind::Ldmatrix, true) => "A fragment read (ldmatrix.x4)",
            (ReadKind::LdmatrixTrans, true) => "A fragment read (ldmatrix.x4.trans)",
            (ReadKind::Scalar, true) => "A fragment read (ld.shared.b32)",
            (ReadKind::Ldmatrix, false) => "B fragment read (ldmatrix.x4)",
            (ReadKind::LdmatrixTrans, false) => "B fragment read (ldmatrix.x4.trans)",
            (ReadKind::Scalar, false) => "B fragment read (ld.shared.b32)",
        };
        let copy_name = |a: bool| match (self.pipeline.copy, a) {
            (PlanCopy::CpAsync, true) => "A tile write (cp.async 16 B)",
            (PlanCopy::CpAsync, false) => "B tile write (cp.async 16 B)",
            (PlanCopy::Sync, true) => "A tile write (st.shared.v4)",
            (PlanCopy::Sync, false) => "B tile write (st.shared.v4)",
        };
        let mut reports = vec![
            BankReport {
                access: read_name(self.a_read.kind, true),
                degree: worst(
                    self.read_addresses(&self.a_read, &a_loads),
                    self.a_read.kind.access_bytes(),
                ),
            },
            BankReport {
                access: read_name(self.b_read.kind, false),
                degree: worst(
                    self.read_addresses(&self.b_read, &b_loads),
                    self.b_read.kind.access_bytes(),
                ),
            },
            BankReport {
                access: copy_name(true),
                degree: worst(self.copy_addresses(&self.pipeline.a_src.copy), 16),
            },
            BankReport {
                access: copy_name(false),
                degree: worst(self.copy_addresses(&self.pipeline.b_src.copy), 16),
            },
        ];
        if let Some(e) = self.epilogue.path.staged() {
            let (writes, reads) = staged_epilogue_addresses(e);
            reports.push(BankReport {
                access: if e.pair_bytes == 8 {
                    "C staging write (st.shared.v2.f32)"
                } else {
                    "C staging write (st.shared.b32)"
                },
                degree: worst(writes, e.pair_bytes),
            });
            reports.push(BankReport {
                access: "C staging read (ld.shared.v4)",
                degree: worst(reads, 16),
            });
        }
        reports
    }

    /// The 32 lane addresses of the first instruction of each access kind of warp 0, for
    /// showing banks: (name, access bytes, addresses).
    pub fn first_phases(&self) -> Vec<(&'static str, u32, Vec<u32>)> {
        let reports = self.bank_conflicts();
        let first_step = &self.k_steps_plan[0];
        let a = self.read_addresses(&self.a_read, &[&first_step.a_loads[0]]);
        let b = self.read_addresses(&self.b_read, &[&first_step.b_loads[0]]);
        vec![
            (
                reports[0].access,
                self.a_read.kind.access_bytes(),
                a[0].clone(),
            ),
            (
                reports[1].access,
                self.b_read.kind.access_bytes(),
                b[0].clone(),
            ),
            (
                reports[2].access,
                16,
                self.copy_addresses(&self.pipeline.a_src.copy)[0].clone(),
            ),
            (
                reports[3].access,
                16,
                self.copy_addresses(&self.pipeline.b_src.copy)[0].clone(),
            ),
        ]
    }
}
