//! `gemm-bench`: time catalog kernels against cuBLAS SGEMM in one process.
//!
//! For each shape, random normal inputs are made once (several copies when they would fit in
//! L2) and shared by every spec that admits the shape; each spec's launches alternate with
//! cuBLAS's on one stream, each launch timed by its own CUDA events; the median counts.
//!
//! Exit codes: 0 done, 1 GPU error or failed `--check`, 2 bad arguments.

use clap::{Parser, ValueEnum};
use codegen::catalog::{self, CatalogSpec};
use codegen::Emitted;
use cudarc::driver::{CudaSlice, CudaStream};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use runtime::bench::{
    full_suite, input_sets, parse_shapes, quick_suite, time_interleaved, today, BenchRecord,
    BenchReport, Method, Shape, Skipped,
};
use runtime::verify::{compare, sgemm_handle, sgemm_row_major, Problem, Reference, Tolerance};
use runtime::{open_context, DeviceInfo, Element, Error, GemmKernel};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

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
    about = "Time gemm-dsl catalog kernels against cuBLAS SGEMM"
)]
struct Cli {
    /// Catalog specs to time, comma separated (default: the whole catalog).
    #[arg(long, value_delimiter = ',')]
    specs: Vec<String>,
    /// Shape suite.
    #[arg(long, value_enum, default_value_t = Suite::Quick)]
    suite: Suite,
    /// Shapes MxNxK, comma separated; replaces the suite.
    #[arg(long)]
    shapes: Option<String>,
    /// Timed launches per (spec, shape), for ours and for cuBLAS each.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..))]
    iters: u32,
    /// Untimed launches before timing.
    #[arg(long, default_value_t = 5)]
    warmup: u32,
    /// Most copies of the inputs rotated through (to keep operands out of L2).
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..))]
    max_input_sets: u32,
    /// Verify each kernel once per shape against cuBLAS before timing; stop on an error.
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

fn selected_specs(names: &[String]) -> Result<Vec<&'static CatalogSpec>, Failure> {
    if names.is_empty() {
        return Ok(catalog::CATALOG.iter().collect());
    }
    names
        .iter()
        .map(|name| {
            catalog::find(name.trim()).ok_or_else(|| {
                let known: Vec<&str> = catalog::CATALOG.iter().map(|e| e.name).collect();
                Failure::Arguments(format!(
                    "no catalog spec named `{name}`; known: {}",
                    known.join(", ")
                ))
            })
        })
        .collect()
}

