//! How the producer fills a stage: the TMA boxes of A and B, where each starts in its
//! matrix, and a cluster's multicast of the operand its blocks share.

use gemm_dsl::family::wgmma::{ClusterSharing, OperandBoxes, SharedOperand, WgmmaGeometry};
use gemm_dsl::GemmSpec;
use serde::Serialize;

/// Two blocks of a cluster compute neighbouring tiles that share one operand's tiles: block
/// rank `r` loads row slice `r` of each of that operand's boxes and multicasts it into both
/// blocks' stages, so each stage holds the whole tile in both, from half the loads. A slot is
/// refilled only when the consumers of both blocks have released it: each consumer warp
/// arrives on its own block's empty barrier and on the peer's.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ClusterPlan {
    pub blocks: u32,
    /// `.reqnctapercluster`: the launch's cluster shape along the grid's x and y.
    pub dims_x: u32,
    pub dims_y: u32,
    /// The operand the blocks share: A (true) or B.
    pub shares_a: bool,
    /// Rows of each shared box one block loads, and their bytes in shared memory.
    pub slice_rows: u32,
    pub slice_bytes: u32,
    /// Where block rank `r`'s tile sits in the cluster's: `r` times these, down M or along N.
    pub rank_tile_m: u32,
    pub rank_tile_n: u32,
    /// Every block of the cluster, as `.multicast::cluster`'s mask.
    pub cta_mask: u32,
}

impl ClusterPlan {
    /// The multicast of `cluster` over geometry `g`'s boxes.
    pub(super) fn new(c: ClusterSharing, g: &WgmmaGeometry, spec: &GemmSpec) -> ClusterPlan {
        let (boxes, swizzle_bytes, rank_tile_m, rank_tile_n) = match c.shared {
            SharedOperand::A => (&g.a_boxes, g.a_swizzle_bytes, 0, spec.tile.n),
            SharedOperand::B => (&g.b_boxes, g.b_swizzle_bytes, spec.tile.m, 0),
        };
        let slice_rows = boxes.outer / c.blocks;
        let (dims_x, dims_y) = match spec.schedule {
            gemm_dsl::Schedule::Tile => (c.shape.cols, c.shape.rows),
            gemm_dsl::Schedule::Persistent { .. } => (c.blocks, 1),
        };
        ClusterPlan {
            blocks: c.blocks,
            dims_x,
            dims_y,
            shares_a: c.shared == SharedOperand::A,
            slice_rows,
            slice_bytes: slice_rows * swizzle_bytes,
            rank_tile_m,
            rank_tile_n,
            cta_mask: (1 << c.blocks) - 1,
        }
    }
}

/// One TMA box of a stage: where it lands in the stage, and how far along the operand's
/// contiguous dimension and down its lines it starts from the tile's first element.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct BoxLoad {
    pub smem_offset: u32,
    pub inner_offset: u32,
    pub outer_offset: u32,
    /// Bytes the box brings into each block's stage.
    pub bytes: u32,
    /// The box belongs to the operand a cluster shares: this block loads only its row slice
    /// and multicasts it.
    pub multicast: bool,
}

/// The TMA boxes of one operand in a stage that starts its tile at `smem_start`: per swizzle
/// span, its boxes down the lines, each landing right after the one before.
pub(super) fn box_loads(
    boxes: &OperandBoxes,
    element_bytes: u32,
    smem_start: u32,
    multicast: bool,
) -> Vec<BoxLoad> {
    let bytes = boxes.bytes_per_box(element_bytes);
    (0..boxes.boxes)
        .flat_map(|span| {
            (0..boxes.line_parts).map(move |part| BoxLoad {
                smem_offset: smem_start + (span * boxes.line_parts + part) * bytes,
                inner_offset: span * boxes.inner,
                outer_offset: part * boxes.outer,
                bytes,
                multicast,
            })
        })
        .collect()
}
