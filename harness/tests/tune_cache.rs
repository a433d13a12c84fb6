//! The tuning cache end to end, without a GPU: entries written the way `gemm-bench --tune-out`
//! writes them and read through the picker a `Matmul` builds.

use gemm_dsl::pick::sets::{self, KernelSet};
use gemm_dsl::{DType, Layout};
use gemm_harness::tune::TuneRun;
use gemm_runtime::epilogue::FusedSpec;
use gemm_runtime::tune::{spec_hash, CacheReading, TuneEntry, TuneFile};
use gemm_runtime::{device_key, DeviceInfo, KernelTypes, Pick, PickSource, Picker, Problem};
use std::collections::HashMap;
use std::path::PathBuf;

/// A directory of its own per test, removed after it.
struct Scratch(PathBuf);

impl Scratch {
    fn new(test: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("gemm-cache-{}-{test}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn board(name: &str) -> DeviceInfo {
    DeviceInfo {
        name: name.to_string(),
        driver_version: "13.0".to_string(),
        compute_capability: "9.0".to_string(),
        multiprocessors: 132,
        sm_clock_mhz: Some(1980),
        memory_clock_mhz: Some(2619),
        l2_cache_bytes: 50 << 20,
    }
}

fn h100() -> DeviceInfo {
    board("NVIDIA H100 80GB HBM3")
}

/// FNV-1a, 64 bits, as 16 hex digits: the spec hash, written out here so that the test does
/// not take it from the code it checks.
fn fnv1a(text: &str) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in text.bytes() {
        hash = (hash ^ u64::from(byte)).wrapping_mul(0x100_0000_01b3);
    }
    format!("{hash:016x}")
}

/// Each member's kernel name and the hash of the spec text its emitted kernel carries (what a
/// `gemm!` kernel's `KernelInfo::spec` holds): computed apart from the writer's table, which
/// hashes the set's spec text re-rendered from the parsed spec.
fn emitted_hashes(set: &KernelSet, dtype: DType, out: DType) -> HashMap<String, String> {
    set.specs(dtype, out)
        .iter()
        .map(|text| {
            let valid = gemm_dsl::check_str(text).expect("set members are valid");
            let emitted = gemm_codegen::emit(&valid);
            let info = emitted.info();
            (info.name().to_string(), fnv1a(info.spec()))
        })
        .collect()
}

/// The problems a tuning run of these types might measure: model shapes in every layout the
/// set takes, packed and with lines padded to 16 and to 128 bytes, one a strided batch.
fn tuned_problems(dtype: DType, out: DType) -> Vec<Problem> {
    let shapes = [
        (1, 16, 4096, 4096),
        (1, 16, 4096, 14336),
        (1, 128, 1024, 1024),
        (1, 256, 2048, 512),
        (1, 2048, 2048, 2048),
        (1, 4096, 4096, 4096),
        (4, 64, 1024, 4096),
    ];
    let mut problems = Vec::new();
    for &layout in KernelSet::layouts(dtype) {
        for (batch, m, n, k) in shapes {
            let packed = Problem::new(m, n, k, layout).with_batch(batch);
            for align in [16, 128] {
                let padded = packed.with_lines_padded(align, dtype.size_bytes(), out.size_bytes());
                if !problems.contains(&padded) {
                    problems.push(padded);
                }
            }
            // Lines of an odd multiple of 16 bytes: another stride alignment, another key.
            let odd = packed.with_leading_dims(packed.lda + 8, packed.ldb + 8, packed.ldc + 8);
            problems.push(odd.with_lines_padded(16, dtype.size_bytes(), out.size_bytes()));
        }
    }
    problems
}

/// Issue 44, item 5: entries written through gemm-bench's writer (`TuneRun::entry`, then
/// `TuneFile::merge`) all hit in the picker a `Matmul` over the set builds (`Picker::of_set`,
/// then `with_cache_file` with `device_key`), each naming the kernel that measured fastest
/// rather than the model's pick; every hash matches the one computed here from the emitted
/// kernel's own spec text.
#[test]
fn every_entry_a_tuning_run_writes_hits_in_the_matmul_picker() {
    let scratch = Scratch::new("hits");
    let path = scratch.path("cache.json");
    let device = h100();
    let type_sets: [(&KernelSet, DType, DType); 5] = [
        (&sets::SM90_16BIT, DType::Bf16, DType::Bf16),
        (&sets::SM90_16BIT, DType::F16, DType::F32),
        (&sets::SM90_FP8, DType::E4m3, DType::Bf16),
        (&sets::SM80_16BIT, DType::F16, DType::F16),
        (&sets::SM80_F32, DType::F32, DType::F32),
    ];
    // One file for every run, as one board's tuning runs over several types would write.
    let mut runs = Vec::new();
    for (set, dtype, out) in type_sets {
        let types = KernelTypes::new(dtype, out).expect("supported types");
        let model_only = Picker::of_set(set, types, &FusedSpec::NONE).unwrap();
        let expected_hashes = emitted_hashes(set, dtype, out);
        let run = TuneRun::new(device_key(&device), set, dtype, out);
        // Per problem, the "measured best": an admitting member other than the model's pick
        // where there is one, so that a hit cannot be the model choosing the same.
        let mut written: Vec<(Problem, usize)> = Vec::new();
        let mut entries: Vec<TuneEntry> = Vec::new();
        for problem in tuned_problems(dtype, out) {
            let Some(model) = model_only.pick(&problem) else {
                continue;
            };
            let best = (0..model_only.candidates().len())
                .find(|&i| {
                    i != model.index && model_only.candidates()[i].refuses(&problem).is_none()
                })
                .unwrap_or(model.index);
            let kernel = &model_only.candidates()[best].name;
            let entry = run
                .entry(&problem, kernel, 500.0, 1.01)
                .expect("a member of the set");
            assert_eq!(
                Some(&entry.spec_hash),
                expected_hashes.get(kernel),
                "{kernel}: the writer's hash is not the emitted kernel's"
            );
            written.push((problem, best));
            entries.push(entry);
        }
        assert!(
            written.len() >= 14,
            "{}: {} problems",
            set.name,
            written.len()
        );
        let not_the_model = written
            .iter()
            .filter(|(problem, best)| model_only.pick(problem).unwrap().index != *best)
            .count();
        assert!(
            not_the_model * 2 > written.len(),
            "{}: {not_the_model}",
            set.name
        );
        let counts = TuneFile::merge(&path, entries).unwrap();
        assert_eq!((counts.added, counts.replaced), (written.len(), 0));
        runs.push((set, types, written));
    }

    let total: usize = runs.iter().map(|(_, _, written)| written.len()).sum();
    assert!(total >= 200, "{total} entries");
    for (set, types, written) in runs {
        let picker = Picker::of_set(set, types, &FusedSpec::NONE)
            .unwrap()
            .with_cache_file(&path, &device_key(&device), CacheReading::Strict)
            .unwrap();
        assert_eq!(picker.cache().len(), total);
        for (problem, best) in &written {
            assert_eq!(
                picker.pick(problem),
                Some(Pick {
                    index: *best,
                    source: PickSource::Cache
                }),
                "{} {problem} (lds {} {} {})",
                set.name,
                problem.lda,
                problem.ldb,
                problem.ldc
            );
        }
        // The same file on another board: no entry hits, the model picks.
        let elsewhere = Picker::of_set(set, types, &FusedSpec::NONE)
            .unwrap()
            .with_cache_file(
                &path,
                &device_key(&board("NVIDIA H200")),
                CacheReading::Strict,
            )
            .unwrap();
        assert!(written.iter().all(|(problem, _)| {
            elsewhere.pick(problem).map(|p| p.source) == Some(PickSource::Model)
        }));
    }
}

/// The negative control of the test above: an entry whose hash is not the kernel's (its spec
/// changed since) is not trusted.
#[test]
fn an_entry_with_another_spec_hash_is_stale_and_the_model_picks() {
    let scratch = Scratch::new("stale");
    let path = scratch.path("cache.json");
    let types = KernelTypes::new(DType::Bf16, DType::Bf16).unwrap();
    let model_only = Picker::of_set(&sets::SM90_16BIT, types, &FusedSpec::NONE).unwrap();
    let problem = Problem::new(16, 4096, 14336, Layout::RowRow);
    let model = model_only.pick(&problem).unwrap();
    let other = (0..model_only.candidates().len())
        .find(|&i| i != model.index && model_only.candidates()[i].refuses(&problem).is_none())
        .unwrap();
    let run = TuneRun::new(
        device_key(&h100()),
        &sets::SM90_16BIT,
        DType::Bf16,
        DType::Bf16,
    );
    let mut entry = run
        .entry(&problem, &model_only.candidates()[other].name, 1.0, 1.0)
        .unwrap();
    entry.spec_hash = spec_hash("an older spec of the kernel");
    TuneFile::merge(&path, vec![entry]).unwrap();
    let picker = Picker::of_set(&sets::SM90_16BIT, types, &FusedSpec::NONE)
        .unwrap()
        .with_cache_file(&path, &device_key(&h100()), CacheReading::Strict)
        .unwrap();
    assert_eq!(picker.pick(&problem), Some(model));
}

/// A cache the picker cannot use (the damaged file, a path that does not exist, a
/// directory, a cache of another format) leaves the model to pick, as it would with no cache;
/// strict reading makes each an error naming the path and the fault. In a file of good
/// entries, an entry of an unknown kernel or an impossible problem costs only itself.
#[test]
fn a_cache_the_picker_cannot_use_leaves_the_model_to_pick_unless_strict() {
    let scratch = Scratch::new("lenient");
    let types = KernelTypes::new(DType::Bf16, DType::Bf16).unwrap();
    let set = &sets::SM90_16BIT;
    let model_only = Picker::of_set(set, types, &FusedSpec::NONE).unwrap();
    let run = TuneRun::new(device_key(&h100()), set, DType::Bf16, DType::Bf16);
    let problems: Vec<Problem> = [16, 64, 128, 512, 4096]
        .into_iter()
        .map(|m| Problem::new(m, 4096, 4096, Layout::RowRow))
        .collect();
    // Per problem, an admitting member the model does not pick, as a tuning run might find.
    let measured: Vec<(Problem, usize)> = problems
        .iter()
        .map(|problem| {
            let model = model_only.pick(problem).unwrap().index;
            let best = (0..model_only.candidates().len())
                .find(|&i| i != model && model_only.candidates()[i].refuses(problem).is_none())
                .expect("two members admit the problem");
            (*problem, best)
        })
        .collect();
    let entries: Vec<TuneEntry> = measured
        .iter()
        .map(|(problem, best)| {
            run.entry(problem, &model_only.candidates()[*best].name, 500.0, 1.0)
                .unwrap()
        })
        .collect();
    let real = scratch.path("real.json");
    TuneFile::merge(&real, entries.clone()).unwrap();
    let real_text = std::fs::read(&real).unwrap();
    assert!(real_text.len() > 600, "{} bytes", real_text.len());

    let damaged = scratch.path("damaged.json");
    let mut bytes = real_text[..300].to_vec();
    bytes.extend((0..300u32).map(|i| (i * 131 % 251) as u8));
    std::fs::write(&damaged, bytes).unwrap();
    let newer = scratch.path("newer.json");
    let newer_text =
        String::from_utf8(real_text.clone())
            .unwrap()
            .replacen("\"format\": 1", "\"format\": 2", 1);
    std::fs::write(&newer, newer_text).unwrap();
    let directory = scratch.path("a-directory");
    std::fs::create_dir(&directory).unwrap();
    let missing = PathBuf::from("/nonexistent/cache.json");

    let with = |path: &PathBuf, reading| {
        Picker::of_set(set, types, &FusedSpec::NONE)
            .unwrap()
            .with_cache_file(path, &device_key(&h100()), reading)
    };
    for (path, fault) in [
        (&damaged, "damaged: not JSON from line"),
        (&missing, "there is no such file"),
        (&directory, "it is a directory, not a file"),
        (
            &newer,
            "a cache of format 2, and this gemm-dsl reads format 1",
        ),
    ] {
        let picker = with(path, CacheReading::Lenient).expect("lenient reading never fails");
        assert!(picker.cache().is_empty(), "{}", path.display());
        for (problem, _) in &measured {
            assert_eq!(picker.pick(problem), model_only.pick(problem));
            assert_eq!(
                picker.pick(problem).map(|p| p.source),
                Some(PickSource::Model)
            );
        }
        let error = with(path, CacheReading::Strict).unwrap_err().to_string();
        assert!(
            error.starts_with(&format!("tuning cache {}: {fault}", path.display())),
            "{error}"
        );
    }

    // The good file, then an entry of a kernel no set has and one of an impossible problem
    // merged in: the good entries still hit, the others fall back to the model.
    let unknown = TuneEntry {
        kernel: "sm90_retired_member_bf16_rr".to_string(),
        ..run
            .entry(
                &Problem::new(32, 4096, 4096, Layout::RowRow),
                &entries[0].kernel,
                1.0,
                1.0,
            )
            .unwrap()
    };
    let impossible = TuneEntry {
        k: 0,
        ..entries[1].clone()
    };
    let counts = TuneFile::merge(&real, vec![unknown, impossible]).unwrap();
    assert_eq!((counts.added, counts.replaced, counts.kept), (2, 0, 5));
    let picker = with(&real, CacheReading::Lenient).unwrap();
    for (problem, best) in &measured {
        assert_eq!(
            picker.pick(problem),
            Some(Pick {
                index: *best,
                source: PickSource::Cache
            })
        );
    }
    let retired = Problem::new(32, 4096, 4096, Layout::RowRow);
    assert_eq!(
        picker.pick(&retired).map(|p| p.source),
        Some(PickSource::Model)
    );
    let error = with(&real, CacheReading::Strict).unwrap_err().to_string();
    assert!(
        error.contains(
            "1 entry left out: no problem can match (the first, 64x4096x0 rr, bf16: k = 0)"
        ),
        "{error}"
    );
}
