//! The grouped walk replayed on the CPU: for any group sizes (zeros, ones, a tile ± 1,
//! thousands of groups) and any offsets the device might hold, every tile of every expert is
//! computed exactly once and no tile reaches a row outside its expert's.

use super::*;
use crate::spec::{Raster, Tail};
use proptest::prelude::*;
use std::collections::HashMap;

/// Lines of `shapes/moe.txt` (the crate is packaged alone, so they are copied here), one of
/// each distribution.
const MOE_LINES: &str = "\
# G ROWS N K DIST
4 32768 4096 7168 balanced        # DeepGEMM contiguous, 4 x 8192
2 1024 4096 7168 masked:512:1     # DeepGEMM masked, 2 x 512
256 512 4096 7168 random:1        # deepseek-v3 gate_up, 64 tokens top-8 (decode)
256 32768 4096 7168 zipf:1.0:3    # deepseek-v3 gate_up, 4096 tokens top-8
128 32768 2048 768 zipf:1.2:10    # qwen3-30b-a3b down, 4096 tokens top-8
";

/// Every tile the walk visits, in its order, for `schedule` and `order`.
fn walk(tiles: &GroupedTiles, schedule: Schedule, order: BandOrder) -> Vec<GroupTile> {
    (0..tiles.tiles())
        .map(|index| tiles.tile_at(schedule, index as u32, order))
        .collect()
}

/// The walk's proof: each (expert, row tile, column tile) once, the tiles of an expert
/// covering exactly its rows, and every tile's rows inside its expert's range.
fn assert_covers_exactly(tiles: &GroupedTiles, visited: &[GroupTile], tile_m: u32) {
    let mut seen: HashMap<(u32, u32, u32), u32> = HashMap::new();
    for tile in visited {
        let (start, end) = tiles.rows().ranges[tile.group as usize];
        assert!(
            start <= tile.row_start && tile.row_start < tile.row_end && tile.row_end <= end,
            "{tile:?} leaves its expert's rows {start}..{end}"
        );
        assert!(
            tile.row_end - tile.row_start <= tile_m,
            "{tile:?} is taller than a tile"
        );
        assert!(
            tile.tile_col < tiles.tiles_n(),
            "{tile:?} is past the last column"
        );
        *seen
            .entry((tile.group, tile.group_tile_row, tile.tile_col))
            .or_default() += 1;
    }
    for (g, &(start, end)) in tiles.rows().ranges.iter().enumerate() {
        let row_tiles = (end - start).div_ceil(tile_m);
        for row_tile in 0..row_tiles {
            for col in 0..tiles.tiles_n() {
                assert_eq!(
                    seen.remove(&(g as u32, row_tile, col)),
                    Some(1),
                    "expert {g} ({start}..{end}): tile ({row_tile}, {col}) not visited once"
                );
            }
        }
        // The expert's tiles cover its rows and no more.
        let covered: u32 = visited
            .iter()
            .filter(|t| t.group == g as u32 && t.tile_col == 0)
            .map(|t| t.row_end - t.row_start)
            .sum();
        assert_eq!(
            covered,
            end - start,
            "expert {g}'s tiles cover its rows once"
        );
    }
    assert!(seen.is_empty(), "tiles of no expert: {seen:?}");
}

fn schedules() -> Vec<(Schedule, BandOrder)> {
    let mut all = vec![(Schedule::Tile, BandOrder::AcrossFirst)];
    for raster in [Raster::M, Raster::N] {
        for group in [1, 3, 8] {
            for order in [BandOrder::AcrossFirst, BandOrder::AlongFirst] {
                let schedule = Schedule::Persistent {
                    raster,
                    group,
                    tail: Tail::Whole,
                };
                all.push((schedule, order));
            }
        }
    }
    all
}

