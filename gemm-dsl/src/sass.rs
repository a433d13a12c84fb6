//! The offline SASS route: assemble PTX with ptxas, disassemble the cubin with nvdisasm, and
//! count opcodes into a [`SassReport`] that checks what a spec promises. The runtime builds the
//! same report from the driver's own JIT output.
//!
//! Tools are found, in order, through `GEMM_DSL_PTXAS` / `GEMM_DSL_NVDISASM` (paths to the
//! executables), `GEMM_DSL_TOOLS` (a folder with `bin/`; when set, the only place searched), the project's `tools/bin` (filled by
//! `scripts/install-tools`), `PATH`, and `/usr/local/cuda/bin`.

use crate::abi::{Opcode, SassCheck};
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};

/// How to get the tools, said once wherever they are missing.
pub const INSTALL_HINT: &str =
    "run `scripts/install-tools` (downloads NVIDIA's ptxas and nvdisasm wheels from PyPI into tools/), \
     or set GEMM_DSL_TOOLS to a folder holding bin/ptxas and bin/nvdisasm";

#[derive(Debug)]
pub enum SassError {
    /// A tool is not installed where the lookup points.
    ToolMissing {
        tool: &'static str,
        looked: ToolLookup,
    },
    /// A tool was found but could not be started (not executable, say).
    ToolUnrunnable {
        tool: &'static str,
        path: PathBuf,
        error: std::io::Error,
    },
    /// A tool ran and failed.
    ToolFailed {
        tool: &'static str,
        log: String,
    },
    Io(std::io::Error),
}

/// Where [`find_tool`] looked for a tool: what a missing tool's message names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ToolLookup {
    /// The tool's own variable (`GEMM_DSL_PTXAS`, `GEMM_DSL_NVDISASM`) named this path.
    Variable { variable: String, path: PathBuf },
    /// `GEMM_DSL_TOOLS` named this folder, the only place searched when it is set.
    ToolsFolder(PathBuf),
    /// The default places: the project's `tools/bin`, `PATH`, `/usr/local/cuda/bin`.
    DefaultPlaces,
}

impl fmt::Display for SassError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SassError::ToolMissing { tool, looked } => match looked {
                ToolLookup::Variable { variable, path } => write!(
                    f,
                    "{tool} not found: {variable} is `{}`, which is no file (set it to the \
                     {tool} executable, or unset it to search the default places); {INSTALL_HINT}",
                    path.display()
                ),
                ToolLookup::ToolsFolder(folder) => write!(
                    f,
                    "{tool} not found: GEMM_DSL_TOOLS is `{}`, which has no bin/{tool} (when \
                     set, it is the only place searched); {INSTALL_HINT}",
                    folder.display()
                ),
                ToolLookup::DefaultPlaces => write!(
                    f,
                    "{tool} not found in tools/bin, PATH or /usr/local/cuda/bin: {INSTALL_HINT}"
                ),
            },
            SassError::ToolUnrunnable { tool, path, error } => {
                write!(f, "cannot run {tool} at `{}`: {error}", path.display())
            }
            SassError::ToolFailed { tool, log } => write!(f, "{tool} failed:\n{log}"),
            SassError::Io(error) => write!(f, "{error}"),
        }
    }
}

impl std::error::Error for SassError {}

impl From<std::io::Error> for SassError {
    fn from(error: std::io::Error) -> Self {
        SassError::Io(error)
    }
}

/// Finds an NVIDIA tool (`ptxas` or `nvdisasm`) in the places the module docs list.
pub fn find_tool(tool: &'static str) -> Result<PathBuf, SassError> {
    find_tool_with(tool, |variable| std::env::var_os(variable))
}

