//! `gemm-bench`: time catalog kernels against cuBLAS in one process.
//!
//! Each kernel runs with the element types its spec names and is timed against the cuBLAS
//! call of the same types ([`CublasGemm::baseline`]): SGEMM (no TF32) for f32 SIMT kernels,
//! GemmEx with the kernel's A/B and C types and f32 compute for bf16 and f16 kernels, GemmEx
//! with `CUBLAS_COMPUTE_32F_FAST_TF32` for tf32 kernels. Every row of the report names its
//! baseline.
//!
//! For each shape, random normal inputs are made once per input type (f32 normals rounded to
//! the type; several copies when they would fit in L2) and shared by every spec of that type
//! that admits the shape; each spec's launches alternate with cuBLAS's (and with `--math-only`,
//! its math-only probe's) on one stream, each launch timed by its own CUDA events; the median
//! counts. `--sustain S` keeps the rotation going S seconds before timing.
//!
//! A shape `BxMxNxK` is a strided batch of B products in one launch, each operand's matrices
//! back to back (rows padded to 16 bytes): ours through `launch_strided_batched`, cuBLAS
//! through `cublasSgemmStridedBatched` / `cublasGemmStridedBatchedEx`.
//!
//! Exit codes: 0 done, 1 GPU error or failed `--check`, 2 bad arguments.

use clap::{Parser, ValueEnum};
use cudarc::driver::{CudaSlice, CudaStream};
use gemm_codegen::catalog::{self, CatalogSpec};
use gemm_codegen::gemm_dsl::ValidSpec;
use gemm_codegen::{Emitted, KernelInfo};
use gemm_runtime::bench::{
    full_suite, input_sets, parse_shapes, quick_suite, time_round_robin, today, BenchRecord,
    BenchReport, InterleavedTimes, MathOnlyTimes, Method, Rounds, Shape, Skipped,
};
use gemm_runtime::blas::{Cublas, CublasGemm};
use gemm_runtime::probe::MathOnlyKernel;
use gemm_runtime::verify::{compare, in_order, ErrorReport, Problem, Reference};
use gemm_runtime::{
    open_context, with_kernel, AnyKernel, Batch, DeviceInfo, Element, Error, GemmKernel,
    LaunchShape, LeadingDims, StorageOrder,
};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Suite {
    /// 1024³, 2048³, 4096³.
    Quick,
    /// The design's shape suite, each spec limited to the shapes its tile admits.
    Full,
}

#[derive(Parser)]
#[command(
    name = "gemm-bench",
    about = "Time gemm-dsl catalog kernels against cuBLAS of the same element types"
)]
struct Cli {
    /// Catalog specs to time, comma separated (default: the whole catalog, unless
    /// --spec-file is given).
    #[arg(long, value_delimiter = ',')]
    specs: Vec<String>,
    /// Also time the specs in this file: one spec body per line (`#` starts a comment line);
    /// for tuning outside the catalog.
    #[arg(long)]
    spec_file: Option<PathBuf>,
    /// Replace a kernel's generated PTX by DIR/NAME.ptx where that file exists: compares a
    /// hand-edited kernel with the generated one under the same launch rules. The file must
    /// keep the kernel's entry and parameters and, at its launch shape, touch no memory the
    /// kernel does not: the launch checks only the parameter list and trusts the rest.
    #[arg(long)]
    ptx_dir: Option<PathBuf>,
    /// Shape suite.
    #[arg(long, value_enum, default_value_t = Suite::Quick)]
    suite: Suite,
    /// Shapes MxNxK, or BxMxNxK for a strided batch of B products in one launch, comma
    /// separated; replaces the suite.
    #[arg(long)]
    shapes: Option<String>,
    /// Catalog specs that run the full suite when --suite is quick (comma separated); the
    /// others keep the quick suite.
    #[arg(long, value_delimiter = ',', conflicts_with = "shapes")]
    full_for: Vec<String>,
    /// Start no new (spec, shape) measurement after this many seconds; what is left is
    /// reported as not run, and the report is still written.
    #[arg(long)]
    time_limit: Option<u64>,
    /// Timed launches per (spec, shape), for ours and for cuBLAS each.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..))]
    iters: u32,
    /// Untimed launches before timing.
    #[arg(long, default_value_t = 5)]
    warmup: u32,
    /// After the warm-up, keep launching (untimed, same rotation) for this many seconds per
    /// (spec, shape): times taken at the clocks the board holds under sustained load.
    #[arg(long, default_value_t = 0)]
    sustain: u64,
    /// Also time each spec's math-only probe in the rotation (its main-loop instructions with
    /// no memory traffic, on the kernel's resident blocks, as many k tiles per block as the
    /// kernel runs at that shape): for mma.sync kernels, how close the kernel comes to its
    /// own math's ceiling (a SIMT probe measured below its kernel: no ceiling there).
    #[arg(long)]
    math_only: bool,
    /// Round every leading dimension (A, B and C, ours and cuBLAS's) up to a multiple of
    /// this many bytes: 16 (the alignment the copies need) or more, e.g. 128 to see what
    /// strides that split cache lines cost.
    #[arg(long, default_value_t = 16, value_parser = parse_ld_align)]
    ld_align: u32,
    /// Most copies of the inputs rotated through (to keep operands out of L2).
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..))]
    max_input_sets: u32,
    /// Verify each kernel once per shape before timing, against cuBLAS on the exact inputs
    /// with f32 accumulation, within its dtype's tolerance; stop on an error.
    #[arg(long)]
    check: bool,
    /// Write the report as JSON.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Write the report as markdown.
    #[arg(long)]
    markdown: Option<PathBuf>,
    /// Write an SVG chart of TFLOP/s per shape.
    #[arg(long)]
    svg: Option<PathBuf>,
    /// CUDA device ordinal.
    #[arg(long, default_value_t = 0)]
    device: usize,
    /// Time nothing: read a report written by `--out` and write its table, `--markdown` and
    /// `--svg` again (no GPU needed).
    #[arg(long, conflicts_with_all = ["specs", "shapes", "full_for", "check"])]
    from_json: Option<PathBuf>,
}

