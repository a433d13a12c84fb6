//! The Hopper plan's numbers: boxes, descriptors, the ring, clusters, the register split.

use super::descriptor::{tma_box_address, Major, SmemDescriptor};
use super::*;
use gemm_dsl::abi::TensorMapBox;

fn wgmma(text: &str) -> WgmmaPlan {
    let (valid, g) = test_spec(text);
    plan(&valid, &g)
}

/// Specs over every swizzle, every consumer count, several k tiles per swizzle span and
/// several boxes of B.
const SPECS: &[&str] = &[
    "tile: 128x256x64",
    "tile: 128x128x64, consumers: 1",
    "tile: 256x128x64, stages: 3",
    "tile: 64x256x64, consumers: 1",
    "tile: 128x128x128, stages: 3",
    "tile: 128x128x32, swizzle: 64B, stages: 6",
    "tile: 128x64x16, swizzle: 32B",
    "tile: 128x256x64, dtype: f16, out: f32",
    "tile: 192x128x64, consumers: 3, stages: 4",
];

/// fp8 specs (K-major operands only): k32 per wgmma, several swizzles and k tiles per span.
const FP8_SPECS: &[&str] = &[
    "dtype: e4m3, tile: 128x256x128",
    "dtype: e5m2, tile: 128x128x256, stages: 3",
    "dtype: e4m3, tile: 64x128x64, consumers: 1, swizzle: 64B",
    "dtype: e4m3, tile: 128x64x32, swizzle: 32B, out: f32",
    "dtype: e4m3, tile: 128x16x128",
    "dtype: e4m3, tile: 64x64x128, consumers: 1, stages: 8",
    "dtype: e4m3, tile: 128x48x128, stages: 6",
    "dtype: e5m2, tile: 64x32x256, consumers: 1, stages: 4",
];

/// Tiles over 256 columns: two wgmmas a row of 64, the second reading B from its first
/// column on (N-major B: 320 in 64-column boxes, 192 + 128; 288 in 32-column boxes, 160 + 128;
/// 384, 192 + 192; K-major B: halves, its rows in two boxes).
const WIDE_SPECS: &[&str] = &[
    "tile: 128x320x64, stages: 3",
    "tile: 64x288x64, consumers: 1, stages: 3",
    "tile: 64x384x32, consumers: 1, stages: 3",
];

/// Specs whose BN the 128-byte span does not divide (96, 160 and 208 columns): an N-major B
/// (`rr`, `cr`) takes a narrower swizzle than A; a K-major B keeps 128 bytes.
const MIXED_SWIZZLE_SPECS: &[&str] = &[
    "tile: 192x96x64, consumers: pingpong, schedule: persistent",
    "tile: 192x96x64, consumers: 3, schedule: persistent",
    "tile: 256x160x64, stages: 3",
    "tile: 128x208x64",
];

/// Where the TMA put element (`mn`, `k`) of an operand tile: in the box of its
/// contiguous coordinate, at its line and its place along the line, under the operand's
/// tensor map's swizzle.
fn written_at(
    loads: &[BoxLoad],
    tma: &TensorMapBox,
    major: Major,
    mn: u32,
    k: u32,
    element_bytes: u32,
) -> u32 {
    let (contiguous, line) = match major {
        Major::K => (k, mn),
        Major::MN => (mn, k),
    };
    let box_load = loads
        .iter()
        .find(|l| {
            l.inner_offset == contiguous / tma.inner * tma.inner
                && l.outer_offset == line / tma.outer * tma.outer
        })
        .expect("a box holds every element of the tile");
    tma_box_address(
        box_load.smem_offset,
        line % tma.outer,
        contiguous % tma.inner,
        element_bytes,
        tma.swizzle_bytes,
    )
}