/// [`find_tool`] with the environment read through `var`.
fn find_tool_with(
    tool: &'static str,
    var: impl Fn(&str) -> Option<std::ffi::OsString>,
) -> Result<PathBuf, SassError> {
    let variable = format!("GEMM_DSL_{}", tool.to_uppercase());
    // A path the user named is checked here, so a wrong one is reported as such rather than
    // as the bare "No such file or directory" of starting it.
    if let Some(path) = var(&variable).map(PathBuf::from) {
        return if path.is_file() {
            Ok(path)
        } else {
            Err(SassError::ToolMissing {
                tool,
                looked: ToolLookup::Variable { variable, path },
            })
        };
    }
    // An explicit tools folder is authoritative: nothing else is searched.
    if let Some(folder) = var("GEMM_DSL_TOOLS").map(PathBuf::from) {
        let candidate = folder.join("bin").join(tool);
        return if candidate.is_file() {
            Ok(candidate)
        } else {
            Err(SassError::ToolMissing {
                tool,
                looked: ToolLookup::ToolsFolder(folder),
            })
        };
    }
    let mut folders: Vec<PathBuf> = Vec::new();
    folders.push(Path::new(env!("CARGO_MANIFEST_DIR")).join("../tools/bin"));
    if let Some(path) = var("PATH") {
        folders.extend(std::env::split_paths(&path));
    }
    folders.push(PathBuf::from("/usr/local/cuda/bin"));
    folders
        .into_iter()
        .map(|folder| folder.join(tool))
        .find(|candidate| candidate.is_file())
        .ok_or(SassError::ToolMissing {
            tool,
            looked: ToolLookup::DefaultPlaces,
        })
}

/// Runs a found tool; failing to start it names the tool and its path.
fn run_tool(
    tool: &'static str,
    path: &Path,
    command: &mut Command,
) -> Result<std::process::Output, SassError> {
    command.output().map_err(|error| SassError::ToolUnrunnable {
        tool,
        path: path.to_path_buf(),
        error,
    })
}

/// What `ptxas -v` says about a kernel's resources.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PtxasResources {
    pub registers: u32,
    pub spill_store_bytes: u32,
    pub spill_load_bytes: u32,
    pub stack_frame_bytes: u32,
    /// Every `ptxas` line that is a warning or a performance note (e.g. serialized wgmma).
    pub warnings: Vec<String>,
}

impl PtxasResources {
    /// Reads the `info` and `warning` lines of `ptxas -v`.
    pub fn parse(log: &str) -> PtxasResources {
        let mut resources = PtxasResources::default();
        let number_before = |line: &str, marker: &str| -> Option<u32> {
            let head = &line[..line.find(marker)?];
            head.split_whitespace().last()?.parse().ok()
        };
        for line in log.lines() {
            if let Some(n) = number_before(line, " registers") {
                resources.registers = n;
            }
            if let Some(n) = number_before(line, " bytes stack frame") {
                resources.stack_frame_bytes = n;
            }
            if let Some(n) = number_before(line, " bytes spill stores") {
                resources.spill_store_bytes = n;
            }
            if let Some(n) = number_before(line, " bytes spill loads") {
                resources.spill_load_bytes = n;
            }
            if line.contains("warning") || line.contains("C75") {
                resources.warnings.push(line.trim().to_string());
            }
        }
        resources
    }

    pub fn spills(&self) -> bool {
        self.spill_store_bytes > 0 || self.spill_load_bytes > 0
    }
}

impl fmt::Display for PtxasResources {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} registers, {} B stack, {} B spill stores, {} B spill loads",
            self.registers, self.stack_frame_bytes, self.spill_store_bytes, self.spill_load_bytes
        )?;
        for warning in &self.warnings {
            write!(f, "\n{warning}")?;
        }
        Ok(())
    }
}

/// A cubin and what ptxas said while making it.
#[derive(Clone, Debug)]
pub struct Assembled {
    pub cubin: Vec<u8>,
    pub log: String,
    pub resources: PtxasResources,
}

