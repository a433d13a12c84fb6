//! The rules every family shares, below the families: the state of one validation
//! ([`Validator`]), the checks that run before any family's own (ranges, architecture
//! features), the helpers the families' errors share, and what a family provides to the
//! dispatch in `crate::family` ([`FamilyRules`]). Nothing here names a family: where a
//! shared rule depends on the family, it asks the spec's family through [`FamilyRules`].

use crate::budget::{Occupancy, RegisterBudget, SmemLedger};
use crate::error::SpecError;
use crate::geometry::{CopySpread, COPY_VECTOR_BYTES};
use crate::pick::family_cost::FamilyCost;
use crate::spans::SpecSpans;
use crate::spec::*;

/// The most pipeline stages a spec may ask for.
pub const MAX_STAGES: u32 = 8;

/// The most tiles one band of a persistent schedule's raster may be wide (enough to cover
/// every SM's tiles in a band several times over, small enough that tile arithmetic stays
/// far from 32-bit overflow).
pub const MAX_RASTER_GROUP: u32 = 64;

pub(crate) fn not_implemented(
    span: proc_macro2::Span,
    key: &str,
    value: &str,
    instead: &str,
) -> SpecError {
    SpecError::new(
        span,
        format!("`{key}: {value}` is not implemented yet for this family"),
    )
    .help(format!("{instead} implemented so far"))
}

/// The state of one validation: the spec, where its values were written, and the errors so
/// far. The common checks live here; each family adds its own flow in `crate::family`.
pub(crate) struct Validator<'a> {
    pub(crate) spec: &'a GemmSpec,
    pub(crate) spans: &'a SpecSpans,
    /// The rules of the family the spec's `mma:` picks.
    pub(crate) family: &'a dyn FamilyRules,
    pub(crate) errors: Vec<SpecError>,
}

/// What the shared checks hand back to a family's flow: the budgets of a spec that fits.
#[derive(Clone, Debug)]
pub(crate) struct Budgets {
    pub(crate) smem: SmemLedger,
    pub(crate) registers: RegisterBudget,
    pub(crate) occupancy: Occupancy,
}

/// What each family provides to the dispatch in `crate::family` besides its own flow, and
/// to the cost model ([`FamilyCost`]): the defaults of the keys a spec leaves out (the
/// parser asks for them in its order, with the values already settled); its scope (values
/// it does not implement yet), which the dispatch rejects before the family's flow runs;
/// and what the shared rules ask of it. No method has a default body: a new family is a
/// compile error until it answers each.
pub(crate) trait FamilyRules: FamilyCost {
    /// How errors name the family, e.g. "`mma: fma` (SIMT)".
    fn describe(&self) -> &'static str;
    /// What the family implements, ending in "is" ("only f32, ..., is"): the help of a
    /// value out of scope.
    fn scope_note(&self) -> &'static str;
    /// Each key whose value may be out of scope: the key, its value as written, in scope.
    fn scope(&self, v: &Validator<'_>) -> Vec<(Key, String, bool)>;

    fn dtype(&self) -> DType;
    fn tile(&self, dtype: DType) -> Tile;
    fn consumers(&self) -> u32;
    fn warps(&self, tile: Tile, consumers: u32) -> Grid2;
    fn stages(&self) -> u32;
    /// The shallowest pipeline the family runs for the spec ([`MAX_STAGES`] is every
    /// family's deepest).
    fn min_stages(&self, spec: &GemmSpec) -> u32;
    fn swizzle(&self, dtype: DType, tile: Tile) -> Swizzle;
    fn copy(&self, arch: Arch) -> Copy;
    fn epilogue(&self, out: DType) -> Epilogue;

    /// The key that sets the block's threads: `warps:`, or `consumers:` (warpgroups). Errors
    /// about the block's threads point at it.
    fn threads_key(&self) -> Key;
    /// The one target the family's math runs on, where it does not run on every target,
    /// and the `mma:` to propose on the others.
    fn math_target(&self) -> Option<(Arch, Mma)>;
    /// The target on which the family copies with the TMA (and multicasts over a cluster),
    /// if it does.
    fn tma_target(&self) -> Option<Arch>;
    /// The help for f32 inputs, which tensor cores do not multiply; none for a family that
    /// multiplies them.
    fn f32_inputs_help(&self) -> Option<&'static str>;
    /// Whether the family multiplies fp8 (e4m3, e5m2) inputs.
    fn multiplies_fp8(&self) -> bool;
}

impl<'a> Validator<'a> {
    pub(crate) fn new(
        spec: &'a GemmSpec,
        spans: &'a SpecSpans,
        family: &'a dyn FamilyRules,
    ) -> Self {
        Validator {
            spec,
            spans,
            family,
            errors: Vec::new(),
        }
    }

