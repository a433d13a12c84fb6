//! `Matmul`: one entry point that picks the kernel per problem.
//!
//! A [`Matmul`] holds a set of kernels (the built-in set for the device, or kernels the user
//! declared with `gemm!`), picks one per problem — a tuning cache's measured best where it
//! has one ([`TuneCache`]), else the cost model's ([`gemm_dsl::pick`]) — and loads each
//! kernel the first time it is picked. It is `Send + Sync`: threads share one.
//!
//! ```no_run
//! # fn main() -> Result<(), gemm_runtime::Error> {
//! use gemm_runtime::half::bf16;
//! use gemm_runtime::{Layout, Matmul, Problem};
//!
//! let ctx = gemm_runtime::open_context(0)?;
//! let stream = ctx.default_stream();
//! let matmul = Matmul::<bf16, bf16>::new(&ctx)?;
//! let (m, n, k) = (16, 4096, 14336);
//! let a = stream.alloc_zeros::<bf16>(m * k).unwrap();
//! let b = stream.alloc_zeros::<bf16>(k * n).unwrap();
//! let mut c = stream.alloc_zeros::<bf16>(m * n).unwrap();
//! let problem = Problem::new(m as u32, n as u32, k as u32, Layout::RowRow);
//! matmul.run(&stream, &a, &b, &mut c, &problem)?;
//! println!("ran {}", matmul.pick(&problem)?.kernel);
//! # Ok(())
//! # }
//! ```

use crate::capture::StreamCapture;
use crate::check::{Batch, LeadingDims};
use crate::device::DeviceInfo;
use crate::element::{Element, KernelTypes, Storage};
use crate::epilogue::{Epilogue, FusedSpec};
use crate::error::Error;
use crate::kernel::GemmKernel;
use crate::stage::{Staged, StagedOut, StagingCopy, STAGING_COPY};
use crate::tune::{spec_hash, CacheReading, DeviceKey, TuneCache, TUNE_CACHE_VARIABLE};
use cudarc::driver::sys::CUdeviceptr;
use cudarc::driver::{CudaContext, CudaStream, DevicePtr, DevicePtrMut, DeviceSlice, SyncOnDrop};
use gemm_dsl::abi::{KernelInfo, LaunchShape, Operand, StorageOrder};
use gemm_dsl::pick::{self, Candidate, DeviceModel, Problem, Repack};
use gemm_dsl::{check_str, CLayout, DType, ValidSpec};
use std::collections::HashMap;
use std::marker::PhantomData;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::{Duration, Instant};

#[cfg(feature = "emit")]
mod emitted;
#[cfg(feature = "emit")]
mod grouped;
#[cfg(feature = "emit")]
pub(crate) use emitted::element_types;
#[cfg(feature = "emit")]
pub use grouped::GroupedMatmul;

/// Where a pick came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PickSource {
    /// The tuning cache's measured best.
    Cache,
    /// The cost model's prediction.
    Model,
}

/// The kernel picked for a problem.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pick {
    /// Index into [`Picker::candidates`].
    pub index: usize,
    pub source: PickSource,
}

/// The picking half of a [`Matmul`], which needs no GPU: candidates, a device model, an
/// optional tuning cache, and the picks made so far.
#[derive(Debug)]
pub struct Picker {
    candidates: Vec<Candidate>,
    spec_hashes: Vec<String>,
    types: (DType, DType),
    /// A and B are of two types (an fp8 pair, `b_dtype`): no route may exchange them.
    mixed: bool,
    device: DeviceModel,
    cache: TuneCache,
    picks: RwLock<HashMap<Problem, Pick>>,
    /// The routes taken so far, per problem and the routes allowed.
    routes: RwLock<HashMap<(Problem, Routes), Option<Route>>>,
}

/// The ways besides its own pick that a [`Matmul`] may run a problem ([`Picker::route`]),
/// each with A and B swapped at launch: neither for a mixed pair ([`Picker::exchanges_operands`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Routes {
    /// A column of C as one row ([`Problem::as_one_row`]) where only narrow-access kernels
    /// take the column.
    pub one_row: bool,
    /// The swapped product `Cᵀ = Bᵀ·Aᵀ` ([`Problem::swapped`]) on kernels that store C
    /// column-major, where the model predicts it faster.
    pub swapped: bool,
    /// Inputs whose lines miss 16 bytes copied into 128-byte scratch lines first
    /// ([`Picker::staged_route`]), where the model predicts it faster.
    pub stage_inputs: bool,
    /// C computed into scratch lines and copied into its own after, likewise (not for an
    /// epilogue that reads C or writes the aux output: they share C's lines).
    pub stage_output: bool,
}

impl Picker {
    /// Candidates from validated specs and their kernels' launch shapes, all of one (input,
    /// output) type pair, and of one B type (A's, or the other fp8 type).
    pub fn new(kernels: &[(ValidSpec, LaunchShape)], device: DeviceModel) -> Picker {
        let types = kernels
            .first()
            .map_or((DType::Bf16, DType::Bf16), |(v, _)| {
                (v.spec.dtype, v.spec.out)
            });
        Picker {
            candidates: kernels
                .iter()
                .map(|(valid, launch)| Candidate::of(valid, *launch))
                .collect(),
            spec_hashes: kernels
                .iter()
                .map(|(v, _)| spec_hash(&v.spec.to_spec_text()))
                .collect(),
            types,
            mixed: kernels.iter().any(|(v, _)| v.spec.b_dtype != v.spec.dtype),
            device,
            cache: TuneCache::default(),
            picks: RwLock::new(HashMap::new()),
            routes: RwLock::new(HashMap::new()),
        }
    }

    /// Consults `cache` before the model (picks made so far are forgotten).
    pub fn with_cache(mut self, cache: TuneCache) -> Picker {
        self.cache = cache;
        self.picks = RwLock::new(HashMap::new());
        self.routes = RwLock::new(HashMap::new());
        self
    }

    /// Consults the tuning cache at `path` before the model: the entries measured on
    /// `device`, read as `reading` says ([`TuneCache::read`]).
    pub fn with_cache_file(
        self,
        path: &Path,
        device: &DeviceKey,
        reading: CacheReading,
    ) -> Result<Picker, Error> {
        Ok(self.with_cache(TuneCache::read(path, device, reading)?))
    }

    pub fn candidates(&self) -> &[Candidate] {
        &self.candidates
    }

    pub fn device(&self) -> &DeviceModel {
        &self.device
    }

    pub fn cache(&self) -> &TuneCache {
        &self.cache
    }

    /// The kernel for `problem`: the cache's measured best where it names a kernel of this
    /// set (same name, same spec hash) that admits the problem, else the model's; `None`
    /// when no candidate admits it. Remembered per problem, so a warm pick is one lookup.
    pub fn pick(&self, problem: &Problem) -> Option<Pick> {
        if let Some(pick) = self
            .picks
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .get(problem)
        {
            return Some(*pick);
        }
        let pick = self.pick_cold(problem)?;
        self.picks
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .insert(*problem, pick);
        Some(pick)
    }

    fn pick_cold(&self, problem: &Problem) -> Option<Pick> {
        let (dtype, out) = self.types;
        if let Some((kernel, hash)) = self.cache.lookup(problem, dtype, out) {
            let cached = self.candidates.iter().enumerate().position(|(i, c)| {
                c.name == kernel && self.spec_hashes[i] == hash && c.refuses(problem).is_none()
            });
            if let Some(index) = cached {
                return Some(Pick {
                    index,
                    source: PickSource::Cache,
                });
            }
        }
        pick::pick(&self.candidates, problem, &self.device).map(|index| Pick {
            index,
            source: PickSource::Model,
        })
    }

    /// The tuning cache's measured best for `problem` where it is a kernel of the swapped
    /// product: `gemm-bench --tune-out` times a kernel that stores C column-major on the
    /// swapped product and records it under the problem as given, which that kernel refuses
    /// ([`Picker::pick`] passes it over).
    fn cached_swapped_pick(&self, problem: &Problem) -> Option<Pick> {
        let (dtype, out) = self.types;
        let (kernel, hash) = self.cache.lookup(problem, dtype, out)?;
        let swapped = problem.swapped();
        self.candidates
            .iter()
            .enumerate()
            .position(|(i, c)| {
                c.name == kernel
                    && self.spec_hashes[i] == hash
                    && c.launch.c_order == StorageOrder::ColMajor
                    && c.refuses(&swapped).is_none()
            })
            .map(|index| Pick {
                index,
                source: PickSource::Cache,
            })
    }

