//! Picking a kernel per problem, without a GPU: a cost model over the plans of a kernel set.
//!
//! The model predicts each candidate's time from what its plan fixes — the tile, the blocks an
//! SM holds, the schedule (tile per block, persistent walk, stream-K tail), the pipeline depth —
//! and a [`DeviceModel`]'s few numbers. The busiest SM's work bounds the kernel from below:
//!
//! - **Tiles and waves.** `⌈M/BM⌉·⌈N/BN⌉·batch` tiles share out over the grid the kernel
//!   launches (a persistent walk spread evenly over as few blocks as keep its rounds); the SM
//!   with the most tiles sets the time. Padded edge tiles cost as much as full ones (the *waste*).
//! - **One k tile** costs the slowest of three: the math (flops over the family's rate, the
//!   math-only ceiling), the feed (bytes of the A and B tiles over the SM's share of L2
//!   bandwidth; doubled for an operand whose rows split 128-byte lines), and the latency the
//!   ring hides (a stage's wait for its first bytes plus its bytes' arrival, over the stages
//!   in flight).
//! - **Stream-K tails** follow the kernel's own rule ([`LaunchShape::grid_batched`] and the
//!   half-grid split): the leftover tiles' k tiles spread over the grid, and a tile's finisher
//!   reads the others' partial sums after its own k tiles: the fixup adds to the time of the
//!   main loop and the DRAM traffic, it hides under neither.
//! - **The HBM floor**: A, B and C cross HBM at least once, at a bandwidth that grows with the
//!   SMs pulling on it (the SMs with tiles: a walker past the last tile pulls nothing).
//!
//! The prediction is a ranking device, not a stopwatch: `gemm-bench --auto` measures the
//! picks, and `gemm-bench tune` writes the measured best where the model is wrong.

pub(crate) mod family_cost;
pub mod grouped;
mod refusal;
pub mod repack;
pub mod sets;
#[cfg(test)]
mod tests;

pub use family_cost::{Calibration, Candidate, MathUnit};
pub use grouped::GroupedShape;
pub use refusal::{Refusal, Remedy};
pub use repack::Repack;

use crate::abi::{LaunchShape, Operand};
use crate::{Arch, CLayout, DType, Layout, Schedule, StreamKSplit, Tail, ValidSpec};
use std::fmt;

/// One problem: `batch` products `C = A·B` of `m x n x k` in `layout`, with leading dimensions
/// in elements (packed ones by [`Problem::new`]) and the alignment its operands start at.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Problem {
    pub m: u32,
    pub n: u32,
    pub k: u32,
    pub batch: u32,
    pub layout: Layout,
    pub lda: u32,
    pub ldb: u32,
    pub ldc: u32,
    /// How C lies: row-major as the caller's, or column-major for the swapped product
    /// ([`Problem::swapped`]).
    pub c_layout: CLayout,
    /// The largest power of two, in bytes, that divides the address of A, B and C's first
    /// elements: [`ALLOCATION_ALIGN`] for buffers as the allocator returns them, less for a
    /// view that starts inside one.
    pub address_align: u32,
}

/// The alignment of a CUDA allocation's first byte, and what [`Problem::new`] assumes.
pub const ALLOCATION_ALIGN: u32 = 256;

impl Problem {
    /// One product with packed operands.
    pub fn new(m: u32, n: u32, k: u32, layout: Layout) -> Problem {
        let lda = if layout.a_row_major() { k } else { m };
        let ldb = if layout.b_row_major() { n } else { k };
        Problem {
            m,
            n,
            k,
            batch: 1,
            layout,
            lda,
            ldb,
            ldc: n,
            c_layout: CLayout::Row,
            address_align: ALLOCATION_ALIGN,
        }
    }

    pub fn with_batch(self, batch: u32) -> Problem {
        Problem { batch, ..self }
    }

    pub fn with_leading_dims(self, lda: u32, ldb: u32, ldc: u32) -> Problem {
        Problem {
            lda,
            ldb,
            ldc,
            ..self
        }
    }

    /// Operands that start only `bytes` aligned (a power of two; the largest one dividing
    /// every operand's address), as views into a buffer may.
    pub fn with_address_align(self, bytes: u32) -> Problem {
        Problem {
            address_align: bytes,
            ..self
        }
    }

