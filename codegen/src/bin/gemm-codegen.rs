//! `gemm-codegen`: emit, check, explain, disassemble and compare gemm-dsl kernels.
//!
//! SPEC arguments are the body of `gemm! { .. }` as one string, `@FILE` to read it from a
//! file, or the name of a catalog spec. Exit codes: 0 success, 1 I/O or tool failure (or, for
//! `sass`, SASS that breaks the spec's promise), 2 invalid spec (or bad arguments),
//! 3 ptxas/nvdisasm not installed.

use clap::{Parser, Subcommand};
use gemm_codegen::catalog::{self, CATALOG, DEFAULT_SPEC};
use gemm_codegen::sass::{self, SassError, SassReport};
use gemm_codegen::{emit, emit_math_only, explain::explain};
use gemm_dsl::{Arch, ValidSpec};
use std::io::{IsTerminal, Write};
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "gemm-codegen",
    version,
    about = "Generate and inspect gemm-dsl GEMM kernels",
    after_help = "SPEC is one of:\n  \
      - spec text: the body of `gemm! { .. }`, e.g. 'name: k, arch: sm_80, tile: 128x128x8'\n  \
      - @FILE: the same text read from a file\n  \
      - a catalog name, e.g. simt_128x128x8_cp2 (`gemm-codegen catalog` lists them)\n\n\
      Keys and values: the gemm-dsl crate docs (gemm-dsl/src/lib.rs)."
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
    Check { spec: String },
    /// Shared-memory ledger, register budget (with ptxas's numbers), occupancy, pipeline
    /// timeline and bank conflicts.
    Explain { spec: String },
    /// Assemble with ptxas, disassemble with nvdisasm, highlight the path-proving opcodes.
    Sass {
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
    Diff { spec_a: String, spec_b: String },
    /// List the named specs.
    Catalog,
}

/// Why the command failed, mapped to the exit code.
enum Failure {
    Io(String),
    /// The SASS lacks what the spec promises (or has what it rules out).
    SassViolated(String),
    InvalidSpec(String),
    ToolsMissing(String),
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
        let closest = CATALOG
            .iter()
            .map(|entry| {
                (
                    gemm_dsl::parse::edit_distance(argument, entry.name),
                    entry.name,
                )
            })
            .min();
        let help = match closest {
            Some((distance, name)) if distance <= 3 => format!("did you mean `{name}`?"),
            _ => "see `gemm-codegen catalog` for the names, or write `key: value, ...`".into(),
        };
        return Err(Failure::InvalidSpec(format!(
            "error: `{argument}` is no catalog spec (and a spec is `key: value` pairs)\n  = help: {help}\n"
        )));
    }
    Ok((argument.to_string(), "<spec>".to_string()))
}

fn validate(argument: &str) -> Result<ValidSpec, Failure> {
    let (text, origin) = spec_source(argument)?;
    gemm_dsl::check_str(&text).map_err(|errors| Failure::InvalidSpec(errors.render(&text, &origin)))
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
                        Failure::InvalidSpec(format!(
                            "error: no catalog spec named `{name}` (see `gemm-codegen catalog`)\n"
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
                Err(SassError::ToolMissing { tool }) => explain(
                    &valid,
                    Err(&format!("{tool} not installed: {}", sass::INSTALL_HINT)),
                ),
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
        Command::Catalog => {
            for entry in CATALOG {
                writeln!(out, "{:<28} {}", entry.name, entry.summary)?;
                writeln!(out, "{:<28} {}", "", entry.spec)?;
            }
            Ok(())
        }
    }
}