    /// How `problem` runs ([`Route`]), remembered per problem: see [`Picker::route_cold`].
    pub(crate) fn route(&self, problem: &Problem, routes: Routes) -> Option<Route> {
        let key = (*problem, routes);
        if let Some(route) = self
            .routes
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .get(&key)
        {
            return *route;
        }
        let route = self.route_cold(problem, routes);
        self.routes
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .insert(key, route);
        route
    }

    /// How `problem` runs: its pick; or, with `routes.one_row`, the pick for its one-row
    /// form where that is not a narrow-access kernel and the problem's own pick is (or there
    /// is none); or, with `routes.swapped`, the pick for the swapped product where the model
    /// predicts it faster than the problem's own model pick (a measured pick from the tuning
    /// cache stands). `None` when no route has a pick outside the narrow tier, nor the
    /// problem one inside it. A mixed pair takes neither of the other routes: both exchange A
    /// and B.
    fn route_cold(&self, problem: &Problem, routes: Routes) -> Option<Route> {
        let routes = if self.exchanges_operands() {
            routes
        } else {
            Routes {
                one_row: false,
                swapped: false,
                ..routes
            }
        };
        let direct = self.pick(problem);
        let narrow = |pick: &Pick| self.candidates[pick.index].narrow_access();
        if routes.one_row && direct.as_ref().is_none_or(narrow) {
            let wide_row = problem.as_one_row().and_then(|row| {
                let pick = self.pick(&row).filter(|pick| !narrow(pick))?;
                Some(Route {
                    problem: row,
                    pick,
                    swaps_operands: true,
                    staged: Repack::NONE,
                })
            });
            if wide_row.is_some() {
                return wide_row;
            }
        }
        // Staged operands where the model predicts them faster than the problem's own pick;
        // the swapped product below must beat that too.
        let staged = self.staged_route(problem, direct, routes);
        // A measured pick from the tuning cache stands, for the problem or for its swapped
        // product.
        let measured = direct.is_some_and(|pick| pick.source == PickSource::Cache);
        if routes.swapped && !measured {
            if let Some(pick) = self.cached_swapped_pick(problem) {
                return Some(Route {
                    problem: problem.swapped(),
                    pick,
                    swaps_operands: true,
                    staged: Repack::NONE,
                });
            }
            let swapped = problem.swapped();
            let priced = |pick: Pick, problem: &Problem| (pick.index, self.seconds(&pick, problem));
            let swapped_pick = self.pick(&swapped);
            let wins = pick::swapped_wins(
                &self.candidates,
                direct.map(|pick| priced(pick, problem)),
                swapped_pick.map(|pick| priced(pick, &swapped)),
            ) && staged.as_ref().is_none_or(|(seconds, _)| {
                swapped_pick.is_some_and(|pick| self.seconds(&pick, &swapped) < *seconds)
            });
            if let Some(pick) = swapped_pick.filter(|_| wins) {
                return Some(Route {
                    problem: swapped,
                    pick,
                    swaps_operands: true,
                    staged: Repack::NONE,
                });
            }
        }
        if let Some((_, route)) = staged {
            return Some(route);
        }
        direct.map(|pick| Route {
            problem: *problem,
            pick,
            swaps_operands: false,
            staged: Repack::NONE,
        })
    }

    /// The route that stages the operands whose lines are no multiple of 16 bytes in
    /// scratch lines that are ([`Repack`]; only kernels with narrow copies or stores take the
    /// problem as given): the inputs alone (a C that misses 16 bytes then goes to a kernel
    /// with narrow stores), C too, or the inputs alone and the swapped product, as `routes`
    /// allow, whichever the model predicts faster with the copies counted, where that beats
    /// `direct` (the problem's own pick, if any). Its predicted seconds beside it.
    fn staged_route(
        &self,
        problem: &Problem,
        direct: Option<Pick>,
        routes: Routes,
    ) -> Option<(f64, Route)> {
        let (input_bytes, output_bytes) = (self.types.0.size_bytes(), self.types.1.size_bytes());
        let misaligned = Repack::of(problem, input_bytes, output_bytes);
        let allowed = Repack {
            a: misaligned.a && routes.stage_inputs,
            b: misaligned.b && routes.stage_inputs,
            c: misaligned.c && routes.stage_output,
        };
        // The inputs alone (C on a kernel with narrow stores), or C too (any kernel); or the
        // inputs alone and the staged problem's swapped product, whose kernels store C
        // element by element where it lies (decode: the weights' N on the tile's rows).
        let swapped = routes.swapped && self.exchanges_operands();
        let options = [
            (allowed.inputs(), false),
            (allowed, false),
            (allowed.inputs(), swapped),
        ];
        let mut best: Option<(f64, Route)> = None;
        for (staged, swaps_operands) in options
            .into_iter()
            .filter(|(staged, swaps)| staged.any() && (!swaps || swapped))
        {
            let staged_problem = staged.staged(problem, input_bytes, output_bytes);
            let staged_problem = if swaps_operands {
                staged_problem.swapped()
            } else {
                staged_problem
            };
            // The model's fastest among the kernels that read 16-byte lines (a narrow-copy
            // kernel would gain nothing from the copies).
            let ranking = pick::rank(&self.candidates, &staged_problem, &self.device);
            let Some((index, estimate)) = ranking
                .ranked
                .iter()
                .find(|(index, _)| !self.candidates[*index].narrow_copies())
            else {
                continue;
            };
            let seconds =
                estimate.seconds + staged.seconds(problem, input_bytes, output_bytes, &self.device);
            if best.as_ref().is_none_or(|(fastest, _)| seconds < *fastest) {
                let pick = Pick {
                    index: *index,
                    source: PickSource::Model,
                };
                let route = Route {
                    problem: staged_problem,
                    pick,
                    swaps_operands,
                    staged,
                };
                best = Some((seconds, route));
            }
        }
        let (seconds, route) = best?;
        let wins = direct.is_none_or(|direct| seconds < self.seconds(&direct, problem));
        wins.then_some((seconds, route))
    }

    /// The kernel a [`Matmul`] over these candidates launches for `problem` without a fused
    /// epilogue: its pick, or the swapped product's where that is predicted faster (a kernel
    /// that stores C column-major then runs it with A and B exchanged). For a benchmark that
    /// times what the entry point runs.
    pub fn routed_pick(&self, problem: &Problem) -> Option<Pick> {
        let routes = Routes {
            one_row: false,
            swapped: self.takes_swapped_products(),
            // The kernel is timed on the problem's own lines.
            stage_inputs: false,
            stage_output: false,
        };
        self.route(problem, routes).map(|route| route.pick)
    }

    /// The model's time for `pick` on `problem`.
    fn seconds(&self, pick: &Pick, problem: &Problem) -> f64 {
        pick::estimate(&self.candidates[pick.index], problem, &self.device).seconds
    }

    /// Whether some candidate stores C column-major, and A and B may change places: takes
    /// swapped products.
    pub(crate) fn takes_swapped_products(&self) -> bool {
        self.exchanges_operands()
            && self
                .candidates
                .iter()
                .any(|c| c.launch.c_order == StorageOrder::ColMajor)
    }

    /// Whether a route may exchange A and B (the one-row form and the swapped product both
    /// launch with B's buffer as A): only where they are of one type. A mixed pair's kernels
    /// read A as one fp8 type and B as the other, so exchanged operands would be decoded as
    /// the wrong format (their kernel would be a `GemmKernel<InB, Out, In>`).
    pub(crate) fn exchanges_operands(&self) -> bool {
        !self.mixed
    }

