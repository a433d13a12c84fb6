//! Tuning caches as `gemm-bench` writes and inspects them: the entries of a tuning run
//! (`--tune-out`, merged into the file by [`TuneFile::merge`]), and what `gemm-bench cache
//! show|prune` makes of a file. None of it needs a GPU.
//!
//! An entry counts for a [`Matmul`](gemm_runtime::Matmul) only where its kernel is a member
//! of the set in hand with the same spec hash. Checked against this build's kernel sets, an
//! entry is current, stale (the member's spec changed since it was measured), of a kernel no
//! set has, or one no problem can match ([`TuneEntry::defect`]).

use gemm_dsl::pick::sets::{self, KernelSet};
use gemm_dsl::pick::Problem;
use gemm_dsl::DType;
use gemm_runtime::tune::{
    spec_hash, stride_align, DeviceKey, MergeCounts, TuneEntry, TuneFile, FORMAT,
};
use std::collections::{BTreeMap, HashMap};
use std::fmt::{self, Write as _};
use std::fs::{self, File};
use std::io::{BufWriter, Write as _};
use std::path::{Path, PathBuf};

/// Each member of `set` for these element types, in every layout it takes: its kernel name
/// and the hash of its validated spec text, which a cache entry names it by.
pub fn member_hashes(set: &KernelSet, dtype: DType, out: DType) -> HashMap<String, String> {
    set.specs(dtype, out)
        .iter()
        .filter_map(|text| {
            let valid = gemm_dsl::check_str(text).ok()?;
            Some((
                valid.spec.name.clone(),
                spec_hash(&valid.spec.to_spec_text()),
            ))
        })
        .collect()
}

/// What a tuning run of one kernel set, for one pair of element types, writes: per problem,
/// the member that measured fastest.
#[derive(Clone, Debug)]
pub struct TuneRun {
    device: DeviceKey,
    dtype: DType,
    out: DType,
    /// Kernel name to spec hash, every member in every layout.
    hashes: HashMap<String, String>,
}

impl TuneRun {
    pub fn new(device: DeviceKey, set: &KernelSet, dtype: DType, out: DType) -> TuneRun {
        TuneRun {
            device,
            dtype,
            out,
            hashes: member_hashes(set, dtype, out),
        }
    }

    /// The cache entry for `problem` (its layout, batch and leading dimensions as measured)
    /// whose fastest kernel was `kernel`, at `tflops` and `ratio_to_cublas`; `None` where
    /// `kernel` is not a member of the set.
    pub fn entry(
        &self,
        problem: &Problem,
        kernel: &str,
        tflops: f64,
        ratio_to_cublas: f64,
    ) -> Option<TuneEntry> {
        Some(TuneEntry {
            device: self.device.clone(),
            dtype: self.dtype.name().to_string(),
            out: self.out.name().to_string(),
            layout: problem.layout.name().to_string(),
            m: problem.m,
            n: problem.n,
            k: problem.k,
            batch: problem.batch,
            stride_align: stride_align(problem, self.dtype.size_bytes(), self.out.size_bytes()),
            kernel: kernel.to_string(),
            spec_hash: self.hashes.get(kernel)?.clone(),
            tflops,
            ratio_to_cublas,
        })
    }
}

/// A tuning run's entries that did not reach their cache, and where they are instead.
#[derive(Debug)]
pub struct UnmergedRun {
    /// Why the merge failed.
    pub error: gemm_runtime::Error,
    pub cache: PathBuf,
    pub entries: usize,
    /// The file of their own the entries were written to, if one could be.
    pub saved: Option<PathBuf>,
}

impl fmt::Display for UnmergedRun {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.saved {
            Some(saved) => write!(
                f,
                "{}\nthe run's {} entries are in {}: `gemm-bench cache merge {} {}` merges them",
                self.error,
                self.entries,
                saved.display(),
                self.cache.display(),
                saved.display()
            ),
            None => write!(
                f,
                "{}\nand the run's {} entries could not be saved elsewhere",
                self.error, self.entries
            ),
        }
    }
}

/// Merges a tuning run's entries into the cache at `path` ([`TuneFile::merge`]). Where the
/// merge fails (the file was damaged or made read-only since the run began, the disk filled),
/// the entries go to a file of their own, `FILE.run-PID.json` beside the cache or else in the
/// temporary directory, so that `gemm-bench cache merge` finishes the job instead of the
/// minutes of measuring being spent again.
pub fn merge_run(path: &Path, entries: Vec<TuneEntry>) -> Result<MergeCounts, Box<UnmergedRun>> {
    let run = TuneFile::new(entries);
    let error = match TuneFile::update(path, |file| file.merge_entries(run.entries.clone())) {
        Ok(counts) => return Ok(counts),
        Err(error) => error,
    };
    let name = format!(
        "{}.run-{}.json",
        path.file_name()
            .map_or_else(|| "tune".into(), |name| name.to_string_lossy()),
        std::process::id()
    );
    let saved = [path.with_file_name(&name), std::env::temp_dir().join(&name)]
        .into_iter()
        .find(|candidate| save_new(candidate, &run));
    Err(Box::new(UnmergedRun {
        error,
        cache: path.to_path_buf(),
        entries: run.entries.len(),
        saved,
    }))
}