    /// `MxNxK`, or `BxMxNxK` for a strided batch of B products (`X` works too), with packed
    /// operands.
    pub fn parse(text: &str, layout: Layout) -> Result<Problem, String> {
        let numbers: Vec<u32> = text
            .trim()
            .split(['x', 'X'])
            .map(|part| {
                part.trim()
                    .parse::<u32>()
                    .ok()
                    .filter(|&value| value > 0)
                    .ok_or_else(|| {
                        format!("`{text}`: `{part}` is not a size from 1 to {}", u32::MAX)
                    })
            })
            .collect::<Result<_, _>>()?;
        match numbers[..] {
            [m, n, k] => Ok(Problem::new(m, n, k, layout)),
            [batch, m, n, k] => Ok(Problem::new(m, n, k, layout).with_batch(batch)),
            _ => Err(format!("`{text}` is not MxNxK or BxMxNxK")),
        }
    }

    /// Every leading dimension rounded up to a multiple of `align_bytes` (A and B of
    /// `input_bytes` elements, C of `output_bytes`): the padded operands `gemm-bench` makes
    /// where a packed line would not be 16-byte aligned.
    pub fn with_lines_padded(
        self,
        align_bytes: u32,
        input_bytes: u32,
        output_bytes: u32,
    ) -> Problem {
        let pad = |ld: u32, element_bytes: u32| {
            let step = (align_bytes / element_bytes.max(1)).max(1);
            ld.div_ceil(step) * step
        };
        Problem {
            lda: pad(self.lda, input_bytes),
            ldb: pad(self.ldb, input_bytes),
            ldc: pad(self.ldc, output_bytes),
            ..self
        }
    }

    /// The same product as one row of C, where that is the same memory: for a column of C
    /// (`n = 1`, rows one element apart: `ldc = 1`) whose B holds its K elements one apart,
    /// `C = A·B` is `Cᵀ = Bᵀ·Aᵀ`, a `1 x m x k` problem with A' = B (one row), B' = A read in
    /// the other order (row-major A is a column-major B') and C' = C. Its lines are K and A's
    /// leading dimension, not one element: a matrix times a vector runs on the decode tiles
    /// instead of copies narrow enough for lines of one element. Batches keep their strides.
    pub fn as_one_row(&self) -> Option<Problem> {
        let b_contiguous = !self.layout.b_row_major() || self.ldb == 1;
        if self.n != 1 || self.ldc != 1 || !b_contiguous {
            return None;
        }
        let layout = if self.layout.a_row_major() {
            Layout::RowCol
        } else {
            Layout::RowRow
        };
        Some(Problem {
            m: 1,
            n: self.m,
            k: self.k,
            layout,
            // A' is one line: B's K elements, a batch's matrices as far apart as B's.
            lda: if self.layout.b_row_major() {
                self.k
            } else {
                self.ldb
            },
            ldb: self.lda,
            ldc: self.m,
            ..*self
        })
    }

    /// The same product with A and B swapped: `C = A·B` computed as `Cᵀ = Bᵀ·Aᵀ` over the
    /// same memory, an `n x m x k` problem whose A' is B and B' is A, each read in the other
    /// order (a column-major B is a row-major Bᵀ), and whose C' is C in the other order, with
    /// every leading dimension kept. For a few rows of C (decode), the weights' many columns
    /// then fill a tile's M side and the rows its N side.
    pub fn swapped(&self) -> Problem {
        let layout = match (!self.layout.b_row_major(), !self.layout.a_row_major()) {
            (true, true) => Layout::RowRow,
            (true, false) => Layout::RowCol,
            (false, true) => Layout::ColRow,
            (false, false) => Layout::ColCol,
        };
        Problem {
            m: self.n,
            n: self.m,
            layout,
            lda: self.ldb,
            ldb: self.lda,
            c_layout: match self.c_layout {
                CLayout::Row => CLayout::Col,
                CLayout::Col => CLayout::Row,
            },
            ..*self
        }
    }

    pub fn flops(&self) -> f64 {
        2.0 * f64::from(self.m) * f64::from(self.n) * f64::from(self.k) * f64::from(self.batch)
    }

    /// An operand's leading dimension.
    pub fn ld(&self, operand: Operand) -> u32 {
        match operand {
            Operand::A => self.lda,
            Operand::B => self.ldb,
            Operand::C => self.ldc,
        }
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.batch > 1 {
            write!(f, "{}x", self.batch)?;
        }
        write!(f, "{}x{}x{} {}", self.m, self.n, self.k, self.layout.name())?;
        if self.c_layout == CLayout::Col {
            f.write_str(" C column-major")?;
        }
        if self.address_align < ALLOCATION_ALIGN {
            write!(f, " at {}-byte aligned addresses", self.address_align)?;
        }
        Ok(())
    }
}