/// Group sizes around a tile of `tile_m` rows: 0, 1, a tile ± 1, a few tiles, many.
fn sizes_around(tile_m: u32) -> impl Strategy<Value = Vec<u32>> {
    let size = prop_oneof![
        Just(0u32),
        Just(1),
        Just(tile_m - 1),
        Just(tile_m),
        Just(tile_m + 1),
        Just(3 * tile_m + 7),
        0u32..600,
    ];
    prop::collection::vec(size, 1..40)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn every_tile_of_every_expert_is_walked_once(
        sizes in sizes_around(64),
        tile_m in prop_oneof![Just(64u32), Just(128)],
        n in 1u32..700,
    ) {
        let buffer_rows: u32 = sizes.iter().sum();
        let rows = GroupRows::contiguous(&GroupRows::offsets_of(&sizes), buffer_rows);
        prop_assert_eq!(
            rows.ranges.iter().map(|&(s, e)| e - s).collect::<Vec<_>>(),
            sizes.clone()
        );
        let tiles = GroupedTiles::new(rows, tile_m, n, 128);
        let expected: u64 = sizes.iter().map(|&s| u64::from(s.div_ceil(tile_m))).sum::<u64>()
            * u64::from(n.div_ceil(128));
        prop_assert_eq!(tiles.tiles(), expected);
        for (schedule, order) in schedules() {
            assert_covers_exactly(&tiles, &walk(&tiles, schedule, order), tile_m);
        }
    }

    #[test]
    fn offsets_the_device_may_hold_never_reach_outside_the_buffer(
        offsets in prop::collection::vec(-50i32..3000, 1..30),
        buffer_rows in 0u32..2500,
    ) {
        let rows = GroupRows::contiguous(&offsets, buffer_rows);
        let mut previous_end = 0;
        for &(start, end) in &rows.ranges {
            // Ranges follow one another, never backwards, never past the buffer.
            prop_assert_eq!(start, previous_end);
            prop_assert!(start <= end && end <= buffer_rows.max(start));
            previous_end = end;
        }
        prop_assert!(previous_end <= buffer_rows);
        let tiles = GroupedTiles::new(rows, 128, 256, 128);
        assert_covers_exactly(&tiles, &walk(&tiles, schedules()[3].0, schedules()[3].1), 128);
    }

    #[test]
    fn masked_experts_keep_to_their_own_rows(
        counts in prop::collection::vec(-5i32..300, 1..20),
        max_rows in 1u32..260,
    ) {
        let rows = GroupRows::masked(&counts, max_rows);
        for (g, &(start, end)) in rows.ranges.iter().enumerate() {
            let own = g as u32 * max_rows;
            prop_assert!(own <= start && end <= own + max_rows);
            prop_assert_eq!(end - start, (counts[g].max(0) as u32).min(max_rows));
        }
        let tiles = GroupedTiles::new(rows, 64, 300, 128);
        for (schedule, order) in schedules() {
            assert_covers_exactly(&tiles, &walk(&tiles, schedule, order), 64);
        }
    }
}

#[test]
fn thousands_of_experts_with_empty_ones_walk_once() {
    // 4096 experts, a third of them empty, sizes up to a few tiles.
    let mut rng = SplitMix64::new(11);
    let sizes: Vec<u32> = (0..4096)
        .map(|_| match rng.below(3) {
            0 => 0,
            _ => rng.below(300) as u32,
        })
        .collect();
    let buffer_rows = sizes.iter().sum();
    let tiles = GroupedTiles::new(
        GroupRows::contiguous(&GroupRows::offsets_of(&sizes), buffer_rows),
        128,
        1536,
        128,
    );
    let schedule = Schedule::Persistent {
        raster: Raster::M,
        group: 8,
        tail: Tail::Whole,
    };
    assert_covers_exactly(&tiles, &walk(&tiles, schedule, BandOrder::AcrossFirst), 128);
}

#[test]
fn a_walk_with_no_rows_has_no_tiles() {
    let tiles = GroupedTiles::new(GroupRows::contiguous(&[0, 0, 0], 0), 128, 4096, 128);
    assert_eq!(tiles.tiles(), 0);
    let beyond = GroupedTiles::new(GroupRows::contiguous(&[-3, 500], 0), 128, 4096, 128);
    assert_eq!(beyond.rows().ranges, vec![(0, 0), (0, 0)]);
    assert_eq!(beyond.tiles(), 0);
}

#[test]
fn problem_lists_parse_and_their_sizes_add_up() {
    let problems = GroupedProblem::parse_list(MOE_LINES).unwrap();
    assert_eq!(problems.len(), 5);
    for problem in &problems {
        let sizes = problem.group_rows();
        assert_eq!(sizes.len(), problem.groups as usize, "{problem}");
        let total: u64 = sizes.iter().map(|&s| u64::from(s)).sum();
        match problem.distribution {
            Distribution::Masked { cap, .. } => {
                assert!(sizes.iter().all(|&s| s <= cap), "{problem}");
                assert!(total <= u64::from(problem.rows), "{problem}");
            }
            _ => assert_eq!(total, u64::from(problem.rows), "{problem}"),
        }
        // Each line reads back as it is written.
        let again = GroupedProblem::parse_line(&problem.to_string()).unwrap();
        assert_eq!(again.as_ref(), Some(problem));
    }
}