    /// The checks that run before any family's: numeric ranges, what each architecture
    /// executes, the element types tensor cores take.
    pub(crate) fn common(&mut self) {
        self.ranges();
        self.arch_features();
        self.tensor_dtypes();
        self.bias_type();
        self.aux_output();
        self.c_store_family();
        self.c_layout_stores();
        self.grouped_family();
    }

    /// A column-major C is written by the Hopper family's threads, element by element: a TMA
    /// store, C-in's loads and the aux output all walk C's rows, and a grouped walk stores
    /// each expert's rows.
    fn c_layout_stores(&mut self) {
        let s = self.spec;
        if s.c_layout != CLayout::Col {
            return;
        }
        let conflict = if s.mma != Mma::Wgmma {
            Some((
                Key::Mma,
                format!(
                    "`c_layout: col` is stored by the Hopper family's direct epilogue; `mma: {}` stores C's rows",
                    s.mma.name()
                ),
                "mma: wgmma, arch: sm_90a",
            ))
        } else if s.epilogue == Epilogue::Tma {
            Some((
                Key::Epilogue,
                "a TMA store writes boxes of C's rows; a column-major C is stored directly"
                    .to_string(),
                "epilogue: direct",
            ))
        } else if s.scale == Scale::AlphaBeta {
            Some((
                Key::Scale,
                "`scale: alpha_beta` reads C-in laid out as a row-major C; `c_layout: col` has no such read".to_string(),
                "scale: alpha",
            ))
        } else if s.aux != Aux::None {
            Some((
                Key::Aux,
                "the aux output is stored row-major beside C; `c_layout: col` has none".to_string(),
                "aux: none",
            ))
        } else if s.groups.is_grouped() {
            Some((
                Key::Groups,
                "a grouped walk stores each expert's rows of a row-major C; `c_layout: col` is for one product".to_string(),
                "groups: none",
            ))
        } else {
            None
        };
        if let Some((key, message, help)) = conflict {
            // Point at the key the conflict names where it is written, else at `c_layout`.
            let at = if self.spans.given(key) {
                key
            } else {
                Key::CLayout
            };
            self.help(at, message, help);
        }
    }

    /// Only the threads' own stores of C narrow: the Hopper family stores 16-byte vectors
    /// (or TMA boxes) of C, whose rows must start 16-byte aligned.
    fn c_store_family(&mut self) {
        if self.spec.c_store.is_some() && self.spec.mma == crate::Mma::Wgmma {
            self.help(
                Key::CStore,
                "`c_store` narrows the stores of SIMT and mma.sync kernels; wgmma kernels store C in 16-byte vectors",
                "mma: mma_sync, arch: sm_90, or no c_store",
            );
        }
    }

    /// Grouped GEMM runs on the Hopper family's persistent walk alone.
    fn grouped_family(&mut self) {
        if self.spec.groups.is_grouped() && self.spec.mma != Mma::Wgmma {
            self.help(
                Key::Groups,
                format!(
                    "`groups: {}` is a Hopper kernel's: its persistent walk reads the experts' rows on the device; `mma: {}` has no grouped kernel",
                    self.spec.groups.name(),
                    self.spec.mma.name()
                ),
                "mma: wgmma, arch: sm_90a, schedule: persistent",
            );
        }
    }

