//! Benchmark plumbing shared by `gemm-bench`: shapes and suites, event timing, and the
//! JSON / markdown / SVG reports; the fused-epilogue ([`fused`]) and fp8 ([`fp8`]) comparisons.

use crate::error::{DriverContext, Error};
use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::{
    CudaContext, CudaEvent, CudaFunction, CudaStream, LaunchConfig, PushKernelArg,
};
use cudarc::nvrtc::Ptx;
use gemm_runtime::DeviceInfo;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub mod entry;
pub mod fp8;
pub mod fp8_set;
pub mod fused;
pub mod grouped;
pub mod grouped_fp8;
pub mod host_cost;

pub use crate::verify::Shape;

/// A comma list of shapes.
pub fn parse_shapes(text: &str) -> Result<Vec<Shape>, String> {
    text.split(',')
        .filter(|part| !part.trim().is_empty())
        .map(str::parse)
        .collect()
}

/// Square sizes where the comparison is usually quoted.
pub fn quick_suite() -> Vec<Shape> {
    vec![Shape::cube(1024), Shape::cube(2048), Shape::cube(4096)]
}

/// The design's shape suite: squares, transformer projection shapes, a skinny-M long-K shape, two
/// sizes that are no tile's multiple, and two decode shapes (M of 64 and 16).
pub fn full_suite() -> Vec<Shape> {
    vec![
        Shape::cube(1024),
        Shape::cube(2048),
        Shape::cube(4096),
        Shape::cube(8192),
        Shape::new(4096, 4096, 1024),
        Shape::new(8192, 8192, 2048),
        Shape::new(4096, 14336, 4096),
        Shape::new(4096, 4096, 14336),
        Shape::new(128, 7168, 16384),
        Shape::new(3000, 5000, 1234),
        Shape::new(777, 4099, 2048),
        Shape::new(64, 8192, 8192),
        Shape::new(16, 4096, 14336),
    ]
}

/// TFLOP/s of one `shape` GEMM that took `ms` milliseconds.
pub fn tflops(shape: Shape, ms: f64) -> f64 {
    shape.flops() / (ms * 1e-3) / 1e12
}

/// The median (mean of the middle two for an even count). `None` for no samples.
pub fn median(samples: &[f32]) -> Option<f64> {
    let mut sorted: Vec<f64> = samples.iter().map(|&s| f64::from(s)).collect();
    sorted.sort_by(f64::total_cmp);
    let middle = sorted.len() / 2;
    match sorted.len() {
        0 => None,
        len if len % 2 == 1 => Some(sorted[middle]),
        _ => Some((sorted[middle - 1] + sorted[middle]) / 2.0),
    }
}

/// The geometric mean of `values`, `None` for none.
pub fn geomean(values: &[f64]) -> Option<f64> {
    (!values.is_empty())
        .then(|| (values.iter().map(|v| v.ln()).sum::<f64>() / values.len() as f64).exp())
}

/// How many copies of the inputs to rotate through so that consecutive launches do not find
/// their operands in L2: enough to cover twice the cache, at most `max_sets`.
pub fn input_sets(input_bytes: u64, l2_bytes: u64, max_sets: u32) -> u32 {
    if input_bytes == 0 {
        return 1;
    }
    let wanted = (2 * l2_bytes).div_ceil(input_bytes);
    wanted.clamp(1, u64::from(max_sets.max(1))) as u32
}

/// Per-launch times of ours and cuBLAS, measured alternately on one stream, and of ours'
/// math-only probe where it was timed in the same rotation.
#[derive(Clone, Debug, Default)]
pub struct InterleavedTimes {
    pub ours_ms: Vec<f32>,
    pub theirs_ms: Vec<f32>,
    pub math_only: Option<MathOnlyTimes>,
}

/// The probe's launches: their own flop count (not the shape's) and times.
#[derive(Clone, Debug, Default)]
pub struct MathOnlyTimes {
    pub flops_per_launch: f64,
    pub ms: Vec<f32>,
}

/// How many launches a measurement makes, and how they reach the GPU.
#[derive(Clone, Debug)]
pub struct Rounds {
    /// Untimed rounds first.
    pub warmup: usize,
    /// Then untimed rounds for at least this long: the board reaches the clocks it holds
    /// under sustained load (power and temperature limits) before anything is timed.
    pub sustain: Duration,
    /// Timed rounds.
    pub iters: usize,
    /// Queue the timed rounds behind this hold ([`Queue::Held`]); `None` launches them as
    /// the host issues them ([`Queue::Direct`]).
    pub hold: Option<Arc<LaunchHold>>,
}

/// How a measurement's timed launches reach the GPU.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Queue {
    /// As the host issues them. A kernel of a few microseconds can end before the host has
    /// issued the next launch, whose events then time that wait as well. Reports written
    /// before the hold existed were taken so.
    #[default]
    Direct,
    /// Behind a [`LaunchHold`]: the GPU waits while the host queues up to
    /// [`ROUNDS_PER_HOLD`] rounds, then runs them back to back.
    Held,
}

impl Queue {
    /// The method line's words for it.
    pub fn describe(self) -> &'static str {
        match self {
            Queue::Direct => "launched as the host issues them",
            Queue::Held => {
                "queued behind a one-thread hold kernel until the host has issued a batch of rounds, \
                 so no launch waits for the host"
            }
        }
    }
}

/// Timed rounds queued behind one hold: the launch queue holds them all (three competitors
/// make 96 launches and 192 events).
pub const ROUNDS_PER_HOLD: usize = 32;

