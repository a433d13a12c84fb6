//! The SIMT family (`mma: fma`): warp-tiled FFMA on f32. Its geometry (how a block tile
//! splits into warp and thread tiles and copies), its rules and its budgets.

use crate::budget::{LedgerLine, RegisterBudget, RegisterLine, SmemLedger};
use crate::geometry::staging_words;
use crate::geometry::{
    operand_copies, rank_warp_grids, CopyGeometry, CopySpread, StoredTile, COPY_VECTOR_BYTES,
    MAX_WARPS,
};
use crate::pick::family_cost::{Calibration, Candidate, FamilyCost, MathUnit};
use crate::rules::{not_implemented, Budgets, FamilyRules, Validator};
use crate::spec::*;

/// SIMT family: lanes of a warp form a 4 x 8 grid. A quarter-warp (8 lanes, one phase of a
/// 128-bit shared load) then shares one lane row, so A reads broadcast and B reads cover 8
/// consecutive 16-byte chunks: no bank conflicts without padding.
pub const SIMT_LANE_ROWS: u32 = 4;
pub const SIMT_LANE_COLS: u32 = 8;
/// Each thread reads B and writes C in groups of 4 consecutive columns (one 16-byte vector).
pub const SIMT_COLUMN_GROUP: u32 = 4;
/// A column-major B tile is stored in column quarters: the 16-byte chunk of k group `g` (4 k)
/// of column `n` sits at chunk `(n % 4)·quarter + n / 4` of group row `g`, so the 8 lane
/// columns of a read phase, whose columns lie 4 apart, read 8 consecutive chunks. A copy
/// step must then move whole groups of this many columns.
pub const SIMT_B_QUARTERS: u32 = 4;

/// The SIMT (`mma: fma`) family's split of the block tile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SimtGeometry {
    pub tile: Tile,
    pub warps: Grid2,
    pub threads: u32,
    pub warp_tile_m: u32,
    pub warp_tile_n: u32,
    /// Accumulator rows and columns per thread.
    pub thread_tile_m: u32,
    pub thread_tile_n: u32,
    /// A and B are copied along their contiguous dimension (see [`StoredTile`]): A as `BM`
    /// rows of `BK` (row-major) or `BK` lines of `BM` (column-major), B as `BK` rows of `BN`
    /// or `BN` columns of `BK`.
    pub a_copy: CopyGeometry,
    pub b_copy: CopyGeometry,
    /// How the threads copy: registers or `cp.async`.
    pub copy: ThreadCopy,
}

/// Why a tile/warp combination has no SIMT geometry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SimtGeometryError {
    WarpCount,
    WarpGridDoesNotDivide,
    WarpTile {
        warp_tile_m: u32,
        warp_tile_n: u32,
    },
    CopyWidth,
    CopySpread(CopySpread),
    /// A column-major B tile whose copy steps do not move whole column quarters.
    ColumnQuarters {
        lines_per_step: u32,
    },
}

impl SimtGeometry {
    pub fn new(
        tile: Tile,
        warps: Grid2,
        dtype: DType,
        layout: Layout,
        copy: ThreadCopy,
    ) -> Result<SimtGeometry, SimtGeometryError> {
        if warps.count() == 0 || warps.count() > MAX_WARPS {
            return Err(SimtGeometryError::WarpCount);
        }
        if !tile.m.is_multiple_of(warps.rows) || !tile.n.is_multiple_of(warps.cols) {
            return Err(SimtGeometryError::WarpGridDoesNotDivide);
        }
        let warp_tile_m = tile.m / warps.rows;
        let warp_tile_n = tile.n / warps.cols;
        if !warp_tile_m.is_multiple_of(SIMT_LANE_ROWS)
            || !warp_tile_n.is_multiple_of(SIMT_LANE_COLS * SIMT_COLUMN_GROUP)
        {
            return Err(SimtGeometryError::WarpTile {
                warp_tile_m,
                warp_tile_n,
            });
        }
        let element = dtype.size_bytes();
        if !(tile.k * element).is_multiple_of(COPY_VECTOR_BYTES) {
            return Err(SimtGeometryError::CopyWidth);
        }
        let threads = warps.count() * 32;
        let (a_copy, b_copy) = operand_copies(tile, layout, element, threads, copy.vector_bytes())
            .map_err(SimtGeometryError::CopySpread)?;
        if !layout.b_row_major() && b_copy.vectors_per_row < threads {
            let lines_per_step = threads / b_copy.vectors_per_row;
            if !lines_per_step.is_multiple_of(SIMT_B_QUARTERS) {
                return Err(SimtGeometryError::ColumnQuarters { lines_per_step });
            }
        }
        Ok(SimtGeometry {
            tile,
            warps,
            threads,
            warp_tile_m,
            warp_tile_n,
            thread_tile_m: warp_tile_m / SIMT_LANE_ROWS,
            thread_tile_n: warp_tile_n / SIMT_LANE_COLS,
            a_copy,
            b_copy,
            copy,
        })
    }

