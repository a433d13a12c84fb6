//! The cost model's picks over the repository's shape list, pinned: a change to the model or
//! to a set shows here as a diff of picks, to be read like a PTX diff.

use gemm_codegen::gemm_dsl::{DType, Layout};
use gemm_codegen::pick::sets::{self, KernelSet};
use gemm_codegen::pick::{rank, reasons, set_candidates, DeviceModel, Problem};

const SHAPES: &str = include_str!("models.txt");

/// The shape list with lines padded to 16 bytes, as `gemm-bench` lays them out.
fn shapes(layout: Layout, element_bytes: u32) -> Vec<(Problem, String)> {
    SHAPES
        .lines()
        .filter_map(|line| {
            let (shape, comment) = line.split_once('#').unwrap_or((line, ""));
            (!shape.trim().is_empty()).then(|| {
                let problem = Problem::parse(shape, layout)
                    .expect("the shape list parses")
                    .with_lines_padded(16, element_bytes, element_bytes);
                (problem, comment.trim().to_string())
            })
        })
        .collect()
}

/// One line per shape: the pick, its reasons, and the runner-up.
fn picks(set: &KernelSet, dtype: DType, device: &DeviceModel, layout: Layout) -> String {
    let candidates = set_candidates(set, dtype, dtype).expect("set members are valid");
    let mut lines = vec![format!(
        "# {} on {}, {}",
        set.name,
        device.name,
        layout.name()
    )];
    for (problem, comment) in shapes(layout, dtype.size_bytes()) {
        let ranking = rank(&candidates, &problem, device);
        let (best, estimate) = ranking.best().expect("every shape has a kernel in the set");
        let runner_up = ranking
            .ranked
            .get(1)
            .map_or(String::from("-"), |(index, e)| {
                format!(
                    "{} ({:.2}x slower)",
                    candidates[*index].name,
                    e.seconds / estimate.seconds
                )
            });
        lines.push(format!(
            "{problem:<22} {comment}\n  pick {}: {}\n  next {runner_up}",
            candidates[*best].name,
            reasons(estimate, &problem)
        ));
    }
    lines.join("\n")
}

#[test]
fn hopper_picks_over_the_shape_list() {
    insta::assert_snapshot!(picks(
        &sets::SM90_16BIT,
        DType::Bf16,
        &DeviceModel::h100_sxm(),
        Layout::RowRow
    ));
}

#[test]
fn ampere_picks_over_the_shape_list() {
    insta::assert_snapshot!(picks(
        &sets::SM80_16BIT,
        DType::Bf16,
        &DeviceModel::a100_sxm(),
        Layout::RowCol
    ));
}

#[test]
fn f32_picks_over_the_shape_list() {
    insta::assert_snapshot!(picks(
        &sets::SM80_F32,
        DType::F32,
        &DeviceModel::h100_sxm(),
        Layout::RowRow
    ));
}

type Measured = Vec<(String, f64, f64)>;

/// (batch, m, n, k) -> (kernel, ours TFLOP/s, cuBLAS TFLOP/s) per measured kernel, from a TSV.
fn measurements(path: &str) -> std::collections::BTreeMap<(u32, u32, u32, u32), Measured> {
    let text = std::fs::read_to_string(path).unwrap();
    let mut rows: std::collections::BTreeMap<(u32, u32, u32, u32), Measured> = Default::default();
    for line in text.lines() {
        let f: Vec<&str> = line.split('\t').collect();
        let n = |i: usize| f[i].parse::<u32>().unwrap();
        rows.entry((n(0), n(1), n(2), n(3))).or_default().push((
            f[4].to_string(),
            f[5].parse().unwrap(),
            f[6].parse().unwrap(),
        ));
    }
    rows
}

/// The geomean of the measured ratio of the model's pick (among the kernels measured at each
/// shape), with one line per shape.
fn model_geomean(
    rows: &std::collections::BTreeMap<(u32, u32, u32, u32), Measured>,
    candidates: &[gemm_codegen::pick::Candidate],
    device: &DeviceModel,
) -> (f64, f64, Vec<String>) {
    let (mut model, mut best, mut lines) = (Vec::new(), Vec::new(), Vec::new());
    for ((batch, m, n, k), measured) in rows {
        let problem = Problem::new(*m, *n, *k, Layout::RowRow)
            .with_batch(*batch)
            .with_lines_padded(16, 2, 2);
        // The median of the shape's cuBLAS rows, as `gemm-bench`'s picks table takes it: one
        // row's cuBLAS time carries that row's noise into every ratio.
        let mut cublas_rows: Vec<f64> = measured.iter().map(|r| r.2).collect();
        cublas_rows.sort_by(f64::total_cmp);
        let cublas = cublas_rows[cublas_rows.len() / 2];
        let of = |name: &str| measured.iter().find(|r| r.0 == name).map(|r| r.1 / cublas);
        let ranking = rank(candidates, &problem, device);
        let pick = ranking
            .ranked
            .iter()
            .map(|(i, _)| &candidates[*i].name)
            .find(|name| of(name).is_some())
            .unwrap();
        let top = measured.iter().map(|r| r.1).fold(0.0, f64::max) / cublas;
        let picked = of(pick).unwrap();
        model.push(picked);
        best.push(top);
        lines.push(format!(
            "{problem:<24} {pick:<28} {picked:.3}  best {top:.3}{}",
            if picked < 0.97 * top { "  <<" } else { "" }
        ));
    }
    let geomean = |v: &[f64]| (v.iter().map(|x| x.ln()).sum::<f64>() / v.len() as f64).exp();
    (geomean(&model), geomean(&best), lines)
}