/// Holds that end before the host has queued their batch, in a row, before timing gives up.
const HOLD_ATTEMPTS: u32 = 6;

/// A one-thread kernel that waits out a given time (by the GPU's global timer) on the stream
/// ahead of the timed launches. The host issues a batch of rounds while it runs, so each timed
/// launch starts as the one before it ends, and its events time the kernel, not the host.
#[derive(Debug)]
pub struct LaunchHold {
    function: CudaFunction,
    /// The next hold's length; set from how long the host took to queue the last batch.
    next_ns: AtomicU64,
}

/// The hold's first length: 32 rounds of three launches at ~20 µs each on the host.
const FIRST_HOLD_NS: u64 = 2_000_000;
/// The shortest hold: a batch of long kernels is queued in well under this.
const SHORTEST_HOLD_NS: u64 = 200_000;

const HOLD_KERNEL: &str = "gemm_bench_hold";

/// `nanosleep` needs sm_70 (PTX 6.3); the driver compiles this for any later device.
const HOLD_PTX: &str = r#"
.version 7.0
.target sm_70
.address_size 64

.visible .entry gemm_bench_hold(.param .u64 hold_ns)
{
    .reg .pred %p_waiting;
    .reg .b64 %hold_ns, %start, %now;

    ld.param.u64 %hold_ns, [hold_ns];
    mov.u64 %start, %globaltimer;
$wait:
    nanosleep.u32 1000;
    mov.u64 %now, %globaltimer;
    sub.u64 %now, %now, %start;
    setp.lt.u64 %p_waiting, %now, %hold_ns;
    @%p_waiting bra $wait;
    ret;
}
"#;

impl LaunchHold {
    pub fn load(ctx: &Arc<CudaContext>) -> Result<LaunchHold, Error> {
        let module = ctx
            .load_module(Ptx::from_src(HOLD_PTX))
            .during(|| format!("loading `{HOLD_KERNEL}`"))?;
        let function = module
            .load_function(HOLD_KERNEL)
            .during(|| format!("finding `{HOLD_KERNEL}`"))?;
        Ok(LaunchHold {
            function,
            next_ns: AtomicU64::new(FIRST_HOLD_NS),
        })
    }

