//! The Ampere tensor-core family (`mma: mma_sync`): ldmatrix from swizzled shared memory into
//! `mma.sync` with f32 accumulators. Its geometry, rules and budgets.

use crate::budget::{LedgerLine, RegisterBudget, RegisterLine, SmemLedger};
use crate::geometry::staging_words;
use crate::geometry::{
    operand_copies, rank_warp_grids, xor_swizzle_fits_row, CopyGeometry, CopySpread, StoredTile,
    COPY_VECTOR_BYTES, MAX_WARPS,
};
use crate::pick::family_cost::{Calibration, Candidate, FamilyCost, MathUnit};
use crate::rules::{Budgets, FamilyRules, Validator};
use crate::spec::*;

/// The input types `mma.sync` multiplies: every `dtype` but f32.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MmaInput {
    F16,
    Bf16,
    Tf32,
}

impl MmaInput {
    /// The type's name in PTX (`.f16`, `.bf16`, `.tf32` without the dot).
    pub fn name(self) -> &'static str {
        match self {
            MmaInput::F16 => "f16",
            MmaInput::Bf16 => "bf16",
            MmaInput::Tf32 => "tf32",
        }
    }
}

/// One `mma.sync` instruction's `m x n x k`: `m16n8k16` for f16/bf16, `m16n8k8` for tf32.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MmaShape {
    pub m: u32,
    pub n: u32,
    pub k: u32,
    pub input: MmaInput,
}

impl MmaShape {
    /// The shape of the tensor-core instruction for an input type; `None` for f32, which the
    /// tensor cores do not multiply, and fp8, which only Hopper's wgmma does here.
    pub fn for_dtype(dtype: DType) -> Option<MmaShape> {
        let (k, input) = match dtype {
            DType::F16 => (16, MmaInput::F16),
            DType::Bf16 => (16, MmaInput::Bf16),
            DType::Tf32 => (8, MmaInput::Tf32),
            DType::F32 | DType::E4m3 | DType::E5m2 => return None,
        };
        Some(MmaShape {
            m: 16,
            n: 8,
            k,
            input,
        })
    }

    /// Columns of B one warp-wide load covers: one `ldmatrix.x4` (`.trans` for a row-major
    /// B) gives the fragments of two n8 tiles; a row-major tf32 B, which no 32-bit
    /// `ldmatrix.trans` exists for, is read per n8 fragment with 32-bit shared loads.
    pub fn b_load_cols(self, dtype: DType, layout: Layout) -> u32 {
        match dtype {
            DType::Tf32 | DType::F32 if layout.b_row_major() => self.n,
            _ => 2 * self.n,
        }
    }
}

/// The Ampere tensor-core (`mma: mma_sync`) family's split of the block tile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MmaSyncGeometry {
    pub tile: Tile,
    pub warps: Grid2,
    pub threads: u32,
    pub warp_tile_m: u32,
    pub warp_tile_n: u32,
    pub shape: MmaShape,
    /// mma tiles per warp: `warp_tile_m / 16` rows of `warp_tile_n / 8` columns.
    pub m_frags: u32,
    pub n_frags: u32,
    /// mma k steps per block tile (`BK / shape.k`).
    pub k_steps: u32,
    /// A and B are stored as in global memory, copied along their contiguous dimension (see
    /// [`StoredTile`]).
    pub a_copy: CopyGeometry,
    pub b_copy: CopyGeometry,
    /// How the threads copy: registers or `cp.async`.
    pub copy: ThreadCopy,
}

/// Accumulator rows one epilogue band holds: one row of m16 mma tiles.
pub const EPILOGUE_BAND_ROWS: u32 = 16;

/// Shared memory of the staged epilogue: each warp converts one band of accumulator rows at
/// a time into output elements in a slab of its own, then reads the band back as 16-byte
/// vectors covering whole row segments, so global stores are full vectors on consecutive
/// addresses. Two slabs per warp alternate, so one warp barrier per band separates a band's
/// writes from its reads and from the reads of the band before.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EpilogueSlab {
    /// One warp-tile row in the output type.
    pub row_bytes: u32,
    /// Row to row: the row plus 8 elements, which spreads the mma fragment's writes (8 rows
    /// by 4 lanes) over all 32 banks.
    pub pitch: u32,
    pub vectors_per_row: u32,
    pub bytes_per_warp: u32,
    /// Every warp's slabs.
    pub bytes: u32,
}

