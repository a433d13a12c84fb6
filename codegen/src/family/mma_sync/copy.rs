//! How each thread copies its share of A's and B's tiles into the swizzled stage: the copy
//! base, each copy's global step and shared-memory base and offset.

use super::{base_slot, must_decompose};
use crate::plan::edges::{chunk_words, ChunkWord, CopyVector};
use crate::plan::swizzle::{SmemSwizzle, XorOffset};
use gemm_dsl::geometry::CopyGeometry;
use serde::Serialize;

/// How one operand's tile is copied: thread `t`'s first 16-byte vector is row
/// `t / vectors_per_row`, chunk `t % vectors_per_row` (the copy base); its `i`-th copy is
/// vector `t + i·threads`, addressed in shared memory from one of the `bases`.
#[derive(Clone, Debug, Serialize)]
pub struct TileCopy {
    pub vectors_per_row: u32,
    pub swizzle: SmemSwizzle,
    /// Offset of this operand inside a stage.
    pub smem_tile_offset: u32,
    /// XOR constants of the per-thread shared-memory base registers.
    pub bases: Vec<u32>,
    pub copies: Vec<TileCopyOp>,
}

#[derive(Clone, Debug, Serialize)]
pub struct TileCopyOp {
    /// The global step from the previous copy is `ld · ld_step_scale` bytes: the rows below
    /// the previous copy's row times the element size. One `mad.wide.u32` of the 32-bit
    /// leading dimension takes it, where a 64-bit byte stride would take three instructions.
    pub ld_step_scale: u32,
    /// Bytes right of the thread's first vector.
    pub global_col_bytes: u32,
    /// Index into `TileCopy::bases` and the immediate after it.
    pub base: usize,
    pub smem_offset: u32,
    /// Rows below the thread's first (the bounded copies check them against the matrix), and
    /// the global step to them from the first, `ld · ld_scale` bytes.
    pub rows: u32,
    pub ld_scale: u32,
    /// The staging registers of `copy: sync` as the load's and store's operand (braced when
    /// more than one).
    pub staging: String,
    pub staging_registers: Vec<String>,
    /// The same registers word by word, for a vector that crosses the matrix's edge.
    pub words: Vec<ChunkWord>,
}

pub(super) fn tile_copy(
    geometry: &CopyGeometry,
    vector: &CopyVector,
    element_bytes: u32,
    threads: u32,
    swizzle: SmemSwizzle,
    smem_tile_offset: u32,
    first_staging_vector: u32,
) -> TileCopy {
    let vpr = geometry.vectors_per_row;
    let vb = geometry.vector_bytes;
    let position = |vector: u32| (vector / vpr, vector % vpr);
    // A vector narrower than a chunk lands at its byte offset inside the swizzled chunk.
    let offsets = |i: u32| -> Vec<u32> {
        (0..threads)
            .map(|t| {
                let (row, at) = position(t + i * threads);
                swizzle.byte_offset(row, at * vb)
            })
            .collect()
    };
    let first = offsets(0);
    let mut bases = Vec::new();
    let mut previous_row = 0;
    let copies = (0..geometry.copies_per_thread)
        .map(|i| {
            // Thread t's i-th vector sits a thread-independent number of rows and columns from
            // its first (CopyGeometry::new checks the divisibility that makes it so).
            let (rows, cols) = position(i * threads);
            let ld_step_scale = (rows - previous_row) * element_bytes;
            previous_row = rows;
            let XorOffset { xor, offset } =
                must_decompose(&first, &offsets(i), "cp.async destination");
            let staging: Vec<String> = (0..vector.words)
                .map(|w| format!("%stage{}", vector.words * (first_staging_vector + i) + w))
                .collect();
            TileCopyOp {
                ld_step_scale,
                global_col_bytes: cols * vb,
                base: base_slot(&mut bases, xor),
                smem_offset: offset,
                rows,
                ld_scale: rows * element_bytes,
                staging: vector.operand(&staging),
                words: chunk_words(&staging, element_bytes, vb),
                staging_registers: staging,
            }
        })
        .collect();
    TileCopy {
        vectors_per_row: vpr,
        swizzle,
        smem_tile_offset,
        bases,
        copies,
    }
}
