//! The cost model replayed over measured runs, with no GPU: `gemm-bench replay` reads the
//! kernels' times a set run wrote (`--out` of `--set`, 16-bit or fp8) and asks this build's
//! model what it would have picked among them and what it predicts for each. That is how a
//! change to the model is judged before a GPU confirms it: the picks' measured time against
//! the fastest kernel timed, and the predicted time against the measured one.

use crate::bench::fp8_set::Fp8SetRow;
use crate::bench::BenchReport;
use crate::verify::Shape;
use gemm_dsl::abi::StorageOrder;
use gemm_dsl::pick::{self, estimate, Candidate, DeviceModel, Problem};
use gemm_dsl::Layout;
use std::collections::HashMap;

/// One kernel's measured median on one shape.
#[derive(Clone, Debug, PartialEq)]
pub struct Measured {
    pub shape: Shape,
    pub kernel: String,
    pub ms: f64,
}

/// The measurements of a 16-bit set run's report, one per (kernel, shape).
pub fn measured_of_report(report: &BenchReport) -> Vec<Measured> {
    report
        .records
        .iter()
        .map(|record| Measured {
            shape: record.shape,
            kernel: record.spec.clone(),
            ms: record.ours_median_ms,
        })
        .collect()
}

/// The measurements of an fp8 set run's rows (failed launches, timed 0, left out).
pub fn measured_of_fp8_rows(rows: &[Fp8SetRow]) -> Vec<Measured> {
    rows.iter()
        .flat_map(|row| {
            row.kernels
                .iter()
                .filter(|timed| timed.ms > 0.0)
                .map(|timed| Measured {
                    shape: row.shape,
                    kernel: timed.kernel.clone(),
                    ms: timed.ms,
                })
        })
        .collect()
}

/// One kernel on one shape: measured and predicted.
#[derive(Clone, Debug, PartialEq)]
pub struct Replayed {
    pub kernel: String,
    pub ms: f64,
    pub predicted_ms: f64,
    /// It runs the swapped product (it stores C column-major).
    pub swapped: bool,
}

/// One shape: every kernel timed on it that the model knows, the fastest and the model's
/// pick among them.
#[derive(Clone, Debug, PartialEq)]
pub struct ReplayRow {
    pub shape: Shape,
    pub kernels: Vec<Replayed>,
    /// Indices into `kernels`.
    pub fastest: usize,
    pub pick: usize,
}

impl ReplayRow {
    /// The pick's measured speed as a share of the fastest kernel's (1 when it is the fastest).
    pub fn pick_share(&self) -> f64 {
        self.kernels[self.fastest].ms / self.kernels[self.pick].ms
    }
}

/// The replay of one run: its shapes, and the kernels it timed that no candidate names.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Replay {
    pub rows: Vec<ReplayRow>,
    pub unknown_kernels: Vec<String>,
}