/// Why the run stopped.
enum Failure {
    Arguments(String),
    Gpu(Error),
    Check(String),
    Output(String),
}

impl From<Error> for Failure {
    fn from(error: Error) -> Self {
        Failure::Gpu(error)
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(&cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Arguments(message)) => {
            eprintln!("error: {message}");
            ExitCode::from(2)
        }
        Err(Failure::Gpu(error)) => {
            eprintln!("error: {error}");
            ExitCode::from(1)
        }
        Err(Failure::Check(message)) => {
            eprintln!("error: check failed: {message}");
            ExitCode::from(1)
        }
        Err(Failure::Output(message)) => {
            eprintln!("error: {message}");
            ExitCode::from(1)
        }
    }
}

/// (spec text, where it came from) for every kernel to time.
fn selected_specs(cli: &Cli) -> Result<Vec<(String, String)>, Failure> {
    let mut specs: Vec<(String, String)> = Vec::new();
    if cli.specs.is_empty() && cli.spec_file.is_none() {
        specs.extend(
            catalog::CATALOG
                .iter()
                .map(|e| (e.spec.to_string(), format!("catalog:{}", e.name))),
        );
    }
    for name in &cli.specs {
        let entry: &CatalogSpec = catalog::find(name.trim()).ok_or_else(|| {
            let known: Vec<&str> = catalog::CATALOG.iter().map(|e| e.name).collect();
            Failure::Arguments(format!(
                "no catalog spec named `{name}`; known: {}",
                known.join(", ")
            ))
        })?;
        specs.push((entry.spec.to_string(), format!("catalog:{}", entry.name)));
    }
    if let Some(path) = &cli.spec_file {
        let text = std::fs::read_to_string(path).map_err(|error| {
            Failure::Arguments(format!("cannot read {}: {error}", path.display()))
        })?;
        for (number, line) in text.lines().enumerate() {
            let line = line.trim();
            if !line.is_empty() && !line.starts_with('#') {
                specs.push((
                    line.to_string(),
                    format!("{}:{}", path.display(), number + 1),
                ));
            }
        }
    }
    Ok(specs)
}