    /// Legal warp grids for a tile, best first: closest to an 8x8 thread tile, then fewer warps.
    pub fn legal_warp_grids(
        tile: Tile,
        dtype: DType,
        layout: Layout,
        copy: ThreadCopy,
    ) -> Vec<Grid2> {
        rank_warp_grids(|warps| {
            let g = SimtGeometry::new(tile, warps, dtype, layout, copy).ok()?;
            let per_thread = g.thread_tile_m * g.thread_tile_n;
            Some(per_thread.abs_diff(64) * 64 + g.thread_tile_m.abs_diff(8))
        })
    }
}

/// The SIMT family's defaults and scope.
pub(crate) struct Simt;

impl FamilyRules for Simt {
    fn describe(&self) -> &'static str {
        "`mma: fma` (SIMT)"
    }

    fn scope_note(&self) -> &'static str {
        "only f32, copy sync or cp_async, swizzle none or pad, one tile per block, no cluster, epilogue direct, is"
    }

    fn scope(&self, v: &Validator<'_>) -> Vec<(Key, String, bool)> {
        let s = v.spec;
        let family_checks = [
            (
                Key::Dtype,
                s.dtype.name().to_string(),
                s.dtype == DType::F32,
            ),
            (Key::Out, s.out.name().to_string(), s.out == DType::F32),
            (
                Key::Schedule,
                s.schedule.to_string(),
                s.schedule == Schedule::Tile,
            ),
        ];
        family_checks
            .into_iter()
            .chain(v.block_copy_scope())
            .collect()
    }

    fn dtype(&self) -> DType {
        DType::F32
    }

    fn tile(&self, _dtype: DType) -> Tile {
        Tile {
            m: 128,
            n: 128,
            k: 8,
        }
    }

    /// Warp tiles of 32x64: each thread then holds an 8x8 accumulator tile.
    fn warps(&self, tile: Tile, _consumers: u32) -> Grid2 {
        Grid2 {
            rows: (tile.m / 32).max(1),
            cols: (tile.n / 64).max(1),
        }
    }

    fn stages(&self) -> u32 {
        2
    }

    fn swizzle(&self, _dtype: DType, _tile: Tile) -> Swizzle {
        Swizzle::None
    }

    fn consumers(&self) -> u32 {
        1
    }

    fn min_stages(&self, _spec: &GemmSpec) -> u32 {
        1
    }

    fn copy(&self, _arch: Arch) -> Copy {
        Copy::CP_ASYNC_CG
    }

    fn epilogue(&self, _out: DType) -> Epilogue {
        Epilogue::Direct
    }

    fn threads_key(&self) -> Key {
        Key::Warps
    }

    /// FFMA runs on every target.
    fn math_target(&self) -> Option<(Arch, Mma)> {
        None
    }

    fn tma_target(&self) -> Option<Arch> {
        None
    }

    fn f32_inputs_help(&self) -> Option<&'static str> {
        None
    }

    fn multiplies_fp8(&self) -> bool {
        false
    }
}

impl FamilyCost for Simt {
    fn math_unit(&self) -> MathUnit {
        MathUnit::Fma
    }

    /// A block's barrier waits stop only its own warps, which the other resident blocks'
    /// FFMAs fill: one block alone loses the most.
    fn main_loop_efficiency(
        &self,
        fitted: &Calibration,
        _candidate: &Candidate,
        blocks_on_sm: f64,
    ) -> f64 {
        fitted.fma * blocks_on_sm / (blocks_on_sm + fitted.fma_barrier_blocks)
    }

    /// Hidden by the other resident blocks' FFMAs (fitted on the SIMT tiles).
    fn k_tile_overhead_clk(&self, blocks_on_sm: f64) -> f64 {
        80.0 / blocks_on_sm
    }

    fn ring_latency_share(&self, _fitted: &Calibration) -> f64 {
        1.0
    }
}

