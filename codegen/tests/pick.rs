//! The cost model's picks over the repository's shape list: pinned (a change to the model or
//! to a set shows here as a diff of picks, to be read like a PTX diff), scored against the
//! measured times of every member on an H100 (a change that loses speed there fails), and
//! swept over a grid of problems that each must get a kernel, the same from `pick` as from
//! `rank`.

use gemm_codegen::gemm_dsl::{DType, Layout};
use gemm_codegen::pick::sets::{self, KernelSet};
use gemm_codegen::pick::{
    model_route, pick, rank, reasons, set_candidates, Candidate, DeviceModel, Problem,
};

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

/// The measured times of the sm90 set's members over the shape list (its header says where
/// they come from).
const MEASURED: &str = include_str!("data/sm90-h100-2026-11-26.txt");

/// One shape of the measurement file: the problem as `gemm-bench` ran it, and each measured
/// member's time in microseconds.
struct Timed {
    problem: Problem,
    times: Vec<(String, f64)>,
}

impl Timed {
    fn time(&self, member: &str) -> Option<f64> {
        self.times
            .iter()
            .find(|(name, _)| name == member)
            .map(|&(_, time)| time)
    }

    fn best(&self) -> f64 {
        self.times
            .iter()
            .map(|&(_, time)| time)
            .fold(f64::INFINITY, f64::min)
    }
}

/// The measured times of the sm90 set's bf16 members at decode sizes, layout rc, on an H200.
const MEASURED_H200_DECODE: &str = include_str!("data/sm90-decode-h200-2026-11-29.txt");

/// The same at one row over a Llama-3-8B-shaped decode step's weights, on an H200.
const MEASURED_H200_DECODE_LLAMA: &str = include_str!("data/sm90-decode-llama-h200-2026-11-29.txt");

fn measured() -> Vec<Timed> {
    measured_from(MEASURED, Layout::RowRow)
}

/// A measurement file's shapes (problems in `layout`) and times.
fn measured_from(text: &str, layout: Layout) -> Vec<Timed> {
    let mut lines = text
        .lines()
        .filter(|line| !line.starts_with('#') && !line.trim().is_empty());
    let header: Vec<&str> = lines.next().expect("a header").split_whitespace().collect();
    assert_eq!(header[0], "shape");
    let members = &header[1..];
    lines
        .map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            assert_eq!(fields.len(), header.len(), "{line}");
            let problem = Problem::parse(fields[0], layout)
                .unwrap()
                .with_lines_padded(16, 2, 2);
            let times = members
                .iter()
                .zip(&fields[1..])
                .map(|(member, time)| (member.to_string(), time.parse().unwrap()))
                .collect();
            Timed { problem, times }
        })
        .collect()
}

/// A set member's name from its kernel's (`sm90_w128x256_bf16_rr` -> `w128x256`).
fn member_name(candidate: &Candidate) -> &str {
    let suffix = format!("_bf16_{}", candidate.layout.name());
    candidate
        .name
        .strip_prefix("sm90_")
        .and_then(|rest| rest.strip_suffix(suffix.as_str()))
        .unwrap_or_else(|| panic!("{} is not an sm90 bf16 kernel", candidate.name))
}

/// How the model's picks fare against measured times.
struct Score {
    /// Per shape: the problem, the model's pick, the member scored (the pick, or its next
    /// timed choice) and that member's time over the fastest member's.
    picks: Vec<(Problem, String, String, f64)>,
    geomean: f64,
    /// Shapes whose pick the file did not time.
    untimed: usize,
}

impl Score {
    fn worst(&self) -> &(Problem, String, String, f64) {
        self.picks
            .iter()
            .min_by(|a, b| a.3.total_cmp(&b.3))
            .expect("shapes")
    }
}

/// The sm90 set's bf16 members in layout rr: the kernels the measurement file times.
fn measured_candidates() -> Vec<Candidate> {
    sm90_bf16_candidates(Layout::RowRow)
}

fn sm90_bf16_candidates(layout: Layout) -> Vec<Candidate> {
    set_candidates(&sets::SM90_16BIT, DType::Bf16, DType::Bf16)
        .unwrap()
        .into_iter()
        .filter(|candidate| candidate.layout == layout)
        .collect()
}

