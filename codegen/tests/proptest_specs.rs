//! Property tests over random specs drawn from every key and value of the language, numbers
//! up to u32::MAX and beyond included: a valid spec always emits (and, for a sample, assembles
//! to its promised SASS); an invalid one is always an error located in the text with a help,
//! never a panic.
//!
//! The seed is fixed, so CI runs the same cases every time; set `PROPTEST_RNG_SEED` to explore
//! others.

use gemm_dsl::{check_str, SpecErrors, ValidSpec};
use proptest::prelude::*;
use proptest::sample::select;
use proptest::test_runner::{RngSeed, TestRunner};
use std::cell::RefCell;
use std::collections::BTreeMap;

/// Cases of the main property: at least 10^4, each parsing and validating one spec and, when
/// it is valid, emitting and explaining it (about 30 s in all on two loaded cores).
const SPEC_CASES: u32 = 20_000;

/// Valid specs assembled with ptxas and disassembled with nvdisasm (about half a second each).
const ASSEMBLED_CASES: u32 = 64;

fn config(cases: u32) -> ProptestConfig {
    let default = ProptestConfig::default();
    let rng_seed = match std::env::var_os("PROPTEST_RNG_SEED") {
        Some(_) => default.rng_seed,
        None => RngSeed::Fixed(0x6e6d_6d5f_7370_6563),
    };
    ProptestConfig {
        cases,
        rng_seed,
        // A fixed seed replays a failure by itself; past failures are explicit cases in
        // `past_failures_stay_fixed`, not a regression file.
        failure_persistence: None,
        ..default
    }
}

/// One of the given texts.
fn one_of(values: &'static [&'static str]) -> BoxedStrategy<String> {
    select(values).prop_map(str::to_string).boxed()
}

/// Nine times in ten `usual`, else `rare`.
fn mostly(usual: BoxedStrategy<String>, rare: BoxedStrategy<String>) -> BoxedStrategy<String> {
    prop_oneof![9 => usual, 1 => rare].boxed()
}

/// Numbers no spec should accept, at and beyond the limits of the types they are read into.
const EDGE_NUMBERS: &[&str] = &[
    "0",
    "1023",
    "16384",
    "16385",
    "65535",
    "65536",
    "1073741824",
    "4294967295",
    "4294967296",
    "18446744073709551615",
    "18446744073709551616",
    "340282366920938463463374607431768211456",
];

/// Any small number, any u32, or one at the edges of u32 and u64.
fn wild_number() -> BoxedStrategy<String> {
    prop_oneof![
        2 => (0u32..=1024).prop_map(|n| n.to_string()),
        1 => any::<u32>().prop_map(|n| n.to_string()),
        1 => select(EDGE_NUMBERS).prop_map(str::to_string),
    ]
    .boxed()
}

/// A number as a spec writes it: one of `plausible`, or one time in `1 + wildness` a wild one.
fn number(plausible: &'static [u32], wildness: u32) -> BoxedStrategy<String> {
    prop_oneof![
        wildness => select(plausible).prop_map(|n| n.to_string()),
        1 => wild_number(),
    ]
    .boxed()
}

/// Numbers in the specs close to a family: wild one time in 50.
fn tame(plausible: &'static [u32]) -> BoxedStrategy<String> {
    number(plausible, 49)
}

/// `ROWSxCOLS`, `BMxBNxBK`, `pad(BYTES)`, `tma(multicast = N)` of numbers.
fn grid(rows: BoxedStrategy<String>, cols: BoxedStrategy<String>) -> BoxedStrategy<String> {
    (rows, cols).prop_map(|(r, c)| format!("{r}x{c}")).boxed()
}

fn tile(
    m: BoxedStrategy<String>,
    n: BoxedStrategy<String>,
    k: BoxedStrategy<String>,
) -> BoxedStrategy<String> {
    (m, n, k)
        .prop_map(|(m, n, k)| format!("{m}x{n}x{k}"))
        .boxed()
}

fn pad(bytes: BoxedStrategy<String>) -> BoxedStrategy<String> {
    bytes.prop_map(|b| format!("pad({b})")).boxed()
}

fn multicast(blocks: BoxedStrategy<String>) -> BoxedStrategy<String> {
    blocks.prop_map(|n| format!("tma(multicast = {n})")).boxed()
}

/// `persistent` in each of its forms.
fn persistent(group: BoxedStrategy<String>) -> BoxedStrategy<String> {
    let raster = select(&["", "raster = m, ", "raster = n, ", "raster = n"][..]);
    prop_oneof![
        1 => Just("persistent".to_string()),
        3 => (raster, group).prop_map(|(raster, group)| match raster {
            "raster = n" => "persistent(raster = n)".to_string(),
            raster => format!("persistent({raster}group = {group})"),
        }),
    ]
    .boxed()
}

/// Spec entries: each a `key: value` pair, or `None` to leave the key at its default.
type Entry = BoxedStrategy<Option<String>>;

