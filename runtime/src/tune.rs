//! The tuning cache: which kernel of a set measured fastest per problem, on which device.
//!
//! `gemm-bench --tune-out FILE` (in the `gemm-harness` crate) times every kernel of a set per
//! shape (each checked first) and writes the fastest here; a [`Matmul`](crate::Matmul) reads
//! the file from an explicit path or from `GEMM_DSL_TUNE_CACHE` and trusts an entry only where
//! its device (name, SM count, driver) and the kernel's spec (name and a hash of its text) are
//! the ones in hand. Entries that do not match are ignored and listed ([`TuneCache::ignored`]);
//! a problem with no entry falls back to the cost model.

use crate::error::Error;
use gemm_dsl::pick::Problem;
use gemm_dsl::DType;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::path::Path;

/// The environment variable a [`Matmul`](crate::Matmul) reads a cache path from.
pub const TUNE_CACHE_VARIABLE: &str = "GEMM_DSL_TUNE_CACHE";

/// The version of the file's layout this runtime writes and reads.
const FORMAT: u32 = 1;

/// The device a measurement belongs to.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct DeviceKey {
    pub name: String,
    pub sms: u32,
    pub driver: String,
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
    /// The largest power of two (up to 128) that divides every line's byte stride.
    pub stride_align: u32,
    /// The fastest kernel's name and the hash of its validated spec text ([`spec_hash`]).
    pub kernel: String,
    pub spec_hash: String,
    /// What it measured, for whoever reads the file.
    pub tflops: f64,
    pub ratio_to_cublas: f64,
}

#[derive(Serialize, Deserialize)]
struct CacheFile {
    format: u32,
    entries: Vec<TuneEntry>,
}

/// What a cache lookup is keyed on besides the device.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct ProblemKey {
    dtype: String,
    out: String,
    layout: String,
    m: u32,
    n: u32,
    k: u32,
    batch: u32,
    stride_align: u32,
}

impl ProblemKey {
    fn of(problem: &Problem, dtype: DType, out: DType) -> ProblemKey {
        ProblemKey {
            dtype: dtype.name().to_string(),
            out: out.name().to_string(),
            layout: problem.layout.name().to_string(),
            m: problem.m,
            n: problem.n,
            k: problem.k,
            batch: problem.batch,
            stride_align: stride_align(problem, dtype.size_bytes(), out.size_bytes()),
        }
    }

    fn of_entry(entry: &TuneEntry) -> ProblemKey {
        ProblemKey {
            dtype: entry.dtype.clone(),
            out: entry.out.clone(),
            layout: entry.layout.clone(),
            m: entry.m,
            n: entry.n,
            k: entry.k,
            batch: entry.batch,
            stride_align: entry.stride_align,
        }
    }
}

