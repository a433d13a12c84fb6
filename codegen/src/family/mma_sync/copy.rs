//! How each thread copies its share of A's and B's tiles into the swizzled stage: the copy
//! base, each copy's global step and shared-memory base and offset.

use super::{base_slot, must_decompose};
use crate::plan::copy::{copy_ops, CopyOp};
use crate::plan::edges::CopyVector;
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
    pub copies: Vec<CopyOp>,
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
    // A vector narrower than a chunk lands at its byte offset inside the swizzled chunk.
    let offsets = |i: u32| -> Vec<u32> {
        (0..threads)
            .map(|t| {
                let vector = t + i * threads;
                swizzle.byte_offset(vector / vpr, vector % vpr * vb)
            })
            .collect()
    };
    let first = offsets(0);
    let mut bases = Vec::new();
    let copies = copy_ops(
        geometry,
        vector,
        element_bytes,
        threads,
        first_staging_vector,
        |i, _, _| {
            let XorOffset { xor, offset } =
                must_decompose(&first, &offsets(i), "cp.async destination");
            (base_slot(&mut bases, xor), offset)
        },
    );
    TileCopy {
        vectors_per_row: vpr,
        swizzle,
        smem_tile_offset,
        bases,
        copies,
    }
}
