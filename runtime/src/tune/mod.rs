//! The tuning cache: which kernel of a set measured fastest per problem, on which device.
//!
//! `gemm-bench --tune-out FILE` (in the `gemm-harness` crate) times every kernel of a set per
//! shape (each checked first) and merges the fastest into the file ([`TuneFile::merge`]); a
//! [`Matmul`](crate::Matmul) reads the file from an explicit path or from
//! `GEMM_DSL_TUNE_CACHE` and trusts an entry only where its device (name, SM count, driver)
//! and the kernel's spec (name and a hash of its text) are the ones in hand. A problem with no
//! entry falls back to the cost model.
//!
//! The cache only makes picks faster, so reading it never stops a program: a missing,
//! unreadable, damaged or foreign file, or one of another format, is reported once on stderr
//! and the model picks ([`CacheReading::Lenient`]), unless strict reading was asked for
//! ([`CacheReading::Strict`], or `GEMM_DSL_TUNE_CACHE_STRICT=1`). Writing is the opposite: a
//! file that cannot be read back as a cache is never replaced, and every write merges under a
//! lock and lands by rename, so a file holds each writer's entries whole (see [`mod@file`]).

use crate::error::Error;
use gemm_dsl::pick::Problem;
use gemm_dsl::{DType, Layout};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::path::Path;
use std::sync::{Mutex, OnceLock};

pub mod file;

pub use file::{MergeCounts, TuneFile};

/// The environment variable a [`Matmul`](crate::Matmul) reads a cache path from.
pub const TUNE_CACHE_VARIABLE: &str = "GEMM_DSL_TUNE_CACHE";

/// The environment variable that makes reading a cache strict: set to anything but `0` (or
/// empty), a cache that cannot be used is an error ([`CacheReading::from_env`]).
pub const TUNE_CACHE_STRICT_VARIABLE: &str = "GEMM_DSL_TUNE_CACHE_STRICT";

/// The version of the file's layout this runtime writes and reads.
pub const FORMAT: u32 = 1;

/// The device a measurement belongs to.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct DeviceKey {
    pub name: String,
    pub sms: u32,
    pub driver: String,
}

impl fmt::Display for DeviceKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} ({} SMs, driver {})",
            self.name, self.sms, self.driver
        )
    }
}

/// One problem's measured best.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TuneEntry {
    pub device: DeviceKey,
    pub dtype: String,
    pub out: String,
    pub layout: String,
    pub m: u32,
    pub n: u32,
    pub k: u32,
    pub batch: u32,
    /// The largest power of two (up to 128) that divides every line's byte stride and the
    /// address every operand starts at.
    pub stride_align: u32,
    /// The fastest kernel's name and the hash of its validated spec text ([`spec_hash`]).
    pub kernel: String,
    pub spec_hash: String,
    /// What it measured, for whoever reads the file.
    pub tflops: f64,
    pub ratio_to_cublas: f64,
}

impl TuneEntry {
    /// Why no problem can ever look this entry up, if none can: a size or batch of 0, an
    /// element type or layout this build does not know, a stride alignment that is not a
    /// power of two up to 128, a spec hash that is not 16 hex digits. Readers skip such
    /// entries; writers keep them (`gemm-bench cache prune` drops them).
    pub fn defect(&self) -> Option<String> {
        if let Some((what, _)) = [("m", self.m), ("n", self.n), ("k", self.k)]
            .into_iter()
            .chain([("batch", self.batch)])
            .find(|&(_, value)| value == 0)
        {
            Some(format!("{what} = 0"))
        } else if dtype_named(&self.dtype).is_none() {
            Some(format!("unknown element type `{}`", self.dtype))
        } else if dtype_named(&self.out).is_none() {
            Some(format!("unknown output type `{}`", self.out))
        } else if layout_named(&self.layout).is_none() {
            Some(format!("unknown layout `{}`", self.layout))
        } else if !self.stride_align.is_power_of_two() || self.stride_align > 128 {
            Some(format!(
                "stride alignment {} is not a power of two up to 128",
                self.stride_align
            ))
        } else if self.spec_hash.len() != 16
            || !self.spec_hash.bytes().all(|b| b.is_ascii_hexdigit())
        {
            Some(format!(
                "spec hash `{}` is not 16 hex digits",
                self.spec_hash
            ))
        } else {
            None
        }
    }

