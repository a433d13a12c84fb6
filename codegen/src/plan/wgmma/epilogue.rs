//! Accumulators to C straight from registers. A consumer warpgroup's m64nN accumulator
//! fragment gives thread `(warp, lane)` rows `16·warp + lane/4` and `+8` of each wgmma row
//! of 64, and columns `8j + 2·(lane%4)`, `+1` for `j < N/8`: registers `4j`, `4j+1` (first
//! row) and `4j+2`, `4j+3` (second). Full tiles store each pair as one packed word (or two
//! f32); tiles at the matrix edge store element by element, each under its own bounds check.

use gemm_dsl::family::wgmma::{WgmmaGeometry, WGMMA_M};
use serde::Serialize;

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct WgmmaEpilogue {
    /// `cvt.rn.bf16x2.f32` / `cvt.rn.f16x2.f32`, or empty for f32 out.
    pub pack_instruction: &'static str,
    /// The single-element conversion of edge stores (`cvt.rn.bf16.f32`), or empty for f32.
    pub convert_instruction: &'static str,
    /// Rows the thread stores, in increasing order.
    pub rows: Vec<EpilogueRow>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct EpilogueRow {
    /// Rows below the thread's first row.
    pub row: u32,
    /// The step from the previous row of the list (the first: 0) is `ldc · ld_scale` bytes:
    /// the rows between them times the element size.
    pub ld_scale: u32,
    pub stores: Vec<PairStore>,
}

/// Accumulators `lo` and `hi` at columns `col` and `col + 1` right of the thread's first
/// column; `offset` is `col` in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct PairStore {
    pub lo: u32,
    pub hi: u32,
    pub col: u32,
    pub col_hi: u32,
    pub offset: u32,
    pub offset_hi: u32,
}

impl WgmmaEpilogue {
    pub fn new(g: &WgmmaGeometry, out_bytes: u32, pack_instruction: &'static str) -> Self {
        let acc_per_wgmma = g.n / 2;
        let mut previous = 0;
        let rows = (0..g.m_wgmmas)
            .flat_map(|mi| (0..2).map(move |h| (mi, h)))
            .map(|(mi, h)| {
                let row = mi * WGMMA_M + 8 * h;
                let delta = row - previous;
                previous = row;
                EpilogueRow {
                    row,
                    ld_scale: delta * out_bytes,
                    stores: (0..g.n / 8)
                        .map(|j| {
                            let lo = mi * acc_per_wgmma + 4 * j + 2 * h;
                            PairStore {
                                lo,
                                hi: lo + 1,
                                col: 8 * j,
                                col_hi: 8 * j + 1,
                                offset: 8 * j * out_bytes,
                                offset_hi: (8 * j + 1) * out_bytes,
                            }
                        })
                        .collect(),
                }
            })
            .collect();
        WgmmaEpilogue {
            pack_instruction,
            convert_instruction: match pack_instruction {
                "cvt.rn.bf16x2.f32" => "cvt.rn.bf16.f32",
                "cvt.rn.f16x2.f32" => "cvt.rn.f16.f32",
                _ => "",
            },
            rows,
        }
    }
}