/// Calibration aid, not a check: with `GEMM_PICK_MEASURED` naming a TSV of measured rows
/// (`batch m n k kernel ours_tflops cublas_tflops`, from a `gemm-bench --set sm90` run),
/// prints how the model's picks fare against the measured best per shape, then refits the
/// H100 model's calibration (coordinate descent, multiplicative steps) and prints it.
#[test]
#[ignore = "reads a measurement file named by GEMM_PICK_MEASURED"]
fn model_against_measurements() {
    let path = std::env::var("GEMM_PICK_MEASURED").expect("GEMM_PICK_MEASURED names a TSV");
    let rows = measurements(&path);
    let candidates = set_candidates(&sets::SM90_16BIT, DType::Bf16, DType::Bf16).unwrap();
    let device = DeviceModel::h100_sxm();
    let (start, best, lines) = model_geomean(&rows, &candidates, &device);
    for line in lines {
        println!("{line}");
    }
    println!("model geomean {start:.3}, best geomean {best:.3}");
    // Two-fold check first: fit on every other shape, score on the rest, and the reverse.
    for fold in 0..2 {
        let (fit, held): (Vec<_>, Vec<_>) =
            rows.iter().enumerate().partition(|(i, _)| i % 2 == fold);
        let fit: std::collections::BTreeMap<_, _> =
            fit.into_iter().map(|(_, (k, v))| (*k, v.clone())).collect();
        let held: std::collections::BTreeMap<_, _> = held
            .into_iter()
            .map(|(_, (k, v))| (*k, v.clone()))
            .collect();
        let fitted = refit(&fit, &candidates, DeviceModel::h100_sxm());
        let before = model_geomean(&held, &candidates, &DeviceModel::h100_sxm()).0;
        let after = model_geomean(&held, &candidates, &fitted).0;
        println!("fold {fold}: held-out shapes {before:.3} -> {after:.3}");
    }
    let device = refit(&rows, &candidates, device);
    let current = model_geomean(&rows, &candidates, &device).0;
    println!(
        "refitted: model geomean {current:.3}\n{:#?}\nl2 {} B/clk, latency {} clk",
        device.calibration, device.l2_bytes_per_clk_per_sm, device.memory_latency_clk
    );
}

/// Coordinate descent over the calibration with multiplicative steps.
fn refit(
    rows: &std::collections::BTreeMap<(u32, u32, u32, u32), Measured>,
    candidates: &[gemm_codegen::pick::Candidate],
    mut device: DeviceModel,
) -> DeviceModel {
    let mut current = model_geomean(rows, candidates, &device).0;
    for _round in 0..3 {
        for field in 0..15 {
            for factor in [0.8, 0.9, 1.1, 1.25] {
                let mut trial = device.clone();
                let c = &mut trial.calibration;
                let value: &mut f64 = match field {
                    0 => &mut c.wgmma_128_rows_per_consumer,
                    1 => &mut c.wgmma_two_consumers_256_wide,
                    2 => &mut c.wgmma_two_consumers,
                    3 => &mut c.wgmma_one_consumer,
                    4 => &mut c.mma_sync,
                    5 => &mut c.fixup_bytes_per_clk,
                    6 => &mut c.stream_k_split_clk,
                    7 => &mut c.overlap_slack,
                    8 => &mut c.half_bandwidth_sms,
                    9 => &mut c.dram_efficiency,
                    10 => &mut trial.l2_bytes_per_clk_per_sm,
                    11 => &mut trial.memory_latency_clk,
                    12 => &mut c.wgmma_pingpong,
                    13 => &mut c.mma_sync_latency_share,
                    _ => &mut c.fma,
                };
                *value *= factor;
                let score = model_geomean(rows, candidates, &trial).0;
                if score > current + 1e-4 {
                    current = score;
                    device = trial;
                }
            }
        }
    }
    device
}