/// Why a tile/warp combination has no mma.sync geometry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MmaSyncGeometryError {
    /// The input type has no tensor-core shape (f32).
    Dtype,
    WarpCount,
    WarpGridDoesNotDivide,
    WarpTile {
        warp_tile_m: u32,
        warp_tile_n: u32,
        /// Required multiples of the warp tile's rows and columns.
        m_step: u32,
        n_step: u32,
    },
    TileK {
        k_step: u32,
    },
    CopySpread(CopySpread),
}

impl MmaSyncGeometry {
    pub fn new(
        tile: Tile,
        warps: Grid2,
        dtype: DType,
        layout: Layout,
        copy: ThreadCopy,
    ) -> Result<MmaSyncGeometry, MmaSyncGeometryError> {
        let shape = MmaShape::for_dtype(dtype).ok_or(MmaSyncGeometryError::Dtype)?;
        if warps.count() == 0 || warps.count() > MAX_WARPS {
            return Err(MmaSyncGeometryError::WarpCount);
        }
        if !tile.m.is_multiple_of(warps.rows) || !tile.n.is_multiple_of(warps.cols) {
            return Err(MmaSyncGeometryError::WarpGridDoesNotDivide);
        }
        let warp_tile_m = tile.m / warps.rows;
        let warp_tile_n = tile.n / warps.cols;
        let n_step = shape.b_load_cols(dtype, layout);
        if warp_tile_m == 0
            || warp_tile_n == 0
            || !warp_tile_m.is_multiple_of(shape.m)
            || !warp_tile_n.is_multiple_of(n_step)
        {
            return Err(MmaSyncGeometryError::WarpTile {
                warp_tile_m,
                warp_tile_n,
                m_step: shape.m,
                n_step,
            });
        }
        if !tile.k.is_multiple_of(shape.k) {
            return Err(MmaSyncGeometryError::TileK { k_step: shape.k });
        }
        let element = dtype.size_bytes();
        let threads = warps.count() * 32;
        let (a_copy, b_copy) = operand_copies(tile, layout, element, threads, copy.vector_bytes())
            .map_err(MmaSyncGeometryError::CopySpread)?;
        Ok(MmaSyncGeometry {
            tile,
            warps,
            threads,
            warp_tile_m,
            warp_tile_n,
            shape,
            m_frags: warp_tile_m / shape.m,
            n_frags: warp_tile_n / shape.n,
            k_steps: tile.k / shape.k,
            a_copy,
            b_copy,
            copy,
        })
    }

    /// f32 accumulator registers per thread: four per m16n8 tile.
    pub fn accumulators(&self) -> u32 {
        self.m_frags * self.n_frags * 4
    }

    /// The shared-memory slabs of the staged epilogue, or `None` when a warp tile row is not
    /// a whole number of 16-byte vectors that the 32 lanes share out evenly (the kernel then
    /// stores straight from the accumulator registers).
    pub fn epilogue_slab(&self, out: DType) -> Option<EpilogueSlab> {
        let element = out.size_bytes();
        let row_bytes = self.warp_tile_n * element;
        if !row_bytes.is_multiple_of(COPY_VECTOR_BYTES) {
            return None;
        }
        let vectors_per_row = row_bytes / COPY_VECTOR_BYTES;
        let lanes_share_rows = 32 % vectors_per_row == 0 || vectors_per_row.is_multiple_of(32);
        if !(EPILOGUE_BAND_ROWS * vectors_per_row).is_multiple_of(32) || !lanes_share_rows {
            return None;
        }
        let pitch = row_bytes + 8 * element;
        let bytes_per_warp = 2 * EPILOGUE_BAND_ROWS * pitch;
        Some(EpilogueSlab {
            row_bytes,
            pitch,
            vectors_per_row,
            bytes_per_warp,
            bytes: bytes_per_warp * self.warps.count(),
        })
    }