fn run(cli: &Cli) -> Result<(), Failure> {
    if let Some(path) = &cli.from_json {
        let text = std::fs::read_to_string(path)
            .map_err(|error| Failure::Output(format!("cannot read {}: {error}", path.display())))?;
        let report: BenchReport = serde_json::from_str(&text).map_err(|error| {
            Failure::Arguments(format!(
                "{} is not a gemm-bench report: {error}",
                path.display()
            ))
        })?;
        return write_report(cli, &report);
    }
    let specs = selected_specs(cli)?;
    let shapes = match &cli.shapes {
        Some(text) => parse_shapes(text).map_err(Failure::Arguments)?,
        None => match cli.suite {
            Suite::Quick => quick_suite(),
            Suite::Full => full_suite(),
        },
    };
    // The shapes of the full suite that only the --full-for specs run.
    let extra_shapes: Vec<Shape> = if cli.full_for.is_empty() || cli.suite == Suite::Full {
        Vec::new()
    } else {
        full_suite()
            .into_iter()
            .filter(|shape| !shapes.contains(shape))
            .collect()
    };
    for name in &cli.full_for {
        if !specs
            .iter()
            .any(|(_, origin)| origin == &format!("catalog:{name}"))
        {
            return Err(Failure::Arguments(format!(
                "--full-for {name}: not among the specs to time"
            )));
        }
    }
    if cli.iters < 20 {
        eprintln!(
            "note: --iters {} is below the 20 launches the performance method asks for",
            cli.iters
        );
    }
    let valid: Vec<ValidSpec> = specs
        .iter()
        .map(|(spec, origin)| {
            gemm_codegen::gemm_dsl::check_str(spec)
                .map_err(|errors| Failure::Arguments(errors.render(spec, origin)))
        })
        .collect::<Result<_, _>>()?;
    // Loaded kernels hold their description for the life of the process.
    let mut infos: Vec<KernelInfo<'static>> = valid
        .iter()
        .map(|valid| {
            let emitted: &'static Emitted = Box::leak(Box::new(gemm_codegen::emit(valid)));
            emitted.info()
        })
        .collect();
    if let Some(dir) = &cli.ptx_dir {
        for info in &mut infos {
            let path = dir.join(format!("{}.ptx", info.name()));
            if let Ok(ptx) = std::fs::read_to_string(&path) {
                eprintln!("{}: PTX replaced by {}", info.name(), path.display());
                let mut parts = info.parts();
                parts.ptx = Box::leak(ptx.into_boxed_str());
                // SAFETY: `--ptx-dir` is documented to take hand-edited variants of the
                // generated kernels that keep their entry, parameters and memory footprint
                // at the spec's launch shape; whoever puts a file there vouches for that
                // (load still refuses another parameter list).
                *info = unsafe { KernelInfo::from_parts(parts) };
            }
        }
    }

    // Which (spec, shape) pairs run; the rest are reported as skipped, never dropped quietly.
    let mut skipped = Vec::new();
    let mut work: Vec<(Shape, Vec<usize>)> = Vec::new();
    let all_shapes = shapes.iter().chain(&extra_shapes);
    for &shape in all_shapes {
        let mut admitting = Vec::new();
        for (index, kernel) in infos.iter().enumerate() {
            let origin = &specs[index].1;
            if !shapes.contains(&shape)
                && !cli
                    .full_for
                    .iter()
                    .any(|name| origin == &format!("catalog:{name}"))
            {
                continue;
            }
            match shape.admitted_by(kernel.launch()) {
                Ok(()) => admitting.push(index),
                Err(reason) => {
                    println!("skipping {} at {shape}: {reason}", kernel.name());
                    skipped.push(Skipped {
                        spec: kernel.name().to_string(),
                        shape,
                        reason,
                    });
                }
            }
        }
        if !admitting.is_empty() {
            work.push((shape, admitting));
        }
    }

    let ctx = open_context(cli.device)?;
    let device = DeviceInfo::query(&ctx)?;
    let stream = ctx.default_stream();
    let blas = Cublas::new(&stream)?;
    let kernels: Vec<AnyKernel> = infos
        .iter()
        .map(|info| AnyKernel::load(&ctx, info))
        .collect::<Result<_, _>>()?;
    let probes: Vec<Option<MathOnlyKernel>> = valid
        .iter()
        .map(|valid| {
            cli.math_only
                .then(|| MathOnlyKernel::load(&ctx, gemm_codegen::emit_math_only(valid)))
                .transpose()
        })
        .collect::<Result<_, _>>()?;
    eprintln!(
        "{} (compute capability {}, CUDA {}), {} kernels",
        device.name,
        device.compute_capability,
        device.driver_version,
        kernels.len()
    );

    let started = Instant::now();
    let deadline = cli.time_limit.map(|s| started + Duration::from_secs(s));
    let total: usize = work.iter().map(|(_, specs)| specs.len()).sum();
    let progress = ProgressBar::with_draw_target(Some(total as u64), ProgressDrawTarget::stderr());
    progress.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} {msg} [{elapsed}]")
            .expect("the template is valid"),
    );
    let mut records = Vec::new();
    let mut out_of_time = 0;
    for (shape, admitting) in &work {
        let mut inputs = ShapeInputs::new(InputSizing {
            shape: *shape,
            l2_bytes: device.l2_cache_bytes,
            max_sets: cli.max_input_sets,
            ld_align: cli.ld_align,
        });
        for &index in admitting {
            let kernel = &kernels[index];
            let name = kernel.info().name();
            if deadline.is_some_and(|deadline| Instant::now() >= deadline) {
                out_of_time += 1;
                skipped.push(Skipped {
                    spec: name.to_string(),
                    shape: *shape,
                    reason: format!(
                        "not run: --time-limit {} s reached",
                        cli.time_limit.unwrap_or_default()
                    ),
                });
                progress.inc(1);
                continue;
            }
            progress.set_message(format!("{shape}: {name}"));
            let types = kernel.types();
            let baseline = CublasGemm::baseline(types);
            let run = Run {
                cli,
                stream: &stream,
                blas: &blas,
            };
            let probe = probes[index].as_ref();
            let (times, check) = with_kernel!(kernel, typed => run.measure(typed, types, baseline, probe, &mut inputs)?);
            let record = BenchRecord::new(
                name,
                &types.to_string(),
                &baseline.short_name_for(shape.batch),
                *shape,
                &times,
                check,
            )
            .expect("at least one timed launch each");
            progress.println(format!(
                "{name:<28} {:<10} {shape:>18}  ours {:>8.2} TFLOP/s  cuBLAS {:>8.2} TFLOP/s  ratio {:.3}  ({})",
                record.types, record.ours_tflops, record.cublas_tflops, record.ratio, record.baseline
            ));
            records.push(record);
            progress.inc(1);
        }
    }
    progress.finish_and_clear();
    if out_of_time > 0 {
        eprintln!(
            "warning: {out_of_time} (spec, shape) measurements not run: --time-limit {} s reached",
            cli.time_limit.unwrap_or_default()
        );
    }

    let mut baselines: Vec<String> = Vec::new();
    for kernel in &kernels {
        let description = CublasGemm::baseline(kernel.types()).description();
        if !baselines.contains(&description) {
            baselines.push(description);
        }
    }
    let report = BenchReport {
        date: today(),
        device,
        method: Method {
            warmup: cli.warmup as usize,
            sustain_s: cli.sustain,
            iters: cli.iters as usize,
            max_input_sets: cli.max_input_sets,
            inputs: format!(
                "random normal f32 rounded to each kernel's input type (tf32 kernels get the f32 values), C = A·B, cuBLAS on row-major A and B, ours in its spec's layout (the same values, transposed for a column-major operand); rows (columns) padded to {} bytes where a packed one is not",
                cli.ld_align
            ),
            baseline: format!(
                "per row (cuBLAS baseline column): {}{}; same stream, launches interleaved with ours",
                baselines.join("; "),
                if shapes.iter().chain(&extra_shapes).any(|shape| shape.batch > 1) {
                    "; a BxMxNxK row runs the same call's strided batched form (cublasGemmStridedBatchedEx, cublasSgemmStridedBatched)"
                } else {
                    ""
                }
            ),
            statistic: "median of per-launch CUDA event times".to_string(),
        },
        records,
        skipped,
    };
    println!();
    write_report(cli, &report)
}

