//! `gemm-codegen`: emit, check, explain, disassemble and compare gemm-dsl kernels.
//!
//! SPEC arguments are the body of `gemm! { .. }` as one string, `@FILE` to read it from a
//! file, or the name of a catalog spec. The exit statuses are `EXIT_CODES` below, which
//! `--help` prints.

use clap::{Parser, Subcommand};
use gemm_codegen::catalog::{self, CATALOG, DEFAULT_SPEC};
use gemm_codegen::sass::{self, SassError, SassReport};
use gemm_codegen::{emit, emit_math_only, explain::explain};
use gemm_dsl::{Arch, ValidSpec};
use std::io::{IsTerminal, Write};
use std::process::ExitCode;

/// The exit statuses, as `--help` lists them.
const EXIT_CODES: &str = "0 success; 1 an I/O or tool failure, or (sass) SASS that breaks the \
     spec's promise; 2 an invalid spec or bad arguments; 3 ptxas or nvdisasm not installed; \
     4 (pick) no kernel computes the problem";

#[derive(Parser)]
#[command(
    name = "gemm-codegen",
    version,
    about = "Generate and inspect gemm-dsl GEMM kernels",
    after_help = format!("SPEC is one of:\n  \
      - spec text: the body of `gemm! {{ .. }}`, e.g. 'name: k, arch: sm_80, tile: 128x128x8'\n  \
      - @FILE: the same text read from a file\n  \
      - a catalog name, e.g. simt_128x128x8_cp2 (`gemm-codegen catalog` lists them)\n\n\
      Keys and values: the gemm-dsl crate docs (gemm-dsl/src/lib.rs).\n\n\
      Exit status: {EXIT_CODES}.")
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Write a spec's PTX (no SPEC: the built-in default spec).
    Emit {
        /// Spec text, @FILE, or a catalog name.
        spec: Option<String>,
        /// A catalog spec by name.
        #[arg(long, conflicts_with = "spec")]
        preset: Option<String>,
        /// Write the PTX to this file instead of stdout.
        #[arg(short, long)]
        output: Option<std::path::PathBuf>,
        /// The spec's main-loop math alone (no loads, copies or barriers): the probe that
        /// `gemm-bench --math-only` times.
        #[arg(long)]
        math_only: bool,
    },
    /// Validate a spec and print it with every default filled in.
    Check {
        /// Spec text, @FILE, or a catalog name.
        spec: String,
    },
    /// Shared-memory ledger, register budget (with ptxas's numbers), occupancy, pipeline
    /// timeline and bank conflicts.
    Explain {
        /// Spec text, @FILE, or a catalog name.
        spec: String,
    },
    /// Assemble with ptxas, disassemble with nvdisasm, highlight the path-proving opcodes.
    Sass {
        /// Spec text, @FILE, or a catalog name.
        spec: String,
        /// Assemble for another architecture than the spec's (e.g. sm_90).
        #[arg(long)]
        arch: Option<String>,
        /// Print only the opcode summary, not the listing.
        #[arg(long)]
        summary: bool,
        /// Assemble the spec's math-only probe instead of the kernel.
        #[arg(long)]
        math_only: bool,
    },
    /// Unified diff of the PTX of two specs.
    Diff {
        /// The spec on the diff's left (`-`) side: spec text, @FILE, or a catalog name.
        spec_a: String,
        /// The spec on the right (`+`) side.
        spec_b: String,
    },
    /// List the named specs and the kernel sets.
    Catalog,
    /// Pick the kernel for a problem from a kernel set with the cost model (no GPU): the first
    /// line is the chosen spec (`gemm-codegen check` accepts it), then the reasons and the
    /// other candidates, fastest first.
    Pick {
        /// MxNxK, or BxMxNxK for a strided batch of B products.
        shape: String,
        /// The device: which kernels run there and the modelled board (sm_90 or sm_90a: the
        /// Hopper set; sm_80 to sm_89: Ampere's).
        #[arg(long, default_value = "sm_90a")]
        arch: String,
        /// A's and B's element type.
        #[arg(long, default_value = "bf16")]
        dtype: String,
        /// C's element type (default: the spec's for the dtype: the dtype itself, f32 for
        /// tf32, bf16 for fp8).
        #[arg(long)]
        out: Option<String>,
        /// rr, rc, cr or cc: whether A and B are row- or column-major (default: the spec's
        /// for the dtype: rr, rc for fp8).
        #[arg(long)]
        layout: Option<String>,
        /// Leading dimensions LDA,LDB,LDC in elements (default: packed operands).
        #[arg(long)]
        lds: Option<String>,
        /// The alignment in bytes (a power of two) the operands start at, for views that
        /// start inside a buffer (default: 256, the allocator's).
        #[arg(long, value_parser = parse_address_align)]
        address_align: Option<u32>,
        /// SMs of the device (default: the modelled board's, 132 for Hopper, 108 for Ampere).
        #[arg(long)]
        sms: Option<u32>,
        /// A kernel set by name instead of the target's (`gemm-codegen catalog` lists the sets).
        #[arg(long)]
        set: Option<String>,
    },
}

