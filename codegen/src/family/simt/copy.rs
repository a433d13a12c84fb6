//! How each thread copies its share of A's and B's tiles into the stage: plain lines padded
//! by `pad(N)`, or a column-major B's column quarters.

use super::F32_BYTES;
use crate::plan::copy::{copy_ops, CopyOp};
use crate::plan::edges::CopyVector;
use gemm_dsl::family::simt::SIMT_B_QUARTERS;
use gemm_dsl::geometry::{CopyGeometry, COPY_VECTOR_BYTES};
use serde::Serialize;

/// How one operand's tile is copied: thread `t` starts at line `t / vectors_per_row`, vector
/// `t % vectors_per_row`; its `i`-th copy sits at a fixed offset from there.
#[derive(Clone, Debug, Serialize)]
pub struct OperandCopy {
    pub vectors_per_row: u32,
    /// Line bytes in shared memory (global line + padding) of a plain tile.
    pub smem_row_bytes: u32,
    /// A column-major B tile's column quarters, in place of plain lines.
    pub quarters: Option<Quarters>,
    /// Offset of this operand inside a stage.
    pub smem_stage_offset: u32,
    pub copies: Vec<CopyOp>,
}

/// Column quarters: chunk `g` (k group) of column `n` sits at byte
/// `g·group_bytes + (n % 4)·quarter_bytes + (n / 4)·16`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Quarters {
    pub quarter_bytes: u32,
    pub group_bytes: u32,
    /// Copy vectors are narrower than a chunk: each lands at its byte offset inside it.
    pub vectors_in_chunk: bool,
}

impl OperandCopy {
    /// Tile-relative byte offset of 16-byte chunk `chunk` of stored line `line`.
    pub fn chunk_offset(&self, line: u32, chunk: u32) -> u32 {
        match self.quarters {
            None => line * self.smem_row_bytes + chunk * COPY_VECTOR_BYTES,
            Some(q) => {
                chunk * q.group_bytes
                    + (line % SIMT_B_QUARTERS) * q.quarter_bytes
                    + (line / SIMT_B_QUARTERS) * COPY_VECTOR_BYTES
            }
        }
    }

    /// Tile-relative byte offset of byte `byte` of stored line `line`: a vector narrower
    /// than a chunk keeps its place inside the chunk.
    pub fn byte_offset(&self, line: u32, byte: u32) -> u32 {
        self.chunk_offset(line, byte / COPY_VECTOR_BYTES) + byte % COPY_VECTOR_BYTES
    }
}

pub(super) fn operand_copy(
    geometry: &CopyGeometry,
    vector: &CopyVector,
    threads: u32,
    smem_row_bytes: u32,
    quarters: Option<Quarters>,
    smem_stage_offset: u32,
    first_staging_vector: u32,
) -> OperandCopy {
    let copy = OperandCopy {
        vectors_per_row: geometry.vectors_per_row,
        smem_row_bytes,
        quarters,
        smem_stage_offset,
        copies: Vec::new(),
    };
    let (vpr, vb) = (geometry.vectors_per_row, geometry.vector_bytes);
    // One base register per operand: every copy is one offset from the thread's first (for
    // column quarters, the validation keeps the line step a multiple of 4; a narrow vector
    // keeps its byte within the chunk, since threads·vector bytes is a multiple of 16).
    let place = |i: u32, rows: u32, col_bytes: u32| {
        let smem_offset = copy.byte_offset(rows, col_bytes) - copy.byte_offset(0, 0);
        assert!(
            (0..threads).all(|t| {
                let (line, at) = (t / vpr, t % vpr);
                copy.byte_offset(line + rows, at * vb + col_bytes)
                    == copy.byte_offset(line, at * vb) + smem_offset
            }),
            "copy {i}: shared-memory destinations are not one offset from the first"
        );
        (0, smem_offset)
    };
    let copies = copy_ops(
        geometry,
        vector,
        F32_BYTES,
        threads,
        first_staging_vector,
        place,
    );
    OperandCopy { copies, ..copy }
}
