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
//! `gemm-bench cache show|prune|merge FILE` inspects and prunes tuning caches, or merges
//! caches into one, without a GPU.
//!
//! Exit codes: 0 done, 1 GPU error or failed `--check`, 2 bad arguments.

use clap::{Parser, Subcommand, ValueEnum};
use cudarc::driver::{CudaSlice, CudaStream};
use gemm_codegen::catalog::{self, CatalogSpec};
use gemm_codegen::{Emitted, KernelInfo};
use gemm_dsl::abi::Operand;
use gemm_dsl::pick::sets::{self, KernelSet};
use gemm_dsl::pick::{DeviceModel, Problem as PickProblem};
use gemm_dsl::ValidSpec;
use gemm_dsl::{DType, GemmSpec, Layout};
use gemm_harness::baseline::cublas::{Cublas, CublasGemm};
use gemm_harness::bench::fp8_set::{fp8_set_table, Fp8SetOutcome, Fp8SetRun};
use gemm_harness::bench::{
    full_suite, input_sets, median, parse_shapes, quick_suite, time_round_robin, today,
    BenchRecord, BenchReport, InterleavedTimes, LaunchHold, MathOnlyTimes, Method, Queue, Rounds,
    Shape, Skipped,
};
use gemm_harness::probe::MathOnlyKernel;
use gemm_harness::tune::{KnownKernels, PruneOptions, TuneRun};
use gemm_harness::verify::{compare, in_order, ErrorReport, Problem, Reference, Tolerance};
use gemm_harness::Error;
use gemm_runtime::tune::{CacheReading, TuneEntry, TuneFile};
use gemm_runtime::{
    device_key, device_model, open_context, with_kernel, AnyKernel, Batch, CudaContext, DeviceInfo,
    Element, GemmKernel, LaunchShape, LeadingDims, PickSource, Picker, StorageOrder,
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
    about = "Time gemm-dsl catalog kernels against cuBLAS of the same element types",
    args_conflicts_with_subcommands = true
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// Catalog specs to time, comma separated (default: the whole catalog, unless
    /// --spec-file is given).
    #[arg(long, value_delimiter = ',')]
    specs: Vec<String>,
    /// Also time the specs in this file: one spec body per line (`#` starts a comment line);
    /// for tuning outside the catalog.
    #[arg(long)]
    spec_file: Option<PathBuf>,
    /// Time the members of this kernel set (`gemm-codegen catalog` lists the sets), in
    /// --layout, for --set-types; with --auto or --tune-out, per shape as the picker says.
    /// An fp8 set (`sm90_fp8`, layout rc) runs against cuBLASLt's fp8 GEMM with the same
    /// per-tensor scales: per shape the entry point's pick and (without --auto) every member
    /// and --spec-file candidate, each checked first, with the model's predicted times; the
    /// block-scaled set (`sm90_fp8_block`) with block scales drawn per block, against
    /// cuBLASLt's block-scaled GEMM with the same scales (where it takes the shape) and its
    /// per-tensor one.
    #[arg(long)]
    set: Option<String>,
    /// Element types of the set's kernels: DTYPE or DTYPE->OUT (default: the set's first
    /// dtype, C of the same type).
    #[arg(long, requires = "set")]
    set_types: Option<String>,
    /// The layout the set's kernels are timed in (rr, rc, cr, cc).
    #[arg(long, default_value = "rr", requires = "set")]
    layout: String,
    /// Time, per shape, only the kernel the entry point picks (the cost model's pick, or the
    /// --tune-cache's measured best), against cuBLAS.
    #[arg(long, requires = "set", conflicts_with = "tune_out")]
    auto: bool,
    /// With --auto: consult this tuning cache before the model.
    #[arg(long, requires = "auto")]
    tune_cache: Option<PathBuf>,
    /// Tune: time every member of --set per shape (each checked first) and merge the fastest
    /// per shape into this tuning cache (JSON), for `Matmul` and `GEMM_DSL_TUNE_CACHE`: a
    /// shape measured again on this device replaces its entry, every other entry stays.
    #[arg(long, requires = "set")]
    tune_out: Option<PathBuf>,
    /// With --set: write the picks' table (model pick, cache pick, measured best per shape,
    /// geomeans) as markdown.
    #[arg(long, requires = "set")]
    picks: Option<PathBuf>,
    /// With --set: an SVG chart of the picked kernel's ratio to cuBLAS per shape.
    #[arg(long, requires = "set")]
    picks_svg: Option<PathBuf>,
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
    /// Shapes from a file: one MxNxK or BxMxNxK a line, `#` starts a comment (e.g.
    /// shapes/models.txt); replaces the suite.
    #[arg(long, conflicts_with = "shapes")]
    shape_file: Option<PathBuf>,
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
    /// After the warm-up launches, keep launching (untimed) for at least this many milliseconds
    /// per (spec, shape): a kernel of a few microseconds is then timed at the clocks a busy
    /// board runs, not while they ramp up after the host's checks left the GPU idle.
    #[arg(long, default_value_t = 0)]
    warm_ms: u64,
    /// Launch the timed rounds as the host issues them, without first queuing them behind a
    /// hold kernel (the method of reports before 2026-11-26): a kernel of a few microseconds
    /// may then be timed together with a wait for the host's next launch.
    #[arg(long)]
    no_hold: bool,
    /// Also time each spec's math-only probe in the rotation (its main-loop instructions with
    /// no memory traffic, on the kernel's resident blocks, as many k tiles per block as the
    /// kernel runs at that shape): for mma.sync kernels, how close the kernel comes to its
    /// own math's ceiling (a SIMT probe measured below its kernel: no ceiling there).
    #[arg(long)]
    math_only: bool,
    /// Round every leading dimension (A, B and C, ours and cuBLAS's) up to a multiple of
    /// this many bytes: 16 (the alignment 16-byte copies need) or more, e.g. 128 to see what
    /// strides that split cache lines cost; less (down to the element) times problems whose
    /// lines only narrow copies take, skipping kernels that need more.
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
    /// Time this fused-epilogue spec (bf16, layout rr) on --shapes against the same spec
    /// without its epilogue, that plain kernel plus an elementwise epilogue kernel, cuBLASLt
    /// with the matching epilogue and plain cuBLAS; print the table (and write it with
    /// --markdown, as JSON with --out). The spec: its text, @FILE, or a catalog name. With
    /// --set, the entry point instead: `Matmul` over the set with the spec's epilogue (its
    /// `scale`, `bias`, `activation`, `aux`) in every member, per shape its pick, against the
    /// same baselines and the plain set's pick.
    #[arg(long, conflicts_with_all = ["specs", "spec_file"])]
    fused: Option<String>,
    /// Time this fp8 spec (`quant: tensor` or `block`, layout rc, no epilogue but `scale:
    /// alpha`) on --shapes against cuBLASLt's fp8 GEMM with the same per-tensor scales and
    /// output type, with and without its fast accumulation (block scales all equal the
    /// tensor's); D is checked against cuBLASLt's first. Prints the table (--markdown, --out
    /// as for --fused). The spec: its text, @FILE, or a catalog name.
    #[arg(long, conflicts_with_all = ["specs", "set", "spec_file", "fused"])]
    fp8: Option<String>,
    /// Launch persistent kernels on at most this many blocks (whole clusters) instead of
    /// every block the device holds at once (`GemmKernel::limit_grid`): whether a grid
    /// smaller than the SM count runs faster.
    #[arg(long)]
    grid_blocks: Option<u32>,
    /// Launch persistent walks of whole tiles on every block the device holds, not spread
    /// evenly over as few blocks as take the same rounds of tiles (the default;
    /// `GemmKernel::balance_grid`), also under --fused: to compare the two.
    #[arg(long)]
    full_grid: bool,
    /// Time the grouped (mixture-of-experts) problems of this list (`shapes/moe.txt` format):
    /// this project's grouped kernels against cuBLAS (`cublasGemmGroupedBatchedEx`, a loop of
    /// `cublasGemmEx` per expert) and this project's balanced strided batch of the same rows
    /// as the ceiling (bf16, layout rr), each result checked first.
    #[arg(long, conflicts_with_all = ["specs", "set", "spec_file", "fused", "fp8", "shapes", "shape_file"])]
    grouped: Option<PathBuf>,
    /// Time the fp8 grouped set (e4m3 experts with block scales, bf16 out, layout rc) on the
    /// problems of this list (`shapes/moe.txt` format) against a loop of cuBLASLt's fp8 GEMM
    /// over the experts, each result checked first.
    #[arg(long, conflicts_with_all = ["specs", "set", "spec_file", "fused", "fp8", "shapes", "shape_file", "grouped"])]
    grouped_fp8: Option<PathBuf>,
    /// Measure the host time per call instead of GPU time: `Matmul::run` over --set (warm),
    /// the picked kernel's own launch, cuBLAS's GemmEx and an empty `cuLaunchKernel`, each
    /// 200 calls back to back per round, --iters rounds (median), with and without cudarc's
    /// event tracking, on --shapes (default: five serving problems), layout rr.
    #[arg(long, requires = "set", conflicts_with_all = ["auto", "tune_out", "check", "fused", "fp8"])]
    host_cost: bool,
    /// Time `Matmul::run` over --set (bf16, layout rr) as a caller runs it, whatever its
    /// route (the copies of operands it stages in 128-byte lines included), against cuBLAS's
    /// GemmEx on the same packed operands, each D checked against cuBLAS's first, on --shapes
    /// or --shape-file (sizes need not be multiples of anything).
    #[arg(long, requires = "set", conflicts_with_all = ["auto", "tune_out", "check", "fused", "fp8", "host_cost"])]
    entry: bool,
    /// Time `Matmul::warm_up` over --set (layout --layout) for --shapes or --shape-file:
    /// the kernels those problems pick, loaded side by side; then the same kernels loaded one
    /// after another by a second `Matmul`. Set CUDA_CACHE_DISABLE=1 to time the driver's JIT
    /// compile rather than its cache.
    #[arg(long, requires = "set", conflicts_with_all = ["auto", "tune_out", "check", "fused", "fp8", "host_cost"])]
    warm_up: bool,
    /// CUDA device ordinal.
    #[arg(long, default_value_t = 0)]
    device: usize,
    /// Time nothing: read a report written by `--out` and write its table, `--markdown` and
    /// `--svg` again (no GPU needed).
    #[arg(long, conflicts_with_all = ["specs", "shapes", "full_for", "check"])]
    from_json: Option<PathBuf>,
    /// Time nothing: replay a set run's `--out` report (16-bit or fp8) through this build's
    /// cost model: per shape the fastest kernel timed, the model's pick among those timed
    /// (as `Matmul` routes it) and the predicted time against the measured (no GPU needed).
    /// The kernels are --set's members (--set-types, --layout) and the --spec-file candidates.
    #[arg(long, requires = "set", conflicts_with_all = ["specs", "shapes", "shape_file", "from_json", "auto", "check"])]
    replay: Option<PathBuf>,
    /// With --replay: the board whose model prices the kernels (`NVIDIA H200`, `NVIDIA H100
    /// 80GB HBM3`, ...); by default the report's own device. An fp8 run's rows name none.
    #[arg(long, requires = "replay")]
    board: Option<String>,
    /// With --replay and --board: the board's SMs.
    #[arg(long, requires = "board", default_value_t = 132)]
    board_sms: u32,
    /// With --replay: a line per kernel and shape too.
    #[arg(long, requires = "replay")]
    every_kernel: bool,
}