/// The wgmma proof: for every consumer, k step and wgmma of a k tile, the element the
/// descriptor hands the tensor cores at each (row, k) of A and (n, k) of B is the element
/// the TMA wrote there: same operand position, same shared-memory byte. Every layout.
#[test]
fn descriptors_read_exactly_what_the_tma_wrote() {
    let every_layout = SPECS
        .iter()
        .chain(MIXED_SWIZZLE_SPECS)
        .flat_map(|spec| ["rr", "rc", "cr", "cc"].map(|layout| (spec, layout)));
    let wide = WIDE_SPECS
        .iter()
        .flat_map(|spec| ["rr", "rc", "cr", "cc"].map(|layout| (spec, layout)));
    let fp8 = FP8_SPECS.iter().map(|spec| (spec, "rc"));
    for (spec, layout) in every_layout.chain(wide).chain(fp8) {
        {
            let spec = format!("{spec}, layout: {layout}");
            let plan = wgmma(&spec);
            let (p, launch) = (&plan.main_loop, &plan.launch);
            let element = p.in_bytes;
            let k_per_wgmma = p.wgmma_k;
            let instructions = super::write::wgmma_instructions(p);
            for consumer in 0..launch.consumers {
                // Ping-pong consumers each read the whole tile; others their own rows.
                let first_row = if plan.geometry.pingpong {
                    0
                } else {
                    consumer * p.rows_per_consumer
                };
                for (step, k_step) in p.k_steps.iter().enumerate() {
                    let k0 = step as u32 * k_per_wgmma;
                    // Each accumulator of a consumer's rows is written by exactly one wgmma,
                    // at its place in the row (column c of a row at N/2 * row + c/2).
                    let mut written_by =
                        vec![0u32; (plan.geometry.m_wgmmas * p.block_n / 2) as usize];
                    for op in &k_step.mmas {
                        let a = SmemDescriptor {
                            start_bytes: consumer * p.consumer_a_bytes + op.a_offset_units * 16,
                            ..p.a_descriptor
                        };
                        for m in 0..WGMMA_M {
                            for k in 0..k_per_wgmma {
                                let row = first_row + op.row * WGMMA_M + m;
                                let written = written_at(
                                    &p.a_loads,
                                    &launch.a_box,
                                    p.a_major,
                                    row,
                                    k0 + k,
                                    element,
                                );
                                let read = a.element_address(p.a_major, m, k, element);
                                assert_eq!(read, written, "{spec}: A row {row} k {}", k0 + k);
                            }
                        }
                        let b = SmemDescriptor {
                            start_bytes: p.b_descriptor.start_bytes + op.b_offset_units * 16,
                            ..p.b_descriptor
                        };
                        for n in 0..op.n {
                            let column = op.n_start + n;
                            for k in 0..k_per_wgmma {
                                let written = written_at(
                                    &p.b_loads,
                                    &launch.b_box,
                                    p.b_major,
                                    column,
                                    k0 + k,
                                    element,
                                );
                                let read = b.element_address(p.b_major, n, k, element);
                                assert_eq!(read, written, "{spec}: B k {} column {column}", k0 + k);
                            }
                        }
                        assert_eq!(
                            instructions[op.piece].split('.').nth(4),
                            Some(format!("m64n{}k{k_per_wgmma}", op.n).as_str()),
                            "{spec}"
                        );
                        let registers: Vec<usize> =
                            op.accumulators.clone().map(|r| r as usize).collect();
                        let first = (op.row * p.block_n / 2 + op.n_start / 2) as usize;
                        assert_eq!(
                            registers,
                            (first..first + op.n as usize / 2).collect::<Vec<_>>(),
                            "{spec}"
                        );
                        for r in registers {
                            written_by[r] += 1;
                        }
                    }
                    assert!(written_by.iter().all(|&w| w == 1), "{spec}: {written_by:?}");
                }
            }
        }
    }
}