/// What the model knows of a GPU.
#[derive(Clone, Debug, PartialEq)]
pub struct DeviceModel {
    pub name: String,
    /// `major * 10 + minor`: which math rates apply.
    pub compute_capability: u32,
    pub sms: u32,
    /// The SM clock under sustained tensor-core load, MHz.
    pub sm_clock_mhz: u32,
    /// Peak DRAM bandwidth, bytes per second.
    pub memory_bytes_per_s: f64,
    /// L2 to one SM, bytes per clock, with every SM loading.
    pub l2_bytes_per_clk_per_sm: f64,
    /// DRAM latency under load, clocks: what a cold ring waits before its first k tile (once
    /// per block of a persistent walk, per tile otherwise). A stage in flight waits
    /// [`Calibration::stage_latency_clk`] plus its bytes' arrival instead.
    pub memory_latency_clk: f64,
    /// The model's fitted numbers for this board.
    pub calibration: Calibration,
}

impl DeviceModel {
    /// H100 SXM5: 132 SMs, HBM3 at 3.35 TB/s.
    pub fn h100_sxm() -> DeviceModel {
        DeviceModel {
            name: "H100 SXM (model)".to_string(),
            compute_capability: 90,
            sms: 132,
            sm_clock_mhz: 1830,
            memory_bytes_per_s: 3.35e12,
            l2_bytes_per_clk_per_sm: 40.0,
            // 4000 before the 3-stage 128x320 tile, which it called latency-bound: 3000 fits
            // the measured picks better in three tuning runs over shapes/models.txt (model
            // geomean 1.047 -> 1.054, 1.050 -> 1.055, 1.055 -> 1.059; both halves of each
            // two-fold split too), results/wide-tiles-2026-11-26/.
            memory_latency_clk: 3000.0,
            // Fitted to the sm90 set over shapes/models.txt, H100, 2026-11-24
            // (results/picking-2026-11-24/).
            calibration: Calibration {
                wgmma_128_rows_per_consumer: 0.76,
                wgmma_two_consumers_256_wide: 0.75,
                wgmma_two_consumers: 0.68,
                wgmma_one_consumer: 0.62,
                // Ping-pong 128x128 at 4096^3 runs at 0.98-0.99 of the 128x256 two-consumer
                // kernel (results/pingpong-2026-11-25/).
                wgmma_pingpong: 0.74,
                // On Hopper, mma.sync runs on the tensor cores at about half of wgmma's rate.
                mma_sync: 0.5,
                // The 64x64 (6 blocks an SM), 64x128 (3) and 128x128 (1) SIMT tiles at 2048³,
                // 4096³ and 8192³ after the snake-order loop: 0.77-0.79 of peak with 3-6
                // blocks, 0.68 with one (results/simt-stores-2026-11-26/).
                fma: 0.82,
                fma_barrier_blocks: 0.2,
                fixup_bytes_per_clk: 16.0,
                stream_k_split_clk: 25000.0,
                // The stream-K twins of 128x256 tiles ran at 0.985-0.990 of the data-parallel
                // one where they split no tile (five models.txt shapes at 4096 rows, H100,
                // codegen/tests/data/sm90-h100-2026-11-26.txt) and 0.974-0.985 at 2048 rows on
                // the H200 (results/prefill-picks-2026-11-29/); at 1.0 the model sent every
                // evenly waved large problem to 256x128 stream-K, 2 % slower.
                stream_k_loop_share: 0.985,
                overlap_slack: 0.25,
                half_bandwidth_sms: 8.0,
                dram_efficiency: 0.85,
                // A 16-row mma.sync tile at M <= 16 streams B at 2.5 TB/s from 64 SMs with
                // 7 stages in flight: half the TMA ring's latency (results/decode-rows-2026-11-25/).
                mma_sync_latency_share: 0.5,
                // Replayed over the H200's decode runs and grouped run and the H100's picks
                // over models.txt (results/decode-routes-2026-11-29/): every value from 1800 to
                // 2100 routes each as well as 3000 whole clocks a stage did or better (the
                // swapped 64x16 tile at one row: 0.876 -> 0.985 of the fastest member).
                stage_latency_clk: 2000.0,
            },
        }
    }

