//! The SIMT plan's numbers checked thread by thread: copies, FFMA reads, every layout.

use super::*;
use gemm_dsl::geometry::CopyGeometry;

fn simt(text: &str) -> SimtPlan {
    let valid = gemm_dsl::check_str(text).unwrap();
    let gemm_dsl::Family::Simt(g) = valid.family else {
        panic!("{text} is not a SIMT spec");
    };
    plan(&valid, &g)
}

/// Each thread row's stores cover its columns once, `c_store_bytes` at a time: 16 bytes,
/// or the narrower copy vector's width, which is then C's alignment at launch.
#[test]
fn c_stores_follow_the_copy_vector() {
    for (copy, store_bytes, store) in [
        ("cp_async", 16, "st.global.v4.f32"),
        ("cp_async(ca, vector = 8)", 8, "st.global.v2.f32"),
        ("sync(vector = 4)", 4, "st.global.f32"),
    ] {
        let p = simt(&format!(
            "name: s, arch: sm_80, mma: fma, tile: 128x128x8, warps: 4x2, copy: {copy}"
        ));
        assert_eq!(p.c_store_bytes, store_bytes, "{copy}");
        assert_eq!(
            p.launch_contract().output_align_bytes,
            store_bytes,
            "{copy}"
        );
        assert_eq!(p.epilogue.store, store, "{copy}");
        let tn = p.consumer.thread_tile_n;
        for row in &p.epilogue.rows {
            let mut bytes = std::collections::BTreeSet::new();
            for s in &row.stores {
                assert_eq!(s.last_byte, s.offset + store_bytes - 1, "{copy}");
                assert!((s.offset..=s.last_byte).all(|b| bytes.insert(b)), "{copy}");
                // The edge path's elements: the store's own, or none for one element.
                let elements: Vec<u32> = s.elements.iter().map(|e| e.offset).collect();
                if store_bytes > 4 {
                    let want: Vec<u32> = (s.offset..=s.last_byte).step_by(4).collect();
                    assert_eq!(elements, want, "{copy}");
                } else {
                    assert!(elements.is_empty(), "{copy}");
                }
            }
            assert_eq!(bytes.len() as u32, tn * 4, "{copy}");
        }
    }
}

#[test]
fn copy_offsets_cover_the_tile_once() {
    let p = simt("tile: 128x128x32, warps: 4x2, swizzle: pad(16)");
    // A: 128 rows x 8 vectors, 256 threads -> 4 copies 32 rows apart.
    assert_eq!(p.pipeline.a_src.copy.vectors_per_row, 8);
    let rows: Vec<u32> = p
        .pipeline
        .a_src
        .copy
        .copies
        .iter()
        .map(|c| c.rows)
        .collect();
    assert_eq!(rows, [0, 32, 64, 96]);
    assert_eq!(p.pipeline.a_src.copy.copies[1].smem_offset, 32 * (128 + 16));
    // B: 32 rows x 32 vectors -> 4 copies 8 rows apart, after the A tile.
    assert_eq!(p.pipeline.b_src.copy.smem_stage_offset, 128 * 144);
    assert_eq!(p.pipeline.b_src.copy.copies[3].rows, 24);
}

#[test]
fn copies_within_a_row_when_the_row_is_wider_than_the_block() {
    // 128 vectors per row, 64 threads: copies 0 and 1 sit side by side in one row.
    let geometry = CopyGeometry::new(2, 128 * COPY_VECTOR_BYTES, 64, 16).unwrap();
    let copy = operand_copy(
        &geometry,
        &CopyVector::new(16, StagingWord::F32),
        64,
        2048,
        None,
        0,
        0,
    );
    assert_eq!(copy.copies.len(), 4);
    assert_eq!(copy.copies[1].rows, 0);
    assert_eq!(copy.copies[1].global_col_bytes, 64 * 16);
    assert_eq!(copy.copies[2].rows, 1);
    assert_eq!(copy.copies[2].smem_offset, 2048);
}