impl Validator<'_> {
    /// The SIMT family: f32, any layout, sync or cp.async 16-byte copies.
    pub(crate) fn simt(&mut self) -> Option<(SimtGeometry, Budgets)> {
        let s = self.spec;
        let spans = self.spans;
        let family_note = Simt.scope_note();

        match s.swizzle {
            Swizzle::Pad(bytes) => self.padding_error(bytes, "vector copies and reads"),
            // The SIMT family reads its tiles as they lie, or padded: no XOR swizzle, at any
            // row width (so no tile to propose either).
            Swizzle::Xor32 | Swizzle::Xor64 | Swizzle::Xor128 => {
                let mut error = not_implemented(
                    spans.value(Key::Swizzle),
                    "swizzle",
                    &s.swizzle.to_string(),
                    family_note,
                )
                .through(spans.value_last(Key::Swizzle))
                .note(format!("this family is {}", Simt.describe()))
                .note(
                    "its reads are conflict-free without a swizzle; `pad(N)` pads rows, and \
                     `mma: mma_sync` and `mma: wgmma` take XOR swizzles",
                )
                .fix(Key::Swizzle, Swizzle::None.to_string());
                error.key = Some(Key::Swizzle);
                self.errors.push(error);
            }
            Swizzle::None => {}
        }
        if !self.errors.is_empty() {
            return None;
        }

        let copy = self.thread_copy()?;
        let geometry = match SimtGeometry::new(s.tile, s.warps, s.dtype, s.layout, copy) {
            Ok(g) => g,
            Err(error) => {
                self.simt_geometry_error(error, copy);
                return None;
            }
        };
        // The ledger at any stage count: the over-budget help proposes one.
        let smem = |stages| {
            simt_smem_ledger(&GemmSpec {
                stages,
                ..s.clone()
            })
        };
        let registers = simt_register_budget(s, &geometry);
        let smaller_tiles = || {
            fitting_warp_grid(s, copy)
                .map(|w| format!("warps: {w} gives each thread a smaller tile"))
        };
        let label = format!(
            "{}x{} accumulators per thread",
            geometry.thread_tile_m, geometry.thread_tile_n
        );
        let budgets = self.finish(geometry.threads, smem, registers, label, smaller_tiles)?;
        Some((geometry, budgets))
    }

    fn simt_geometry_error(&mut self, error: SimtGeometryError, copy: ThreadCopy) {
        let s = self.spec;
        // A grid whose registers do not fit would only move the error on.
        let suggestion = fitting_warp_grid(s, copy).map(|w| format!("warps: {w}"));
        let warps_key = self.warps_key();
        match error {
            SimtGeometryError::WarpCount => {
                self.warp_count_error(suggestion.unwrap_or_else(|| {
                    "use fewer warps (ROWS x COLS at most 32) and a smaller tile".into()
                }))
            }
            SimtGeometryError::WarpGridDoesNotDivide => self.warp_grid_error(warps_key, suggestion),
            SimtGeometryError::WarpTile {
                warp_tile_m,
                warp_tile_n,
            } => {
                let error = self.error(
                    warps_key,
                    format!(
                        "warp tile {warp_tile_m}x{warp_tile_n} does not fit the SIMT lane grid: \
                         its rows must be a multiple of 4 and its columns of 32"
                    ),
                );
                error.notes.push(
                    "a warp's 32 lanes form a 4x8 grid, and each lane reads B and writes C \
                     4 columns (16 bytes) at a time"
                        .to_string(),
                );
                let rows = SIMT_LANE_ROWS * s.warps.rows;
                let cols = SIMT_LANE_COLS * SIMT_COLUMN_GROUP * s.warps.cols;
                match (suggestion, suggest_simt_mn(s)) {
                    (Some(warps), _) => error.help = Some(warps),
                    (None, Some(tile)) => {
                        error.help = Some(format!(
                            "tile: {tile} (with warps: {}, BM a multiple of {rows} and BN of {cols})",
                            s.warps
                        ));
                        error.fix = vec![(Key::Tile, tile.to_string())];
                    }
                    (None, None) => {
                        error.help = Some(format!(
                        "with warps: {}, use a tile with BM a multiple of {rows} and BN of {cols}",
                        s.warps
                    ))
                    }
                }
            }
            SimtGeometryError::CopyWidth => {
                let row_bytes = s.tile.k * s.dtype.size_bytes();
                // The nearest BK the whole geometry takes, not only the copy width.
                let legal_k = suggest_simt_k(s);
                let error = self.error(
                    Key::Tile,
                    format!(
                        "16-byte copies need BK·sizeof({}) to be a multiple of 16, but it is {} x {} = {row_bytes} bytes",
                        s.dtype.name(),
                        s.tile.k,
                        s.dtype.size_bytes()
                    ),
                );
                error.help = Some(match legal_k {
                    Some(k) => format!("tile: {}x{}x{k}", s.tile.m, s.tile.n),
                    None => format!(
                        "a BK that is a multiple of {}, and a smaller tile",
                        16 / s.dtype.size_bytes()
                    ),
                });
            }
            SimtGeometryError::CopySpread(spread) => {
                let help =
                    suggest_simt_k(s).map(|k| format!("tile: {}x{}x{k}", s.tile.m, s.tile.n));
                self.copy_spread_error(spread, help);
            }
            SimtGeometryError::ColumnQuarters { lines_per_step } => {
                let help = suggest_simt_k(s)
                    .map(|k| format!("tile: {}x{}x{k}", s.tile.m, s.tile.n))
                    .unwrap_or_else(|| "use a smaller BK or more warps".to_string());
                let error = self.error(
                    Key::Tile,
                    format!(
                        "the column-major B tile's copies step {lines_per_step} columns at a time, \
                         not a multiple of {SIMT_B_QUARTERS}"
                    ),
                );
                error.notes.push(format!(
                    "a column-major B tile is stored in column quarters (columns 4 apart side by \
                     side, so the FFMA loop's B reads are conflict-free); every copy must move \
                     whole groups of {SIMT_B_QUARTERS} columns"
                ));
                error.help = Some(help);
            }
        }
    }
}