fn always(key: &'static str, value: BoxedStrategy<String>) -> Entry {
    value.prop_map(move |v| Some(format!("{key}: {v}"))).boxed()
}

fn sometimes(probability: f64, key: &'static str, value: BoxedStrategy<String>) -> Entry {
    proptest::option::weighted(probability, value.prop_map(move |v| format!("{key}: {v}"))).boxed()
}

/// The given entries in a random order (the parser must not care), joined into a spec.
fn spec_of(entries: Vec<Entry>) -> BoxedStrategy<String> {
    entries
        .prop_map(|entries| entries.into_iter().flatten().collect::<Vec<_>>())
        .prop_shuffle()
        .prop_map(|entries| entries.join(", "))
        .boxed()
}

const ARCHS: &[&str] = &["sm_80", "sm_86", "sm_89", "sm_90", "sm_90a"];
const DTYPES: &[&str] = &["f16", "bf16", "tf32", "f32"];
const LAYOUTS: &[&str] = &["rr", "rc", "cr", "cc"];
const COPIES: &[&str] = &["sync", "cp_async", "cp_async(cg)", "cp_async(ca)", "tma"];
/// Copy vectors narrower than 16 bytes, legal and not (`cg` copies only 16, cp.async at
/// least 4, f32 at least 4, 12 is no power of two).
const NARROW_COPIES: &[&str] = &[
    "cp_async(ca, vector = 4)",
    "cp_async(ca, vector = 8)",
    "sync(vector = 2)",
    "sync(vector = 4)",
    "sync(vector = 8)",
    "cp_async(cg, vector = 8)",
    "cp_async(ca, vector = 2)",
    "sync(vector = 12)",
];
const XOR_SWIZZLES: &[&str] = &["none", "32B", "64B", "128B"];
const EPILOGUES: &[&str] = &["direct", "tma"];

/// Names: nearly always `prop`; rarely one that is no identifier or a Rust keyword.
fn name() -> BoxedStrategy<String> {
    prop_oneof![
        40 => Just("prop".to_string()),
        1 => one_of(&["_k", "k_9", "fn", "self", "Self", "type", "async", "9k", "_", "a-b"]),
    ]
    .boxed()
}

/// Keys a family rarely has, at their legal values or not.
fn rare_keys(probability: f64) -> Vec<Entry> {
    vec![
        sometimes(probability, "acc", one_of(DTYPES)),
        sometimes(probability, "layout", one_of(LAYOUTS)),
        sometimes(probability, "cluster", grid(tame(&[1, 2]), tame(&[1, 2]))),
        sometimes(probability, "consumers", tame(&[1, 2])),
        sometimes(probability, "epilogue", one_of(EPILOGUES)),
    ]
}

/// Specs close to the SIMT family (`mma: fma`): most values legal for it, some not.
fn simt_like() -> BoxedStrategy<String> {
    let mut entries = vec![
        always("name", name()),
        always("arch", one_of(ARCHS)),
        sometimes(0.5, "mma", one_of(&["fma"])),
        sometimes(0.3, "dtype", mostly(one_of(&["f32"]), one_of(DTYPES))),
        sometimes(0.05, "out", one_of(&["f32", "bf16"])),
        always(
            "tile",
            tile(
                tame(&[32, 64, 128, 256]),
                tame(&[32, 64, 128, 256]),
                tame(&[4, 8, 16, 32]),
            ),
        ),
        sometimes(0.3, "warps", grid(tame(&[1, 2, 4, 8]), tame(&[1, 2, 4]))),
        sometimes(0.7, "stages", tame(&[1, 2, 3, 4, 5, 8, 9])),
        sometimes(
            0.4,
            "swizzle",
            mostly(
                one_of(&["none", "pad(16)", "pad(32)"]),
                prop_oneof![one_of(XOR_SWIZZLES), pad(tame(&[0, 4, 1024, 1040]))].boxed(),
            ),
        ),
        sometimes(
            0.7,
            "copy",
            mostly(
                prop_oneof![3 => one_of(&COPIES[..4]), 1 => one_of(&NARROW_COPIES[..5])].boxed(),
                prop_oneof![
                    one_of(COPIES),
                    one_of(NARROW_COPIES),
                    multicast(tame(&[1, 2]))
                ]
                .boxed(),
            ),
        ),
        sometimes(0.03, "schedule", persistent(tame(&[8]))),
    ];
    entries.extend(rare_keys(0.03));
    spec_of(entries)
}