/// The boxes of a stage tile it exactly: A's cover BM x BK, B's BK x BN, each box starts
/// on its swizzle atom, and the bytes announced per stage are the boxes' bytes.
#[test]
fn boxes_tile_the_stage_and_the_announced_bytes_are_theirs() {
    for spec in SPECS.iter().chain(WIDE_SPECS).chain(FP8_SPECS) {
        let plan = wgmma(spec);
        let (p, launch) = (&plan.main_loop, &plan.launch);
        let atom = 8 * p.a_descriptor.swizzle_bytes;
        let loads: Vec<&BoxLoad> = p.a_loads.iter().chain(&p.b_loads).collect();
        let bytes: u32 = loads.iter().map(|l| l.bytes).sum();
        assert_eq!(bytes, p.ring.guard.expect_tx_bytes, "{spec}");
        assert_eq!(bytes, p.ring.stage_bytes, "{spec}");
        assert_eq!(
            bytes,
            (p.block_m * p.block_k + p.block_k * p.block_n) * p.in_bytes,
            "{spec}"
        );
        assert!(
            loads.iter().all(|l| l.smem_offset.is_multiple_of(atom)),
            "{spec}"
        );
        assert!(
            p.ring.stage_bytes.is_multiple_of(atom),
            "{spec}: every stage starts on an atom"
        );
        assert_eq!(
            cover(&p.a_loads, &launch.a_box),
            (p.block_k, p.block_m),
            "{spec}"
        );
        if p.b_major == Major::K {
            // fp8: B column-major, its boxes run along K.
            assert_eq!(
                cover(&p.b_loads, &launch.b_box),
                (p.block_k, p.block_n),
                "{spec}"
            );
            continue;
        }
        assert_eq!(
            cover(&p.b_loads, &launch.b_box),
            (p.block_n, p.block_k),
            "{spec}"
        );
        // The other layouts: the boxes run along each operand's contiguous dimension (a
        // K-major B over 256 rows in two boxes down them).
        for layout in ["rc", "cc"] {
            let other = wgmma(&format!("{spec}, layout: {layout}"));
            let (loads, boxes) = (&other.main_loop, &other.launch);
            assert_eq!(
                cover(&loads.b_loads, &boxes.b_box),
                (loads.block_k, loads.block_n),
                "{spec}"
            );
            let bytes: u32 = loads
                .a_loads
                .iter()
                .chain(&loads.b_loads)
                .map(|l| l.bytes)
                .sum();
            assert_eq!(bytes, loads.ring.guard.expect_tx_bytes, "{spec}");
            assert_eq!(bytes, loads.ring.stage_bytes, "{spec}");
        }
        let cc = wgmma(&format!("{spec}, layout: cc"));
        assert_eq!(
            cover(&cc.main_loop.a_loads, &cc.launch.a_box),
            (cc.main_loop.block_m, cc.main_loop.block_k),
            "{spec}"
        );
    }
}

/// The extent of an operand tile its boxes cover: along the contiguous dimension and down
/// the lines; every pair of a span and a part of the lines is one box.
fn cover(loads: &[BoxLoad], tma: &TensorMapBox) -> (u32, u32) {
    let spans: std::collections::BTreeSet<u32> = loads.iter().map(|l| l.inner_offset).collect();
    let parts: std::collections::BTreeSet<u32> = loads.iter().map(|l| l.outer_offset).collect();
    assert_eq!(loads.len(), spans.len() * parts.len());
    assert!(spans
        .iter()
        .enumerate()
        .all(|(i, &o)| o == i as u32 * tma.inner));
    assert!(parts
        .iter()
        .enumerate()
        .all(|(i, &o)| o == i as u32 * tma.outer));
    (
        spans.len() as u32 * tma.inner,
        parts.len() as u32 * tma.outer,
    )
}

#[test]
fn plan_numbers_of_the_default_spec() {
    let plan = wgmma("");
    let p = &plan.main_loop;
    assert_eq!(
        super::write::wgmma_instructions(p).join(" + "),
        "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16"
    );
    assert_eq!(plan.gmma_variant(), "HGMMA.64x256x16.F32.BF16");
    assert_eq!((plan.launch.threads, plan.launch.max_registers), (384, 168));
    assert_eq!(
        plan.launch.register_split,
        Some(RegisterSplit {
            producer: 40,
            consumer: 232
        })
    );
    // K-major A: SBO 1024 B, LBO unused (1), 128-byte swizzle; N-major B: LBO one box.
    assert_eq!(p.a_descriptor.encode(), 1 << 62 | 64 << 32 | 1 << 16);
    assert_eq!(p.b_descriptor.leading_bytes, 64 * 128);
    let offsets: Vec<(u32, u32)> = p
        .k_steps
        .iter()
        .map(|s| (s.mmas[0].a_offset_units, s.mmas[0].b_offset_units))
        .collect();
    assert_eq!(offsets, [(0, 0), (2, 128), (4, 256), (6, 384)]);
    assert_eq!(p.ring.guard.expect_tx_bytes, 49152);
    assert_eq!(p.ring.guard.empty_arrivals, 8);
    let tma = plan.epilogue.path.tma().expect("16-bit C is stored by TMA");
    assert_eq!(
        (tma.box_rows, tma.box_cols, tma.swizzle_bytes),
        (64, 64, 128)
    );
    assert_eq!(tma.boxes.len(), 4);
    let direct = wgmma("epilogue: direct");
    assert_eq!(direct.epilogue.rows.len(), 2);
    assert_eq!(direct.epilogue.rows[1].ld_scale, 8 * 2);
    let f16 = wgmma("dtype: f16, out: f32");
    assert_eq!(f16.gmma_variant(), "HGMMA.64x256x16.F32");
}