/// Why the command failed, mapped to the exit code.
enum Failure {
    Io(String),
    /// The SASS lacks what the spec promises (or has what it rules out).
    SassViolated(String),
    InvalidSpec(String),
    ToolsMissing(String),
    /// `pick`: no kernel of the set computes the problem (or no set serves the device).
    NoKernel(String),
    /// Whoever read stdout stopped (`gemm-codegen sass .. | head`): nothing left to say.
    OutputClosed,
}

/// A failed write to stdout: a closed pipe ends the command quietly, anything else is an
/// I/O failure.
impl From<std::io::Error> for Failure {
    fn from(error: std::io::Error) -> Self {
        if error.kind() == std::io::ErrorKind::BrokenPipe {
            Failure::OutputClosed
        } else {
            Failure::Io(format!("cannot write to stdout: {error}"))
        }
    }
}

impl From<SassError> for Failure {
    fn from(error: SassError) -> Self {
        match error {
            SassError::ToolMissing { .. } => Failure::ToolsMissing(error.to_string()),
            other => Failure::Io(other.to_string()),
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli.command) {
        Ok(()) | Err(Failure::OutputClosed) => ExitCode::SUCCESS,
        Err(Failure::Io(message) | Failure::SassViolated(message)) => {
            eprintln!("error: {message}");
            ExitCode::from(1)
        }
        Err(Failure::InvalidSpec(rendered)) => {
            eprint!("{rendered}");
            ExitCode::from(2)
        }
        Err(Failure::ToolsMissing(message)) => {
            eprintln!("error: {message}");
            ExitCode::from(3)
        }
        Err(Failure::NoKernel(rendered)) => {
            eprint!("{rendered}");
            ExitCode::from(4)
        }
    }
}

/// Spec text and where it came from (for error locations).
fn spec_source(argument: &str) -> Result<(String, String), Failure> {
    if let Some(path) = argument.strip_prefix('@') {
        let text = std::fs::read_to_string(path)
            .map_err(|error| Failure::Io(format!("cannot read {path}: {error}")))?;
        return Ok((text, path.to_string()));
    }
    if let Some(entry) = catalog::find(argument) {
        return Ok((entry.spec.to_string(), format!("catalog:{}", entry.name)));
    }
    let looks_like_a_name = !argument.is_empty()
        && argument
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_');
    if looks_like_a_name {
        // One word is no spec (a spec is `key: value` pairs): a catalog name, mistyped.
        let help = nearest_catalog_name(argument)
            .map(|name| format!("did you mean `{name}`?"))
            .unwrap_or_else(|| {
                "see `gemm-codegen catalog` for the names, or write `key: value, ...`".into()
            });
        return Err(Failure::InvalidSpec(format!(
            "error: `{argument}` is no catalog spec (and a spec is `key: value` pairs)\n  = help: {help}\n"
        )));
    }
    Ok((argument.to_string(), "<spec>".to_string()))
}

/// The catalog name a mistyped `name` most likely meant: the nearest, within 3 edits.
fn nearest_catalog_name(name: &str) -> Option<&'static str> {
    CATALOG
        .iter()
        .chain(catalog::FP8)
        .map(|entry| (gemm_dsl::parse::edit_distance(name, entry.name), entry.name))
        .min()
        .filter(|&(distance, _)| distance <= 3)
        .map(|(_, nearest)| nearest)
}