/// Replays `measured` through `device`'s model: each kernel named by one of `candidates`
/// is priced on its shape in `layout` (on the swapped product where it stores C
/// column-major, as `Matmul` runs it), and the model picks among those timed on each shape
/// as `Matmul` would ([`pick::model_route`]).
pub fn replay(
    measured: &[Measured],
    candidates: &[Candidate],
    layout: Layout,
    device: &DeviceModel,
) -> Replay {
    let by_name: HashMap<&str, &Candidate> = candidates
        .iter()
        .map(|candidate| (candidate.name.as_str(), candidate))
        .collect();
    let mut replay = Replay::default();
    let mut shapes: Vec<Shape> = Vec::new();
    let mut timed: HashMap<Shape, Vec<(&Candidate, f64)>> = HashMap::new();
    for record in measured {
        let Some(candidate) = by_name.get(record.kernel.as_str()) else {
            if !replay.unknown_kernels.contains(&record.kernel) {
                replay.unknown_kernels.push(record.kernel.clone());
            }
            continue;
        };
        if !timed.contains_key(&record.shape) {
            shapes.push(record.shape);
        }
        timed
            .entry(record.shape)
            .or_default()
            .push((candidate, record.ms));
    }
    for shape in shapes {
        let kernels = &timed[&shape];
        let problem = Problem::new(shape.m, shape.n, shape.k, layout).with_batch(shape.batch);
        let subset: Vec<Candidate> = kernels
            .iter()
            .map(|(candidate, _)| (*candidate).clone())
            .collect();
        let Some((pick, _)) = pick::model_route(&subset, &problem, device) else {
            continue;
        };
        let replayed: Vec<Replayed> = kernels
            .iter()
            .map(|(candidate, ms)| {
                // A kernel that stores C column-major runs the swapped product.
                let swapped = candidate.launch.c_order == StorageOrder::ColMajor;
                let runs = if swapped { problem.swapped() } else { problem };
                Replayed {
                    kernel: candidate.name.clone(),
                    ms: *ms,
                    predicted_ms: estimate(candidate, &runs, device).seconds * 1e3,
                    swapped,
                }
            })
            .collect();
        let fastest = (0..replayed.len())
            .min_by(|&a, &b| replayed[a].ms.total_cmp(&replayed[b].ms))
            .expect("a shape has a timed kernel");
        replay.rows.push(ReplayRow {
            shape,
            kernels: replayed,
            fastest,
            pick,
        });
    }
    replay
}

impl Replay {
    /// Geomean of the picks' share of the fastest kernel's speed.
    pub fn pick_share_geomean(&self) -> f64 {
        geomean(self.rows.iter().map(ReplayRow::pick_share))
    }

    /// Geomean, lowest and highest of predicted over measured time, over every kernel.
    pub fn prediction_ratios(&self) -> (f64, f64, f64) {
        let ratios: Vec<f64> = self
            .rows
            .iter()
            .flat_map(|row| row.kernels.iter().map(|k| k.predicted_ms / k.ms))
            .collect();
        (
            geomean(ratios.iter().copied()),
            ratios.iter().copied().fold(f64::INFINITY, f64::min),
            ratios.iter().copied().fold(0.0, f64::max),
        )
    }

    /// A table per shape, then the summary; with `every_kernel`, each kernel's line too.
    pub fn markdown(&self, device: &DeviceModel, every_kernel: bool) -> String {
        let mut out = format!(
            "The model of {} replayed over {} shapes.\n\n\
             | shape | fastest timed | ms | model's pick | ms | pick / fastest | predicted / measured (pick, fastest) |\n\
             |---|---|---:|---|---:|---:|---|\n",
            device.name,
            self.rows.len()
        );
        for row in &self.rows {
            let fastest = &row.kernels[row.fastest];
            let pick = &row.kernels[row.pick];
            out.push_str(&format!(
                "| {} | {} | {:.4} | {} | {:.4} | {:.3} | {:.2}, {:.2} |\n",
                row.shape,
                label(fastest),
                fastest.ms,
                label(pick),
                pick.ms,
                row.pick_share(),
                pick.predicted_ms / pick.ms,
                fastest.predicted_ms / fastest.ms,
            ));
        }
        let (geo, low, high) = self.prediction_ratios();
        let near = self
            .rows
            .iter()
            .filter(|row| row.pick_share() >= 0.97)
            .count();
        out.push_str(&format!(
            "\nPicks: geomean {:.3} of the fastest timed kernel's speed, {near} of {} within 3 %. \
             Predicted / measured over every kernel: geomean {geo:.2}, {low:.2} to {high:.2}.\n",
            self.pick_share_geomean(),
            self.rows.len(),
        ));
        if every_kernel {
            out.push_str(
                "\n| shape | kernel | ms | predicted ms | predicted / measured |\n|---|---|---:|---:|---:|\n",
            );
            for row in &self.rows {
                for kernel in &row.kernels {
                    out.push_str(&format!(
                        "| {} | {} | {:.4} | {:.4} | {:.2} |\n",
                        row.shape,
                        label(kernel),
                        kernel.ms,
                        kernel.predicted_ms,
                        kernel.predicted_ms / kernel.ms
                    ));
                }
            }
        }
        if !self.unknown_kernels.is_empty() {
            out.push_str(&format!(
                "\nNot replayed (no candidate of that name): {}.\n",
                self.unknown_kernels.join(", ")
            ));
        }
        out
    }
}