    /// H200 SXM: the H100's SMs and calibration with HBM3e at 4.8 TB/s. One SM pulls at most
    /// its ring's bytes in flight per memory latency, the same on both boards, so a grid takes
    /// 4.8 / 3.35 times as many SMs to reach the same share of the faster memory: the DRAM curve
    /// reaches half its bandwidth at 12 SMs instead of 8. On the H200's decode sweep
    /// (`results/model-h200-2026-11-29/`: `sm90`, bf16, M = 1 to 128, layout rc) the routes
    /// reach 0.971 of the fastest member's speed instead of 0.950 (`gemm-bench --replay`):
    /// N = 10240 at M <= 16, whose 64x128 tiles keep 80 SMs busy, runs the swapped 64x16 tile on
    /// all 132. Over `models.txt`, 10 of 1560 routes in the Hopper sets move: those (bf16, f16,
    /// fp8) and `sm90_fp8_block` at 128x4096x14336 (to 64x128 stream-K, unmeasured); the
    /// grouped picks over `shapes/moe.txt` stay.
    pub fn h200_sxm() -> DeviceModel {
        DeviceModel {
            name: "H200 SXM (model)".to_string(),
            memory_bytes_per_s: 4.8e12,
            calibration: Calibration {
                half_bandwidth_sms: 12.0,
                ..DeviceModel::h100_sxm().calibration
            },
            ..DeviceModel::h100_sxm()
        }
    }

    /// A100 SXM4: 108 SMs, HBM2e at 2.04 TB/s.
    pub fn a100_sxm() -> DeviceModel {
        DeviceModel {
            name: "A100 SXM (model)".to_string(),
            compute_capability: 80,
            sms: 108,
            sm_clock_mhz: 1410,
            memory_bytes_per_s: 2.04e12,
            l2_bytes_per_clk_per_sm: 32.0,
            memory_latency_clk: 3000.0,
            // Not fitted on an A100 yet: Hopper's numbers, with mma.sync at its Ampere rate.
            calibration: Calibration {
                mma_sync: 0.75,
                mma_sync_latency_share: 1.0,
                ..DeviceModel::h100_sxm().calibration
            },
        }
    }

    /// The model of the board a spec's target names: Hopper for `sm_90`/`sm_90a`, else A100.
    pub fn for_arch(arch: Arch) -> DeviceModel {
        if arch.compute_capability() >= 90 {
            DeviceModel::h100_sxm()
        } else {
            DeviceModel::a100_sxm()
        }
    }

    pub fn with_sms(self, sms: u32) -> DeviceModel {
        DeviceModel {
            sms: sms.max(1),
            ..self
        }
    }

    /// Peak flops per clock of one SM for math on `unit` on this device.
    fn flops_per_clk(&self, unit: MathUnit, dtype: DType) -> f64 {
        let hopper = self.compute_capability >= 90;
        let tensor_16bit = if hopper { 4096.0 } else { 2048.0 };
        match (unit, dtype) {
            (MathUnit::Fma, _) => {
                if self.compute_capability == 80 {
                    128.0
                } else {
                    256.0
                }
            }
            (_, DType::Tf32 | DType::F32) => tensor_16bit / 2.0,
            (_, DType::Bf16 | DType::F16) => tensor_16bit,
            (_, DType::E4m3 | DType::E5m2) => 2.0 * tensor_16bit,
        }
    }

    fn seconds(&self, clocks: f64) -> f64 {
        clocks / (f64::from(self.sm_clock_mhz) * 1e6)
    }
}

/// Bytes per clock one SM stores C at.
const EPILOGUE_BYTES_PER_CLK: f64 = 64.0;
/// Seconds every launch costs however small its grid.
const LAUNCH_SECONDS: f64 = 2e-6;

impl Candidate {
    /// The model's view of `valid`, whose kernel launches as `launch` (the emitted kernel's
    /// [`KernelInfo::launch`](crate::abi::KernelInfo::launch); `gemm_codegen::pick::candidate`
    /// plans it from the spec).
    pub fn of(valid: &ValidSpec, launch: LaunchShape) -> Candidate {
        let spec = &valid.spec;
        Candidate {
            name: spec.name.clone(),
            launch,
            mma: spec.mma,
            dtype: spec.dtype,
            out: spec.out,
            layout: spec.layout,
            consumers: if crate::family::rules(spec.mma).threads_key() == crate::Key::Consumers {
                spec.consumers
            } else {
                1
            },
            pingpong: spec.pingpong,
            stages: spec.stages,
            blocks_per_sm: valid.occupancy.blocks_per_sm.max(1),
            stream_k: matches!(
                spec.schedule,
                Schedule::Persistent {
                    tail: Tail::StreamK,
                    ..
                }
            ),
        }
    }
}

