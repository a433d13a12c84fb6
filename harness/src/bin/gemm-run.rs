//! `gemm-run`: load one catalog kernel with its element types, launch it once on a small
//! problem, verify the result against float64, exit. fp8 kernels run with the scales their
//! spec reads (`quant: tensor | block`). Small enough to run under
//! `compute-sanitizer --tool memcheck|racecheck|synccheck`.
//!
//! Exit codes: 0 correct, 1 wrong result or GPU error, 2 bad arguments.

use clap::Parser;
use gemm_codegen::catalog;
use gemm_dsl::Quant;
use gemm_harness::bench::Shape;
use gemm_harness::verify::{
    compare, cpu_reference, run_poisoned_with_ld, verify_fused_batch, ErrorReport, FusedCase,
    Problem, Reference, Tolerance, BLOCK_SCALE_MAX,
};
use gemm_runtime::fp8::{E4m3, E5m2};
use gemm_runtime::{
    open_context, with_kernel, AnyKernel, Batch, CudaStream, Element, FusedSpec, GemmKernel,
    GridSchedule, KernelInfo, KernelTypes, LeadingDims, Operand, Storage,
};
use half::{bf16, f16};
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "gemm-run",
    about = "Launch one catalog kernel (or any spec) once and verify it"
)]
struct Cli {
    /// Catalog spec name (see `--list`), or a whole spec such as
    /// `"name: k, mma: mma_sync, tile: 128x128x16"` (anything with a `:`).
    #[arg(required_unless_present = "list")]
    name: Option<String>,
    /// Print the catalog's spec names, one per line, and exit.
    #[arg(long)]
    list: bool,
    /// Problem size MxNxK, or BxMxNxK for a strided batch of B products back to back
    /// (default: 2 x 2 block tiles, 8 k-tiles deep, so every pipeline
    /// stage wraps around at least once; for a persistent schedule, enough tiles that every
    /// resident block computes two or three of them, 4 k-tiles deep).
    #[arg(long)]
    shape: Option<Shape>,
    /// Round every leading dimension up to a multiple of this many bytes (16: the alignment
    /// the kernels' 16-byte copies and the TMA need, so any M, N, K runs; the padding of A and
    /// B holds NaN, C's must stay poisoned).
    #[arg(long, default_value_t = 16)]
    ld_align: u32,
    /// Seed of the random normal inputs.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// CUDA device ordinal.
    #[arg(long, default_value_t = 0)]
    device: usize,
    /// Also print the relative error of each 64 x 64 block of C (rows down, columns across):
    /// where a wrong result is wrong.
    #[arg(long)]
    blocks: bool,
    /// Write the SASS of the code the driver runs for the kernel to this file (from its JIT
    /// cache; where the cache lacks it, of a copy compiled for linking, with the JIT's log).
    #[arg(long)]
    sass: Option<std::path::PathBuf>,
    /// Launch this PTX file instead of the generated text, under the spec's launch rules (a
    /// hand-edited variant of the kernel). Its entry and parameters must be the kernel's, and
    /// at the spec's launch shape it must touch no memory the kernel does not: the launch
    /// checks only the parameter list and trusts the rest.
    #[arg(long)]
    ptx: Option<std::path::PathBuf>,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let names: Vec<&str> = catalog::CATALOG
        .iter()
        .chain(catalog::FP8)
        .map(|e| e.name)
        .collect();
    if cli.list {
        println!("{}", names.join("\n"));
        return ExitCode::SUCCESS;
    }
    let name = cli.name.as_deref().unwrap_or_default();
    let (label, spec) = if name.contains(':') {
        ("<spec>", name)
    } else if let Some(entry) = catalog::find(name) {
        (entry.name, entry.spec)
    } else {
        eprintln!(
            "error: no catalog spec named `{name}`; known: {}",
            names.join(", ")
        );
        return ExitCode::from(2);
    };
    let emitted = match gemm_codegen::emit_str(spec) {
        Ok(emitted) => emitted,
        Err(errors) => {
            eprint!("{}", errors.render(spec, label));
            return ExitCode::from(2);
        }
    };
    // Loaded kernels hold their description for the life of the process.
    let emitted: &'static gemm_codegen::Emitted = Box::leak(Box::new(emitted));
    let mut info = emitted.info();
    if let Some(path) = &cli.ptx {
        match std::fs::read_to_string(path) {
            Ok(ptx) => {
                let mut parts = info.parts();
                parts.ptx = Box::leak(ptx.into_boxed_str());
                // SAFETY: `--ptx` is documented as a hand-edited variant of the spec's kernel
                // with its entry, parameters and memory footprint at the spec's launch shape:
                // whoever passes the file vouches for that (load still refuses another
                // parameter list).
                info = unsafe { KernelInfo::from_parts(parts) };
            }
            Err(error) => {
                eprintln!("error: reading {}: {error}", path.display());
                return ExitCode::from(2);
            }
        }
    }
    match run(&cli, &info) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::from(1)
        }
    }
}

