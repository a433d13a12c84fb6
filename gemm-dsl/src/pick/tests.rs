//! The cost model on its own: the problem's arithmetic, the device's SM count, `pick` against
//! `rank`, and each estimate's numbers in every regime the model tells apart (math, L2 feed,
//! ring latency, DRAM; stream-K tails, clusters, one tile per block, split lines). The
//! candidates carry the launch shapes codegen plans for their specs, written out here, so
//! the model is tested without the planner.

use super::*;
use crate::abi::{CopyPath, GridSchedule, LaunchShape, StorageOrder};

/// The launch of a bf16 Hopper kernel of `tile` (`workspace`: a stream-K walk's bytes per
/// block), as codegen plans it.
fn hopper_launch(
    tile: (u32, u32, u32),
    threads: u32,
    schedule: GridSchedule,
    cluster: (u32, u32),
    workspace: u32,
) -> LaunchShape {
    LaunchShape {
        threads_per_block: threads,
        tile_m: tile.0,
        tile_n: tile.1,
        tile_k: tile.2,
        dynamic_smem_bytes: 230464,
        operand_align_bytes: 16,
        output_align_bytes: 16,
        copy_path: CopyPath::Tma,
        input_element_bytes: 2,
        output_element_bytes: 2,
        compute_capability: 90,
        arch_specific: true,
        schedule,
        cluster,
        partial_tiles: true,
        a_order: StorageOrder::RowMajor,
        b_order: StorageOrder::RowMajor,
        c_order: StorageOrder::RowMajor,
        workspace_bytes_per_block: workspace,
    }
}

const PERSISTENT: GridSchedule = GridSchedule::Persistent { group: 8 };

fn candidate(spec: &str, launch: LaunchShape) -> Candidate {
    let valid = crate::check_str(spec).unwrap_or_else(|e| panic!("{spec}: {e:?}"));
    Candidate::of(&valid, launch)
}

/// The sm90 set's large tile: 128x256, two consumers, persistent.
fn w128x256() -> Candidate {
    candidate(
        "name: w128x256, arch: sm_90a, mma: wgmma, tile: 128x256x64, consumers: 2, stages: 4, schedule: persistent(raster = m, group = 8)",
        hopper_launch((128, 256, 64), 384, PERSISTENT, (1, 1), 0),
    )
}

/// Its stream-K twin at 64x128 with one consumer (split-K for small M).
fn w64x128_sk() -> Candidate {
    candidate(
        "name: w64x128_sk, arch: sm_90a, mma: wgmma, tile: 64x128x64, consumers: 1, stages: 6, schedule: persistent(raster = m, group = 8, tail = stream_k)",
        hopper_launch((64, 128, 64), 256, PERSISTENT, (1, 1), 32784),
    )
}

/// 128x256 in two-block clusters down M, B multicast.
fn w128x256_c2x1() -> Candidate {
    candidate(
        "name: w128x256_c2x1, arch: sm_90a, mma: wgmma, tile: 128x256x64, consumers: 2, stages: 4, copy: tma(multicast = 2), schedule: persistent(raster = m, group = 8), cluster: 2x1",
        hopper_launch((128, 256, 64), 384, PERSISTENT, (2, 1), 0),
    )
}

/// 128x256 in two-block clusters along N, A multicast.
fn w128x256_c1x2() -> Candidate {
    candidate(
        "name: w128x256_c1x2, arch: sm_90a, mma: wgmma, tile: 128x256x64, consumers: 2, stages: 4, copy: tma(multicast = 2), schedule: persistent(raster = m, group = 8), cluster: 1x2",
        hopper_launch((128, 256, 64), 384, PERSISTENT, (1, 2), 0),
    )
}

/// 64x256, one tile per block.
fn w64x256() -> Candidate {
    candidate(
        "name: w64x256, arch: sm_90a, mma: wgmma, tile: 64x256x64, consumers: 1, stages: 4",
        hopper_launch((64, 256, 64), 256, GridSchedule::Tiles, (1, 1), 0),
    )
}