#[test]
fn distributions_draw_as_they_say() {
    let problem = |distribution| GroupedProblem {
        groups: 8,
        rows: 8190,
        n: 1,
        k: 1,
        distribution,
    };
    assert_eq!(
        problem(Distribution::Balanced).group_rows(),
        vec![1024, 1024, 1024, 1024, 1024, 1024, 1023, 1023]
    );
    // The same seed draws the same sizes; another seed other ones.
    let random = problem(Distribution::Random { seed: 5 }).group_rows();
    assert_eq!(
        random,
        problem(Distribution::Random { seed: 5 }).group_rows()
    );
    assert_ne!(
        random,
        problem(Distribution::Random { seed: 6 }).group_rows()
    );
    assert!(
        random.iter().all(|&s| (900..1150).contains(&s)),
        "{random:?}"
    );
    // Zipf with s = 1.2 over 8 experts: the largest about 8x the smallest.
    let mut skewed = problem(Distribution::Zipf { s: 1.2, seed: 3 }).group_rows();
    skewed.sort_unstable();
    assert!(skewed[7] > 5 * skewed[0], "{skewed:?}");
    // s = 0 is uniform.
    let flat = problem(Distribution::Zipf { s: 0.0, seed: 3 }).group_rows();
    assert!(flat.iter().all(|&s| (900..1150).contains(&s)), "{flat:?}");
}

#[test]
fn the_generator_is_splitmix64() {
    // The first outputs for seed 0 (Vigna's reference implementation).
    let mut rng = SplitMix64::new(0);
    assert_eq!(rng.next_u64(), 0xE220_A839_7B1D_CDAF);
    assert_eq!(rng.next_u64(), 0x6E78_9E6A_A1B9_65F4);
    let mut rng = SplitMix64::new(1);
    for _ in 0..1000 {
        assert!(rng.below(7) < 7);
        let unit = rng.unit();
        assert!((0.0..1.0).contains(&unit));
    }
}

#[test]
fn bad_lines_say_what_is_wrong() {
    let error = |line: &str| GroupedProblem::parse_line(line).unwrap_err();
    assert!(error("8 8192 4096").contains("`G ROWS N K DIST`, 3 fields given"));
    assert!(error("0 8192 4096 7168 balanced").contains("G `0` is not a size"));
    assert!(error("8 8192 4096 7168 skewed").contains("is not balanced, random:SEED"));
    assert!(error("8 8192 4096 7168 zipf:-1:3").contains("zipf exponent `-1`"));
    assert!(error("4 1000 4096 7168 masked:256:1").contains("G x CAP = 1024"));
    assert_eq!(GroupedProblem::parse_line("  # a comment").unwrap(), None);
    let listed = GroupedProblem::parse_list("1 1 1 1 balanced\n2 2 2 2 nope\n").unwrap_err();
    assert!(listed.starts_with("line 2: "), "{listed}");
}

/// Draws a script in another language must reproduce (`scripts/torch-grouped-baseline.py
/// --self-test` checks the same numbers), so both time the same problems.
#[test]
fn draws_are_pinned_for_other_languages() {
    let sizes = |line: &str| {
        GroupedProblem::parse_line(line)
            .unwrap()
            .unwrap()
            .group_rows()
    };
    assert_eq!(
        sizes("8 8192 28672 4096 zipf:0.8:6"),
        [642, 2570, 833, 539, 1410, 458, 976, 764]
    );
    let random = sizes("256 512 4096 7168 random:1");
    assert_eq!(random[..12], [3, 2, 1, 1, 1, 2, 1, 3, 2, 3, 0, 2]);
    assert_eq!(sizes("4 1024 4096 7168 masked:256:1"), [145, 191, 249, 114]);
}

#[test]
fn the_grouped_set_is_valid_in_each_layout_with_tma_stores() {
    use crate::spec::{Groups, Layout};
    let specs = sm90_grouped_specs(Groups::Masked, Layout::RowCol, crate::DType::Bf16);
    assert_eq!(specs.len(), SM90_GROUPED_MEMBERS.len());
    for spec in &specs {
        let valid = crate::check_str(spec).unwrap_or_else(|e| panic!("{spec}: {e}"));
        assert_eq!(valid.spec.groups, Groups::Masked, "{spec}");
    }
    assert!(specs[0].starts_with("name: sm90_grouped_w128x256_sk_bf16_rc_masked,"));
    assert!(specs.iter().all(|spec| spec.contains("epilogue: tma")));
}

#[test]
fn the_fp8_grouped_set_is_valid_with_block_scales() {
    use crate::spec::{Groups, Quant};
    for groups in [Groups::Contiguous, Groups::Masked] {
        let specs = sm90_grouped_fp8_specs(groups);
        assert_eq!(specs.len(), SM90_GROUPED_FP8_MEMBERS.len());
        for spec in &specs {
            let valid = crate::check_str(spec).unwrap_or_else(|e| panic!("{spec}: {e}"));
            assert_eq!(valid.spec.groups, groups, "{spec}");
            assert_eq!(valid.spec.quant, Quant::Block, "{spec}");
        }
    }
}