fn validate(argument: &str) -> Result<ValidSpec, Failure> {
    let (text, origin) = spec_source(argument)?;
    gemm_dsl::check_str(&text).map_err(|errors| Failure::InvalidSpec(errors.render(&text, &origin)))
}

/// Refuses, before ptxas runs, to assemble `valid`'s kernel for an `arch` that cannot run it:
/// one whose limits the spec breaks (what `check` says of the spec with that arch), or one the
/// kernel's PTX does not compile forward to.
fn runs_on(valid: &ValidSpec, arch: Arch) -> Result<(), Failure> {
    let target = valid.spec.arch;
    if arch == target {
        return Ok(());
    }
    let name = &valid.spec.name;
    let mut moved = valid.spec.clone();
    moved.arch = arch;
    let text = moved.to_spec_text();
    if let Err(errors) = gemm_dsl::check_str(&text) {
        return Err(Failure::InvalidSpec(format!(
            "error: `{name}` cannot run on {} (--arch): the spec with `arch: {}` fails its checks\n\n{}",
            arch.name(),
            arch.name(),
            errors.render(&text, &format!("--arch {}", arch.name()))
        )));
    }
    if !compiles_forward(target, arch) {
        let help = if target.is_arch_specific() {
            format!("--arch {}", target.name())
        } else {
            format!("--arch {} or newer", target.name())
        };
        return Err(Failure::InvalidSpec(format!(
            "error: `{name}`'s PTX (.target {}) does not compile for {}: PTX compiles forward only, \
             to its own architecture or a newer one (an `a` target to itself alone)\n  = help: {help}\n",
            target.name(),
            arch.name()
        )));
    }
    Ok(())
}

/// Whether PTX for `target` assembles for `arch`: forward to the same or a later compute
/// capability, and architecture-specific PTX (`sm_90a`) for exactly its own target.
fn compiles_forward(target: Arch, arch: Arch) -> bool {
    if target.is_arch_specific() {
        arch == target
    } else {
        arch.compute_capability() >= target.compute_capability()
    }
}

fn write_out(text: &str, output: Option<&std::path::Path>) -> Result<(), Failure> {
    match output {
        Some(path) => std::fs::write(path, text)
            .map_err(|error| Failure::Io(format!("cannot write {}: {error}", path.display()))),
        None => {
            let mut out = std::io::stdout().lock();
            out.write_all(text.as_bytes())?;
            Ok(out.flush()?)
        }
    }
}

/// A spec value of the pick command, read by the spec language's parser.
fn spec_value<T>(
    key: &str,
    value: &str,
    read: impl Fn(&gemm_dsl::GemmSpec) -> T,
) -> Result<T, Failure> {
    let text = format!("name: pick, {key}: {value}");
    gemm_dsl::parse_str(&text)
        .map(|parsed| read(&parsed.spec))
        .map_err(|errors| Failure::InvalidSpec(errors.render(&text, &format!("--{key}"))))
}