/// 128x128 ping-pong, persistent.
fn w128x128_pp() -> Candidate {
    candidate(
        "name: w128x128_pp, arch: sm_90a, mma: wgmma, tile: 128x128x64, consumers: pingpong, stages: 6, schedule: persistent(raster = m, group = 8)",
        hopper_launch((128, 128, 64), 384, PERSISTENT, (1, 1), 0),
    )
}

/// Ampere's 128x128 mma.sync tile (two blocks an SM).
fn m128x128() -> Candidate {
    candidate(
        "name: m128x128, arch: sm_80, tile: 128x128x32, warps: 2x2, stages: 3, swizzle: 128B, copy: cp_async, mma: mma_sync",
        LaunchShape {
            threads_per_block: 128,
            dynamic_smem_bytes: 49152,
            copy_path: CopyPath::CpAsync,
            compute_capability: 80,
            arch_specific: false,
            ..hopper_launch((128, 128, 32), 128, GridSchedule::Tiles, (1, 1), 0)
        },
    )
}

/// `candidate` under another name: as fast as it on every problem.
fn renamed(candidate: &Candidate, name: &str) -> Candidate {
    Candidate {
        name: name.to_string(),
        ..candidate.clone()
    }
}

fn square(size: u32) -> Problem {
    Problem::new(size, size, size, Layout::RowRow)
}

/// A cluster's blocks walk its tiles together, so one past the matrix's edge works as much as
/// one inside: a decode problem's one row of 128-row tiles costs a 2x1 cluster what two rows
/// do, and a 1x2 cluster pays for a second column of tiles the same way.
#[test]
fn a_clusters_tiles_past_the_edge_count_whole() {
    let device = DeviceModel::h100_sxm();
    let down_m = w128x256_c2x1();
    let decode = estimate(
        &down_m,
        &Problem::new(1, 8192, 4096, Layout::RowRow),
        &device,
    );
    let two_rows = estimate(
        &down_m,
        &Problem::new(256, 8192, 4096, Layout::RowRow),
        &device,
    );
    assert_eq!(decode.tiles, 2 * 32);
    assert_eq!(decode.tiles, two_rows.tiles);
    assert_eq!(decode.busiest_sm_k_tiles, two_rows.busiest_sm_k_tiles);
    assert!(decode.padded_waste > 0.99, "{}", decode.padded_waste);
    // Unclustered, the same tile spends one row of tiles on the decode problem.
    let alone = estimate(
        &w128x256(),
        &Problem::new(1, 8192, 4096, Layout::RowRow),
        &device,
    );
    assert_eq!(alone.tiles, 32);
    let along_n = w128x256_c1x2();
    let one_column = estimate(
        &along_n,
        &Problem::new(4096, 256, 4096, Layout::RowRow),
        &device,
    );
    assert_eq!(one_column.tiles, 32 * 2);
}

/// `C = A·B` as `Cᵀ = Bᵀ·Aᵀ`: M and N exchanged, A' = B and B' = A each read in the other
/// order (so `rc` stays `rc`, `rr` becomes `cc`), every leading dimension kept, C's order
/// flipped; twice is the problem itself. A kernel refuses the other order of C.
#[test]
fn the_swapped_product_reads_the_same_memory() {
    let rc = Problem::new(16, 4096, 2048, Layout::RowCol)
        .with_leading_dims(2064, 2080, 4104)
        .with_batch(2)
        .with_address_align(16);
    let swapped = rc.swapped();
    assert_eq!(
        (swapped.m, swapped.n, swapped.k, swapped.batch),
        (4096, 16, 2048, 2)
    );
    assert_eq!(swapped.layout, Layout::RowCol);
    assert_eq!((swapped.lda, swapped.ldb, swapped.ldc), (2080, 2064, 4104));
    assert_eq!(swapped.c_layout, CLayout::Col);
    assert_eq!(swapped.address_align, 16);
    assert_eq!(swapped.flops(), rc.flops());
    assert_eq!(swapped.swapped(), rc);
    assert_eq!(
        swapped.to_string(),
        "2x4096x16x2048 rc C column-major at 16-byte aligned addresses"
    );
    for (layout, swapped_layout) in [
        (Layout::RowRow, Layout::ColCol),
        (Layout::ColCol, Layout::RowRow),
        (Layout::ColRow, Layout::ColRow),
    ] {
        assert_eq!(
            Problem::new(8, 8, 8, layout).swapped().layout,
            swapped_layout
        );
    }
    let row_major_c = candidate(
        "name: k, arch: sm_90a, mma: wgmma, dtype: e4m3, layout: rc",
        hopper_launch((128, 256, 128), 384, PERSISTENT, (1, 1), 0),
    );
    assert_eq!(
        row_major_c.refusal(&swapped),
        Some(Refusal::COrder(StorageOrder::RowMajor))
    );
}