    /// Enqueues one hold of `hold` on `stream`.
    pub fn launch(&self, stream: &CudaStream, hold: Duration) -> Result<(), Error> {
        let hold_ns = u64::try_from(hold.as_nanos()).unwrap_or(u64::MAX);
        let mut launch = stream.launch_builder(&self.function);
        launch.arg(&hold_ns);
        let one_thread = LaunchConfig {
            grid_dim: (1, 1, 1),
            block_dim: (1, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: the kernel's one parameter is the u64 pushed above; it touches no memory.
        unsafe { launch.launch(one_thread) }
            .map(|_| ())
            .during(|| format!("launching `{HOLD_KERNEL}` for {hold:?}"))
    }

    fn next(&self) -> Duration {
        Duration::from_nanos(self.next_ns.load(Ordering::Relaxed))
    }

    /// After a batch the host queued in `queued_in`: the next hold is twice that (at least
    /// [`SHORTEST_HOLD_NS`]), and, where this hold ended first, at least twice this one.
    fn adapt(&self, hold: Duration, queued_in: Duration, held_through: bool) {
        let next = next_hold(hold, queued_in, held_through);
        self.next_ns.store(
            u64::try_from(next.as_nanos()).unwrap_or(u64::MAX),
            Ordering::Relaxed,
        );
    }
}

/// The hold after one that lasted `hold` while the host queued its batch in `queued_in`.
pub fn next_hold(hold: Duration, queued_in: Duration, held_through: bool) -> Duration {
    let from_host = (queued_in * 2).max(Duration::from_nanos(SHORTEST_HOLD_NS));
    if held_through {
        from_host
    } else {
        from_host.max(hold * 2)
    }
}

/// One launch of a competitor: gets a running launch index (for rotating inputs) and must
/// enqueue exactly one kernel on the stream.
pub type Launcher<'a> = dyn FnMut(usize) -> Result<(), Error> + 'a;

/// Runs the competitors in turn, round after round, so that clocks and temperature drift
/// affect all alike: `warmup` rounds, rounds for `sustain`, then `iters` timed rounds in which
/// each launch is bracketed by its own pair of CUDA events (queued behind `rounds.hold` in
/// batches, when there is one). Returns each competitor's times.
pub fn time_round_robin(
    stream: &Arc<CudaStream>,
    rounds: &Rounds,
    competitors: &mut [&mut Launcher<'_>],
) -> Result<Vec<Vec<f32>>, Error> {
    let mut index = 0;
    let round = |competitors: &mut [&mut Launcher<'_>], index: &mut usize| {
        for launch in competitors.iter_mut() {
            launch(*index)?;
        }
        *index += 1;
        Ok::<(), Error>(())
    };
    for _ in 0..rounds.warmup {
        round(competitors, &mut index)?;
    }
    let sustain_until = Instant::now() + rounds.sustain;
    while Instant::now() < sustain_until {
        // Enqueue a few rounds at a time and wait for them, so the clock check sees the GPU's
        // progress rather than the queue's.
        for _ in 0..SUSTAIN_ROUNDS_PER_CHECK {
            round(competitors, &mut index)?;
        }
        stream
            .synchronize()
            .during(|| "waiting for the sustaining launches".to_string())?;
    }
    let mut times = vec![Vec::with_capacity(rounds.iters); competitors.len()];
    let mut left = rounds.iters;
    while left > 0 {
        let batch = match rounds.hold {
            Some(_) => left.min(ROUNDS_PER_HOLD),
            None => left,
        };
        let batch_times = match &rounds.hold {
            Some(hold) => time_held(stream, hold, batch, competitors, &mut index)?,
            None => time_batch(stream, batch, competitors, &mut index, None)?.times,
        };
        for (all, new) in times.iter_mut().zip(batch_times) {
            all.extend(new);
        }
        left -= batch;
    }
    Ok(times)
}

/// `rounds` timed rounds behind a hold, lengthened until one outlasts the host's queuing.
fn time_held(
    stream: &Arc<CudaStream>,
    hold: &LaunchHold,
    rounds: usize,
    competitors: &mut [&mut Launcher<'_>],
    index: &mut usize,
) -> Result<Vec<Vec<f32>>, Error> {
    let hold_end = stream
        .context()
        .new_event(None)
        .during(|| "creating the hold's event".to_string())?;
    let mut last = (Duration::ZERO, Duration::ZERO);
    for _ in 0..HOLD_ATTEMPTS {
        let length = hold.next();
        hold.launch(stream, length)?;
        hold_end
            .record(stream)
            .during(|| "recording the hold's end".to_string())?;
        let batch = time_batch(stream, rounds, competitors, index, Some(&hold_end))?;
        hold.adapt(length, batch.queued_in, batch.held_through);
        if batch.held_through {
            return Ok(batch.times);
        }
        last = (length, batch.queued_in);
    }
    Err(Error::Timing(format!(
        "{HOLD_ATTEMPTS} holds in a row ended before the host had queued {rounds} rounds of {} \
         launches (the last hold lasted {:?}, the host took {:?})",
        competitors.len(),
        last.0,
        last.1
    )))
}

/// One batch of timed rounds.
struct Batch {
    /// Each competitor's times.
    times: Vec<Vec<f32>>,
    /// How long the host took to queue the batch.
    queued_in: Duration,
    /// Whether the hold before the batch was still running when the host had queued it all.
    held_through: bool,
}

/// Queues `rounds` rounds, each launch between its own pair of events, then waits for them;
/// `hold_end` (recorded before them, if any) is queried as soon as the last is queued.
fn time_batch(
    stream: &Arc<CudaStream>,
    rounds: usize,
    competitors: &mut [&mut Launcher<'_>],
    index: &mut usize,
    hold_end: Option<&CudaEvent>,
) -> Result<Batch, Error> {
    let ctx = stream.context();
    // Timing is off for events created without flags: ask for the default (timed) kind.
    let timed_event = || -> Result<CudaEvent, Error> {
        ctx.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
            .during(|| "creating a timing event".to_string())
    };
    let mut brackets: Vec<Vec<(CudaEvent, CudaEvent)>> = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        brackets.push(
            (0..competitors.len())
                .map(|_| Ok((timed_event()?, timed_event()?)))
                .collect::<Result<_, Error>>()?,
        );
    }
    let record = |event: &CudaEvent| {
        event
            .record(stream)
            .during(|| "recording a timing event".to_string())
    };
    let queuing = Instant::now();
    for round_events in &brackets {
        for (launch, (start, end)) in competitors.iter_mut().zip(round_events) {
            record(start)?;
            launch(*index)?;
            record(end)?;
        }
        *index += 1;
    }
    let queued_in = queuing.elapsed();
    let held_through = match hold_end {
        Some(event) => !event
            .try_is_complete()
            .during(|| "asking whether the hold has ended".to_string())?,
        None => false,
    };
    stream
        .synchronize()
        .during(|| "waiting for the timed launches".to_string())?;
    let mut times = vec![Vec::with_capacity(rounds); competitors.len()];
    for round_events in &brackets {
        for (competitor, (start, end)) in round_events.iter().enumerate() {
            times[competitor].push(
                start
                    .elapsed_ms(end)
                    .during(|| "reading a timing event".to_string())?,
            );
        }
    }
    Ok(Batch {
        times,
        queued_in,
        held_through,
    })
}

/// Rounds enqueued between clock checks while sustaining.
const SUSTAIN_ROUNDS_PER_CHECK: usize = 4;

/// One (spec, shape) measurement.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BenchRecord {
    pub spec: String,
    /// The kernel's element types, `dtype->out` (e.g. `bf16->bf16`); reports written before
    /// other types existed read back as `f32->f32`.
    #[serde(default = "f32_types")]
    pub types: String,
    /// The cuBLAS call timed against it, by [`CublasGemm::short_name`](crate::baseline::cublas::CublasGemm::short_name)
    /// (`SGEMM`, `GemmEx bf16->bf16`, ...); older reports read back as `SGEMM`.
    #[serde(default = "sgemm_baseline")]
    pub baseline: String,
    pub shape: Shape,
    pub ours_median_ms: f64,
    pub cublas_median_ms: f64,
    pub ours_tflops: f64,
    pub cublas_tflops: f64,
    /// ours / cuBLAS throughput.
    pub ratio: f64,
    /// The spec's math-only probe, timed in the same rotation (`--math-only`): the
    /// throughput its main-loop instructions reach with no memory traffic.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub math_only_tflops: Option<f64>,
    /// The correctness check run before timing (`--check`), as text.
    pub check: Option<String>,
}

fn f32_types() -> String {
    "f32->f32".to_string()
}

fn sgemm_baseline() -> String {
    "SGEMM".to_string()
}

impl BenchRecord {
    /// `None` when a timed competitor has no timed launch.
    pub fn new(
        spec: &str,
        types: &str,
        baseline: &str,
        shape: Shape,
        times: &InterleavedTimes,
        check: Option<String>,
    ) -> Option<BenchRecord> {
        let ours_median_ms = median(&times.ours_ms)?;
        let cublas_median_ms = median(&times.theirs_ms)?;
        let ours_tflops = tflops(shape, ours_median_ms);
        let cublas_tflops = tflops(shape, cublas_median_ms);
        let math_only_tflops = match &times.math_only {
            Some(probe) => Some(probe.flops_per_launch / (median(&probe.ms)? * 1e9)),
            None => None,
        };
        Some(BenchRecord {
            spec: spec.to_string(),
            types: types.to_string(),
            baseline: baseline.to_string(),
            shape,
            ours_median_ms,
            cublas_median_ms,
            ours_tflops,
            cublas_tflops,
            ratio: ours_tflops / cublas_tflops,
            math_only_tflops,
            check,
        })
    }
}

/// A shape a spec cannot run, and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Skipped {
    pub spec: String,
    pub shape: Shape,
    pub reason: String,
}

/// How the numbers were taken.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Method {
    pub warmup: usize,
    /// Seconds of untimed rounds after the warm-up (reports from before it existed: none).
    #[serde(default)]
    pub sustain_s: u64,
    /// Milliseconds of untimed rounds after the warm-up, for clocks to ramp up (reports from
    /// before it existed: none).
    #[serde(default)]
    pub warm_ms: u64,
    pub iters: usize,
    /// How the timed launches reached the GPU (reports from before the hold: directly).
    #[serde(default)]
    pub queue: Queue,
    pub max_input_sets: u32,
    pub inputs: String,
    pub baseline: String,
    pub statistic: String,
}

/// Everything a benchmark run produced.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BenchReport {
    pub date: String,
    pub device: DeviceInfo,
    pub method: Method,
    pub records: Vec<BenchRecord>,
    pub skipped: Vec<Skipped>,
}

