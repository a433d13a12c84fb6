//! The tuning cache end to end, without a GPU: entries written the way `gemm-bench --tune-out`
//! writes them and read through the picker a `Matmul` builds, the `gemm-bench cache`
//! commands, concurrent writer processes, and a writer killed mid-write.

use gemm_dsl::pick::sets::{self, KernelSet};
use gemm_dsl::{DType, Layout};
use gemm_harness::tune::{merge_run, TuneRun};
use gemm_runtime::epilogue::FusedSpec;
use gemm_runtime::tune::{spec_hash, CacheReading, DeviceKey, TuneEntry, TuneFile};
use gemm_runtime::{device_key, DeviceInfo, KernelTypes, Pick, PickSource, Picker, Problem};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const GEMM_BENCH: &str = env!("CARGO_BIN_EXE_gemm-bench");

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

    fn listing(&self) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(&self.0)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
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

fn gemm_bench(args: &[&str]) -> Output {
    Command::new(GEMM_BENCH)
        .args(args)
        .output()
        .expect("gemm-bench runs")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
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
/// changed since) is not trusted, and `cache show` calls it stale.
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
    let shown = stdout(&gemm_bench(&["cache", "show", path.to_str().unwrap()]));
    assert!(shown.contains("1 entry (1 stale)"), "{shown}");
    assert!(shown.contains("stale (the spec changed)"), "{shown}");
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

/// A cache with an entry of every kind, two boards, and an entry that does not parse.
fn mixed_cache(path: &Path) -> Vec<TuneEntry> {
    let run_h100 = TuneRun::new(
        device_key(&h100()),
        &sets::SM90_16BIT,
        DType::Bf16,
        DType::Bf16,
    );
    let run_h200 = TuneRun::new(
        device_key(&board("NVIDIA H200")),
        &sets::SM90_16BIT,
        DType::Bf16,
        DType::Bf16,
    );
    let kernel = &sets::SM90_16BIT.specs(DType::Bf16, DType::Bf16)[0];
    let kernel = gemm_dsl::check_str(kernel).unwrap().spec.name;
    let problem = |m| Problem::new(m, 4096, 4096, Layout::RowRow);
    let current = run_h100.entry(&problem(16), &kernel, 100.0, 0.98).unwrap();
    let stale = TuneEntry {
        spec_hash: "0000000000000000".to_string(),
        ..run_h100.entry(&problem(32), &kernel, 110.0, 0.99).unwrap()
    };
    let unknown = TuneEntry {
        kernel: "sm90_retired_member_bf16_rr".to_string(),
        ..run_h100.entry(&problem(64), &kernel, 120.0, 1.0).unwrap()
    };
    let impossible = TuneEntry {
        m: 0,
        ..run_h100.entry(&problem(128), &kernel, 130.0, 1.0).unwrap()
    };
    let other_board = run_h200.entry(&problem(16), &kernel, 140.0, 1.02).unwrap();
    let entries = vec![current, stale, unknown, impossible, other_board];
    let mut text = Vec::new();
    TuneFile::new(entries.clone()).write_to(&mut text).unwrap();
    let text = String::from_utf8(text).unwrap().replace(
        "\n]}",
        ",\n{\"device\": {\"name\": \"NVIDIA H100 80GB HBM3\"}, \"kernel\": \"half an entry\"}\n]}",
    );
    std::fs::write(path, text).unwrap();
    entries
}

#[test]
fn cache_show_sorts_entries_by_device_and_status() {
    let scratch = Scratch::new("show");
    let path = scratch.path("cache.json");
    mixed_cache(&path);
    let output = gemm_bench(&["cache", "show", path.to_str().unwrap()]);
    assert!(output.status.success(), "{}", stderr(&output));
    let shown = stdout(&output);
    let lines: Vec<&str> = shown.lines().collect();
    assert_eq!(
        lines[0],
        format!("{}: 6 entries in 2 devices (format 1)", path.display())
    );
    assert!(shown.contains(
        "NVIDIA H100 80GB HBM3 (132 SMs, driver 13.0): 4 entries (1 current, 1 matching no problem, 1 stale, 1 unknown kernel)"
    ), "{shown}");
    assert!(
        shown.contains("NVIDIA H200 (132 SMs, driver 13.0): 1 entry (1 current)"),
        "{shown}"
    );
    for status in [
        "current",
        "stale (the spec changed)",
        "unknown kernel (in no built-in set)",
        "matches no problem: m = 0",
    ] {
        assert!(
            lines.iter().any(|l| l.ends_with(status)),
            "{status}: {shown}"
        );
    }
    assert!(shown.contains("1 entry not format 1's"), "{shown}");
    assert!(shown.contains("entry 5: missing field"), "{shown}");

    let summary = stdout(&gemm_bench(&[
        "cache",
        "show",
        "--summary",
        path.to_str().unwrap(),
    ]));
    assert_eq!(
        summary.lines().filter(|l| l.starts_with("  ")).count(),
        1,
        "{summary}"
    );
}

#[test]
fn cache_prune_drops_what_no_matmul_can_use_and_the_boards_asked_for() {
    let scratch = Scratch::new("prune");
    let path = scratch.path("cache.json");
    let entries = mixed_cache(&path);
    let before = std::fs::read(&path).unwrap();
    let file = path.to_str().unwrap();

    let dry = gemm_bench(&["cache", "prune", "--dry-run", file]);
    assert!(dry.status.success(), "{}", stderr(&dry));
    assert_eq!(
        stdout(&dry),
        format!("{file} (dry run: would be): 3 dropped (1 stale, 0 of unknown kernels, 1 matching no problem, 1 not format 1's, 0 of dropped devices), 3 kept (1 of kernels in no built-in set, kept: --drop-unknown-kernels drops them)\n")
    );
    assert_eq!(std::fs::read(&path).unwrap(), before);

    // An entry of a kernel no built-in set has may be one of the caller's own set: kept.
    let pruned = gemm_bench(&["cache", "prune", file]);
    assert!(pruned.status.success(), "{}", stderr(&pruned));
    let left = TuneFile::read(&path).unwrap();
    assert_eq!(
        left.entries,
        [entries[0].clone(), entries[2].clone(), entries[4].clone()]
    );
    assert!(left.malformed().is_empty());

    let pruned = gemm_bench(&[
        "cache",
        "prune",
        "--drop-unknown-kernels",
        "--drop-device",
        "H200",
        file,
    ]);
    assert_eq!(
        stdout(&pruned),
        format!("{file}: 2 dropped (0 stale, 1 of unknown kernels, 0 matching no problem, 0 not format 1's, 1 of dropped devices), 1 kept\n")
    );
    assert_eq!(TuneFile::read(&path).unwrap().entries, [entries[0].clone()]);
    assert_eq!(scratch.listing(), ["cache.json", "cache.json.lock"]);

    // A missing file is an error, not an empty file made.
    let missing = scratch.path("missing.json");
    let output = gemm_bench(&["cache", "prune", missing.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(
        stderr(&output),
        format!(
            "error: tuning cache {}: there is no such file\n",
            missing.display()
        )
    );
    assert!(!missing.exists());
}

#[test]
fn the_cache_commands_name_a_bad_path_and_its_fault() {
    let scratch = Scratch::new("bad-paths");
    let directory = scratch.path("a-directory");
    std::fs::create_dir(&directory).unwrap();
    let damaged = scratch.path("damaged.json");
    std::fs::write(&damaged, "{\"format\": 1, \"entries\": [{\"dev").unwrap();
    let read_only = scratch.path("read-only.json");
    std::fs::write(&read_only, "{\"format\": 1, \"entries\": []}").unwrap();
    let mut permissions = std::fs::metadata(&read_only).unwrap().permissions();
    permissions.set_readonly(true);
    std::fs::set_permissions(&read_only, permissions).unwrap();
    let good = scratch.path("good.json");
    mixed_cache(&good);
    let good = good.to_str().unwrap();
    let cases = [
        (
            vec!["cache", "show", directory.to_str().unwrap()],
            "it is a directory, not a file",
        ),
        (
            vec!["cache", "show", damaged.to_str().unwrap()],
            "truncated: the text ends inside its JSON",
        ),
        (
            vec!["cache", "merge", damaged.to_str().unwrap(), good],
            "not replaced, so that nothing in it is lost",
        ),
        (
            vec!["cache", "merge", read_only.to_str().unwrap(), good],
            "it is read-only: not replaced",
        ),
        (
            vec!["cache", "merge", good, directory.to_str().unwrap()],
            "it is a directory, not a file",
        ),
    ];
    for (args, fault) in cases {
        let output = gemm_bench(&args);
        assert_eq!(output.status.code(), Some(1), "{args:?}");
        let message = stderr(&output);
        assert!(
            message.contains("error: tuning cache ") && message.contains(fault),
            "{args:?}: {message}"
        );
    }
    assert_eq!(
        std::fs::read_to_string(&damaged).unwrap(),
        "{\"format\": 1, \"entries\": [{\"dev"
    );

    // --tune-out is checked before anything is measured (here before the GPU is opened).
    let output = gemm_bench(&[
        "--set",
        "sm90",
        "--check",
        "--shapes",
        "128x256x64",
        "--tune-out",
        damaged.to_str().unwrap(),
    ]);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).contains("not replaced, so that nothing in it is lost"),
        "{}",
        stderr(&output)
    );
}

/// `count` entries of `device`, sizes from `first_m`, naming a kernel of `writer`.
fn entries_of(device: &DeviceKey, writer: usize, first_m: u32, count: u32) -> Vec<TuneEntry> {
    (0..count)
        .map(|i| TuneEntry {
            device: device.clone(),
            dtype: "bf16".to_string(),
            out: "bf16".to_string(),
            layout: "rr".to_string(),
            m: first_m + i,
            n: 4096,
            k: 4096,
            batch: 1,
            stride_align: 128,
            kernel: format!("writer_{writer}"),
            spec_hash: spec_hash(&format!("writer_{writer}")),
            tflops: 1.0,
            ratio_to_cublas: 1.0,
        })
        .collect()
}

#[test]
fn gemm_bench_processes_merging_at_once_lose_no_entry() {
    let scratch = Scratch::new("processes");
    let target = scratch.path("shared.json");
    let h100 = device_key(&h100());
    let writers = 8;
    let per_writer = 300;
    let inputs: Vec<PathBuf> = (0..writers)
        .map(|writer| {
            let path = scratch.path(&format!("run{writer}.json"));
            let mut entries = entries_of(&h100, writer, 1 + writer as u32 * per_writer, per_writer);
            // And one problem every writer measured: one entry of it survives.
            entries.extend(entries_of(&h100, writer, 100_000, 1));
            let mut text = Vec::new();
            TuneFile::new(entries).write_to(&mut text).unwrap();
            std::fs::write(&path, text).unwrap();
            path
        })
        .collect();
    let children: Vec<_> = inputs
        .iter()
        .map(|input| {
            Command::new(GEMM_BENCH)
                .args(["cache", "merge"])
                .arg(&target)
                .arg(input)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for child in children {
        let output = child.wait_with_output().unwrap();
        assert!(output.status.success(), "{}", stderr(&output));
        assert!(
            stdout(&output).contains(&format!("{} added", per_writer))
                || stdout(&output).contains(&format!("{} added", per_writer + 1)),
            "{}",
            stdout(&output)
        );
    }
    let merged = TuneFile::read(&target).unwrap();
    assert_eq!(merged.entries.len(), writers * per_writer as usize + 1);
    for writer in 0..writers {
        for entry in entries_of(&h100, writer, 1 + writer as u32 * per_writer, per_writer) {
            assert!(
                merged.entries.contains(&entry),
                "lost {} m = {}",
                entry.kernel,
                entry.m
            );
        }
    }
    assert_eq!(merged.entries.iter().filter(|e| e.m == 100_000).count(), 1);
    let mut expected: Vec<String> = (0..writers).map(|w| format!("run{w}.json")).collect();
    expected.extend(["shared.json".to_string(), "shared.json.lock".to_string()]);
    expected.sort();
    assert_eq!(scratch.listing(), expected);
}

#[test]
fn a_writer_killed_mid_write_leaves_the_old_file_whole() {
    let scratch = Scratch::new("killed");
    let target = scratch.path("cache.json");
    let h100 = device_key(&h100());
    let old = entries_of(&h100, 0, 1, 3);
    TuneFile::merge(&target, old.clone()).unwrap();
    let old_bytes = std::fs::read(&target).unwrap();
    // A run large enough that writing it takes a while (about 50 MB).
    let big = scratch.path("big.json");
    let mut text = Vec::new();
    TuneFile::new(entries_of(&h100, 1, 1000, 200_000))
        .write_to(&mut text)
        .unwrap();
    std::fs::write(&big, &text).unwrap();
    let merged_len = {
        let mut merged = TuneFile::new(old.clone());
        merged.merge_entries(entries_of(&h100, 1, 1000, 200_000));
        let mut bytes = Vec::new();
        merged.write_to(&mut bytes).unwrap();
        bytes.len() as u64
    };

    let mut child = Command::new(GEMM_BENCH)
        .args(["cache", "merge"])
        .arg(&target)
        .arg(&big)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let temporary = scratch.path(&format!(".cache.json.tmp.{}", child.id()));
    // Kill it (SIGKILL: no clean-up of its own) once its temporary file has some of the
    // new file in it.
    let deadline = Instant::now() + Duration::from_secs(300);
    let written_at_kill = loop {
        let written = std::fs::metadata(&temporary).map_or(0, |meta| meta.len());
        if written > 0 {
            child.kill().unwrap();
            break written;
        }
        assert!(
            child.try_wait().unwrap().is_none(),
            "the writer finished before it could be killed"
        );
        assert!(
            Instant::now() < deadline,
            "the writer never started writing"
        );
        std::thread::sleep(Duration::from_micros(200));
    };
    child.wait().unwrap();
    assert!(
        written_at_kill < merged_len,
        "killed after {written_at_kill} of {merged_len} bytes: not mid-write"
    );
    assert_eq!(
        std::fs::read(&target).unwrap(),
        old_bytes,
        "the old file changed"
    );
    assert!(
        temporary.exists(),
        "the killed writer's temporary file is its leftover"
    );
    assert_eq!(TuneFile::read(&target).unwrap().entries, old);

    // The next writer is not held up by the dead one's lock, and removes its leftover.
    let counts = TuneFile::merge(&target, entries_of(&h100, 2, 500, 2)).unwrap();
    assert_eq!((counts.added, counts.kept), (2, 3));
    assert!(!temporary.exists());
    assert_eq!(
        scratch.listing(),
        ["big.json", "cache.json", "cache.json.lock"]
    );
}

/// A tuning run whose cache cannot take its entries at the end (damaged while the run
/// measured, or its directory gone) keeps them in a file of their own, which `gemm-bench
/// cache merge` merges once the cache is mended.
#[test]
fn a_run_that_cannot_merge_keeps_its_entries_for_cache_merge() {
    let scratch = Scratch::new("unmerged");
    let cache = scratch.path("cache.json");
    let h100 = device_key(&h100());
    let old = entries_of(&h100, 0, 1, 2);
    TuneFile::merge(&cache, old.clone()).unwrap();
    let good_text = std::fs::read(&cache).unwrap();
    let damaged_text = &good_text[..good_text.len() / 2];
    std::fs::write(&cache, damaged_text).unwrap();

    let run = entries_of(&h100, 1, 100, 3);
    let unmerged = merge_run(&cache, run.clone()).unwrap_err();
    let saved = scratch.path(&format!("cache.json.run-{}.json", std::process::id()));
    assert_eq!(unmerged.saved.as_deref(), Some(saved.as_path()));
    assert_eq!(TuneFile::read(&saved).unwrap().entries, run);
    let message = unmerged.to_string();
    assert!(
        message.contains("truncated")
            && message.ends_with(&format!(
                "the run's 3 entries are in {}: `gemm-bench cache merge {} {}` merges them",
                saved.display(),
                cache.display(),
                saved.display()
            )),
        "{message}"
    );
    assert_eq!(std::fs::read(&cache).unwrap(), damaged_text);

    // Mended, the cache takes the saved run: the old entries stay, the run's are added.
    std::fs::write(&cache, &good_text).unwrap();
    let output = gemm_bench(&[
        "cache",
        "merge",
        cache.to_str().unwrap(),
        saved.to_str().unwrap(),
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(
        stdout(&output),
        format!("{}: 3 added, 0 replaced, 2 kept\n", cache.display())
    );
    let mut both = old;
    both.extend(run.clone());
    assert_eq!(TuneFile::read(&cache).unwrap().entries, both);

    // No directory for the cache: the run goes to the temporary directory.
    let nowhere = scratch.path("no-such-dir/cache.json");
    let unmerged = merge_run(&nowhere, run.clone()).unwrap_err();
    let in_temp = std::env::temp_dir().join(format!("cache.json.run-{}.json", std::process::id()));
    assert_eq!(unmerged.saved.as_deref(), Some(in_temp.as_path()));
    let saved_run = TuneFile::read(&in_temp).map(|file| file.entries);
    std::fs::remove_file(&in_temp).unwrap();
    assert_eq!(saved_run.unwrap(), run);
}