/// What bounds a prediction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bound {
    /// The busiest SM's math.
    Math,
    /// The busiest SM's loads from L2.
    Feed,
    /// Memory latency the ring's stages do not cover.
    Latency,
    /// DRAM bandwidth.
    Dram,
}

impl Bound {
    pub fn name(self) -> &'static str {
        match self {
            Bound::Math => "math",
            Bound::Feed => "L2 feed",
            Bound::Latency => "memory latency",
            Bound::Dram => "DRAM bandwidth",
        }
    }
}

/// One candidate's predicted time on one problem, and the numbers it came from.
#[derive(Clone, Debug, PartialEq)]
pub struct Estimate {
    pub seconds: f64,
    /// The output tiles the blocks work on: a clustered kernel's rounded up to whole
    /// clusters (a block past the matrix's edge works too).
    pub tiles: u64,
    pub k_tiles_per_tile: u32,
    pub grid_blocks: u32,
    /// Tiles over the blocks the device holds at once.
    pub waves: f64,
    /// The fraction of the computed products outside the problem (padded edge tiles, and a
    /// cluster's tiles past the edge).
    pub padded_waste: f64,
    /// The leftover tiles are split along K (stream-K).
    pub split_tail: bool,
    /// k tiles the busiest SM runs, and the clocks one costs there.
    pub busiest_sm_k_tiles: f64,
    pub k_tile_clk: f64,
    /// A or B rows that start inside 128-byte lines.
    pub split_lines: bool,
    /// The busiest SM's main loop, epilogues and ring fills.
    pub sm_seconds: f64,
    /// A split tail's fixup after the main loop (0 for none).
    pub fixup_seconds: f64,
    pub dram_seconds: f64,
    pub bound: Bound,
}

impl Estimate {
    pub fn tflops(&self, problem: &Problem) -> f64 {
        problem.flops() / self.seconds / 1e12
    }
}