/// A scratch file path unique to this process and call.
fn scratch(extension: &str) -> PathBuf {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    std::env::temp_dir().join(format!("gemm-dsl-{}-{n}.{extension}", std::process::id()))
}

/// Removes the scratch files when dropped.
struct Scratch(Vec<PathBuf>);

impl Drop for Scratch {
    fn drop(&mut self) {
        for path in &self.0 {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// Assembles PTX for `arch` (e.g. `sm_90a`) with `ptxas -v`.
pub fn assemble(ptx: &str, arch: &str) -> Result<Assembled, SassError> {
    let ptxas = find_tool("ptxas")?;
    let (ptx_path, cubin_path) = (scratch("ptx"), scratch("cubin"));
    let _cleanup = Scratch(vec![ptx_path.clone(), cubin_path.clone()]);
    std::fs::write(&ptx_path, ptx)?;
    let output = run_tool(
        "ptxas",
        &ptxas,
        Command::new(&ptxas)
            .arg(format!("-arch={arch}"))
            .arg("-v")
            .arg(&ptx_path)
            .arg("-o")
            .arg(&cubin_path),
    )?;
    let log = String::from_utf8_lossy(&output.stderr).into_owned()
        + &String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        return Err(SassError::ToolFailed { tool: "ptxas", log });
    }
    Ok(Assembled {
        cubin: std::fs::read(&cubin_path)?,
        resources: PtxasResources::parse(&log),
        log,
    })
}

/// Disassembles a cubin's code sections with `nvdisasm -c`.
pub fn disassemble(cubin: &[u8]) -> Result<String, SassError> {
    let nvdisasm = find_tool("nvdisasm")?;
    let path = scratch("cubin");
    let _cleanup = Scratch(vec![path.clone()]);
    std::fs::write(&path, cubin)?;
    let output = run_tool(
        "nvdisasm",
        &nvdisasm,
        Command::new(&nvdisasm).arg("-c").arg(&path),
    )?;
    if !output.status.success() {
        return Err(SassError::ToolFailed {
            tool: "nvdisasm",
            log: String::from_utf8_lossy(&output.stderr).into_owned(),
        });
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// One SASS instruction as nvdisasm prints it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Instruction {
    pub offset: u32,
    /// Opcode with modifiers, e.g. `LDGSTS.E.BYPASS.128`.
    pub opcode: String,
    /// The whole instruction text, predicate and operands included.
    pub text: String,
}

impl Instruction {
    /// The opcode without modifiers, e.g. `LDGSTS`.
    pub fn mnemonic(&self) -> &str {
        self.opcode.split('.').next().unwrap_or(&self.opcode)
    }

    /// Runs under a predicate (`@P0 ...`, `@!P1 ...`; `@PT` is always true, so not counted).
    pub fn predicated(&self) -> bool {
        self.text.starts_with('@') && !self.text.starts_with("@PT ")
    }

    /// The label a `BRA` jumps to, e.g. `.L_x_3`.
    pub fn branch_target(&self) -> Option<&str> {
        if self.mnemonic() != "BRA" {
            return None;
        }
        let start = self.text.find("`(")? + 2;
        let end = start + self.text[start..].find(')')?;
        Some(&self.text[start..end])
    }
}

/// The SASS of a kernel, counted by mnemonic.
#[derive(Clone, Debug, Default)]
pub struct SassReport {
    pub instructions: Vec<Instruction>,
    pub counts: BTreeMap<String, usize>,
    /// Each branch label (`.L_x_3`) and the index of the instruction it names.
    pub labels: BTreeMap<String, usize>,
    /// Present when the report came from ptxas (offline route).
    pub resources: Option<PtxasResources>,
}

/// A promise the SASS breaks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SassViolation {
    pub check: SassCheck,
    pub count: usize,
}

impl fmt::Display for SassViolation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.check {
            SassCheck::Present(op) => {
                write!(f, "expected {} in the SASS, found none", op.mnemonic())
            }
            SassCheck::Absent(op) => write!(
                f,
                "expected no {} in the SASS, found {}",
                op.mnemonic(),
                self.count
            ),
            SassCheck::PresentVariant(variant) => {
                write!(f, "expected {variant} in the SASS, found none")
            }
            SassCheck::PresentExact(opcode) => {
                write!(f, "expected exactly {opcode} in the SASS, found none")
            }
        }
    }
}