#[derive(Subcommand)]
enum Command {
    /// Inspect, prune or merge tuning caches (no GPU needed).
    #[command(subcommand)]
    Cache(CacheCommand),
}

#[derive(Subcommand)]
enum CacheCommand {
    /// The entries per device, each checked against this build's kernel sets: current,
    /// stale (the kernel's spec changed since it was measured: `Matmul` ignores it), of an
    /// unknown kernel, or matching no problem; then the entries that do not parse.
    Show {
        file: PathBuf,
        /// Counts per device only, no line per entry.
        #[arg(long)]
        summary: bool,
    },
    /// Drop the entries no `Matmul` of this build can use (stale, matching no problem, not
    /// parsing), and with --drop-device those of other boards; the file is replaced at once,
    /// under the lock writers take.
    Prune {
        file: PathBuf,
        /// Also drop every entry whose device (`NAME (N SMs, driver D)`, as `cache show`
        /// prints it) contains this text; repeatable.
        #[arg(long)]
        drop_device: Vec<String>,
        /// Also drop the entries of kernels no built-in set has (kept by default: they may
        /// be kernels of your own `gemm_set!`).
        #[arg(long)]
        drop_unknown_kernels: bool,
        /// Say what would be dropped; write nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Merge the entries of other caches into FILE, as --tune-out merges a run's: an entry of
    /// the same device, problem and types is replaced, every other one stays. FILE is made if
    /// there is none.
    Merge {
        file: PathBuf,
        /// The caches to merge in, in order (a later one's entry of a key wins).
        #[arg(required = true)]
        from: Vec<PathBuf>,
    },
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

impl From<gemm_runtime::Error> for Failure {
    fn from(error: gemm_runtime::Error) -> Self {
        Failure::Gpu(error.into())
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

/// (spec text, `FILE:LINE`) for every spec of a --spec-file: one a line, `#` lines skipped.
fn read_spec_file(path: &Path) -> Result<Vec<(String, String)>, Failure> {
    let text = std::fs::read_to_string(path)
        .map_err(|error| Failure::Arguments(format!("cannot read {}: {error}", path.display())))?;
    Ok(text
        .lines()
        .enumerate()
        .map(|(number, line)| (number, line.trim()))
        .filter(|(_, line)| !line.is_empty() && !line.starts_with('#'))
        .map(|(number, line)| {
            (
                line.to_string(),
                format!("{}:{}", path.display(), number + 1),
            )
        })
        .collect())
}

/// (spec text, where it came from) for every kernel to time.
fn selected_specs(cli: &Cli) -> Result<Vec<(String, String)>, Failure> {
    let mut specs: Vec<(String, String)> = Vec::new();
    if cli.specs.is_empty() && cli.spec_file.is_none() && cli.set.is_none() {
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
        specs.extend(read_spec_file(path)?);
    }
    if let Some(set) = set_selection(cli)? {
        for member in set.set.members {
            specs.push((
                set.set.spec(member, set.dtype, set.out, set.layout),
                format!("set:{}", set.set.name),
            ));
        }
    }
    Ok(specs)
}

/// The spec a `--fused` or `--fp8` flag names: its text, @FILE, or a catalog name.
fn named_spec(text: &str, flag: &str) -> Result<ValidSpec, Failure> {
    let (spec_text, origin) = match catalog::find(text) {
        Some(entry) => (entry.spec.to_string(), format!("catalog:{}", entry.name)),
        None => match text.strip_prefix('@') {
            Some(path) => (
                std::fs::read_to_string(path)
                    .map_err(|error| Failure::Arguments(format!("cannot read {path}: {error}")))?,
                path.to_string(),
            ),
            None => (text.to_string(), flag.to_string()),
        },
    };
    gemm_dsl::check_str(&spec_text)
        .map_err(|errors| Failure::Arguments(errors.render(&spec_text, &origin)))
}

/// The shapes of a one-spec run: --shapes, --shape-file, or the quick suite.
fn one_spec_shapes(cli: &Cli) -> Result<Vec<Shape>, Failure> {
    match (&cli.shapes, &cli.shape_file) {
        (Some(text), _) => parse_shapes(text).map_err(Failure::Arguments),
        (None, Some(path)) => read_shape_file(path),
        (None, None) => Ok(quick_suite()),
    }
}

/// How the timed launches reach the GPU: `--no-hold` or not.
fn queue(cli: &Cli) -> Queue {
    match cli.no_hold {
        true => Queue::Direct,
        false => Queue::Held,
    }
}

fn rounds(cli: &Cli, ctx: &Arc<CudaContext>) -> Result<Rounds, Error> {
    let hold = match queue(cli) {
        Queue::Direct => None,
        Queue::Held => Some(Arc::new(LaunchHold::load(ctx)?)),
    };
    Ok(Rounds {
        warmup: cli.warmup as usize,
        sustain: Duration::from_secs(cli.sustain) + Duration::from_millis(cli.warm_ms),
        iters: cli.iters as usize,
        hold,
    })
}

/// A one-spec run's table under its date, device and method line; printed, written with
/// --markdown, and its rows as JSON with --out.
fn finish_one_spec<Row: serde::Serialize>(
    cli: &Cli,
    device: &DeviceInfo,
    table: String,
    rows: &[Row],
) -> Result<(), Failure> {
    let table = format!(
        "{}, {} ({} SMs), CUDA {} driver; {} timed launches each (median), {}, {} warm-up\n\n{table}",
        today(),
        device.name,
        device.multiprocessors,
        device.driver_version,
        cli.iters,
        queue(cli).describe(),
        cli.warmup,
    );
    println!("\n{table}");
    write_table_and_rows(cli, &table, rows)
}

/// The table to --markdown and the rows as JSON to --out, where given.
fn write_table_and_rows<Row: serde::Serialize>(
    cli: &Cli,
    table: &str,
    rows: &[Row],
) -> Result<(), Failure> {
    if let Some(path) = &cli.markdown {
        std::fs::write(path, table).map_err(|error| {
            Failure::Output(format!("cannot write {}: {error}", path.display()))
        })?;
    }
    if let Some(path) = &cli.out {
        let json = serde_json::to_string_pretty(rows).expect("rows serialize");
        std::fs::write(path, json).map_err(|error| {
            Failure::Output(format!("cannot write {}: {error}", path.display()))
        })?;
    }
    Ok(())
}

/// One spec timed shape by shape by `time`, each row printed as `line` says as it is measured,
/// then the table `table` writes of them all; shapes `refuses` names a reason for, and those
/// after --time-limit, are listed under it as not timed.
fn run_one_spec<Row: serde::Serialize>(
    cli: &Cli,
    text: &str,
    flag: &str,
    refuses: impl Fn(Shape) -> Option<String>,
    time: impl Fn(&Arc<CudaContext>, &Arc<CudaStream>, &GemmSpec, Shape, &Rounds) -> Result<Row, Error>,
    line: impl Fn(&Row) -> String,
    table: impl Fn(&GemmSpec, &[Row]) -> String,
) -> Result<(), Failure> {
    let valid = named_spec(text, flag)?;
    let shapes = one_spec_shapes(cli)?;
    let ctx = open_context(cli.device)?;
    let stream = ctx.default_stream();
    let rounds = rounds(cli, &ctx)?;
    let device = DeviceInfo::query(&ctx)?;
    let mut rows = Vec::new();
    let mut not_timed = Vec::new();
    let started = Instant::now();
    for shape in shapes {
        if let Some(limit) = cli.time_limit {
            if started.elapsed() >= Duration::from_secs(limit) {
                not_timed.push(format!("{shape} (--time-limit {limit} s reached)"));
                continue;
            }
        }
        if let Some(why) = refuses(shape) {
            println!("{shape}: not timed, {why}");
            not_timed.push(format!("{shape} ({why})"));
            continue;
        }
        let row = time(&ctx, &stream, &valid.spec, shape, &rounds)?;
        println!("{}", line(&row));
        rows.push(row);
    }
    let mut table = table(&valid.spec, &rows);
    if !not_timed.is_empty() {
        table.push_str(&format!("\nNot timed: {}.\n", not_timed.join("; ")));
    }
    finish_one_spec(cli, &device, table, &rows)
}

/// `--fused`: one fused-epilogue spec against its baselines, shape by shape; with --set, the
/// entry point over the set with the spec's epilogue.
fn run_fused(cli: &Cli, text: &str) -> Result<(), Failure> {
    use gemm_harness::bench::fused::{time_fused, time_fused_with, FusedRunners};
    let selection = set_selection(cli)?;
    if let Some(selection) = &selection {
        if (selection.dtype, selection.out, selection.layout)
            != (DType::Bf16, DType::Bf16, Layout::RowRow)
        {
            return Err(Failure::Arguments(
                "--fused --set times bf16 -> bf16 sets in layout rr".to_string(),
            ));
        }
        if cli.auto || cli.tune_cache.is_some() || cli.picks.is_some() {
            return Err(Failure::Arguments(
                "--fused --set times the model's picks already: --auto, --tune-cache and --picks are for plain sets"
                    .to_string(),
            ));
        }
    }
    // The entry point's two `Matmul`s, made on the first shape (they need the context).
    let entry_points = std::cell::OnceCell::new();
    run_one_spec(
        cli,
        text,
        "--fused",
        gemm_harness::bench::fused::shape_refusal,
        |ctx, stream, spec, shape, rounds| match &selection {
            None => time_fused(ctx, stream, spec, shape, rounds, !cli.full_grid),
            Some(selection) => {
                let (fused, plain) = match entry_points.get() {
                    Some(made) => made,
                    None => {
                        let made = (
                            gemm_runtime::Matmul::<half::bf16, half::bf16>::with_set_fused(
                                ctx,
                                selection.set,
                                gemm_runtime::FusedSpec::of_spec(spec),
                            )?,
                            gemm_runtime::Matmul::<half::bf16, half::bf16>::with_set(
                                ctx,
                                selection.set,
                            )?,
                        );
                        entry_points.get_or_init(|| made)
                    }
                };
                let runners = FusedRunners::EntryPoint { fused, plain };
                time_fused_with(ctx, stream, spec, &runners, shape, rounds)
            }
        },
        |row| {
            let ms = |ms: Option<f64>| ms.map_or("—".to_string(), |ms| format!("{ms:.3} ms"));
            let mut line = format!(
                "{}: fused {} ({}), plain {}, unfused {}, cuBLASLt {}, cuBLAS {:.3} ms",
                row.shape,
                row.fused_tflops
                    .map_or("—".to_string(), |tflops| format!("{tflops:.1} TFLOP/s")),
                ms(row.fused_ms),
                ms(row.plain_ms),
                ms(row.unfused_ms),
                ms(row.cublaslt_ms),
                row.cublas_ms
            );
            if !row.not_run.is_empty() {
                line.push_str(&format!("; not run: {}", row.not_run.join("; ")));
            }
            line
        },
        gemm_harness::bench::fused::fused_table,
    )
}

/// `--fp8`: one fp8 spec against cuBLASLt's fp8 GEMM, shape by shape.
fn run_fp8(cli: &Cli, text: &str) -> Result<(), Failure> {
    run_one_spec(
        cli,
        text,
        "--fp8",
        |_| None,
        gemm_harness::bench::fp8::time_fp8,
        |row| {
            format!(
                "{}: ours {:.1} TFLOP/s ({:.3} ms), cuBLASLt {:.3} ms, fast-accum {:.3} ms, ratio {:.3}, rel diff {:.1e}",
                row.shape,
                row.ours_tflops,
                row.ours_ms,
                row.cublaslt_ms,
                row.cublaslt_fast_ms,
                row.ratio(),
                row.rel_diff_to_cublaslt
            )
        },
        gemm_harness::bench::fp8::fp8_table,
    )
}

/// `--replay`: a set run's measured times through this build's cost model.
fn run_replay(cli: &Cli, path: &Path) -> Result<(), Failure> {
    use gemm_harness::replay::{measured_of_fp8_rows, measured_of_report, replay};
    let selection = set_selection(cli)?.expect("--replay requires --set");
    let text = std::fs::read_to_string(path)
        .map_err(|error| Failure::Arguments(format!("cannot read {}: {error}", path.display())))?;
    let (measured, device) = if let Ok(report) = serde_json::from_str::<BenchReport>(&text) {
        (measured_of_report(&report), Some(report.device))
    } else if let Ok(rows) =
        serde_json::from_str::<Vec<gemm_harness::bench::fp8_set::Fp8SetRow>>(&text)
    {
        (measured_of_fp8_rows(&rows), None)
    } else {
        return Err(Failure::Arguments(format!(
            "{} is neither a gemm-bench report nor an fp8 set run's rows (`--out` of `--set`)",
            path.display()
        )));
    };
    let device = match (&cli.board, device) {
        (Some(board), _) => DeviceInfo {
            name: board.clone(),
            driver_version: String::new(),
            // The set's own capability: the board runs it.
            compute_capability: match selection.set.runs_on {
                sets::RunsOn::Exactly(cc) | sets::RunsOn::From(cc) => {
                    format!("{}.{}", cc / 10, cc % 10)
                }
            },
            multiprocessors: cli.board_sms,
            sm_clock_mhz: None,
            memory_clock_mhz: None,
            l2_cache_bytes: 0,
        },
        (None, Some(device)) => device,
        (None, None) => {
            return Err(Failure::Arguments(format!(
                "{} does not say which board ran it: give --board",
                path.display()
            )))
        }
    };
    let model = device_model(&device, &DeviceModel::h100_sxm());
    let fused = if selection.dtype.is_fp8() {
        gemm_harness::bench::fp8_set::scales_of(selection.set)
    } else {
        gemm_runtime::FusedSpec::NONE
    };
    let types =
        gemm_runtime::KernelTypes::new(selection.dtype, selection.out).ok_or_else(|| {
            Failure::Arguments(format!(
                "no kernels take {} -> {}",
                selection.dtype.name(),
                selection.out.name()
            ))
        })?;
    let mut candidates = Picker::of_set(selection.set, types, &fused)?
        .candidates()
        .to_vec();
    if let Some(path) = &cli.spec_file {
        for (text, origin) in read_spec_file(path)? {
            let valid = gemm_dsl::check_str(&text)
                .map_err(|errors| Failure::Arguments(errors.render(&text, &origin)))?;
            candidates.push(gemm_codegen::pick::candidate(&valid));
        }
    }
    let replayed = replay(&measured, &candidates, selection.layout, &model);
    let table = replayed.markdown(&model, cli.every_kernel);
    println!("{table}");
    if let Some(path) = &cli.markdown {
        std::fs::write(path, &table).map_err(|error| {
            Failure::Output(format!("cannot write {}: {error}", path.display()))
        })?;
    }
    Ok(())
}

/// `--set` of an fp8 set: per shape the entry point's pick (and, without --auto, every member
/// and --spec-file candidate) against cuBLASLt's fp8 GEMM with the same scales (per tensor;
/// for the block-scaled set, its block-scaled GEMM too).
fn run_fp8_set(cli: &Cli, selection: &SetSelection) -> Result<(), Failure> {
    use gemm_runtime::fp8::{E4m3, E5m2};
    if selection.layout != Layout::RowCol {
        return Err(Failure::Arguments(format!(
            "fp8 sets run in layout rc (both operands K-major), not {}",
            selection.layout.name()
        )));
    }
    if cli.tune_out.is_some() || cli.tune_cache.is_some() || cli.picks.is_some() {
        return Err(Failure::Arguments(
            "fp8 sets have no tuning cache yet: --tune-out, --tune-cache and --picks take 16-bit and f32 sets"
                .to_string(),
        ));
    }
    let extra = match &cli.spec_file {
        Some(path) => read_spec_file(path)?
            .iter()
            .map(|(text, origin)| {
                gemm_dsl::check_str(text)
                    .map_err(|errors| Failure::Arguments(errors.render(text, origin)))
            })
            .collect::<Result<Vec<_>, _>>()?,
        None => Vec::new(),
    };
    let shapes = one_spec_shapes(cli)?;
    let ctx = open_context(cli.device)?;
    let stream = ctx.default_stream();
    let rounds = rounds(cli, &ctx)?;
    let device = DeviceInfo::query(&ctx)?;
    let types = (selection.dtype, selection.out);
    macro_rules! typed {
        ($in:ty, $out:ty) => {{
            let run = Fp8SetRun::<$in, $out>::load(
                &ctx,
                &stream,
                selection.set,
                &extra,
                types,
                cli.auto,
                cli.max_input_sets,
            )?;
            time_fp8_set(cli, &run, &shapes, &rounds, selection, &device)
        }};
    }
    match types {
        (DType::E4m3, DType::Bf16) => typed!(E4m3, half::bf16),
        (DType::E4m3, DType::F16) => typed!(E4m3, half::f16),
        (DType::E4m3, DType::F32) => typed!(E4m3, f32),
        (DType::E5m2, DType::Bf16) => typed!(E5m2, half::bf16),
        (DType::E5m2, DType::F16) => typed!(E5m2, half::f16),
        (DType::E5m2, DType::F32) => typed!(E5m2, f32),
        (dtype, out) => Err(Failure::Arguments(format!(
            "no fp8 set writes {} from {}",
            out.name(),
            dtype.name()
        ))),
    }
}

/// Every shape of an fp8 set run, then its table.
fn time_fp8_set<In: gemm_runtime::Element, Out: gemm_runtime::Element>(
    cli: &Cli,
    run: &Fp8SetRun<'_, In, Out>,
    shapes: &[Shape],
    rounds: &Rounds,
    selection: &SetSelection,
    device: &DeviceInfo,
) -> Result<(), Failure> {
    let mut rows = Vec::new();
    let mut skipped = Vec::new();
    let scales = match gemm_harness::bench::fp8_set::scales_of(selection.set).quant {
        gemm_dsl::Quant::Block => "block scales (1x128 for A, 128x128 for B)",
        gemm_dsl::Quant::None | gemm_dsl::Quant::Tensor => "per-tensor scales",
    };
    let heading = format!(
        "set `{}`, {}->{}, layout rc, {scales}{}",
        selection.set.name,
        selection.dtype.name(),
        selection.out.name(),
        if cli.auto {
            ", the pick only (--auto)"
        } else {
            ""
        }
    );
    let started = std::time::Instant::now();
    for &shape in shapes {
        if let Some(limit) = cli.time_limit {
            if started.elapsed() >= Duration::from_secs(limit) {
                skipped.push((shape.to_string(), format!("--time-limit {limit} s reached")));
                continue;
            }
        }
        match run.time(shape, rounds) {
            Ok(Fp8SetOutcome::Timed(row)) => {
                println!(
                    "{}: pick {} {:.3}x cuBLASLt; best {} {:.3}x",
                    row.shape,
                    row.pick,
                    row.pick_ratio(),
                    row.best().kernel,
                    row.cublaslt_ms / row.best().ms
                );
                rows.push(row);
            }
            Ok(Fp8SetOutcome::Skipped(why)) => {
                println!("{shape}: not run: {why}");
                skipped.push((shape.to_string(), why));
            }
            Err(error) => {
                // A failed check or launch stops the run; what was measured is still written.
                skipped.push((shape.to_string(), format!("stopped the run: {error}")));
                let table = fp8_set_table(&heading, &rows, &skipped);
                finish_one_spec(cli, device, table, &rows)?;
                return Err(error.into());
            }
        }
    }
    finish_one_spec(cli, device, fp8_set_table(&heading, &rows, &skipped), &rows)
}

/// What both grouped runs start from: the list's problems, the device and a stream on it.
struct GroupedRun {
    problems: Vec<gemm_dsl::grouped::GroupedProblem>,
    ctx: std::sync::Arc<gemm_runtime::CudaContext>,
    stream: std::sync::Arc<gemm_runtime::CudaStream>,
    device: DeviceInfo,
}

impl GroupedRun {
    fn open(cli: &Cli, path: &Path) -> Result<GroupedRun, Failure> {
        let text = std::fs::read_to_string(path).map_err(|error| {
            Failure::Arguments(format!("cannot read {}: {error}", path.display()))
        })?;
        let problems = gemm_dsl::grouped::GroupedProblem::parse_list(&text)
            .map_err(|why| Failure::Arguments(format!("{}: {why}", path.display())))?;
        let ctx = open_context(cli.device)?;
        let stream = ctx.new_stream().map_err(|source| {
            Failure::Gpu(Error::Runtime(gemm_runtime::Error::Driver {
                action: "making a stream".to_string(),
                source,
            }))
        })?;
        let device = DeviceInfo::query(&ctx)?;
        Ok(GroupedRun {
            problems,
            ctx,
            stream,
            device,
        })
    }
}

/// `--grouped FILE`: every problem of the list against cuBLAS's grouped GEMM, a loop of
/// GemmEx and the balanced ceiling.
fn run_grouped(cli: &Cli, path: &Path) -> Result<(), Failure> {
    use gemm_harness::bench::grouped::{grouped_table, time_grouped, GroupedKernels};
    let run = GroupedRun::open(cli, path)?;
    let cublas = Cublas::new(&run.stream)?;
    let matmul = gemm_runtime::Matmul::<half::bf16, half::bf16>::new(&run.ctx)?;
    let kernels = GroupedKernels::load(&run.ctx)?;
    let rounds = rounds(cli, &run.ctx)?;
    let mut rows = Vec::new();
    for problem in &run.problems {
        let row = time_grouped(&run.stream, &cublas, &matmul, &kernels, problem, &rounds)?;
        println!(
            "{}: ours {:.0} TF/s ({}), cuBLAS grouped {:.0}, loop {:.0}, ceiling {:.0} ({})",
            row.problem,
            row.ours_tflops,
            row.ours_kernel,
            row.cublas_grouped_tflops,
            row.cublas_loop_tflops,
            row.ceiling_tflops,
            row.ceiling_kernel
        );
        rows.push(row);
    }
    finish_one_spec(cli, &run.device, grouped_table(&rows), &rows)
}

/// `--grouped-fp8 FILE`: every problem of the list, the fp8 grouped set against a loop of
/// cuBLASLt's fp8 GEMM.
fn run_grouped_fp8(cli: &Cli, path: &Path) -> Result<(), Failure> {
    use gemm_harness::bench::grouped_fp8::{
        grouped_fp8_table, time_grouped_fp8, Fp8GroupedKernels,
    };
    let run = GroupedRun::open(cli, path)?;
    let kernels = Fp8GroupedKernels::load(&run.ctx)?;
    let rounds = rounds(cli, &run.ctx)?;
    let mut rows = Vec::new();
    for problem in &run.problems {
        let row = time_grouped_fp8(&run.stream, &kernels, problem, &rounds)?;
        println!(
            "{}: fastest member {:.0} TF/s ({}), cuBLASLt loop {:.0}",
            row.problem, row.best_member_tflops, row.best_member_kernel, row.cublaslt_loop_tflops
        );
        rows.push(row);
    }
    finish_one_spec(cli, &run.device, grouped_fp8_table(&rows), &rows)
}

/// `--host-cost`: the host time per call of the set's picks, of their kernels' launches and of
/// cuBLAS, on --shapes or the serving problems.
fn run_host_cost(cli: &Cli) -> Result<(), Failure> {
    use gemm_harness::bench::host_cost::{measure, table, HostCostRounds};
    use gemm_runtime::KernelTypes;
    let selection = set_selection(cli)?.expect("--host-cost requires --set");
    if selection.layout != Layout::RowRow {
        return Err(Failure::Arguments(
            "--host-cost times layout rr (cuBLAS's row-major call)".to_string(),
        ));
    }
    let shapes = match (&cli.shapes, &cli.shape_file) {
        (Some(text), _) => parse_shapes(text).map_err(Failure::Arguments)?,
        (None, Some(path)) => read_shape_file(path)?,
        (None, None) => {
            parse_shapes("16x4096x4096,1x4096x14336,128x6144x4096,512x28672x4096,4096x4096x4096")
                .expect("the serving problems parse")
        }
    };
    let mut problems = Vec::new();
    for shape in shapes {
        if shape.batch > 1 {
            return Err(Failure::Arguments(format!(
                "--host-cost times single products; {shape} is a batch"
            )));
        }
        problems.push((shape.m, shape.n, shape.k));
    }
    let rounds = HostCostRounds {
        calls: 200,
        rounds: cli.iters as usize,
    };
    let (dtype, out) = (selection.dtype, selection.out);
    let types = KernelTypes::new(dtype, out).ok_or_else(|| {
        Failure::Arguments(format!("no kernels of {} -> {}", dtype.name(), out.name()))
    })?;
    let set = selection.set;
    let rows = match (dtype, out) {
        (DType::Bf16, DType::Bf16) => {
            measure::<half::bf16, half::bf16>(cli.device, set, types, &problems, rounds)
        }
        (DType::Bf16, DType::F32) => {
            measure::<half::bf16, f32>(cli.device, set, types, &problems, rounds)
        }
        (DType::F16, DType::F16) => {
            measure::<half::f16, half::f16>(cli.device, set, types, &problems, rounds)
        }
        (DType::F32, DType::F32) => measure::<f32, f32>(cli.device, set, types, &problems, rounds),
        _ => {
            return Err(Failure::Arguments(format!(
                "--host-cost times bf16, f16 and f32 sets; not {} -> {}",
                dtype.name(),
                out.name()
            )))
        }
    }?;
    let device = DeviceInfo::query(&open_context(cli.device)?)?;
    let text = format!(
        "{}, {} ({} SMs), CUDA {} driver, set {}\n\n{}",
        today(),
        device.name,
        device.multiprocessors,
        device.driver_version,
        set.name,
        table(&rows, rounds)
    );
    println!("{text}");
    write_table_and_rows(cli, &text, &rows)
}

/// `--entry`: `Matmul::run` as a caller runs it, against cuBLAS.
fn run_entry(cli: &Cli) -> Result<(), Failure> {
    use gemm_harness::bench::entry::{entry_table, time_entry};
    let selection = set_selection(cli)?.expect("--entry requires --set");
    if selection.layout != Layout::RowRow
        || selection.dtype != DType::Bf16
        || selection.out != DType::Bf16
    {
        return Err(Failure::Arguments(
            "--entry times bf16 -> bf16 sets in layout rr".to_string(),
        ));
    }
    let shapes = one_spec_shapes(cli)?;
    if let Some(batch) = shapes.iter().find(|shape| shape.batch > 1) {
        return Err(Failure::Arguments(format!(
            "--entry times single products; {batch} is a batch"
        )));
    }
    let ctx = open_context(cli.device)?;
    let device = DeviceInfo::query(&ctx)?;
    let stream = ctx.default_stream();
    let rounds = rounds(cli, &ctx)?;
    let matmul = gemm_runtime::Matmul::<half::bf16, half::bf16>::with_set(&ctx, selection.set)?;
    let mut rows = Vec::new();
    for shape in shapes {
        rows.push(time_entry(&stream, &matmul, shape, &rounds)?);
    }
    let text = format!(
        "{}, {} ({} SMs), CUDA {} driver, set {}; {} timed rounds (median), {}\n\n{}",
        today(),
        device.name,
        device.multiprocessors,
        device.driver_version,
        selection.set.name,
        cli.iters,
        queue(cli).describe(),
        entry_table(&rows)
    );
    println!("{text}");
    write_table_and_rows(cli, &text, &rows)
}

/// `--warm-up`: how long the kernels of the problems take to load, side by side and one by one.
fn run_warm_up(cli: &Cli) -> Result<(), Failure> {
    let selection = set_selection(cli)?.expect("--warm-up requires --set");
    let shapes = one_spec_shapes(cli)?;
    let types = (selection.dtype, selection.out);
    let problems: Vec<PickProblem> = shapes
        .iter()
        .map(|&shape| bench_problem(shape, selection.layout, cli.ld_align, types))
        .collect();
    let ctx = open_context(cli.device)?;
    let (side_by_side, one_by_one) = match types {
        (DType::Bf16, DType::Bf16) => {
            time_loads::<half::bf16, half::bf16>(&ctx, &selection, &problems)
        }
        (DType::F16, DType::F16) => time_loads::<half::f16, half::f16>(&ctx, &selection, &problems),
        (DType::F32, DType::F32) => time_loads::<f32, f32>(&ctx, &selection, &problems),
        (dtype, out) => {
            return Err(Failure::Arguments(format!(
                "--warm-up loads bf16, f16 and f32 sets; not {} -> {}",
                dtype.name(),
                out.name()
            )))
        }
    }?;
    let cache = match std::env::var("CUDA_CACHE_DISABLE").as_deref() {
        Ok("1") => "off (CUDA_CACHE_DISABLE=1: every load compiles)",
        _ => "on",
    };
    println!(
        "{} problems of set {} ({}): {} kernels; Matmul::warm_up {:.3} s on {} threads, one by one {:.3} s; driver JIT cache {cache}",
        problems.len(),
        selection.set.name,
        selection.layout.name(),
        side_by_side.loaded.len(),
        side_by_side.elapsed.as_secs_f64(),
        std::thread::available_parallelism().map_or(1, usize::from).min(side_by_side.loaded.len().max(1)),
        one_by_one.as_secs_f64(),
    );
    println!("kernels: {}", side_by_side.loaded.join(", "));
    Ok(())
}

/// `Matmul::warm_up`'s report, then the time a second `Matmul` takes to load the same
/// kernels one after another.
fn time_loads<In: Element, Out: Element>(
    ctx: &Arc<CudaContext>,
    selection: &SetSelection,
    problems: &[PickProblem],
) -> Result<(gemm_runtime::WarmUp, Duration), Failure> {
    let warmed = gemm_runtime::Matmul::<In, Out>::with_set(ctx, selection.set)?;
    let report = warmed.warm_up(problems)?;
    let sequential = gemm_runtime::Matmul::<In, Out>::with_set(ctx, selection.set)?;
    let started = Instant::now();
    for problem in problems {
        sequential.kernel_for(problem)?;
    }
    Ok((report, started.elapsed()))
}

/// The kernel set `--set` names, with its types and layout.
struct SetSelection {
    set: &'static KernelSet,
    dtype: DType,
    out: DType,
    layout: Layout,
}

fn set_selection(cli: &Cli) -> Result<Option<SetSelection>, Failure> {
    let Some(name) = &cli.set else {
        return Ok(None);
    };
    let set = sets::find(name).ok_or_else(|| {
        let names: Vec<&str> = sets::SETS.iter().map(|s| s.name).collect();
        Failure::Arguments(format!(
            "no kernel set named `{name}`; sets: {}",
            names.join(", ")
        ))
    })?;
    let value = |key: &str, text: &str| {
        let spec = format!("name: k, {key}: {text}");
        gemm_dsl::parse_str(&spec)
            .map(|parsed| parsed.spec)
            .map_err(|errors| Failure::Arguments(errors.render(&spec, &format!("--{key}"))))
    };
    let (dtype, out) = match &cli.set_types {
        Some(text) => {
            let (dtype, out) = text.split_once("->").unwrap_or((text, text));
            (value("dtype", dtype)?.dtype, value("out", out)?.out)
        }
        // fp8 kernels write bf16 unless told otherwise, as the spec's `out` defaults.
        None if set.dtypes[0].is_fp8() => (set.dtypes[0], DType::Bf16),
        None => (set.dtypes[0], set.dtypes[0]),
    };
    if !set.dtypes.contains(&dtype) {
        return Err(Failure::Arguments(format!(
            "set `{}` takes dtype {}, not {}",
            set.name,
            set.dtypes
                .iter()
                .map(|d| d.name())
                .collect::<Vec<_>>()
                .join(" or "),
            dtype.name()
        )));
    }
    let layout = value("layout", &cli.layout)?.layout;
    Ok(Some(SetSelection {
        set,
        dtype,
        out,
        layout,
    }))
}

/// The problem the picker sees for a bench shape: the bench's own padded strides.
fn bench_problem(
    shape: Shape,
    layout: Layout,
    ld_align: u32,
    types: (DType, DType),
) -> PickProblem {
    PickProblem::new(shape.m, shape.n, shape.k, layout)
        .with_batch(shape.batch)
        .with_lines_padded(ld_align, types.0.size_bytes(), types.1.size_bytes())
}

fn read_shape_file(path: &Path) -> Result<Vec<Shape>, Failure> {
    let text = std::fs::read_to_string(path)
        .map_err(|error| Failure::Arguments(format!("cannot read {}: {error}", path.display())))?;
    text.lines()
        .enumerate()
        .filter_map(|(number, line)| {
            let shape = line.split('#').next().unwrap_or("").trim();
            (!shape.is_empty()).then(|| {
                shape.parse::<Shape>().map_err(|error| {
                    Failure::Arguments(format!("{}:{}: {error}", path.display(), number + 1))
                })
            })
        })
        .collect()
}

fn run(cli: &Cli) -> Result<(), Failure> {
    if let Some(Command::Cache(command)) = &cli.command {
        return cache_command(command);
    }
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
    if let Some(path) = &cli.replay {
        return run_replay(cli, path);
    }
    if let Some(spec) = &cli.fused {
        return run_fused(cli, spec);
    }
    if let Some(spec) = &cli.fp8 {
        return run_fp8(cli, spec);
    }
    if cli.entry {
        return run_entry(cli);
    }
    if cli.host_cost {
        return run_host_cost(cli);
    }
    if let Some(path) = &cli.grouped_fp8 {
        return run_grouped_fp8(cli, path);
    }
    if let Some(path) = &cli.grouped {
        return run_grouped(cli, path);
    }
    if cli.warm_up {
        return run_warm_up(cli);
    }
    if let Some(selection) = set_selection(cli)?.filter(|selection| selection.dtype.is_fp8()) {
        return run_fp8_set(cli, &selection);
    }
    let specs = selected_specs(cli)?;
    let (shapes, extra_shapes) = shapes_to_run(cli, &specs)?;
    if cli.iters < 20 {
        eprintln!(
            "note: --iters {} is below the 20 launches the performance method asks for",
            cli.iters
        );
    }
    if let Some(path) = &cli.tune_out {
        if !cli.check {
            return Err(Failure::Arguments(
                "--tune-out needs --check: a kernel enters the cache only after its check"
                    .to_string(),
            ));
        }
        // Before minutes of measuring: a file that cannot take the run's entries.
        TuneFile::check_writable(path).map_err(|error| Failure::Output(error.to_string()))?;
    }
    let valid: Vec<ValidSpec> = specs
        .iter()
        .map(|(spec, origin)| {
            gemm_dsl::check_str(spec)
                .map_err(|errors| Failure::Arguments(errors.render(spec, origin)))
        })
        .collect::<Result<_, _>>()?;
    let infos = kernel_infos(cli, &valid);
    // Which (spec, shape) pairs run; the rest are reported as skipped, never dropped quietly.
    let (mut work, mut skipped) = admitted_work(cli, &specs, &infos, &shapes, &extra_shapes);

    let ctx = open_context(cli.device)?;
    let device = DeviceInfo::query(&ctx)?;
    // With a set: the entry point's picker over the set's kernels (the same indices as
    // `valid`), and under --auto only its pick runs per shape.
    let selection = set_selection(cli)?;
    let picker = match &selection {
        Some(_) => Some(set_picker(cli, &valid, &specs, &device)?),
        None => None,
    };
    if let (Some(selection), Some(picker), true) = (&selection, &picker, cli.auto) {
        // Set members come after any other spec: their picker index plus this offset.
        let set_offset = specs.len() - picker.candidates().len();
        for (shape, admitting) in &mut work {
            let problem = bench_problem(
                *shape,
                selection.layout,
                cli.ld_align,
                (selection.dtype, selection.out),
            );
            // As `Matmul` runs it: the swapped product where that is predicted faster.
            match picker.routed_pick(&problem) {
                Some(pick) => admitting.retain(|&index| index == set_offset + pick.index),
                None => admitting.clear(),
            }
        }
        work.retain(|(_, admitting)| !admitting.is_empty());
    }
    let stream = ctx.default_stream();
    let mut kernels: Vec<AnyKernel> = infos
        .iter()
        .map(|info| AnyKernel::load(&ctx, info))
        .collect::<Result<_, _>>()?;
    if cli.full_grid {
        for kernel in &mut kernels {
            kernel.balance_grid(false);
        }
    }
    if let Some(blocks) = cli.grid_blocks {
        for kernel in &mut kernels {
            let grid = kernel.limit_grid(blocks);
            eprintln!(
                "{}: persistent grid at most {grid} blocks",
                kernel.info().name()
            );
        }
    }
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
    let timed = Timed {
        cli,
        stream: &stream,
        kernels: &kernels,
        probes: &probes,
        l2_cache_bytes: device.l2_cache_bytes,
        rounds: rounds(cli, &ctx)?,
    };
    let records = timed.run(&work, &mut skipped)?;
    let any_batch = shapes
        .iter()
        .chain(&extra_shapes)
        .any(|shape| shape.batch > 1);
    let report = BenchReport {
        date: today(),
        device,
        method: method(cli, &kernels, any_batch),
        records,
        skipped,
    };
    println!();
    if let (Some(selection), Some(picker)) = (&selection, &picker) {
        write_picks(cli, &report, selection, picker, &shapes)?;
    }
    write_report(cli, &report)
}

/// The shapes to time: `--shapes`, `--shape-file` or the suite; and the shapes of the full
/// suite that only the `--full-for` specs run.
fn shapes_to_run(
    cli: &Cli,
    specs: &[(String, String)],
) -> Result<(Vec<Shape>, Vec<Shape>), Failure> {
    let shapes = match (&cli.shapes, &cli.shape_file) {
        (Some(text), _) => parse_shapes(text).map_err(Failure::Arguments)?,
        (None, Some(path)) => read_shape_file(path)?,
        (None, None) => match cli.suite {
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
    Ok((shapes, extra_shapes))
}

/// Each spec's kernel description, with its PTX replaced by a file of `--ptx-dir` where one
/// is there. Loaded kernels hold their description for the life of the process.
fn kernel_infos(cli: &Cli, valid: &[ValidSpec]) -> Vec<KernelInfo<'static>> {
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
    infos
}

/// The (shape, kernel indices) pairs that run, and the pairs a kernel's launch refuses.
fn admitted_work(
    cli: &Cli,
    specs: &[(String, String)],
    infos: &[KernelInfo<'static>],
    shapes: &[Shape],
    extra_shapes: &[Shape],
) -> (Vec<(Shape, Vec<usize>)>, Vec<Skipped>) {
    let mut skipped = Vec::new();
    let mut work: Vec<(Shape, Vec<usize>)> = Vec::new();
    let all_shapes = shapes.iter().chain(extra_shapes);
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
            let kernel_shape = kernel_shape(kernel.launch(), shape);
            match kernel_shape
                .admitted_by(kernel.launch())
                .and_then(|()| lines_admitted(kernel.launch(), kernel_shape, cli.ld_align))
            {
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
    (work, skipped)
}

/// The shape a kernel runs for `shape`: itself, or for a kernel that stores C column-major the
/// swapped product (`n x m x k`).
fn kernel_shape(launch: &LaunchShape, shape: Shape) -> Shape {
    match launch.c_order {
        StorageOrder::RowMajor => shape,
        StorageOrder::ColMajor => Shape {
            m: shape.n,
            n: shape.m,
            ..shape
        },
    }
}

/// How the bench lays out A and B for a kernel: in its layout, or for a kernel that stores C
/// column-major, in the layout whose swapped product it computes (its A' is B read in the
/// other order, its B' is A: a `cc` kernel runs `rr` problems, an `rc` one `rc`).
fn caller_orders(launch: &LaunchShape) -> Orders {
    let flip = |order| match order {
        StorageOrder::RowMajor => StorageOrder::ColMajor,
        StorageOrder::ColMajor => StorageOrder::RowMajor,
    };
    match launch.c_order {
        StorageOrder::RowMajor => (launch.a_order, launch.b_order),
        StorageOrder::ColMajor => (flip(launch.b_order), flip(launch.a_order)),
    }
}

/// Whether a kernel's copies take the lines the bench lays out for `shape` (rows rounded up
/// to `ld_align` bytes): with `--ld-align` below 16, only narrow copies do.
fn lines_admitted(launch: &LaunchShape, shape: Shape, ld_align: u32) -> Result<(), String> {
    for operand in [Operand::A, Operand::B, Operand::C] {
        let (element_bytes, align) = match operand {
            Operand::C => (launch.output_element_bytes, launch.output_align_bytes),
            _ => (launch.input_element_bytes, launch.operand_align_bytes),
        };
        let (_, line) = launch.stored_dims(operand, shape.m, shape.n, shape.k);
        let ld = shape.leading_dim(line, element_bytes, ld_align);
        if !(u64::from(ld) * u64::from(element_bytes)).is_multiple_of(u64::from(align.max(1))) {
            return Err(format!(
                "{operand}'s lines ({ld} x {element_bytes} B) are not {align}-byte aligned"
            ));
        }
    }
    Ok(())
}

/// The entry point's picker over the set's members (the specs whose origin is the set), with
/// the tuning cache of `--tune-cache`.
fn set_picker(
    cli: &Cli,
    valid: &[ValidSpec],
    specs: &[(String, String)],
    device: &DeviceInfo,
) -> Result<Picker, Failure> {
    let set_specs: Vec<_> = valid
        .iter()
        .zip(specs)
        .filter(|(_, (_, origin))| origin.starts_with("set:"))
        .map(|(valid, _)| (valid.clone(), gemm_codegen::emit::launch_of(valid)))
        .collect();
    let model = device_model(device, &DeviceModel::h100_sxm());
    let mut picker = Picker::new(&set_specs, model);
    if let Some(path) = &cli.tune_cache {
        // Strict: timing the model's picks while the cache's were asked for would mislead.
        picker = picker.with_cache_file(path, &device_key(device), CacheReading::Strict)?;
        for line in picker.cache().ignored() {
            eprintln!("tuning cache {}: left out {line}", path.display());
        }
    }
    Ok(picker)
}

/// What times the admitted work: the loaded kernels, their math-only probes, one stream.
struct Timed<'a> {
    cli: &'a Cli,
    stream: &'a Arc<CudaStream>,
    kernels: &'a [AnyKernel],
    probes: &'a [Option<MathOnlyKernel>],
    l2_cache_bytes: u32,
    rounds: Rounds,
}

impl Timed<'_> {
    /// Times every admitted (shape, kernel) against cuBLAS, a row each; what `--time-limit`
    /// leaves unrun joins `skipped`.
    fn run(
        &self,
        work: &[(Shape, Vec<usize>)],
        skipped: &mut Vec<Skipped>,
    ) -> Result<Vec<BenchRecord>, Failure> {
        let cli = self.cli;
        let blas = Cublas::new(self.stream)?;
        let started = Instant::now();
        let deadline = cli.time_limit.map(|s| started + Duration::from_secs(s));
        let total: usize = work.iter().map(|(_, specs)| specs.len()).sum();
        let progress =
            ProgressBar::with_draw_target(Some(total as u64), ProgressDrawTarget::stderr());
        progress.set_style(
            ProgressStyle::with_template("{bar:40} {pos}/{len} {msg} [{elapsed}]")
                .expect("the template is valid"),
        );
        let mut records = Vec::new();
        let mut out_of_time = 0;
        for (shape, admitting) in work {
            let mut inputs = ShapeInputs::new(InputSizing {
                shape: *shape,
                l2_bytes: self.l2_cache_bytes,
                max_sets: cli.max_input_sets,
                ld_align: cli.ld_align,
            });
            for &index in admitting {
                let kernel = &self.kernels[index];
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
                let baseline =
                    CublasGemm::baseline(types).expect("an AnyKernel holds no fp8 kernel");
                let run = Run {
                    cli,
                    stream: self.stream,
                    blas: &blas,
                    rounds: &self.rounds,
                };
                let probe = self.probes[index].as_ref();
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
                let line = format!(
                    "{name:<28} {:<10} {shape:>18}  ours {:>8.2} TFLOP/s  cuBLAS {:>8.2} TFLOP/s  ratio {:.3}  ({})",
                    record.types, record.ours_tflops, record.cublas_tflops, record.ratio, record.baseline
                );
                // A hidden bar (stderr not a terminal: a log file) prints nothing, so each row
                // goes to stdout as it is measured.
                if progress.is_hidden() {
                    println!("{line}");
                } else {
                    progress.println(line);
                }
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
        Ok(records)
    }
}

/// How the rows were measured, for the report.
fn method(cli: &Cli, kernels: &[AnyKernel], any_batch: bool) -> Method {
    let mut baselines: Vec<String> = Vec::new();
    for kernel in kernels {
        let description = CublasGemm::baseline(kernel.types())
            .expect("an AnyKernel holds no fp8 kernel")
            .description();
        if !baselines.contains(&description) {
            baselines.push(description);
        }
    }
    Method {
        warmup: cli.warmup as usize,
        sustain_s: cli.sustain,
        warm_ms: cli.warm_ms,
        iters: cli.iters as usize,
        queue: queue(cli),
        max_input_sets: cli.max_input_sets,
        inputs: format!(
            "random normal f32 rounded to each kernel's input type (tf32 kernels get the f32 values), C = A·B, cuBLAS on row-major A and B, ours in its spec's layout (the same values, transposed for a column-major operand); rows (columns) padded to {} bytes where a packed one is not",
            cli.ld_align
        ),
        baseline: format!(
            "per row (cuBLAS baseline column): {}{}; same stream, launches interleaved with ours",
            baselines.join("; "),
            if any_batch {
                "; a BxMxNxK row runs the same call's strided batched form (cublasGemmStridedBatchedEx, cublasSgemmStridedBatched)"
            } else {
                ""
            }
        ),
        statistic: "median of per-launch CUDA event times".to_string(),
    }
}

/// The picks table (and `--picks`, `--picks-svg`, `--tune-out`) of a set's run.
fn write_picks(
    cli: &Cli,
    report: &BenchReport,
    selection: &SetSelection,
    picker: &Picker,
    shapes: &[Shape],
) -> Result<(), Failure> {
    let picks = PickTable::new(report, selection, picker, cli.ld_align, shapes);
    print!("{}", picks.markdown(cli));
    // The cache first: it holds what the minutes of measuring were for.
    if let Some(path) = &cli.tune_out {
        merge_tuning_run(path, picks.cache_entries(&report.device, selection))?;
    }
    if let Some(path) = &cli.picks {
        write(path, &picks.markdown(cli))?;
    }
    if let Some(path) = &cli.picks_svg {
        write(path, &picks.svg())?;
    }
    Ok(())
}

/// Merges a tuning run's entries into the cache at `path` and says what changed; where that
/// fails, the error says where the entries went instead.
fn merge_tuning_run(path: &Path, entries: Vec<TuneEntry>) -> Result<(), Failure> {
    let counts = gemm_harness::tune::merge_run(path, entries)
        .map_err(|unmerged| Failure::Output(unmerged.to_string()))?;
    eprintln!("tuning cache {}: {counts}", path.display());
    Ok(())
}

/// Per shape: what the model picks, what the cache picks, and what measured fastest.
struct PickTable {
    rows: Vec<PickRow>,
}

struct PickRow {
    shape: Shape,
    problem: PickProblem,
    /// (kernel, where the pick came from).
    pick: Option<(String, PickSource)>,
    /// The model's pick alone (the cache ignored).
    model: Option<String>,
    /// Measured: (kernel, ours TFLOP/s, ratio), fastest first.
    measured: Vec<(String, f64, f64)>,
}

impl PickTable {
    fn new(
        report: &BenchReport,
        selection: &SetSelection,
        picker: &Picker,
        ld_align: u32,
        shapes: &[Shape],
    ) -> PickTable {
        let rows = shapes
            .iter()
            .map(|&shape| {
                let problem = bench_problem(
                    shape,
                    selection.layout,
                    ld_align,
                    (selection.dtype, selection.out),
                );
                let name = |index: usize| picker.candidates()[index].name.clone();
                let at_shape: Vec<&BenchRecord> =
                    report.records.iter().filter(|r| r.shape == shape).collect();
                // One cuBLAS figure per shape, the median of its rows' (each row timed cuBLAS
                // in its own rotation): kernels of one shape compare without that noise.
                let cublas: Vec<f32> = at_shape.iter().map(|r| r.cublas_tflops as f32).collect();
                let cublas = median(&cublas).unwrap_or(f64::NAN);
                let mut measured: Vec<(String, f64, f64)> = at_shape
                    .iter()
                    .map(|r| (r.spec.clone(), r.ours_tflops, r.ours_tflops / cublas))
                    .collect();
                measured.sort_by(|a, b| b.1.total_cmp(&a.1));
                PickRow {
                    shape,
                    problem,
                    pick: picker
                        .routed_pick(&problem)
                        .map(|p| (name(p.index), p.source)),
                    model: gemm_dsl::pick::pick(picker.candidates(), &problem, picker.device())
                        .map(name),
                    measured,
                }
            })
            .collect();
        PickTable { rows }
    }

    /// The measured ratio of `kernel` at a row, if it ran there.
    fn ratio_of(row: &PickRow, kernel: &str) -> Option<f64> {
        row.measured.iter().find(|m| m.0 == kernel).map(|m| m.2)
    }

    fn markdown(&self, cli: &Cli) -> String {
        let mut text = String::from(
            "\nRatios: ours over the median of the shape's cuBLAS timings.\n\n| shape | pick (source) | pick / cuBLAS | model's pick | model / cuBLAS | measured best | best / cuBLAS |\n|---|---|---:|---|---:|---|---:|\n",
        );
        let (mut picked, mut modelled, mut best) = (Vec::new(), Vec::new(), Vec::new());
        for row in &self.rows {
            let cell = |ratio: Option<f64>| ratio.map_or("-".to_string(), |r| format!("{r:.3}"));
            let pick_ratio = row.pick.as_ref().and_then(|(k, _)| Self::ratio_of(row, k));
            let model_ratio = row.model.as_ref().and_then(|k| Self::ratio_of(row, k));
            let best_row = row.measured.first();
            picked.extend(pick_ratio);
            modelled.extend(model_ratio);
            if !cli.auto {
                best.extend(best_row.map(|b| b.2));
            }
            text.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} | {} |\n",
                row.shape,
                row.pick
                    .as_ref()
                    .map_or("(none admits it)".to_string(), |(k, source)| format!(
                        "{k} ({})",
                        match source {
                            PickSource::Cache => "cache",
                            PickSource::Model => "model",
                        }
                    )),
                cell(pick_ratio),
                row.model.as_deref().unwrap_or("-"),
                cell(model_ratio),
                if cli.auto {
                    "-"
                } else {
                    best_row.map_or("-", |b| b.0.as_str())
                },
                cell(if cli.auto {
                    None
                } else {
                    best_row.map(|b| b.2)
                }),
            ));
        }
        let summary = |label: &str, values: &[f64]| match gemm_harness::bench::geomean(values) {
            Some(geomean) => format!(
                "- {label}: geomean {geomean:.3}, worst {:.3}, {} of {} shapes below 0.9\n",
                values.iter().copied().fold(f64::INFINITY, f64::min),
                values.iter().filter(|&&v| v < 0.9).count(),
                values.len()
            ),
            None => String::new(),
        };
        text.push('\n');
        text.push_str(&summary("the entry point's picks vs cuBLAS", &picked));
        text.push_str(&summary("the model's picks vs cuBLAS", &modelled));
        text.push_str(&summary("the measured best of the set vs cuBLAS", &best));
        text
    }

    /// Bars of the pick's ratio to cuBLAS per shape, a line at 1.0.
    fn svg(&self) -> String {
        let rows: Vec<(String, f64)> = self
            .rows
            .iter()
            .filter_map(|row| {
                let (kernel, _) = row.pick.as_ref()?;
                Some((row.shape.to_string(), Self::ratio_of(row, kernel)?))
            })
            .collect();
        let (bar, gap, left, top, height) = (14.0, 4.0, 190.0, 30.0, 320.0);
        let width = left + rows.len() as f64 * (bar + gap) + 40.0;
        let scale = height / 1.5;
        let mut svg = format!(
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width:.0}\" height=\"{:.0}\" font-family=\"sans-serif\" font-size=\"10\">\n<text x=\"10\" y=\"18\" font-size=\"13\">picked kernel / cuBLAS per shape</text>\n",
            top + height + 170.0
        );
        for tick in [0.5, 0.9, 1.0, 1.5] {
            let y = top + height - tick * scale;
            svg.push_str(&format!(
                "<line x1=\"{left}\" x2=\"{:.0}\" y1=\"{y:.1}\" y2=\"{y:.1}\" stroke=\"{}\"/><text x=\"{:.0}\" y=\"{:.1}\" text-anchor=\"end\">{tick:.1}</text>\n",
                width - 30.0,
                if tick == 1.0 { "#333" } else { "#ccc" },
                left - 4.0,
                y + 3.0
            ));
        }
        for (i, (label, ratio)) in rows.iter().enumerate() {
            let x = left + i as f64 * (bar + gap);
            let h = ratio.min(1.5) * scale;
            let color = if *ratio >= 1.0 {
                "#2a7"
            } else if *ratio >= 0.9 {
                "#e90"
            } else {
                "#d33"
            };
            svg.push_str(&format!(
                "<rect x=\"{x:.1}\" y=\"{:.1}\" width=\"{bar}\" height=\"{h:.1}\" fill=\"{color}\"><title>{label}: {ratio:.3}</title></rect>\n<text transform=\"translate({:.1},{:.1}) rotate(60)\">{label}</text>\n",
                top + height - h,
                x + 4.0,
                top + height + 8.0
            ));
        }
        svg.push_str("</svg>\n");
        svg
    }

    /// The measured best per shape, as cache entries.
    fn cache_entries(&self, device: &DeviceInfo, selection: &SetSelection) -> Vec<TuneEntry> {
        let run = TuneRun::new(
            device_key(device),
            selection.set,
            selection.dtype,
            selection.out,
        );
        self.rows
            .iter()
            .filter_map(|row| {
                let (kernel, tflops, ratio) = row.measured.first()?;
                run.entry(&row.problem, kernel, *tflops, *ratio)
            })
            .collect()
    }
}

/// `gemm-bench cache show|prune|merge`.
fn cache_command(command: &CacheCommand) -> Result<(), Failure> {
    let failed = |error: gemm_runtime::Error| Failure::Output(error.to_string());
    match command {
        CacheCommand::Show { file, summary } => {
            let cache = TuneFile::read(file).map_err(failed)?;
            print!(
                "{}: {}",
                file.display(),
                gemm_harness::tune::show(&cache, &mut KnownKernels::default(), *summary)
            );
        }
        CacheCommand::Prune {
            file,
            drop_device,
            drop_unknown_kernels,
            dry_run,
        } => {
            let options = PruneOptions {
                drop_devices: drop_device.clone(),
                drop_unknown_kernels: *drop_unknown_kernels,
            };
            // Read first: pruning a file that is not there (or is damaged) is an error, not
            // an empty file made.
            let mut cache = TuneFile::read(file).map_err(failed)?;
            let mut known = KnownKernels::default();
            let pruned = if *dry_run {
                gemm_harness::tune::prune(&mut cache, &mut known, &options)
            } else {
                TuneFile::update(file, |cache| {
                    gemm_harness::tune::prune(cache, &mut known, &options)
                })
                .map_err(failed)?
            };
            let would = if *dry_run { " (dry run: would be)" } else { "" };
            println!("{}{would}: {pruned}", file.display());
        }
        CacheCommand::Merge { file, from } => {
            let mut entries = Vec::new();
            for path in from {
                let cache = TuneFile::read(path).map_err(failed)?;
                if let Some(first) = cache.malformed().first() {
                    eprintln!(
                        "{}: not merged: {} of its entries, which do not parse (the first, {})",
                        path.display(),
                        cache.malformed().len(),
                        first.reason
                    );
                }
                entries.extend(cache.entries);
            }
            let counts = TuneFile::merge(file, entries).map_err(failed)?;
            println!("{}: {counts}", file.display());
        }
    }
    Ok(())
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
    Failure::from(gemm_runtime::Error::Driver {
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
    rounds: &'a Rounds,
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
        let typed = inputs.typed::<In>(stream, self.blas, self.cli.check, caller_orders(launch))?;
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
        let ours_launch = ours_inputs.launch_args::<Out>(kernel.info().launch());
        let check = match &typed.reference {
            Some(reference) => {
                let name = kernel.info().name();
                let report = typed.check(stream, kernel, &mut c_ours, reference)?;
                report
                    .check(&Tolerance::for_kernel(types, m.saturating_mul(batch), n, k))
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
            Ok(ours_launch.run(
                kernel,
                stream,
                (&ours_inputs.a[set], &ours_inputs.b[set]),
                &mut c_ours,
            )?)
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
        let rounds = self.rounds;
        let Some(probe) = probe else {
            let [ours_ms, theirs_ms]: [Vec<f32>; 2] =
                time_round_robin(stream, rounds, &mut [&mut ours, &mut theirs])?
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
        let (tile_rows, tile_cols, _) = ours_launch.dims;
        let tiles = tile_rows.div_ceil(launch.tile_m) * tile_cols.div_ceil(launch.tile_n) * batch;
        let trips = (k / launch.tile_k * tiles.div_ceil(blocks)).max(1);
        let mut probe_out = stream
            .alloc_zeros::<f32>(probe.out_len(blocks))
            .map_err(|source| gpu("allocating the probe's output", source))?;
        let mut math_only = |_launch: usize| probe.launch(stream, blocks, trips, &mut probe_out);
        let [ours_ms, theirs_ms, probe_ms]: [Vec<f32>; 3] = time_round_robin(
            stream,
            rounds,
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
    /// How our kernel runs the shape: its sizes, leading dimensions (C's rows padded to
    /// `ld_align` bytes of `Out`) and batch, matrices back to back; for a kernel that stores C
    /// column-major, the swapped product (`n x m x k`, A and B exchanged, C where it lies).
    fn launch_args<Out: Element>(&self, launch: &LaunchShape) -> OursLaunch {
        let lds = LeadingDims {
            lda: self.lda,
            ldb: self.ldb,
            ldc: self
                .shape
                .leading_dim(self.shape.n, Out::BYTES, self.ld_align),
        };
        let swapped = launch.c_order == StorageOrder::ColMajor;
        let lds = if swapped { lds.exchanged() } else { lds };
        let Shape { m, n, k, batch } = kernel_shape(launch, self.shape);
        let dims = (m, n, k);
        OursLaunch {
            dims,
            lds,
            batch: Batch::packed(launch, batch, dims, lds),
            swapped,
        }
    }
}

/// One launch of our kernel on the bench's inputs, in the kernel's own terms.
#[derive(Clone, Copy)]
struct OursLaunch {
    dims: (u32, u32, u32),
    lds: LeadingDims,
    batch: Batch,
    /// A and B exchanged: the swapped product of a kernel that stores C column-major.
    swapped: bool,
}

impl OursLaunch {
    fn run<In: Element, Out: Element>(
        &self,
        kernel: &GemmKernel<In, Out>,
        stream: &Arc<CudaStream>,
        (a, b): (&CudaSlice<In>, &CudaSlice<In>),
        c: &mut CudaSlice<Out>,
    ) -> Result<(), gemm_runtime::Error> {
        let (first, second) = if self.swapped { (b, a) } else { (a, b) };
        let (m, n, k) = self.dims;
        kernel.launch_strided_batched(stream, first, second, c, m, n, k, self.lds, self.batch)
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
        let launch = ours.launch_args::<Out>(kernel.info().launch());
        launch.run(kernel, stream, (&ours.a[0], &ours.b[0]), c)?;
        let lds = launch.lds;
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
    if !bytes.is_power_of_two() || bytes > 4096 {
        return Err(format!(
            "{bytes} bytes: give a power of two up to 4096 (2 with 16-bit inputs packs odd lines)"
        ));
    }
    Ok(bytes)
}