/// Scores `device`'s picks among `candidates` on every shape of `timed`.
fn score<'t>(
    timed: impl IntoIterator<Item = &'t Timed>,
    candidates: &[Candidate],
    device: &DeviceModel,
) -> Score {
    let mut picks = Vec::new();
    for shape in timed {
        let ranking = rank(candidates, &shape.problem, device);
        let mut choices = ranking
            .ranked
            .iter()
            .map(|(index, _)| member_name(&candidates[*index]));
        let first = choices.next().expect("a kernel for every shape");
        let (member, time) = std::iter::once(first)
            .chain(choices)
            .find_map(|member| shape.time(member).map(|time| (member, time)))
            .expect("a timed member");
        picks.push((
            shape.problem,
            first.to_string(),
            member.to_string(),
            shape.best() / time,
        ));
    }
    let geomean = (picks.iter().map(|p| p.3.ln()).sum::<f64>() / picks.len() as f64).exp();
    let untimed = picks.iter().filter(|p| p.1 != p.2).count();
    Score {
        picks,
        geomean,
        untimed,
    }
}

/// The model's picks on an H100 against the measured times of the same members there (bf16,
/// layout rr, every shape of `models.txt`): each pick's time over the fastest member's, its
/// geomean and its worst. A member the file did not time (w128x64, w192x96: they joined the
/// set after the run) is scored by the model's next choice that was timed; how many shapes
/// that takes is held too, so a model that moves picks onto untimed members fails until the
/// file is measured again.
///
/// Today: geomean 0.977 of the best; worst 0.744, at 777x4099x2048 (the model takes 256x128
/// stream-K tiles, 128x320 clusters measured fastest), then 0.770 at 128x4096x14336; four
/// shapes (128x6144x4096, 128x8192x8192, 128x8192x28672 and 1024^3, all picked to w128x64)
/// scored by the next choice. The bounds leave about 1 % of the geomean and 3 % of the worst
/// as margin.
#[test]
fn the_models_picks_reach_the_measured_best_on_an_h100() {
    const GEOMEAN_AT_LEAST: f64 = 0.965;
    const WORST_AT_LEAST: f64 = 0.72;
    const UNTIMED_PICKS_AT_MOST: usize = 4;
    let timed = measured();
    assert_eq!(timed.len(), 64, "every shape of models.txt, once");
    let score = score(&timed, &measured_candidates(), &DeviceModel::h100_sxm());
    for (problem, pick, member, share) in &score.picks {
        println!(
            "{:<28} {pick:<14} {member:<14} {share:.3}",
            problem.to_string()
        );
    }
    let (problem, _, member, worst) = score.worst();
    println!(
        "geomean {:.3}, worst {worst:.3} at {problem} ({member}), {} picks untimed",
        score.geomean, score.untimed
    );
    assert!(
        score.geomean >= GEOMEAN_AT_LEAST,
        "the picks reach {:.3} of the measured best, less than {GEOMEAN_AT_LEAST}",
        score.geomean
    );
    assert!(
        *worst >= WORST_AT_LEAST,
        "the pick at {problem} ({member}) reaches {worst:.3} of the measured best, less than {WORST_AT_LEAST}"
    );
    assert!(
        score.untimed <= UNTIMED_PICKS_AT_MOST,
        "{} picks are members the file did not time: measure the set again",
        score.untimed
    );
}

/// The H200 model's routes at decode sizes against the measured times of the same members
/// there (bf16, layout rc, M = 1, 16, 64 and 128 over the weights of `models.txt`): per shape
/// the route `Matmul` takes (the problem's pick, or the swapped product's where the model
/// predicts it faster) and its time over the fastest member's.
///
/// Today: geomean 0.978, worst 0.846 (64x10240x8192: 64x128 stream-K tiles where 64x64 ones
/// ran faster); 0.971 when every stage waited out 3000 clocks whatever its bytes. With the
/// H100's DRAM curve (half the bandwidth at 8 SMs) the geomean was 0.950 and the worst 0.641
/// (16x10240x8192 on 64x128 stream-K tiles, 80 of them).
#[test]
fn the_h200_models_decode_routes_reach_the_measured_best() {
    assert_h200_routes_reach(MEASURED_H200_DECODE, 32, 0.96, 0.8);
}