fn run(cli: &Cli) -> Result<(), Failure> {
    let specs = selected_specs(&cli.specs)?;
    let shapes = match &cli.shapes {
        Some(text) => parse_shapes(text).map_err(Failure::Arguments)?,
        None => match cli.suite {
            Suite::Quick => quick_suite(),
            Suite::Full => full_suite(),
        },
    };
    if cli.iters < 20 {
        eprintln!(
            "note: --iters {} is below the 20 launches the performance method asks for",
            cli.iters
        );
    }
    let emitted: Vec<Emitted> = specs
        .iter()
        .map(|entry| {
            codegen::emit_str(entry.spec).map_err(|errors| {
                Failure::Arguments(errors.render(entry.spec, &format!("catalog:{}", entry.name)))
            })
        })
        .collect::<Result<_, _>>()?;

    // Which (spec, shape) pairs run; the rest are reported as skipped, never dropped quietly.
    let mut skipped = Vec::new();
    let mut work: Vec<(Shape, Vec<usize>)> = Vec::new();
    for &shape in &shapes {
        let mut admitting = Vec::new();
        for (index, kernel) in emitted.iter().enumerate() {
            match shape.admitted_by(&kernel.launch) {
                Ok(()) => admitting.push(index),
                Err(reason) => {
                    println!("skipping {} at {shape}: {reason}", kernel.kernel_name);
                    skipped.push(Skipped {
                        spec: kernel.kernel_name.clone(),
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
    let blas = sgemm_handle(&stream)?;
    let kernels: Vec<GemmKernel<f32, f32>> = emitted
        .iter()
        .map(|e| GemmKernel::from_emitted(&ctx, e))
        .collect::<Result<_, _>>()?;
    eprintln!(
        "{} (compute capability {}, CUDA {}), {} kernels",
        device.name,
        device.compute_capability,
        device.driver_version,
        kernels.len()
    );

    let total: usize = work.iter().map(|(_, specs)| specs.len()).sum();
    let progress = ProgressBar::with_draw_target(Some(total as u64), ProgressDrawTarget::stderr());
    progress.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} {msg} [{elapsed}]")
            .expect("the template is valid"),
    );
    let mut records = Vec::new();
    for (shape, admitting) in &work {
        let shape = *shape;
        progress.set_message(format!("{shape}: inputs"));
        let inputs = ShapeInputs::new(&stream, shape, device.l2_cache_bytes, cli.max_input_sets)?;
        let mut c_ours = stream
            .alloc_zeros::<f32>(shape.m as usize * shape.n as usize)
            .map_err(|source| gpu("allocating C", source))?;
        let mut c_cublas = stream
            .alloc_zeros::<f32>(shape.m as usize * shape.n as usize)
            .map_err(|source| gpu("allocating C", source))?;
        let reference = if cli.check {
            Some(inputs.cublas_result(&stream, &blas, &mut c_cublas)?)
        } else {
            None
        };
        for &index in admitting {
            let kernel = &kernels[index];
            let name = kernel.info().name;
            progress.set_message(format!("{shape}: {name}"));
            let check = match &reference {
                Some(reference) => {
                    let report = inputs.check(&stream, kernel, &mut c_ours, reference)?;
                    report
                        .check(&Tolerance::f32_accumulation(shape.k))
                        .map_err(|broken| {
                            Failure::Check(format!("{name} at {shape}: {broken} ({report})"))
                        })?;
                    Some(format!(
                        "rel {:.1e}, max abs {:.1e}",
                        report.rel_frobenius, report.max_abs
                    ))
                }
                None => None,
            };
            let sets = inputs.a.len();
            let times = time_interleaved(
                &stream,
                cli.warmup as usize,
                cli.iters as usize,
                |launch| {
                    let set = launch % sets;
                    kernel.launch(
                        &stream,
                        &inputs.a[set],
                        &inputs.b[set],
                        &mut c_ours,
                        shape.m,
                        shape.n,
                        shape.k,
                    )
                },
                |launch| {
                    // cuBLAS starts half-way round the ring, so the two never read the same
                    // copy back to back.
                    let set = (launch + sets / 2) % sets;
                    sgemm_row_major(
                        &blas,
                        &inputs.a[set],
                        &inputs.b[set],
                        &mut c_cublas,
                        shape.m,
                        shape.n,
                        shape.k,
                    )
                },
            )?;
            let record = BenchRecord::new(name, shape, &times, check)
                .expect("at least one timed launch each");
            progress.println(format!(
                "{name:<28} {shape:>18}  ours {:>8.2} TFLOP/s  cuBLAS {:>8.2} TFLOP/s  ratio {:.3}",
                record.ours_tflops, record.cublas_tflops, record.ratio
            ));
            records.push(record);
            progress.inc(1);
        }
    }
    progress.finish_and_clear();

    let report = BenchReport {
        date: today(),
        device,
        method: Method {
            warmup: cli.warmup as usize,
            iters: cli.iters as usize,
            max_input_sets: cli.max_input_sets,
            inputs: "random normal f32 inputs, C = A·B row-major".to_string(),
            baseline: "cuBLAS SGEMM (default math mode: f32 FMA, no TF32), same stream, launches interleaved with ours".to_string(),
            statistic: "median of per-launch CUDA event times".to_string(),
        },
        records,
        skipped,
    };
    println!();
    print!("{}", report.table());
    if let Some(path) = &cli.out {
        let json = serde_json::to_string_pretty(&report).expect("the report serializes");
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

/// The device copies of one shape's inputs.
struct ShapeInputs {
    shape: Shape,
    a: Vec<CudaSlice<f32>>,
    b: Vec<CudaSlice<f32>>,
}

impl ShapeInputs {
    fn new(
        stream: &Arc<CudaStream>,
        shape: Shape,
        l2_bytes: u32,
        max_sets: u32,
    ) -> Result<Self, Failure> {
        let input_bytes =
            4 * (u64::from(shape.m) * u64::from(shape.k) + u64::from(shape.k) * u64::from(shape.n));
        let sets = input_sets(input_bytes, u64::from(l2_bytes), max_sets);
        let (mut a, mut b) = (Vec::new(), Vec::new());
        for set in 0..sets {
            let problem = Problem::<f32>::random(shape.m, shape.n, shape.k, 1000 + u64::from(set));
            a.push(
                stream
                    .clone_htod(&problem.a)
                    .map_err(|source| gpu("copying A to the device", source))?,
            );
            b.push(
                stream
                    .clone_htod(&problem.b)
                    .map_err(|source| gpu("copying B to the device", source))?,
            );
        }
        Ok(ShapeInputs { shape, a, b })
    }

    /// cuBLAS's result on set 0, as the reference for `--check`.
    fn cublas_result(
        &self,
        stream: &Arc<CudaStream>,
        blas: &cudarc::cublas::CudaBlas,
        c: &mut CudaSlice<f32>,
    ) -> Result<Vec<f64>, Failure> {
        let Shape { m, n, k } = self.shape;
        sgemm_row_major(blas, &self.a[0], &self.b[0], c, m, n, k)?;
        let c = stream
            .clone_dtoh(c)
            .map_err(|source| gpu("copying the cuBLAS result back", source))?;
        Ok(c.into_iter().map(f64::from).collect())
    }

    /// One poisoned launch of `kernel` on set 0, measured against `reference`.
    fn check(
        &self,
        stream: &Arc<CudaStream>,
        kernel: &GemmKernel<f32, f32>,
        c: &mut CudaSlice<f32>,
        reference: &[f64],
    ) -> Result<runtime::verify::ErrorReport, Failure> {
        let Shape { m, n, k } = self.shape;
        stream
            .memcpy_htod(&vec![f32::poison(); c.len()], c)
            .map_err(|source| gpu("poisoning C", source))?;
        kernel.launch(stream, &self.a[0], &self.b[0], c, m, n, k)?;
        let result = stream
            .clone_dtoh(c)
            .map_err(|source| gpu("copying C back", source))?;
        Ok(compare(&result, reference, m, n, n, Reference::Cublas))
    }
}
