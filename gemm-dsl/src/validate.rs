//! Validation: every rule the hardware (and the implemented kernel families) impose, each an
//! error at the offending token with a `help` proposing a legal value.

use crate::budget::{LedgerLine, Occupancy, RegisterBudget, RegisterLine, SmemLedger};
use crate::error::{SpecError, SpecErrors};
use crate::geometry::{
    xor_swizzle_fits_row, CopySpread, MmaSyncGeometry, MmaSyncGeometryError, SimtGeometry,
    SimtGeometryError, COPY_VECTOR_BYTES, EPILOGUE_BAND_ROWS,
};
use crate::parse::{ParsedSpec, SpecSpans};
use crate::spec::*;

/// The most pipeline stages a spec may ask for.
pub const MAX_STAGES: u32 = 8;

/// The most tiles one band of a persistent schedule's raster may be wide (enough to cover
/// every SM's tiles in a band several times over, small enough that tile arithmetic stays
/// far from 32-bit overflow).
pub const MAX_RASTER_GROUP: u32 = 64;

/// The kernel family a valid spec belongs to, with its geometry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    /// `mma: fma`: warp-tiled SIMT FFMA.
    Simt(SimtGeometry),
    /// `mma: mma_sync`: Ampere tensor cores, ldmatrix from swizzled shared memory.
    MmaSync(MmaSyncGeometry),
}

/// A spec that passed every rule, with the budgets computed on the way.
#[derive(Clone, Debug)]
pub struct ValidSpec {
    pub spec: GemmSpec,
    pub family: Family,
    pub smem: SmemLedger,
    pub registers: RegisterBudget,
    pub occupancy: Occupancy,
}

impl ValidSpec {
    pub fn threads_per_block(&self) -> u32 {
        match &self.family {
            Family::Simt(g) => g.threads,
            Family::MmaSync(g) => g.threads,
        }
    }
}

impl ParsedSpec {
    pub fn validate(&self) -> Result<ValidSpec, SpecErrors> {
        validate(&self.spec, &self.spans)
    }
}

impl GemmSpec {
    /// Validates a spec built in code; errors point at the call site.
    pub fn validate(&self) -> Result<ValidSpec, SpecErrors> {
        validate(self, &SpecSpans::synthetic(proc_macro2::Span::call_site()))
    }
}

/// Parses and validates spec text in one step.
pub fn check_str(text: &str) -> Result<ValidSpec, SpecErrors> {
    crate::parse::parse_str(text)?.validate()
}

pub fn validate(spec: &GemmSpec, spans: &SpecSpans) -> Result<ValidSpec, SpecErrors> {
    let mut v = Validator {
        spec,
        spans,
        errors: Vec::new(),
    };
    v.ranges();
    v.arch_features();
    v.tensor_dtypes();
    if !v.errors.is_empty() {
        return Err(SpecErrors(v.errors));
    }
    let valid = match spec.mma {
        Mma::Fma => v.simt(),
        Mma::MmaSync => v.mma_sync(),
        Mma::Wgmma => {
            v.errors.push(not_implemented(
                spans.value(Key::Mma),
                "mma",
                spec.mma.name(),
                "only `mma: fma` (SIMT) and `mma: mma_sync` (Ampere tensor cores) are",
            ));
            None
        }
    };
    match valid {
        Some(valid) if v.errors.is_empty() => Ok(valid),
        _ => Err(SpecErrors(v.errors)),
    }
}

fn not_implemented(span: proc_macro2::Span, key: &str, value: &str, instead: &str) -> SpecError {
    SpecError::new(
        span,
        format!("`{key}: {value}` is not implemented yet for this family"),
    )
    .help(format!("{instead} implemented so far"))
}

struct Validator<'a> {
    spec: &'a GemmSpec,
    spans: &'a SpecSpans,
    errors: Vec<SpecError>,
}