#[allow(clippy::too_many_arguments)]
fn pick(
    out: &mut impl Write,
    shape: &str,
    arch: &str,
    dtype: &str,
    out_type: Option<&str>,
    layout: Option<&str>,
    lds: Option<&str>,
    address_align: Option<u32>,
    sms: Option<u32>,
    set: Option<&str>,
) -> Result<(), Failure> {
    use gemm_codegen::pick::{rank, reasons, set_candidates, sets, DeviceModel, Problem};
    let arch = spec_value("arch", arch, |s| s.arch)?;
    let dtype = spec_value("dtype", dtype, |s| s.dtype)?;
    // Left out, C's type and the layout are the spec language's defaults for the dtype.
    let dtype_text = format!("{}, mma: wgmma", dtype.name());
    let out_type = match out_type {
        Some(text) => spec_value("out", text, |s| s.out)?,
        None => spec_value("dtype", &dtype_text, |s| s.out)?,
    };
    let layout = match layout {
        Some(text) => spec_value("layout", text, |s| s.layout)?,
        None => spec_value("dtype", &dtype_text, |s| s.layout)?,
    };
    let bad = |message: String| Failure::InvalidSpec(format!("error: {message}\n"));
    let mut problem = Problem::parse(shape, layout).map_err(bad)?;
    if let Some(text) = lds {
        let numbers: Vec<u32> = text
            .split(',')
            .map(|part| part.trim().parse::<u32>())
            .collect::<Result<_, _>>()
            .map_err(|_| bad(format!("--lds `{text}`: three numbers LDA,LDB,LDC")))?;
        let [lda, ldb, ldc] = numbers[..] else {
            return Err(bad(format!("--lds `{text}`: three numbers LDA,LDB,LDC")));
        };
        problem = problem.with_leading_dims(lda, ldb, ldc);
    }
    if let Some(bytes) = address_align {
        problem = problem.with_address_align(bytes);
    }
    let cc = arch.compute_capability();
    let set = match set {
        Some(name) => {
            let set = sets::find(name).ok_or_else(|| {
                let names: Vec<&str> = sets::SETS.iter().map(|s| s.name).collect();
                bad(format!(
                    "no kernel set named `{name}`; sets: {}",
                    names.join(", ")
                ))
            })?;
            // A pick for a device gives a kernel that runs on it, or none.
            if let Some(why) = set.refuses(cc, dtype) {
                let help = match sets::for_device(cc, dtype) {
                    Some(fits) => format!(
                        "--set {}, the set for {} on {} (what leaving --set out picks)",
                        fits.name,
                        dtype.name(),
                        arch.name()
                    ),
                    None => format!("no set serves {} on {}", dtype.name(), arch.name()),
                };
                return Err(bad(format!("{why}\n  = help: {help}")));
            }
            set
        }
        None => sets::for_device(cc, dtype).ok_or_else(|| {
            let serving: Vec<String> = sets::SETS
                .iter()
                .filter(|set| set.dtypes.contains(&dtype))
                .map(|set| format!("`{}` runs on {}", set.name, set.runs_on))
                .collect();
            Failure::NoKernel(format!(
                "error: no built-in kernel set for {} on {}\n  = note: sets for {}: {}\n",
                dtype.name(),
                arch.name(),
                dtype.name(),
                serving.join("; ")
            ))
        })?,
    };
    let mut device = DeviceModel::for_arch(arch);
    if let Some(sms) = sms {
        device = device.with_sms(sms);
    }
    let specs = set.specs(dtype, out_type);
    let candidates = set_candidates(set, dtype, out_type)
        .map_err(|errors| Failure::InvalidSpec(errors.render(&specs.join("\n"), set.name)))?;
    let direct = rank(&candidates, &problem, &device);
    // As `Matmul` routes it: the swapped product `Cᵀ = Bᵀ·Aᵀ` where a member that stores C
    // column-major is predicted faster than the problem's own pick.
    let swapped = candidates
        .iter()
        .any(|c| c.launch.c_order == gemm_dsl::abi::StorageOrder::ColMajor)
        .then(|| rank(&candidates, &problem.swapped(), &device));
    let priced = |ranking: &gemm_codegen::pick::Ranking| {
        ranking
            .best()
            .map(|(index, estimate)| (*index, estimate.seconds))
    };
    let runs_swapped = swapped.as_ref().is_some_and(|swapped| {
        gemm_codegen::pick::swapped_wins(&candidates, priced(&direct), priced(swapped))
    });
    let ranking = match swapped {
        Some(swapped) if runs_swapped => swapped,
        _ => direct,
    };
    let Some((best, estimate)) = ranking.best() else {
        return Err(Failure::NoKernel(refusal(
            set,
            dtype,
            &candidates,
            &ranking,
        )));
    };
    let chosen = gemm_dsl::check_str(&specs[*best]).expect("set members are valid");
    writeln!(out, "{}", chosen.spec.to_spec_text())?;
    writeln!(
        out,
        "# {problem} on {} ({} SMs), set `{}`: {}",
        device.name,
        device.sms,
        set.name,
        reasons(estimate, &ranking.problem)
    )?;
    if runs_swapped {
        let swapped = &ranking.problem;
        writeln!(
            out,
            "# swapped: Matmul runs Cᵀ = Bᵀ·Aᵀ, {swapped} (lds {},{},{}; A and B exchanged, C where it lies)",
            swapped.lda, swapped.ldb, swapped.ldc
        )?;
    }
    writeln!(out, "# candidates, fastest predicted first:")?;
    let width = candidates.iter().map(|c| c.name.len()).max().unwrap_or(0);
    for (index, other) in &ranking.ranked {
        writeln!(
            out,
            "#   {:<width$} {:>9.1} us  {:>5.2}x  bound by {}",
            candidates[*index].name,
            other.seconds * 1e6,
            other.seconds / estimate.seconds,
            other.bound.name()
        )?;
    }
    for (index, why) in &ranking.refused {
        // Members of another layout, or that store C in the other order, answer other
        // problems.
        if candidates[*index].layout == ranking.problem.layout
            && !matches!(why, gemm_codegen::pick::Refusal::COrder(_))
        {
            writeln!(
                out,
                "#   {:<width$} refused: {why}",
                candidates[*index].name
            )?;
        }
    }
    if candidates[*best].narrow_access() {
        // What would let a 16-byte member run it, at full speed.
        let wide: Vec<_> = candidates
            .iter()
            .filter(|c| !c.narrow_access())
            .cloned()
            .collect();
        // Padding fixes lines, not addresses: ask at the allocator's alignment.
        let aligned = problem.with_address_align(gemm_codegen::pick::ALLOCATION_ALIGN);
        let ranking = rank(&wide, &aligned, &device);
        let fix = match ranking.remedy(&wide) {
            _ if ranking.best().is_some() => {
                ": operands that start 16-byte aligned let one".to_string()
            }
            Some(gemm_codegen::pick::Remedy::PaddedLines(padded)) => format!(
                ": --lds {},{},{} (lines padded){} lets one",
                padded.lda,
                padded.ldb,
                padded.ldc,
                if problem.address_align < 16 {
                    " with operands that start 16-byte aligned"
                } else {
                    ""
                }
            ),
            _ => String::new(),
        };
        writeln!(
            out,
            "# narrow access: no member with 16-byte copies and whole stores computes this problem{fix}"
        )?;
        // What `Matmul` runs instead: a column of C as one row, where that copies wide.
        let one_row = problem.as_one_row().and_then(|row| {
            let ranking = rank(&wide, &row, &device);
            let (index, estimate) = ranking.best()?;
            Some((row, wide[*index].name.clone(), estimate.seconds))
        });
        if let Some((row, name, seconds)) = one_row {
            writeln!(
                out,
                "# a column of C: Matmul runs it as one row, {row} (lds {},{},{}), on {name}: \
                 predicted {:.1} us",
                row.lda,
                row.ldb,
                row.ldc,
                seconds * 1e6
            )?;
        }
    }
    Ok(())
}