/// Every broken promise of one kernel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SassMismatch(pub Vec<SassViolation>);

impl fmt::Display for SassMismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let lines: Vec<String> = self.0.iter().map(ToString::to_string).collect();
        f.write_str(&lines.join("; "))
    }
}

impl std::error::Error for SassMismatch {}

impl SassReport {
    /// Parses `nvdisasm` output: lines of the form `/*0040*/  @P0 LDGSTS.E.128 [R1], [R2.64] ;`.
    pub fn parse(sass: &str) -> SassReport {
        let mut report = SassReport::default();
        for line in sass.lines() {
            if let Some(label) = line
                .trim()
                .strip_suffix(':')
                .filter(|l| l.starts_with(".L"))
            {
                report
                    .labels
                    .insert(label.to_string(), report.instructions.len());
                continue;
            }
            let Some(rest) = line.trim_start().strip_prefix("/*") else {
                continue;
            };
            let Some((offset, text)) = rest.split_once("*/") else {
                continue;
            };
            let Ok(offset) = u32::from_str_radix(offset, 16) else {
                continue;
            };
            let text = text
                .trim()
                .trim_start_matches('{')
                .trim()
                .trim_end_matches(';')
                .trim();
            let mut words = text.split_whitespace();
            let Some(mut opcode) = words.next() else {
                continue;
            };
            if opcode.starts_with('@') {
                let Some(next) = words.next() else { continue };
                opcode = next;
            }
            let instruction = Instruction {
                offset,
                opcode: opcode.to_string(),
                text: text.to_string(),
            };
            *report
                .counts
                .entry(instruction.mnemonic().to_string())
                .or_default() += 1;
            report.instructions.push(instruction);
        }
        report
    }

    /// Assembles and disassembles PTX: the offline route.
    pub fn from_ptx(ptx: &str, arch: &str) -> Result<SassReport, SassError> {
        let assembled = assemble(ptx, arch)?;
        let mut report = SassReport::parse(&disassemble(&assembled.cubin)?);
        report.resources = Some(assembled.resources);
        Ok(report)
    }

    pub fn count(&self, opcode: Opcode) -> usize {
        self.counts.get(opcode.mnemonic()).copied().unwrap_or(0)
    }

    /// Instructions whose opcode with modifiers is `variant` or starts with `variant.`, e.g.
    /// `HMMA.16816.F32` counts `HMMA.16816.F32` and `HMMA.16816.F32.BF16`.
    pub fn count_variant(&self, variant: &str) -> usize {
        self.instructions
            .iter()
            .filter(|i| {
                i.opcode == variant
                    || i.opcode
                        .strip_prefix(variant)
                        .is_some_and(|rest| rest.starts_with('.'))
            })
            .count()
    }

    /// Instructions whose opcode with modifiers is exactly `opcode`.
    pub fn count_exact(&self, opcode: &str) -> usize {
        self.instructions
            .iter()
            .filter(|i| i.opcode == opcode)
            .count()
    }

    /// Checks every promise; all violations are reported together.
    pub fn require(&self, checks: &[SassCheck]) -> Result<(), SassMismatch> {
        let violations: Vec<SassViolation> = checks
            .iter()
            .filter_map(|&check| {
                let (count, want_present) = match check {
                    SassCheck::Present(op) => (self.count(op), true),
                    SassCheck::Absent(op) => (self.count(op), false),
                    SassCheck::PresentVariant(variant) => (self.count_variant(variant), true),
                    SassCheck::PresentExact(opcode) => (self.count_exact(opcode), true),
                };
                ((count > 0) != want_present).then_some(SassViolation { check, count })
            })
            .collect();
        if violations.is_empty() {
            Ok(())
        } else {
            Err(SassMismatch(violations))
        }
    }