    /// An aux output holds the values before the activation: without one it would be D.
    fn aux_output(&mut self) {
        if self.spec.aux == Aux::PreActivation && self.spec.activation == Activation::None {
            self.help(
                Key::Aux,
                "`aux: pre_activation` stores the values before the activation, and the spec has none: they would be D itself",
                "activation: gelu",
            );
        }
    }

    /// The bias is added to the f32 accumulators: it is stored as the output or as f32.
    fn bias_type(&mut self) {
        let Some((along, dtype)) = self.spec.bias.vector() else {
            return;
        };
        let out = self.spec.out;
        if dtype != out && dtype != DType::F32 {
            self.help(
                Key::Bias,
                format!(
                    "a {} bias with {} output: a bias vector holds the output type or f32",
                    dtype.name(),
                    out.name()
                ),
                format!("bias: {}({})", along.name(), out.name()),
            );
        }
    }
}

impl Validator<'_> {
    pub(crate) fn error(&mut self, key: Key, message: impl Into<String>) -> &mut SpecError {
        let mut error =
            SpecError::new(self.spans.value(key), message).through(self.spans.value_last(key));
        error.key = Some(key);
        self.errors.push(error);
        self.errors.last_mut().expect("just pushed")
    }

    /// The spec's copy as a family whose threads copy takes it. The TMA is refused by
    /// [`Validator::block_copy_scope`] before a family asks; should a family ask first, it
    /// is an error here too, never a plan without a copy path.
    pub(crate) fn thread_copy(&mut self) -> Option<ThreadCopy> {
        let copy = self.spec.copy.thread_copy();
        if copy.is_none() {
            let error = self.error(
                Key::Copy,
                format!("`copy: {}` needs `mma: wgmma`", self.spec.copy),
            );
            error.help = Some("copy: cp_async(cg)".to_string());
        }
        copy
    }

    /// Where a problem of the block's threads points: at `warps:` (`consumers:` for wgmma)
    /// if the spec wrote it, else at the tile the default came from.
    pub(crate) fn warps_key(&self) -> Key {
        let key = self.family.threads_key();
        if self.spans.given(key) {
            key
        } else {
            Key::Tile
        }
    }

    pub(crate) fn help(&mut self, key: Key, message: impl Into<String>, help: impl Into<String>) {
        let error = self.error(key, message);
        error.help = Some(help.into());
    }