/// The BMxBN nearest the spec's (ties: the smaller) that gives a SIMT geometry with its
/// warps and BK: warp tiles of whole lane grids.
fn suggest_simt_mn(s: &GemmSpec) -> Option<Tile> {
    let rows = SIMT_LANE_ROWS * s.warps.rows;
    let cols = SIMT_LANE_COLS * SIMT_COLUMN_GROUP * s.warps.cols;
    let near = |side: u32, step: u32| {
        let mut sides: Vec<u32> = (1..=Tile::MAX_SIDE / step).map(|i| i * step).collect();
        sides.sort_by_key(|&x| (x.abs_diff(side), x));
        sides.truncate(4);
        sides
    };
    let mut candidates: Vec<Tile> = near(s.tile.m, rows)
        .into_iter()
        .flat_map(|m| near(s.tile.n, cols).into_iter().map(move |n| (m, n)))
        .map(|(m, n)| Tile { m, n, k: s.tile.k })
        .collect();
    candidates.sort_by_key(|t| (t.m.abs_diff(s.tile.m) + t.n.abs_diff(s.tile.n), t.m, t.n));
    candidates.into_iter().find(|&tile| simt_tile_fits(s, tile))
}

/// The BK nearest the spec's (ties: the smaller) that gives a SIMT geometry with its warps.
fn suggest_simt_k(s: &GemmSpec) -> Option<u32> {
    let mut candidates: Vec<u32> = (1..=256).collect();
    candidates.sort_by_key(|&k| (k.abs_diff(s.tile.k), k));
    candidates
        .into_iter()
        .find(|&k| simt_tile_fits(s, Tile { k, ..s.tile }))
}

/// Whether `tile` (with the spec's warps) has a SIMT geometry whose registers fit: a tile
/// a help may propose (none for a spec whose threads do not copy).
fn simt_tile_fits(s: &GemmSpec, tile: Tile) -> bool {
    s.copy.thread_copy().is_some_and(|copy| {
        SimtGeometry::new(tile, s.warps, s.dtype, s.layout, copy)
            .is_ok_and(|g| simt_register_budget(&GemmSpec { tile, ..s.clone() }, &g).fits())
    })
}

/// Shared memory of the SIMT family, per operand as it lies in global memory (see
/// [`StoredTile`]): each line padded by `pad(N)`. A column-major B tile is stored in column
/// quarters ([`SIMT_B_QUARTERS`]), each quarter of a group row padded instead, which takes
/// the same bytes.
pub fn simt_smem_ledger(s: &GemmSpec) -> SmemLedger {
    let element = s.dtype.size_bytes();
    let pad = s.swizzle.pad_bytes();
    let pad_note = |pad: u32, per: &str| {
        if pad == 0 {
            String::new()
        } else {
            format!(" + {pad} B pad/{per}")
        }
    };
    let (a, b) = StoredTile::of(s.tile, s.layout);
    let bytes = |stored: StoredTile| stored.lines * (stored.line_elements * element + pad);
    let a_what = if s.layout.a_row_major() {
        format!(
            "A tile {}x{} {}{}",
            s.tile.m,
            s.tile.k,
            s.dtype.name(),
            pad_note(pad, "row")
        )
    } else {
        format!(
            "A tile {}x{} {} as {} columns{}",
            s.tile.m,
            s.tile.k,
            s.dtype.name(),
            s.tile.k,
            pad_note(pad, "column")
        )
    };
    let b_what = if s.layout.b_row_major() {
        format!(
            "B tile {}x{} {}{}",
            s.tile.k,
            s.tile.n,
            s.dtype.name(),
            pad_note(pad, "row")
        )
    } else {
        format!(
            "B tile {}x{} {} as {} column quarters of 4 k{}",
            s.tile.k,
            s.tile.n,
            s.dtype.name(),
            s.tile.k,
            pad_note(pad, "quarter")
        )
    };
    SmemLedger {
        per_stage: vec![
            LedgerLine {
                what: a_what,
                bytes: bytes(a),
            },
            LedgerLine {
                what: b_what,
                // Column quarters: BK / 4 group rows of four padded quarters.
                bytes: if s.layout.b_row_major() {
                    bytes(b)
                } else {
                    s.tile.k * (s.tile.n * element + pad)
                },
            },
        ],
        stages: s.stages,
        fixed: vec![
            LedgerLine {
                what: "barriers (cp.async groups and bar.sync need none)".into(),
                bytes: 0,
            },
            LedgerLine {
                what: "alignment (16-byte rows)".into(),
                bytes: 0,
            },
        ],
        overlay: None,
        limit: s.arch.max_smem_per_block(),
        arch: s.arch,
    }
}