impl BenchReport {
    /// The fixed-width table printed on stdout.
    pub fn table(&self) -> String {
        let with_math_only = self.with_math_only();
        let mut out = format!(
            "{:<28} {:<10} {:>18} {:>12} {:>12} {:>8}",
            "spec", "types", "shape", "ours TF/s", "cuBLAS TF/s", "ratio"
        );
        if with_math_only {
            out.push_str(&format!(" {:>12} {:>10}", "math TF/s", "ours/math"));
        }
        out.push_str("  cuBLAS baseline\n");
        for record in &self.records {
            out.push_str(&format!(
                "{:<28} {:<10} {:>18} {:>12.2} {:>12.2} {:>8.3}",
                record.spec,
                record.types,
                record.shape.to_string(),
                record.ours_tflops,
                record.cublas_tflops,
                record.ratio,
            ));
            if with_math_only {
                match record.math_only_tflops {
                    Some(math) => out.push_str(&format!(
                        " {math:>12.2} {:>10.3}",
                        record.ours_tflops / math
                    )),
                    None => out.push_str(&format!(" {:>12} {:>10}", "-", "-")),
                }
            }
            out.push_str(&format!("  {}\n", record.baseline));
        }
        out
    }

    fn with_math_only(&self) -> bool {
        self.records.iter().any(|r| r.math_only_tflops.is_some())
    }

    /// A dated markdown report: device, method, one table row per measurement, skipped shapes.
    pub fn markdown(&self) -> String {
        let device = &self.device;
        let clock =
            |mhz: Option<u32>| mhz.map_or("not reported".to_string(), |v| format!("{v} MHz"));
        let mut out = format!("# gemm-bench, {}\n\n", self.date);
        out.push_str(&format!(
            "- Device: {} (compute capability {}, {} SMs, L2 {} MiB)\n",
            device.name,
            device.compute_capability,
            device.multiprocessors,
            device.l2_cache_bytes / (1024 * 1024)
        ));
        out.push_str(&format!("- Driver: CUDA {}\n", device.driver_version));
        out.push_str(&format!(
            "- Clocks the driver reports (peak): SM {}, memory {}\n",
            clock(device.sm_clock_mhz),
            clock(device.memory_clock_mhz)
        ));
        let method = &self.method;
        let sustain = match (method.sustain_s, method.warm_ms) {
            (0, 0) => String::new(),
            (0, ms) => format!(", at least {ms} ms of untimed launches"),
            (s, 0) => format!(", {s} s of untimed launches"),
            (s, ms) => format!(", {s} s and {ms} ms of untimed launches"),
        };
        out.push_str(&format!(
            "- Method: {}; {} warm-up launches{sustain}, then {} timed launches each, {}, {}; \
             baseline {}; up to {} input sets rotated so operands are not L2-resident\n",
            method.inputs,
            method.warmup,
            method.iters,
            method.queue.describe(),
            method.statistic,
            method.baseline,
            method.max_input_sets
        ));
        let with_math_only = self.with_math_only();
        if with_math_only {
            out.push_str(
                "- math-only: the spec's main-loop instructions alone (no loads, copies or barriers) \
                 on the kernel's resident blocks, timed in the same rotation\n",
            );
        }
        out.push('\n');
        let with_check = self.records.iter().any(|r| r.check.is_some());
        out.push_str("| spec | types | shape | ours TFLOP/s | cuBLAS TFLOP/s | ours / cuBLAS |");
        if with_math_only {
            out.push_str(" math-only TFLOP/s | ours / math-only |");
        }
        out.push_str(" cuBLAS baseline |");
        out.push_str(if with_check { " check |\n" } else { "\n" });
        out.push_str("|---|---|---|---:|---:|---:|");
        if with_math_only {
            out.push_str("---:|---:|");
        }
        out.push_str("---|");
        out.push_str(if with_check { "---|\n" } else { "\n" });
        for record in &self.records {
            out.push_str(&format!(
                "| {} | {} | {} | {:.2} | {:.2} | {:.3} |",
                record.spec,
                record.types,
                record.shape,
                record.ours_tflops,
                record.cublas_tflops,
                record.ratio,
            ));
            if with_math_only {
                match record.math_only_tflops {
                    Some(math) => {
                        out.push_str(&format!(" {math:.2} | {:.3} |", record.ours_tflops / math))
                    }
                    None => out.push_str(" - | - |"),
                }
            }
            out.push_str(&format!(" {} |", record.baseline));
            if with_check {
                match &record.check {
                    Some(check) => out.push_str(&format!(" {check} |")),
                    None => out.push_str(" |"),
                }
            }
            out.push('\n');
        }
        if !self.skipped.is_empty() {
            out.push_str("\nNot run:\n\n");
            for skip in &self.skipped {
                out.push_str(&format!(
                    "- {} at {}: {}\n",
                    skip.spec, skip.shape, skip.reason
                ));
            }
        }
        out
    }

