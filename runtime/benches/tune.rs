//! Host time of reading a tuning cache of 100,000 entries (half of them another board's) into
//! a `TuneCache`: what `Matmul::new` pays once at start with `GEMM_DSL_TUNE_CACHE` set. Run
//! with `cargo bench -p gemm-runtime --bench tune` (no GPU needed).

use gemm_runtime::tune::{spec_hash, stride_align, CacheReading, DeviceKey, TuneEntry, TuneFile};
use gemm_runtime::{Layout, Problem, TuneCache};
use std::path::PathBuf;

fn main() {
    divan::main();
}

fn device(name: &str) -> DeviceKey {
    DeviceKey {
        name: name.to_string(),
        sms: 132,
        driver: "13.0".to_string(),
    }
}

/// A cache file of `count` entries: sizes 1.. in four layouts, every other one measured on
/// an H200.
fn cache_file(count: u32) -> PathBuf {
    let layouts = [
        Layout::RowRow,
        Layout::RowCol,
        Layout::ColRow,
        Layout::ColCol,
    ];
    let entries = (0..count)
        .map(|i| {
            let problem = Problem::new(1 + i / 4, 4096, 14336, layouts[(i % 4) as usize]);
            let kernel = format!("sm90_member{}_bf16_{}", i % 37, problem.layout.name());
            TuneEntry {
                device: device(if i % 2 == 0 {
                    "NVIDIA H100 80GB HBM3"
                } else {
                    "NVIDIA H200"
                }),
                dtype: "bf16".to_string(),
                out: "bf16".to_string(),
                layout: problem.layout.name().to_string(),
                m: problem.m,
                n: problem.n,
                k: problem.k,
                batch: 1,
                stride_align: stride_align(&problem, 2, 2),
                spec_hash: spec_hash(&kernel),
                kernel,
                tflops: 612.5,
                ratio_to_cublas: 1.01,
            }
        })
        .collect();
    let path = std::env::temp_dir().join(format!("gemm-tune-bench-{}.json", std::process::id()));
    let _ = std::fs::remove_file(&path);
    TuneFile::merge(&path, entries).expect("the bench writes its cache");
    path
}

#[divan::bench(sample_count = 20)]
fn read_100000_entries(bencher: divan::Bencher) {
    let path = cache_file(100_000);
    let h100 = device("NVIDIA H100 80GB HBM3");
    bencher.bench(|| {
        let cache = TuneCache::read(&path, &h100, CacheReading::Strict).expect("a good cache");
        assert_eq!(cache.len(), 50_000);
        cache
    });
    let _ = std::fs::remove_file(&path);
    let _ = std::fs::remove_file(path.with_extension("json.lock"));
}