    /// Numeric ranges that hold for every family. They run first, and validation stops when
    /// one fails, so the rules after them compute with bounded numbers: no product of a
    /// spec's numbers overflows 32 bits, in debug builds (a panic) or release (a wrap).
    fn ranges(&mut self) {
        use crate::geometry::MAX_WARPS;
        let s = self.spec;
        let min_stages = self.family.min_stages(self.spec);
        if !(1..=MAX_STAGES).contains(&s.stages) {
            let legal = s.stages.clamp(min_stages, MAX_STAGES);
            let error = self.error(
                Key::Stages,
                format!(
                    "stages must be between {min_stages} and {MAX_STAGES}, not {}",
                    s.stages
                ),
            );
            *error = if s.stages == 0 {
                error.clone().fix(Key::Stages, legal.to_string())
            } else {
                // The deepest legal pipeline may not fit in shared memory; that is the
                // family's check, after this one.
                error.clone().help(format!(
                    "stages: {legal} at most, fewer where shared memory runs out"
                ))
            };
        }
        let tile_sides = [s.tile.m, s.tile.n, s.tile.k];
        // The example tile is the family's default for the spec's type.
        let example_tile = self.family.tile(s.dtype);
        if tile_sides.contains(&0) {
            self.help(
                Key::Tile,
                format!("tile dimensions must be positive, not {}", s.tile),
                format!("e.g. tile: {example_tile}"),
            );
        } else if tile_sides.iter().any(|&side| side > Tile::MAX_SIDE) {
            let max = Tile::MAX_SIDE;
            self.help(
                Key::Tile,
                format!("tile dimensions must be 1 to {max}, not {}", s.tile),
                format!("BM, BN and BK are each 1 to {max}, e.g. tile: {example_tile}"),
            );
        }
        // Without `warps:` the grid comes from the tile (or `consumers`), which holds at
        // least one warp unless `consumers` is out of range (its own error, below); the
        // family rules report a default grid that holds too many warps, with one that fits.
        // Left out, `warps:` takes the family's grid for the tile.
        let leave_out = "leave `warps:` out for the family's grid for the tile";
        if self.spans.given(Key::Warps) && (s.warps.rows == 0 || s.warps.cols == 0) {
            self.help(
                Key::Warps,
                "the warp grid must have at least one warp",
                leave_out,
            );
        } else if self.spans.given(Key::Warps) && s.warps.rows.max(s.warps.cols) > MAX_WARPS {
            self.help(
                Key::Warps,
                format!(
                    "a block holds 1 to {MAX_WARPS} warps ({} threads), not {}",
                    MAX_WARPS * 32,
                    s.warps
                ),
                format!("{leave_out}, or warps: ROWSxCOLS with ROWS x COLS from 1 to {MAX_WARPS}"),
            );
        }
        if s.consumers == 0 || s.consumers > 4 {
            self.help(
                Key::Consumers,
                format!("consumers must be 1 to 4 warpgroups, not {}", s.consumers),
                if self.family.threads_key() == Key::Consumers {
                    "consumers: 2"
                } else {
                    "leave `consumers:` out: it applies to `mma: wgmma` only"
                },
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
                // A multicast over the spec's cluster where TMA runs, else no TMA at all.
                let legal = match s.cluster.count() {
                    _ if self.family.tma_target().is_none() || !s.arch.has_tma() => {
                        Copy::CP_ASYNC_CG
                    }
                    blocks @ 1..=16 => Copy::Tma { multicast: blocks },
                    _ => Copy::Tma { multicast: 1 },
                };
                let error = self.error(
                    Key::Copy,
                    format!("TMA multicast reaches 1 to 16 blocks, not {multicast}"),
                );
                *error = error.clone().fix(Key::Copy, legal.to_string());
            }
        }
        self.copy_vector();
        if let Schedule::Persistent {
            raster,
            group,
            tail,
        } = s.schedule
        {
            if group == 0 || group > MAX_RASTER_GROUP {
                // The same walk with a legal group where the family walks tiles; one tile
                // per block where it does not.
                let walks = self
                    .family
                    .scope(self)
                    .iter()
                    .all(|(key, _, in_scope)| *key != Key::Schedule || *in_scope);
                let legal = if walks {
                    Schedule::Persistent {
                        raster,
                        group: 8,
                        tail,
                    }
                } else {
                    Schedule::Tile
                };
                self.help(
                    Key::Schedule,
                    format!("a raster group holds 1 to {MAX_RASTER_GROUP} tiles, not {group}"),
                    format!("schedule: {legal}"),
                );
            }
        }
    }