/// The same over a Llama-3-8B-shaped decode step's weights at one row (k and v: 1x1024x4096;
/// q and o; gate and up: 1x14336x4096; down; the head: 1x128256x4096) and two wide ones.
///
/// Today: geomean 0.985, worst 0.939 (1x28672x4096 on 64x256 tiles where the swapped 64x16
/// tile ran faster). When every stage waited out 3000 clocks the geomean was 0.876 and the
/// worst 0.536 (1x1024x4096 on the 64x16 mma.sync tile: 19.3 us where the swapped product
/// took 10.3).
#[test]
fn the_h200_models_one_row_routes_reach_the_measured_best() {
    assert_h200_routes_reach(MEASURED_H200_DECODE_LLAMA, 7, 0.97, 0.9);
}

/// Asserts that the H200 model's routes on a measurement file of `shapes` shapes (layout rc)
/// reach, over the fastest timed member's speed, a geomean of `geomean_at_least` and
/// `worst_at_least` at each shape; each route is printed.
fn assert_h200_routes_reach(text: &str, shapes: usize, geomean_at_least: f64, worst_at_least: f64) {
    let timed = measured_from(text, Layout::RowCol);
    assert_eq!(timed.len(), shapes, "the file's shapes");
    let candidates = sm90_bf16_candidates(Layout::RowCol);
    let device = DeviceModel::h200_sxm();
    let mut shares = Vec::new();
    for shape in &timed {
        let problem = shape.problem;
        let (index, _) =
            model_route(&candidates, &problem, &device).expect("a route for every shape");
        let member = member_name(&candidates[index]);
        let time = shape
            .time(member)
            .unwrap_or_else(|| panic!("{problem}: the route's {member} was not timed"));
        let share = shape.best() / time;
        println!("{:<18} {member:<14} {share:.3}", problem.to_string());
        shares.push((problem, share));
    }
    let geomean =
        (shares.iter().map(|(_, share)| share.ln()).sum::<f64>() / shares.len() as f64).exp();
    let (worst_problem, worst) = shares
        .iter()
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .expect("shapes");
    println!("geomean {geomean:.3}, worst {worst:.3} at {worst_problem}");
    assert!(
        geomean >= geomean_at_least,
        "the routes reach {geomean:.3} of the measured best, less than {geomean_at_least}"
    );
    assert!(
        *worst >= worst_at_least,
        "the route at {worst_problem} reaches {worst:.3} of the measured best, less than {worst_at_least}"
    );
}

/// The output type of a set's kernels for inputs `dtype`: the same, or bf16 for fp8 inputs.
fn output_of(dtype: DType) -> DType {
    if dtype.is_fp8() {
        DType::Bf16
    } else {
        dtype
    }
}

/// `pick` (what `Matmul` calls) and `rank` (what the CLI and the snapshots show) choose the same
/// kernel, the first of equally fast ones, for every set, type, layout and shape of the list.
#[test]
fn pick_is_the_first_of_the_ranking() {
    let mut problems = 0;
    for set in sets::SETS {
        for &dtype in set.dtypes {
            let candidates = set_candidates(set, dtype, output_of(dtype)).unwrap();
            for &layout in KernelSet::layouts(dtype) {
                for device in [
                    DeviceModel::h100_sxm(),
                    DeviceModel::a100_sxm().with_sms(20),
                ] {
                    for (problem, _) in shapes(layout, dtype.size_bytes()) {
                        let ranking = rank(&candidates, &problem, &device);
                        assert_eq!(
                            pick(&candidates, &problem, &device),
                            ranking.best().map(|(index, _)| *index),
                            "{} {} on {}: {problem}",
                            set.name,
                            dtype.name(),
                            device.name
                        );
                        problems += 1;
                    }
                }
            }
        }
    }
    assert!(problems > 1000, "{problems}");
}