/// Specs close to the Ampere tensor-core family (`mma: mma_sync`).
fn mma_sync_like() -> BoxedStrategy<String> {
    let mut entries = vec![
        always("name", name()),
        always("arch", one_of(ARCHS)),
        always("mma", one_of(&["mma_sync"])),
        sometimes(
            0.9,
            "dtype",
            mostly(one_of(&["bf16", "f16", "tf32"]), one_of(DTYPES)),
        ),
        sometimes(0.3, "out", mostly(one_of(&["f32"]), one_of(DTYPES))),
        always(
            "tile",
            tile(
                tame(&[32, 64, 96, 128, 256]),
                tame(&[32, 64, 128, 256]),
                tame(&[16, 32, 64]),
            ),
        ),
        sometimes(0.6, "warps", grid(tame(&[1, 2, 4]), tame(&[1, 2, 4]))),
        sometimes(0.7, "stages", tame(&[1, 2, 3, 4, 5, 6])),
        sometimes(
            0.5,
            "swizzle",
            mostly(
                prop_oneof![one_of(XOR_SWIZZLES), pad(tame(&[16, 32]))].boxed(),
                pad(tame(&[0, 8, 1024, 1040])),
            ),
        ),
        sometimes(
            0.5,
            "copy",
            mostly(
                prop_oneof![3 => one_of(&COPIES[..4]), 1 => one_of(&NARROW_COPIES[..5])].boxed(),
                prop_oneof![
                    one_of(&["tma"]),
                    one_of(NARROW_COPIES),
                    multicast(tame(&[2, 4]))
                ]
                .boxed(),
            ),
        ),
        sometimes(
            0.3,
            "schedule",
            mostly(
                prop_oneof![one_of(&["tile"]), persistent(tame(&[1, 3, 8, 64]))].boxed(),
                persistent(tame(&[0, 65])),
            ),
        ),
    ];
    entries.extend(rare_keys(0.03));
    spec_of(entries)
}

/// Specs close to the Hopper family (`mma: wgmma`).
fn wgmma_like() -> BoxedStrategy<String> {
    spec_of(vec![
        always("name", name()),
        always("arch", mostly(one_of(&["sm_90a"]), one_of(ARCHS))),
        always("mma", one_of(&["wgmma"])),
        sometimes(
            0.8,
            "dtype",
            mostly(one_of(&["bf16", "f16"]), one_of(DTYPES)),
        ),
        sometimes(0.1, "acc", one_of(DTYPES)),
        sometimes(0.3, "out", one_of(DTYPES)),
        sometimes(0.1, "layout", one_of(LAYOUTS)),
        sometimes(
            0.8,
            "tile",
            tile(
                tame(&[64, 128, 192, 256]),
                tame(&[64, 128, 192, 256]),
                tame(&[16, 32, 64, 128]),
            ),
        ),
        sometimes(0.6, "consumers", tame(&[1, 2, 3, 4, 5])),
        sometimes(0.1, "warps", grid(tame(&[4, 8]), tame(&[1, 2]))),
        sometimes(0.7, "stages", tame(&[2, 3, 4, 5, 6])),
        sometimes(0.4, "swizzle", one_of(XOR_SWIZZLES)),
        sometimes(
            0.6,
            "copy",
            prop_oneof![2 => one_of(&["tma", "cp_async"]), 1 => multicast(tame(&[2, 4]))].boxed(),
        ),
        sometimes(
            0.4,
            "schedule",
            prop_oneof![one_of(&["tile"]), persistent(tame(&[1, 8, 64]))].boxed(),
        ),
        sometimes(0.4, "cluster", grid(tame(&[1, 2, 4]), tame(&[1, 2]))),
        sometimes(0.4, "epilogue", one_of(EPILOGUES)),
    ])
}

/// Hopper specs drawn from the values the family takes (sm_90a, 16-bit types, its tiles,
/// one or two consumers, TMA, a cluster with its multicast), so that many are valid: the
/// wild draws of [`wgmma_like`] are valid one time in twenty.
fn wgmma_plausible() -> BoxedStrategy<String> {
    let cluster = prop_oneof![
        2 => Just(String::new()),
        1 => Just(", cluster: 2x1, copy: tma(multicast = 2)".to_string()),
        1 => Just(", cluster: 1x2, copy: tma(multicast = 2)".to_string()),
    ];
    (
        spec_of(vec![
            always("name", name()),
            always("arch", one_of(&["sm_90a"])),
            always("mma", one_of(&["wgmma"])),
            sometimes(0.7, "dtype", one_of(&["bf16", "f16"])),
            sometimes(0.3, "out", one_of(&["bf16", "f16", "f32"])),
            sometimes(0.3, "layout", one_of(LAYOUTS)),
            sometimes(
                0.8,
                "tile",
                tile(
                    one_of(&["64", "128", "256"]),
                    one_of(&["64", "128", "256"]),
                    one_of(&["32", "64"]),
                ),
            ),
            sometimes(0.5, "consumers", one_of(&["1", "2"])),
            sometimes(0.6, "stages", one_of(&["2", "3", "4", "5", "6"])),
            sometimes(
                0.4,
                "schedule",
                one_of(&[
                    "tile",
                    "persistent",
                    "persistent(raster = n, group = 4)",
                    "persistent(tail = stream_k)",
                ]),
            ),
            sometimes(0.3, "epilogue", one_of(EPILOGUES)),
        ]),
        cluster,
    )
        .prop_map(|(spec, cluster)| spec + &cluster)
        .boxed()
}