/// `--address-align`: a power of two of bytes.
fn parse_address_align(text: &str) -> Result<u32, String> {
    match text.parse::<u32>() {
        Ok(bytes) if bytes.is_power_of_two() => Ok(bytes),
        _ => Err(format!(
            "`{text}` is not a power of two of bytes (2, 4, 16, ..)"
        )),
    }
}

/// Why no kernel of `set` computes the ranked problem, per member or, where every member has
/// the same reason, once; then the flag that fixes it, where one does.
fn refusal(
    set: &gemm_codegen::pick::sets::KernelSet,
    dtype: gemm_dsl::DType,
    candidates: &[gemm_codegen::pick::Candidate],
    ranking: &gemm_codegen::pick::Ranking,
) -> String {
    use gemm_codegen::pick::{sets::KernelSet, Refusal, Remedy};
    let problem = &ranking.problem;
    let mut text = format!(
        "error: no kernel of set `{}` computes {problem}:\n",
        set.name
    );
    let in_layout: Vec<(&str, String)> = ranking
        .refused
        .iter()
        .filter(|(i, why)| {
            candidates[*i].layout == problem.layout && !matches!(why, Refusal::COrder(_))
        })
        .map(|(i, why)| (candidates[*i].name.as_str(), why.to_string()))
        .collect();
    match &in_layout[..] {
        [] => {}
        [(_, first), rest @ ..] if rest.iter().all(|(_, why)| why == first) => {
            text.push_str(&format!("  every member: {first}\n"));
        }
        all => {
            for (name, why) in all {
                text.push_str(&format!("  {name}: {why}\n"));
            }
        }
    }
    match ranking.remedy(candidates) {
        Some(Remedy::Layouts(layouts)) => {
            let names: Vec<&str> = layouts.iter().map(|layout| layout.name()).collect();
            let reason = KernelSet::layouts_reason(dtype)
                .map(|why| format!(": {why}"))
                .unwrap_or_default();
            text.push_str(&format!(
                "  every member takes layout {} only{reason}\n",
                names.join(" or ")
            ));
            let help: Vec<String> = layouts
                .iter()
                .map(|&layout| format!("--layout {} ({})", layout.name(), storage(layout)))
                .collect();
            text.push_str(&format!("  = help: {}\n", help.join(", or ")));
        }
        Some(Remedy::PaddedLines(padded)) => text.push_str(&format!(
            "  = help: --lds {},{},{}: store the operands with lines padded to these leading \
             dimensions\n",
            padded.lda, padded.ldb, padded.ldc
        )),
        None => {}
    }
    text
}