    /// The `vector` of `copy: sync(..)` and `copy: cp_async(..)`: a power of two from one
    /// element to 16 bytes, at least 4 for `cp.async` (its smallest copy), exactly 16 for
    /// `.cg` (which copies only 16 bytes). Tile lines are whole 16-byte chunks (the family
    /// rules check), so every legal vector divides them.
    fn copy_vector(&mut self) {
        let s = self.spec;
        let (vector, smallest) = match s.copy {
            Copy::Sync { vector } => (vector, 2),
            Copy::CpAsync { vector, .. } => (vector, 4),
            Copy::Tma { .. } => return,
        };
        let element = s.dtype.size_bytes();
        // The widest legal narrower vector, for the help: one element for sync, at least 4.
        let narrowest = element.max(smallest);
        let with_vector = |vector: u32| match s.copy {
            Copy::CpAsync { .. } if vector < 4 => Copy::Sync { vector },
            Copy::CpAsync { .. } => Copy::CpAsync {
                hint: CacheHint::Ca,
                vector,
            },
            _ => Copy::Sync { vector },
        };
        if !vector.is_power_of_two() || !(smallest..=Copy::WIDEST_VECTOR).contains(&vector) {
            let legal = if smallest == 2 {
                "2, 4, 8 or 16"
            } else {
                "4, 8 or 16"
            };
            let what = if s.copy.is_sync() {
                "`copy: sync` loads"
            } else {
                "`cp.async` copies"
            };
            let fix = if vector < smallest && s.copy.is_cp_async() && element < 4 {
                // 2-byte vectors of a 16-bit type: only the synchronous path loads them.
                "copy: sync(vector = 2)".to_string()
            } else {
                let nearest = [16, 8, 4, 2]
                    .into_iter()
                    .find(|&w| w <= vector.max(narrowest) && w >= narrowest)
                    .unwrap_or(Copy::WIDEST_VECTOR);
                format!("copy: {}", with_vector(nearest))
            };
            self.help(
                Key::Copy,
                format!("{what} vectors of {legal} bytes, not {vector}"),
                fix,
            );
        } else if vector < element {
            self.help(
                Key::Copy,
                format!(
                    "a {vector}-byte vector is less than one {} element ({element} bytes)",
                    s.dtype.name()
                ),
                format!("copy: {}", with_vector(narrowest)),
            );
        } else if let Copy::CpAsync {
            hint: CacheHint::Cg,
            vector,
        } = s.copy
        {
            if vector < Copy::WIDEST_VECTOR {
                let error = self.error(
                    Key::Copy,
                    format!("`cp.async.cg` copies only 16 bytes, not a {vector}-byte vector"),
                );
                error
                    .notes
                    .push("`.ca` (cached in L1) copies 4, 8 or 16 bytes".to_string());
                error.help = Some(format!("copy: cp_async(ca, vector = {vector})"));
            }
        }
    }

    /// What each architecture can execute.
    fn arch_features(&mut self) {
        let s = self.spec;
        let arch = s.arch.name();
        match s.copy {
            Copy::CpAsync { .. } if !s.arch.has_cp_async() => self.help(
                Key::Copy,
                format!("`copy: {}` needs sm_80 or newer, not {arch}", s.copy),
                format!(
                    "copy: {}",
                    Copy::Sync {
                        vector: s.copy.vector_bytes()
                    }
                ),
            ),
            Copy::Tma { .. } if !s.arch.has_tma() => {
                let tma_target = self.family.tma_target();
                let error = self.error(
                    Key::Copy,
                    format!(
                        "`copy: tma` needs sm_90 or newer (the Tensor Memory Accelerator), not {arch}"
                    ),
                );
                // A family that copies with TMA, on the target it does; another copies
                // with its threads.
                *error = match tma_target {
                    Some(target) => error.clone().fix(Key::Arch, target.name()),
                    None => error
                        .clone()
                        .note("only `mma: wgmma` (on sm_90a) copies with TMA")
                        .fix(Key::Copy, Copy::CP_ASYNC_CG.to_string()),
                };
            }
            _ => {}
        }
        if let Some((target, instead)) = self.family.math_target() {
            if s.arch != target {
                self.help(
                    Key::Mma,
                    format!(
                        "`mma: {}` needs arch {}, not {arch}",
                        s.mma.name(),
                        target.name()
                    ),
                    format!("use arch: {}, or mma: {}", target.name(), instead.name()),
                );
            }
        }
        if s.cluster.count() > 1 && !s.arch.has_tma() {
            self.help(
                Key::Cluster,
                format!("thread block clusters need sm_90 or newer, not {arch}"),
                "cluster: 1x1",
            );
        }
        if let Copy::Tma { multicast } = s.copy {
            // An out-of-range multicast is the range check's error, not a cluster to suggest;
            // without TMA (its own error) or the Hopper family (the only one that multicasts)
            // a cluster would not help.
            if (2..=16).contains(&multicast)
                && multicast > s.cluster.count()
                && s.arch.has_tma()
                && self.family.tma_target().is_some()
            {
                let error = self.error(
                    Key::Copy,
                    format!(
                        "TMA multicast to {multicast} blocks needs a cluster of at least {multicast} blocks, not {}",
                        s.cluster
                    ),
                );
                // The Hopper family implements clusters of two blocks only.
                *error = if multicast == 2 {
                    error.clone().fix(Key::Cluster, "2x1")
                } else {
                    let legal = Copy::Tma {
                        multicast: s.cluster.count(),
                    };
                    error
                        .clone()
                        .note("clusters of 2 blocks (2x1, 1x2) are implemented so far")
                        .fix(Key::Copy, legal.to_string())
                };
            }
        }
    }