/// Every key with every value, each key given half the time, numbers wild one time in three.
fn anything() -> BoxedStrategy<String> {
    const SMALL: &[u32] = &[0, 1, 2, 3, 4, 8, 16, 32, 64, 128, 256];
    let loose = || number(SMALL, 2);
    spec_of(vec![
        sometimes(0.8, "name", name()),
        sometimes(0.5, "arch", one_of(ARCHS)),
        sometimes(0.5, "mma", one_of(&["fma", "mma_sync", "wgmma"])),
        sometimes(0.5, "dtype", one_of(DTYPES)),
        sometimes(0.5, "acc", one_of(DTYPES)),
        sometimes(0.5, "out", one_of(DTYPES)),
        sometimes(0.5, "layout", one_of(LAYOUTS)),
        sometimes(0.5, "tile", tile(loose(), loose(), loose())),
        sometimes(0.5, "warps", grid(loose(), loose())),
        sometimes(0.5, "consumers", loose()),
        sometimes(0.5, "stages", loose()),
        sometimes(
            0.5,
            "swizzle",
            prop_oneof![one_of(XOR_SWIZZLES), pad(loose())].boxed(),
        ),
        sometimes(
            0.5,
            "copy",
            prop_oneof![one_of(COPIES), one_of(NARROW_COPIES), multicast(loose())].boxed(),
        ),
        sometimes(
            0.5,
            "schedule",
            prop_oneof![one_of(&["tile"]), persistent(loose())].boxed(),
        ),
        sometimes(0.5, "cluster", grid(loose(), loose())),
        sometimes(0.5, "epilogue", one_of(EPILOGUES)),
    ])
}

/// Random spec text: mostly close to one family (so many are valid), sometimes anything.
fn spec_text() -> BoxedStrategy<String> {
    prop_oneof![
        3 => simt_like(),
        4 => mma_sync_like(),
        2 => wgmma_like(),
        2 => wgmma_plausible(),
        2 => anything(),
    ]
    .boxed()
}

/// A valid spec emits a kernel named after it, with the validator's block size, and explains
/// itself; its canonical text is valid again and means the same spec.
fn check_valid(text: &str, valid: &ValidSpec) -> Result<(), TestCaseError> {
    let emitted = gemm_codegen::emit(valid);
    let entry = format!(".visible .entry {}(", valid.spec.name);
    prop_assert!(emitted.ptx().contains(&entry), "{}: no `{}`", text, entry);
    prop_assert_eq!(
        emitted.launch().threads_per_block,
        valid.threads_per_block(),
        "{}",
        text
    );
    prop_assert_eq!(
        u64::from(emitted.launch().dynamic_smem_bytes),
        valid.smem.total()
    );
    prop_assert!(!emitted.expected_sass().is_empty(), "{}", text);
    let explained = gemm_codegen::explain::explain(valid, Err("not assembled in this test"));
    prop_assert!(explained.starts_with("spec: "), "{}", text);
    let again = check_str(&valid.spec.to_spec_text());
    prop_assert!(again.is_ok(), "{} written back is invalid", text);
    prop_assert_eq!(&again.unwrap().spec, &valid.spec);
    Ok(())
}

/// Every error of an invalid spec lies within the text's one line and carries a help.
fn check_invalid(text: &str, errors: &SpecErrors) -> Result<(), TestCaseError> {
    prop_assert!(!errors.0.is_empty());
    for error in errors.iter() {
        let (start, end) = (error.span.start(), error.span.end());
        prop_assert_eq!(start.line, 1, "{}: {}", text, error.message);
        prop_assert_eq!(end.line, 1, "{}: {}", text, error.message);
        prop_assert!(
            start.column <= end.column && end.column <= text.chars().count(),
            "{}: {} at {}..{}",
            text,
            error.message,
            start.column,
            end.column
        );
        prop_assert!(
            error.help.is_some(),
            "{}: no help for: {}",
            text,
            error.message
        );
    }
    let rendered = errors.render(text, "prop");
    prop_assert!(rendered.contains(" --> prop:1:"), "{}", rendered);
    prop_assert!(rendered.contains('^'), "{}", rendered);
    for error in errors.iter().filter(|error| !error.fix.is_empty()) {
        check_fix(text, error)?;
    }
    Ok(())
}