fn run(cli: &Cli, info: &KernelInfo<'static>) -> Result<bool, gemm_harness::Error> {
    let ctx = open_context(cli.device)?;
    let stream = ctx.default_stream();
    // The SASS first: it is written for kernels the run-time-typed loader refuses too (fp8),
    // so a sanitizer's offsets into any kernel can be read against it.
    if let Some(path) = &cli.sass {
        let code = gemm_runtime::driver_cubin(&ctx, info.ptx(), info.name())?;
        let sass = gemm_dsl::sass::disassemble(&code.cubin)?;
        let header = format!("// SASS of {}\n// JIT log:\n{}\n\n", code.origin, code.log);
        if let Err(error) = std::fs::write(path, header + &sass) {
            eprintln!("error: writing {}: {error}", path.display());
        }
    }
    let types = KernelTypes::of_info(info)?;
    if types.input().is_fp8() {
        return match (types.input(), types.input_b()) {
            (Storage::E4m3, Storage::E4m3) => run_fp8_out::<E4m3, E4m3>(cli, info, &stream, types),
            (Storage::E4m3, _) => run_fp8_out::<E4m3, E5m2>(cli, info, &stream, types),
            (_, Storage::E4m3) => run_fp8_out::<E5m2, E4m3>(cli, info, &stream, types),
            (_, _) => run_fp8_out::<E5m2, E5m2>(cli, info, &stream, types),
        };
    }
    let kernel = AnyKernel::load(&ctx, info)?;
    let shape = cli.shape.unwrap_or_else(|| {
        default_shape(
            info,
            || with_kernel!(&kernel, typed => typed.resident_blocks()),
        )
    });
    // A fused epilogue needs its arguments (α, β, C-in, bias, aux), which the batch path
    // passes; a plain single product runs once here, with the per-block report.
    let fused = FusedSpec::of_info(info)?;
    if shape.batch > 1 || fused != FusedSpec::NONE {
        if cli.blocks {
            eprintln!("note: --blocks reports a plain kernel's single product; not printed here");
        }
        return run_batch(cli, info, &kernel, &stream, shape, &fused);
    }
    let (report, blocks, gap_writes) =
        with_kernel!(&kernel, typed => run_once(typed, &stream, shape, cli.seed, cli.ld_align)?);
    if cli.blocks {
        print!("{blocks}");
    }
    let types = kernel.types();
    let registers = with_kernel!(&kernel, typed => typed.registers()?);
    println!(
        "{}: {registers} registers per thread as loaded",
        info.name()
    );
    let verdict = report.check(&Tolerance::for_kernel(types, shape.m, shape.n, shape.k));
    println!(
        "{} ({types}) {shape}: {report}: {}",
        info.name(),
        match (&verdict, gap_writes) {
            (Ok(()), 0) => "ok".to_string(),
            (Ok(()), gaps) => format!("FAILED: {gaps} elements written between C's rows"),
            (Err(broken), _) => format!("FAILED: {broken}"),
        }
    );
    Ok(verdict.is_ok() && gap_writes == 0)
}

