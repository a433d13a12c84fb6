//! The plan's numbers checked thread by thread: copies, fragment reads, the epilogue.

use super::*;
use std::collections::BTreeSet;

fn mma(text: &str) -> MmaSyncPlan {
    let text = format!("mma: mma_sync, {text}");
    let valid = gemm_dsl::check_str(&text).unwrap_or_else(|e| panic!("{text}: {e}"));
    let gemm_dsl::Family::MmaSync(g) = valid.family else {
        panic!("{text} is not an mma_sync spec");
    };
    plan(&valid, &g)
}

/// The element of the stored (row-major) 8x8 b16 matrix that lane `lane` receives in
/// half `h` of its register: row `lane / 4`, column `2·(lane % 4) + h`; with `.trans` the
/// matrix is read column-major: row `2·(lane % 4) + h`, column `lane / 4`.
fn ldmatrix_element(lane: u32, h: u32, trans: bool) -> (u32, u32) {
    let (g, t) = (lane / 4, lane % 4);
    if trans {
        (2 * t + h, g)
    } else {
        (g, 2 * t + h)
    }
}

/// PTX ISA fragment layouts (groupID g = lane / 4, threadID_in_group t = lane % 4).
/// m16n8k16 A (f16/bf16): register q, half h -> (row, k).
fn mma_a_16(lane: u32, q: u32, h: u32) -> (u32, u32) {
    let (g, t) = (lane / 4, lane % 4);
    (g + 8 * (q & 1), 2 * t + h + 8 * (q >> 1))
}
/// m16n8k16 B: register q, half h -> (k, n).
fn mma_b_16(lane: u32, q: u32, h: u32) -> (u32, u32) {
    let (g, t) = (lane / 4, lane % 4);
    (2 * t + h + 8 * q, g)
}
/// m16n8k8 tf32 A: register q -> (row, k).
fn mma_a_tf32(lane: u32, q: u32) -> (u32, u32) {
    let (g, t) = (lane / 4, lane % 4);
    (g + 8 * (q & 1), t + 4 * (q >> 1))
}
/// m16n8k8 tf32 B: register q -> (k, n).
fn mma_b_tf32(lane: u32, q: u32) -> (u32, u32) {
    let (g, t) = (lane / 4, lane % 4);
    (t + 4 * q, g)
}

#[test]
fn ldmatrix_lane_rows_cover_each_matrix_once_and_match_the_mma_fragments() {
    let p = mma("tile: 128x128x32, warps: 2x2, dtype: bf16");
    // A: lane l supplies row l % 16, chunk l / 16: matrix q = l / 8 gets rows
    // 8·(q & 1) .. +8 of chunk q >> 1, each exactly once.
    let mut seen = BTreeSet::new();
    for lane in 0..32 {
        let (row, col) = p.a_read.lane_position(0, 0, lane);
        let q = lane / 8;
        assert_eq!((row, col / 16), (8 * (q & 1) + lane % 8, q >> 1));
        assert!(seen.insert((row, col)));
    }
    assert_eq!(seen.len(), 32);
    // What lane l then holds in register q is the mma A fragment element.
    for lane in 0..32 {
        for q in 0..4 {
            for h in 0..2 {
                let (r, c) = ldmatrix_element(lane, h, false);
                // Row r of matrix q is the row lane 8q + r supplied.
                let (row, col) = p.a_read.lane_position(0, 0, 8 * q + r);
                assert_eq!((row, col / 2 + c), mma_a_16(lane, q, h));
            }
        }
    }
    // B (.trans): lane l supplies k row l % 16 and n chunk l / 16; registers 0, 1 are b0, b1
    // of n8 tile 0 and registers 2, 3 those of n8 tile 1.
    for lane in 0..32 {
        for q in 0..4 {
            for h in 0..2 {
                let (r, c) = ldmatrix_element(lane, h, true);
                let (k, col) = p.b_read.lane_position(0, 0, 8 * q + r);
                let (n_tile, reg) = (q >> 1, q & 1);
                let (want_k, want_n) = mma_b_16(lane, reg, h);
                assert_eq!((k, col / 2 + c), (want_k, want_n + 8 * n_tile));
            }
        }
    }
}