    /// Legal warp grids for a tile, best first: warp tiles closest to 64x64 (128 accumulators
    /// per thread), then square ones, then fewer warps.
    pub fn legal_warp_grids(
        tile: Tile,
        dtype: DType,
        layout: Layout,
        copy: ThreadCopy,
    ) -> Vec<Grid2> {
        rank_warp_grids(|warps| {
            let g = MmaSyncGeometry::new(tile, warps, dtype, layout, copy).ok()?;
            let area = g.warp_tile_m * g.warp_tile_n;
            Some(area.abs_diff(64 * 64) + g.warp_tile_m.abs_diff(g.warp_tile_n))
        })
    }
}

/// The Ampere tensor-core family's defaults and scope.
pub(crate) struct MmaSync;

impl FamilyRules for MmaSync {
    fn describe(&self) -> &'static str {
        "`mma: mma_sync` (Ampere tensor cores)"
    }

    fn scope_note(&self) -> &'static str {
        "only f16/bf16/tf32 inputs with f32 accumulators, out f32 or the input type, \
         copy sync or cp_async, no cluster, epilogue direct, is"
    }

    fn scope(&self, v: &Validator<'_>) -> Vec<(Key, String, bool)> {
        let s = v.spec;
        let out_ok = s.out == DType::F32 || (s.out == s.dtype && s.dtype != DType::Tf32);
        [(Key::Out, s.out.name().to_string(), out_ok)]
            .into_iter()
            .chain(v.block_copy_scope())
            .collect()
    }

    fn dtype(&self) -> DType {
        DType::Bf16
    }

    fn tile(&self, _dtype: DType) -> Tile {
        Tile {
            m: 128,
            n: 128,
            k: 32,
        }
    }

    fn warps(&self, _tile: Tile, _consumers: u32) -> Grid2 {
        Grid2 { rows: 2, cols: 2 }
    }

    fn stages(&self) -> u32 {
        3
    }

    /// A persistent block overlaps the next tile's copies with the epilogue: a ring.
    fn min_stages(&self, spec: &GemmSpec) -> u32 {
        match spec.schedule {
            Schedule::Persistent { .. } => 2,
            Schedule::Tile => 1,
        }
    }

    /// The 128-byte XOR keeps ldmatrix conflict-free for A (K rows) and B (N rows) alike;
    /// rows it does not fit are padded.
    fn swizzle(&self, dtype: DType, tile: Tile) -> Swizzle {
        let element = dtype.size_bytes();
        let fits = |elements: u32| xor_swizzle_fits_row(elements.saturating_mul(element));
        if fits(tile.k) && fits(tile.n) {
            Swizzle::Xor128
        } else {
            Swizzle::Pad(16)
        }
    }

    fn consumers(&self) -> u32 {
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

    /// mma.sync runs on every target (sm_80 and newer).
    fn math_target(&self) -> Option<(Arch, Mma)> {
        None
    }

    fn tma_target(&self) -> Option<Arch> {
        None
    }

    fn f32_inputs_help(&self) -> Option<&'static str> {
        Some("dtype: tf32 (f32 storage, tf32 multiply), or mma: fma")
    }

    fn multiplies_fp8(&self) -> bool {
        false
    }
}

impl FamilyCost for MmaSync {
    fn math_unit(&self) -> MathUnit {
        MathUnit::TensorCores
    }

    fn main_loop_efficiency(
        &self,
        fitted: &Calibration,
        _candidate: &Candidate,
        _blocks_on_sm: f64,
    ) -> f64 {
        fitted.mma_sync
    }

    fn k_tile_overhead_clk(&self, _blocks_on_sm: f64) -> f64 {
        80.0
    }

    /// The threads' `cp.async` ring waits out less latency than the TMA ring (fitted).
    fn ring_latency_share(&self, fitted: &Calibration) -> f64 {
        fitted.mma_sync_latency_share
    }
}