/// `--shape`'s default: 2 x 2 block tiles 8 k tiles deep, or for a persistent grid two or three
/// tiles a resident block, 4 k tiles deep.
fn default_shape(info: &KernelInfo<'static>, resident_blocks: impl FnOnce() -> u32) -> Shape {
    let launch = *info.launch();
    match launch.schedule {
        GridSchedule::Tiles => Shape::new(2 * launch.tile_m, 2 * launch.tile_n, 8 * launch.tile_k),
        GridSchedule::Persistent { .. } => Shape::rounds_of(&launch, resident_blocks(), 2, 4),
    }
}

/// [`run_fp8`] at the kernel's output type.
fn run_fp8_out<In: Element, InB: Element>(
    cli: &Cli,
    info: &KernelInfo<'static>,
    stream: &std::sync::Arc<CudaStream>,
    types: KernelTypes,
) -> Result<bool, gemm_harness::Error> {
    match types.output() {
        Storage::Bf16 => run_fp8::<In, bf16, InB>(cli, info, stream),
        Storage::F16 => run_fp8::<In, f16, InB>(cli, info, stream),
        _ => run_fp8::<In, f32, InB>(cli, info, stream),
    }
}

/// An fp8 kernel, loaded with its types: each product of the shape against float64 on the
/// decoded inputs, with the scales the spec reads (per-tensor 0.5 and 1.25, or random
/// power-of-two block scales), C poisoned first.
fn run_fp8<In: Element, Out: Element, InB: Element>(
    cli: &Cli,
    info: &KernelInfo<'static>,
    stream: &std::sync::Arc<CudaStream>,
) -> Result<bool, gemm_harness::Error> {
    let kernel = GemmKernel::<In, Out, InB>::load(stream.context(), info)?;
    let shape = cli
        .shape
        .unwrap_or_else(|| default_shape(info, || kernel.resident_blocks()));
    let Shape { m, n, k, batch } = shape;
    let launch = *info.launch();
    let ld = |operand, bytes| {
        shape.leading_dim(launch.stored_dims(operand, m, n, k).1, bytes, cli.ld_align)
    };
    let lds = LeadingDims {
        lda: ld(Operand::A, In::BYTES),
        ldb: ld(Operand::B, InB::BYTES),
        ldc: ld(Operand::C, Out::BYTES),
    };
    let fused = FusedSpec::of_info(info)?;
    let strides = Batch::packed(&launch, batch, (m, n, k), lds);
    let report = verify_fused_batch(
        &kernel,
        stream,
        m,
        n,
        k,
        lds,
        strides,
        cli.seed,
        &FusedCase::for_spec(&fused),
    )?;
    let types = KernelTypes::of_info(info)?;
    let tolerance = match fused.quant {
        // Block scales up to BLOCK_SCALE_MAX on each operand grow the products' magnitude.
        Quant::Block => Tolerance::for_kernel(types, m, n, k)
            .for_magnitude(f64::from(BLOCK_SCALE_MAX * BLOCK_SCALE_MAX)),
        Quant::None | Quant::Tensor => Tolerance::for_kernel(types, m, n, k),
    };
    println!(
        "{}: {} registers per thread as loaded",
        info.name(),
        kernel.registers()?
    );
    let verdict = report.check(&tolerance);
    println!(
        "{} ({types}) {shape}: {}: {}",
        info.name(),
        report
            .worst()
            .map_or_else(|| "no product".to_string(), |worst| worst.to_string()),
        match &verdict {
            Ok(()) => "ok".to_string(),
            Err(broken) => format!("FAILED: {broken}"),
        }
    );
    Ok(verdict.is_ok())
}