    /// The instructions one trip of the kernel's main loop runs when every branch inside it
    /// takes the shorter way: the steady state of a kernel whose rare cases (edge tiles)
    /// branch out of line. The main loop is the backward branch's body that holds the most
    /// `math` instructions. `None` if the SASS has no loop.
    pub fn steady_state_path(&self, math: Opcode) -> Option<Vec<&Instruction>> {
        let target = |i: &Instruction| i.branch_target().and_then(|l| self.labels.get(l).copied());
        let (head, back) = self
            .instructions
            .iter()
            .enumerate()
            .filter_map(|(end, i)| {
                target(i)
                    .filter(|&head| head <= end)
                    .map(|head| (head, end))
            })
            .max_by_key(|&(head, end)| {
                let body = &self.instructions[head..=end];
                (
                    body.iter()
                        .filter(|i| i.mnemonic() == math.mnemonic())
                        .count(),
                    head,
                )
            })?;
        // Shortest path from the head to the backward branch over forward edges in the body:
        // fall-through unless an unconditional branch, and a branch's target.
        let mut distance = vec![usize::MAX; back + 1];
        let mut previous = vec![usize::MAX; back + 1];
        distance[head] = 1;
        for at in head..back {
            if distance[at] == usize::MAX {
                continue;
            }
            let instruction = &self.instructions[at];
            let unconditional = instruction.mnemonic() == "BRA" && !instruction.predicated();
            let mut next = Vec::new();
            if !unconditional {
                next.push(at + 1);
            }
            if let Some(to) = target(instruction).filter(|&to| to > at && to <= back) {
                next.push(to);
            }
            for to in next {
                if distance[at] + 1 < distance[to] {
                    distance[to] = distance[at] + 1;
                    previous[to] = at;
                }
            }
        }
        if distance[back] == usize::MAX {
            return None;
        }
        let mut path = vec![&self.instructions[back]];
        let mut at = back;
        while at != head {
            at = previous[at];
            path.push(&self.instructions[at]);
        }
        path.reverse();
        Some(path)
    }

    /// The SASS text with path-proving opcodes marked, for the CLI.
    pub fn highlighted(&self, color: bool) -> String {
        let mut out = String::new();
        for instruction in &self.instructions {
            let mark = HIGHLIGHT
                .iter()
                .find(|op| op.mnemonic() == instruction.mnemonic());
            let line = format!("/*{:04x}*/  {}", instruction.offset, instruction.text);
            match (mark, color) {
                (Some(op), true) => {
                    let code = if matches!(op, Opcode::Ldl | Opcode::Stl) {
                        31
                    } else {
                        32
                    };
                    out.push_str(&format!("\x1b[1;{code}m{line}\x1b[0m\n"));
                }
                (Some(_), false) => out.push_str(&format!("{line}    <==\n")),
                (None, _) => out.push_str(&format!("{line}\n")),
            }
        }
        out
    }

    /// Counts of the highlighted opcodes and the total, one line each.
    pub fn summary(&self) -> String {
        let mut out = String::new();
        for op in HIGHLIGHT {
            out.push_str(&format!("{:<10} {}\n", op.mnemonic(), self.count(*op)));
        }
        out.push_str(&format!("{:<10} {}\n", "FFMA", self.count(Opcode::Ffma)));
        out.push_str(&format!("{:<10} {}\n", "total", self.instructions.len()));
        out
    }
}