/// Predicts how long `candidate` takes on `problem` (which it must admit).
pub fn estimate(candidate: &Candidate, problem: &Problem, device: &DeviceModel) -> Estimate {
    let shape = &candidate.launch;
    let (bm, bn, bk) = (
        f64::from(shape.tile_m),
        f64::from(shape.tile_n),
        f64::from(shape.tile_k),
    );
    let (tiles_m, tiles_n) = shape.tiles(problem.m, problem.n);
    // A cluster's blocks walk its tiles together: a block past the matrix's edge still loads
    // its share of the multicast operand and multiplies (a decode problem's one row of tiles
    // keeps half of a 2x1 cluster's blocks at work on nothing, measured twice as slow as one
    // tile a block predicts, results/fp8-block-2026-11-29/).
    let (cluster_rows, cluster_cols) = shape.cluster;
    let tiles = u64::from(tiles_m.next_multiple_of(cluster_rows.max(1)))
        * u64::from(tiles_n.next_multiple_of(cluster_cols.max(1)))
        * u64::from(problem.batch);
    let k_tiles = problem.k.div_ceil(shape.tile_k);
    let resident = device.sms * candidate.blocks_per_sm;
    let grid = shape.grid_batched(problem.m, problem.n, problem.k, problem.batch, resident);
    let grid_blocks = grid.0.saturating_mul(grid.1).saturating_mul(grid.2);
    let computed = tiles as f64 * bm * bn * f64::from(k_tiles) * bk;
    let useful = problem.flops() / 2.0;
    let padded_waste = 1.0 - useful / computed;

    // One k tile on one SM.
    let in_bytes = f64::from(shape.input_element_bytes);
    let split_a = splits_lines(problem, Operand::A, shape.input_element_bytes);
    let split_b = splits_lines(problem, Operand::B, shape.input_element_bytes);
    let line_factor = |split: bool| if split { 2.0 } else { 1.0 };
    // A cluster's blocks share one operand's tiles, each loading its slice (multicast):
    // two tiles down M share B's, two along N share A's.
    let feed_bytes = (bm * line_factor(split_a) / f64::from(cluster_cols.max(1))
        + bn * line_factor(split_b) / f64::from(cluster_rows.max(1)))
        * bk
        * in_bytes;
    let blocks_on_sm =
        f64::from(grid_blocks.div_ceil(device.sms).max(1)).min(f64::from(candidate.blocks_per_sm));
    let family = crate::family::rules(candidate.mma);
    let stream_k_share = if candidate.stream_k {
        device.calibration.stream_k_loop_share
    } else {
        1.0
    };
    let math_clk = 2.0 * bm * bn * bk
        / (device.flops_per_clk(family.math_unit(), candidate.dtype)
            * family.main_loop_efficiency(&device.calibration, candidate, blocks_on_sm)
            * stream_k_share);
    let feed_clk = feed_bytes / device.l2_bytes_per_clk_per_sm;
    // A stage in flight waits for its first bytes, then for the rest to arrive at the SM's
    // feed rate: a deep ring of small stages covers its latency better than one of few large
    // stages with the same bytes in flight.
    let ring_latency_clk = device.calibration.stage_latency_clk
        * family.ring_latency_share(&device.calibration)
        + feed_clk;
    // Loads through registers (`copy: sync`) fetch one k tile ahead whatever the stages:
    // 128x128x32 tiles with 2-byte copies ran alike with 2, 3 and 4 stages (H200,
    // results/any-alignment-2026-11-28/).
    let tiles_in_flight = match shape.copy_path {
        crate::abi::CopyPath::Sync => 1,
        _ => candidate.stages.saturating_sub(1).max(1),
    };
    let latency_clk = ring_latency_clk / f64::from(tiles_in_flight) / blocks_on_sm;
    let (step_clk, step_bound) = [
        (math_clk, Bound::Math),
        (feed_clk, Bound::Feed),
        (latency_clk, Bound::Latency),
    ]
    .into_iter()
    .fold((0.0, Bound::Math), |best, next| {
        if next.0 > best.0 {
            next
        } else {
            best
        }
    });
    let k_tile_clk = step_clk + family.k_tile_overhead_clk(blocks_on_sm) + narrow_copy_clk(shape);

    // The busiest SM's share of the walk.
    let grid_f = f64::from(grid_blocks.max(1));
    let blocks_per_busiest_sm = f64::from(grid_blocks.div_ceil(device.sms).max(1));
    let epilogue_clk = bm * bn * f64::from(shape.output_element_bytes) / EPILOGUE_BYTES_PER_CLK;
    let record_clk = bm * bn * 4.0 / device.calibration.fixup_bytes_per_clk;
    let tiles_f = tiles as f64;
    let split = candidate
        .stream_k
        .then(|| StreamKSplit::of(tiles, u64::from(grid_blocks.max(1))))
        .filter(|split| split.split_tiles > 0);
    let split_tail = split.is_some();
    let (block_k_tiles, block_tiles, block_extra_clk) = match split {
        Some(split) => {
            let whole_rounds = (split.whole_tiles / u64::from(grid_blocks.max(1))) as f64;
            let split_tiles = split.split_tiles as f64;
            let tail_walkers = split.tail_walkers as f64;
            let tail_k_tiles = (split_tiles * f64::from(k_tiles) / tail_walkers).ceil();
            // A finisher adds the sums of the walkers after it on its tile; a walker that
            // starts inside a tile writes its own.
            let walkers_per_tile = (tail_walkers / split_tiles).ceil();
            let fixup_clk = (walkers_per_tile - 1.0).max(0.0) * record_clk
                + record_clk
                + device.calibration.stream_k_split_clk;
            (
                whole_rounds * f64::from(k_tiles) + tail_k_tiles,
                whole_rounds + (split_tiles / grid_f).ceil(),
                fixup_clk,
            )
        }
        None => {
            let rounds = (tiles_f / grid_f).ceil();
            (rounds * f64::from(k_tiles), rounds, 0.0)
        }
    };
    // The ring fills once per block of a persistent walk; a tile per block refills it for
    // every tile, which a second resident block hides.
    let fills = match candidate.launch.schedule {
        crate::abi::GridSchedule::Persistent { .. } => 1.0,
        crate::abi::GridSchedule::Tiles => {
            (tiles_f / f64::from(device.sms) / f64::from(candidate.blocks_per_sm)).ceil()
        }
    };
    let busiest_sm_k_tiles = block_k_tiles * blocks_per_busiest_sm;
    // Ping-pong consumers store a tile while the other multiplies: only the last shows.
    let exposed_epilogues = if candidate.pingpong {
        blocks_per_busiest_sm
    } else {
        block_tiles * blocks_per_busiest_sm
    };
    let sm_clk = busiest_sm_k_tiles * k_tile_clk
        + exposed_epilogues * epilogue_clk
        + fills * device.memory_latency_clk;
    let sm_seconds = device.seconds(sm_clk);
    // A split tile's fixup comes after its walkers' k tiles, on the critical path: it overlaps
    // neither the main loop nor the DRAM traffic.
    let fixup_seconds = device.seconds(block_extra_clk);

    let out_bytes = f64::from(shape.output_element_bytes);
    let batch = f64::from(problem.batch);
    let (m, n, k) = (
        f64::from(problem.m),
        f64::from(problem.n),
        f64::from(problem.k),
    );
    let dram_bytes = batch * ((m * k + k * n) * in_bytes + m * n * out_bytes);
    // The SMs that pull on DRAM: those with work (walkers past the last whole tile and past
    // the tail's walkers idle).
    let working_blocks = match split {
        Some(split) => split
            .whole_tiles
            .min(u64::from(grid_blocks))
            .max(split.tail_walkers),
        None => tiles.min(u64::from(grid_blocks)),
    };
    let active_sms = working_blocks.min(u64::from(device.sms)).max(1) as f64;
    let bandwidth = device.memory_bytes_per_s * device.calibration.dram_efficiency * active_sms
        / (active_sms + device.calibration.half_bandwidth_sms);
    let dram_seconds = dram_bytes / bandwidth;

    let bound = if dram_seconds > sm_seconds + fixup_seconds {
        Bound::Dram
    } else {
        step_bound
    };
    Estimate {
        // The SMs' work and the DRAM traffic overlap, not perfectly.
        seconds: sm_seconds.max(dram_seconds)
            + device.calibration.overlap_slack * sm_seconds.min(dram_seconds)
            + fixup_seconds
            + LAUNCH_SECONDS,
        tiles,
        k_tiles_per_tile: k_tiles,
        grid_blocks,
        waves: tiles_f / f64::from(resident.max(1)),
        padded_waste,
        split_tail,
        busiest_sm_k_tiles,
        k_tile_clk,
        split_lines: split_a || split_b,
        sm_seconds,
        fixup_seconds,
        dram_seconds,
        bound,
    }
}