    /// The SVG chart: TFLOP/s per shape, one line per spec, cuBLAS as a thick black line
    /// (median of its measurements at each shape). One panel per cuBLAS baseline, so f32 SIMT
    /// kernels and tensor-core kernels each get a scale of their own.
    pub fn svg(&self) -> Result<String, String> {
        use plotters::prelude::*;
        let mut baselines: Vec<&str> = Vec::new();
        for record in &self.records {
            if !baselines.contains(&record.baseline.as_str()) {
                baselines.push(&record.baseline);
            }
        }
        let panels: Vec<Vec<&BenchRecord>> = if baselines.is_empty() {
            vec![Vec::new()]
        } else {
            baselines
                .iter()
                .map(|baseline| {
                    self.records
                        .iter()
                        .filter(|r| r.baseline == *baseline)
                        .collect()
                })
                .collect()
        };
        let most_shapes = panels
            .iter()
            .map(|records| distinct_shapes(records).len())
            .max()
            .unwrap_or(0);
        let width = 960u32.max(140 * most_shapes as u32);
        let height = if panels.len() == 1 {
            640
        } else {
            520 * panels.len() as u32
        };
        let mut svg = String::new();
        {
            let root = SVGBackend::with_string(&mut svg, (width, height)).into_drawing_area();
            root.fill(&WHITE).map_err(|e| chart_error(&e))?;
            for (area, records) in root.split_evenly((panels.len(), 1)).iter().zip(&panels) {
                self.draw_panel(area, records)?;
            }
            root.present().map_err(|e| chart_error(&e))?;
        }
        Ok(svg)
    }

    /// One chart: the records of one cuBLAS baseline.
    fn draw_panel(
        &self,
        area: &plotters::drawing::DrawingArea<
            plotters::prelude::SVGBackend<'_>,
            plotters::coord::Shift,
        >,
        records: &[&BenchRecord],
    ) -> Result<(), String> {
        use plotters::prelude::*;
        let shapes = distinct_shapes(records);
        let mut specs: Vec<&str> = Vec::new();
        let mut types: Vec<&str> = Vec::new();
        for record in records {
            if !specs.contains(&record.spec.as_str()) {
                specs.push(&record.spec);
            }
            if !types.contains(&record.types.as_str()) {
                types.push(&record.types);
            }
        }
        let baseline = records.first().map_or("", |r| r.baseline.as_str());
        let cublas: Vec<(SegmentValue<usize>, f64)> = shapes
            .iter()
            .enumerate()
            .filter_map(|(index, shape)| {
                let samples: Vec<f32> = records
                    .iter()
                    .filter(|r| r.shape == *shape)
                    .map(|r| r.cublas_tflops as f32)
                    .collect();
                median(&samples).map(|value| (SegmentValue::CenterOf(index), value))
            })
            .collect();
        let highest = records
            .iter()
            .flat_map(|r| [r.ours_tflops, r.cublas_tflops])
            .fold(1.0f64, f64::max);
        // Headroom above the data for the legend in the upper right: about 16 px per entry
        // of a ~500 px plot, plus a margin.
        let legend_fraction = (16.0 * (specs.len() + 1) as f64 / 500.0).min(0.6);
        let top = highest / (0.92 - legend_fraction).max(0.3);
        let fail = |error: &dyn fmt::Display| chart_error(error);
        // One segment per shape, points at segment centres (plotters' categorical axis).
        let label = |value: &SegmentValue<usize>| match value {
            SegmentValue::CenterOf(index) | SegmentValue::Exact(index) => {
                shapes.get(*index).map_or(String::new(), Shape::to_string)
            }
            SegmentValue::Last => String::new(),
        };
        let title_types = if types.is_empty() {
            "f32".to_string()
        } else {
            types.join(", ")
        };
        let mut chart = ChartBuilder::on(area)
            .caption(
                format!(
                    "{title_types} GEMM on {} ({}), TFLOP/s",
                    self.device.name, self.date
                ),
                ("sans-serif", 20),
            )
            .margin(15)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(
                (0usize..shapes.len().max(1) - 1).into_segmented(),
                0f64..top,
            )
            .map_err(|e| fail(&e))?;
        chart
            .configure_mesh()
            .x_labels(shapes.len().max(1))
            .disable_x_mesh()
            .x_label_formatter(&label)
            .x_desc("shape (M x N x K)")
            .y_desc("TFLOP/s")
            .draw()
            .map_err(|e| fail(&e))?;
        for (index, spec) in specs.iter().enumerate() {
            let (r, g, b) = SERIES_COLORS[index % SERIES_COLORS.len()];
            let color = RGBColor(r, g, b).to_rgba();
            let points: Vec<(SegmentValue<usize>, f64)> = records
                .iter()
                .filter(|r| r.spec == *spec)
                .filter_map(|r| {
                    let x = shapes.iter().position(|s| *s == r.shape)?;
                    Some((SegmentValue::CenterOf(x), r.ours_tflops))
                })
                .collect();
            chart
                .draw_series(LineSeries::new(points.clone(), color.stroke_width(2)))
                .map_err(|e| fail(&e))?
                .label(*spec)
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
                });
            chart
                .draw_series(PointSeries::of_element(
                    points,
                    4,
                    color.filled(),
                    &|coord, size, style| {
                        EmptyElement::at(coord) + Circle::new((0, 0), size, style)
                    },
                ))
                .map_err(|e| fail(&e))?;
        }
        chart
            .draw_series(LineSeries::new(cublas.clone(), BLACK.stroke_width(4)))
            .map_err(|e| fail(&e))?
            .label(format!("cuBLAS {baseline}"))
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLACK.stroke_width(4)));
        chart
            .draw_series(PointSeries::of_element(
                cublas,
                5,
                BLACK.filled(),
                &|coord, size, style| EmptyElement::at(coord) + Cross::new((0, 0), size, style),
            ))
            .map_err(|e| fail(&e))?;
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()
            .map_err(|e| fail(&e))?;
        Ok(())
    }
}

