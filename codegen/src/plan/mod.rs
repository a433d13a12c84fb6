//! The plan layer's shared axes: every number the PTX needs that more than one family
//! computes the same way (the batch, edge copies, tile walks, swizzles, the ring of stages
//! and its guard, the copy path and copy ops, the store paths of C and the fused epilogue's
//! math, shared-memory banks, the math-only probe's numbers) and the contract each family's
//! plan hands the launcher. The families themselves, and the one list of them, live
//! in [`crate::family`]; nothing here knows a family.

pub mod banks;
pub mod batch;
pub mod copy;
pub mod divide;
pub mod edges;
pub mod epilogue;
pub mod flags;
pub mod math_only;
pub mod pipeline;
pub mod ring;
pub mod schedule;
pub mod store;
pub mod swizzle;

pub use banks::{bank, conflict_degree, conflict_degree_for, BankReport, BANKS, BANK_BYTES};
pub use copy::PlanCopy;
pub use ring::{CpAsyncGroups, Mbarriers, Ring};

use gemm_dsl::abi::KernelParam;

/// PTX ISA version written into every kernel: 8.0 (CUDA 12.0) covers cp.async, mbarriers,
/// TMA and wgmma, and every driver of CUDA 12.0 or newer can JIT it.
pub const PTX_VERSION: &str = "8.0";

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

/// How A, B and C lie, for the kernel's header comment.
pub(crate) fn layout_note(layout: gemm_dsl::Layout, c_layout: gemm_dsl::CLayout) -> String {
    let c = match c_layout {
        gemm_dsl::CLayout::Row => "row",
        gemm_dsl::CLayout::Col => "column",
    };
    match (layout, c_layout) {
        (gemm_dsl::Layout::RowRow, gemm_dsl::CLayout::Row) => "all row-major".to_string(),
        (gemm_dsl::Layout::RowRow, _) => format!("A and B row-major, C {c}-major"),
        (gemm_dsl::Layout::RowCol, _) => format!("A row-major, B column-major, C {c}-major"),
        (gemm_dsl::Layout::ColRow, _) => format!("A column-major, B row-major, C {c}-major"),
        (gemm_dsl::Layout::ColCol, _) => format!("A and B column-major, C {c}-major"),
    }
}