    /// Why no candidate admits `problem`, one line per candidate.
    pub fn refusals(&self, problem: &Problem) -> String {
        self.candidates
            .iter()
            .filter_map(|c| c.refuses(problem).map(|why| format!("  {}: {why}", c.name)))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// Where a candidate's kernel comes from when it is first picked.
#[derive(Debug)]
enum Source {
    /// Declared with `gemm!` (or emitted by the caller).
    Static(&'static KernelInfo<'static>),
    /// A set member, emitted at run time.
    #[cfg(feature = "emit")]
    Emit(Box<ValidSpec>),
}

/// The kernel a [`Matmul`] picked, as [`Matmul::pick`] reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Picked<'a> {
    pub kernel: &'a str,
    pub source: PickSource,
    /// The operands `run` stages in 128-byte scratch lines for this kernel: inputs copied in
    /// before it, C copied out after (none for most problems; see [`Repack`]). A fused run
    /// whose epilogue reads C or writes the aux output keeps C in place.
    pub staged: Repack,
}

/// One entry point for `C = A·B` that picks the kernel per problem from a set, loading each
/// kernel once, the first time it is picked.
///
/// `In` is A's element type, `Out` C's, and `InB` B's: A's unless the two are a mixed fp8
/// pair (`Matmul<E4m3, bf16, E5m2>`, `Matmul<E5m2, bf16, E4m3>`), whose kernels carry
/// `b_dtype`. A mixed pair runs every problem as given: the routes that exchange A and B (a
/// column of C as one row, the swapped product) would read each as the other's type.
#[derive(Debug)]
pub struct Matmul<In, Out, InB = In> {
    ctx: Arc<CudaContext>,
    picker: Picker,
    sources: Vec<Source>,
    kernels: KernelSlots<In, Out, InB>,
    /// The routes besides a problem's own pick: a column of C as one row only where no
    /// kernel fuses an epilogue, whose bias and factors would change sides; the swapped
    /// product where some kernel stores C column-major with the epilogue that gives the same
    /// D there (`swapped_epilogues_agree`).
    routes: Routes,
    /// The kernels that store C column-major carry another epilogue than the others (the
    /// swapped product's: a column bias read along their rows), so a problem whose own C is
    /// column-major has no kernel here.
    column_major_c_refused: bool,
    /// The copies that stage operands in 128-byte lines, loaded the first time a route needs
    /// them.
    staging: OnceLock<StagingCopy>,
}

/// How `Matmul` runs a problem: its pick; or, for a column of C whose pick is a
/// narrow-access kernel (or that no kernel admits), the pick for its one-row form
/// ([`Problem::as_one_row`]) where that is not; or the swapped product
/// ([`Problem::swapped`]) where the model predicts it faster. The last two launch with A and
/// B swapped.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Route {
    /// The problem the kernel runs: the caller's, its one-row form, its swapped product, or
    /// its staged form (the staged operands' lines padded).
    pub problem: Problem,
    pub pick: Pick,
    pub swaps_operands: bool,
    /// The operands staged in 128-byte lines around the launch ([`Picker::staged_route`]).
    pub staged: Repack,
}

/// Kernels loaded on first use, one slot per member of a set: a lock per slot is held while
/// its kernel loads, so two threads never load the same kernel twice, and different kernels
/// load side by side ([`Matmul::warm_up`]).
#[derive(Debug)]
pub(crate) struct KernelSlots<In, Out, InB = In> {
    kernels: Vec<OnceLock<GemmKernel<In, Out, InB>>>,
    loading: Vec<Mutex<()>>,
}

impl<In, Out, InB> KernelSlots<In, Out, InB> {
    pub(crate) fn new(count: usize) -> Self {
        KernelSlots {
            kernels: (0..count).map(|_| OnceLock::new()).collect(),
            loading: (0..count).map(|_| Mutex::new(())).collect(),
        }
    }

    /// Slot `index`'s kernel, if it was loaded.
    pub(crate) fn loaded(&self, index: usize) -> Option<&GemmKernel<In, Out, InB>> {
        self.kernels[index].get()
    }

    /// Slot `index`'s kernel, loaded by `load` the first time.
    pub(crate) fn get_or_load(
        &self,
        index: usize,
        load: impl FnOnce() -> Result<GemmKernel<In, Out, InB>, Error>,
    ) -> Result<&GemmKernel<In, Out, InB>, Error> {
        if let Some(kernel) = self.kernels[index].get() {
            return Ok(kernel);
        }
        let _loading = self.loading[index]
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(kernel) = self.kernels[index].get() {
            return Ok(kernel);
        }
        let kernel = load()?;
        Ok(self.kernels[index].get_or_init(|| kernel))
    }
}

/// What [`Matmul::warm_up`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WarmUp {
    /// The kernels it loaded, by name.
    pub loaded: Vec<String>,
    /// The problems' kernels that were loaded before.
    pub already_loaded: usize,
    /// Wall time of the loads.
    pub elapsed: Duration,
}

impl<In: Element, Out: Element, InB: Element> Matmul<In, Out, InB> {
    /// The kernels given (declared with `gemm!`: `&my_kernel::INFO`), all of these element
    /// types (A's `In`, B's `InB`, C's `Out`); the picker chooses among them per problem.
    pub fn from_kernels(
        ctx: &Arc<CudaContext>,
        kernels: &[&'static KernelInfo<'static>],
    ) -> Result<Self, Error> {
        let specs = kernels
            .iter()
            .map(|info| {
                let valid = check_str(info.spec()).map_err(|errors| Error::SpecText {
                    kernel: info.name().to_string(),
                    errors: errors.render(info.spec(), info.name()),
                })?;
                let theirs = KernelTypes::of_spec(&valid.spec)?;
                for (role, kernel_type, rust_type, rust_bytes) in [
                    ("input", theirs.dtype(), In::NAME, In::BYTES),
                    ("B input", theirs.b_dtype(), InB::NAME, InB::BYTES),
                    ("output", theirs.out(), Out::NAME, Out::BYTES),
                ] {
                    if Storage::of(kernel_type).name() != rust_type {
                        return Err(Error::ElementType {
                            kernel: info.name().to_string(),
                            role,
                            kernel_type: kernel_type.name().to_string(),
                            kernel_bytes: kernel_type.size_bytes(),
                            rust_type,
                            rust_bytes,
                        });
                    }
                }
                Ok((valid, *info.launch()))
            })
            .collect::<Result<Vec<_>, Error>>()?;
        let picker = Picker::new(&specs, DeviceModel::h100_sxm());
        Self::assemble(
            ctx,
            picker,
            kernels.iter().map(|info| Source::Static(info)).collect(),
        )
    }

    fn assemble(
        ctx: &Arc<CudaContext>,
        picker: Picker,
        sources: Vec<Source>,
    ) -> Result<Self, Error> {
        let info = DeviceInfo::query(ctx)?;
        let device = device_model(&info, picker.device());
        let mut picker = Picker { device, ..picker };
        if let Some(path) = std::env::var_os(TUNE_CACHE_VARIABLE).filter(|p| !p.is_empty()) {
            picker = picker.with_cache_file(
                Path::new(&path),
                &device_key(&info),
                CacheReading::from_env(),
            )?;
        }
        let fused: Vec<Option<FusedSpec>> = sources
            .iter()
            .map(|source| match source {
                Source::Static(info) => FusedSpec::of_info(info).ok(),
                #[cfg(feature = "emit")]
                Source::Emit(valid) => Some(FusedSpec::of_spec(&valid.spec)),
            })
            .collect();
        let routes = Routes {
            one_row: picker.exchanges_operands()
                && fused.iter().all(|f| f.is_some_and(|f| f.is_none())),
            swapped: picker.takes_swapped_products()
                && swapped_epilogues_agree(picker.candidates(), &fused),
            stage_inputs: true,
            stage_output: true,
        };
        let column_major_c_refused = epilogues_differ_by_c_order(picker.candidates(), &fused);
        Ok(Matmul {
            ctx: ctx.clone(),
            kernels: KernelSlots::new(sources.len()),
            picker,
            sources,
            routes,
            column_major_c_refused,
            staging: OnceLock::new(),
        })
    }

    /// Consults the tuning cache at `path` before the model. Entries measured on another
    /// device are left out ([`TuneCache::ignored`] sums them up). A cache that cannot be used
    /// (missing, unreadable, damaged, another format) is reported once on stderr and the
    /// model picks, unless `GEMM_DSL_TUNE_CACHE_STRICT=1` makes it an error
    /// ([`CacheReading::from_env`]; [`Matmul::with_tune_cache_strict`] always does).
    pub fn with_tune_cache(self, path: &Path) -> Result<Self, Error> {
        self.with_tune_cache_read(path, CacheReading::from_env())
    }

    /// [`Matmul::with_tune_cache`], with a cache that cannot be used an
    /// [`Error::TuneCache`].
    pub fn with_tune_cache_strict(self, path: &Path) -> Result<Self, Error> {
        self.with_tune_cache_read(path, CacheReading::Strict)
    }

    fn with_tune_cache_read(mut self, path: &Path, reading: CacheReading) -> Result<Self, Error> {
        let device = device_key(&DeviceInfo::query(&self.ctx)?);
        self.picker = self.picker.with_cache_file(path, &device, reading)?;
        Ok(self)
    }

    pub fn picker(&self) -> &Picker {
        &self.picker
    }