#[test]
fn a_column_of_c_runs_as_one_row_over_the_same_memory() {
    // rr: B is K elements one apart (ldb 1), A row-major is B' column-major.
    let rr = Problem::new(4096, 1, 2048, Layout::RowRow).with_batch(3);
    let row = rr.as_one_row().unwrap();
    assert_eq!((row.m, row.n, row.k, row.batch), (1, 4096, 2048, 3));
    assert_eq!(row.layout, Layout::RowCol);
    assert_eq!((row.lda, row.ldb, row.ldc), (2048, 2048, 4096));
    // cc: B's one column (ld 2056) is A', column-major A (ld 4100) is B' row-major.
    let cc = Problem::new(4096, 1, 2048, Layout::ColCol)
        .with_leading_dims(4100, 2056, 1)
        .with_address_align(4);
    let row = cc.as_one_row().unwrap();
    assert_eq!(row.layout, Layout::RowRow);
    assert_eq!((row.lda, row.ldb, row.ldc), (2056, 4100, 4096));
    assert_eq!(row.address_align, 4);
    // The same flops, and a batch's matrices as far apart as before: B's K, A's M x lda.
    assert_eq!(row.flops(), cc.flops());
    // Not a packed column of C, or B's elements not one apart: no such form.
    assert_eq!(
        Problem::new(4096, 2, 2048, Layout::RowRow).as_one_row(),
        None
    );
    assert_eq!(rr.with_leading_dims(2048, 1, 8).as_one_row(), None);
    assert_eq!(rr.with_leading_dims(2048, 8, 1).as_one_row(), None);
}

#[test]
fn a_problem_parses_pads_and_counts_its_flops() {
    let problem = Problem::new(777, 4099, 2048, Layout::RowRow);
    assert_eq!((problem.lda, problem.ldb, problem.ldc), (2048, 4099, 4099));
    assert_eq!(problem.batch, 1);
    // Column-major operands: A's lines are columns of M, B's columns of K.
    let cc = Problem::new(777, 4099, 2048, Layout::ColCol);
    assert_eq!((cc.lda, cc.ldb, cc.ldc), (777, 2048, 4099));
    // 16-byte lines of 2-byte elements: multiples of 8; of 4-byte outputs, of 4.
    let padded = cc.with_lines_padded(16, 2, 4);
    assert_eq!((padded.lda, padded.ldb, padded.ldc), (784, 2048, 4100));
    assert_eq!(
        padded.with_leading_dims(800, 2056, 4104),
        Problem {
            lda: 800,
            ldb: 2056,
            ldc: 4104,
            ..cc
        }
    );
    assert_eq!(
        [Operand::A, Operand::B, Operand::C].map(|operand| padded.ld(operand)),
        [784, 2048, 4100]
    );
    // Row-major operands: lines along K (A), N (B and C), each padded on its own.
    let rr = Problem::new(777, 4099, 2046, Layout::RowRow).with_lines_padded(16, 2, 4);
    assert_eq!((rr.lda, rr.ldb, rr.ldc), (2048, 4104, 4100));
    assert_eq!(
        Problem::parse("1024x1000x512", Layout::ColRow).unwrap(),
        Problem::new(1024, 1000, 512, Layout::ColRow)
    );
    let batched = Problem::parse("16X1024x1000x512", Layout::RowCol).unwrap();
    assert_eq!(
        batched,
        Problem::new(1024, 1000, 512, Layout::RowCol).with_batch(16)
    );
    assert_eq!(batched.to_string(), "16x1024x1000x512 rc");
    assert_eq!(square(8).to_string(), "8x8x8 rr");
    assert_eq!(batched.flops(), 2.0 * 16.0 * 1024.0 * 1000.0 * 512.0);
    assert_eq!(
        Problem::parse("4x0x4", Layout::RowRow).unwrap_err(),
        "`4x0x4`: `0` is not a size from 1 to 4294967295"
    );
    assert_eq!(
        Problem::parse("4x4", Layout::RowRow).unwrap_err(),
        "`4x4` is not MxNxK or BxMxNxK"
    );
}