/// The shapes of `records`, in order of first appearance.
fn distinct_shapes(records: &[&BenchRecord]) -> Vec<Shape> {
    let mut shapes: Vec<Shape> = Vec::new();
    for record in records {
        if !shapes.contains(&record.shape) {
            shapes.push(record.shape);
        }
    }
    shapes
}

fn chart_error(error: &dyn fmt::Display) -> String {
    format!("drawing the chart: {error}")
}

/// Line colours of the chart (Tableau 10): distinct on white, cuBLAS is black.
const SERIES_COLORS: [(u8, u8, u8); 10] = [
    (31, 119, 180),
    (255, 127, 14),
    (44, 160, 44),
    (214, 39, 40),
    (148, 103, 189),
    (140, 86, 75),
    (227, 119, 194),
    (127, 127, 127),
    (188, 189, 34),
    (23, 190, 207),
];

/// Today's UTC date as `YYYY-MM-DD`.
pub fn today() -> String {
    let seconds = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (year, month, day) = civil_date(seconds / 86_400);
    format!("{year:04}-{month:02}-{day:02}")
}

/// The proleptic Gregorian date `days` after 1970-01-01 (H. Hinnant's days-to-civil).
pub fn civil_date(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let day_of_era = z % 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_index + 2) / 5 + 1;
    let month = if month_index < 10 {
        month_index + 3
    } else {
        month_index - 9
    };
    let year = year_of_era + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;
    use gemm_dsl::abi::LaunchShape;

    fn report() -> BenchReport {
        let times = |ours: &[f32], theirs: &[f32]| InterleavedTimes {
            ours_ms: ours.to_vec(),
            theirs_ms: theirs.to_vec(),
            math_only: None,
        };
        let cube = Shape::cube(1024);
        let big = Shape::cube(2048);
        // 2·1024³ flop in 0.1 ms = 21.47 TFLOP/s.
        let sgemm = |spec, shape, times: &InterleavedTimes, check| {
            BenchRecord::new(spec, "f32->f32", "SGEMM", shape, times, check).unwrap()
        };
        let records = vec![
            sgemm(
                "k1",
                cube,
                &times(&[0.1, 0.3, 0.1], &[0.08, 0.08, 0.5]),
                None,
            ),
            sgemm(
                "k1",
                big,
                &times(&[0.8], &[0.64]),
                Some("rel 1.0e-6".to_string()),
            ),
            sgemm("k2", cube, &times(&[0.2], &[0.08]), None),
            BenchRecord::new(
                "mma_k3",
                "bf16->bf16",
                "GemmEx bf16->bf16",
                cube,
                &times(&[0.01], &[0.008]),
                None,
            )
            .unwrap(),
        ];
        BenchReport {
            date: "2026-11-21".to_string(),
            device: DeviceInfo {
                name: "Test GPU".to_string(),
                driver_version: "13.0".to_string(),
                compute_capability: "9.0".to_string(),
                multiprocessors: 132,
                sm_clock_mhz: Some(1980),
                memory_clock_mhz: None,
                l2_cache_bytes: 50 * 1024 * 1024,
            },
            method: Method {
                warmup: 5,
                sustain_s: 0,
                warm_ms: 0,
                iters: 20,
                queue: Queue::Held,
                max_input_sets: 8,
                inputs: "random normal f32".to_string(),
                baseline: "SGEMM = cublasSgemm; GemmEx bf16->bf16 = cublasGemmEx".to_string(),
                statistic: "median".to_string(),
            },
            records,
            skipped: vec![Skipped {
                spec: "k2".to_string(),
                shape: Shape::new(777, 4099, 2048),
                reason: "M = 777 is not a positive multiple of the tile's 128".to_string(),
            }],
        }
    }

    #[test]
    fn shapes_parse_and_print() {
        assert_eq!(
            "4096x14336x1024".parse::<Shape>().unwrap(),
            Shape::new(4096, 14336, 1024)
        );
        assert_eq!(Shape::new(3, 5, 7).to_string(), "3x5x7");
        assert!("4096x4096".parse::<Shape>().is_err());
        assert!("0x1x1".parse::<Shape>().is_err());
        assert!("ax1x1".parse::<Shape>().unwrap_err().contains("MxNxK"));
        assert_eq!(
            parse_shapes("128x128x8, 256x384x512,").unwrap(),
            vec![Shape::new(128, 128, 8), Shape::new(256, 384, 512)]
        );
    }

    #[test]
    fn batched_shapes_parse_print_and_count_every_product() {
        let shape: Shape = "8x1024x1024x512".parse().unwrap();
        assert_eq!(shape, Shape::batched(8, 1024, 1024, 512));
        assert_eq!(shape.to_string(), "8x1024x1024x512");
        assert_eq!(shape.flops(), 8.0 * Shape::new(1024, 1024, 512).flops());
        assert_eq!(Shape::batched(1, 3, 5, 7), Shape::new(3, 5, 7));
        assert!("0x8x8x8".parse::<Shape>().is_err());
        assert!("2x8x8x8x8"
            .parse::<Shape>()
            .unwrap_err()
            .contains("BxMxNxK"));
        // A batch is part of a record's JSON; reports without one read back as one product.
        let json = serde_json::to_string(&shape).unwrap();
        assert_eq!(json, r#"{"m":1024,"n":1024,"k":512,"batch":8}"#);
        let single: Shape = serde_json::from_str(r#"{"m":3,"n":5,"k":7}"#).unwrap();
        assert_eq!(single, Shape::new(3, 5, 7));
        assert_eq!(
            serde_json::to_string(&single).unwrap(),
            r#"{"m":3,"n":5,"k":7}"#
        );
    }

    #[test]
    fn suites_are_filtered_by_the_tile() {
        let launch = *gemm_codegen::emit_str(gemm_codegen::catalog::CATALOG[0].spec)
            .unwrap()
            .launch();
        // The catalog's kernels compute partial tiles: every shape of the suites runs.
        assert!(launch.partial_tiles);
        assert!(full_suite().iter().all(|s| s.admitted_by(&launch).is_ok()));
        // A whole-tile kernel runs only the multiples of its tile.
        let whole = LaunchShape {
            partial_tiles: false,
            ..launch
        };
        let admitted: Vec<Shape> = full_suite()
            .into_iter()
            .filter(|s| s.admitted_by(&whole).is_ok())
            .collect();
        assert!(admitted.contains(&Shape::cube(4096)));
        assert!(!admitted.contains(&Shape::new(3000, 5000, 1234)));
        assert!(!admitted.contains(&Shape::new(777, 4099, 2048)));
        assert!(quick_suite().iter().all(|s| s.admitted_by(&whole).is_ok()));
    }

    #[test]
    fn medians_and_throughput() {
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
        let t = tflops(Shape::cube(1024), 0.1);
        assert!((t - 21.474_836_48).abs() < 1e-6, "{t}");
    }

    #[test]
    fn input_sets_cover_twice_the_l2() {
        let l2 = 50 << 20;
        // 1024³ f32: A + B = 8 MiB, 100 MiB / 8 MiB rounds up to 13, capped at 8.
        assert_eq!(input_sets(8 << 20, l2, 8), 8);
        assert_eq!(input_sets(40 << 20, l2, 8), 3);
        assert_eq!(input_sets(512 << 20, l2, 8), 1);
        assert_eq!(input_sets(0, l2, 8), 1);
    }

    #[test]
    fn records_use_medians_and_ratios() {
        let report = report();
        let first = &report.records[0];
        assert!((first.ours_median_ms - 0.1).abs() < 1e-6);
        assert!((first.cublas_median_ms - 0.08).abs() < 1e-6);
        assert!((first.ratio - 0.8).abs() < 1e-6);
    }

    #[test]
    fn markdown_has_device_method_rows_and_skips() {
        let markdown = report().markdown();
        assert!(markdown.starts_with("# gemm-bench, 2026-11-21\n"));
        assert!(markdown.contains("Test GPU (compute capability 9.0, 132 SMs, L2 50 MiB)"));
        assert!(markdown.contains("SM 1980 MHz, memory not reported"));
        assert!(markdown.contains(
            "| spec | types | shape | ours TFLOP/s | cuBLAS TFLOP/s | ours / cuBLAS | cuBLAS baseline | check |"
        ));
        assert!(
            markdown
                .contains("| k1 | f32->f32 | 1024x1024x1024 | 21.47 | 26.84 | 0.800 | SGEMM | |"),
            "{markdown}"
        );
        assert!(markdown.contains("| k1 | f32->f32 | 2048x2048x2048 |"));
        assert!(markdown.contains("rel 1.0e-6 |"));
        assert!(markdown.contains(
            "| mma_k3 | bf16->bf16 | 1024x1024x1024 | 214.75 | 268.44 | 0.800 | GemmEx bf16->bf16 | |"
        ), "{markdown}");
        assert!(
            markdown.contains("baseline SGEMM = cublasSgemm; GemmEx bf16->bf16 = cublasGemmEx;")
        );
        assert!(markdown.contains("- k2 at 777x4099x2048: M = 777"));
        assert!(
            markdown.contains("20 timed launches each, queued behind a one-thread hold kernel"),
            "{markdown}"
        );
        let table = report().table();
        assert_eq!(table.lines().count(), 5);
        assert!(table.lines().nth(1).unwrap().contains("21.47"));
        assert!(table.lines().nth(4).unwrap().ends_with("GemmEx bf16->bf16"));
    }

    #[test]
    fn reports_from_before_the_hold_read_back_as_launched_directly() {
        let mut json: serde_json::Value = serde_json::to_value(report()).unwrap();
        json["method"].as_object_mut().unwrap().remove("queue");
        let back: BenchReport = serde_json::from_value(json).unwrap();
        assert_eq!(back.method.queue, Queue::Direct);
        assert!(back.markdown().contains("launched as the host issues them"));
    }

    #[test]
    fn a_hold_grows_past_the_hosts_queuing_and_shrinks_back() {
        let ms = Duration::from_millis;
        let us = Duration::from_micros;
        // Held through: twice the host's time, not below the shortest hold.
        assert_eq!(next_hold(ms(2), us(600), true), us(1200));
        assert_eq!(next_hold(ms(2), us(30), true), us(200));
        // Ended first: at least twice the hold, and twice the host's time where that is more.
        assert_eq!(next_hold(ms(2), ms(3), false), ms(6));
        assert_eq!(next_hold(ms(2), us(500), false), ms(4));
        // A host always slower than the hold makes the holds grow without bound, so timing
        // gives up after HOLD_ATTEMPTS of them (time_held).
        let mut hold = ms(2);
        for _ in 0..HOLD_ATTEMPTS {
            let next = next_hold(hold, hold * 3, false);
            assert!(next > hold);
            hold = next;
        }
    }

    #[test]
    fn json_carries_every_record_and_reads_back() {
        let text = serde_json::to_string_pretty(&report()).unwrap();
        let back: BenchReport = serde_json::from_str(&text).unwrap();
        // serde_json's float parsing may land one ulp off, so numbers compare approximately.
        let original = report();
        assert_eq!(
            (&back.date, &back.device, &back.method, &back.skipped),
            (
                &original.date,
                &original.device,
                &original.method,
                &original.skipped
            )
        );
        assert_eq!(back.records.len(), original.records.len());
        for (read, written) in back.records.iter().zip(&original.records) {
            assert_eq!(
                (
                    &read.spec,
                    &read.types,
                    &read.baseline,
                    read.shape,
                    &read.check
                ),
                (
                    &written.spec,
                    &written.types,
                    &written.baseline,
                    written.shape,
                    &written.check
                )
            );
            assert!((read.ratio - written.ratio).abs() < 1e-12);
            assert!((read.ours_tflops - written.ours_tflops).abs() < 1e-9);
        }
        let value = serde_json::to_value(report()).unwrap();
        assert_eq!(value["records"].as_array().unwrap().len(), 4);
        assert_eq!(value["records"][3]["types"], "bf16->bf16");
        assert_eq!(value["records"][3]["baseline"], "GemmEx bf16->bf16");
        assert_eq!(value["records"][0]["shape"]["m"], 1024);
        assert_eq!(value["device"]["driver_version"], "13.0");
        assert_eq!(value["skipped"][0]["spec"], "k2");
    }

    #[test]
    fn reports_from_before_other_types_read_as_f32_sgemm() {
        let mut value = serde_json::to_value(report()).unwrap();
        for record in value["records"].as_array_mut().unwrap() {
            let record = record.as_object_mut().unwrap();
            record.remove("types");
            record.remove("baseline");
        }
        let back: BenchReport = serde_json::from_value(value).unwrap();
        assert!(back
            .records
            .iter()
            .all(|r| r.types == "f32->f32" && r.baseline == "SGEMM"));
    }

    #[test]
    fn svg_draws_every_spec_and_cublas() {
        let svg = report().svg().unwrap();
        assert!(svg.starts_with("<svg"));
        for text in [
            "k1",
            "k2",
            "mma_k3",
            "cuBLAS SGEMM",
            "cuBLAS GemmEx bf16-&gt;bf16",
            "bf16-&gt;bf16 GEMM on Test GPU",
            "f32-&gt;f32 GEMM on Test GPU",
            "1024x1024x1024",
            "2048x2048x2048",
            "TFLOP/s",
        ] {
            assert!(svg.contains(text), "missing {text}");
        }
        // A single shape still makes a chart.
        let mut single = report();
        single.records.retain(|r| r.shape == Shape::cube(1024));
        let svg = single.svg().unwrap();
        assert!(svg.contains("1024x1024x1024") && svg.contains("k2"));
    }

    #[test]
    fn unaligned_rows_are_padded_to_16_bytes() {
        let shape = Shape::new(777, 4099, 1234);
        assert_eq!(shape.leading_dim(4099, 2, 16), 4104);
        assert_eq!(shape.leading_dim(1234, 2, 16), 1240);
        assert_eq!(shape.leading_dim(4096, 2, 16), 4096);
        assert_eq!(shape.leading_dim(4099, 4, 16), 4100);
        assert_eq!(shape.leading_dim(4099, 2, 128), 4160);
        assert_eq!(shape.leading_dim(4096, 2, 128), 4096);
    }

    #[test]
    fn civil_dates() {
        assert_eq!(civil_date(0), (1970, 1, 1));
        assert_eq!(civil_date(59), (1970, 3, 1));
        assert_eq!(civil_date(11_016), (2000, 2, 29));
        // 2026-11-21 is day 20 778.
        assert_eq!(civil_date(20_778), (2026, 11, 21));
        assert_eq!(today().len(), 10);
    }
}