/// Runs one k tile of a plan on paper for every thread: the copies put every (line, byte)
/// of each stored tile where the plan's copy offsets say, the loads of each k group and
/// k step fill the fragment registers from the thread's read bases, and every FFMA of
/// every k multiplies A(row, k) by B(k, column) for the thread's own row and column of the
/// accumulator it adds to.
fn assert_ffmas_read_what_the_copies_wrote(spec: &str) {
    let p = simt(spec);
    let c = &p.consumer;
    let threads = p.threads;
    // Shared byte (stage-relative) -> (M or N index, k) of the block tile.
    let mut smem = std::collections::HashMap::new();
    for source in [&p.pipeline.a_src, &p.pipeline.b_src] {
        let copy = &source.copy;
        let (vpr, vb) = (copy.vectors_per_row, p.vector_bytes);
        for t in 0..threads {
            let first = copy.byte_offset(t / vpr, (t % vpr) * vb) + copy.smem_stage_offset;
            for op in &copy.copies {
                let line = t / vpr + op.rows;
                let col = (t % vpr) * vb + op.global_col_bytes;
                for byte in (0..vb).step_by(4) {
                    let element = (col + byte) / F32_BYTES;
                    let at = (source.name, first + op.smem_offset + byte);
                    let logical = if source.lines_are_k {
                        (element, line)
                    } else {
                        (line, element)
                    };
                    assert!(smem.insert(at, logical).is_none(), "{spec}: {at:?} twice");
                }
            }
        }
    }
    let loads = |registers: &mut std::collections::HashMap<String, (u32, u32)>,
                 list: &[VectorLoad],
                 operand: &'static str,
                 base: u32| {
        for load in list {
            for (w, register) in load.registers.split(", ").enumerate() {
                let at = (operand, base + load.offset + 4 * w as u32);
                let element = *smem
                    .get(&at)
                    .unwrap_or_else(|| panic!("{spec}: {at:?} never written"));
                registers.insert(register.to_string(), element);
            }
        }
    };
    for t in 0..threads {
        let (warp, lane) = (t / 32, t % 32);
        let (wm, wn) = (warp / c.warp_cols, warp % c.warp_cols);
        let (lr, lc) = (lane / c.lane_cols, lane % c.lane_cols);
        let a_base = wm * c.a_warp_row_bytes + lr * c.a_lane_row_bytes;
        let b_base = p.pipeline.b_src.copy.smem_stage_offset
            + wn * c.b_warp_col_bytes
            + lc * c.b_lane_col_bytes;
        let mut registers = std::collections::HashMap::new();
        for (g, group) in c.k_groups.iter().enumerate() {
            loads(&mut registers, &group.a_loads, "a", a_base);
            loads(&mut registers, &group.b_loads, "b", b_base);
            for (kk, step) in group.k_steps.iter().enumerate() {
                loads(&mut registers, &step.a_loads, "a", a_base);
                loads(&mut registers, &step.b_loads, "b", b_base);
                let k = 4 * g as u32 + kk as u32;
                for fma in &c.fma_blocks[kk].fmas {
                    let (i, n) = (fma.acc / c.thread_tile_n, fma.acc % c.thread_tile_n);
                    let row = wm * c.warp_tile_m + lr * c.thread_tile_m + i;
                    let col = wn * c.warp_tile_n + lc * 4 + 32 * (n / 4) + n % 4;
                    assert_eq!(
                        registers[&format!("%fa{}", fma.a)],
                        (row, k),
                        "{spec}: A t {t}"
                    );
                    assert_eq!(
                        registers[&format!("%fb{}", fma.b)],
                        (col, k),
                        "{spec}: B t {t}"
                    );
                }
            }
        }
    }
}

#[test]
fn every_layout_multiplies_what_the_copies_wrote() {
    let (mut checked, mut refused) = (0, Vec::new());
    let specs = [
        "tile: 128x128x8, warps: 4x2",
        "tile: 128x128x16, warps: 4x2, swizzle: pad(16)",
        "tile: 64x64x16, warps: 2x1",
        "tile: 64x128x32, warps: 2x2",
        "tile: 32x64x8, warps: 2x1",
        "tile: 16x64x16, warps: 1x2",
        "tile: 8x32x16, warps: 1x1",
        "tile: 48x64x16, warps: 2x1",
        "tile: 32x128x64, warps: 1x2",
        // Narrower copy vectors: inside column-quarter chunks and padded lines.
        "tile: 128x128x8, warps: 4x2, copy: cp_async(ca, vector = 4)",
        "tile: 64x128x32, warps: 2x2, copy: cp_async(ca, vector = 8)",
        "tile: 64x64x16, warps: 2x2, swizzle: pad(16), copy: sync(vector = 4)",
    ];
    for layout in ["rr", "rc", "cr", "cc"] {
        for spec in specs {
            let spec = format!("layout: {layout}, {spec}");
            // Thread tiles of 2 and 6 rows read a column-major A by v2 loads, 1 by scalars.
            if gemm_dsl::check_str(&spec).is_ok() {
                assert_ffmas_read_what_the_copies_wrote(&spec);
                checked += 1;
            } else {
                refused.push(spec);
            }
        }
    }
    // Refused by validation: rc reads both operands along K and keeps two k groups of
    // vectors live (too many registers); 48-row A tiles stored along M split into 12
    // vectors a line, which 64 threads cannot share out.
    assert_eq!(
        refused,
        [
            "layout: rc, tile: 32x128x64, warps: 1x2",
            "layout: rc, tile: 64x128x32, warps: 2x2, copy: cp_async(ca, vector = 8)",
            "layout: cr, tile: 48x64x16, warps: 2x1",
            "layout: cc, tile: 48x64x16, warps: 2x1",
        ]
    );
    assert_eq!(checked, 4 * specs.len() - refused.len());
}