#[test]
fn math_rates_follow_the_unit_the_type_and_the_architecture() {
    let (hopper, ampere) = (DeviceModel::h100_sxm(), DeviceModel::a100_sxm());
    let rate = |device: &DeviceModel, unit, dtype| device.flops_per_clk(unit, dtype);
    // FP32 pipes: 128 FMA lanes (256 flops) per SM clock, half that on the A100.
    for dtype in [DType::F32, DType::Bf16] {
        assert_eq!(rate(&hopper, MathUnit::Fma, dtype), 256.0);
        assert_eq!(rate(&ampere, MathUnit::Fma, dtype), 128.0);
    }
    // Tensor cores: 16-bit inputs at the base rate, tf32 at half, fp8 at twice (Hopper's
    // base rate twice Ampere's).
    for (device, base) in [(&hopper, 4096.0), (&ampere, 2048.0)] {
        let tensor = |dtype| rate(device, MathUnit::TensorCores, dtype);
        assert_eq!(tensor(DType::Bf16), base);
        assert_eq!(tensor(DType::F16), base);
        assert_eq!(tensor(DType::Tf32), base / 2.0);
        assert_eq!(tensor(DType::F32), base / 2.0);
        assert_eq!(tensor(DType::E4m3), 2.0 * base);
        assert_eq!(tensor(DType::E5m2), 2.0 * base);
    }
}

#[test]
fn pick_takes_the_first_of_equally_fast_candidates_as_rank_does() {
    let fast = w128x256();
    let problem = square(4096);
    let device = DeviceModel::h100_sxm();
    let twins = [
        renamed(&fast, "first"),
        renamed(&fast, "second"),
        renamed(&fast, "third"),
    ];
    assert_eq!(pick(&twins, &problem, &device), Some(0));
    assert_eq!(rank(&twins, &problem, &device).best().unwrap().0, 0);
    // A slower candidate ahead of the twins does not change which twin wins.
    let with_slower = [w64x256(), renamed(&fast, "first"), renamed(&fast, "second")];
    assert_eq!(pick(&with_slower, &problem, &device), Some(1));
    let ranking = rank(&with_slower, &problem, &device);
    let order: Vec<usize> = ranking.ranked.iter().map(|(index, _)| *index).collect();
    assert_eq!(order, [1, 2, 0]);
}

#[test]
fn pick_passes_over_candidates_that_refuse_and_finds_none_where_all_do() {
    let other_layout = Candidate {
        layout: Layout::RowCol,
        ..w64x256()
    };
    let candidates = [other_layout.clone(), w64x256()];
    let device = DeviceModel::h100_sxm();
    assert_eq!(pick(&candidates, &square(1024), &device), Some(1));
    let ranking = rank(&candidates, &square(1024), &device);
    assert_eq!(ranking.refused.len(), 1);
    assert_eq!(ranking.refused[0].0, 0);
    assert_eq!(ranking.problem, square(1024));
    // B's rows 1001 elements apart: not 16-byte lines, which the TMA needs.
    let misaligned = square(1024).with_leading_dims(1024, 1001, 1024);
    assert_eq!(pick(&candidates, &misaligned, &device), None);
    assert!(rank(&candidates, &misaligned, &device).best().is_none());
    assert_eq!(pick(&[other_layout], &square(1024), &device), None);
}