    /// The kernel `run` would launch for `problem`, and whether the cache or the model chose it.
    ///
    /// A column of C (`n = 1`, packed) that only narrow-access kernels take runs as its
    /// one-row form ([`Problem::as_one_row`], with A and B swapped) where another kernel takes
    /// that, and a problem the model predicts faster as its swapped product
    /// ([`Problem::swapped`]: A and B swapped, C column-major where it lies) runs that: the
    /// kernel named here, which [`Matmul::kernel_for`] does not return.
    pub fn pick(&self, problem: &Problem) -> Result<Picked<'_>, Error> {
        let route = self.route(problem)?;
        Ok(Picked {
            kernel: &self.picker.candidates()[route.pick.index].name,
            source: route.pick.source,
            staged: route.staged,
        })
    }

    fn route(&self, problem: &Problem) -> Result<Route, Error> {
        self.route_staging(problem, true)
    }

    /// [`Matmul::route`], with C staged in scratch lines only where `stage_output` (an
    /// epilogue that reads C or writes the aux output shares C's lines: not staged).
    fn route_staging(&self, problem: &Problem, stage_output: bool) -> Result<Route, Error> {
        let routes = Routes {
            stage_output: self.routes.stage_output && stage_output,
            ..self.routes
        };
        if self.column_major_c_refused && problem.c_layout == CLayout::Col {
            return Err(Error::NoKernelFor {
                problem: problem.to_string(),
                refused: "the kernels that store C column-major carry the swapped product's \
                          epilogue (a column bias read along their rows), not this one; pass \
                          the row-major product Cᵀ = Bᵀ·Aᵀ with the bias along its rows"
                    .to_string(),
            });
        }
        self.picker
            .route(problem, routes)
            .ok_or_else(|| Error::NoKernelFor {
                problem: problem.to_string(),
                refused: self.picker.refusals(problem),
            })
    }

    /// Candidate `index`'s kernel, loaded on first use.
    pub fn kernel(&self, index: usize) -> Result<&GemmKernel<In, Out, InB>, Error> {
        self.kernels
            .get_or_load(index, || match &self.sources[index] {
                Source::Static(info) => GemmKernel::load(&self.ctx, info),
                #[cfg(feature = "emit")]
                Source::Emit(valid) => {
                    GemmKernel::from_emitted(&self.ctx, &gemm_codegen::emit(valid))
                }
            })
    }

    /// Loads the kernels `problems` pick, side by side on up to as many threads as the
    /// machine has cores, so that the first `run` of each problem launches at once (a load
    /// compiles the kernel's PTX, which the driver's JIT cache keeps for later processes).
    /// Every problem is picked first: one no kernel admits is an [`Error::NoKernelFor`] with
    /// nothing loaded. The first failed load is returned after the others finish.
    pub fn warm_up(&self, problems: &[Problem]) -> Result<WarmUp, Error> {
        let mut indices = Vec::new();
        let mut stages = false;
        for problem in problems {
            let route = self.route(problem)?;
            stages |= route.staged.any();
            if !indices.contains(&route.pick.index) {
                indices.push(route.pick.index);
            }
        }
        if stages {
            self.staging_copy()?;
        }
        let (cold, warm): (Vec<usize>, Vec<usize>) = indices
            .into_iter()
            .partition(|&index| self.kernels.loaded(index).is_none());
        let started = Instant::now();
        let threads = std::thread::available_parallelism()
            .map_or(1, usize::from)
            .min(cold.len())
            .max(1);
        let next = AtomicUsize::new(0);
        let first_error = Mutex::new(None);
        std::thread::scope(|scope| {
            for _ in 0..threads {
                scope.spawn(|| {
                    while let Some(&index) = cold.get(next.fetch_add(1, Ordering::Relaxed)) {
                        if let Err(error) = self.kernel(index) {
                            let mut first = first_error
                                .lock()
                                .unwrap_or_else(|poisoned| poisoned.into_inner());
                            first.get_or_insert(error);
                        }
                    }
                });
            }
        });
        if let Some(error) = first_error
            .into_inner()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
        {
            return Err(error);
        }
        Ok(WarmUp {
            loaded: cold
                .iter()
                .map(|&index| self.picker.candidates()[index].name.clone())
                .collect(),
            already_loaded: warm.len(),
            elapsed: started.elapsed(),
        })
    }

    /// The kernel picked for `problem` as given, loaded: one to launch on the problem's own
    /// operands. A column of C that `run` computes as one row, or a problem it runs as the
    /// swapped product, gets the kernel for the problem as given here (an
    /// [`Error::NoKernelFor`] where only the swapped product has one); [`Matmul::warm_up`]
    /// loads what `run` launches, ahead of a CUDA graph capture, which cannot hold a load (see
    /// [`crate::capture`]).
    pub fn kernel_for(&self, problem: &Problem) -> Result<&GemmKernel<In, Out, InB>, Error> {
        let pick = self
            .picker
            .pick(problem)
            .ok_or_else(|| Error::NoKernelFor {
                problem: problem.to_string(),
                refused: self.picker.refusals(problem),
            })?;
        self.kernel(pick.index)
    }

    /// The picked kernel for `problem` to launch on `stream`: loaded, unless that would
    /// happen inside a graph capture, which cannot hold it ([`Error::CaptureLoadsKernel`];
    /// only a cold kernel asks whether the stream captures).
    fn kernel_to_launch(
        &self,
        stream: &CudaStream,
        route: &Route,
    ) -> Result<&GemmKernel<In, Out, InB>, Error> {
        let index = route.pick.index;
        let cold_copy = route.staged.any() && self.staging.get().is_none();
        if (self.kernels.loaded(index).is_none() || cold_copy)
            && StreamCapture::of(stream)?.is_capturing()
        {
            return Err(Error::CaptureLoadsKernel {
                kernel: if cold_copy {
                    STAGING_COPY.to_string()
                } else {
                    self.picker.candidates()[index].name.clone()
                },
            });
        }
        self.kernel(index)
    }

    /// The staging copy, loaded on first use.
    fn staging_copy(&self) -> Result<&StagingCopy, Error> {
        if let Some(copy) = self.staging.get() {
            return Ok(copy);
        }
        let copy = StagingCopy::load(&self.ctx)?;
        // Two threads may both load it; one copy stays.
        Ok(self.staging.get_or_init(|| copy))
    }

    /// `C = A·B` for `problem` (its layout, leading dimensions and batch count; a batch's
    /// matrices lie back to back), with the kernel picked for it. The launch checks sizes,
    /// strides, buffer lengths and alignment as [`GemmKernel::launch_strided_batched`] does.
    ///
    /// Threads and streams may share one `Matmul`: a stream-K kernel (`tail = stream_k`),
    /// whose blocks wait for one another, launches cooperatively, so its grid starts only
    /// when all of it fits beside whatever else runs (`results/picking-2026-11-24/`: four
    /// stream-K kernels on four streams at once).
    ///
    /// Runs may be captured in a CUDA graph once their kernels are loaded (see
    /// [`crate::capture`]); the first run of a problem loads its kernel, and during a capture
    /// is refused with [`Error::CaptureLoadsKernel`].
    ///
    /// Packed lines of any length run: where A's, B's or C's lines miss 16 bytes, the route
    /// may stage them in 128-byte scratch lines ([`Picked::staged`]; copies before and after
    /// the product, scratch from the stream-ordered allocator freed on `stream`), or pick a
    /// narrow-access member, whichever the model predicts faster.
    ///
    /// Operands at any element-aligned address run: where A, B or C starts less aligned
    /// than the pick's copies need (a view that starts inside a buffer, a batch stride of an
    /// odd number of elements), the refused launch touches nothing and the run picks again
    /// for `problem.with_address_align(..)` of that alignment (a narrow-access member of the
    /// set). Ahead of a capture, warm up both the problem and that form: the first pick is
    /// tried before the second. A fused epilogue's own vectors (C-in, aux, bias) are not
    /// re-picked for: they must be aligned as the picked kernel needs.
    pub fn run<A, B, C>(
        &self,
        stream: &CudaStream,
        a: &A,
        b: &B,
        c: &mut C,
        problem: &Problem,
    ) -> Result<(), Error>
    where
        A: DevicePtr<In>,
        B: DevicePtr<InB>,
        C: DevicePtrMut<Out>,
    {
        self.run_fused(stream, a, b, c, problem, &mut Epilogue::none())
    }

    /// [`Matmul::run`] with the fused epilogue's arguments, for a `Matmul` whose kernels fuse
    /// one (`Matmul::with_set_fused` with the feature `emit`, or `gemm!` kernels with `scale`,
    /// `bias` or `activation`); checked as [`GemmKernel::launch_fused`] checks them.
    pub fn run_fused<A, B, C>(
        &self,
        stream: &CudaStream,
        a: &A,
        b: &B,
        c: &mut C,
        problem: &Problem,
        epilogue: &mut Epilogue<'_, Out>,
    ) -> Result<(), Error>
    where
        A: DevicePtr<In>,
        B: DevicePtr<InB>,
        C: DevicePtrMut<Out>,
    {
        // An epilogue that reads C or writes the aux output (both C's lines) keeps C in place.
        let stage_output = epilogue.c_in.is_none() && epilogue.aux.is_none();
        self.launch_at_any_address(
            stream,
            problem,
            (a, b, c),
            packed_strides(problem),
            stage_output,
            |kernel, route| packed_batch(kernel, &route.problem),
            epilogue,
        )
    }

    /// [`Matmul::run`] with the batch's strides given (`batch.count` must be the problem's).
    pub fn run_strided<A, B, C>(
        &self,
        stream: &CudaStream,
        a: &A,
        b: &B,
        c: &mut C,
        problem: &Problem,
        batch: Batch,
    ) -> Result<(), Error>
    where
        A: DevicePtr<In>,
        B: DevicePtr<InB>,
        C: DevicePtrMut<Out>,
    {
        if batch.count != problem.batch {
            return Err(Error::BatchMismatch {
                problem: problem.batch,
                batch: batch.count,
            });
        }
        let strides = (batch.stride_a, batch.stride_b, batch.stride_c);
        self.launch_at_any_address(
            stream,
            problem,
            (a, b, c),
            strides,
            true,
            |_, route| {
                let batch = staged_batch(batch, route);
                if route.swaps_operands {
                    batch.exchanged()
                } else {
                    batch
                }
            },
            &mut Epilogue::none(),
        )
    }

    /// Launches the kernel routed for `problem` ([`Route`]) with `epilogue`, the batch's strides
    /// as `batch` gives them for the route's problem; where the launch refuses an
    /// operand's address as misaligned for that kernel (a view that starts inside a buffer),
    /// routes again for operands that start no more aligned than that one and launches the
    /// new pick. A refused launch touches nothing, and the addresses' alignment only falls,
    /// so this ends within one retry per operand. Aligned problems pay nothing for it: the
    /// pick is keyed by the problem as given.
    ///
    /// A route that stages operands ([`Route::staged`]; C only where `stage_output`) first
    /// copies each staged input into scratch of 128-byte lines and launches on the copies in
    /// their place, and on a scratch C, which it copies into `c`'s lines after the launch
    /// (`strides`: A's, B's and C's batch strides in the caller's buffers).
    #[allow(clippy::too_many_arguments)]
    fn launch_at_any_address<A, B, C>(
        &self,
        stream: &CudaStream,
        problem: &Problem,
        (a, b, c): (&A, &B, &mut C),
        strides: (u64, u64, u64),
        stage_output: bool,
        batch: impl Fn(&GemmKernel<In, Out, InB>, &Route) -> Batch,
        epilogue: &mut Epilogue<'_, Out>,
    ) -> Result<(), Error>
    where
        A: DevicePtr<In>,
        B: DevicePtr<InB>,
        C: DevicePtrMut<Out>,
    {
        let mut problem = *problem;
        loop {
            let route = self.route_staging(&problem, stage_output)?;
            let kernel = self.kernel_to_launch(stream, &route)?;
            // Staged operands are copied into scratch lines first (C's buffer is checked before
            // any copy runs); the launch writes a scratch C, copied into `c`'s lines after it.
            let copy = route
                .staged
                .any()
                .then(|| self.staging_copy())
                .transpose()?;
            let scratch_c = match copy {
                Some(copy) if route.staged.c => Some(copy.scratch(
                    stream,
                    c.len(),
                    &problem,
                    Operand::C,
                    strides.2,
                    Out::BYTES,
                )?),
                _ => None,
            };
            let scratch_a = match copy {
                Some(copy) if route.staged.a => {
                    Some(copy.stage(stream, a, &problem, Operand::A, strides.0, In::BYTES)?)
                }
                _ => None,
            };
            let scratch_b = match copy {
                Some(copy) if route.staged.b => {
                    Some(copy.stage(stream, b, &problem, Operand::B, strides.1, InB::BYTES)?)
                }
                _ => None,
            };
            let a = match &scratch_a {
                Some(scratch) => Staged::copy(a, scratch),
                None => Staged::Given(a),
            };
            let b = match &scratch_b {
                Some(scratch) => Staged::copy(b, scratch),
                None => Staged::Given(b),
            };
            let staged_c = &mut StagedOut::new(&mut *c, scratch_c.as_ref());
            let route_batch = batch(kernel, &route);
            let operands = (&a, &b, staged_c);
            let done = launch_routed(kernel, stream, &route, operands, route_batch, epilogue);
            let done = match (done, copy, &scratch_c) {
                (Ok(()), Some(copy), Some(scratch)) => {
                    copy.unstage(stream, scratch, c, &problem, strides.2, Out::BYTES)
                }
                (done, ..) => done,
            };
            match done.as_ref().err().and_then(start_alignment) {
                Some(align) if align < problem.address_align => {
                    problem = problem.with_address_align(align);
                }
                _ => return done,
            }
        }
    }
}