/// Clocks a k tile's copies of A and B cost a block beyond 16-byte copies, per warp-wide
/// vector: fitted on `results/narrow-2026-11-23/` (H100, 4096^3), where a 64x64x32 mma.sync
/// tile with 2-byte `ld.global` + `st.shared` copies lost 261 clk a k tile to 112 more warp
/// vectors, and a 128x128x32 one with 4-byte `cp.async` 242 clk to 96 more.
const NARROW_COPY_CLK_PER_WARP_VECTOR: f64 = 2.4;

/// What a kernel's narrow copies add to each k tile: nothing for 16-byte ones.
fn narrow_copy_clk(shape: &LaunchShape) -> f64 {
    let vector = shape.operand_align_bytes.clamp(1, 16);
    if vector >= 16 {
        return 0.0;
    }
    let tile_bytes = f64::from(shape.tile_m + shape.tile_n)
        * f64::from(shape.tile_k)
        * f64::from(shape.input_element_bytes);
    let warp_vectors = |bytes: u32| tile_bytes / f64::from(bytes) / 32.0;
    (warp_vectors(vector) - warp_vectors(16)) * NARROW_COPY_CLK_PER_WARP_VECTOR
}

/// An operand's lines start inside 128-byte cache lines (a leading dimension that is not a
/// multiple of 128 bytes), so each line's load touches one line more.
fn splits_lines(problem: &Problem, operand: Operand, element_bytes: u32) -> bool {
    !(u64::from(problem.ld(operand)) * u64::from(element_bytes)).is_multiple_of(128)
}

/// Every candidate's verdict on one problem: an estimate, or why it cannot run it.
#[derive(Clone, Debug)]
pub struct Ranking {
    pub problem: Problem,
    /// Candidates that admit the problem, fastest first: (index into the candidates, estimate).
    pub ranked: Vec<(usize, Estimate)>,
    /// Candidates that cannot run it: (index, reason).
    pub refused: Vec<(usize, Refusal)>,
}

impl Ranking {
    /// The predicted fastest candidate, if any admits the problem.
    pub fn best(&self) -> Option<&(usize, Estimate)> {
        self.ranked.first()
    }
}