/// The block's shared memory: the ring, C's store buffers, the ring's barriers, C-in's
/// barriers, the block scales' slots and a grouped walk's tables lie apart, in that order,
/// and end inside the dynamic shared memory the launch asks for (after the up to 1 KB the
/// ring's alignment takes).
#[test]
fn shared_memory_regions_lie_apart_inside_the_launch() {
    for text in [
        "schedule: persistent",
        "schedule: persistent, scale: alpha_beta",
        "tile: 128x128x64, consumers: pingpong, stages: 6, schedule: persistent, scale: alpha_beta",
        "dtype: e4m3, tile: 128x128x128, stages: 5, quant: block, scale: alpha_beta",
        "dtype: e4m3, tile: 64x128x128, consumers: 1, stages: 6, quant: block",
        "tile: 64x128x64, consumers: 1, epilogue: direct, scale: alpha_beta",
        "layout: rc, stages: 3, groups: contiguous, epilogue: tma",
        "layout: rc, tile: 64x256x64, consumers: 1, stages: 5, groups: masked",
        "dtype: e4m3, layout: rc, tile: 128x128x128, stages: 5, epilogue: tma, quant: block, groups: masked",
        "layout: rc, tile: 128x128x64, stages: 5, epilogue: tma, schedule: persistent(tail = stream_k), groups: masked, scale: alpha_beta",
        "layout: rc, tile: 128x128x64, consumers: pingpong, stages: 5, epilogue: tma, groups: contiguous, scale: alpha_beta",
        "dtype: e4m3, layout: rc, tile: 128x128x128, stages: 4, epilogue: tma, quant: block, groups: contiguous, scale: alpha_beta",
    ] {
        let (valid, g) = test_spec(text);
        let p = plan(&valid, &g);
        let (ring, consumers) = (&p.main_loop.ring, p.launch.consumers);
        let guard = &ring.guard;
        let mut regions = vec![("ring", 0, ring.ring_bytes)];
        if let Some(tma) = p.epilogue.path.tma() {
            regions.push((
                "store buffers",
                guard.staging_offset,
                guard.staging_offset + tma.consumer_bytes * consumers,
            ));
        }
        regions.push((
            "ring barriers",
            guard.full_offset,
            ring.bytes_with_barriers(),
        ));
        if let Some(loads) = &p.epilogue.c_in_loads {
            regions.push((
                "C-in barriers",
                loads.barriers_offset,
                loads.barriers_offset + loads.consumer_bytes * consumers,
            ));
        }
        let promotion = p.main_loop.promotion.as_ref();
        if let Some(block) = promotion.and_then(|p| p.block.as_ref()) {
            assert_eq!(block.slots_offset % 16, 0, "{text}");
            regions.push((
                "block-scale slots",
                block.slots_offset,
                block.slots_offset + block.slot_bytes * ring.stages,
            ));
        }
        if let Some(grouped) = &p.schedule.grouped {
            regions.push((
                "grouped tables",
                grouped.ends_offset,
                grouped.scan_offset + 4 * grouped.warps,
            ));
        }
        for pair in regions.windows(2) {
            let ((first, _, end), (second, start, _)) = (pair[0], pair[1]);
            assert!(
                end <= start,
                "{text}: {first} ends at {end}, {second} starts at {start}"
            );
        }
        let end = regions.last().unwrap().2;
        let launched = valid.smem.total();
        assert!(
            end + 1024 <= launched as u32,
            "{text}: the regions end at {end}, the launch asks for {launched} B"
        );
    }
}