    /// Element types the tensor-core paths accept.
    fn tensor_dtypes(&mut self) {
        let s = self.spec;
        if let Some(help) = self.family.f32_inputs_help() {
            if s.dtype == DType::F32 {
                self.help(
                    Key::Dtype,
                    format!(
                        "tensor cores (`mma: {}`) do not multiply f32 inputs",
                        s.mma.name()
                    ),
                    help,
                );
            }
        }
        if s.dtype.is_fp8() && !self.family.multiplies_fp8() {
            self.help(
                Key::Dtype,
                format!(
                    "{} inputs are multiplied by Hopper's fp8 wgmma only, not `mma: {}`",
                    s.dtype.name(),
                    s.mma.name()
                ),
                "mma: wgmma, arch: sm_90a (or dtype: bf16)",
            );
        }
        if s.b_dtype != s.dtype && !(s.dtype.is_fp8() && s.b_dtype.is_fp8()) {
            self.help(
                Key::BDtype,
                format!(
                    "A and B differ in type only as an fp8 pair (e4m3 with e5m2); no instruction multiplies {} by {}",
                    s.dtype.name(),
                    s.b_dtype.name()
                ),
                format!("b_dtype: {}", s.dtype.name()),
            );
        }
        if s.out.is_fp8() {
            self.help(
                Key::Out,
                format!(
                    "{} is an input type: the kernels write bf16, f16 or f32",
                    s.out.name()
                ),
                "out: bf16",
            );
        }
        if s.quant != Quant::None && !s.dtype.is_fp8() {
            self.help(
                Key::Quant,
                format!(
                    "`quant: {}` scales fp8 operands back; {} operands need no scales",
                    s.quant.name(),
                    s.dtype.name()
                ),
                "quant: none (or scale: alpha for one factor)",
            );
        }
        if let Some(k) = s.promote {
            if !s.dtype.is_fp8() {
                self.help(
                    Key::Promote,
                    format!(
                        "`promote: {k}` adds fp8 partial sums into f32 registers; {} wgmma accumulates in f32 already",
                        s.dtype.name()
                    ),
                    "promote: none",
                );
            }
        }
        if s.quant == Quant::Block && s.promote != Some(Quant::BLOCK) {
            let key = if self.spans.given(Key::Promote) {
                Key::Promote
            } else {
                Key::Quant
            };
            self.help(
                key,
                format!(
                    "`quant: block` applies its scales where the partial sums are promoted, every {} k, not at `promote: {}`",
                    Quant::BLOCK,
                    s.promote.map_or("none".to_string(), |k| k.to_string())
                ),
                format!("promote: {}", Quant::BLOCK),
            );
        }
    }