/// The table on stdout and every output file asked for.
fn write_report(cli: &Cli, report: &BenchReport) -> Result<(), Failure> {
    print!("{}", report.table());
    if let Some(path) = &cli.out {
        let json = serde_json::to_string_pretty(report).expect("the report serializes");
        write(path, &json)?;
    }
    if let Some(path) = &cli.markdown {
        write(path, &report.markdown())?;
    }
    if let Some(path) = &cli.svg {
        write(path, &report.svg().map_err(Failure::Output)?)?;
    }
    Ok(())
}

fn gpu(action: &str, source: cudarc::driver::DriverError) -> Failure {
    Failure::Gpu(Error::Driver {
        action: action.to_string(),
        source,
    })
}

fn write(path: &Path, text: &str) -> Result<(), Failure> {
    std::fs::write(path, text)
        .map_err(|error| Failure::Output(format!("cannot write {}: {error}", path.display())))
}

/// What every measurement shares.
struct Run<'a> {
    cli: &'a Cli,
    stream: &'a Arc<CudaStream>,
    blas: &'a Cublas,
}

impl Run<'_> {
    /// The optional check, then interleaved timing of `kernel` and its cuBLAS `baseline` on
    /// the shape's inputs of the kernel's input type.
    fn measure<In: Element, Out: Element>(
        &self,
        kernel: &GemmKernel<In, Out>,
        types: gemm_runtime::KernelTypes,
        baseline: CublasGemm,
        probe: Option<&MathOnlyKernel>,
        inputs: &mut ShapeInputs,
    ) -> Result<(InterleavedTimes, Option<String>), Failure> {
        let shape = inputs.sizing.shape;
        let Shape { m, n, k, batch } = shape;
        let stream = self.stream;
        let launch = kernel.info().launch();
        let orders = (launch.a_order, launch.b_order);
        let typed = inputs.typed::<In>(stream, self.blas, self.cli.check, orders)?;
        let ours_inputs = typed.ours();
        // Ours reads its own layout's copies; cuBLAS the row-major ones.
        let ldc = shape.leading_dim(n, Out::BYTES, typed.ld_align);
        let c_len = batch as usize * m as usize * ldc as usize;
        let mut c_ours = stream
            .alloc_zeros::<Out>(c_len)
            .map_err(|source| gpu("allocating C", source))?;
        let mut c_cublas = stream
            .alloc_zeros::<Out>(c_len)
            .map_err(|source| gpu("allocating C", source))?;
        let (ours_lds, ours_batch) = ours_inputs.batch::<Out>(kernel.info().launch());
        let check = match &typed.reference {
            Some(reference) => {
                let name = kernel.info().name();
                let report = typed.check(stream, kernel, &mut c_ours, reference)?;
                report
                    .check(&types.tolerance(m.saturating_mul(batch), n, k))
                    .map_err(|broken| {
                        Failure::Check(format!("{name} at {shape}: {broken} ({report})"))
                    })?;
                Some(report.brief())
            }
            None => None,
        };
        let sets = typed.a.len();
        let mut ours = |launch: usize| {
            let set = launch % sets;
            kernel.launch_strided_batched(
                stream,
                &ours_inputs.a[set],
                &ours_inputs.b[set],
                &mut c_ours,
                m,
                n,
                k,
                ours_lds,
                ours_batch,
            )
        };
        let (cublas_lds, cublas_batch) = typed.row_major_batch::<Out>();
        let mut theirs = |launch: usize| {
            // cuBLAS starts half-way round the ring, so the two never read the same copy
            // back to back.
            let set = (launch + sets / 2) % sets;
            // One product: the plain call, the baseline of every unbatched shape.
            if batch == 1 {
                return self.blas.gemm_with_ld(
                    baseline,
                    &typed.a[set],
                    &typed.b[set],
                    &mut c_cublas,
                    m,
                    n,
                    k,
                    typed.lda,
                    typed.ldb,
                    ldc,
                );
            }
            self.blas.gemm_strided_batched(
                baseline,
                &typed.a[set],
                &typed.b[set],
                &mut c_cublas,
                (m, n, k),
                cublas_lds,
                cublas_batch,
            )
        };
        let rounds = Rounds {
            warmup: self.cli.warmup as usize,
            sustain: Duration::from_secs(self.cli.sustain),
            iters: self.cli.iters as usize,
        };
        let Some(probe) = probe else {
            let [ours_ms, theirs_ms]: [Vec<f32>; 2] =
                time_round_robin(stream, &rounds, &mut [&mut ours, &mut theirs])?
                    .try_into()
                    .expect("one list of times per competitor");
            let times = InterleavedTimes {
                ours_ms,
                theirs_ms,
                math_only: None,
            };
            return Ok((times, check));
        };
        // The probe runs on the kernel's resident blocks for as many k tiles per block as the
        // kernel's busiest block computes at this shape, so both launches last about as long.
        let blocks = kernel.resident_blocks();
        let launch = kernel.info().launch();
        let tiles = m.div_ceil(launch.tile_m) * n.div_ceil(launch.tile_n) * batch;
        let trips = (k / launch.tile_k * tiles.div_ceil(blocks)).max(1);
        let mut probe_out = stream
            .alloc_zeros::<f32>(probe.out_len(blocks))
            .map_err(|source| gpu("allocating the probe's output", source))?;
        let mut math_only = |_launch: usize| probe.launch(stream, blocks, trips, &mut probe_out);
        let [ours_ms, theirs_ms, probe_ms]: [Vec<f32>; 3] = time_round_robin(
            stream,
            &rounds,
            &mut [&mut ours, &mut theirs, &mut math_only],
        )?
        .try_into()
        .expect("one list of times per competitor");
        let times = InterleavedTimes {
            ours_ms,
            theirs_ms,
            math_only: Some(MathOnlyTimes {
                flops_per_launch: probe.flops(blocks, trips),
                ms: probe_ms,
            }),
        };
        Ok((times, check))
    }
}