/// How a layout stores A and B.
fn storage(layout: gemm_dsl::Layout) -> String {
    let order = |row_major: bool| {
        if row_major {
            "row-major"
        } else {
            "column-major"
        }
    };
    format!(
        "A {}, B {}",
        order(layout.a_row_major()),
        order(layout.b_row_major())
    )
}

fn run(command: Command) -> Result<(), Failure> {
    // Every write goes through `?`: a reader that stops early (`| head`) ends the command
    // quietly instead of a panic in `print!`.
    let mut out = std::io::stdout().lock();
    match command {
        Command::Emit {
            spec,
            preset,
            output,
            math_only,
        } => {
            let argument = match (spec, preset) {
                (Some(spec), _) => spec,
                (None, Some(name)) => {
                    catalog::find(&name).ok_or_else(|| {
                        let help = nearest_catalog_name(&name)
                            .map(|nearest| format!("did you mean `{nearest}`?"))
                            .unwrap_or_else(|| "see `gemm-codegen catalog` for the names".into());
                        Failure::InvalidSpec(format!(
                            "error: no catalog spec named `{name}`\n  = help: {help}\n"
                        ))
                    })?;
                    name
                }
                (None, None) => DEFAULT_SPEC.to_string(),
            };
            let valid = validate(&argument)?;
            let ptx = if math_only {
                emit_math_only(&valid).ptx().to_string()
            } else {
                emit(&valid).ptx().to_string()
            };
            write_out(&ptx, output.as_deref())
        }
        Command::Check { spec } => {
            let valid = validate(&spec)?;
            writeln!(out, "ok: {}", valid.spec.to_spec_text())?;
            writeln!(
                out,
                "{} threads, {} B shared memory, ~{} registers/thread, {}",
                valid.threads_per_block(),
                valid.smem.total(),
                valid.registers.total(),
                valid.occupancy
            )?;
            Ok(())
        }
        Command::Explain { spec } => {
            let valid = validate(&spec)?;
            let emitted = emit(&valid);
            let assembled = sass::assemble(emitted.ptx(), valid.spec.arch.name());
            let text = match &assembled {
                Ok(assembled) => explain(&valid, Ok(&assembled.resources)),
                Err(error) => explain(&valid, Err(&error.to_string())),
            };
            write!(out, "{text}")?;
            Ok(())
        }
        Command::Sass {
            spec,
            arch,
            summary,
            math_only,
        } => {
            let valid = validate(&spec)?;
            let arch = match arch {
                Some(name) => Arch::ALL
                    .into_iter()
                    .find(|a| a.name() == name)
                    .ok_or_else(|| {
                        Failure::InvalidSpec(format!(
                            "error: unknown --arch `{name}`; one of sm_80, sm_86, sm_89, sm_90, sm_90a\n"
                        ))
                    })?,
                None => valid.spec.arch,
            };
            runs_on(&valid, arch)?;
            let (name, ptx, expected) = if math_only {
                let probe = emit_math_only(&valid);
                (
                    probe.kernel_name().to_string(),
                    probe.ptx().to_string(),
                    probe.expected_sass().to_vec(),
                )
            } else {
                let emitted = emit(&valid);
                (
                    emitted.kernel_name().to_string(),
                    emitted.ptx().to_string(),
                    emitted.expected_sass().to_vec(),
                )
            };
            let report = SassReport::from_ptx(&ptx, arch.name())?;
            if !summary {
                let highlight = std::io::stdout().is_terminal();
                writeln!(out, "{}", report.highlighted(highlight))?;
            }
            writeln!(out, "{name} for {}:", arch.name())?;
            write!(out, "{}", report.summary())?;
            if let Some(resources) = &report.resources {
                writeln!(out, "ptxas: {resources}")?;
            }
            match report.require(&expected) {
                Ok(()) => writeln!(out, "promised SASS: ok ({} checks)", expected.len())?,
                Err(mismatch) => {
                    writeln!(out, "promised SASS: VIOLATED: {mismatch}")?;
                    return Err(Failure::SassViolated(format!(
                        "{name}'s SASS for {} breaks its promise: {mismatch}",
                        arch.name()
                    )));
                }
            }
            Ok(())
        }
        Command::Diff { spec_a, spec_b } => {
            let a = emit(&validate(&spec_a)?);
            let b = emit(&validate(&spec_b)?);
            let diff = similar::TextDiff::from_lines(a.ptx(), b.ptx());
            write!(
                out,
                "{}",
                diff.unified_diff()
                    .context_radius(3)
                    .header(a.kernel_name(), b.kernel_name())
            )?;
            Ok(())
        }
        Command::Pick {
            shape,
            arch,
            dtype,
            out: out_type,
            layout,
            lds,
            address_align,
            sms,
            set,
        } => pick(
            &mut out,
            &shape,
            &arch,
            &dtype,
            out_type.as_deref(),
            layout.as_deref(),
            lds.as_deref(),
            address_align,
            sms,
            set.as_deref(),
        ),
        Command::Catalog => catalog_listing(&mut out),
    }
}