#[test]
fn column_major_tiles_read_without_bank_conflicts() {
    for layout in ["rc", "cr", "cc"] {
        for spec in ["tile: 128x128x8", "tile: 64x128x32, warps: 2x2"] {
            let reports = simt(&format!("layout: {layout}, {spec}")).bank_conflicts();
            assert_eq!(reports[0].degree, 1, "{layout} {spec}: {reports:?}");
            assert_eq!(reports[1].degree, 1, "{layout} {spec}: {reports:?}");
        }
    }
    // Column quarters: BN / 4 chunks each, four to a group row of 4 k.
    let p = simt("layout: cc, tile: 128x128x8, swizzle: pad(16)");
    let q = p.pipeline.b_src.copy.quarters.unwrap();
    assert_eq!((q.quarter_bytes, q.group_bytes), (32 * 16 + 16, 4 * 528));
    assert_eq!(p.pipeline.b_src.copy.chunk_offset(5, 1), 4 * 528 + 528 + 16);
    assert_eq!(p.pipeline.a_src.tile_step, "%a_tile_step");
    assert_eq!(p.pipeline.b_src.tile_step, "32");
}

#[test]
fn bank_conflict_degrees() {
    // Broadcast and consecutive 16-byte vectors: conflict-free.
    assert_eq!(conflict_degree(&[0; 8]), 1);
    assert_eq!(
        conflict_degree(&(0..8).map(|i| i * 16).collect::<Vec<_>>()),
        1
    );
    // Eight distinct rows of 128 bytes: all in the same four banks.
    assert_eq!(
        conflict_degree(&(0..8).map(|i| i * 128).collect::<Vec<_>>()),
        8
    );
    let reads = simt("tile: 128x128x8").bank_conflicts();
    assert!(reads.iter().all(|r| r.degree == 1), "{reads:?}");
    // Padding A rows of 32 bytes by 16 makes the copy writes of one phase collide.
    let padded = simt("tile: 128x128x8, swizzle: pad(16)").bank_conflicts();
    assert_eq!(padded[0].degree, 1);
    assert_eq!(padded[2].degree, 2);
}

#[test]
fn inner_loop_shape() {
    let p = simt("tile: 128x128x8");
    let c = &p.consumer;
    assert_eq!((c.thread_tile_m, c.thread_tile_n), (8, 8));
    assert_eq!(c.k_groups.len(), 2);
    let step = &c.k_groups[1].k_steps[3];
    assert_eq!(step.b_loads[1].offset, 7 * 512 + 128);
    let block = &c.fma_blocks[3];
    assert_eq!(block.fmas.len(), 64);
    // Row 1 first, forwards, then row 3 backwards: the tenth FFMA is row 3, column 6.
    assert_eq!(
        block.fmas[9],
        Fma {
            acc: 30,
            a: 15,
            b: 30
        }
    );
}

#[test]
fn each_ffma_shares_an_operand_with_the_one_before() {
    for tile in [
        "tile: 128x128x8",
        "tile: 64x64x16, warps: 2x1",
        "tile: 128x256x8, warps: 2x4",
    ] {
        let c = simt(tile).consumer;
        for block in &c.fma_blocks {
            let mut accumulators: Vec<u32> = block.fmas.iter().map(|f| f.acc).collect();
            accumulators.sort_unstable();
            assert_eq!(
                accumulators,
                (0..c.accumulators).collect::<Vec<_>>(),
                "{tile}"
            );
            for pair in block.fmas.windows(2) {
                assert!(
                    pair[0].a == pair[1].a || pair[0].b == pair[1].b,
                    "{tile}: {:?} then {:?}",
                    pair[0],
                    pair[1]
                );
            }
        }
    }
}

#[test]
fn vector_stores_copy_the_accumulators_first() {
    for spec in [
        "tile: 64x64x16, warps: 2x1",
        "tile: 64x64x16, warps: 2x1, bias: col",
    ] {
        assert!(simt(spec).epilogue.copy_accumulators, "{spec}");
    }
    // Element stores pin nothing.
    assert!(
        !simt("tile: 64x64x16, warps: 2x1, copy: cp_async(ca, vector = 4)")
            .epilogue
            .copy_accumulators
    );
}