/// What one shape's inputs are made of: the shape, how many copies fit the L2 cache's
/// rotation, and the stride rounding.
#[derive(Clone, Copy)]
struct InputSizing {
    shape: Shape,
    l2_bytes: u32,
    max_sets: u32,
    /// Every leading dimension is its row length rounded up to this many bytes.
    ld_align: u32,
}

/// One shape's inputs on the device, made on first use for each input type.
struct ShapeInputs {
    sizing: InputSizing,
    /// `TypedInputs<In>` by `TypeId::of::<In>()` and the storage orders of our A and B.
    by_type: HashMap<(TypeId, Orders), Box<dyn Any>>,
}

impl ShapeInputs {
    fn new(sizing: InputSizing) -> Self {
        ShapeInputs {
            sizing,
            by_type: HashMap::new(),
        }
    }

    /// The inputs of type `In` (and with `with_reference`, their reference), made now if
    /// this is the first kernel of that type at this shape.
    fn typed<In: Element>(
        &mut self,
        stream: &Arc<CudaStream>,
        blas: &Cublas,
        with_reference: bool,
        orders: Orders,
    ) -> Result<&TypedInputs<In>, Failure> {
        let key = (TypeId::of::<In>(), orders);
        if !self.by_type.contains_key(&key) {
            let made = TypedInputs::<In>::new(stream, blas, self.sizing, with_reference, orders)?;
            self.by_type.insert(key, Box::new(made));
        }
        Ok(self.by_type[&key]
            .downcast_ref()
            .expect("entries are keyed by their type"))
    }
}