/// `gemm-codegen catalog`: the named specs, the fp8 ones, then the kernel sets with their
/// members, in one name column as wide as the longest name.
fn catalog_listing(out: &mut impl Write) -> Result<(), Failure> {
    use gemm_codegen::pick::sets::SETS;
    let width = CATALOG
        .iter()
        .chain(catalog::FP8)
        .map(|entry| entry.name.len())
        .chain(SETS.iter().map(|set| set.name.len()))
        .chain(
            SETS.iter()
                .flat_map(|set| set.members)
                .map(|member| "  ".len() + member.name.len()),
        )
        .max()
        .unwrap_or(0);
    let entries = |out: &mut dyn Write, entries: &[catalog::CatalogSpec]| {
        entries.iter().try_for_each(|entry| {
            writeln!(out, "{:<width$} {}", entry.name, entry.summary)?;
            writeln!(out, "{:<width$} {}", "", entry.spec)
        })
    };
    entries(out, CATALOG)?;
    writeln!(
        out,
        "\nfp8 kernels (e4m3 operands: load them as GemmKernel<E4m3, _>):"
    )?;
    entries(out, catalog::FP8)?;
    writeln!(
        out,
        "\nkernel sets (`gemm-codegen pick --set NAME`), each in every layout:"
    )?;
    for set in SETS {
        writeln!(out, "{:<width$} {}", set.name, set.about)?;
        for member in set.members {
            let plain_only = if member.fuses {
                ""
            } else {
                " (no fused epilogue: it would spill)"
            };
            writeln!(
                out,
                "  {:<member_width$} {}{plain_only}: {}",
                member.name,
                member.role,
                member.body,
                member_width = width - 2
            )?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ptx_compiles_forward_and_an_a_target_to_itself() {
        assert!(compiles_forward(Arch::Sm80, Arch::Sm90));
        assert!(compiles_forward(Arch::Sm86, Arch::Sm89));
        assert!(compiles_forward(Arch::Sm90, Arch::Sm90a));
        assert!(!compiles_forward(Arch::Sm86, Arch::Sm80));
        assert!(!compiles_forward(Arch::Sm90, Arch::Sm89));
        assert!(!compiles_forward(Arch::Sm90a, Arch::Sm90));
        assert!(compiles_forward(Arch::Sm90a, Arch::Sm90a));
    }
}
