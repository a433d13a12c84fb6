//! The FFMA inner loop over one k tile: each thread's loads of its A rows and B column groups
//! from the stage, four k at a time, and the FFMA blocks over its accumulators.

use super::copy::Quarters;
use super::{COLUMN_GROUP_STRIDE_BYTES, F32_BYTES, K_PER_A_VECTOR};
use gemm_dsl::family::simt::{SimtGeometry, SIMT_COLUMN_GROUP, SIMT_LANE_COLS};
use gemm_dsl::geometry::COPY_VECTOR_BYTES;
use serde::Serialize;

/// The FFMA inner loop over one k tile.
#[derive(Clone, Debug, Serialize)]
pub struct Consumer {
    pub warp_cols: u32,
    pub lane_cols: u32,
    /// Columns per lane column group (one 16-byte vector).
    pub column_group: u32,
    pub warp_tile_m: u32,
    pub warp_tile_n: u32,
    pub thread_tile_m: u32,
    pub thread_tile_n: u32,
    /// Shared-memory byte offsets of a thread's first A row and B column group.
    pub a_warp_row_bytes: u32,
    pub a_lane_row_bytes: u32,
    pub b_warp_col_bytes: u32,
    pub b_lane_col_bytes: u32,
    pub accumulators: u32,
    pub a_fragment_registers: u32,
    pub b_fragment_registers: u32,
    pub k_groups: Vec<KGroup>,
    /// The FFMAs of the i-th k step of every group (registers repeat from group to group).
    /// Rendered on their own by the PTX writer, so not part of the template context.
    #[serde(skip)]
    pub fma_blocks: Vec<FmaBlock>,
}

/// Four consecutive k: the loads of the group's vectors along K (a row-major A's, a
/// column-major B's), then four k steps of loads of one k (a column-major A's, a row-major
/// B's), each followed by the FFMA block of its position in the group.
#[derive(Clone, Debug, Serialize)]
pub struct KGroup {
    pub a_loads: Vec<VectorLoad>,
    pub b_loads: Vec<VectorLoad>,
    pub k_steps: Vec<KStep>,
}

#[derive(Clone, Debug, Serialize)]
pub struct KStep {
    pub a_loads: Vec<VectorLoad>,
    pub b_loads: Vec<VectorLoad>,
}

#[derive(Clone, Debug, Serialize)]
pub struct FmaBlock {
    pub fmas: Vec<Fma>,
}

#[derive(Clone, Debug, Serialize)]
pub struct VectorLoad {
    /// `.v4`, `.v2`, or empty for one register.
    pub vector: &'static str,
    /// The destination registers, comma-separated.
    pub registers: String,
    pub offset: u32,
}

impl VectorLoad {
    fn v4(registers: String, offset: u32) -> VectorLoad {
        VectorLoad {
            vector: ".v4",
            registers,
            offset,
        }
    }
}

/// `%acc{acc} = %fa{a} * %fb{b} + %acc{acc}`: register indices.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Fma {
    pub acc: u32,
    pub a: u32,
    pub b: u32,
}

fn vector_registers(prefix: &str, first: u32) -> Vec<String> {
    (first..first + 4)
        .map(|i| format!("%{prefix}{i}"))
        .collect()
}

fn vector(prefix: &str, first: u32) -> String {
    vector_registers(prefix, first).join(", ")
}

/// The thread tile's (row, column) pairs row by row, the odd rows first, then the even ones,
/// every other row backwards: each FFMA shares an operand with the one before it (A's
/// register along a row, B's at a turn), which the hardware's operand reuse serves without a
/// register-file read. The row order is measured, not derived: ptxas allocates the
/// accumulators with fewer register-bank conflicts for it (0.25 per FFMA against 0.30 in row
/// order, 0.41 before the snake) and the 64x64 tile runs 3 % faster at 4096³ than with the
/// rows in order (`results/simt-stores-2026-11-26/`).
pub(super) fn snake_order(rows: u32, cols: u32) -> impl Iterator<Item = (u32, u32)> {
    let odd_then_even = (1..rows).step_by(2).chain((0..rows).step_by(2));
    odd_then_even.enumerate().flat_map(move |(visit, i)| {
        (0..cols).map(move |n| (i, if visit % 2 == 0 { n } else { cols - 1 - n }))
    })
}

/// Where the stage's operands lie, as the FFMA loop reads them.
pub(super) struct StageLayout {
    pub a_row_major: bool,
    pub b_row_major: bool,
    /// Line bytes in shared memory of A and B (padding included).
    pub a_row_bytes: u32,
    pub b_row_bytes: u32,
    pub b_quarters: Option<Quarters>,
}