/// The largest power of two, up to 128, dividing the byte stride of every operand's lines.
pub fn stride_align(problem: &Problem, input_bytes: u32, output_bytes: u32) -> u32 {
    [
        u64::from(problem.lda) * u64::from(input_bytes),
        u64::from(problem.ldb) * u64::from(input_bytes),
        u64::from(problem.ldc) * u64::from(output_bytes),
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

/// Measured picks for one device, read from a file.
#[derive(Clone, Debug, Default)]
pub struct TuneCache {
    /// (kernel name, spec hash) per problem.
    entries: HashMap<ProblemKey, (String, String)>,
    ignored: Vec<String>,
}

impl TuneCache {
    /// The entries of `all` measured on `device`; the others are ignored and listed.
    pub fn for_device(all: &[TuneEntry], device: &DeviceKey) -> TuneCache {
        let mut cache = TuneCache::default();
        for entry in all {
            if &entry.device != device {
                cache.ignored.push(format!(
                    "{}x{}x{} {}: measured on {} ({} SMs, driver {}), not this {} ({} SMs, driver {})",
                    entry.m,
                    entry.n,
                    entry.k,
                    entry.layout,
                    entry.device.name,
                    entry.device.sms,
                    entry.device.driver,
                    device.name,
                    device.sms,
                    device.driver
                ));
                continue;
            }
            cache.entries.insert(
                ProblemKey::of_entry(entry),
                (entry.kernel.clone(), entry.spec_hash.clone()),
            );
        }
        cache
    }

    /// Reads a file written by [`TuneCache::write`], keeping the entries of `device`.
    pub fn read(path: &Path, device: &DeviceKey) -> Result<TuneCache, Error> {
        let failure = |reason: String| Error::TuneCache {
            path: path.display().to_string(),
            reason,
        };
        let text = std::fs::read_to_string(path).map_err(|e| failure(e.to_string()))?;
        let file: CacheFile = serde_json::from_str(&text)
            .map_err(|e| failure(format!("not a gemm-dsl tuning cache: {e}")))?;
        if file.format != FORMAT {
            return Err(failure(format!(
                "format {} (this runtime reads format {FORMAT})",
                file.format
            )));
        }
        Ok(TuneCache::for_device(&file.entries, device))
    }

    /// Writes `entries` as a cache file.
    pub fn write(path: &Path, entries: Vec<TuneEntry>) -> Result<(), Error> {
        let text = serde_json::to_string_pretty(&CacheFile {
            format: FORMAT,
            entries,
        })
        .expect("a cache serializes");
        std::fs::write(path, text).map_err(|e| Error::TuneCache {
            path: path.display().to_string(),
            reason: e.to_string(),
        })
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

    /// Entries left out because another device measured them, one line each.
    pub fn ignored(&self) -> &[String] {
        &self.ignored
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gemm_dsl::Layout;

    fn h100() -> DeviceKey {
        DeviceKey {
            name: "NVIDIA H100 80GB HBM3".to_string(),
            sms: 132,
            driver: "13.0".to_string(),
        }
    }

    fn entry(device: DeviceKey, m: u32, kernel: &str) -> TuneEntry {
        TuneEntry {
            device,
            dtype: "bf16".to_string(),
            out: "bf16".to_string(),
            layout: "rr".to_string(),
            m,
            n: 4096,
            k: 4096,
            batch: 1,
            stride_align: 128,
            kernel: kernel.to_string(),
            spec_hash: spec_hash(kernel),
            tflops: 1.0,
            ratio_to_cublas: 1.0,
        }
    }

    #[test]
    fn entries_of_another_device_are_ignored_and_listed() {
        let h200 = DeviceKey {
            name: "NVIDIA H200".to_string(),
            ..h100()
        };
        let older_driver = DeviceKey {
            driver: "12.8".to_string(),
            ..h100()
        };
        let fewer_sms = DeviceKey { sms: 114, ..h100() };
        let all = [
            entry(h100(), 16, "a"),
            entry(h200, 64, "b"),
            entry(older_driver, 128, "c"),
            entry(fewer_sms, 512, "d"),
        ];
        let cache = TuneCache::for_device(&all, &h100());
        assert_eq!(cache.len(), 1);
        assert_eq!(cache.ignored().len(), 3, "{:?}", cache.ignored());
        assert!(cache.ignored()[0].contains("NVIDIA H200"));
        let problem = Problem::new(16, 4096, 4096, Layout::RowRow);
        assert_eq!(
            cache.lookup(&problem, DType::Bf16, DType::Bf16),
            Some(("a", spec_hash("a").as_str()))
        );
        // The same sizes on the device the other entries measured stay unknown here.
        let other = Problem::new(64, 4096, 4096, Layout::RowRow);
        assert_eq!(cache.lookup(&other, DType::Bf16, DType::Bf16), None);
    }

    #[test]
    fn the_key_holds_types_layout_batch_and_stride_alignment() {
        let cache = TuneCache::for_device(&[entry(h100(), 16, "a")], &h100());
        let problem = Problem::new(16, 4096, 4096, Layout::RowRow);
        assert!(cache.lookup(&problem, DType::Bf16, DType::Bf16).is_some());
        assert!(cache.lookup(&problem, DType::F16, DType::F16).is_none());
        assert!(cache.lookup(&problem, DType::Bf16, DType::F32).is_none());
        let col = Problem::new(16, 4096, 4096, Layout::RowCol);
        assert!(cache.lookup(&col, DType::Bf16, DType::Bf16).is_none());
        assert!(cache
            .lookup(&problem.with_batch(2), DType::Bf16, DType::Bf16)
            .is_none());
        // N = 4104 would split 128-byte lines: another key than the aligned stride.
        let split = problem.with_leading_dims(4096, 4104, 4096);
        assert_eq!(stride_align(&split, 2, 2), 16);
        assert!(cache.lookup(&split, DType::Bf16, DType::Bf16).is_none());
    }

    #[test]
    fn a_cache_round_trips_through_its_file_and_refuses_other_files() {
        let dir = std::env::temp_dir().join(format!("gemm-tune-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("cache.json");
        TuneCache::write(&path, vec![entry(h100(), 16, "a")]).unwrap();
        let cache = TuneCache::read(&path, &h100()).unwrap();
        assert_eq!(cache.len(), 1);
        std::fs::write(&path, "{\"format\": 7, \"entries\": []}").unwrap();
        let error = TuneCache::read(&path, &h100()).unwrap_err().to_string();
        assert!(error.contains("format 7"), "{error}");
        std::fs::write(&path, "[1, 2]").unwrap();
        let error = TuneCache::read(&path, &h100()).unwrap_err().to_string();
        assert!(error.contains("not a gemm-dsl tuning cache"), "{error}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn spec_hashes_are_stable() {
        // Pinned: a cache written by one build must match the next.
        assert_eq!(spec_hash(""), "cbf29ce484222325");
        assert_eq!(spec_hash("a"), "af63dc4c8601ec8c");
        assert_ne!(spec_hash("name: a"), spec_hash("name: b"));
    }
}