/// The device copies of one shape's inputs of one type, and optionally the reference on set 0.
/// Rows are `lda` / `ldb` elements apart: the row lengths rounded up to `--ld-align` bytes (16,
/// which every kernel's copies and the TMA need, unless told more), for ours and cuBLAS alike.
struct TypedInputs<In: Element> {
    shape: Shape,
    /// The byte multiple every leading dimension is rounded up to.
    ld_align: u32,
    lda: u32,
    ldb: u32,
    a: Vec<CudaSlice<In>>,
    b: Vec<CudaSlice<In>>,
    /// The same inputs laid out for a kernel with a column-major A or B (cuBLAS keeps the
    /// row-major copies: the product is the same).
    transposed: Option<OperandSets<In>>,
    reference: Option<Vec<f64>>,
}

/// The storage orders of A and B.
type Orders = (StorageOrder, StorageOrder);

/// Every input set of A and B in one layout, with their leading dimensions.
struct OperandSets<In: Element> {
    lda: u32,
    ldb: u32,
    a: Vec<CudaSlice<In>>,
    b: Vec<CudaSlice<In>>,
}

/// A view of the inputs in the layout our kernel reads.
struct OursView<'a, In: Element> {
    shape: Shape,
    /// The byte multiple every leading dimension is rounded up to.
    ld_align: u32,
    lda: u32,
    ldb: u32,
    a: &'a [CudaSlice<In>],
    b: &'a [CudaSlice<In>],
}

impl<In: Element> OursView<'_, In> {
    /// The leading dimensions (C's rows padded to `ld_align` bytes of `Out`) and the batch of our
    /// inputs, matrices back to back.
    fn batch<Out: Element>(&self, launch: &LaunchShape) -> (LeadingDims, Batch) {
        let Shape { m, n, k, batch } = self.shape;
        let lds = LeadingDims {
            lda: self.lda,
            ldb: self.ldb,
            ldc: self.shape.leading_dim(n, Out::BYTES, self.ld_align),
        };
        (lds, Batch::packed(launch, batch, (m, n, k), lds))
    }
}