/// The opcodes `gemm-codegen sass` marks: each proves a path (the Hopper family's TMA loads
/// and stores, mbarriers and register split among them) or, LDL/STL, a spill.
pub const HIGHLIGHT: &[Opcode] = &[
    Opcode::Ldgsts,
    Opcode::Hmma,
    Opcode::Hgmma,
    Opcode::Qgmma,
    Opcode::Utmaldg,
    Opcode::Utmastg,
    Opcode::Syncs,
    Opcode::Usetmaxreg,
    Opcode::Ldl,
    Opcode::Stl,
];

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "
        /*0000*/                   MOV R1, c[0x0][0x28] ;
        /*0010*/              @!P0 LDGSTS.E.BYPASS.128 [R5], desc[UR4][R2.64] ;
        /*0020*/                   LDGDEPBAR ;
        /*0030*/                   DEPBAR.LE SB0, 0x0 ;
        /*0040*/                   FFMA R4, R5, R6, R4 ;
        /*0050*/                   EXIT ;
    ";

    #[test]
    fn the_steady_state_path_skips_the_out_of_line_branch() {
        let report = SassReport::parse(
            "
        /*0000*/                   MOV R1, c[0x0][0x28] ;
.L_x_1:
        /*0010*/                   BAR.SYNC.DEFER_BLOCKING 0x0 ;
        /*0020*/               @P1 BRA `(.L_x_2) ;
        /*0030*/               @P0 LDGSTS.E.BYPASS.128 [R5], [R2.64] ;
        /*0040*/                   BRA `(.L_x_3) ;
.L_x_2:
        /*0050*/                   LDGSTS.E.BYPASS.128.ZFILL [R5], [R2.64], P2 ;
        /*0060*/                   IADD3 R2, R2, 0x10, RZ ;
        /*0070*/                   IADD3 R3, R3, 0x10, RZ ;
.L_x_3:
        /*0080*/                   FFMA R4, R5, R6, R4 ;
        /*0090*/               @P3 BRA `(.L_x_1) ;
        /*00a0*/                   EXIT ;
    ",
        );
        assert_eq!(report.labels[".L_x_3"], 8);
        assert_eq!(report.instructions[2].branch_target(), Some(".L_x_2"));
        let path = report.steady_state_path(Opcode::Ffma).unwrap();
        let opcodes: Vec<&str> = path.iter().map(|i| i.opcode.as_str()).collect();
        // The conditional branch falls through to the plain copy; the branch over the
        // out-of-line copy is taken.
        assert_eq!(
            opcodes,
            [
                "BAR.SYNC.DEFER_BLOCKING",
                "BRA",
                "LDGSTS.E.BYPASS.128",
                "BRA",
                "FFMA",
                "BRA"
            ]
        );
        assert_eq!(path.iter().filter(|i| i.predicated()).count(), 3);
        assert!(SassReport::parse(SAMPLE)
            .steady_state_path(Opcode::Ffma)
            .is_none());
    }

    #[test]
    fn checks_opcode_variants() {
        let report = SassReport::parse(
            "/*0000*/  HMMA.16816.F32.BF16 R4, R8, R12, R4 ;\n/*0010*/  LDSM.16.MT88.4 R8, [R2] ;",
        );
        assert_eq!(report.count_variant("HMMA.16816.F32"), 1);
        assert_eq!(report.count_variant("HMMA.16816.F32.BF16"), 1);
        assert_eq!(report.count_variant("HMMA.16816.F32.BF1"), 0);
        assert_eq!(report.count_variant("LDSM.16.M88.4"), 0);
        let mismatch = report
            .require(&[
                SassCheck::PresentVariant("LDSM.16.MT88.4"),
                SassCheck::PresentVariant("HMMA.1688.F32.TF32"),
            ])
            .unwrap_err();
        assert_eq!(
            mismatch.to_string(),
            "expected HMMA.1688.F32.TF32 in the SASS, found none"
        );
    }

    #[test]
    fn an_exact_opcode_is_not_satisfied_by_a_longer_variant() {
        let bf16 = SassReport::parse("/*0000*/  HMMA.16816.F32.BF16 R4, R8, R12, R4 ;");
        let f16 = SassReport::parse("/*0000*/  HMMA.16816.F32 R4, R8, R12, R4 ;");
        let promise = [SassCheck::PresentExact("HMMA.16816.F32")];
        assert_eq!(bf16.count_exact("HMMA.16816.F32"), 0);
        assert_eq!(
            bf16.require(&promise).unwrap_err().to_string(),
            "expected exactly HMMA.16816.F32 in the SASS, found none"
        );
        assert_eq!(f16.count_exact("HMMA.16816.F32"), 1);
        assert!(f16.require(&promise).is_ok());
    }

    #[test]
    fn parses_and_checks_opcodes() {
        let report = SassReport::parse(SAMPLE);
        assert_eq!(report.instructions.len(), 6);
        assert_eq!(report.count(Opcode::Ldgsts), 1);
        assert_eq!(report.instructions[1].opcode, "LDGSTS.E.BYPASS.128");
        assert!(report
            .require(&[
                SassCheck::Present(Opcode::Ldgsts),
                SassCheck::Absent(Opcode::Ldl)
            ])
            .is_ok());
        let mismatch = report
            .require(&[
                SassCheck::Present(Opcode::Hgmma),
                SassCheck::Absent(Opcode::Ffma),
            ])
            .unwrap_err();
        assert_eq!(mismatch.0.len(), 2);
        assert_eq!(
            mismatch.to_string(),
            "expected HGMMA in the SASS, found none; expected no FFMA in the SASS, found 1"
        );
    }

    /// A missing tool's message says where it was looked for, and how to install it.
    #[test]
    fn a_missing_tool_names_the_place_it_was_looked_for() {
        let named = |pairs: &'static [(&'static str, &'static str)]| {
            move |variable: &str| {
                pairs
                    .iter()
                    .find(|(name, _)| *name == variable)
                    .map(|(_, value)| std::ffi::OsString::from(value))
            }
        };
        let error = find_tool_with(
            "ptxas",
            named(&[
                ("GEMM_DSL_PTXAS", "/nonexistent-gemm-dsl/ptxas"),
                ("GEMM_DSL_TOOLS", "/also-unused"),
            ]),
        )
        .unwrap_err();
        let SassError::ToolMissing { tool, looked } = &error else {
            panic!("{error}");
        };
        assert_eq!(*tool, "ptxas");
        assert_eq!(
            *looked,
            ToolLookup::Variable {
                variable: "GEMM_DSL_PTXAS".into(),
                path: PathBuf::from("/nonexistent-gemm-dsl/ptxas"),
            }
        );
        let message = error.to_string();
        for needle in [
            "GEMM_DSL_PTXAS is `/nonexistent-gemm-dsl/ptxas`, which is no file",
            "scripts/install-tools",
        ] {
            assert!(message.contains(needle), "{message}");
        }

        let message = find_tool_with(
            "nvdisasm",
            named(&[("GEMM_DSL_TOOLS", "/nonexistent-gemm-dsl")]),
        )
        .unwrap_err()
        .to_string();
        assert!(
            message.starts_with(
                "nvdisasm not found: GEMM_DSL_TOOLS is `/nonexistent-gemm-dsl`, which has no bin/nvdisasm"
            ),
            "{message}"
        );
    }

    #[test]
    fn reads_ptxas_resources() {
        let log = "ptxas info    : Compiling entry function 'k' for 'sm_80'\n\
                   ptxas info    : Function properties for k\n    \
                   0 bytes stack frame, 8 bytes spill stores, 4 bytes spill loads\n\
                   ptxas info    : Used 134 registers, used 1 barriers, 400 bytes cmem[0]\n";
        let r = PtxasResources::parse(log);
        assert_eq!(r.registers, 134);
        assert_eq!((r.spill_store_bytes, r.spill_load_bytes), (8, 4));
        assert!(r.spills());
    }
}