/// The FFMA loop of geometry `g` over k tiles `tile_k` deep, reading `stage`.
pub(super) fn consumer(g: &SimtGeometry, tile_k: u32, stage: &StageLayout) -> Consumer {
    let StageLayout {
        a_row_major,
        b_row_major,
        a_row_bytes,
        b_row_bytes,
        ref b_quarters,
    } = *stage;
    let tm = g.thread_tile_m;
    let tn = g.thread_tile_n;
    let column_groups = tn / SIMT_COLUMN_GROUP;
    // A column-major A's rows are read along M: the widest vector that divides TM.
    let a_width = [4, 2, 1]
        .into_iter()
        .find(|w| tm.is_multiple_of(*w))
        .unwrap_or(1);
    let a_vector = match a_width {
        4 => ".v4",
        2 => ".v2",
        _ => "",
    };
    // The register of A row i at k step kk of a group, and of B column n.
    let a_register = |i: u32, kk: u32| if a_row_major { 4 * i + kk } else { kk * tm + i };
    let b_register = |n: u32, kk: u32| if b_row_major { kk * tn + n } else { 4 * n + kk };
    // Column n = 4j + e of the thread in a column-quarter tile: chunk `group` of quarter e,
    // 8j chunks in.
    let quarter_offset = |q: &Quarters, group: u32, n: u32| {
        let (j, e) = (n / SIMT_COLUMN_GROUP, n % SIMT_COLUMN_GROUP);
        group * q.group_bytes + e * q.quarter_bytes + j * SIMT_LANE_COLS * COPY_VECTOR_BYTES
    };
    let k_groups = (0..tile_k / K_PER_A_VECTOR)
        .map(|group| {
            let a_loads = if a_row_major {
                (0..tm)
                    .map(|i| {
                        VectorLoad::v4(
                            vector("fa", 4 * i),
                            i * a_row_bytes + group * COPY_VECTOR_BYTES,
                        )
                    })
                    .collect()
            } else {
                Vec::new()
            };
            // A column-major B: one vector of the group's 4 k per thread column. (Read one k at
            // a time, ptxas merges the four loads of a chunk back into one LDS.128.)
            let b_loads = match &b_quarters {
                Some(q) => (0..tn)
                    .map(|n| VectorLoad::v4(vector("fb", 4 * n), quarter_offset(q, group, n)))
                    .collect(),
                None => Vec::new(),
            };
            let k_steps = (0..K_PER_A_VECTOR)
                .map(|kk| {
                    let k = group * K_PER_A_VECTOR + kk;
                    let a_loads = if a_row_major {
                        Vec::new()
                    } else {
                        (0..tm / a_width)
                            .map(|v| {
                                let first = a_register(v * a_width, kk);
                                VectorLoad {
                                    vector: a_vector,
                                    registers: (first..first + a_width)
                                        .map(|r| format!("%fa{r}"))
                                        .collect::<Vec<_>>()
                                        .join(", "),
                                    offset: k * a_row_bytes + v * a_width * F32_BYTES,
                                }
                            })
                            .collect()
                    };
                    let b_loads = if b_row_major {
                        (0..column_groups)
                            .map(|j| {
                                VectorLoad::v4(
                                    vector("fb", b_register(4 * j, kk)),
                                    k * b_row_bytes + j * COLUMN_GROUP_STRIDE_BYTES,
                                )
                            })
                            .collect()
                    } else {
                        Vec::new()
                    };
                    KStep { a_loads, b_loads }
                })
                .collect();
            KGroup {
                a_loads,
                b_loads,
                k_steps,
            }
        })
        .collect();
    // The FFMAs of k step kk read the same registers in every group: one block per kk.
    let fma_blocks = (0..K_PER_A_VECTOR)
        .map(|kk| FmaBlock {
            fmas: snake_order(tm, tn)
                .map(|(i, n)| Fma {
                    acc: i * tn + n,
                    a: a_register(i, kk),
                    b: b_register(n, kk),
                })
                .collect(),
        })
        .collect();
    // A thread's first A row and B column group: along lines or along a line.
    let (a_warp_row_bytes, a_lane_row_bytes) = if a_row_major {
        (g.warp_tile_m * a_row_bytes, tm * a_row_bytes)
    } else {
        (g.warp_tile_m * F32_BYTES, tm * F32_BYTES)
    };

    Consumer {
        warp_cols: g.warps.cols,
        lane_cols: SIMT_LANE_COLS,
        column_group: SIMT_COLUMN_GROUP,
        warp_tile_m: g.warp_tile_m,
        warp_tile_n: g.warp_tile_n,
        thread_tile_m: tm,
        thread_tile_n: tn,
        a_warp_row_bytes,
        a_lane_row_bytes,
        // Column quarters put columns 4 apart 16 bytes apart: the same byte offsets as the
        // 4-column groups of a row-major B row.
        b_warp_col_bytes: g.warp_tile_n * F32_BYTES,
        b_lane_col_bytes: SIMT_COLUMN_GROUP * F32_BYTES,
        accumulators: tm * tn,
        a_fragment_registers: tm * K_PER_A_VECTOR,
        b_fragment_registers: K_PER_A_VECTOR * tn,
        k_groups,
        fma_blocks,
    }
}