impl Validator<'_> {
    /// The Ampere tensor-core family: f16/bf16 (`m16n8k16`) or tf32 (`m16n8k8`) with f32
    /// accumulators, any layout, cp.async or sync copies into swizzled or padded shared memory.
    pub(crate) fn mma_sync(&mut self) -> Option<(MmaSyncGeometry, Budgets)> {
        let s = self.spec;
        if matches!(s.schedule, Schedule::Persistent { .. })
            && !(s.copy.is_cp_async() && s.stages > 1)
        {
            // At what falls short of the ring: the schedule itself is fine.
            let key = if s.copy.is_cp_async() {
                Key::Stages
            } else {
                Key::Copy
            };
            let error = self.error(
                key,
                format!(
                    "`schedule: {}` needs the cp.async ring (`copy: cp_async`, 2 or more stages)",
                    s.schedule
                ),
            );
            error.notes.push(
                "a persistent block issues the next tile's first copies before it stores the \
                 current tile, so they land while the epilogue runs"
                    .to_string(),
            );
            // Only what falls short: the ring's copy, and its shallowest depth.
            if !s.copy.is_cp_async() {
                error.fix.push((Key::Copy, "cp_async".to_string()));
            }
            // A deeper ring may not fit in shared memory (checked later): advice, no edit.
            error.help = Some(if s.stages < 2 {
                error.fix.clear();
                "copy: cp_async with 2 or more stages, or schedule: tile".to_string()
            } else {
                "copy: cp_async".to_string()
            });
        }
        if let Schedule::Persistent {
            raster,
            group,
            tail: Tail::StreamK,
        } = s.schedule
        {
            self.help(
                Key::Schedule,
                "`tail = stream_k` is implemented for `mma: wgmma` only; the mma.sync walk shares out whole tiles",
                format!(
                    "schedule: {}",
                    Schedule::Persistent {
                        raster,
                        group,
                        tail: Tail::Whole,
                    }
                ),
            );
        }

        let element = s.dtype.size_bytes();
        match s.swizzle {
            Swizzle::Pad(bytes) => self.padding_error(bytes, "cp.async copies and ldmatrix rows"),
            Swizzle::Xor32 | Swizzle::Xor64 | Swizzle::Xor128 => {
                let (a, b) = StoredTile::of(s.tile, s.layout);
                let dim = |stored: StoredTile, mn| if stored.lines_are_k { mn } else { "BK" };
                for (operand, dim, row_elements) in [
                    ('A', dim(a, "BM"), a.line_elements),
                    ('B', dim(b, "BN"), b.line_elements),
                ] {
                    let row_bytes = row_elements * element;
                    if !xor_swizzle_fits_row(row_bytes) {
                        let error = self.error(
                            Key::Swizzle,
                            format!(
                                "`swizzle: {}` permutes 16-byte chunks within 128-byte lines, but a shared-memory row of {operand} is {row_elements} x {} = {row_bytes} bytes",
                                s.swizzle,
                                s.dtype.name()
                            ),
                        );
                        error.notes.push(
                            "XOR swizzles need rows of 16, 32, 64, 128 bytes or a multiple of 128 bytes"
                                .to_string(),
                        );
                        error.help = Some(format!(
                            "swizzle: pad(16), or a tile whose {dim}·sizeof({}) is a power of two or a multiple of 128",
                            s.dtype.name()
                        ));
                        break;
                    }
                }
            }
            _ => {}
        }
        if !self.errors.is_empty() {
            return None;
        }

        let copy = self.thread_copy()?;
        let geometry = match MmaSyncGeometry::new(s.tile, s.warps, s.dtype, s.layout, copy) {
            Ok(g) => g,
            Err(error) => {
                self.mma_sync_geometry_error(error, copy);
                return None;
            }
        };
        // The ledger at any stage count: the over-budget help proposes one.
        let smem = |stages| {
            mma_sync_smem_ledger(
                &GemmSpec {
                    stages,
                    ..s.clone()
                },
                &geometry,
            )
        };
        let registers = mma_sync_register_budget(s, &geometry);
        let smaller_tiles = || {
            fitting_warp_grid(s, copy).map(|w| format!("warps: {w} gives each warp a smaller tile"))
        };
        let label = format!(
            "{}x{} warp tile = {} f32 accumulators per thread",
            geometry.warp_tile_m,
            geometry.warp_tile_n,
            geometry.accumulators()
        );
        let budgets = self.finish(geometry.threads, smem, registers, label, smaller_tiles)?;
        Some((geometry, budgets))
    }

    fn mma_sync_geometry_error(&mut self, error: MmaSyncGeometryError, copy: ThreadCopy) {
        let s = self.spec;
        // A grid whose registers do not fit would only move the error on.
        let suggestion = fitting_warp_grid(s, copy).map(|w| format!("warps: {w}"));
        let warps_key = self.warps_key();
        match error {
            MmaSyncGeometryError::Dtype => self.help(
                Key::Dtype,
                format!(
                    "tensor cores (`mma: mma_sync`) do not multiply {} inputs",
                    s.dtype.name()
                ),
                "dtype: bf16, f16 or tf32",
            ),
            MmaSyncGeometryError::WarpCount => {
                self.warp_count_error(suggestion.unwrap_or_else(|| {
                    "use fewer warps (ROWS x COLS at most 32) and a smaller tile".into()
                }))
            }
            MmaSyncGeometryError::WarpGridDoesNotDivide => {
                self.warp_grid_error(warps_key, suggestion)
            }
            MmaSyncGeometryError::WarpTile {
                warp_tile_m,
                warp_tile_n,
                m_step,
                n_step,
            } => {
                let error = self.error(
                    warps_key,
                    format!(
                        "warp tile {warp_tile_m}x{warp_tile_n} does not fit the {} tensor-core fragments: \
                         its rows must be a multiple of {m_step} and its columns of {n_step}",
                        s.dtype.name()
                    ),
                );
                error.notes.push(if n_step == 16 && s.layout.b_row_major() {
                    "one ldmatrix.x4 loads A for 16 rows, one ldmatrix.x4.trans loads B for 16 columns (two m16n8 tiles)".to_string()
                } else if n_step == 16 {
                    "one ldmatrix.x4 loads A for 16 rows, one ldmatrix.x4 loads a column-major B for 16 columns (two m16n8 tiles)".to_string()
                } else {
                    "one ldmatrix.x4 loads A for 16 rows; B is read per 8-column mma tile".to_string()
                });
                error.help = Some(suggestion.unwrap_or_else(|| {
                    format!("use a tile with BM a multiple of {m_step} and BN of {n_step}")
                }));
            }
            MmaSyncGeometryError::TileK { k_step } => {
                // The nearest multiple of the mma's k (the next one up on a tie) whose copies
                // spread over the threads and whose registers fit, else the next multiple.
                let fits = |k: u32| {
                    let tile = Tile { k, ..s.tile };
                    MmaSyncGeometry::new(tile, s.warps, s.dtype, s.layout, copy).is_ok_and(|g| {
                        mma_sync_register_budget(&GemmSpec { tile, ..s.clone() }, &g).fits()
                    })
                };
                let mut multiples: Vec<u32> = (1..=256 / k_step).map(|i| i * k_step).collect();
                multiples.sort_by_key(|&k| (k.abs_diff(s.tile.k), k < s.tile.k));
                let legal_k = multiples
                    .into_iter()
                    .find(|&k| fits(k))
                    .unwrap_or_else(|| s.tile.k.div_ceil(k_step).max(1) * k_step);
                self.help(
                    Key::Tile,
                    format!(
                        "BK = {} is not a multiple of the {} mma's k = {k_step}",
                        s.tile.k,
                        s.dtype.name()
                    ),
                    format!("tile: {}x{}x{legal_k}", s.tile.m, s.tile.n),
                );
            }
            MmaSyncGeometryError::CopySpread(spread) => {
                let help = suggestion.filter(|w| *w != format!("warps: {}", s.warps));
                self.copy_spread_error(spread, help);
            }
        }
    }
}