/// Launches `kernel` on `route`'s problem (`batch` in its terms), A and B exchanged where the
/// route swaps them. Routes swap only onto kernels whose epilogue gives the same D on Cᵀ: a
/// column bias read along their rows from the same vector, the fp8 scales' product, α and the
/// activation (one row only where there is no epilogue).
fn launch_routed<In: Element, Out: Element, InB: Element, A, B, C>(
    kernel: &GemmKernel<In, Out, InB>,
    stream: &CudaStream,
    route: &Route,
    (a, b, c): (&A, &B, &mut C),
    batch: Batch,
    epilogue: &mut Epilogue<'_, Out>,
) -> Result<(), Error>
where
    A: DevicePtr<In>,
    B: DevicePtr<InB>,
    C: DevicePtrMut<Out>,
{
    let problem = &route.problem;
    let (m, n, k, lds) = (problem.m, problem.n, problem.k, leading_dims(problem));
    if route.swaps_operands {
        let (b, a) = exchanged::<In, InB, _, _>(a, b);
        kernel.launch_fused(stream, &b, &a, c, m, n, k, lds, batch, epilogue)
    } else {
        kernel.launch_fused(stream, a, b, c, m, n, k, lds, batch, epilogue)
    }
}

/// A's and B's buffers in each other's places, for a route that exchanges them (the one-row
/// form, the swapped product): B's read as A's type, A's as B's. Only operands of one type
/// are exchanged ([`Picker::exchanges_operands`]), so each buffer is still read as the type it
/// holds; a mixed pair reaching here would be a bug in the routing, and panics.
fn exchanged<'p, In: Element, InB: Element, A, B>(
    a: &'p A,
    b: &'p B,
) -> (Retyped<'p, B, InB, In>, Retyped<'p, A, In, InB>)
where
    A: DevicePtr<In>,
    B: DevicePtr<InB>,
{
    assert_eq!(
        In::STORAGE,
        InB::STORAGE,
        "a route exchanged A and B of two types"
    );
    (Retyped::new(b), Retyped::new(a))
}

/// A device buffer of `From` elements passed where one of `To` is asked for, by
/// [`exchanged`] alone: it checks that the two types are one, which the compiler cannot see
/// in code generic over A's and B's types.
struct Retyped<'p, P, From, To> {
    buffer: &'p P,
    types: PhantomData<fn(From) -> To>,
}

impl<'p, P, From, To> Retyped<'p, P, From, To> {
    fn new(buffer: &'p P) -> Self {
        Retyped {
            buffer,
            types: PhantomData,
        }
    }
}

impl<P: DeviceSlice<From>, From, To> DeviceSlice<To> for Retyped<'_, P, From, To> {
    fn len(&self) -> usize {
        self.buffer.len()
    }

    fn stream(&self) -> &Arc<CudaStream> {
        self.buffer.stream()
    }
}

impl<P: DevicePtr<From>, From, To> DevicePtr<To> for Retyped<'_, P, From, To> {
    fn device_ptr<'a>(&'a self, stream: &'a CudaStream) -> (CUdeviceptr, SyncOnDrop<'a>) {
        self.buffer.device_ptr(stream)
    }
}