/// Register indices of a load's `%fa3, %fa7, ..` list.
fn register_indices(list: &str, prefix: &str) -> Vec<u32> {
    list.split(", ")
        .map(|r| r.trim_start_matches(prefix).parse().unwrap())
        .collect()
}

/// Runs one block tile of a plan on paper, per operand: the copies write every (line,
/// byte) of the stored tile into shared memory where the plan's copy bases and offsets
/// say, and every fragment register of every lane of every warp, in every k step, read
/// through the plan's fragment loads (ldmatrix with or without `.trans`, or 32-bit loads),
/// finds the element the PTX ISA's mma fragment layout puts there.
fn assert_fragments_read_what_the_copies_wrote(spec: &str) {
    let p = mma(spec);
    let e = p.in_bytes;
    let tf32 = p.round_tf32;
    let warps = p.threads / 32;
    let a_per_set = p.m_frags * 4;
    let b_per_set = p.n_frags * 2;
    for (source, reads) in [
        (&p.pipeline.a_src, &p.a_read),
        (&p.pipeline.b_src, &p.b_read),
    ] {
        let (is_a, copy) = (source.name == "a", &source.copy);
        // Shared byte (tile-relative) -> (stored line, byte of the line).
        let mut smem = std::collections::HashMap::new();
        let (vpr, vb) = (copy.vectors_per_row, p.vector_bytes);
        for t in 0..p.threads {
            // The thread's first vector, narrower ones inside their swizzled chunk.
            let base = copy.swizzle.byte_offset(t / vpr, (t % vpr) * vb);
            for op in &copy.copies {
                let line = t / vpr + op.rows;
                let col = (t % vpr) * vb + op.global_col_bytes;
                let at = (base ^ copy.bases[op.base]) + op.smem_offset;
                for byte in 0..vb {
                    assert!(
                        smem.insert(at + byte, (line, col + byte)).is_none(),
                        "{spec}"
                    );
                }
            }
        }
        // (stored line, byte) -> (m or n, k) of the block tile.
        let logical = |(line, byte): (u32, u32)| {
            assert_eq!(byte % e, 0, "{spec}: read splits an element");
            if source.lines_are_k {
                (byte / e, line)
            } else {
                (line, byte / e)
            }
        };
        let word = |at: u32| -> (u32, u32) {
            logical(
                *smem
                    .get(&at)
                    .unwrap_or_else(|| panic!("{spec}: {at} never written")),
            )
        };
        for warp in 0..warps {
            let (wm, wn) = (warp / p.warp_cols, warp % p.warp_cols);
            let lane_address = |lane: u32, load: &FragLoad| {
                (reads.lane_base(wm, wn, lane) ^ reads.bases[load.base]) + load.offset
            };
            for (step, k_step) in p.k_steps_plan.iter().enumerate() {
                let loads = if is_a {
                    &k_step.a_loads
                } else {
                    &k_step.b_loads
                };
                let prefix = if is_a { "%fa" } else { "%fb" };
                for load in loads {
                    let regs = register_indices(&load.registers, prefix);
                    for lane in 0..32 {
                        for (q, &reg) in regs.iter().enumerate() {
                            let q = q as u32;
                            // (m or n, k) of each 16-bit half (one word for tf32) that
                            // lane receives in register q.
                            let halves: Vec<(u32, u32)> = match reads.kind {
                                ReadKind::Scalar => vec![word(lane_address(lane, load))],
                                ReadKind::Ldmatrix | ReadKind::LdmatrixTrans => (0..2)
                                    .map(|h| {
                                        let (row_lane, byte) = if reads.kind == ReadKind::Ldmatrix {
                                            (8 * q + lane / 4, (lane % 4) * 4 + 2 * h)
                                        } else {
                                            (8 * q + 2 * (lane % 4) + h, (lane / 4) * 2)
                                        };
                                        let at = lane_address(row_lane, load) + byte;
                                        let (line, col) = smem[&at];
                                        // A 16-bit half of a tf32 word: its element.
                                        logical((line, col - col % e))
                                    })
                                    .take(if tf32 { 1 } else { 2 })
                                    .collect(),
                            };
                            let (g, t) = (lane / 4, lane % 4);
                            for (h, &got) in halves.iter().enumerate() {
                                let h = h as u32;
                                let want = if is_a {
                                    let (set, rest) = (reg / a_per_set, reg % a_per_set);
                                    assert_eq!(set, step as u32 % 2);
                                    let (mi, aq) = (rest / 4, rest % 4);
                                    let (row, k) = if tf32 {
                                        (g + 8 * (aq & 1), t + 4 * (aq >> 1))
                                    } else {
                                        (g + 8 * (aq & 1), 2 * t + h + 8 * (aq >> 1))
                                    };
                                    (wm * p.warp_tile_m + 16 * mi + row, k)
                                } else {
                                    let (set, rest) = (reg / b_per_set, reg % b_per_set);
                                    assert_eq!(set, step as u32 % 2);
                                    let (ni, bq) = (rest / 2, rest % 2);
                                    let k = if tf32 { t + 4 * bq } else { 2 * t + h + 8 * bq };
                                    (wn * p.warp_tile_n + 8 * ni + g, k)
                                };
                                let k_step = if tf32 { 8 } else { 16 };
                                let want = (want.0, want.1 + step as u32 * k_step);
                                assert_eq!(
                                    got,
                                    want,
                                    "{spec}: {} warp {warp} lane {lane} reg {reg}",
                                    if is_a { 'A' } else { 'B' }
                                );
                            }
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn every_layout_reads_the_fragments_the_copies_wrote() {
    for layout in ["rr", "rc", "cr", "cc"] {
        for spec in [
            "tile: 128x128x32, warps: 2x2",
            "tile: 128x256x64, warps: 2x4, stages: 3",
            "tile: 64x64x64, warps: 2x2, stages: 2, swizzle: 64B",
            "tile: 128x128x32, warps: 2x2, swizzle: pad(16)",
            "tile: 64x128x16, warps: 1x2, swizzle: none, dtype: f16",
            "dtype: tf32, tile: 128x128x16, warps: 2x2, stages: 4",
            "dtype: tf32, tile: 64x64x32, warps: 2x2, swizzle: pad(16)",
            "dtype: tf32, tile: 64x32x32, warps: 2x2, swizzle: 32B",
            // Narrower copy vectors, inside swizzled and padded chunks.
            "tile: 128x128x32, warps: 2x4, copy: cp_async(ca, vector = 4)",
            "tile: 64x64x64, warps: 2x2, swizzle: 64B, copy: cp_async(ca, vector = 8)",
            "tile: 64x64x32, warps: 2x2, swizzle: pad(16), copy: sync(vector = 2)",
            "tile: 64x128x16, warps: 1x4, swizzle: 32B, copy: sync(vector = 4)",
            "dtype: tf32, tile: 64x64x32, warps: 2x2, copy: cp_async(ca, vector = 4)",
        ] {
            let spec = format!("layout: {layout}, {spec}");
            if gemm_dsl::check_str(&format!("mma: mma_sync, {spec}")).is_ok() {
                assert_fragments_read_what_the_copies_wrote(&spec);
            } else {
                panic!("{spec} is not valid");
            }
        }
    }
}

#[test]
fn each_layout_reads_with_its_ldmatrix() {
    let kinds = |spec: &str| {
        let p = mma(spec);
        (p.a_read.kind, p.b_read.kind)
    };
    use ReadKind::{Ldmatrix as N, LdmatrixTrans as T, Scalar as S};
    assert_eq!(kinds("layout: rr"), (N, T));
    assert_eq!(kinds("layout: rc"), (N, N));
    assert_eq!(kinds("layout: cr"), (T, T));
    assert_eq!(kinds("layout: cc"), (T, N));
    assert_eq!(kinds("dtype: tf32, layout: rr"), (N, S));
    assert_eq!(kinds("dtype: tf32, layout: rc"), (N, N));
    assert_eq!(kinds("dtype: tf32, layout: cr"), (S, S));
    assert_eq!(kinds("dtype: tf32, layout: cc"), (S, N));
    // A column-major A lies as BK lines of BM: the swizzle spans its 256-byte lines.
    let p = mma("layout: cc, tile: 128x128x32");
    assert_eq!(p.pipeline.a_src.copy.swizzle.row_bytes, 256);
    assert_eq!(p.pipeline.b_src.copy.swizzle.row_bytes, 64);
    assert_eq!(p.pipeline.a_src.tile_step, "%a_tile_step");
    assert_eq!(p.pipeline.b_src.tile_step, "64");
    let degrees: Vec<u32> = p.bank_conflicts().iter().map(|r| r.degree).collect();
    assert_eq!(degrees[..4], [1, 1, 1, 1], "{:?}", p.bank_conflicts());
}

#[test]
fn tf32_fragments_match_the_mma_layouts() {
    let p = mma("name: t, dtype: tf32, tile: 128x128x32, warps: 2x2");
    assert!(p.b_read.kind == ReadKind::Scalar && p.round_tf32);
    // A through ldmatrix: a b16 matrix row is 4 tf32; lane l's 32-bit word is tf32 l % 4.
    for lane in 0..32 {
        for q in 0..4 {
            let (r, c) = ldmatrix_element(lane, 0, false);
            let (row, col) = p.a_read.lane_position(0, 0, 8 * q + r);
            assert_eq!((row, col / 4 + c / 2), mma_a_tf32(lane, q));
        }
    }
    // B by 32-bit loads: registers b0, b1 of n tile ni read (k = t + 4q, n = 8 ni + g).
    let step = &p.k_steps_plan[1];
    for (i, load) in step.b_loads.iter().enumerate() {
        let (ni, q) = (i as u32 / 2, i as u32 % 2);
        for lane in 0..32 {
            let got = (p.b_read.lane_base(0, 0, lane) ^ p.b_read.bases[load.base]) + load.offset;
            let (k, n) = mma_b_tf32(lane, q);
            let want = p.b_read.swizzle.byte_offset(8 + k, (8 * ni + n) * 4);
            assert_eq!(got, want, "ni {ni} q {q} lane {lane}");
        }
    }
}

#[test]
fn accumulators_cover_the_warp_tile_once() {
    for spec in [
        "tile: 128x128x32, warps: 2x2",
        "tile: 128x256x32, warps: 2x4, out: f32",
        "dtype: tf32, tile: 64x64x16, warps: 2x2",
    ] {
        let p = mma(spec);
        let mut seen = BTreeSet::new();
        for lane in 0..32 {
            for acc in 0..p.accumulators {
                let (row, col) = accumulator_position(&p, lane, acc).unwrap();
                assert!(row < p.warp_tile_m && col < p.warp_tile_n, "{spec}");
                assert!(seen.insert((row, col)), "{spec}: ({row}, {col}) twice");
                // The mma C fragment: c0, c1 row g, c2, c3 row g + 8, columns 2t, 2t + 1.
                let (mi, ni, q) = (acc / 4 / p.n_frags, acc / 4 % p.n_frags, acc % 4);
                let want = (
                    16 * mi + lane / 4 + 8 * (q >> 1),
                    8 * ni + 2 * (lane % 4) + (q & 1),
                );
                assert_eq!((row, col), want, "{spec}");
            }
        }
        assert_eq!(seen.len() as u32, p.warp_tile_m * p.warp_tile_n);
    }
}

/// Runs the staged epilogue of one warp on paper: every byte a lane reads back from its
/// slab holds the accumulator element that belongs at the C position the lane stores it to,
/// and every element of the warp tile is stored exactly once.
#[test]
fn staged_epilogue_stores_every_accumulator_in_its_place() {
    for spec in [
        "tile: 128x128x32, warps: 2x2",
        "tile: 128x256x64, warps: 2x4, stages: 3",
        "tile: 64x64x64, warps: 2x2, stages: 2",
        "tile: 128x128x32, warps: 2x2, out: f32",
        "dtype: tf32, tile: 128x128x16, warps: 2x2",
        "tile: 32x256x16, warps: 1x2, swizzle: 64B",
        "tile: 32x256x16, warps: 1x2, swizzle: 64B, out: f32",
        "tile: 64x128x16, warps: 2x1, out: f32",
        "tile: 16x256x16, warps: 1x1, out: f32",
        "tile: 64x32x64, warps: 2x2",
        "tile: 128x128x32, warps: 2x4, copy: cp_async(ca, vector = 4)",
        "tile: 64x64x32, warps: 2x2, stages: 2, copy: sync(vector = 2)",
        "tile: 64x64x32, warps: 2x2, stages: 2, out: f32, copy: sync(vector = 2)",
        "dtype: tf32, tile: 128x128x16, warps: 2x2, copy: cp_async(ca, vector = 8)",
    ] {
        let p = mma(spec);
        let e = p.epilogue.path.staged().unwrap_or_else(|| panic!("{spec}"));
        let ob = p.out_bytes;
        let vpr = e.vectors_per_row;
        let mut stored = BTreeSet::new();
        let mut rows_down = 0;
        for band in &e.bands {
            // Slab byte -> (row, column) of the warp tile whose element it holds.
            let mut slab = std::collections::BTreeMap::new();
            for lane in 0..32 {
                let base = (lane / 4) * e.pitch + (lane % 4) * e.pair_bytes;
                for w in &band.writes {
                    for (i, acc) in [w.lo, w.hi].into_iter().enumerate() {
                        let element = accumulator_position(&p, lane, acc).unwrap();
                        for byte in 0..ob {
                            let at = base + w.offset + i as u32 * ob + byte;
                            assert!(at < e.bytes_per_warp, "{spec}");
                            assert!(slab.insert(at, element).is_none(), "{spec}: {at} twice");
                        }
                    }
                }
            }
            let first_read_rows = rows_down;
            for lane in 0..32 {
                let base = (lane / vpr) * e.pitch + (lane % vpr) * 16;
                let (first_row, first_col) = (lane / vpr, (lane % vpr) * 16);
                let mut down = first_read_rows;
                for r in &band.reads {
                    down += r.global_row_delta;
                    // The vector's stores, each `c_store_bytes` wide, cover it in order.
                    let offsets: Vec<u32> = r.stores.iter().map(|s| s.offset).collect();
                    let want_offsets: Vec<u32> = (0..16 / p.c_store_bytes)
                        .map(|i| r.global_col_bytes + i * p.c_store_bytes)
                        .collect();
                    assert_eq!(offsets, want_offsets, "{spec}");
                    for s in &r.stores {
                        assert_eq!(s.last_byte, s.offset + p.c_store_bytes - 1, "{spec}");
                        let word_bytes: u32 = s.words.len() as u32 * 4;
                        assert!(word_bytes == 0 || word_bytes == p.c_store_bytes, "{spec}");
                    }
                    for byte in 0..16 {
                        let want = (
                            first_row + down,
                            (first_col + r.global_col_bytes + byte) / ob,
                        );
                        assert_eq!(
                            slab.get(&(base + r.smem_offset + byte)),
                            Some(&want),
                            "{spec}"
                        );
                        stored.insert(want);
                    }
                }
                rows_down = down;
            }
        }
        assert_eq!(stored.len() as u32, p.warp_tile_m * p.warp_tile_n, "{spec}");
        // The padded rows keep the fragment-ordered writes conflict-free, and the reads
        // too once a phase of 8 lanes reads within one row.
        let reports = p.bank_conflicts();
        assert_eq!(reports[4].degree, 1, "{spec}: {}", reports[4].access);
        if vpr >= 8 {
            assert_eq!(reports[5].degree, 1, "{spec}: {}", reports[5].access);
        }
    }
}

/// C's stores are no wider than the copy vector (and at least one element), so the
/// launch asks C's rows for no more alignment than A's and B's lines.
#[test]
fn narrow_vectors_narrow_c_stores() {
    for (spec, staged, store_bytes, split) in [
        ("tile: 128x128x32, warps: 2x2", true, 16, false),
        (
            "tile: 128x128x32, warps: 2x4, copy: cp_async(ca, vector = 8)",
            true,
            8,
            false,
        ),
        (
            "tile: 128x128x32, warps: 2x4, copy: cp_async(ca, vector = 4)",
            true,
            4,
            false,
        ),
        (
            "tile: 64x64x32, warps: 2x2, stages: 2, copy: sync(vector = 2)",
            true,
            2,
            true,
        ),
        // `c_store` narrows C's stores alone: A and B still copy 16 bytes wide.
        (
            "tile: 64x64x32, warps: 2x2, stages: 2, copy: cp_async, c_store: 2",
            true,
            2,
            true,
        ),
        (
            "tile: 16x64x64, warps: 1x2, stages: 4, copy: cp_async, c_store: 2",
            true,
            2,
            true,
        ),
        // f32 C takes one element, 4 bytes, even behind a 2-byte vector.
        (
            "tile: 64x64x32, warps: 2x2, stages: 2, out: f32, copy: sync(vector = 2)",
            true,
            4,
            true,
        ),
        // From the registers: pairs, split where the vector is narrower than a pair (the
        // flag is set for staged kernels too, which store no pairs to C).
        (
            "dtype: tf32, tile: 48x24x32, warps: 3x1, stages: 2",
            false,
            8,
            false,
        ),
        (
            "dtype: tf32, tile: 48x24x32, warps: 3x1, stages: 2, copy: cp_async(ca, vector = 8)",
            false,
            8,
            false,
        ),
        (
            "dtype: tf32, tile: 48x24x32, warps: 3x1, stages: 2, copy: cp_async(ca, vector = 4)",
            false,
            4,
            true,
        ),
    ] {
        let p = mma(spec);
        assert_eq!(p.epilogue.path.staged().is_some(), staged, "{spec}");
        assert_eq!(p.c_store_bytes, store_bytes, "{spec}");
        assert_eq!(
            p.launch_contract().output_align_bytes,
            store_bytes,
            "{spec}"
        );
        assert_eq!(p.epilogue.split_pairs, split, "{spec}");
        if let Some(e) = p.epilogue.path.staged() {
            let want = match store_bytes {
                16 => "st.global.v4.b32",
                8 => "st.global.v2.b32",
                4 => "st.global.b32",
                _ => "st.global.b16",
            };
            assert_eq!(e.global_store, want, "{spec}");
        }
    }
}

#[test]
fn warp_tiles_without_whole_shared_vectors_store_from_registers() {
    // 24 f32 columns are 6 16-byte vectors per row, which 32 lanes cannot share out.
    let p = mma("dtype: tf32, tile: 48x24x32, warps: 3x1, stages: 2");
    assert_eq!(p.warp_tile_n, 24);
    assert!(p.epilogue.path.staged().is_none());
    assert!(!p.epilogue.rows.is_empty());
}

#[test]
fn copies_cover_the_tile_once() {
    for spec in [
        "tile: 128x128x32, warps: 2x2",
        "tile: 64x64x64, warps: 2x2, stages: 2",
        "dtype: tf32, tile: 128x128x32, warps: 2x2",
        "tile: 128x256x64, warps: 2x4, stages: 3",
        "tile: 32x256x16, warps: 1x2, swizzle: 64B",
    ] {
        let p = mma(spec);
        for (copy, rows) in [
            (&p.pipeline.a_src.copy, p.block_m),
            (&p.pipeline.b_src.copy, p.block_k),
        ] {
            let addresses: Vec<u32> = p.copy_addresses(copy).into_iter().flatten().collect();
            let distinct: BTreeSet<u32> = addresses.iter().copied().collect();
            assert_eq!(distinct.len(), addresses.len(), "{spec}");
            assert!(addresses.iter().all(|a| a % 16 == 0));
            assert_eq!(
                addresses.len() as u32 * 16,
                rows * copy.swizzle.row_bytes,
                "{spec}"
            );
        }
    }
}

#[test]
fn bank_conflicts_follow_the_swizzle() {
    // 128B XOR: every read and write conflict-free, for A rows of 64 B and B rows of 256 B.
    let p = mma("tile: 128x128x32, warps: 2x2, swizzle: 128B");
    let degrees: Vec<u32> = p.bank_conflicts().iter().map(|r| r.degree).collect();
    assert_eq!(degrees, [1, 1, 1, 1, 1, 1]);
    // Plain rows: A rows of 64 B put 4 of 8 rows on the same banks, B rows of 256 B all 8.
    let p = mma("tile: 128x128x32, warps: 2x2, swizzle: none");
    let degrees: Vec<u32> = p.bank_conflicts().iter().map(|r| r.degree).collect();
    assert_eq!(degrees, [4, 8, 1, 1, 1, 1]);
    // A 64B XOR suits the 64-byte A rows, not the 256-byte B rows.
    let p = mma("tile: 128x128x32, warps: 2x2, swizzle: 64B");
    assert_eq!(p.bank_conflicts()[0].degree, 1);
    assert_eq!(p.bank_conflicts()[1].degree, 2);
    // Padding by 16 B: reads conflict-free, copy writes of 8 lanes straddle rows.
    let p = mma("tile: 128x128x32, warps: 2x2, swizzle: pad(16)");
    let degrees: Vec<u32> = p.bank_conflicts().iter().map(|r| r.degree).collect();
    assert_eq!(degrees[..2], [1, 1]);
    assert_eq!(degrees[2], 2);
    // tf32 B, 32-bit loads of 4 k rows x 8 columns: the 128B XOR leaves pairs of rows
    // on the same banks.
    let p = mma("dtype: tf32, tile: 128x128x32, warps: 2x2");
    assert_eq!(p.bank_conflicts()[0].degree, 1);
    assert_eq!(p.bank_conflicts()[1].degree, 2);
}

#[test]
fn every_valid_layout_decomposes() {
    // plan() panics if an address does not decompose: sweep tiles, warps, swizzles, types.
    let mut planned = 0;
    for dtype in ["bf16", "f16", "tf32"] {
        for tile in [
            "64x64x16",
            "64x64x32",
            "64x64x64",
            "128x128x32",
            "128x128x64",
            "128x256x32",
            "256x128x32",
            "64x256x128",
            "32x32x16",
            "128x64x16",
            "64x128x8",
            "192x192x64",
        ] {
            for warps in [
                "1x1", "2x1", "1x2", "2x2", "2x4", "4x2", "4x1", "1x4", "3x4",
            ] {
                for swizzle in ["none", "pad(16)", "pad(32)", "32B", "64B", "128B"] {
                    let text = format!(
                        "mma: mma_sync, dtype: {dtype}, tile: {tile}, warps: {warps}, \
                         swizzle: {swizzle}, stages: 2"
                    );
                    if let Ok(valid) = gemm_dsl::check_str(&text) {
                        let gemm_dsl::Family::MmaSync(g) = valid.family else {
                            unreachable!()
                        };
                        let p = plan(&valid, &g);
                        assert!(p.a_read.bases.len() <= 8 && p.b_read.bases.len() <= 8);
                        planned += 1;
                    }
                }
            }
        }
    }
    assert!(planned > 300, "{planned}");
}

#[test]
fn plan_numbers_of_the_default_spec() {
    let p = mma("");
    assert_eq!((p.warp_tile_m, p.warp_tile_n), (64, 64));
    assert_eq!((p.m_frags, p.n_frags, p.k_steps), (4, 8, 2));
    assert_eq!(p.k_steps_plan[0].mmas.len(), 32);
    assert_eq!(p.k_steps_plan[0].a_loads.len(), 4);
    assert_eq!(p.k_steps_plan[0].b_loads.len(), 4);
    // The second k step reads chunks 2, 3 of the 64-byte A rows: an XOR of 32 bytes.
    assert_eq!(p.a_read.bases, [0, 32]);
    assert_eq!(p.k_steps_plan[1].a_loads[1].offset, 16 * 64);
    assert_eq!(p.pipeline.smem.guard.groups_in_flight, 1);
    assert_eq!(p.pack_instruction, "cvt.rn.bf16x2.f32");
    assert_eq!(
        ldmatrix_conflict_degree(&[0, 16, 32, 48, 64, 80, 96, 112]),
        1
    );
}
