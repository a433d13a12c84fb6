//! `gemm-run`: load one catalog kernel, launch it once on a small problem, verify the result,
//! exit. Small enough to run under `compute-sanitizer --tool memcheck|racecheck|synccheck`.
//!
//! Exit codes: 0 correct, 1 wrong result or GPU error, 2 bad arguments.

use clap::Parser;
use codegen::catalog;
use runtime::bench::Shape;
use runtime::verify::{check_against, cpu_reference, Problem, Reference, Tolerance};
use runtime::{open_context, GemmKernel};
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "gemm-run",
    about = "Launch one catalog kernel once and verify it"
)]
struct Cli {
    /// Catalog spec name (see `--list`).
    #[arg(required_unless_present = "list")]
    name: Option<String>,
    /// Print the catalog's spec names, one per line, and exit.
    #[arg(long)]
    list: bool,
    /// Problem size MxNxK (default: 2 x 2 block tiles, 8 k-tiles deep, so every pipeline
    /// stage wraps around at least once).
    #[arg(long)]
    shape: Option<Shape>,
    /// Seed of the random normal inputs.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// CUDA device ordinal.
    #[arg(long, default_value_t = 0)]
    device: usize,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let names: Vec<&str> = catalog::CATALOG.iter().map(|e| e.name).collect();
    if cli.list {
        println!("{}", names.join("\n"));
        return ExitCode::SUCCESS;
    }
    let name = cli.name.as_deref().unwrap_or_default();
    let Some(entry) = catalog::find(name) else {
        eprintln!(
            "error: no catalog spec named `{name}`; known: {}",
            names.join(", ")
        );
        return ExitCode::from(2);
    };
    let emitted = match codegen::emit_str(entry.spec) {
        Ok(emitted) => emitted,
        Err(errors) => {
            eprint!("{}", errors.render(entry.spec, entry.name));
            return ExitCode::from(2);
        }
    };
    let launch = emitted.launch;
    let shape = cli.shape.unwrap_or(Shape::new(
        2 * launch.tile_m,
        2 * launch.tile_n,
        8 * launch.tile_k,
    ));
    match run(&cli, &emitted, shape) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::from(1)
        }
    }
}

fn run(cli: &Cli, emitted: &codegen::Emitted, shape: Shape) -> Result<bool, runtime::Error> {
    let ctx = open_context(cli.device)?;
    let stream = ctx.default_stream();
    let kernel = GemmKernel::<f32, f32>::from_emitted(&ctx, emitted)?;
    let problem = Problem::<f32>::random(shape.m, shape.n, shape.k, cli.seed);
    let reference = cpu_reference(&problem);
    let report = check_against(&kernel, &stream, &problem, &reference, Reference::CpuF64)?;
    let verdict = report.check(&Tolerance::f32_accumulation(shape.k));
    println!(
        "{} {shape}: {report}: {}",
        emitted.kernel_name,
        match &verdict {
            Ok(()) => "ok".to_string(),
            Err(broken) => format!("FAILED: {broken}"),
        }
    );
    Ok(verdict.is_ok())
}