    /// The problem in words: `[Bx]MxNxK layout, dtype->out[, lines aligned to S bytes]`.
    pub fn problem_text(&self) -> String {
        let batch = if self.batch > 1 {
            format!("{}x", self.batch)
        } else {
            String::new()
        };
        let types = if self.dtype == self.out {
            self.dtype.clone()
        } else {
            format!("{}->{}", self.dtype, self.out)
        };
        let lines = if self.stride_align < 128 {
            format!(", lines aligned to {} bytes", self.stride_align)
        } else {
            String::new()
        };
        format!(
            "{batch}{}x{}x{} {}, {types}{lines}",
            self.m, self.n, self.k, self.layout
        )
    }

    /// What a merge replaces an entry by: the measurement of the same problem, element types
    /// and stride alignment on the same device (whichever kernel won); `None` for an entry
    /// naming a type or layout this build does not know, which no measurement replaces.
    pub(crate) fn merge_key(&self) -> Option<(DeviceKey, ProblemKey)> {
        Some((self.device.clone(), ProblemKey::of_entry(self)?))
    }
}

/// What a cache lookup is keyed on besides the device.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct ProblemKey {
    dtype: DType,
    out: DType,
    layout: Layout,
    m: u32,
    n: u32,
    k: u32,
    batch: u32,
    stride_align: u32,
}

impl ProblemKey {
    fn of(problem: &Problem, dtype: DType, out: DType) -> ProblemKey {
        ProblemKey {
            dtype,
            out,
            layout: problem.layout,
            m: problem.m,
            n: problem.n,
            k: problem.k,
            batch: problem.batch,
            stride_align: stride_align(problem, dtype.size_bytes(), out.size_bytes()),
        }
    }

    /// `None` where the entry names a type or layout this build does not know.
    fn of_entry(entry: &TuneEntry) -> Option<ProblemKey> {
        Some(ProblemKey {
            dtype: dtype_named(&entry.dtype)?,
            out: dtype_named(&entry.out)?,
            layout: layout_named(&entry.layout)?,
            m: entry.m,
            n: entry.n,
            k: entry.k,
            batch: entry.batch,
            stride_align: entry.stride_align,
        })
    }
}

/// The largest power of two, up to 128, dividing the byte stride of every operand's lines
/// and the address every operand starts at.
pub fn stride_align(problem: &Problem, input_bytes: u32, output_bytes: u32) -> u32 {
    [
        u64::from(problem.lda) * u64::from(input_bytes),
        u64::from(problem.ldb) * u64::from(input_bytes),
        u64::from(problem.ldc) * u64::from(output_bytes),
        u64::from(problem.address_align),
    ]
    .into_iter()
    .map(|bytes| 1u64 << bytes.trailing_zeros().min(7))
    .min()
    .unwrap_or(128) as u32
}

/// A stable hash of a spec's text (FNV-1a, 64 bits, as 16 hex digits): a cache entry names
/// the exact kernel it measured.
pub fn spec_hash(spec_text: &str) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in spec_text.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{hash:016x}")
}

/// What a reader does with a cache it cannot use (missing, unreadable, damaged, foreign, of
/// another format) or with entries no problem can look up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CacheReading {
    /// Say so once on stderr and go on without those entries: the model picks. The cache
    /// only makes picks faster, so a program that runs without it keeps running.
    Lenient,
    /// Fail with [`Error::TuneCache`].
    Strict,
}

impl CacheReading {
    /// [`CacheReading::Strict`] where `GEMM_DSL_TUNE_CACHE_STRICT` is set to anything but
    /// `0` or nothing, else [`CacheReading::Lenient`].
    pub fn from_env() -> CacheReading {
        match std::env::var_os(TUNE_CACHE_STRICT_VARIABLE) {
            Some(value) if !value.is_empty() && value != "0" => CacheReading::Strict,
            _ => CacheReading::Lenient,
        }
    }
}

/// Measured picks for one device, read from a file.
#[derive(Clone, Debug, Default)]
pub struct TuneCache {
    /// (kernel name, spec hash) per problem.
    entries: HashMap<ProblemKey, (String, String)>,
    ignored: Vec<String>,
}

impl TuneCache {
    /// The entries of `all` measured on `device`; the others, and entries with a
    /// [`defect`](TuneEntry::defect), are left out and summed up in [`TuneCache::ignored`].
    pub fn for_device(all: &[TuneEntry], device: &DeviceKey) -> TuneCache {
        let (mut cache, defects) = TuneCache::sorted(all, device);
        cache.note_defects(&defects);
        cache
    }

    fn note_defects(&mut self, defects: &[String]) {
        if let Some(first) = defects.first() {
            self.ignored.push(format!(
                "{} no problem can match (the first, {first})",
                entries(defects.len())
            ));
        }
    }