/// The spec's `key: value` entries as written (split at commas outside parentheses).
fn entries(text: &str) -> Vec<&str> {
    let mut entries = Vec::new();
    let (mut depth, mut start) = (0i32, 0);
    for (i, c) in text.char_indices().chain([(text.len(), ',')]) {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                entries.push(text[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    entries.retain(|entry| !entry.is_empty());
    entries
}

/// The spec with the error's fix applied (its keys' entries replaced, at the end), and the
/// columns of the values the fix wrote.
fn apply_fix(text: &str, fix: &[(gemm_dsl::Key, String)]) -> (String, Vec<(usize, usize)>) {
    let fixed_key = |entry: &str| {
        let key = entry.split(':').next().unwrap_or("").trim();
        fix.iter().any(|(k, _)| k.name() == key)
    };
    let mut fixed = entries(text)
        .into_iter()
        .filter(|entry| !fixed_key(entry))
        .collect::<Vec<_>>()
        .join(", ");
    let mut values = Vec::new();
    for (key, value) in fix {
        if !fixed.is_empty() {
            fixed.push_str(", ");
        }
        fixed.push_str(&format!("{}: ", key.name()));
        let start = fixed.chars().count();
        fixed.push_str(value);
        values.push((start, fixed.chars().count()));
    }
    (fixed, values)
}

/// Applying an error's suggested fix leaves no error on the keys it set.
fn check_fix(text: &str, error: &gemm_dsl::SpecError) -> Result<(), TestCaseError> {
    let (fixed, values) = apply_fix(text, &error.fix);
    if let Err(after) = check_str(&fixed) {
        for again in after.iter() {
            let column = again.span.start().column;
            prop_assert!(
                !values
                    .iter()
                    .any(|&(start, end)| (start..end).contains(&column)),
                "{}\n  error: {}\n  fix: {:?}\n{}\n  error again: {}\n  help: {:?}",
                text,
                error.message,
                error.fix,
                fixed,
                again.message,
                again.help
            );
        }
    }
    Ok(())
}

#[test]
fn valid_specs_emit_and_invalid_ones_are_located_errors() {
    let mut runner = TestRunner::new(config(SPEC_CASES));
    // Valid and invalid cases per family, so neither half of the property goes untested.
    let seen: RefCell<BTreeMap<(String, bool), u32>> = RefCell::default();
    runner
        .run(&spec_text(), |text| {
            let result = check_str(&text);
            let family = gemm_dsl::parse_str(&text)
                .map_or("unparsed", |parsed| parsed.spec.mma.name())
                .to_string();
            *seen
                .borrow_mut()
                .entry((family, result.is_ok()))
                .or_default() += 1;
            match result {
                Ok(valid) => check_valid(&text, &valid),
                Err(errors) => check_invalid(&text, &errors),
            }
        })
        .unwrap();
    let seen = seen.into_inner();
    eprintln!("(family, valid) -> cases: {seen:?}");
    let count =
        |family: &str, valid: bool| seen.get(&(family.to_string(), valid)).copied().unwrap_or(0);
    for family in ["fma", "mma_sync"] {
        assert!(count(family, true) >= 500, "{family}: {seen:?}");
        assert!(count(family, false) >= 1000, "{family}: {seen:?}");
    }
    assert!(count("wgmma", true) >= 1000, "{seen:?}");
    assert!(count("wgmma", false) >= 1000, "{seen:?}");
    assert!(count("unparsed", false) >= 200, "{seen:?}");
    assert!(seen.values().sum::<u32>() >= SPEC_CASES, "{seen:?}");
}

#[test]
fn valid_specs_assemble_to_their_promised_sass() {
    let mut runner = TestRunner::new(ProptestConfig {
        // Invalid draws are skipped, not counted.
        max_global_rejects: 100_000,
        ..config(ASSEMBLED_CASES)
    });
    let valid_text = spec_text().prop_filter("valid specs only", |text| check_str(text).is_ok());
    let assembled: RefCell<BTreeMap<&'static str, u32>> = RefCell::default();
    runner
        .run(&valid_text, |text| {
            let valid = check_str(&text).unwrap();
            *assembled
                .borrow_mut()
                .entry(valid.spec.mma.name())
                .or_default() += 1;
            let emitted = gemm_codegen::emit(&valid);
            let report =
                gemm_codegen::sass::SassReport::from_ptx(emitted.ptx(), valid.spec.arch.name())
                    .unwrap_or_else(|error| panic!("{text}: {error}"));
            let resources = report.resources.as_ref().unwrap();
            prop_assert!(!resources.spills(), "{}: {}", text, resources);
            prop_assert!(resources.warnings.is_empty(), "{}: {}", text, resources);
            if let Err(mismatch) = report.require(emitted.expected_sass()) {
                prop_assert!(false, "{}: {}", text, mismatch);
            }
            Ok(())
        })
        .unwrap();
    // Each family's kernels are among those assembled, the Hopper family's too.
    let assembled = assembled.into_inner();
    eprintln!("assembled per family: {assembled:?}");
    for family in ["fma", "mma_sync", "wgmma"] {
        let count = assembled.get(family).copied().unwrap_or(0);
        assert!(count >= ASSEMBLED_CASES / 8, "{family}: {assembled:?}");
    }
}

/// Invalid specs whose helps are applied by [`helps_that_name_a_value_are_fixes`].
const HELP_CASES: u32 = 6_000;

/// An edit a help proposes: keys set to the value text, or a key left out.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Edit {
    Set(Vec<(gemm_dsl::Key, String)>),
    LeaveOut(gemm_dsl::Key),
}

impl Edit {
    fn keys(&self) -> Vec<gemm_dsl::Key> {
        match self {
            Edit::Set(entries) => entries.iter().map(|(key, _)| *key).collect(),
            Edit::LeaveOut(key) => vec![*key],
        }
    }

    /// The spec with the edit made.
    fn apply(&self, text: &str) -> String {
        match self {
            Edit::Set(entries) => apply_fix(text, entries).0,
            Edit::LeaveOut(key) => entries(text)
                .into_iter()
                .filter(|entry| entry.split(':').next().unwrap_or("").trim() != key.name())
                .collect::<Vec<_>>()
                .join(", "),
        }
    }
}

/// The edits a help names concretely. A help is alternatives (`X, or Y`, `X; or Y`,
/// `X (or Y)`, `.., e.g. X`, and within one `dtype: bf16 or f16`); an alternative is an edit
/// when it is spec text (`key: value`, several keys at once too), bare or followed by a
/// remark on what it does (` (..)`, ` fits ..`, ` gives ..`), or `leave `key:` out`. An
/// alternative with a condition (` with ..`, ` at most ..`) or in prose (`a smaller tile`,
/// `only .. is implemented so far`) is advice, and is not applied.
fn concrete_edits(help: &str) -> Vec<Edit> {
    let mut alternatives = vec![help.to_string()];
    for separator in ["; or ", ", or ", " (or ", ", e.g. "] {
        alternatives = alternatives
            .iter()
            .flat_map(|a| a.split(separator).map(str::to_string).collect::<Vec<_>>())
            .collect();
    }
    let mut edits = Vec::new();
    for alternative in alternatives {
        let mut text = alternative.trim();
        if text.matches(')').count() > text.matches('(').count() {
            text = text.strip_suffix(')').unwrap_or(text);
        }
        for prefix in ["use ", "e.g. "] {
            text = text.strip_prefix(prefix).unwrap_or(text);
        }
        if let Some(key) = text
            .strip_prefix("leave `")
            .and_then(|rest| rest.split_once(":` out"))
            .and_then(|(key, _)| gemm_dsl::Key::from_name(key))
        {
            edits.push(Edit::LeaveOut(key));
            continue;
        }
        // `dtype: bf16 or f16`: a bare value takes the key before it.
        let mut last_key: Option<String> = None;
        for piece in text.split(" or ") {
            let piece = match (&last_key, piece.contains(':')) {
                (Some(key), false) => format!("{key}: {piece}"),
                _ => piece.to_string(),
            };
            let remark = [" (", " fits", " gives", " with ", " at most"]
                .iter()
                .filter_map(|marker| piece.find(marker).map(|at| (at, *marker)))
                .min();
            let (spec, conditional) = match remark {
                Some((at, marker)) => (&piece[..at], [" with ", " at most"].contains(&marker)),
                None => (piece.as_str(), false),
            };
            let set: Option<Vec<(gemm_dsl::Key, String)>> = entries(spec)
                .into_iter()
                .map(|entry| {
                    let (key, value) = entry.split_once(':')?;
                    Some((
                        gemm_dsl::Key::from_name(key.trim())?,
                        value.trim().to_string(),
                    ))
                })
                .collect();
            if let Some(set) = set.filter(|set| !set.is_empty()) {
                last_key = set.last().map(|(key, _)| key.name().to_string());
                if !conditional && gemm_dsl::parse_str(spec).is_ok() {
                    edits.push(Edit::Set(set));
                }
            }
        }
    }
    edits
}

/// A rule as the coverage counts it: its message with the numbers and quoted values out.
fn rule_of(message: &str) -> String {
    let mut rule = String::new();
    let mut quoted = false;
    for c in message.chars() {
        match c {
            '`' => {
                quoted = !quoted;
                rule.push_str(if quoted { "`.." } else { "`" });
            }
            _ if quoted => {}
            '0'..='9' if rule.ends_with('N') => {}
            '0'..='9' => rule.push('N'),
            _ => rule.push(c),
        }
    }
    rule
}

/// What applying a help's edits showed: the rules whose helps were applied, and those whose
/// edit was followed by another rule's error on the same keys (an error the first one hid:
/// rules that need the range checks or the family's scope to pass first run only then).
#[derive(Default)]
struct HelpsApplied {
    applied: Vec<String>,
    followed: Vec<String>,
}

/// Applying an edit a help names fixes the error: the spec no longer fails with it (no
/// error of the same rule on the same key), and the edit leads to no value the family does
/// not implement, on the error's key or the keys it sets (issue 38, 8.1: the help proposed
/// a tile under which the swizzle was not implemented either).
fn check_helps(text: &str, errors: &SpecErrors) -> Result<HelpsApplied, TestCaseError> {
    let mut seen = HelpsApplied::default();
    for error in errors.iter() {
        let Some(help) = &error.help else { continue };
        let rule = rule_of(&error.message);
        for edit in concrete_edits(help) {
            let fixed = edit.apply(text);
            let keys = edit.keys();
            let mut followed = false;
            if let Err(after) = check_str(&fixed) {
                for again in after.iter() {
                    let Some(key) = again.key else { continue };
                    let on_its_keys = error.key == Some(key) || keys.contains(&key);
                    let failure = if error.key == Some(key) && rule_of(&again.message) == rule {
                        Some("the same error again")
                    } else if on_its_keys && again.message.contains("not implemented yet") {
                        Some("a value the family does not implement")
                    } else {
                        None
                    };
                    prop_assert!(
                        failure.is_none(),
                        "{}\n  error: {}\n  help: {}\n  applied: {:?}\n{}\n  {}: {}\n  help: {:?}",
                        text,
                        error.message,
                        help,
                        edit,
                        fixed,
                        failure.unwrap_or_default(),
                        again.message,
                        again.help
                    );
                    followed |= on_its_keys;
                }
            }
            seen.applied.push(rule.clone());
            if followed {
                seen.followed.push(rule.clone());
            }
        }
    }
    Ok(seen)
}

/// A help must be a fix (issue 38, 8.1: following "use a tile with BK·sizeof(f32) a
/// multiple of 128, or swizzle: none" led to "`swizzle: 128B` is not implemented yet"). Over
/// random invalid specs, every edit a help names concretely is applied (see
/// [`concrete_edits`]; helps in prose are not), and must fix its error ([`check_helps`]).
#[test]
fn helps_that_name_a_value_are_fixes() {
    let mut runner = TestRunner::new(ProptestConfig {
        max_global_rejects: 100_000,
        ..config(HELP_CASES)
    });
    let invalid = spec_text().prop_filter("invalid specs only", |text| check_str(text).is_err());
    // Per rule: errors seen, helps applied, and of those followed by another rule's error.
    let seen: RefCell<BTreeMap<String, [u32; 3]>> = RefCell::default();
    runner
        .run(&invalid, |text| {
            let errors = check_str(&text).unwrap_err();
            let helps = check_helps(&text, &errors)?;
            let mut seen = seen.borrow_mut();
            for error in errors.iter() {
                seen.entry(rule_of(&error.message)).or_default()[0] += 1;
            }
            for rule in helps.applied {
                seen.entry(rule).or_default()[1] += 1;
            }
            for rule in helps.followed {
                seen.entry(rule).or_default()[2] += 1;
            }
            Ok(())
        })
        .unwrap();
    let seen = seen.into_inner();
    let applied_rules = seen.values().filter(|counts| counts[1] > 0).count();
    eprintln!(
        "rules seen {}, with a help applied {applied_rules}; per rule: errors, helps applied, \
         of which followed by another rule's error on the same keys:",
        seen.len()
    );
    for (rule, [errors, applied, followed]) in &seen {
        eprintln!("  {errors:5} {applied:5} {followed:5}  {rule}");
    }
    assert!(applied_rules >= 20, "{seen:?}");
    let unimplemented = seen
        .get("`..` is not implemented yet for this family")
        .copied()
        .unwrap_or_default();
    assert!(
        unimplemented[1] > 0,
        "no help of an unimplemented value applied: {seen:?}"
    );
}

/// The reproductions of issue 38, 8.1: a SIMT spec with an XOR swizzle, its rows narrower
/// than the swizzle's span or not; the help proposes `swizzle: none`, which holds.
#[test]
fn an_xor_swizzle_on_simt_is_fixed_by_its_help() {
    for text in [
        "name: k, arch: sm_80, tile: 128x128x8, swizzle: 128B",
        "name: k, arch: sm_80, tile: 128x128x32, swizzle: 128B",
        "name: k, arch: sm_80, tile: 128x128x16, swizzle: 64B",
    ] {
        let errors = check_str(text).unwrap_err();
        assert_eq!(errors.0.len(), 1, "{text}: {errors:?}");
        let error = &errors.0[0];
        assert!(
            error.message.contains("not implemented yet"),
            "{text}: {error:?}"
        );
        assert_eq!(error.help.as_deref(), Some("swizzle: none"), "{text}");
        assert_eq!(
            concrete_edits("swizzle: none"),
            [Edit::Set(vec![(
                gemm_dsl::Key::Swizzle,
                "none".to_string()
            )])]
        );
        let helps = check_helps(text, &errors).unwrap_or_else(|f| panic!("{text}: {f}"));
        assert!(helps.followed.is_empty(), "{text}");
        let fixed = Edit::Set(error.fix.clone()).apply(text);
        assert!(check_str(&fixed).is_ok(), "{fixed}");
    }
}

#[test]
fn helps_are_read_as_the_edits_they_name() {
    use gemm_dsl::Key;
    let set = |entries: &[(Key, &str)]| {
        Edit::Set(entries.iter().map(|(k, v)| (*k, v.to_string())).collect())
    };
    for (help, edits) in [
        (
            "stages: 5 fits (163840 B); or a smaller tile",
            vec![set(&[(Key::Stages, "5")])],
        ),
        (
            "use arch: sm_90a, or mma: mma_sync",
            vec![
                set(&[(Key::Arch, "sm_90a")]),
                set(&[(Key::Mma, "mma_sync")]),
            ],
        ),
        (
            "dtype: bf16 or f16, or mma: fma",
            vec![
                set(&[(Key::Dtype, "bf16")]),
                set(&[(Key::Dtype, "f16")]),
                set(&[(Key::Mma, "fma")]),
            ],
        ),
        (
            "mma: wgmma, arch: sm_90a (or dtype: bf16)",
            vec![
                set(&[(Key::Mma, "wgmma"), (Key::Arch, "sm_90a")]),
                set(&[(Key::Dtype, "bf16")]),
            ],
        ),
        (
            "copy: cp_async with 2 or more stages, or schedule: tile",
            vec![set(&[(Key::Schedule, "tile")])],
        ),
        (
            "stages: 8 at most, fewer where shared memory runs out",
            vec![],
        ),
        (
            "warps: 2x2 gives each warp a smaller tile",
            vec![set(&[(Key::Warps, "2x2")])],
        ),
        (
            "leave `consumers:` out: it applies to `mma: wgmma` only",
            vec![Edit::LeaveOut(Key::Consumers)],
        ),
        (
            "copy: tma(multicast = 2)",
            vec![set(&[(Key::Copy, "tma(multicast = 2)")])],
        ),
        (
            "leave `warps:` out for the family's grid for the tile, or warps: ROWSxCOLS",
            vec![Edit::LeaveOut(Key::Warps)],
        ),
        (
            "BM, BN and BK are each 1 to 16384, e.g. tile: 128x128x32",
            vec![set(&[(Key::Tile, "128x128x32")])],
        ),
        ("use a smaller tile", vec![]),
        (
            "only f32, copy sync or cp_async, is implemented so far",
            vec![],
        ),
    ] {
        assert_eq!(concrete_edits(help), edits, "{help}");
    }
}

/// Specs the property once failed on (the shrunk cases of the old regression file, which
/// `failure_persistence: None` never replayed): each holds the property now.
#[test]
fn past_failures_stay_fixed() {
    for text in [
        "name: prop, arch: sm_80, dtype: f32, tile: 64x32x16, stages: 1, swizzle: none, copy: cp_async, mma: fma",
        "name: prop, arch: sm_80, dtype: f32, tile: 128x256x32, stages: 1, swizzle: none, copy: cp_async, mma: fma",
        "name: prop, arch: sm_90, dtype: f32, tile: 32x64x32, stages: 2, swizzle: none, copy: cp_async, mma: fma",
        "name: prop, arch: sm_80, dtype: f32, tile: 128x32x32, stages: 1, swizzle: none, copy: cp_async, mma: fma",
    ] {
        let result = match check_str(text) {
            Ok(valid) => check_valid(text, &valid),
            Err(errors) => check_invalid(text, &errors),
        };
        result.unwrap_or_else(|failure| panic!("{text}: {failure}"));
    }
}

/// Errors that may carry no help: their text has no one fix to propose. Listed by the
/// start of their message; every other error has a help.
const NO_HELP: &[&str] = &[];

/// Every error has a span inside the text (or at its start, for an empty text) and a help,
/// unless listed in [`NO_HELP`].
fn check_any_errors(text: &str, errors: &SpecErrors) -> Result<(), TestCaseError> {
    prop_assert!(!errors.0.is_empty());
    let line_count = text.lines().count().max(1);
    for error in errors.iter() {
        prop_assert!(
            error.span.start().line <= line_count && error.span.end().line <= line_count,
            "{:?}: {} outside the text",
            text,
            error.message
        );
        prop_assert!(
            error.help.is_some() || NO_HELP.iter().any(|m| error.message.starts_with(m)),
            "{:?}: no help for: {}",
            text,
            error.message
        );
    }
    let _ = errors.render(text, "prop");
    Ok(())
}

proptest! {
    #![proptest_config(config(2048))]

    #[test]
    fn arbitrary_text_never_panics(text in ".{0,120}") {
        if let Err(errors) = check_str(&text) {
            check_any_errors(&text, &errors)?;
        }
    }

    #[test]
    fn key_value_soup_never_panics(
        pairs in proptest::collection::vec(
            ("[a-z_]{1,9}", "[a-z0-9_()=, x]{0,12}"),
            0..6,
        )
    ) {
        let text: Vec<String> = pairs.iter().map(|(k, v)| format!("{k}: {v}")).collect();
        let text = text.join(", ");
        if let Err(errors) = check_str(&text) {
            check_any_errors(&text, &errors)?;
        }
    }
}