impl<In: Element> TypedInputs<In> {
    fn new(
        stream: &Arc<CudaStream>,
        blas: &Cublas,
        sizing: InputSizing,
        with_reference: bool,
        (a_order, b_order): Orders,
    ) -> Result<Self, Failure> {
        let InputSizing {
            shape,
            l2_bytes,
            max_sets,
            ld_align,
        } = sizing;
        let Shape { m, n, k, batch } = shape;
        let row_major = (a_order, b_order) == (StorageOrder::RowMajor, StorageOrder::RowMajor);
        // Column-major lines run down M (A) or K (B).
        let (t_lda, t_ldb) = (
            match a_order {
                StorageOrder::RowMajor => shape.leading_dim(k, In::BYTES, ld_align),
                StorageOrder::ColMajor => shape.leading_dim(m, In::BYTES, ld_align),
            },
            match b_order {
                StorageOrder::RowMajor => shape.leading_dim(n, In::BYTES, ld_align),
                StorageOrder::ColMajor => shape.leading_dim(k, In::BYTES, ld_align),
            },
        );
        let mut transposed = (!row_major).then(|| OperandSets {
            lda: t_lda,
            ldb: t_ldb,
            a: Vec::new(),
            b: Vec::new(),
        });
        let input_bytes = u64::from(In::BYTES)
            * u64::from(batch)
            * (u64::from(m) * u64::from(k) + u64::from(k) * u64::from(n));
        let sets = input_sets(input_bytes, u64::from(l2_bytes), max_sets);
        let (lda, ldb) = (
            shape.leading_dim(k, In::BYTES, ld_align),
            shape.leading_dim(n, In::BYTES, ld_align),
        );
        let (mut a, mut b) = (Vec::new(), Vec::new());
        for set in 0..sets {
            // The same seeds for every type: each type's inputs are the f32 ones rounded. A
            // batch's matrices lie back to back.
            let problems: Vec<Problem<In>> = (0..batch)
                .map(|i| Problem::random(m, n, k, 1000 + u64::from(set * batch + i)))
                .collect();
            let back_to_back = |matrix: &dyn Fn(&Problem<In>) -> Vec<In>| -> Vec<In> {
                problems.iter().flat_map(matrix).collect()
            };
            a.push(
                stream
                    .clone_htod(&back_to_back(&|p| with_row_stride(&p.a, m, k, lda)))
                    .map_err(|source| gpu("copying A to the device", source))?,
            );
            b.push(
                stream
                    .clone_htod(&back_to_back(&|p| with_row_stride(&p.b, k, n, ldb)))
                    .map_err(|source| gpu("copying B to the device", source))?,
            );
            if let Some(sets) = transposed.as_mut() {
                let laid_out = |values: &[In], rows: u32, cols: u32, order, ld| {
                    let (lines, len) = match order {
                        StorageOrder::RowMajor => (rows, cols),
                        StorageOrder::ColMajor => (cols, rows),
                    };
                    with_row_stride(&in_order(values, rows, cols, order), lines, len, ld)
                };
                let (t_lda, t_ldb) = (sets.lda, sets.ldb);
                sets.a.push(
                    stream
                        .clone_htod(&back_to_back(&|p| laid_out(&p.a, m, k, a_order, t_lda)))
                        .map_err(|source| gpu("copying A to the device", source))?,
                );
                sets.b.push(
                    stream
                        .clone_htod(&back_to_back(&|p| laid_out(&p.b, k, n, b_order, t_ldb)))
                        .map_err(|source| gpu("copying B to the device", source))?,
                );
            }
        }
        let mut inputs = TypedInputs {
            shape,
            ld_align,
            lda,
            ldb,
            a,
            b,
            transposed,
            reference: None,
        };
        if with_reference {
            inputs.reference = Some(inputs.cublas_reference(stream, blas)?);
        }
        Ok(inputs)
    }