#[test]
fn the_device_count_of_sms_sets_the_grid_and_the_time() {
    let h100 = DeviceModel::h100_sxm();
    assert_eq!(h100.sms, 132);
    assert_eq!(h100.clone().with_sms(66).sms, 66);
    assert_eq!(h100.clone().with_sms(0).sms, 1, "at least one SM");
    assert_eq!(
        h100.clone().with_sms(114),
        DeviceModel {
            sms: 114,
            ..h100.clone()
        }
    );
    // 512 tiles of 128x256 at 4096^3: 4 rounds on 128 of 132 SMs; 8 rounds on 64 of 66.
    let kernel = w128x256();
    let full = estimate(&kernel, &square(4096), &h100);
    let half = estimate(&kernel, &square(4096), &h100.clone().with_sms(66));
    assert_eq!(
        (full.tiles, full.grid_blocks, half.grid_blocks),
        (512, 128, 64)
    );
    assert_eq!(full.busiest_sm_k_tiles, 4.0 * 64.0);
    assert_eq!(half.busiest_sm_k_tiles, 8.0 * 64.0);
    let slowdown = half.seconds / full.seconds;
    assert!((1.9..2.0).contains(&slowdown), "{slowdown}");
    // The SM count a model names is the one `for_arch` gives a board of that target.
    assert_eq!(DeviceModel::for_arch(Arch::Sm90a), h100);
    assert_eq!(DeviceModel::for_arch(Arch::Sm86), DeviceModel::a100_sxm());
    assert_eq!(DeviceModel::a100_sxm().sms, 108);
}

#[test]
fn leading_dimensions_that_split_cache_lines_slow_the_feed() {
    let kernel = w128x256();
    let device = DeviceModel::h100_sxm();
    let packed = square(4096);
    // 4104 bf16 elements: 8208-byte rows, which start inside 128-byte lines.
    let split_a = packed.with_leading_dims(4104, 4096, 4096);
    let split_b = packed.with_leading_dims(4096, 4104, 4096);
    let split_c = packed.with_leading_dims(4096, 4096, 4104);
    let of = |problem: &Problem| estimate(&kernel, problem, &device);
    assert!(!of(&packed).split_lines);
    assert!(of(&split_a).split_lines && of(&split_b).split_lines);
    assert!(!of(&split_c).split_lines, "C is stored, not fed");
    // The feed doubles for the split operand: the 128x256 tile's A (a third of its bytes) or
    // B (two thirds), past the math rate either way.
    assert_eq!(of(&packed).bound, Bound::Math);
    assert_eq!(of(&split_a).bound, Bound::Feed);
    assert!(of(&split_b).k_tile_clk > of(&split_a).k_tile_clk);
    assert!(of(&split_a).k_tile_clk > of(&packed).k_tile_clk);
    // A leading dimension of whole lines splits nothing (64 bf16 = 128 bytes).
    assert!(!of(&packed.with_leading_dims(4160, 4160, 4160)).split_lines);
}