/// Ranks `candidates` on `problem` by predicted time (ties keep the candidates' order), those
/// with narrow copies or stores after the rest.
pub fn rank(candidates: &[Candidate], problem: &Problem, device: &DeviceModel) -> Ranking {
    let mut ranked = Vec::new();
    let mut refused = Vec::new();
    for (index, candidate) in candidates.iter().enumerate() {
        match candidate.refusal(problem) {
            Some(reason) => refused.push((index, reason)),
            None => ranked.push((index, estimate(candidate, problem, device))),
        }
    }
    // Narrow copies and stores rank after every other kernel, as `pick` takes them.
    ranked.sort_by(|a, b| {
        let narrow = |index: usize| candidates[index].narrow_access();
        narrow(a.0)
            .cmp(&narrow(b.0))
            .then(a.1.seconds.total_cmp(&b.1.seconds))
    });
    Ranking {
        problem: *problem,
        ranked,
        refused,
    }
}

/// The index of the predicted fastest candidate that admits `problem`.
///
/// Kernels with narrow copies or stores ([`Candidate::narrow_access`]) are a second tier:
/// picked only where no other kernel computes the problem, so that their prices (fitted on
/// fewer runs) never take an aligned problem from a kernel that reads it at full width.
pub fn pick(candidates: &[Candidate], problem: &Problem, device: &DeviceModel) -> Option<usize> {
    let mut best: Option<(usize, (bool, f64))> = None;
    for (index, candidate) in candidates.iter().enumerate() {
        if candidate.refusal(problem).is_some() {
            continue;
        }
        let key = (
            candidate.narrow_access(),
            estimate(candidate, problem, device).seconds,
        );
        if best.is_none_or(|(_, fastest)| key < fastest) {
            best = Some((index, key));
        }
    }
    best.map(|(index, _)| index)
}

/// Whether a problem runs as its swapped product ([`Problem::swapped`]): `swapped` is that
/// product's pick, `direct` the problem's own, each a (candidate index, predicted seconds).
/// The swapped one wins where the problem has no pick or a slower one (a narrow-access pick
/// too: the swapped product is no second tier, but its speed must show); a narrow-access
/// swapped pick never does.
pub fn swapped_wins(
    candidates: &[Candidate],
    direct: Option<(usize, f64)>,
    swapped: Option<(usize, f64)>,
) -> bool {
    let Some((swapped_index, swapped_seconds)) = swapped else {
        return false;
    };
    !candidates[swapped_index].narrow_access()
        && direct.is_none_or(|(_, seconds)| swapped_seconds < seconds)
}

/// Where the model alone sends `problem` among `candidates`, as `Matmul` routes it without a
/// tuning cache: its own pick, or the pick for its swapped product where [`swapped_wins`];
/// the candidate's index and the problem that candidate runs.
pub fn model_route(
    candidates: &[Candidate],
    problem: &Problem,
    device: &DeviceModel,
) -> Option<(usize, Problem)> {
    let priced = |problem: &Problem| {
        pick(candidates, problem, device)
            .map(|index| (index, estimate(&candidates[index], problem, device).seconds))
    };
    let direct = priced(problem);
    let swapped = problem.swapped();
    let flipped = candidates
        .iter()
        .any(|candidate| candidate.launch.c_order == crate::abi::StorageOrder::ColMajor)
        .then(|| priced(&swapped))
        .flatten();
    if swapped_wins(candidates, direct, flipped) {
        flipped.map(|(index, _)| (index, swapped))
    } else {
        direct.map(|(index, _)| (index, *problem))
    }
}

/// One line of reasons for an estimate: tiles, waves, waste, the split, the bound, the time.
pub fn reasons(estimate: &Estimate, problem: &Problem) -> String {
    let mut line = format!(
        "{} tiles x {} k tiles, grid {} ({:.2} waves), {:.1}% padded",
        estimate.tiles,
        estimate.k_tiles_per_tile,
        estimate.grid_blocks,
        estimate.waves,
        estimate.padded_waste * 100.0
    );
    if estimate.split_tail {
        line.push_str(&format!(
            ", stream-K tail split (fixup {:.1} us)",
            estimate.fixup_seconds * 1e6
        ));
    }
    if estimate.split_lines {
        line.push_str(", rows split 128-byte lines");
    }
    line.push_str(&format!(
        "; busiest SM {:.0} k tiles x {:.0} clk; bound by {}; predicted {:.1} us ({:.0} TFLOP/s)",
        estimate.busiest_sm_k_tiles,
        estimate.k_tile_clk,
        estimate.bound.name(),
        estimate.seconds * 1e6,
        estimate.tflops(problem)
    ));
    line
}