/// Every problem of a grid of sizes (tile multiples and not, one row, one column), batches,
/// layouts and leading dimensions (packed rounded up to 16-byte lines, and longer) gets a
/// kernel from every set for each of its types: the sets' promise that at least one member
/// admits every aligned problem.
#[test]
fn every_aligned_problem_gets_a_kernel_from_every_set() {
    const SIZES: [u32; 10] = [1, 8, 16, 24, 64, 136, 200, 1000, 4104, 10240];
    let mut problems = 0;
    for set in sets::SETS {
        for &dtype in set.dtypes {
            let (bytes, out) = (dtype.size_bytes(), output_of(dtype));
            let candidates = set_candidates(set, dtype, out).unwrap();
            let device = DeviceModel::h100_sxm();
            for &layout in KernelSet::layouts(dtype) {
                let grid = SIZES.into_iter().flat_map(|m| {
                    SIZES
                        .into_iter()
                        .flat_map(move |n| SIZES.map(|k| (m, n, k)))
                });
                for (m, n, k) in grid {
                    for batch in [1, 3] {
                        let packed = Problem::new(m, n, k, layout)
                            .with_batch(batch)
                            .with_lines_padded(16, bytes, out.size_bytes());
                        let step = 16 / bytes;
                        let longer = packed.with_leading_dims(
                            packed.lda + step,
                            packed.ldb + 8 * step,
                            packed.ldc + 16 / out.size_bytes(),
                        );
                        for problem in [packed, longer] {
                            assert!(
                                pick(&candidates, &problem, &device).is_some(),
                                "{} ({}): no kernel for {problem} (lds {} {} {})",
                                set.name,
                                dtype.name(),
                                problem.lda,
                                problem.ldb,
                                problem.ldc
                            );
                            problems += 1;
                        }
                    }
                }
            }
        }
    }
    assert!(problems > 30_000, "{problems}");
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

/// Calibration aid: refits the H100 model's calibration to the measurement file (coordinate
/// descent, multiplicative steps) and prints it, after a two-fold check (fit on every other
/// shape, score on the rest, and the reverse). It holds the refit to what the test above
/// holds the model to.
#[test]
#[ignore = "a calibration aid: prints a refit of the H100 model (seconds)"]
fn refit_the_model_to_the_measurements() {
    let timed = measured();
    let candidates = measured_candidates();
    let fold = |fold: usize| timed.iter().enumerate().filter(move |(i, _)| i % 2 == fold);
    let geomean = |shapes: &[&Timed], device: &DeviceModel| {
        score(shapes.iter().copied(), &candidates, device).geomean
    };
    for held in 0..2 {
        let fit: Vec<&Timed> = fold(1 - held).map(|(_, shape)| shape).collect();
        let held_out: Vec<&Timed> = fold(held).map(|(_, shape)| shape).collect();
        let fitted = refit(&fit, &candidates, DeviceModel::h100_sxm());
        println!(
            "fold {held}: held-out shapes {:.3} -> {:.3}",
            geomean(&held_out, &DeviceModel::h100_sxm()),
            geomean(&held_out, &fitted)
        );
    }
    let all: Vec<&Timed> = timed.iter().collect();
    let start = geomean(&all, &DeviceModel::h100_sxm());
    let device = refit(&all, &candidates, DeviceModel::h100_sxm());
    let refitted = geomean(&all, &device);
    println!(
        "model geomean {start:.3}, refitted {refitted:.3}\n{:#?}\nl2 {} B/clk, latency {} clk",
        device.calibration, device.l2_bytes_per_clk_per_sm, device.memory_latency_clk
    );
    assert!(refitted >= start, "a refit never scores below its start");
}

/// Coordinate descent over the calibration with multiplicative steps, on the geomean of the
/// picks' share of the measured best.
fn refit(timed: &[&Timed], candidates: &[Candidate], mut device: DeviceModel) -> DeviceModel {
    let geomean = |device: &DeviceModel| score(timed.iter().copied(), candidates, device).geomean;
    let mut current = geomean(&device);
    for _round in 0..3 {
        for field in 0..17 {
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
                    14 => &mut c.stage_latency_clk,
                    15 => &mut c.stream_k_loop_share,
                    _ => &mut c.fma,
                };
                *value *= factor;
                let trial_geomean = geomean(&trial);
                if trial_geomean > current + 1e-4 {
                    current = trial_geomean;
                    device = trial;
                }
            }
        }
    }
    device
}