/// Every number of an estimate, pinned for one kernel and problem of each regime: a change of
/// the model shows here as a changed number, to be explained like a changed pick.
#[test]
fn estimates_in_every_regime_are_pinned() {
    let h100 = DeviceModel::h100_sxm();
    let cases: [(Candidate, Problem, DeviceModel, &str); 13] = [
        (
            w128x256(),
            square(4096),
            h100.clone(),
            "512 tiles x 64 k tiles, grid 128 (3.88 waves), 0.0% padded; busiest SM 256 k tiles x 1405 clk; bound by math; predicted 211.9 us (649 TFLOP/s) | sm 200.5 fixup 0.0 dram 37.6",
        ),
        (
            w128x256(),
            Problem::new(1, 4096, 4096, Layout::RowRow),
            h100.clone(),
            "16 tiles x 64 k tiles, grid 16 (0.12 waves), 99.2% padded; busiest SM 64 k tiles x 1405 clk; bound by math; predicted 57.8 us (1 TFLOP/s) | sm 51.3 fixup 0.0 dram 17.7",
        ),
        (
            w64x128_sk(),
            Problem::new(16, 4096, 4096, Layout::RowRow),
            h100.clone(),
            "32 tiles x 64 k tiles, grid 132 (0.24 waves), 75.0% padded, stream-K tail split (fixup 18.1 us); busiest SM 16 k tiles x 654 clk; bound by L2 feed; predicted 34.6 us (16 TFLOP/s) | sm 7.5 fixup 18.1 dram 12.6",
        ),
        (
            w128x256_c2x1(),
            square(4096).with_leading_dims(4096, 4104, 4096),
            h100.clone(),
            "512 tiles x 64 k tiles, grid 128 (3.88 waves), 0.0% padded, rows split 128-byte lines; busiest SM 256 k tiles x 1405 clk; bound by math; predicted 211.9 us (649 TFLOP/s) | sm 200.5 fixup 0.0 dram 37.6",
        ),
        (
            w64x128_sk(),
            Problem::new(2048, 4352, 1024, Layout::RowRow),
            h100.clone(),
            "1088 tiles x 16 k tiles, grid 132 (8.24 waves), 0.0% padded, stream-K tail split (fixup 18.1 us); busiest SM 132 k tiles x 654 clk; bound by L2 feed; predicted 73.1 us (250 TFLOP/s) | sm 50.1 fixup 18.1 dram 11.5",
        ),
        (
            w128x256_c1x2(),
            square(4096),
            h100.clone(),
            "512 tiles x 64 k tiles, grid 128 (3.88 waves), 0.0% padded; busiest SM 256 k tiles x 1405 clk; bound by math; predicted 211.9 us (649 TFLOP/s) | sm 200.5 fixup 0.0 dram 37.6",
        ),
        (
            m128x128(),
            square(2048),
            h100.clone(),
            "256 tiles x 64 k tiles, grid 256 (0.97 waves), 0.0% padded; busiest SM 128 k tiles x 592 clk; bound by math; predicted 47.9 us (358 TFLOP/s) | sm 43.6 fixup 0.0 dram 9.4",
        ),
        (
            w64x256(),
            Problem::new(16, 28672, 8192, Layout::RowRow),
            h100.clone(),
            "112 tiles x 128 k tiles, grid 112 (0.85 waves), 75.0% padded; busiest SM 128 k tiles x 1064 clk; bound by DRAM bandwidth; predicted 198.3 us (38 TFLOP/s) | sm 76.3 fixup 0.0 dram 177.2",
        ),
        (
            w64x256(),
            Problem::new(512, 4096, 4096, Layout::RowRow),
            h100.clone(),
            "128 tiles x 64 k tiles, grid 128 (0.97 waves), 0.0% padded; busiest SM 64 k tiles x 1064 clk; bound by L2 feed; predicted 45.0 us (381 TFLOP/s) | sm 39.1 fixup 0.0 dram 15.7",
        ),
        (
            w128x128_pp(),
            Problem::new(512, 4096, 4096, Layout::RowRow).with_batch(3),
            h100.clone(),
            "384 tiles x 64 k tiles, grid 128 (2.91 waves), 0.0% padded; busiest SM 192 k tiles x 859 clk; bound by L2 feed; predicted 105.8 us (487 TFLOP/s) | sm 92.1 fixup 0.0 dram 47.0",
        ),
        (
            m128x128(),
            square(4096),
            DeviceModel::a100_sxm(),
            // Latency-bound at 3000 clocks a stage (830 clk a k tile); its 16 KB stages wait
            // 2000 clocks and arrive in 512.
            "1024 tiles x 128 k tiles, grid 1024 (4.74 waves), 0.0% padded; busiest SM 1280 k tiles x 763 clk; bound by math; predicted 724.2 us (190 TFLOP/s) | sm 706.6 fixup 0.0 dram 62.4",
        ),
        (
            m128x128(),
            Problem::new(64, 4096, 4096, Layout::RowRow),
            h100.clone(),
            "32 tiles x 128 k tiles, grid 32 (0.12 waves), 50.0% padded; busiest SM 128 k tiles x 785 clk; bound by memory latency; predicted 62.6 us (34 TFLOP/s) | sm 56.8 fixup 0.0 dram 15.2",
        ),
        (
            w128x256(),
            Problem::new(777, 4099, 2048, Layout::RowRow).with_lines_padded(16, 2, 2),
            h100.with_sms(114),
            "119 tiles x 32 k tiles, grid 60 (1.04 waves), 18.3% padded, rows split 128-byte lines; busiest SM 64 k tiles x 2088 clk; bound by L2 feed; predicted 80.4 us (162 TFLOP/s) | sm 75.8 fixup 0.0 dram 10.5",
        ),
    ];
    for (kernel, problem, device, want) in cases {
        let e = estimate(&kernel, &problem, &device);
        let got = format!(
            "{} | sm {:.1} fixup {:.1} dram {:.1}",
            reasons(&e, &problem),
            e.sm_seconds * 1e6,
            e.fixup_seconds * 1e6,
            e.dram_seconds * 1e6
        );
        assert_eq!(got, want, "{} at {problem} on {}", kernel.name, device.name);
        // The parts add up as the model says: the longer of the SMs' work and the DRAM
        // traffic, the slack of the shorter, the fixup and the launch.
        let (long, short) = if e.sm_seconds > e.dram_seconds {
            (e.sm_seconds, e.dram_seconds)
        } else {
            (e.dram_seconds, e.sm_seconds)
        };
        let total =
            long + device.calibration.overlap_slack * short + e.fixup_seconds + LAUNCH_SECONDS;
        assert!((e.seconds - total).abs() < 1e-12, "{}", kernel.name);
        assert!((e.tflops(&problem) - problem.flops() / e.seconds / 1e12).abs() < 1e-9);
    }
}

