use super::*;
use std::path::PathBuf;
use std::time::Instant;

fn h100() -> DeviceKey {
    DeviceKey {
        name: "NVIDIA H100 80GB HBM3".to_string(),
        sms: 132,
        driver: "13.0".to_string(),
    }
}

fn h200() -> DeviceKey {
    DeviceKey {
        name: "NVIDIA H200".to_string(),
        ..h100()
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

/// A directory of its own per test, removed after it.
struct Scratch(PathBuf);

impl Scratch {
    fn new(test: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("gemm-tune-{}-{test}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }

    /// The names in the directory, sorted.
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

fn text_of(file: &TuneFile) -> String {
    let mut bytes = Vec::new();
    file.write_to(&mut bytes).unwrap();
    String::from_utf8(bytes).unwrap()
}

fn write_file(path: &Path, entries: Vec<TuneEntry>) {
    let file = TuneFile::new(entries);
    std::fs::write(path, text_of(&file)).unwrap();
}

fn lenient(path: &Path) -> TuneCache {
    TuneCache::read(path, &h100(), CacheReading::Lenient).expect("lenient reading never fails")
}

fn strict_error(path: &Path) -> String {
    TuneCache::read(path, &h100(), CacheReading::Strict)
        .expect_err("strict reading of a bad cache fails")
        .to_string()
}

#[test]
fn entries_of_another_device_are_left_out_and_summed_up() {
    let older_driver = DeviceKey {
        driver: "12.8".to_string(),
        ..h100()
    };
    let fewer_sms = DeviceKey { sms: 114, ..h100() };
    let all = [
        entry(h100(), 16, "a"),
        entry(h200(), 64, "b"),
        entry(h200(), 96, "b"),
        entry(older_driver, 128, "c"),
        entry(fewer_sms, 512, "d"),
    ];
    let cache = TuneCache::for_device(&all, &h100());
    assert_eq!(cache.len(), 1);
    assert_eq!(
        cache.ignored(),
        [
            "1 measured on NVIDIA H100 80GB HBM3 (114 SMs, driver 13.0), not this NVIDIA H100 80GB HBM3 (132 SMs, driver 13.0)",
            "1 measured on NVIDIA H100 80GB HBM3 (132 SMs, driver 12.8), not this NVIDIA H100 80GB HBM3 (132 SMs, driver 13.0)",
            "2 measured on NVIDIA H200 (132 SMs, driver 13.0), not this NVIDIA H100 80GB HBM3 (132 SMs, driver 13.0)",
        ]
    );
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
fn spec_hashes_are_stable() {
    // Pinned: a cache written by one build must match the next.
    assert_eq!(spec_hash(""), "cbf29ce484222325");
    assert_eq!(spec_hash("a"), "af63dc4c8601ec8c");
    assert_ne!(spec_hash("name: a"), spec_hash("name: b"));
}

#[test]
fn a_merge_replaces_the_same_key_and_keeps_every_other_entry() {
    let scratch = Scratch::new("merge");
    let path = scratch.path("cache.json");
    let f16 = TuneEntry {
        dtype: "f16".to_string(),
        out: "f16".to_string(),
        ..entry(h100(), 16, "f16_kernel")
    };
    let padded = TuneEntry {
        stride_align: 16,
        ..entry(h100(), 16, "padded")
    };
    // Problems A of one tuning run, on two boards, with other types and strides.
    let first = vec![
        entry(h100(), 16, "a"),
        entry(h200(), 16, "a_on_h200"),
        entry(h100(), 64, "b"),
        f16.clone(),
        padded.clone(),
    ];
    let counts = TuneFile::merge(&path, first.clone()).unwrap();
    assert_eq!(
        counts,
        MergeCounts {
            added: 5,
            replaced: 0,
            kept: 0
        }
    );
    // Then another run: m = 16 again (another kernel won), and a new problem.
    let counts = TuneFile::merge(
        &path,
        vec![entry(h100(), 16, "a_again"), entry(h100(), 128, "c")],
    )
    .unwrap();
    assert_eq!(
        counts,
        MergeCounts {
            added: 1,
            replaced: 1,
            kept: 4
        }
    );
    assert_eq!(counts.to_string(), "1 added, 1 replaced, 4 kept");
    let file = TuneFile::read(&path).unwrap();
    assert_eq!(
        file.entries,
        [
            entry(h100(), 16, "a_again"),
            entry(h200(), 16, "a_on_h200"),
            entry(h100(), 64, "b"),
            f16,
            padded,
            entry(h100(), 128, "c"),
        ]
    );
    assert!(file.malformed().is_empty());
    // Merged in place: the file holds nothing but the cache and its lock.
    assert_eq!(scratch.listing(), ["cache.json", "cache.json.lock"]);
}

#[test]
fn a_merge_supersedes_every_old_entry_of_its_key_and_the_last_new_one_wins() {
    let mut file = TuneFile::new(vec![
        entry(h100(), 16, "old"),
        entry(h100(), 64, "b"),
        entry(h100(), 16, "older duplicate"),
    ]);
    let counts = file.merge_entries(vec![
        entry(h100(), 16, "first"),
        entry(h100(), 16, "second"),
    ]);
    assert_eq!(
        counts,
        MergeCounts {
            added: 0,
            replaced: 2,
            kept: 1
        }
    );
    assert_eq!(
        file.entries,
        [entry(h100(), 16, "second"), entry(h100(), 64, "b")]
    );
}

#[test]
fn a_merge_keeps_entries_that_do_not_parse_or_name_no_problem() {
    let scratch = Scratch::new("keep-bad");
    let path = scratch.path("cache.json");
    let impossible = entry(h100(), 0, "m_is_zero");
    let unknown_kernel = entry(h100(), 32, "no_such_kernel_anywhere");
    let mut good = TuneFile::new(vec![impossible, unknown_kernel]);
    let mut text = text_of(&good);
    // An entry without its kernel, in the middle of the file.
    text = text.replacen(
        "\n{",
        "\n{\"device\": {\"name\": \"x\", \"sms\": 1, \"driver\": \"1\"}, \"m\": 5},\n{",
        1,
    );
    std::fs::write(&path, &text).unwrap();
    let read = TuneFile::read(&path).unwrap();
    assert_eq!(read.entries, good.entries);
    assert_eq!(read.malformed().len(), 1);
    assert_eq!(read.malformed()[0].index, 0);
    assert!(
        read.malformed()[0].reason.contains("missing field"),
        "{}",
        read.malformed()[0].reason
    );

    let counts = TuneFile::merge(&path, vec![entry(h100(), 16, "a")]).unwrap();
    assert_eq!(
        counts,
        MergeCounts {
            added: 1,
            replaced: 0,
            kept: 3
        }
    );
    let merged = TuneFile::read(&path).unwrap();
    good.entries.push(entry(h100(), 16, "a"));
    assert_eq!(merged.entries, good.entries);
    assert_eq!(merged.malformed().len(), 1);
    assert_eq!(merged.malformed()[0].value, read.malformed()[0].value);

    // A reader uses the good entry, leaves out the impossible one and says why.
    let cache = lenient(&path);
    assert_eq!(cache.len(), 2, "m = 16 and the unknown kernel's m = 32");
    assert!(cache
        .ignored()
        .iter()
        .any(|line| line.contains("0x4096x4096 rr, bf16: m = 0")));
    let error = strict_error(&path);
    assert!(
        error.contains(
            ": 1 entry left out: not format 1's (the first, entry 3: missing field `dtype`)"
        ),
        "{error}"
    );
}

#[test]
fn defects_name_what_no_problem_can_look_up() {
    let cases = [
        (
            TuneEntry {
                batch: 0,
                ..entry(h100(), 16, "a")
            },
            "batch = 0",
        ),
        (
            TuneEntry {
                k: 0,
                ..entry(h100(), 16, "a")
            },
            "k = 0",
        ),
        (
            TuneEntry {
                dtype: "bf17".to_string(),
                ..entry(h100(), 16, "a")
            },
            "unknown element type `bf17`",
        ),
        (
            TuneEntry {
                out: "f64".to_string(),
                ..entry(h100(), 16, "a")
            },
            "unknown output type `f64`",
        ),
        (
            TuneEntry {
                layout: "rx".to_string(),
                ..entry(h100(), 16, "a")
            },
            "unknown layout `rx`",
        ),
        (
            TuneEntry {
                stride_align: 48,
                ..entry(h100(), 16, "a")
            },
            "stride alignment 48 is not a power of two up to 128",
        ),
        (
            TuneEntry {
                spec_hash: "xyz".to_string(),
                ..entry(h100(), 16, "a")
            },
            "spec hash `xyz` is not 16 hex digits",
        ),
    ];
    for (bad, defect) in cases {
        assert_eq!(bad.defect().as_deref(), Some(defect));
    }
    assert_eq!(entry(h100(), 16, "a").defect(), None);
}

#[test]
fn concurrent_writer_threads_lose_no_entry() {
    let scratch = Scratch::new("threads");
    let path = scratch.path("cache.json");
    let (writers, rounds, per_round) = (8u32, 6u32, 5u32);
    std::thread::scope(|scope| {
        for writer in 0..writers {
            let path = &path;
            scope.spawn(move || {
                for round in 0..rounds {
                    let mut measured: Vec<TuneEntry> = (0..per_round)
                        .map(|i| {
                            let m = 1 + (writer * rounds + round) * per_round + i;
                            entry(h100(), m, &format!("writer{writer}"))
                        })
                        .collect();
                    // Every writer also measures one problem they share: one entry survives.
                    measured.push(entry(h200(), 7, &format!("shared_by_{writer}")));
                    TuneFile::merge(path, measured).unwrap();
                }
            });
        }
    });
    let file = TuneFile::read(&path).unwrap();
    let distinct = (writers * rounds * per_round) as usize;
    assert_eq!(file.entries.len(), distinct + 1);
    for writer in 0..writers {
        for m in 0..rounds * per_round {
            let m = 1 + writer * rounds * per_round + m;
            assert!(
                file.entries
                    .contains(&entry(h100(), m, &format!("writer{writer}"))),
                "writer {writer}'s m = {m} was lost"
            );
        }
    }
    assert_eq!(
        file.entries
            .iter()
            .filter(|e| e.kernel.starts_with("shared_by_"))
            .count(),
        1
    );
    assert_eq!(scratch.listing(), ["cache.json", "cache.json.lock"]);
}

#[test]
fn a_bad_file_is_reported_and_the_model_picks_unless_reading_is_strict() {
    let scratch = Scratch::new("bad-files");
    let real = scratch.path("real.json");
    write_file(
        &real,
        (1..=20).map(|m| entry(h100(), m * 16, "a")).collect(),
    );
    let real_text = std::fs::read_to_string(&real).unwrap();
    let truncated = scratch.path("truncated.json");
    std::fs::write(&truncated, &real_text[..300]).unwrap();
    // The issue's file: a real cache's first 300 bytes, then garbage.
    let garbage = scratch.path("garbage.json");
    let mut bytes = real_text.as_bytes()[..300].to_vec();
    bytes.extend((0..200u32).map(|i| (i * 37 % 256) as u8));
    std::fs::write(&garbage, &bytes).unwrap();
    let not_a_cache = scratch.path("package.json");
    std::fs::write(&not_a_cache, r#"{"name": "left-pad", "version": "1.3.0"}"#).unwrap();
    let a_list = scratch.path("list.json");
    std::fs::write(&a_list, "[1, 2]").unwrap();
    let newer = scratch.path("newer.json");
    std::fs::write(
        &newer,
        r#"{"format": 2, "entries": [{"anything": "else"}]}"#,
    )
    .unwrap();
    let newer_same_entries = scratch.path("newer-same-entries.json");
    std::fs::write(
        &newer_same_entries,
        real_text.replacen("\"format\": 1", "\"format\": 2", 1),
    )
    .unwrap();
    let directory = scratch.path("a-directory");
    std::fs::create_dir(&directory).unwrap();
    let loop_a = scratch.path("loop-a");
    let loop_b = scratch.path("loop-b");
    std::os::unix::fs::symlink(&loop_b, &loop_a).unwrap();
    std::os::unix::fs::symlink(&loop_a, &loop_b).unwrap();
    let under_a_file = real.join("cache.json");
    let missing = scratch.path("no-such-dir/cache.json");

    let cases: [(&Path, &str); 11] = [
        (&missing, "there is no such file"),
        (&directory, "it is a directory, not a file"),
        (&loop_a, "cannot read it: Too many levels of symbolic links"),
        (&under_a_file, "cannot read it: Not a directory"),
        (&truncated, "truncated: the text ends inside its JSON"),
        (&garbage, "damaged: not JSON from line"),
        (
            &not_a_cache,
            "not a gemm-dsl tuning cache (missing field `format`",
        ),
        (&a_list, "not a gemm-dsl tuning cache (not a JSON object)"),
        (
            &newer,
            "a cache of format 2, and this gemm-dsl reads format 1",
        ),
        (&newer_same_entries, "a cache of format 2"),
        (&real, ""),
    ];
    for (path, reason) in cases {
        let cache = lenient(path);
        if reason.is_empty() {
            assert_eq!(cache.len(), 20);
            assert!(TuneCache::read(path, &h100(), CacheReading::Strict).is_ok());
            continue;
        }
        assert!(cache.is_empty(), "{}", path.display());
        let error = strict_error(path);
        assert!(
            error.starts_with(&format!("tuning cache {}: {reason}", path.display())),
            "{error}"
        );
    }
    // An empty file (made with `touch`, say) is a cache without entries, no fault.
    let empty = scratch.path("empty.json");
    std::fs::write(&empty, "\n").unwrap();
    assert!(TuneCache::read(&empty, &h100(), CacheReading::Strict)
        .unwrap()
        .is_empty());
}

#[test]
fn a_bad_cache_is_reported_once_per_process() {
    let message = format!("gemm-dsl: test message of process {}", std::process::id());
    assert!(report_once(&message));
    assert!(!report_once(&message));
    assert!(report_once(&format!("{message}, another")));
}

#[test]
fn strict_reading_comes_from_the_environment() {
    // One test sets the variable, so no other test of this process sees it change.
    for (value, reading) in [
        (None, CacheReading::Lenient),
        (Some(""), CacheReading::Lenient),
        (Some("0"), CacheReading::Lenient),
        (Some("1"), CacheReading::Strict),
        (Some("yes"), CacheReading::Strict),
    ] {
        // SAFETY: no other test reads or writes this variable.
        unsafe {
            match value {
                Some(value) => std::env::set_var(TUNE_CACHE_STRICT_VARIABLE, value),
                None => std::env::remove_var(TUNE_CACHE_STRICT_VARIABLE),
            }
        }
        assert_eq!(CacheReading::from_env(), reading, "{value:?}");
    }
    // SAFETY: as above.
    unsafe { std::env::remove_var(TUNE_CACHE_STRICT_VARIABLE) };
}

#[test]
fn a_writer_leaves_a_file_it_must_not_replace_as_it_was() {
    let scratch = Scratch::new("refusals");
    let measured = || vec![entry(h100(), 16, "a")];

    let directory = scratch.path("a-directory");
    std::fs::create_dir(&directory).unwrap();
    let error = TuneFile::merge(&directory, measured())
        .unwrap_err()
        .to_string();
    assert!(
        error.ends_with("a-directory: it is a directory, not a file"),
        "{error}"
    );

    let read_only = scratch.path("read-only.json");
    write_file(&read_only, vec![entry(h200(), 16, "b")]);
    let before = std::fs::read(&read_only).unwrap();
    let mut permissions = std::fs::metadata(&read_only).unwrap().permissions();
    permissions.set_readonly(true);
    std::fs::set_permissions(&read_only, permissions).unwrap();
    let error = TuneFile::merge(&read_only, measured())
        .unwrap_err()
        .to_string();
    assert!(error.contains("it is read-only: not replaced"), "{error}");
    assert_eq!(std::fs::read(&read_only).unwrap(), before);

    let damaged = scratch.path("damaged.json");
    std::fs::write(&damaged, "{\"format\": 1, \"entries\": [{\"dev").unwrap();
    let error = TuneFile::merge(&damaged, measured())
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("truncated")
            && error.contains("not replaced, so that nothing in it is lost"),
        "{error}"
    );
    assert_eq!(
        std::fs::read_to_string(&damaged).unwrap(),
        "{\"format\": 1, \"entries\": [{\"dev"
    );

    let newer = scratch.path("newer.json");
    std::fs::write(&newer, r#"{"format": 2, "entries": []}"#).unwrap();
    let error = TuneFile::merge(&newer, measured()).unwrap_err().to_string();
    assert!(
        error.contains("a cache of format 2") && error.contains("not replaced"),
        "{error}"
    );

    let loop_a = scratch.path("loop-a");
    let loop_b = scratch.path("loop-b");
    std::os::unix::fs::symlink(&loop_b, &loop_a).unwrap();
    std::os::unix::fs::symlink(&loop_a, &loop_b).unwrap();
    let error = TuneFile::merge(&loop_a, measured())
        .unwrap_err()
        .to_string();
    assert!(error.contains("a loop of symbolic links"), "{error}");
    assert!(std::fs::symlink_metadata(&loop_a).unwrap().is_symlink());

    let under_a_file = read_only.join("cache.json");
    let error = TuneFile::merge(&under_a_file, measured())
        .unwrap_err()
        .to_string();
    assert!(error.contains("Not a directory"), "{error}");

    let no_directory = scratch.path("no-such-dir/cache.json");
    let error = TuneFile::merge(&no_directory, measured())
        .unwrap_err()
        .to_string();
    assert!(error.contains("cannot open the lock file"), "{error}");

    // Each check ran before any measuring would: the same answers, nothing written.
    for path in [
        &directory,
        &read_only,
        &damaged,
        &newer,
        &loop_a,
        &no_directory,
    ] {
        assert!(
            TuneFile::check_writable(path).is_err(),
            "{}",
            path.display()
        );
    }
    assert_eq!(
        scratch.listing(),
        [
            "a-directory",
            "damaged.json",
            "damaged.json.lock",
            "loop-a",
            "loop-b",
            "newer.json",
            "newer.json.lock",
            "read-only.json",
        ]
    );
    let fresh = scratch.path("fresh.json");
    TuneFile::check_writable(&fresh).unwrap();
    assert!(!fresh.exists());
}

#[test]
fn a_symbolic_link_is_written_through() {
    let scratch = Scratch::new("link");
    let target = scratch.path("real.json");
    write_file(&target, vec![entry(h200(), 16, "b")]);
    let link = scratch.path("link.json");
    std::os::unix::fs::symlink("real.json", &link).unwrap();
    let counts = TuneFile::merge(&link, vec![entry(h100(), 16, "a")]).unwrap();
    assert_eq!(counts.added, 1);
    assert!(std::fs::symlink_metadata(&link).unwrap().is_symlink());
    assert_eq!(
        TuneFile::read(&target).unwrap().entries,
        [entry(h200(), 16, "b"), entry(h100(), 16, "a")]
    );
    // A dangling link makes its target.
    let dangling = scratch.path("dangling.json");
    std::os::unix::fs::symlink("made.json", &dangling).unwrap();
    TuneFile::merge(&dangling, vec![entry(h100(), 16, "a")]).unwrap();
    assert_eq!(
        TuneFile::read(&scratch.path("made.json")).unwrap().entries,
        [entry(h100(), 16, "a")]
    );
}

#[test]
fn a_cache_of_100000_entries_reads_whole_and_fast() {
    let scratch = Scratch::new("large");
    let path = scratch.path("cache.json");
    let layouts = ["rr", "rc", "cr", "cc"];
    let entries: Vec<TuneEntry> = (0..100_000u32)
        .map(|i| {
            let layout = layout_named(layouts[(i % 4) as usize]).unwrap();
            let problem = Problem::new(1 + i / 4, 4096, 4096, layout);
            TuneEntry {
                layout: layout.name().to_string(),
                device: if i % 2 == 0 { h100() } else { h200() },
                stride_align: stride_align(&problem, 2, 2),
                ..entry(h100(), problem.m, &format!("kernel_{}", i % 37))
            }
        })
        .collect();
    TuneFile::merge(&path, entries.clone()).unwrap();
    let bytes = std::fs::metadata(&path).unwrap().len();
    let start = Instant::now();
    let cache = TuneCache::read(&path, &h100(), CacheReading::Strict).unwrap();
    let elapsed = start.elapsed();
    eprintln!(
        "read a cache of {} entries ({:.1} MB) in {:.0} ms ({} build)",
        entries.len(),
        bytes as f64 / 1e6,
        elapsed.as_secs_f64() * 1e3,
        if cfg!(debug_assertions) {
            "debug"
        } else {
            "release"
        }
    );
    assert_eq!(cache.len(), 50_000);
    for e in entries.iter().filter(|e| e.device == h100()) {
        let layout = layout_named(&e.layout).unwrap();
        let problem = Problem::new(e.m, e.n, e.k, layout);
        assert_eq!(
            cache.lookup(&problem, DType::Bf16, DType::Bf16),
            Some((e.kernel.as_str(), e.spec_hash.as_str()))
        );
    }
    // The time that counts is a release build's (`cargo bench -p gemm-runtime --bench
    // tune`: about 0.2 s); an unoptimised test build takes seconds, so this bound only
    // catches a reader gone quadratic (10^10 steps at this size), on however busy a machine.
    assert!(elapsed.as_secs_f64() < 30.0, "{elapsed:?}");
}