/// Shared memory of the tensor-core family: A as `BM x BK` and B as `BK x BN` per stage, each
/// row padded or XOR-swizzled in place (a swizzle costs no bytes).
pub fn mma_sync_smem_ledger(s: &GemmSpec, g: &MmaSyncGeometry) -> SmemLedger {
    let element = s.dtype.size_bytes();
    let pad = s.swizzle.pad_bytes();
    let layout_note = match s.swizzle {
        Swizzle::None => String::new(),
        Swizzle::Pad(bytes) => format!(" + {bytes} B pad/row"),
        xor => format!(", {xor} XOR swizzle"),
    };
    let (a, b) = StoredTile::of(s.tile, s.layout);
    let lines_note = |stored: StoredTile, row_major: bool| {
        if row_major {
            String::new()
        } else {
            format!(" as {} columns", stored.lines)
        }
    };
    let a_note = lines_note(a, s.layout.a_row_major());
    let b_note = lines_note(b, s.layout.b_row_major());
    let slabs = g.epilogue_slab(s.out).map(|slab| LedgerLine {
        what: format!(
            "epilogue: {} warps x 2 slabs x {EPILOGUE_BAND_ROWS} rows x {} B",
            g.warps.count(),
            slab.pitch
        ),
        bytes: slab.bytes,
    });
    // A persistent block copies the next tile into the ring while it stores this one, so its
    // slabs need room of their own; one tile per block lays them over the drained ring.
    let (after_ring, overlay) = match s.schedule {
        Schedule::Persistent { .. } => (slabs, None),
        Schedule::Tile => (None, slabs),
    };
    SmemLedger {
        per_stage: vec![
            LedgerLine {
                what: format!(
                    "A tile {}x{} {}{a_note}{layout_note}",
                    s.tile.m,
                    s.tile.k,
                    s.dtype.name()
                ),
                bytes: a.lines * (a.line_elements * element + pad),
            },
            LedgerLine {
                what: format!(
                    "B tile {}x{} {}{b_note}{layout_note}",
                    s.tile.k,
                    s.tile.n,
                    s.dtype.name()
                ),
                bytes: b.lines * (b.line_elements * element + pad),
            },
        ],
        stages: s.stages,
        fixed: vec![
            LedgerLine {
                what: "barriers (cp.async groups and bar.sync need none)".into(),
                bytes: 0,
            },
            LedgerLine {
                what: "alignment (tiles are whole 128-byte lines)".into(),
                bytes: 0,
            },
        ]
        .into_iter()
        .chain(after_ring)
        .collect(),
        overlay,
        limit: s.arch.max_smem_per_block(),
        arch: s.arch,
    }
}