/// One poisoned launch on random normal inputs of the kernel's type, against float64; also
/// the relative error of each 64 x 64 block of C as a table, and how many elements the
/// kernel wrote into the gaps between C's rows (none is right).
fn run_once<In: Element, Out: Element>(
    kernel: &GemmKernel<In, Out>,
    stream: &std::sync::Arc<CudaStream>,
    shape: Shape,
    seed: u64,
    ld_align: u32,
) -> Result<(ErrorReport, String, usize), gemm_harness::Error> {
    const BLOCK: u32 = 64;
    let Shape { m, n, k, .. } = shape;
    let problem = Problem::<In>::random(m, n, k, seed);
    let reference = cpu_reference(&problem)?;
    let launch = kernel.info().launch();
    let ld =
        |operand, bytes| shape.leading_dim(launch.stored_dims(operand, m, n, k).1, bytes, ld_align);
    let ldc = shape.leading_dim(n, Out::BYTES, ld_align);
    let c = run_poisoned_with_ld(
        kernel,
        stream,
        &problem,
        (ld(Operand::A, In::BYTES), ld(Operand::B, In::BYTES), ldc),
    )?;
    let report = compare(&c, &reference, m, n, ldc, Reference::CpuF64)?;
    let gap_writes = (0..m as usize)
        .flat_map(|row| &c[row * ldc as usize + n as usize..(row + 1) * ldc as usize])
        .filter(|value| !value.is_poison())
        .count();
    let mut table = String::new();
    for block_row in 0..shape.m.div_ceil(BLOCK) {
        for block_col in 0..shape.n.div_ceil(BLOCK) {
            let (mut error, mut norm) = (0.0f64, 0.0f64);
            for row in block_row * BLOCK..((block_row + 1) * BLOCK).min(shape.m) {
                for col in block_col * BLOCK..((block_col + 1) * BLOCK).min(shape.n) {
                    let want = reference[(row * n + col) as usize];
                    let got = c[(row * ldc + col) as usize].to_f64();
                    error += (got - want).powi(2);
                    norm += want * want;
                }
            }
            table.push_str(&format!(" {:8.1e}", (error / norm).sqrt()));
        }
        table.push('\n');
    }
    Ok((report, table, gap_writes))
}

/// A strided batch (`--shape BxMxNxK`), or any shape of a kernel with a fused epilogue: the
/// products back to back, leading dimensions padded to `--ld-align` bytes, the epilogue's
/// arguments as [`FusedCase::for_spec`] makes them, each product (and its aux output) against
/// float64 and nothing written between them.
fn run_batch(
    cli: &Cli,
    info: &KernelInfo<'static>,
    kernel: &AnyKernel,
    stream: &std::sync::Arc<CudaStream>,
    shape: Shape,
    fused: &FusedSpec,
) -> Result<bool, gemm_harness::Error> {
    let Shape { m, n, k, batch } = shape;
    let launch = *info.launch();
    let ld = |operand, bytes| {
        shape.leading_dim(launch.stored_dims(operand, m, n, k).1, bytes, cli.ld_align)
    };
    let lds = LeadingDims {
        lda: ld(Operand::A, launch.input_element_bytes),
        ldb: ld(Operand::B, launch.input_element_bytes),
        ldc: ld(Operand::C, launch.output_element_bytes),
    };
    let strides = Batch::packed(&launch, batch, (m, n, k), lds);
    let case = FusedCase::for_spec(fused);
    let report = with_kernel!(kernel, typed => {
        verify_fused_batch(typed, stream, m, n, k, lds, strides, cli.seed, &case)?
    });
    let types = kernel.types();
    for (index, product) in report.products.iter().enumerate() {
        println!(
            "{} ({types}) {shape}, product {index}: {product}",
            info.name()
        );
    }
    let verdict = report.check(&Tolerance::for_kernel(types, m, n, k));
    println!(
        "{} ({types}) {shape}: {}",
        info.name(),
        match &verdict {
            Ok(()) => "ok".to_string(),
            Err(broken) => format!("FAILED: {broken}"),
        }
    );
    Ok(verdict.is_ok())
}
