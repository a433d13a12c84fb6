//! How the cp.async families (SIMT, mma.sync) bring tiles into shared memory: the copy path
//! and what it must show in SASS, and each thread's copies of an operand tile.

use super::edges::{chunk_words, ChunkWord, CopyVector};
use super::flags::TemplateEnum;
use gemm_dsl::abi::{Opcode, SassCheck};
use gemm_dsl::geometry::CopyGeometry;
use gemm_dsl::ThreadCopy;
use serde::Serialize;

/// How tiles reach shared memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PlanCopy {
    /// Global loads into registers, then shared stores.
    Sync,
    /// `cp.async` groups.
    CpAsync,
}

impl TemplateEnum for PlanCopy {
    const ALL: &'static [Self] = &[PlanCopy::Sync, PlanCopy::CpAsync];
    fn name(self) -> &'static str {
        match self {
            PlanCopy::Sync => "sync",
            PlanCopy::CpAsync => "cp_async",
        }
    }
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
    pub fn of(copy: ThreadCopy) -> (PlanCopy, &'static str) {
        match copy {
            ThreadCopy::Sync { .. } => (PlanCopy::Sync, ""),
            ThreadCopy::CpAsync { hint, .. } => (PlanCopy::CpAsync, hint.name()),
        }
    }
}

/// How a thread addresses its copies of an operand tile, in global and in shared memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CopyAddressing {
    /// A 64-bit global pointer per copy, set up once and advanced by each k tile, the bounded
    /// copies' lines found from 64-bit byte strides; one shared-memory base per operand
    /// (`%a_smem_copy`), every copy at an immediate offset from it (SIMT).
    PointerPerCopy,
    /// One global pointer per operand, stepped to each copy's line by the 32-bit leading
    /// dimension (`mad.wide.u32`); a shared-memory base per XOR constant of the swizzle
    /// (`%a_cp<i>`), each copy at an immediate offset from one of them (mma.sync).
    SteppedPointer,
}

impl TemplateEnum for CopyAddressing {
    const ALL: &'static [Self] = &[
        CopyAddressing::PointerPerCopy,
        CopyAddressing::SteppedPointer,
    ];
    fn name(self) -> &'static str {
        match self {
            CopyAddressing::PointerPerCopy => "pointer_per_copy",
            CopyAddressing::SteppedPointer => "stepped_pointer",
        }
    }
}

/// One copy vector of a thread's share of an operand tile. Thread `t`'s first vector is line
/// `t / vectors_per_row`, vector `t % vectors_per_row` of the stored tile; its `i`-th is
/// vector `t + i·threads`, which lies the same number of lines and bytes from the first for
/// every thread ([`CopyGeometry::new`] checks the divisibility that makes it so).
#[derive(Clone, Debug, Serialize)]
pub struct CopyOp {
    /// Lines below the thread's first (the bounded copies check them against the matrix).
    pub rows: u32,
    /// The global step to this copy's line from the previous copy's is `ld · ld_step_scale`
    /// bytes (the lines between them times the element size): one `mad.wide.u32` of the
    /// 32-bit leading dimension, where a 64-bit byte stride would take three instructions.
    pub ld_step_scale: u32,
    /// The step from the thread's first line, `ld · ld_scale` bytes.
    pub ld_scale: u32,
    /// Bytes right of the thread's first vector.
    pub global_col_bytes: u32,
    /// Where the vector lands: after shared-memory base register `base` of the family's
    /// (one, or one per XOR of a swizzle), `smem_offset` bytes on.
    pub base: usize,
    pub smem_offset: u32,
    /// The staging registers of `copy: sync` as the load's and store's operand, e.g.
    /// `{ %stage0, %stage1, %stage2, %stage3 }` (one register bare).
    pub staging: String,
    pub staging_registers: Vec<String>,
    /// The same registers word by word, for a vector that crosses the matrix's edge.
    pub words: Vec<ChunkWord>,
}

/// A thread's copies of one operand tile laid out as `geometry`, in vectors `vector` of
/// `element_bytes` elements by `threads` threads, staged from vector `first_staging_vector`
/// on. `place(i, lines, col_bytes)` is where copy `i`, that many lines and bytes from the
/// thread's first vector, lands in shared memory: (base register, offset).
pub fn copy_ops(
    geometry: &CopyGeometry,
    vector: &CopyVector,
    element_bytes: u32,
    threads: u32,
    first_staging_vector: u32,
    mut place: impl FnMut(u32, u32, u32) -> (usize, u32),
) -> Vec<CopyOp> {
    let vectors_per_row = geometry.vectors_per_row;
    let mut previous_rows = 0;
    (0..geometry.copies_per_thread)
        .map(|i| {
            let rows = i * threads / vectors_per_row;
            let col_bytes = i * threads % vectors_per_row * geometry.vector_bytes;
            let (base, smem_offset) = place(i, rows, col_bytes);
            let first_register = vector.words * (first_staging_vector + i);
            let staging: Vec<String> = (first_register..first_register + vector.words)
                .map(|r| format!("%stage{r}"))
                .collect();
            let ld_step_scale = (rows - previous_rows) * element_bytes;
            previous_rows = rows;
            CopyOp {
                rows,
                ld_step_scale,
                ld_scale: rows * element_bytes,
                global_col_bytes: col_bytes,
                base,
                smem_offset,
                staging: vector.operand(&staging),
                words: chunk_words(&staging, element_bytes, geometry.vector_bytes),
                staging_registers: staging,
            }
        })
        .collect()
}