/// The first legal warp grid (best first) for the spec's tile whose registers fit.
fn fitting_warp_grid(s: &GemmSpec, copy: ThreadCopy) -> Option<Grid2> {
    SimtGeometry::legal_warp_grids(s.tile, s.dtype, s.layout, copy)
        .into_iter()
        .find(|&w| {
            SimtGeometry::new(s.tile, w, s.dtype, s.layout, copy)
                .is_ok_and(|g| simt_register_budget(s, &g).fits())
        })
}

/// Registers of the SIMT family: what one k group of the inner loop keeps live. Calibrated
/// against ptxas 13.0 (sm_80/sm_90): the B fragments of all four k steps of a group are
/// loaded ahead of their FFMAs, and each 16-byte copy keeps a 64-bit pointer.
pub fn simt_register_budget(s: &GemmSpec, g: &SimtGeometry) -> RegisterBudget {
    let copies = g.a_copy.copies_per_thread + g.b_copy.copies_per_thread;
    // With a row-major A and a column-major B both operands are read as vectors along K, and
    // ptxas loads the next group's vectors during this one's FFMAs (measured: 246 registers
    // at 8x8 per thread, spills at 16x8): two groups of fragments.
    let groups = if s.layout == Layout::RowCol { 2 } else { 1 };
    let group_note = if groups == 2 { ", two k groups" } else { "" };
    let mut lines = vec![
        RegisterLine {
            what: format!("accumulators {}x{}", g.thread_tile_m, g.thread_tile_n),
            registers: g.thread_tile_m * g.thread_tile_n,
        },
        RegisterLine {
            what: format!("A fragments {} rows x 4 k{group_note}", g.thread_tile_m),
            registers: groups * g.thread_tile_m * 4,
        },
        RegisterLine {
            what: format!("B fragments 4 k x {}{group_note}", g.thread_tile_n),
            registers: groups * 4 * g.thread_tile_n,
        },
    ];
    if s.copy.is_sync() && s.stages > 1 {
        let vector = s.copy.vector_bytes();
        lines.push(RegisterLine {
            what: format!("copy staging {copies} x {vector} B"),
            registers: staging_words(vector) * copies,
        });
    }
    lines.push(RegisterLine {
        what: format!("addressing ({copies} global pointers, offsets, counters)"),
        registers: 2 * copies + 16,
    });
    RegisterBudget {
        lines,
        limit: RegisterBudget::limit_for(g.threads),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const F32: DType = DType::F32;

    #[test]
    fn default_tile_gives_8x8_per_thread() {
        let g = SimtGeometry::new(
            Tile {
                m: 128,
                n: 128,
                k: 8,
            },
            Grid2 { rows: 4, cols: 2 },
            F32,
            Layout::RowRow,
            ThreadCopy::CP_ASYNC_CG,
        )
        .unwrap();
        assert_eq!((g.thread_tile_m, g.thread_tile_n), (8, 8));
        assert_eq!(g.threads, 256);
        assert_eq!(g.a_copy.copies_per_thread, 1);
        assert_eq!(g.b_copy.copies_per_thread, 1);
    }

    #[test]
    fn legal_warp_grids_prefer_8x8() {
        let tile = Tile {
            m: 128,
            n: 128,
            k: 8,
        };
        assert_eq!(
            SimtGeometry::legal_warp_grids(tile, F32, Layout::RowRow, ThreadCopy::CP_ASYNC_CG)[0],
            Grid2 { rows: 4, cols: 2 }
        );
    }
}