/// The alignment some matrix of an operand starts at, where a launch refused it as
/// misaligned: its address's, or a batch stride's (the later matrices start there).
fn start_alignment(error: &Error) -> Option<u32> {
    match *error {
        Error::MisalignedPointer { address, .. } => Some(address_align(address)),
        Error::MisalignedBatchStride {
            stride,
            element_bytes,
            ..
        } => Some(address_align(
            stride.saturating_mul(u64::from(element_bytes)),
        )),
        _ => None,
    }
}

/// The largest power of two, up to the allocator's alignment, that divides `address`.
fn address_align(address: u64) -> u32 {
    1u32 << address
        .trailing_zeros()
        .min(pick::ALLOCATION_ALIGN.trailing_zeros())
}

/// Whether the kernels that store C column-major compute, on the swapped product, the
/// epilogue the others compute on the problem (`fused`, per candidate): the swapped route
/// then gives the same D. The others must share one epilogue, and each column-major kernel
/// have its [`FusedSpec::on_swapped_product`] (with no others: one that is its own).
fn swapped_epilogues_agree(candidates: &[Candidate], fused: &[Option<FusedSpec>]) -> bool {
    let column_major = |index: usize| candidates[index].launch.c_order == StorageOrder::ColMajor;
    let mut direct = (0..fused.len()).filter(|&index| !column_major(index));
    let problem_epilogue = match direct.next() {
        Some(first) => match fused[first] {
            Some(epilogue) if direct.all(|index| fused[index] == Some(epilogue)) => Some(epilogue),
            _ => return false,
        },
        None => None,
    };
    (0..fused.len())
        .filter(|&index| column_major(index))
        .all(|index| {
            fused[index].is_some_and(|swapped| {
                let problem_epilogue = problem_epilogue.unwrap_or(swapped);
                problem_epilogue.on_swapped_product() == Some(swapped)
            })
        })
}

/// Whether some kernel that stores C column-major fuses another epilogue than some kernel
/// that stores it row-major (`fused`, per candidate; an unreadable one counts as different).
fn epilogues_differ_by_c_order(candidates: &[Candidate], fused: &[Option<FusedSpec>]) -> bool {
    let of_order = |order: StorageOrder| {
        (0..fused.len())
            .filter(move |&index| candidates[index].launch.c_order == order)
            .map(|index| fused[index])
    };
    of_order(StorageOrder::ColMajor).any(|column_major| {
        of_order(StorageOrder::RowMajor)
            .any(|row_major| column_major.is_none() || column_major != row_major)
    })
}

/// A's, B's and C's batch strides, in elements, for `problem`'s matrices back to back.
fn packed_strides(problem: &Problem) -> (u64, u64, u64) {
    let stride = |operand| {
        u64::from(pick::repack::stored_dims(problem, operand).0) * u64::from(problem.ld(operand))
    };
    (stride(Operand::A), stride(Operand::B), stride(Operand::C))
}

/// `batch` as the caller's operands lie for `route` (exchanged after, where the route swaps
/// them): a staged operand's matrices lie back to back in its scratch.
fn staged_batch(batch: Batch, route: &Route) -> Batch {
    // The staged problem in the caller's orientation (`swapped` undoes itself).
    let staged = if route.swaps_operands {
        route.problem.swapped()
    } else {
        route.problem
    };
    let (a, b, c) = packed_strides(&staged);
    Batch {
        count: batch.count,
        stride_a: if route.staged.a { a } else { batch.stride_a },
        stride_b: if route.staged.b { b } else { batch.stride_b },
        stride_c: if route.staged.c { c } else { batch.stride_c },
    }
}

/// The batch of `problem` with its matrices back to back, as `kernel` lays them out.
fn packed_batch<In: Element, Out: Element, InB: Element>(
    kernel: &GemmKernel<In, Out, InB>,
    problem: &Problem,
) -> Batch {
    Batch::packed(
        kernel.info().launch(),
        problem.batch,
        (problem.m, problem.n, problem.k),
        leading_dims(problem),
    )
}

fn leading_dims(problem: &Problem) -> LeadingDims {
    LeadingDims {
        lda: problem.lda,
        ldb: problem.ldb,
        ldc: problem.ldc,
    }
}

/// The model of the board in hand: the preset of its architecture (an H200's for its faster
/// memory) with its own SM count.
pub fn device_model(info: &DeviceInfo, fallback: &DeviceModel) -> DeviceModel {
    let cc = info.compute_capability_number();
    let preset = match cc {
        90.. if info.name.contains("H200") => DeviceModel::h200_sxm(),
        90.. => DeviceModel::h100_sxm(),
        80..90 => DeviceModel::a100_sxm(),
        _ => fallback.clone(),
    };
    DeviceModel {
        name: info.name.clone(),
        compute_capability: cc,
        ..preset
    }
    .with_sms(info.multiprocessors)
}