/// The first legal warp grid (best first) for the spec's tile whose registers fit.
fn fitting_warp_grid(s: &GemmSpec, copy: ThreadCopy) -> Option<Grid2> {
    MmaSyncGeometry::legal_warp_grids(s.tile, s.dtype, s.layout, copy)
        .into_iter()
        .find(|&w| {
            MmaSyncGeometry::new(s.tile, w, s.dtype, s.layout, copy)
                .is_ok_and(|g| mma_sync_register_budget(s, &g).fits())
        })
}

/// Registers of the tensor-core family: accumulators, A fragments of two k steps in flight,
/// B fragments of up to two, copy staging for `copy: sync`, and addressing (shared-memory
/// bases, global pointers, counters). Calibrated against ptxas 13.0 with `.maxnreg` over some
/// 800 valid specs for sm_80 and sm_90 with fragments loaded at the top of each tile. Since
/// fragments run ahead across the barrier, ptxas keeps more live where registers allow: for
/// 64x64 warp tiles it allocates 246-255 against an estimate of 232-236, still under the
/// limit and without spills (the assemble tests check every catalog kernel); recalibrating
/// is open work.
pub fn mma_sync_register_budget(s: &GemmSpec, g: &MmaSyncGeometry) -> RegisterBudget {
    let copies = g.a_copy.copies_per_thread + g.b_copy.copies_per_thread;
    let b_sets = g.k_steps.min(2);
    let mut lines = vec![
        RegisterLine {
            what: format!("accumulators {}x{} mma tiles x 4 f32", g.m_frags, g.n_frags),
            registers: g.accumulators(),
        },
        RegisterLine {
            what: format!("A fragments {} x 4 b32, two k steps", g.m_frags),
            registers: 2 * g.m_frags * 4,
        },
        RegisterLine {
            what: format!("B fragments {} x 2 b32, {b_sets} k step(s)", g.n_frags),
            registers: b_sets * g.n_frags * 2,
        },
    ];
    if s.copy.is_sync() && s.stages > 1 {
        let vector = s.copy.vector_bytes();
        lines.push(RegisterLine {
            what: format!("copy staging {copies} x {vector} B, and their addresses"),
            registers: (staging_words(vector) + 2) * copies,
        });
    }
    let per_copy = if s.copy.is_sync() && s.stages > 1 {
        0
    } else if s.dtype == DType::Tf32 {
        // Half-width tiles per copy: twice the copies, and the scalar B reads' bases.
        copies.div_ceil(2) * 3
    } else {
        copies
    };
    lines.push(RegisterLine {
        what: format!("addressing ({copies} copies, shared-memory bases, counters)"),
        registers: 32 + per_copy,
    });
    if let Schedule::Persistent { .. } = s.schedule {
        lines.push(RegisterLine {
            what: "persistent schedule: tile index, C tile origin".to_string(),
            registers: 2,
        });
    }
    RegisterBudget {
        lines,
        limit: RegisterBudget::limit_for(g.threads),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    // End to end through the crate root: the tests exercise this family via the dispatch.
    use crate::{check_str, Family, SpecError};

    const RR: Layout = Layout::RowRow;

    fn errors(text: &str) -> Vec<SpecError> {
        check_str(text).expect_err("spec must be invalid").0
    }

    fn message(text: &str) -> String {
        errors(text)[0].message.clone()
    }

    #[test]
    fn mma_sync_geometry_of_the_default_tile() {
        let tile = Tile {
            m: 128,
            n: 128,
            k: 32,
        };
        let g = MmaSyncGeometry::new(
            tile,
            Grid2 { rows: 2, cols: 2 },
            DType::Bf16,
            RR,
            ThreadCopy::CP_ASYNC_CG,
        )
        .unwrap();
        assert_eq!((g.warp_tile_m, g.warp_tile_n), (64, 64));
        assert_eq!((g.m_frags, g.n_frags, g.k_steps), (4, 8, 2));
        assert_eq!(g.accumulators(), 128);
        // A: 128 rows x 4 vectors = 512 copies over 128 threads.
        assert_eq!(g.a_copy.copies_per_thread, 4);
        assert_eq!(g.b_copy.copies_per_thread, 4);
        let tf32 = MmaSyncGeometry::new(
            tile,
            Grid2 { rows: 2, cols: 2 },
            DType::Tf32,
            RR,
            ThreadCopy::CP_ASYNC_CG,
        )
        .unwrap();
        assert_eq!(tf32.k_steps, 4);
        assert_eq!(tf32.a_copy.copies_per_thread, 8);
        assert_eq!(
            MmaSyncGeometry::new(
                tile,
                Grid2 { rows: 2, cols: 2 },
                DType::F32,
                RR,
                ThreadCopy::CP_ASYNC_CG
            ),
            Err(MmaSyncGeometryError::Dtype)
        );
        // 16-bit B is loaded 16 columns at a time, tf32 B 8 at a time.
        let narrow = Grid2 { rows: 1, cols: 16 };
        assert!(matches!(
            MmaSyncGeometry::new(tile, narrow, DType::Bf16, RR, ThreadCopy::CP_ASYNC_CG),
            Err(MmaSyncGeometryError::WarpTile { n_step: 16, .. })
        ));
        assert!(
            MmaSyncGeometry::new(tile, narrow, DType::Tf32, RR, ThreadCopy::CP_ASYNC_CG).is_ok()
        );
        assert_eq!(
            MmaSyncGeometry::legal_warp_grids(tile, DType::Bf16, RR, ThreadCopy::CP_ASYNC_CG)[0],
            Grid2 { rows: 2, cols: 2 }
        );
    }

    #[test]
    fn tensor_core_family() {
        let v = check_str("mma: mma_sync").unwrap();
        let Family::MmaSync(g) = v.family else {
            panic!("not the mma_sync family")
        };
        assert_eq!(v.threads_per_block(), 128);
        assert_eq!((g.warp_tile_m, g.warp_tile_n), (64, 64));
        assert_eq!(v.spec.swizzle, Swizzle::Xor128);
        assert_eq!(v.spec.out, DType::Bf16);
        // 3 stages of A 128x32 and B 32x128 bf16.
        assert_eq!(v.smem.total(), 3 * (8192 + 8192));
        for text in [
            "mma: mma_sync, dtype: tf32, tile: 128x128x16, stages: 4",
            "mma: mma_sync, dtype: f16, out: f32, tile: 64x64x64, warps: 2x2, stages: 2",
            "mma: mma_sync, copy: sync, tile: 128x128x32, warps: 2x4, stages: 2",
            "mma: mma_sync, arch: sm_90a, tile: 128x256x32, warps: 2x4, stages: 4",
            "mma: mma_sync, swizzle: pad(16), stages: 1",
            "mma: mma_sync, copy: cp_async(ca), swizzle: 32B",
        ] {
            check_str(text).unwrap_or_else(|e| panic!("{text}: {e}"));
        }
        assert!(message("mma: mma_sync, dtype: f32").contains("do not multiply f32"));
        let e = &errors("mma: mma_sync, tile: 128x128x24")[0];
        assert!(
            e.message
                .contains("not a multiple of the bf16 mma's k = 16"),
            "{e:?}"
        );
        assert_eq!(e.help.as_deref(), Some("tile: 128x128x32"));
        let e = &errors("mma: mma_sync, tile: 128x128x32, warps: 1x16")[0];
        assert!(e.message.contains("warp tile 128x8"), "{e:?}");
        assert_eq!(e.help.as_deref(), Some("warps: 2x2"));
        let e = &errors("mma: mma_sync, tile: 96x96x32, warps: 3x2, swizzle: 128B")[0];
        assert!(e
            .message
            .contains("a shared-memory row of B is 96 x bf16 = 192 bytes"));
        assert!(e.help.as_deref().unwrap().starts_with("swizzle: pad(16)"));
        // Rows that fit no XOR default to padding.
        let v = check_str("mma: mma_sync, tile: 96x96x32, warps: 3x2").unwrap();
        assert_eq!(v.spec.swizzle, Swizzle::Pad(16));
        let e = &errors("mma: mma_sync, swizzle: pad(8)")[0];
        assert_eq!(e.help.as_deref(), Some("swizzle: pad(16)"));
        // 256 accumulators per thread do not fit.
        let e = &errors("mma: mma_sync, tile: 256x128x32, warps: 2x2")[0];
        assert!(e.message.contains("registers per thread"), "{e:?}");
        assert_eq!(
            e.help.as_deref(),
            Some("warps: 4x2 gives each warp a smaller tile")
        );
        let e = &errors("mma: mma_sync, tile: 256x128x64, warps: 4x2, stages: 6")[0];
        assert!(e.message.starts_with("shared memory over budget for sm_80"));
        assert!(message("mma: mma_sync, consumers: 2").contains("not implemented yet"));
    }

    #[test]
    fn persistent_schedules_need_the_cp_async_ring_and_own_slabs() {
        let tile = "arch: sm_90, mma: mma_sync, tile: 128x256x64, warps: 2x4, stages: 3";
        let overlaid = check_str(tile).unwrap();
        let persistent = check_str(&format!("{tile}, schedule: persistent")).unwrap();
        // The slabs (8 warps x 2 x 16 rows x 144 B) move from over the ring to after it.
        let slabs = 8 * 2 * 16 * 144;
        assert_eq!(overlaid.smem.total(), 3 * 48 * 1024);
        assert_eq!(persistent.smem.total(), 3 * 48 * 1024 + slabs);
        assert!(persistent.smem.overlay.is_none());
        assert!(persistent.registers.total() > overlaid.registers.total());
        // Four stages fit only when the slabs overlay the ring.
        let deep = message(
            "arch: sm_90, mma: mma_sync, tile: 128x256x64, warps: 2x4, stages: 4, schedule: persistent",
        );
        assert!(deep.contains("shared memory over budget"), "{deep}");
        for (spec, why) in [
            (
                "mma: mma_sync, copy: sync, schedule: persistent",
                "cp.async ring",
            ),
            (
                "mma: mma_sync, stages: 1, schedule: persistent",
                "cp.async ring",
            ),
            (
                "mma: mma_sync, schedule: persistent(raster = n, group = 0)",
                "1 to 64 tiles",
            ),
            (
                "mma: mma_sync, schedule: persistent(group = 65)",
                "1 to 64 tiles",
            ),
            ("schedule: persistent", "not implemented yet"),
            (
                "mma: mma_sync, schedule: persistent(raster = n, tail = stream_k)",
                "`tail = stream_k` is implemented for `mma: wgmma` only",
            ),
        ] {
            let text = message(spec);
            assert!(text.contains(why), "{spec}: {text}");
        }
    }
}