fn label(kernel: &Replayed) -> String {
    if kernel.swapped {
        format!("{} (swapped)", kernel.kernel)
    } else {
        kernel.kernel.clone()
    }
}

fn geomean(values: impl Iterator<Item = f64>) -> f64 {
    let (sum, count) = values.fold((0.0, 0usize), |(sum, count), value| {
        (sum + value.ln(), count + 1)
    });
    if count == 0 {
        f64::NAN
    } else {
        (sum / count as f64).exp()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gemm_dsl::check_str;

    fn candidate(text: &str) -> Candidate {
        gemm_codegen::pick::candidate(&check_str(text).expect("a valid spec"))
    }

    fn shape(m: u32, n: u32, k: u32) -> Shape {
        Shape { m, n, k, batch: 1 }
    }

    #[test]
    fn the_replay_picks_among_the_timed_kernels_as_matmul_routes() {
        let wide = candidate(
            "name: wide, arch: sm_90a, dtype: bf16, layout: rc, tile: 128x256x64, stages: 4, \
             swizzle: 128B, copy: tma, mma: wgmma, consumers: 2",
        );
        let swapped = candidate(
            "name: swap, arch: sm_90a, dtype: bf16, layout: rc, c_layout: col, tile: 64x16x128, \
             stages: 6, swizzle: 128B, copy: tma, mma: wgmma, consumers: 1",
        );
        let device = DeviceModel::h100_sxm();
        let decode = shape(1, 8192, 8192);
        let square = shape(4096, 4096, 4096);
        let measured = [
            (decode, "wide", 0.09),
            (decode, "swap", 0.04),
            (square, "wide", 0.2),
            (square, "swap", 0.3),
            (square, "gone", 0.1),
        ]
        .map(|(shape, kernel, ms)| Measured {
            shape,
            kernel: kernel.to_string(),
            ms,
        });
        let replay = replay(
            &measured,
            &[wide.clone(), swapped.clone()],
            Layout::RowCol,
            &device,
        );
        assert_eq!(replay.unknown_kernels, ["gone"]);
        assert_eq!(replay.rows.len(), 2);
        for row in &replay.rows {
            let problem = Problem::new(row.shape.m, row.shape.n, row.shape.k, Layout::RowCol);
            let direct = estimate(&wide, &problem, &device).seconds;
            let flipped = estimate(&swapped, &problem.swapped(), &device).seconds;
            let expected = if flipped < direct { "swap" } else { "wide" };
            assert_eq!(row.kernels[row.pick].kernel, expected, "{}", row.shape);
            assert_eq!(row.kernels[row.pick].swapped, expected == "swap");
            let picked = &row.kernels[row.pick];
            let predicted = if picked.swapped { flipped } else { direct };
            assert!((picked.predicted_ms - predicted * 1e3).abs() < 1e-12);
        }
        // The decode problem's fastest is the swapped kernel, the square's the wide one.
        assert_eq!(
            replay.rows[0].kernels[replay.rows[0].fastest].kernel,
            "swap"
        );
        assert_eq!(
            replay.rows[1].kernels[replay.rows[1].fastest].kernel,
            "wide"
        );
        let share = replay.rows[1].pick_share();
        assert!(share == 1.0 || (share - 0.2 / 0.3).abs() < 1e-12);
        assert!(replay.markdown(&device, true).contains("swap (swapped)"));
    }
}