/// Writes `file` to a new file at `path` (never over another); whether it is all there.
fn save_new(path: &Path, file: &TuneFile) -> bool {
    let Ok(mut out) = File::create_new(path) else {
        return false;
    };
    let written = (|| {
        let mut buffered = BufWriter::new(&mut out);
        file.write_to(&mut buffered)?;
        buffered.flush()?;
        drop(buffered);
        out.sync_all()
    })();
    if written.is_err() {
        // Half a file would pass for the run's entries.
        let _ = fs::remove_file(path);
    }
    written.is_ok()
}

/// An entry checked against this build's kernel sets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EntryStatus {
    /// A set member of that name has that spec hash: a `Matmul` over the set uses it.
    Current,
    /// A set member has that name, but its spec changed since the entry was measured: a
    /// `Matmul` ignores the entry.
    Stale,
    /// No built-in set has a kernel of that name (for those element types): a retired
    /// member, or a kernel of the caller's own set, which this build cannot tell apart.
    UnknownKernel,
    /// No problem can match it ([`TuneEntry::defect`]).
    Defect(String),
}

impl EntryStatus {
    /// Whether a `Matmul` of this build could use the entry.
    pub fn usable(&self) -> bool {
        *self == EntryStatus::Current
    }

    fn word(&self) -> String {
        match self {
            EntryStatus::Current => "current".to_string(),
            EntryStatus::Stale => "stale (the spec changed)".to_string(),
            EntryStatus::UnknownKernel => "unknown kernel (in no built-in set)".to_string(),
            EntryStatus::Defect(defect) => format!("matches no problem: {defect}"),
        }
    }
}

/// The kernels this build's sets have, per pair of element types, filled in as entries ask.
#[derive(Debug, Default)]
pub struct KnownKernels {
    hashes: HashMap<(String, String), HashMap<String, String>>,
}

impl KnownKernels {
    pub fn status(&mut self, entry: &TuneEntry) -> EntryStatus {
        if let Some(defect) = entry.defect() {
            return EntryStatus::Defect(defect);
        }
        let hashes = self
            .hashes
            .entry((entry.dtype.clone(), entry.out.clone()))
            .or_insert_with(|| {
                let named = |name: &str| DType::ALL.into_iter().find(|d| d.name() == name);
                let (Some(dtype), Some(out)) = (named(&entry.dtype), named(&entry.out)) else {
                    return HashMap::new();
                };
                sets::SETS
                    .iter()
                    .filter(|set| set.dtypes.contains(&dtype))
                    .flat_map(|set| member_hashes(set, dtype, out))
                    .collect()
            });
        match hashes.get(&entry.kernel) {
            Some(hash) if *hash == entry.spec_hash => EntryStatus::Current,
            Some(_) => EntryStatus::Stale,
            None => EntryStatus::UnknownKernel,
        }
    }
}