#[test]
fn a_split_tail_costs_its_fixup_and_whole_rounds_do_not() {
    let device = DeviceModel::h100_sxm();
    let kernel = w64x128_sk();
    // 32 tiles of 64x128 over 132 SMs: split along K; 4224 tiles (32 whole rounds): not.
    let split = estimate(
        &kernel,
        &Problem::new(16, 4096, 4096, Layout::RowRow),
        &device,
    );
    assert!(split.split_tail && split.fixup_seconds > 0.0);
    let whole = estimate(
        &kernel,
        &Problem::new(4224, 8192, 512, Layout::RowRow),
        &device,
    );
    assert_eq!(whole.tiles, 66 * 64);
    assert!(!whole.split_tail);
    assert_eq!(whole.fixup_seconds, 0.0);
    // The same tiles without stream-K: one walker a tile, each all 64 k tiles.
    let plain = Candidate {
        stream_k: false,
        launch: LaunchShape {
            workspace_bytes_per_block: 0,
            ..kernel.launch
        },
        ..kernel.clone()
    };
    let unsplit = estimate(
        &plain,
        &Problem::new(16, 4096, 4096, Layout::RowRow),
        &device,
    );
    assert!(!unsplit.split_tail);
    assert_eq!(unsplit.grid_blocks, 32);
    assert_eq!(unsplit.busiest_sm_k_tiles, 64.0);
    assert!(split.busiest_sm_k_tiles < unsplit.busiest_sm_k_tiles);
}

#[test]
fn bounds_name_themselves() {
    let names = [Bound::Math, Bound::Feed, Bound::Latency, Bound::Dram].map(Bound::name);
    assert_eq!(
        names,
        ["math", "L2 feed", "memory latency", "DRAM bandwidth"]
    );
}