impl Validator<'_> {
    fn error(&mut self, key: Key, message: impl Into<String>) -> &mut SpecError {
        self.errors
            .push(SpecError::new(self.spans.value(key), message));
        self.errors.last_mut().expect("just pushed")
    }

    /// Where a problem of the warp grid points: at `warps:` if the spec wrote it, else at the
    /// tile the default grid came from.
    fn warps_key(&self) -> Key {
        if self.spans.given(Key::Warps) {
            Key::Warps
        } else {
            Key::Tile
        }
    }

    fn help(&mut self, key: Key, message: impl Into<String>, help: impl Into<String>) {
        let error = self.error(key, message);
        error.help = Some(help.into());
    }

    /// Numeric ranges that hold for every family. They run first, and validation stops when
    /// one fails, so the rules after them compute with bounded numbers: no product of a
    /// spec's numbers overflows 32 bits, in debug builds (a panic) or release (a wrap).
    fn ranges(&mut self) {
        use crate::geometry::MAX_WARPS;
        let s = self.spec;
        if !(1..=MAX_STAGES).contains(&s.stages) {
            let legal = s.stages.clamp(1, MAX_STAGES);
            self.help(
                Key::Stages,
                format!(
                    "stages must be between 1 and {MAX_STAGES}, not {}",
                    s.stages
                ),
                format!("stages: {legal}"),
            );
        }
        let tile_sides = [s.tile.m, s.tile.n, s.tile.k];
        if tile_sides.contains(&0) {
            self.help(
                Key::Tile,
                format!("tile dimensions must be positive, not {}", s.tile),
                "e.g. tile: 128x128x8",
            );
        } else if tile_sides.iter().any(|&side| side > Tile::MAX_SIDE) {
            let max = Tile::MAX_SIDE;
            self.help(
                Key::Tile,
                format!("tile dimensions must be 1 to {max}, not {}", s.tile),
                format!("BM, BN and BK are each 1 to {max}, e.g. tile: 128x128x8"),
            );
        }
        if s.warps.rows == 0 || s.warps.cols == 0 {
            self.help(
                Key::Warps,
                "the warp grid must have at least one warp",
                "e.g. warps: 4x2",
            );
        } else if self.spans.given(Key::Warps) && s.warps.rows.max(s.warps.cols) > MAX_WARPS {
            // A default grid comes from the tile (or `consumers`), bounded here; the family
            // rules report one that holds too many warps, with a grid that fits.
            self.help(
                Key::Warps,
                format!(
                    "a block holds 1 to {MAX_WARPS} warps ({} threads), not {}",
                    MAX_WARPS * 32,
                    s.warps
                ),
                format!("warps: ROWSxCOLS with ROWS x COLS from 1 to {MAX_WARPS}, e.g. warps: 4x2"),
            );
        }
        if s.consumers == 0 || s.consumers > 4 {
            self.help(
                Key::Consumers,
                format!("consumers must be 1 to 4 warpgroups, not {}", s.consumers),
                "consumers: 2",
            );
        }
        if s.cluster.rows == 0 || s.cluster.cols == 0 || s.cluster.count() > 16 {
            self.help(
                Key::Cluster,
                format!("a cluster holds 1 to 16 blocks, not {}", s.cluster),
                "cluster: 1x1",
            );
        }
        if let Swizzle::Pad(bytes) = s.swizzle {
            let max = Swizzle::MAX_PAD_BYTES;
            if bytes > max {
                self.help(
                    Key::Swizzle,
                    format!("row padding is 0 to {max} bytes, not {bytes}"),
                    format!("swizzle: pad(16), or another multiple of 16 up to {max}"),
                );
            }
        }
        if let Copy::Tma { multicast } = s.copy {
            if multicast == 0 || multicast > 16 {
                self.help(
                    Key::Copy,
                    format!("TMA multicast reaches 1 to 16 blocks, not {multicast}"),
                    "copy: tma(multicast = 2)",
                );
            }
        }
        if let Schedule::Persistent { group, .. } = s.schedule {
            if group == 0 || group > MAX_RASTER_GROUP {
                self.help(
                    Key::Schedule,
                    format!("a raster group holds 1 to {MAX_RASTER_GROUP} tiles, not {group}"),
                    "schedule: persistent(raster = m, group = 8)",
                );
            }
        }
    }

    /// What each architecture can execute.
    fn arch_features(&mut self) {
        let s = self.spec;
        let arch = s.arch.name();
        match s.copy {
            Copy::CpAsync(_) if !s.arch.has_cp_async() => self.help(
                Key::Copy,
                format!("`copy: {}` needs sm_80 or newer, not {arch}", s.copy),
                "copy: sync",
            ),
            Copy::Tma { .. } if !s.arch.has_tma() => self.help(
                Key::Copy,
                format!(
                    "`copy: tma` needs sm_90 or newer (the Tensor Memory Accelerator), not {arch}"
                ),
                "use copy: cp_async, or arch: sm_90",
            ),
            _ => {}
        }
        if s.mma == Mma::Wgmma && !s.arch.has_wgmma() {
            self.help(
                Key::Mma,
                format!("`mma: wgmma` needs arch sm_90a, not {arch}"),
                "use arch: sm_90a, or mma: mma_sync",
            );
        }
        if s.cluster.count() > 1 && !s.arch.has_tma() {
            self.help(
                Key::Cluster,
                format!("thread block clusters need sm_90 or newer, not {arch}"),
                "cluster: 1x1",
            );
        }
        if let Copy::Tma { multicast } = s.copy {
            // An out-of-range multicast is the range check's error, not a cluster to suggest.
            if (2..=16).contains(&multicast) && multicast > s.cluster.count() {
                self.help(
                    Key::Copy,
                    format!(
                        "TMA multicast to {multicast} blocks needs a cluster of at least {multicast} blocks, not {}",
                        s.cluster
                    ),
                    format!("cluster: {multicast}x1"),
                );
            }
        }
    }

    /// Element types the tensor-core paths accept.
    fn tensor_dtypes(&mut self) {
        let s = self.spec;
        if s.mma != Mma::Fma && s.dtype == DType::F32 {
            self.help(
                Key::Dtype,
                format!(
                    "tensor cores (`mma: {}`) do not multiply f32 inputs",
                    s.mma.name()
                ),
                "dtype: tf32 (f32 storage, tf32 multiply), or mma: fma",
            );
        }
    }

    /// The SIMT family: f32, row-major A and B, sync or cp.async 16-byte copies.
    fn simt(&mut self) -> Option<ValidSpec> {
        let s = self.spec;
        let spans = self.spans;
        let family_note = "only f32, layout rr, copy sync or cp_async, swizzle none or pad, one tile per block, no cluster, is";
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
        self.reject_unimplemented(family_checks, family_note, "`mma: fma` (SIMT)");

        let row_bytes = s.tile.k * s.dtype.size_bytes();
        match s.swizzle {
            Swizzle::Pad(bytes) => self.padding_error(bytes, "vector copies and reads"),
            Swizzle::Xor32 | Swizzle::Xor64 | Swizzle::Xor128 => {
                let width = s.swizzle.xor_width_bytes().unwrap_or(0);
                if !row_bytes.is_multiple_of(width) {
                    let error = self.error(
                        Key::Swizzle,
                        format!(
                            "`swizzle: {}` permutes {width}-byte rows, but a tile row of A is {} x {} = {row_bytes} bytes",
                            s.swizzle,
                            s.tile.k,
                            s.dtype.name()
                        ),
                    );
                    error.help = Some(format!(
                        "use a tile with BK·sizeof({}) a multiple of {width}, or swizzle: none",
                        s.dtype.name()
                    ));
                } else {
                    self.errors.push(not_implemented(
                        spans.value(Key::Swizzle),
                        "swizzle",
                        &s.swizzle.to_string(),
                        family_note,
                    ));
                }
            }
            _ => {}
        }
        if !self.errors.is_empty() {
            return None;
        }

        let geometry = match SimtGeometry::new(s.tile, s.warps, s.dtype) {
            Ok(g) => g,
            Err(error) => {
                self.simt_geometry_error(error);
                return None;
            }
        };
        let smem = simt_smem_ledger(s);
        let registers = simt_register_budget(s, &geometry);
        let smaller_tiles = || {
            SimtGeometry::legal_warp_grids(s.tile, s.dtype)
                .into_iter()
                .find(|&w| {
                    SimtGeometry::new(s.tile, w, s.dtype)
                        .is_ok_and(|g| simt_register_budget(s, &g).fits())
                })
                .map(|w| format!("warps: {w} gives each thread a smaller tile"))
        };
        let label = format!(
            "{}x{} accumulators per thread",
            geometry.thread_tile_m, geometry.thread_tile_n
        );
        self.finish(
            Family::Simt(geometry),
            geometry.threads,
            smem,
            registers,
            label,
            smaller_tiles,
        )
    }

    /// Both families: row padding must keep 16-byte vectors aligned (`accesses` names what
    /// reads and writes the rows) and stay modest.
    fn padding_error(&mut self, bytes: u32, accesses: &str) {
        if !bytes.is_multiple_of(COPY_VECTOR_BYTES) {
            self.help(
                Key::Swizzle,
                format!("padding of {bytes} bytes breaks the 16-byte alignment of {accesses}"),
                format!(
                    "swizzle: pad({})",
                    bytes.div_ceil(COPY_VECTOR_BYTES).max(1) * COPY_VECTOR_BYTES
                ),
            );
        } else if bytes > 1024 {
            self.help(
                Key::Swizzle,
                format!("padding of {bytes} bytes per row wastes shared memory"),
                "swizzle: pad(16)",
            );
        }
    }

    /// Both families: more warps than a block holds.
    fn warp_count_error(&mut self, suggestion: String) {
        let s = self.spec;
        self.help(
            Key::Warps,
            format!(
                "a block holds 1 to 32 warps (1024 threads), not {} ({})",
                s.warps.count(),
                s.warps
            ),
            suggestion,
        );
    }

    /// Both families: a warp grid that does not split the block tile evenly.
    fn warp_grid_error(&mut self, warps_key: Key, suggestion: Option<String>) {
        let s = self.spec;
        self.help(
            warps_key,
            format!(
                "warp grid {} does not divide tile {}x{} evenly",
                s.warps, s.tile.m, s.tile.n
            ),
            suggestion
                .unwrap_or_else(|| "use BM and BN that are multiples of the warp grid".into()),
        );
    }

    fn simt_geometry_error(&mut self, error: SimtGeometryError) {
        let s = self.spec;
        let suggestion = SimtGeometry::legal_warp_grids(s.tile, s.dtype)
            .first()
            .map(|w| format!("warps: {w}"));
        let warps_key = self.warps_key();
        match error {
            SimtGeometryError::WarpCount => {
                self.warp_count_error(suggestion.unwrap_or_else(|| "warps: 4x2".into()))
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
                error.help =
                    Some(suggestion.unwrap_or_else(|| {
                        "use a tile with BM a multiple of 4 and BN of 32".into()
                    }));
            }
            SimtGeometryError::CopyWidth => {
                let row_bytes = s.tile.k * s.dtype.size_bytes();
                let legal_k = s.tile.k.div_ceil(4) * 4;
                let error = self.error(
                    Key::Tile,
                    format!(
                        "16-byte copies need BK·sizeof({}) to be a multiple of 16, but it is {} x {} = {row_bytes} bytes",
                        s.dtype.name(),
                        s.tile.k,
                        s.dtype.size_bytes()
                    ),
                );
                error.help = Some(format!("tile: {}x{}x{legal_k}", s.tile.m, s.tile.n));
            }
            SimtGeometryError::CopySpread(spread) => {
                let help =
                    suggest_simt_k(s).map(|k| format!("tile: {}x{}x{k}", s.tile.m, s.tile.n));
                self.copy_spread_error(spread, help);
            }
        }
    }

    /// The Ampere tensor-core family: f16/bf16 (`m16n8k16`) or tf32 (`m16n8k8`) with f32
    /// accumulators, layout rr, cp.async or sync copies into swizzled or padded shared memory.
    fn mma_sync(&mut self) -> Option<ValidSpec> {
        let s = self.spec;
        let family_note =
            "only f16/bf16/tf32 inputs with f32 accumulators, out f32 or the input type, \
             layout rr, copy sync or cp_async, no cluster, is";
        let out_ok = s.out == DType::F32 || (s.out == s.dtype && s.dtype != DType::Tf32);
        let family_checks = [(Key::Out, s.out.name().to_string(), out_ok)];
        self.reject_unimplemented(
            family_checks,
            family_note,
            "`mma: mma_sync` (Ampere tensor cores)",
        );
        if matches!(s.schedule, Schedule::Persistent { .. })
            && !(matches!(s.copy, Copy::CpAsync(_)) && s.stages > 1)
        {
            let error = self.error(
                Key::Schedule,
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
            error.help = Some("copy: cp_async, stages: 3".to_string());
        }

        let element = s.dtype.size_bytes();
        match s.swizzle {
            Swizzle::Pad(bytes) => self.padding_error(bytes, "cp.async copies and ldmatrix rows"),
            Swizzle::Xor32 | Swizzle::Xor64 | Swizzle::Xor128 => {
                for (operand, dim, row_elements) in [('A', "BK", s.tile.k), ('B', "BN", s.tile.n)] {
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

        let geometry = match MmaSyncGeometry::new(s.tile, s.warps, s.dtype) {
            Ok(g) => g,
            Err(error) => {
                self.mma_sync_geometry_error(error);
                return None;
            }
        };
        let smem = mma_sync_smem_ledger(s, &geometry);
        let registers = mma_sync_register_budget(s, &geometry);
        let smaller_tiles = || {
            MmaSyncGeometry::legal_warp_grids(s.tile, s.dtype)
                .into_iter()
                .find(|&w| {
                    MmaSyncGeometry::new(s.tile, w, s.dtype)
                        .is_ok_and(|g| mma_sync_register_budget(s, &g).fits())
                })
                .map(|w| format!("warps: {w} gives each warp a smaller tile"))
        };
        let label = format!(
            "{}x{} warp tile = {} f32 accumulators per thread",
            geometry.warp_tile_m,
            geometry.warp_tile_n,
            geometry.accumulators()
        );
        self.finish(
            Family::MmaSync(geometry),
            geometry.threads,
            smem,
            registers,
            label,
            smaller_tiles,
        )
    }

    fn mma_sync_geometry_error(&mut self, error: MmaSyncGeometryError) {
        let s = self.spec;
        let suggestion = MmaSyncGeometry::legal_warp_grids(s.tile, s.dtype)
            .first()
            .map(|w| format!("warps: {w}"));
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
                self.warp_count_error(suggestion.unwrap_or_else(|| "warps: 2x2".into()))
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
                error.notes.push(if n_step == 16 {
                    "one ldmatrix.x4 loads A for 16 rows, one ldmatrix.x4.trans loads B for 16 columns (two m16n8 tiles)".to_string()
                } else {
                    "one ldmatrix.x4 loads A for 16 rows; B is read per 8-column mma tile".to_string()
                });
                error.help = Some(suggestion.unwrap_or_else(|| {
                    format!("use a tile with BM a multiple of {m_step} and BN of {n_step}")
                }));
            }
            MmaSyncGeometryError::TileK { k_step } => {
                let legal_k = s.tile.k.div_ceil(k_step).max(1) * k_step;
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

    /// A tile whose copies the threads cannot share out, with the family's fix if it has one.
    fn copy_spread_error(&mut self, spread: CopySpread, help: Option<String>) {
        let error = self.error(Key::Tile, copy_spread_message(spread));
        error.notes.push(
            "every thread issues the same number of copies per stage, at fixed offsets".to_string(),
        );
        error.help = Some(help.unwrap_or_else(|| "use power-of-two tile dimensions".to_string()));
    }

    /// "Not implemented yet" for every value outside a family's scope: the family's own
    /// checks (key, value as written, in scope) plus the keys no family implements yet.
    fn reject_unimplemented(
        &mut self,
        family_checks: impl IntoIterator<Item = (Key, String, bool)>,
        family_note: &str,
        family: &str,
    ) {
        let s = self.spec;
        let spans = self.spans;
        let unimplemented_everywhere = [
            (Key::Acc, s.acc.name().to_string(), s.acc == DType::F32),
            (
                Key::Layout,
                s.layout.name().to_string(),
                s.layout == Layout::RowRow,
            ),
            (
                Key::Copy,
                s.copy.to_string(),
                !matches!(s.copy, Copy::Tma { .. }),
            ),
            (
                Key::Cluster,
                s.cluster.to_string(),
                s.cluster == Grid2 { rows: 1, cols: 1 },
            ),
            (
                Key::Consumers,
                s.consumers.to_string(),
                !spans.given(Key::Consumers),
            ),
        ];
        let mut checks: Vec<(Key, String, bool)> = family_checks.into_iter().collect();
        checks.extend(unimplemented_everywhere);
        checks.sort_by_key(|(key, _, _)| *key);
        for (key, value, in_scope) in checks {
            if !in_scope {
                self.errors.push(
                    not_implemented(spans.value(key), key.name(), &value, family_note)
                        .note(format!("this family is {family}")),
                );
            }
        }
    }

    /// The checks every family ends with: registers and shared memory against the limits,
    /// then the valid spec with its budgets. `label` sits under the error's caret;
    /// `smaller_tiles` proposes a warp grid whose estimate fits.
    fn finish(
        &mut self,
        family: Family,
        threads: u32,
        smem: SmemLedger,
        registers: RegisterBudget,
        label: String,
        smaller_tiles: impl FnOnce() -> Option<String>,
    ) -> Option<ValidSpec> {
        let s = self.spec;
        if !registers.fits() {
            let key = self.warps_key();
            let help = smaller_tiles().unwrap_or_else(|| "use a smaller tile".to_string());
            let error = self.error(
                key,
                format!(
                    "estimated {} registers per thread, over the limit of {} for {threads} threads",
                    registers.total(),
                    registers.limit,
                ),
            );
            error.label = Some(label);
            error.notes.push(budget_sentence(&registers));
            error.help = Some(help);
        }
        if !smem.fits() {
            self.smem_over_budget(&smem);
        }
        if !self.errors.is_empty() {
            return None;
        }
        let occupancy = Occupancy::compute(s.arch, threads, registers.total(), smem.total());
        Some(ValidSpec {
            spec: s.clone(),
            family,
            smem,
            registers,
            occupancy,
        })
    }

    fn smem_over_budget(&mut self, smem: &SmemLedger) {
        let s = self.spec;
        let per_stage = smem.bytes_per_stage();
        let error = self.error(
            Key::Stages,
            format!(
                "shared memory over budget for {} ({} bytes max per block)",
                s.arch.name(),
                smem.limit
            ),
        );
        error.label = Some(format!(
            "{} stages x {per_stage} B = {} B",
            s.stages,
            u64::from(s.stages) * u64::from(per_stage)
        ));
        error.notes.push(smem.itemized());
        error.notes.push(format!("total {} B", smem.total()));
        error.help = Some(match smem.max_stages_that_fit(MAX_STAGES) {
            Some(stages) => format!(
                "stages: {stages} fits ({} B); or a smaller tile",
                smem.total_for(stages)
            ),
            None => "even one stage does not fit: use a smaller tile".to_string(),
        });
    }
}

fn budget_sentence(registers: &RegisterBudget) -> String {
    registers
        .lines
        .iter()
        .map(|line| format!("{} {}", line.what, line.registers))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The BK nearest the spec's (ties: the smaller) that gives a SIMT geometry with its warps.
fn suggest_simt_k(s: &GemmSpec) -> Option<u32> {
    let mut candidates: Vec<u32> = (1..=256).collect();
    candidates.sort_by_key(|&k| (k.abs_diff(s.tile.k), k));
    candidates
        .into_iter()
        .find(|&k| SimtGeometry::new(Tile { k, ..s.tile }, s.warps, s.dtype).is_ok())
}

/// Shared memory of the SIMT family: A as `BM x BK` and B as `BK x BN`, each row padded.
pub fn simt_smem_ledger(s: &GemmSpec) -> SmemLedger {
    let element = s.dtype.size_bytes();
    let pad = s.swizzle.pad_bytes();
    let pad_note = |pad: u32| {
        if pad == 0 {
            String::new()
        } else {
            format!(" + {pad} B pad/row")
        }
    };
    let a_row = s.tile.k * element + pad;
    let b_row = s.tile.n * element + pad;
    SmemLedger {
        per_stage: vec![
            LedgerLine {
                what: format!(
                    "A tile {}x{} {}{}",
                    s.tile.m,
                    s.tile.k,
                    s.dtype.name(),
                    pad_note(pad)
                ),
                bytes: s.tile.m * a_row,
            },
            LedgerLine {
                what: format!(
                    "B tile {}x{} {}{}",
                    s.tile.k,
                    s.tile.n,
                    s.dtype.name(),
                    pad_note(pad)
                ),
                bytes: s.tile.k * b_row,
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

/// Registers of the SIMT family: what one k group of the inner loop keeps live. Calibrated
/// against ptxas 13.0 (sm_80/sm_90): the B fragments of all four k steps of a group are
/// loaded ahead of their FFMAs, and each 16-byte copy keeps a 64-bit pointer.
pub fn simt_register_budget(s: &GemmSpec, g: &SimtGeometry) -> RegisterBudget {
    let copies = g.a_copy.copies_per_thread + g.b_copy.copies_per_thread;
    let mut lines = vec![
        RegisterLine {
            what: format!("accumulators {}x{}", g.thread_tile_m, g.thread_tile_n),
            registers: g.thread_tile_m * g.thread_tile_n,
        },
        RegisterLine {
            what: format!("A fragments {} rows x 4 k", g.thread_tile_m),
            registers: g.thread_tile_m * 4,
        },
        RegisterLine {
            what: format!("B fragments 4 k x {}", g.thread_tile_n),
            registers: 4 * g.thread_tile_n,
        },
    ];
    if s.copy == Copy::Sync && s.stages > 1 {
        lines.push(RegisterLine {
            what: format!("copy staging {copies} x 16 B"),
            registers: 4 * copies,
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

/// Why a tile's 16-byte copies cannot be split over the block's threads.
fn copy_spread_message(spread: CopySpread) -> String {
    let CopySpread {
        operand,
        vectors,
        vectors_per_row,
        threads,
    } = spread;
    if vectors.is_multiple_of(threads) {
        format!(
            "the {operand} tile's rows are {vectors_per_row} 16-byte vectors each, which {threads} threads cannot copy in whole rows ({threads} and {vectors_per_row} must divide one another)"
        )
    } else {
        format!(
            "the {operand} tile is {vectors} 16-byte vectors, which do not spread evenly over {threads} threads"
        )
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
    let a_row = s.tile.k * element + pad;
    let b_row = s.tile.n * element + pad;
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
                    "A tile {}x{} {}{layout_note}",
                    s.tile.m,
                    s.tile.k,
                    s.dtype.name()
                ),
                bytes: s.tile.m * a_row,
            },
            LedgerLine {
                what: format!(
                    "B tile {}x{} {}{layout_note}",
                    s.tile.k,
                    s.tile.n,
                    s.dtype.name()
                ),
                bytes: s.tile.k * b_row,
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
    if s.copy == Copy::Sync && s.stages > 1 {
        lines.push(RegisterLine {
            what: format!("copy staging {copies} x 16 B, and their addresses"),
            registers: 6 * copies,
        });
    }
    let per_copy = if s.copy == Copy::Sync && s.stages > 1 {
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

    fn errors(text: &str) -> Vec<SpecError> {
        check_str(text).expect_err("spec must be invalid").0
    }

    fn message(text: &str) -> String {
        errors(text)[0].message.clone()
    }

    #[test]
    fn defaults_are_valid() {
        let v = check_str("").unwrap();
        assert_eq!(v.threads_per_block(), 256);
        assert_eq!(v.smem.total(), 2 * (128 * 32 + 8 * 512));
    }

    #[test]
    fn arch_rules() {
        assert!(message("arch: sm_80, copy: tma").contains("needs sm_90"));
        assert!(message("arch: sm_90, mma: wgmma").contains("needs arch sm_90a"));
        assert!(message("arch: sm_86, cluster: 2x1").contains("clusters need sm_90"));
    }

    #[test]
    fn unimplemented_values_parse_then_fail_validation() {
        for spec in [
            "arch: sm_90a, mma: wgmma",
            "mma: mma_sync, layout: rc",
            "mma: mma_sync, arch: sm_90, copy: tma",
            "mma: mma_sync, out: f16",
            "mma: mma_sync, dtype: tf32, out: tf32",
            "mma: mma_sync, acc: f16",
            "mma: mma_sync, arch: sm_90, cluster: 2x1",
            "dtype: bf16",
            "layout: rc",
            "arch: sm_90, copy: tma",
            "swizzle: 32B",
            "schedule: persistent",
            "arch: sm_90, cluster: 2x1",
            "consumers: 2",
            "out: bf16",
        ] {
            let all = errors(spec);
            assert!(
                all.iter()
                    .any(|e| e.message.contains("not implemented yet for this family")),
                "{spec}: {all:?}"
            );
        }
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
        ] {
            let text = message(spec);
            assert!(text.contains(why), "{spec}: {text}");
        }
    }

    #[test]
    fn smem_overflow_suggests_a_stage_count() {
        let e = &errors("arch: sm_80, tile: 128x128x32, stages: 6")[0];
        assert!(e.message.starts_with("shared memory over budget for sm_80"));
        assert_eq!(e.label.as_deref(), Some("6 stages x 32768 B = 196608 B"));
        assert_eq!(
            e.help.as_deref(),
            Some("stages: 5 fits (163840 B); or a smaller tile")
        );
    }

    #[test]
    fn geometry_rules_have_help() {
        let e = &errors("tile: 128x128x6")[0];
        assert_eq!(e.help.as_deref(), Some("tile: 128x128x8"));
        let e = &errors("tile: 128x128x8, warps: 3x2")[0];
        assert!(e.message.contains("does not divide"));
        assert_eq!(e.help.as_deref(), Some("warps: 4x2"));
        let e = &errors("swizzle: pad(4)")[0];
        assert_eq!(e.help.as_deref(), Some("swizzle: pad(16)"));
        let e = &errors("tile: 256x256x8, warps: 1x1")[0];
        assert!(e.message.contains("registers per thread"), "{e:?}");
        assert!(message("stages: 9").contains("between 1 and 8"));
        assert!(message("tile: 64x64x8, warps: 1x4").contains("warp tile 64x16"));
    }
}