/// The device's key in a tuning cache.
pub fn device_key(info: &DeviceInfo) -> DeviceKey {
    DeviceKey {
        name: info.name.clone(),
        sms: info.multiprocessors,
        driver: info.driver_version.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gemm_dsl::pick::sets;
    use gemm_dsl::Layout;
    use half::bf16;

    /// `specs` validated, with their planned launch shapes.
    fn planned(specs: &[impl AsRef<str>]) -> Vec<(ValidSpec, LaunchShape)> {
        specs
            .iter()
            .map(|text| {
                let valid = check_str(text.as_ref()).unwrap();
                let launch = gemm_codegen::emit::launch_of(&valid);
                (valid, launch)
            })
            .collect()
    }

    fn hopper_picker() -> Picker {
        let specs = planned(&sets::SM90_16BIT.specs(DType::Bf16, DType::Bf16));
        Picker::new(&specs, DeviceModel::h100_sxm())
    }

    #[test]
    fn matmul_is_shared_by_threads() {
        fn send_sync<T: Send + Sync>() {}
        send_sync::<Matmul<bf16, bf16>>();
        send_sync::<Matmul<f32, f32>>();
        send_sync::<Matmul<crate::fp8::E4m3, bf16, crate::fp8::E5m2>>();
        send_sync::<Picker>();
    }

    /// Kernels of a mixed fp8 pair (`b_dtype`), the swapped product's among them, as
    /// `Matmul::from_kernels` would hold them: no problem runs with A and B exchanged, neither
    /// as the swapped product nor as one row, though the same kernels of one type swap decode
    /// problems; the problems only a swapped kernel takes have no route.
    #[test]
    fn a_mixed_pair_never_exchanges_a_and_b() {
        let texts = |b_dtype: &str| -> Vec<String> {
            sets::SM90_FP8
                .specs(DType::E4m3, DType::Bf16)
                .iter()
                .map(|text| format!("{text}, quant: tensor{b_dtype}"))
                .collect()
        };
        let one_type = Picker::new(&planned(&texts("")), DeviceModel::h100_sxm());
        let mixed = Picker::new(&planned(&texts(", b_dtype: e5m2")), DeviceModel::h100_sxm());
        assert!(one_type.takes_swapped_products() && one_type.exchanges_operands());
        assert!(!mixed.takes_swapped_products() && !mixed.exchanges_operands());
        let decode = Problem::new(1, 4096, 4096, Layout::RowCol);
        assert!(mixed.pick(&decode).is_some());
        assert_eq!(mixed.routed_pick(&decode), mixed.pick(&decode));
        let every_route = Routes {
            one_row: true,
            swapped: true,
            stage_inputs: true,
            stage_output: true,
        };
        assert!(one_type.route(&decode, every_route).unwrap().swaps_operands);
        for (m, n, k) in [(1, 4096, 4096), (16, 8192, 8192), (4096, 4096, 4096)] {
            let problem = Problem::new(m, n, k, Layout::RowCol);
            let route = mixed.route(&problem, every_route).unwrap();
            assert!(!route.swaps_operands, "{problem}");
            assert_eq!(route.problem, problem);
        }
        // C's rows of 1001 bf16 start 2-byte aligned: only the swapped product (C column-major,
        // stored element by element) takes them, which a mixed pair does not run; it computes
        // C in scratch lines and copies it into the rows, where it may.
        let odd_rows = Problem::new(33, 1001, 512, Layout::RowCol);
        assert!(one_type.route(&odd_rows, every_route).is_some());
        let staged = mixed.route(&odd_rows, every_route).unwrap();
        assert!(!staged.swaps_operands);
        assert_eq!(
            staged.staged,
            Repack {
                c: true,
                ..Repack::NONE
            }
        );
        let c_in_place = Routes {
            stage_output: false,
            ..every_route
        };
        assert!(mixed.route(&odd_rows, c_in_place).is_none());
    }

    #[test]
    fn picks_come_from_the_problem_layout_and_are_remembered() {
        let picker = hopper_picker();
        for layout in sets::LAYOUTS {
            let problem = Problem::new(4096, 4096, 4096, layout);
            let pick = picker.pick(&problem).unwrap();
            assert_eq!(pick.source, PickSource::Model);
            assert_eq!(picker.candidates()[pick.index].layout, layout);
            assert_eq!(picker.pick(&problem), Some(pick));
        }
    }

    #[test]
    fn a_cache_entry_wins_only_for_its_kernel_and_spec_hash() {
        let picker = hopper_picker();
        let problem = Problem::new(16, 4096, 14336, Layout::RowRow);
        let model = picker.pick(&problem).unwrap();
        let device = DeviceKey {
            name: "board".to_string(),
            sms: 132,
            driver: "13.0".to_string(),
        };
        // Another candidate than the model's, measured faster.
        let other = (0..picker.candidates().len())
            .find(|&i| i != model.index && picker.candidates()[i].layout == Layout::RowRow)
            .unwrap();
        let entry = |hash: String| crate::tune::TuneEntry {
            device: device.clone(),
            dtype: "bf16".to_string(),
            out: "bf16".to_string(),
            layout: "rr".to_string(),
            m: 16,
            n: 4096,
            k: 14336,
            batch: 1,
            stride_align: 128,
            kernel: picker.candidates()[other].name.clone(),
            spec_hash: hash,
            tflops: 1.0,
            ratio_to_cublas: 1.0,
        };
        let good = hopper_picker().with_cache(TuneCache::for_device(
            &[entry(picker.spec_hashes[other].clone())],
            &device,
        ));
        assert_eq!(
            good.pick(&problem),
            Some(Pick {
                index: other,
                source: PickSource::Cache
            })
        );
        // A stale entry (the spec changed since it was measured) is not trusted.
        let stale = hopper_picker().with_cache(TuneCache::for_device(
            &[entry("0000000000000000".to_string())],
            &device,
        ));
        assert_eq!(stale.pick(&problem), Some(model));
    }

    /// A tuning run records a kernel of the swapped product (timed swapped) under the problem
    /// as given: the route takes the swapped product on that kernel, though the model would
    /// not, and a stale entry is not trusted.
    #[test]
    fn a_cached_kernel_of_the_swapped_product_routes_the_problem_swapped() {
        let picker = hopper_picker();
        let every_route = Routes {
            one_row: false,
            swapped: true,
            stage_inputs: true,
            stage_output: true,
        };
        // A problem the model runs as given, on a kernel that stores C row-major.
        let problem = Problem::new(128, 4096, 4096, Layout::RowRow);
        let model = picker.route(&problem, every_route).unwrap();
        assert!(!model.swaps_operands);
        let swapped_member = (0..picker.candidates().len())
            .find(|&i| {
                let c = &picker.candidates()[i];
                c.launch.c_order == StorageOrder::ColMajor
                    && c.refuses(&problem.swapped()).is_none()
            })
            .expect("the set has a member of the swapped product that takes it");
        let device = DeviceKey {
            name: "board".to_string(),
            sms: 132,
            driver: "13.0".to_string(),
        };
        let entry = |hash: String| crate::tune::TuneEntry {
            device: device.clone(),
            dtype: "bf16".to_string(),
            out: "bf16".to_string(),
            layout: "rr".to_string(),
            m: problem.m,
            n: problem.n,
            k: problem.k,
            batch: 1,
            stride_align: 128,
            kernel: picker.candidates()[swapped_member].name.clone(),
            spec_hash: hash,
            tflops: 1.0,
            ratio_to_cublas: 1.0,
        };
        let cached = hopper_picker().with_cache(TuneCache::for_device(
            &[entry(picker.spec_hashes[swapped_member].clone())],
            &device,
        ));
        let route = cached.route(&problem, every_route).unwrap();
        assert!(route.swaps_operands);
        assert_eq!(route.problem, problem.swapped());
        assert_eq!(
            route.pick,
            Pick {
                index: swapped_member,
                source: PickSource::Cache
            }
        );
        // Without the swapped route (a fused set whose epilogue changes sides there), the
        // problem runs as given.
        let as_given = Routes {
            one_row: false,
            swapped: false,
            stage_inputs: true,
            stage_output: true,
        };
        assert!(!cached.route(&problem, as_given).unwrap().swaps_operands);
        let stale = hopper_picker().with_cache(TuneCache::for_device(
            &[entry("0000000000000000".to_string())],
            &device,
        ));
        assert_eq!(stale.route(&problem, every_route).unwrap().pick, model.pick);
    }

    /// Any problem a BLAS computes gets a pick whose launch checks pass: random sizes (ones
    /// included), leading dimensions past the line by any number of elements, operands that
    /// start at any element, every layout, batches; in each set, for its element types. A
    /// narrow-access member is picked exactly where no other member admits the problem (or
    /// its one-row form) and the swapped product is not predicted faster.
    #[test]
    fn every_problem_gets_a_pick_whose_launch_checks_pass() {
        use crate::check::{check_launch, LaunchArgs, OperandArg};
        use gemm_dsl::abi::Operand;
        use gemm_dsl::grouped::SplitMix64;
        let cases = [
            (
                &sets::SM90_16BIT,
                DType::Bf16,
                DType::Bf16,
                DeviceModel::h100_sxm(),
            ),
            (
                &sets::SM90_16BIT,
                DType::F16,
                DType::F32,
                DeviceModel::h100_sxm(),
            ),
            (
                &sets::SM80_16BIT,
                DType::Bf16,
                DType::Bf16,
                DeviceModel::a100_sxm(),
            ),
            (
                &sets::SM80_F32,
                DType::F32,
                DType::F32,
                DeviceModel::a100_sxm(),
            ),
        ];
        let mut random = SplitMix64::new(0x5eed_a119);
        for (set, dtype, out, device) in cases {
            let specs = planned(&set.specs(dtype, out));
            let picker = Picker::new(&specs, device);
            let (mut narrow_picks, mut one_rows, mut swapped_routes, mut staged_routes) =
                (0, 0, 0, 0);
            let draws = 600;
            for _ in 0..draws {
                // Half the problems drawn with aligned lines and addresses (sizes, padding and
                // offsets in steps of 8 elements; ones stay ones), half at any alignment.
                let step = if random.below(2) == 0 { 8 } else { 1 };
                let mut size = || match random.below(8) {
                    0 => 1,
                    1..=3 => step * (1 + random.below(64 / u64::from(step)) as u32),
                    _ => step * (1 + random.below(5000 / u64::from(step)) as u32),
                };
                let (m, n, k) = (size(), size(), size());
                let layout = sets::LAYOUTS[random.below(4) as usize];
                let count = if random.below(4) == 0 {
                    2 + random.below(3) as u32
                } else {
                    1
                };
                let packed = Problem::new(m, n, k, layout);
                let mut past_line = || match random.below(2) {
                    0 => 0,
                    _ => step * random.below(17) as u32,
                };
                let lds = LeadingDims {
                    lda: packed.lda + past_line(),
                    ldb: packed.ldb + past_line(),
                    ldc: packed.ldc + past_line(),
                };
                // Each operand a view that starts some elements into a fresh allocation.
                let mut start = |element_bytes: u32| {
                    let elements = match random.below(4) {
                        0 => u64::from(step) * random.below(16),
                        _ => 0,
                    };
                    0x7f00_0000_0000 + elements * u64::from(element_bytes)
                };
                let addresses = [
                    start(dtype.size_bytes()),
                    start(dtype.size_bytes()),
                    start(out.size_bytes()),
                ];
                let problem = packed
                    .with_batch(count)
                    .with_leading_dims(lds.lda, lds.ldb, lds.ldc)
                    .with_address_align(addresses.iter().map(|&a| address_align(a)).min().unwrap());
                let every_route = Routes {
                    one_row: true,
                    swapped: true,
                    stage_inputs: true,
                    stage_output: true,
                };
                let route = picker.route(&problem, every_route).unwrap_or_else(|| {
                    panic!(
                        "{}: no pick for {problem} {lds:?}:\n{}",
                        set.name,
                        picker.refusals(&problem)
                    )
                });
                let candidates = picker.candidates();
                let pick = route.pick;
                let wide_admits = |problem: &Problem| {
                    candidates
                        .iter()
                        .any(|c| !c.narrow_access() && c.refusal(problem).is_none())
                };
                // Narrow copies only where no wide kernel takes the problem or its one-row
                // form and staging the inputs is not predicted faster; a swapped product and
                // a staged problem (16-byte copies; a staged problem's C may still need
                // narrow stores) only where the model prefers them.
                let staged = route.staged.any();
                assert!(
                    !staged || !candidates[pick.index].narrow_copies(),
                    "{problem} {lds:?}"
                );
                let narrow = !staged && candidates[pick.index].narrow_access();
                let swapped = route.problem.c_layout != problem.c_layout;
                assert!(!(swapped && narrow), "{problem} {lds:?}");
                assert!(!staged || !wide_admits(&problem), "{problem} {lds:?}");
                assert_eq!(
                    narrow,
                    !swapped
                        && !staged
                        && !wide_admits(&problem)
                        && !problem.as_one_row().as_ref().is_some_and(wide_admits),
                    "{problem} {lds:?}: {}",
                    candidates[pick.index].name
                );
                narrow_picks += usize::from(narrow);
                swapped_routes += usize::from(swapped);
                staged_routes += usize::from(staged);
                one_rows += usize::from(
                    route.swaps_operands && route.problem.c_layout == gemm_dsl::CLayout::Row,
                );
                // The caller's buffers, each exactly as long as the problem needs.
                let (a_lines, a_line) = if layout.a_row_major() { (m, k) } else { (k, m) };
                let (b_lines, b_line) = if layout.b_row_major() { (k, n) } else { (n, k) };
                let len = |(lines, line): (u32, u32), ld: u32| {
                    let (lines, ld) = (u64::from(lines), u64::from(ld));
                    ((u64::from(count) - 1) * lines * ld + (lines - 1) * ld + u64::from(line))
                        as usize
                };
                // A staged input is read from its scratch: a fresh allocation of its lines
                // at the staged leading dimension.
                let buffer = |staged: bool, address: u64, lines_line: (u32, u32), ld: u32| {
                    if staged {
                        let ld = pick::repack::staged_ld(ld, dtype.size_bytes());
                        (
                            0x7e00_0000_0000,
                            (u64::from(count) * u64::from(lines_line.0) * u64::from(ld)) as usize,
                        )
                    } else {
                        (address, len(lines_line, ld))
                    }
                };
                let a_buffer = buffer(route.staged.a, addresses[0], (a_lines, a_line), lds.lda);
                let b_buffer = buffer(route.staged.b, addresses[1], (b_lines, b_line), lds.ldb);
                let c_buffer = if route.staged.c {
                    let ld = pick::repack::staged_ld(lds.ldc, out.size_bytes());
                    (
                        0x7d00_0000_0000,
                        (u64::from(count) * u64::from(m) * u64::from(ld)) as usize,
                    )
                } else {
                    (addresses[2], len((m, n), lds.ldc))
                };
                // A one-row or swapped launch reads B's buffer as its A and A's as its B.
                let (a_buffer, b_buffer) = if route.swaps_operands {
                    (b_buffer, a_buffer)
                } else {
                    (a_buffer, b_buffer)
                };
                let routed = route.problem;
                let shape = &specs[pick.index].1;
                let operand = |which: Operand, (address, len): (u64, usize)| OperandArg {
                    address,
                    len,
                    ld: routed.ld(which),
                };
                let args = LaunchArgs {
                    m: routed.m,
                    n: routed.n,
                    k: routed.k,
                    a: operand(Operand::A, a_buffer),
                    b: operand(Operand::B, b_buffer),
                    c: operand(Operand::C, c_buffer),
                    batch: Batch::packed(
                        shape,
                        count,
                        (routed.m, routed.n, routed.k),
                        leading_dims(&routed),
                    ),
                };
                if let Err(error) = check_launch(shape, &args, 132) {
                    panic!(
                        "{problem} {lds:?}: {} refuses the launch: {error}",
                        candidates[pick.index].name
                    );
                }
            }
            // Each way of running is drawn often.
            assert!(
                (100..draws - 100).contains(&(narrow_picks + staged_routes))
                    && narrow_picks >= 5
                    && staged_routes >= 5
                    && one_rows >= 5,
                "{}: of {draws} problems, {narrow_picks} ran on narrow copies, \
                 {staged_routes} staged their inputs and {one_rows} ran as one row",
                set.name
            );
            let swaps = picker.takes_swapped_products();
            assert!(
                swapped_routes >= 5 || !swaps && swapped_routes == 0,
                "{}: {swapped_routes} of {draws} problems ran swapped",
                set.name
            );
        }
    }

    #[test]
    fn packed_problems_whose_input_lines_miss_16_bytes_stage_them() {
        let picker = hopper_picker();
        let every_route = Routes {
            one_row: true,
            swapped: true,
            stage_inputs: true,
            stage_output: true,
        };
        let route = |problem: &Problem| picker.route(problem, every_route).unwrap();
        // Rows of 4099 bf16: B's lines are copied into rows of 4160 (whole 128-byte lines);
        // at 16 rows the staged problem runs as its swapped product (C stored element by
        // element where it lies), from 777 rows as given.
        for (shape, swaps) in [
            ("16x4099x4096", true),
            ("777x4099x2048", false),
            ("4096x4097x4096", false),
        ] {
            let problem = Problem::parse(shape, Layout::RowRow).unwrap();
            let staged = route(&problem);
            assert_eq!(staged.swaps_operands, swaps, "{shape}");
            let kernel = &picker.candidates()[staged.pick.index];
            assert!(!kernel.narrow_copies(), "{shape}: {}", kernel.name);
            assert_eq!(kernel.refusal(&staged.problem), None, "{shape}");
            // The staged problem as the caller's operands lie.
            let staged = Route {
                problem: if swaps {
                    staged.problem.swapped()
                } else {
                    staged.problem
                },
                ..staged
            };
            assert_eq!(
                staged.staged.inputs(),
                Repack {
                    b: true,
                    ..Repack::NONE
                },
                "{shape}"
            );
            assert_eq!(staged.problem.ldb, problem.n.div_ceil(64) * 64, "{shape}");
            assert_eq!(staged.problem.lda, problem.lda);
            // C's rows miss 16 bytes too: computed in scratch rows of 4160 where the model
            // prefers a 16-byte kernel's store and the copy out to narrow stores.
            let ldc = if staged.staged.c { 4160 } else { problem.ldc };
            assert_eq!(staged.problem.ldc, ldc, "{shape}");
            assert!(!(swaps && staged.staged.c), "{shape}");
        }
        // An odd K misaligns A's rows too.
        let odd_k = Problem::parse("333x517x259", Layout::RowRow).unwrap();
        assert_eq!(
            route(&odd_k).staged.inputs(),
            Repack {
                a: true,
                b: true,
                c: false
            }
        );
        let batch = Problem::parse("2x256x1001x777", Layout::RowRow).unwrap();
        assert_eq!(
            route(&batch).staged.inputs(),
            Repack {
                a: true,
                b: true,
                c: false
            }
        );
        // Aligned lines, or an operand that starts inside a 16-byte word (maybe C), stay as
        // they are.
        let aligned = Problem::parse("777x4104x2048", Layout::RowRow).unwrap();
        assert_eq!(route(&aligned).staged, Repack::NONE);
        let view = Problem::parse("777x4099x2048", Layout::RowRow)
            .unwrap()
            .with_address_align(2);
        assert_eq!(route(&view).staged, Repack::NONE);
        assert!(picker.candidates()[route(&view).pick.index].narrow_copies());
    }

    #[test]
    fn a_problem_no_kernel_admits_names_every_refusal() {
        let specs = planned(&[
            "name: only_rr, arch: sm_80, dtype: bf16, layout: rr, tile: 128x128x32, warps: 2x2, stages: 3, swizzle: 128B, copy: cp_async, mma: mma_sync",
        ]);
        let picker = Picker::new(&specs, DeviceModel::a100_sxm());
        let other_layout = Problem::new(128, 128, 32, Layout::ColCol);
        assert_eq!(picker.pick(&other_layout), None);
        assert_eq!(picker.refusals(&other_layout), "  only_rr: layout rr");
        // Rows of 3 bf16 (6 bytes) cannot start 16-byte aligned.
        let narrow = Problem::new(128, 3, 32, Layout::RowRow);
        assert_eq!(picker.pick(&narrow), None);
        assert!(
            picker.refusals(&narrow).contains("aligned"),
            "{}",
            picker.refusals(&narrow)
        );
    }
}