    /// [`TuneCache::for_device`], and a line for each entry with a defect.
    fn sorted(all: &[TuneEntry], device: &DeviceKey) -> (TuneCache, Vec<String>) {
        let mut cache = TuneCache::default();
        let mut other_devices: BTreeMap<&DeviceKey, usize> = BTreeMap::new();
        let mut defects: Vec<String> = Vec::new();
        for entry in all {
            if let Some(defect) = entry.defect() {
                defects.push(format!("{}: {defect}", entry.problem_text()));
            } else if &entry.device != device {
                *other_devices.entry(&entry.device).or_default() += 1;
            } else if let Some(key) = ProblemKey::of_entry(entry) {
                cache
                    .entries
                    .insert(key, (entry.kernel.clone(), entry.spec_hash.clone()));
            }
        }
        cache.ignored = other_devices
            .into_iter()
            .map(|(other, count)| format!("{count} measured on {other}, not this {device}"))
            .collect();
        (cache, defects)
    }

    /// The entries of `device` in the file at `path`. What cannot be used — a missing,
    /// unreadable or damaged file, another format, entries that do not parse or that no
    /// problem can look up — is left out with one line on stderr (once per process and
    /// message) under [`CacheReading::Lenient`], and is an [`Error::TuneCache`] under
    /// [`CacheReading::Strict`]. Entries of other devices are no fault (one file serves
    /// several boards); a file with none of `device`'s is reported, never an error.
    pub fn read(path: &Path, device: &DeviceKey, reading: CacheReading) -> Result<Self, Error> {
        let failure = |reason: String| match reading {
            CacheReading::Strict => Err(Error::TuneCache {
                path: path.display().to_string(),
                reason,
            }),
            CacheReading::Lenient => {
                report_once(&format!(
                    "gemm-dsl: tuning cache {}: {reason}; the cost model picks without it \
                     ({TUNE_CACHE_STRICT_VARIABLE}=1 makes this an error)",
                    path.display()
                ));
                Ok(())
            }
        };
        let file = match file::read_at(path) {
            Ok(file) => file,
            Err(reason) => {
                failure(reason)?;
                return Ok(TuneCache::default());
            }
        };
        if let Some((first, count)) = file
            .malformed()
            .first()
            .map(|m| (m, file.malformed().len()))
        {
            failure(format!(
                "{} left out: not format {FORMAT}'s (the first, {})",
                entries(count),
                first.reason
            ))?;
        }
        let (mut cache, defects) = TuneCache::sorted(&file.entries, device);
        if let Some(first) = defects.first() {
            failure(format!(
                "{} left out: no problem can match (the first, {first})",
                entries(defects.len())
            ))?;
        }
        if cache.is_empty() && !cache.ignored.is_empty() {
            report_once(&format!(
                "gemm-dsl: tuning cache {}: no entry measured on this device ({}); \
                 the cost model picks",
                path.display(),
                cache.ignored.join("; ")
            ));
        }
        cache.note_defects(&defects);
        Ok(cache)
    }

    /// The measured best for `problem` of these types, if the cache has one: (kernel name,
    /// spec hash), which the caller must match against the kernel it has.
    pub fn lookup(&self, problem: &Problem, dtype: DType, out: DType) -> Option<(&str, &str)> {
        self.entries
            .get(&ProblemKey::of(problem, dtype, out))
            .map(|(kernel, hash)| (kernel.as_str(), hash.as_str()))
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Entries left out, one line per other device (how many it measured) and one for the
    /// entries no problem can look up.
    pub fn ignored(&self) -> &[String] {
        &self.ignored
    }
}

/// `1 entry`, `2 entries`.
fn entries(count: usize) -> String {
    if count == 1 {
        "1 entry".to_string()
    } else {
        format!("{count} entries")
    }
}

/// Writes `message` on stderr unless this process wrote it before (a program that builds a
/// `Matmul` per pair of types, or per thread, hears of a bad cache once); whether it wrote.
pub fn report_once(message: &str) -> bool {
    static REPORTED: OnceLock<Mutex<HashSet<String>>> = OnceLock::new();
    let first = REPORTED
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .insert(message.to_string());
    if first {
        eprintln!("{message}");
    }
    first
}

/// A layout by its name in a cache entry.
fn layout_named(name: &str) -> Option<Layout> {
    gemm_dsl::pick::sets::LAYOUTS
        .into_iter()
        .find(|layout| layout.name() == name)
}

/// An element type by its name in a cache entry.
fn dtype_named(name: &str) -> Option<DType> {
    DType::ALL.into_iter().find(|dtype| dtype.name() == name)
}

#[cfg(test)]
mod tests;
