//! Strided batches: which product of the batch a block computes, and where that product's
//! operands start. Matrix `i` of an operand lies `i · stride` elements past the operand's
//! pointer (the `stride_*` parameters of [`BATCH_PARAMS`](gemm_dsl::abi::BATCH_PARAMS)).

use gemm_dsl::Schedule;
use serde::Serialize;

/// The register a kernel reads its batch index from, and its operands' batch strides.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct BatchPlan {
    /// `%ctaid.z` where the grid runs the batch along z (one tile per block); the tile walk's
    /// `%batch` where a persistent block walks the tiles of every product.
    pub index: &'static str,
    pub a: BatchOperand,
    pub b: BatchOperand,
    pub c: BatchOperand,
}

/// One operand's pointer and batch-stride parameters (the names after `<kernel>_`), and the
/// bytes of its element, which scale the stride.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct BatchOperand {
    pub pointer_param: &'static str,
    pub stride_param: &'static str,
    pub element_bytes: u32,
}

/// The register a persistent tile walk leaves the batch index in.
pub const WALK_BATCH_REGISTER: &str = "%batch";

impl BatchPlan {
    pub fn new(schedule: Schedule, in_bytes: u32, out_bytes: u32) -> BatchPlan {
        let operand = |name, stride, element_bytes| BatchOperand {
            pointer_param: name,
            stride_param: stride,
            element_bytes,
        };
        BatchPlan {
            index: match schedule {
                Schedule::Tile => "%ctaid.z",
                Schedule::Persistent { .. } => WALK_BATCH_REGISTER,
            },
            a: operand("a", "stride_a", in_bytes),
            b: operand("b", "stride_b", in_bytes),
            c: operand("c", "stride_c", out_bytes),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gemm_dsl::{Raster, Tail};

    #[test]
    fn the_batch_index_comes_from_the_grid_or_the_walk() {
        let tiles = BatchPlan::new(Schedule::Tile, 2, 4);
        assert_eq!(tiles.index, "%ctaid.z");
        assert_eq!(
            (
                tiles.a.element_bytes,
                tiles.b.element_bytes,
                tiles.c.element_bytes
            ),
            (2, 2, 4)
        );
        assert_eq!(tiles.c.stride_param, "stride_c");
        let walk = BatchPlan::new(
            Schedule::Persistent {
                raster: Raster::M,
                group: 8,
                tail: Tail::Whole,
            },
            2,
            2,
        );
        assert_eq!(walk.index, WALK_BATCH_REGISTER);
    }
}