    /// The inputs in our kernel's layout.
    fn ours(&self) -> OursView<'_, In> {
        match &self.transposed {
            Some(sets) => OursView {
                shape: self.shape,
                ld_align: self.ld_align,
                lda: sets.lda,
                ldb: sets.ldb,
                a: &sets.a,
                b: &sets.b,
            },
            None => OursView {
                shape: self.shape,
                ld_align: self.ld_align,
                lda: self.lda,
                ldb: self.ldb,
                a: &self.a,
                b: &self.b,
            },
        }
    }

    /// The leading dimensions and the batch of the row-major inputs cuBLAS reads, with C's
    /// rows padded to `ld_align` bytes of `Out`.
    fn row_major_batch<Out: Element>(&self) -> (LeadingDims, Batch) {
        let Shape { m, n, k, batch } = self.shape;
        let lds = LeadingDims {
            lda: self.lda,
            ldb: self.ldb,
            ldc: self.shape.leading_dim(n, Out::BYTES, self.ld_align),
        };
        let strides = Batch {
            count: batch,
            stride_a: u64::from(m) * u64::from(lds.lda),
            stride_b: u64::from(k) * u64::from(lds.ldb),
            stride_c: u64::from(m) * u64::from(lds.ldc),
        };
        (lds, strides)
    }

    /// cuBLAS on set 0 with exact inputs and f32 accumulation, as the reference for `--check`
    /// (every product's C, packed and back to back).
    fn cublas_reference(
        &self,
        stream: &Arc<CudaStream>,
        blas: &Cublas,
    ) -> Result<Vec<f64>, Failure> {
        let Shape { m, n, k, batch } = self.shape;
        let mut c = stream
            .alloc_zeros::<f32>(batch as usize * m as usize * n as usize)
            .map_err(|source| gpu("allocating the reference C", source))?;
        let (lds, strides) = self.row_major_batch::<f32>();
        let packed_c = LeadingDims { ldc: n, ..lds };
        let packed_batch = Batch {
            stride_c: u64::from(m) * u64::from(n),
            ..strides
        };
        if batch == 1 {
            blas.gemm_with_ld(
                CublasGemm::reference(In::STORAGE),
                &self.a[0],
                &self.b[0],
                &mut c,
                m,
                n,
                k,
                self.lda,
                self.ldb,
                n,
            )?;
        } else {
            blas.gemm_strided_batched(
                CublasGemm::reference(In::STORAGE),
                &self.a[0],
                &self.b[0],
                &mut c,
                (m, n, k),
                packed_c,
                packed_batch,
            )?;
        }
        let c = stream
            .clone_dtoh(&c)
            .map_err(|source| gpu("copying the cuBLAS result back", source))?;
        Ok(c.into_iter().map(f64::from).collect())
    }

    /// One poisoned launch of `kernel` on set 0, measured against `reference`.
    fn check<Out: Element>(
        &self,
        stream: &Arc<CudaStream>,
        kernel: &GemmKernel<In, Out>,
        c: &mut CudaSlice<Out>,
        reference: &[f64],
    ) -> Result<ErrorReport, Failure> {
        let Shape { m, n, batch, .. } = self.shape;
        stream
            .memcpy_htod(&vec![Out::poison(); c.len()], c)
            .map_err(|source| gpu("poisoning C", source))?;
        let ours = self.ours();
        let (lds, strides) = ours.batch::<Out>(kernel.info().launch());
        kernel.launch_strided_batched(
            stream,
            &ours.a[0],
            &ours.b[0],
            c,
            m,
            n,
            self.shape.k,
            lds,
            strides,
        )?;
        let result = stream
            .clone_dtoh(c)
            .map_err(|source| gpu("copying C back", source))?;
        // C's matrices lie back to back, so the batch compares as one matrix of every
        // product's rows.
        let rows = m.checked_mul(batch).ok_or_else(|| {
            Failure::Arguments(format!("{} rows of C in all overflow 32 bits", self.shape))
        })?;
        Ok(compare(
            &result,
            reference,
            rows,
            n,
            lds.ldc,
            Reference::Cublas,
        )?)
    }
}

/// A packed `rows x cols` matrix laid out with rows `ld` elements apart (zeros between).
fn with_row_stride<T: Element>(packed: &[T], rows: u32, cols: u32, ld: u32) -> Vec<T> {
    if ld == cols {
        return packed.to_vec();
    }
    let (cols, ld) = (cols as usize, ld as usize);
    let mut strided = vec![T::from_f32(0.0); rows as usize * ld];
    for (row, values) in packed.chunks(cols).enumerate() {
        strided[row * ld..][..cols].copy_from_slice(values);
    }
    strided
}

/// `--ld-align`: a positive multiple of 16 bytes, at most 4096.
fn parse_ld_align(text: &str) -> Result<u32, String> {
    let bytes: u32 = text
        .parse()
        .map_err(|_| format!("`{text}` is not a number of bytes"))?;
    if bytes == 0 || !bytes.is_multiple_of(16) || bytes > 4096 {
        return Err(format!(
            "{bytes} bytes: leading dimensions must stay 16-byte multiples, so give 16, 32, .., 4096"
        ));
    }
    Ok(bytes)
}