    /// Both families: row padding must keep 16-byte vectors aligned (`accesses` names what
    /// reads and writes the rows) and stay modest.
    pub(crate) fn padding_error(&mut self, bytes: u32, accesses: &str) {
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
    pub(crate) fn warp_count_error(&mut self, suggestion: String) {
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
    pub(crate) fn warp_grid_error(&mut self, warps_key: Key, suggestion: Option<String>) {
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

    /// A tile whose copies the threads cannot share out, with the family's fix if it has one.
    pub(crate) fn copy_spread_error(&mut self, spread: CopySpread, help: Option<String>) {
        let error = self.error(Key::Tile, copy_spread_message(spread));
        error.notes.push(
            "every thread issues the same number of copies per stage, at fixed offsets".to_string(),
        );
        error.help = Some(help.unwrap_or_else(|| "use power-of-two tile dimensions".to_string()));
    }

    /// "Not implemented yet" for every value outside the family's scope: the family's own
    /// checks plus the keys no family implements yet. The dispatch calls it once, before the
    /// family's flow, so no family can forget it.
    pub(crate) fn reject_unimplemented(&mut self) {
        let s = self.spec;
        let family = self.family;
        let spans = self.spans;
        let unimplemented_everywhere = [(Key::Acc, s.acc.name().to_string(), s.acc == DType::F32)];
        let mut checks = family.scope(self);
        checks.extend(unimplemented_everywhere);
        checks.sort_by_key(|(key, _, _)| *key);
        for (key, value, in_scope) in checks {
            if !in_scope {
                let mut error =
                    not_implemented(spans.value(key), key.name(), &value, family.scope_note())
                        .through(spans.value_last(key))
                        .note(format!("this family is {}", family.describe()));
                error.key = Some(key);
                self.errors.push(error);
            }
        }
    }

    /// The scope of the families that copy through registers or `cp.async` within one
    /// block: no TMA, no clusters, no consumer warpgroups, C stored from registers.
    pub(crate) fn block_copy_scope(&self) -> [(Key, String, bool); 4] {
        let s = self.spec;
        [
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
                s.consumers_value(),
                !self.spans.given(Key::Consumers),
            ),
            (
                Key::Epilogue,
                s.epilogue.name().to_string(),
                s.epilogue == Epilogue::Direct,
            ),
        ]
    }

    /// The checks every family ends with: registers and shared memory against the limits,
    /// then the valid spec with its budgets. `label` sits under the error's caret;
    /// `smaller_tiles` proposes a warp grid whose estimate fits.
    pub(crate) fn finish(
        &mut self,
        threads: u32,
        smem_for: impl Fn(u32) -> SmemLedger,
        registers: RegisterBudget,
        label: String,
        smaller_tiles: impl FnOnce() -> Option<String>,
    ) -> Option<Budgets> {
        let s = self.spec;
        let smem = smem_for(s.stages);
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
            self.smem_over_budget(&smem, smem_for);
        }
        if !self.errors.is_empty() {
            return None;
        }
        let occupancy = Occupancy::compute(s.arch, threads, registers.total(), smem.total());
        Some(Budgets {
            smem,
            registers,
            occupancy,
        })
    }

    /// Shared memory over the limit; `smem_for` is the family's ledger at another stage
    /// count, so the stages the help proposes cost what the kernel would use.
    pub(crate) fn smem_over_budget(
        &mut self,
        smem: &SmemLedger,
        smem_for: impl Fn(u32) -> SmemLedger,
    ) {
        let s = self.spec;
        let min_stages = self.family.min_stages(self.spec);
        let deepest_fit = (min_stages..s.stages.min(MAX_STAGES + 1))
            .rev()
            .map(|stages| (stages, smem_for(stages)))
            .find(|(_, ledger)| ledger.fits());
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
        match deepest_fit {
            Some((stages, ledger)) => {
                error.help = Some(format!(
                    "stages: {stages} fits ({} B); or a smaller tile",
                    ledger.total()
                ));
                error.fix = vec![(Key::Stages, stages.to_string())];
            }
            None => {
                error.help = Some(format!(
                    "even {} does not fit: use a smaller tile",
                    match min_stages {
                        1 => "one stage".to_string(),
                        min => format!("{min} stages"),
                    }
                ))
            }
        }
    }
}

pub(crate) fn budget_sentence(registers: &RegisterBudget) -> String {
    registers
        .lines
        .iter()
        .map(|line| format!("{} {}", line.what, line.registers))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Why a tile's 16-byte copies cannot be split over the block's threads.
fn copy_spread_message(spread: CopySpread) -> String {
    let CopySpread {
        operand,
        vector_bytes,
        vectors,
        vectors_per_row,
        threads,
    } = spread;
    if vectors.is_multiple_of(threads) {
        format!(
            "the {operand} tile's rows are {vectors_per_row} {vector_bytes}-byte vectors each, which {threads} threads cannot copy in whole rows ({threads} and {vectors_per_row} must divide one another)"
        )
    } else {
        format!(
            "the {operand} tile is {vectors} {vector_bytes}-byte vectors, which do not spread evenly over {threads} threads"
        )
    }
}