/// `gemm-bench cache show`: the file's entries per device, each with its status, then the
/// entries that do not parse. `summary` leaves out the entry lines.
pub fn show(file: &TuneFile, known: &mut KnownKernels, summary: bool) -> String {
    let mut by_device: BTreeMap<&DeviceKey, Vec<(&TuneEntry, EntryStatus)>> = BTreeMap::new();
    for entry in &file.entries {
        by_device
            .entry(&entry.device)
            .or_default()
            .push((entry, known.status(entry)));
    }
    let mut text = format!(
        "{} in {} (format {FORMAT})\n",
        count(
            file.entries.len() + file.malformed().len(),
            "entry",
            "entries"
        ),
        count(by_device.len(), "device", "devices"),
    );
    for (device, mut entries) in by_device {
        let mut statuses: BTreeMap<&str, usize> = BTreeMap::new();
        for (_, status) in &entries {
            *statuses
                .entry(match status {
                    EntryStatus::Current => "current",
                    EntryStatus::Stale => "stale",
                    EntryStatus::UnknownKernel => "unknown kernel",
                    EntryStatus::Defect(_) => "matching no problem",
                })
                .or_default() += 1;
        }
        let statuses: Vec<String> = statuses
            .into_iter()
            .map(|(status, n)| format!("{n} {status}"))
            .collect();
        let _ = writeln!(
            text,
            "\n{device}: {} ({})",
            count(entries.len(), "entry", "entries"),
            statuses.join(", ")
        );
        if summary {
            continue;
        }
        entries.sort_by(|(a, _), (b, _)| {
            (
                &a.dtype,
                &a.out,
                &a.layout,
                a.batch,
                a.m,
                a.n,
                a.k,
                a.stride_align,
            )
                .cmp(&(
                    &b.dtype,
                    &b.out,
                    &b.layout,
                    b.batch,
                    b.m,
                    b.n,
                    b.k,
                    b.stride_align,
                ))
        });
        for (entry, status) in entries {
            let _ = writeln!(
                text,
                "  {:<44} {:<40} {:>8.1} TFLOP/s {:>6.3} x cuBLAS  {}",
                entry.problem_text(),
                entry.kernel,
                entry.tflops,
                entry.ratio_to_cublas,
                status.word()
            );
        }
    }
    if !file.malformed().is_empty() {
        let _ = writeln!(
            text,
            "\n{} not format {FORMAT}'s (kept by merges; `cache prune` drops them):",
            count(file.malformed().len(), "entry", "entries")
        );
        for malformed in file.malformed() {
            let _ = writeln!(text, "  {}", malformed.reason);
        }
    }
    text
}

/// What a prune drops besides the entries no `Matmul` can use.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PruneOptions {
    /// The entries of every device whose description ([`DeviceKey`]'s `Display`: name, SMs,
    /// driver) contains one of these.
    pub drop_devices: Vec<String>,
    /// The entries of kernels no built-in set has. Off by default: such an entry may be a
    /// kernel of the caller's own set (`gemm_set!`), which a `Matmul` over that set uses.
    pub drop_unknown_kernels: bool,
}

/// What a prune dropped, by cause, and kept.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Pruned {
    pub stale: usize,
    /// Entries of kernels no built-in set has, dropped ([`PruneOptions::drop_unknown_kernels`]).
    pub unknown_kernel: usize,
    pub matching_no_problem: usize,
    pub malformed: usize,
    /// Of the devices asked to be dropped.
    pub of_dropped_devices: usize,
    /// Every entry kept, `unknown_kernel_kept` of them entries of kernels no built-in set has.
    pub kept: usize,
    pub unknown_kernel_kept: usize,
}

impl Pruned {
    pub fn dropped(&self) -> usize {
        self.stale
            + self.unknown_kernel
            + self.matching_no_problem
            + self.malformed
            + self.of_dropped_devices
    }
}

impl fmt::Display for Pruned {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} dropped ({} stale, {} of unknown kernels, {} matching no problem, {} not format {FORMAT}'s, {} of dropped devices), {} kept",
            self.dropped(),
            self.stale,
            self.unknown_kernel,
            self.matching_no_problem,
            self.malformed,
            self.of_dropped_devices,
            self.kept
        )?;
        if self.unknown_kernel_kept > 0 {
            write!(
                f,
                " ({} of kernels in no built-in set, kept: --drop-unknown-kernels drops them)",
                self.unknown_kernel_kept
            )?;
        }
        Ok(())
    }
}

/// `gemm-bench cache prune`: drops every entry no `Matmul` of this build can use (stale,
/// matching no problem, not parsing), and what `options` asks for besides.
pub fn prune(file: &mut TuneFile, known: &mut KnownKernels, options: &PruneOptions) -> Pruned {
    let mut pruned = Pruned {
        malformed: file.drop_malformed(),
        ..Pruned::default()
    };
    file.entries.retain(|entry| {
        let device = entry.device.to_string();
        if options
            .drop_devices
            .iter()
            .any(|text| device.contains(text.as_str()))
        {
            pruned.of_dropped_devices += 1;
            return false;
        }
        match known.status(entry) {
            EntryStatus::Current => {
                pruned.kept += 1;
                return true;
            }
            EntryStatus::Stale => pruned.stale += 1,
            EntryStatus::UnknownKernel if !options.drop_unknown_kernels => {
                pruned.kept += 1;
                pruned.unknown_kernel_kept += 1;
                return true;
            }
            EntryStatus::UnknownKernel => pruned.unknown_kernel += 1,
            EntryStatus::Defect(_) => pruned.matching_no_problem += 1,
        }
        false
    });
    pruned
}

/// `1 entry`, `2 entries`.
fn count(n: usize, one: &str, many: &str) -> String {
    if n == 1 {
        format!("1 {one}")
    } else {
        format!("{n} {many}")
    }
}
