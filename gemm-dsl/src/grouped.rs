//! Grouped GEMM for mixture-of-experts layers, below any kernel: the problems (`moe.txt`
//! lines and the rows each expert gets) and the tile walk a grouped kernel runs, as plain
//! arithmetic the CPU proofs replay.
//!
//! Expert `g` multiplies its rows of A by its own B: `D[rows of g] = A[rows of g] · B_g`. The
//! rows of every expert lie in one buffer, as one of two layouts says:
//!
//! - **contiguous**: expert `g`'s rows follow expert `g - 1`'s, its end given by an int32
//!   prefix sum on the device (`offsets[g]`, as `torch._grouped_mm`'s `offs`), with no
//!   padding: any size, 0 and 1 included;
//! - **masked**: expert `g` owns `max_rows` rows from `g · max_rows`, of which its device
//!   count says how many hold tokens.
//!
//! The walk treats the row tiles of every expert, one expert after another, as the row tiles
//! of one tall product, so the dense walk ([`Schedule::tile_at`], its bands and their order)
//! orders them unchanged; a row tile then finds its expert by a search over the experts'
//! row-tile counts. Only the device knows the offsets and counts, so the walk takes them as
//! they come and clamps them ([`GroupRows`]): whatever they hold, no tile reaches a row outside
//! its expert's range, and no range outside the buffer.

use crate::spec::{BandOrder, DType, Groups, Layout, Schedule};
use std::fmt;

/// The most experts one grouped launch takes: a block keeps two words per expert in shared
/// memory ([`TABLE_BYTES`]). The largest routed layers of 2026 have 256 to 512 experts.
pub const MAX_GROUPS: u32 = 1024;

/// The warps whose partial scans a block's table build keeps in shared memory, at most: the
/// widest Hopper block (a producer and three consumer warpgroups).
pub const SCAN_WARPS: u32 = 16;

/// Shared memory of a grouped kernel's tables: per expert the end of its rows and the row
/// tiles of the experts up to it (the prefix sum the walk searches), then one word per warp
/// for the block-wide scans that build them, on a 16-byte boundary.
pub const TABLE_BYTES: u32 = 2 * 4 * MAX_GROUPS + 4 * SCAN_WARPS + 16;

/// The Hopper grouped kernels an entry point picks among, by name and spec keys: 128-row
/// tiles for experts of hundreds of rows and more (128x256 where N is wide, 128x128 where
/// fewer tiles would leave SMs idle), 64-row ones for decode (a few rows per expert, the
/// weights' bandwidth the bound). All store C by TMA, a box past its expert's last row
/// directly; beside the experts' tables a 128x256 tile fits 3 stages. Measured on H200s on
/// 2026-11-28 over `shapes/moe.txt`: a 128x256 tile with direct stores at 4 stages and a
/// 256x128 one were never the fastest member, and left (`results/grouped-2026-11-28/`); a
/// stream-K tail (`results/grouped-sk-2026-11-28/`) made the 128x256 tile up to 7 % faster where the experts hold thousands of rows and
/// 13 % on one masked expert of 580 rows, and lost nowhere, so it replaced the whole-tile
/// 128x256; the 128x128 tile keeps both (stream-K 26 % faster on one expert of 580 rows,
/// N 4096, K 7168; whole tiles 2–7 % faster where N is 7168 and K 2048). Ping-pong consumers
/// (`results/grouped-fused-2026-11-28/`) then replaced the whole 128x128 tile: within noise
/// of it or faster on all 20 problems (0.996 to 1.13x, most on K = 2048), and the fastest
/// member on 11, where each tile's search for its expert and its stores hide behind the
/// other consumer's math.
pub const SM90_GROUPED_MEMBERS: [(&str, &str); 4] = [
    (
        "w128x256_sk",
        "tile: 128x256x64, stages: 3, epilogue: tma, schedule: persistent(tail = stream_k)",
    ),
    (
        "w128x128_pp",
        "tile: 128x128x64, consumers: pingpong, stages: 5, epilogue: tma",
    ),
    (
        "w128x128_sk",
        "tile: 128x128x64, stages: 5, epilogue: tma, schedule: persistent(tail = stream_k)",
    ),
    (
        "w64x256",
        "tile: 64x256x64, consumers: 1, stages: 5, epilogue: tma",
    ),
];

/// The Hopper fp8 grouped kernels (e4m3 experts with block scales, `quant: block`: A's 1x128
/// and each expert's 128x128 scales of B, as DeepSeek-V3's), by name and spec keys: 128x128x128
/// tiles (the widest whose promoted sums fit the registers) with whole tiles and with a
/// stream-K tail, and 64x128x128 for a few rows per expert. B is K-major (`layout: rc`, `[G, N,
/// K]`), as fp8 wgmma reads it. `GroupedMatmul::<E4m3, bf16>::new_fused` picks among them;
/// `gemm-bench --grouped-fp8` times each.
pub const SM90_GROUPED_FP8_MEMBERS: [(&str, &str); 3] = [
    ("w128x128", "tile: 128x128x128, stages: 5, epilogue: tma"),
    (
        "w128x128_sk",
        "tile: 128x128x128, stages: 5, epilogue: tma, schedule: persistent(tail = stream_k)",
    ),
    (
        "w64x128_sk",
        "tile: 64x128x128, consumers: 1, stages: 6, epilogue: tma, schedule: persistent(tail = stream_k)",
    ),
];

/// The specs of [`SM90_GROUPED_FP8_MEMBERS`] for one grouped layout: e4m3 in, bf16 out,
/// layout `rc`, named `sm90_grouped_fp8_<member>_<groups>`.
pub fn sm90_grouped_fp8_specs(groups: Groups) -> Vec<String> {
    SM90_GROUPED_FP8_MEMBERS
        .iter()
        .map(|(member, keys)| {
            format!(
                "name: sm90_grouped_fp8_{member}_{groups}, arch: sm_90a, mma: wgmma, dtype: e4m3, out: bf16, layout: rc, {keys}, quant: block, promote: 128, groups: {groups}",
                groups = groups.name(),
            )
        })
        .collect()
}

/// The specs of [`SM90_GROUPED_MEMBERS`] for one grouped layout, layout of A and B, and
/// 16-bit type (in and out), named `sm90_grouped_<member>_<dtype>_<layout>_<groups>`.
pub fn sm90_grouped_specs(groups: Groups, layout: Layout, dtype: DType) -> Vec<String> {
    SM90_GROUPED_MEMBERS
        .iter()
        .map(|(member, keys)| {
            format!(
                "name: sm90_grouped_{member}_{dtype}_{layout}_{groups}, arch: sm_90a, mma: wgmma, dtype: {dtype}, layout: {layout}, {keys}, groups: {groups}",
                dtype = dtype.name(),
                layout = layout.name(),
                groups = groups.name(),
            )
        })
        .collect()
}

/// One line of a grouped problem list (`shapes/moe.txt` format): `G ROWS N K DIST`.
#[derive(Clone, Debug, PartialEq)]
pub struct GroupedProblem {
    /// Experts.
    pub groups: u32,
    /// Routed rows in all (for `masked`, the padded buffer's `groups · cap`).
    pub rows: u32,
    pub n: u32,
    pub k: u32,
    pub distribution: Distribution,
}

/// How a problem's routed rows split over its experts.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Distribution {
    /// Every expert gets `rows / groups` (the first `rows % groups` one more).
    Balanced,
    /// Each row goes to an expert drawn uniformly.
    Random { seed: u64 },
    /// Each row goes to expert `i` with weight `(i + 1)^-s`, the experts shuffled by the seed.
    Zipf { s: f64, seed: u64 },
    /// The masked layout: each expert holds up to `cap` rows, its count uniform in `0..=cap`.
    Masked { cap: u32, seed: u64 },
}

impl GroupedProblem {
    /// Parses one line (a `#` starts a comment); `Ok(None)` for a blank or comment line.
    pub fn parse_line(line: &str) -> Result<Option<GroupedProblem>, String> {
        let text = line.split('#').next().unwrap_or("").trim();
        if text.is_empty() {
            return Ok(None);
        }
        let fields: Vec<&str> = text.split_whitespace().collect();
        let [groups, rows, n, k, distribution] = fields[..] else {
            return Err(format!(
                "`{text}`: a grouped problem is `G ROWS N K DIST`, {} fields given",
                fields.len()
            ));
        };
        let size = |name: &str, value: &str| {
            value.parse::<u32>().ok().filter(|&v| v > 0).ok_or_else(|| {
                format!(
                    "`{text}`: {name} `{value}` is not a size from 1 to {}",
                    u32::MAX
                )
            })
        };
        let problem = GroupedProblem {
            groups: size("G", groups)?,
            rows: size("ROWS", rows)?,
            n: size("N", n)?,
            k: size("K", k)?,
            distribution: Distribution::parse(distribution)
                .map_err(|why| format!("`{text}`: {why}"))?,
        };
        if let Distribution::Masked { cap, .. } = problem.distribution {
            if u64::from(cap) * u64::from(problem.groups) != u64::from(problem.rows) {
                return Err(format!(
                    "`{text}`: a masked problem's ROWS is G x CAP = {}",
                    u64::from(cap) * u64::from(problem.groups)
                ));
            }
        }
        Ok(Some(problem))
    }

    /// Every problem of a list, each error naming its line.
    pub fn parse_list(text: &str) -> Result<Vec<GroupedProblem>, String> {
        let mut problems = Vec::new();
        for (number, line) in text.lines().enumerate() {
            match GroupedProblem::parse_line(line) {
                Ok(Some(problem)) => problems.push(problem),
                Ok(None) => {}
                Err(why) => return Err(format!("line {}: {why}", number + 1)),
            }
        }
        Ok(problems)
    }

    /// The rows each expert gets, as the distribution draws them (the same numbers on every
    /// machine for a seed: [`SplitMix64`]).
    pub fn group_rows(&self) -> Vec<u32> {
        let groups = self.groups as usize;
        match self.distribution {
            Distribution::Balanced => {
                let (each, extra) = (self.rows / self.groups, self.rows % self.groups);
                (0..self.groups)
                    .map(|g| each + u32::from(g < extra))
                    .collect()
            }
            Distribution::Random { seed } => {
                let mut rng = SplitMix64::new(seed);
                let mut counts = vec![0u32; groups];
                for _ in 0..self.rows {
                    counts[rng.below(u64::from(self.groups)) as usize] += 1;
                }
                counts
            }
            Distribution::Zipf { s, seed } => {
                let mut rng = SplitMix64::new(seed);
                // Expert `order[i]` has the i-th largest weight.
                let mut order: Vec<usize> = (0..groups).collect();
                for i in (1..groups).rev() {
                    order.swap(i, rng.below(i as u64 + 1) as usize);
                }
                let mut cumulative = Vec::with_capacity(groups);
                let mut total = 0.0;
                for i in 0..groups {
                    total += (i as f64 + 1.0).powf(-s);
                    cumulative.push(total);
                }
                let mut counts = vec![0u32; groups];
                for _ in 0..self.rows {
                    let draw = rng.unit() * total;
                    let rank = cumulative.partition_point(|&c| c <= draw).min(groups - 1);
                    counts[order[rank]] += 1;
                }
                counts
            }
            Distribution::Masked { cap, seed } => {
                let mut rng = SplitMix64::new(seed);
                (0..self.groups)
                    .map(|_| rng.below(u64::from(cap) + 1) as u32)
                    .collect()
            }
        }
    }
}

impl Distribution {
    fn parse(text: &str) -> Result<Distribution, String> {
        let parts: Vec<&str> = text.split(':').collect();
        let seed = |value: &str| {
            value
                .parse::<u64>()
                .map_err(|_| format!("seed `{value}` is not a whole number"))
        };
        match parts[..] {
            ["balanced"] => Ok(Distribution::Balanced),
            ["random", s] => Ok(Distribution::Random { seed: seed(s)? }),
            ["zipf", exponent, s] => {
                let s_value = exponent
                    .parse::<f64>()
                    .ok()
                    .filter(|v| v.is_finite() && *v >= 0.0)
                    .ok_or_else(|| format!("zipf exponent `{exponent}` is not a number >= 0"))?;
                Ok(Distribution::Zipf {
                    s: s_value,
                    seed: seed(s)?,
                })
            }
            ["masked", cap, s] => Ok(Distribution::Masked {
                cap: cap
                    .parse::<u32>()
                    .ok()
                    .filter(|&c| c > 0)
                    .ok_or_else(|| format!("masked capacity `{cap}` is not a size from 1"))?,
                seed: seed(s)?,
            }),
            _ => Err(format!(
                "`{text}` is not balanced, random:SEED, zipf:S:SEED or masked:CAP:SEED"
            )),
        }
    }
}

impl fmt::Display for Distribution {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Distribution::Balanced => f.write_str("balanced"),
            Distribution::Random { seed } => write!(f, "random:{seed}"),
            Distribution::Zipf { s, seed } => write!(f, "zipf:{s}:{seed}"),
            Distribution::Masked { cap, seed } => write!(f, "masked:{cap}:{seed}"),
        }
    }
}

impl fmt::Display for GroupedProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} {} {} {}",
            self.groups, self.rows, self.n, self.k, self.distribution
        )
    }
}

/// SplitMix64 (Steele, Lea and Flood, 2014): a tiny generator whose every output is one
/// formula of the state, so a script in any language draws the same group sizes for a seed.
#[derive(Clone, Debug)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    pub fn new(seed: u64) -> SplitMix64 {
        SplitMix64 { state: seed }
    }

    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A draw below `bound` (≥ 1), by the high bits of a 128-bit product (no modulo bias worth
    /// the name at these bounds).
    pub fn below(&mut self, bound: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(bound)) >> 64) as u64
    }

    /// A draw in `[0, 1)` with 53 random bits.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// The rows each expert owns in the buffer, `start..end`, from what the device holds, clamped
/// so that a range never runs backwards, past the buffer, or into another expert's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupRows {
    /// Per expert: its first row and one past its last.
    pub ranges: Vec<(u32, u32)>,
}

impl GroupRows {
    /// The contiguous layout: expert `g` ends at `offsets[g]` and starts where expert `g - 1`
    /// ended (row 0 for the first). An end below the start (a decreasing or negative offset)
    /// makes the expert empty; an end past `buffer_rows` stops at it. Rows past the last
    /// expert's end belong to none and are left alone.
    pub fn contiguous(offsets: &[i32], buffer_rows: u32) -> GroupRows {
        let mut start = 0u32;
        let ranges = offsets
            .iter()
            .map(|&offset| {
                let end = (offset.max(0) as u32).clamp(start, buffer_rows.max(start));
                let range = (start, end);
                start = end;
                range
            })
            .collect();
        GroupRows { ranges }
    }

    /// The masked layout: expert `g` owns rows `g · max_rows ..` of which its first
    /// `counts[g]` (clamped to `0..=max_rows`) hold tokens.
    pub fn masked(counts: &[i32], max_rows: u32) -> GroupRows {
        GroupRows {
            ranges: counts
                .iter()
                .enumerate()
                .map(|(g, &count)| {
                    let start = g as u32 * max_rows;
                    (start, start + (count.max(0) as u32).min(max_rows))
                })
                .collect(),
        }
    }

    /// The contiguous offsets of these sizes (their prefix sums).
    pub fn offsets_of(sizes: &[u32]) -> Vec<i32> {
        sizes
            .iter()
            .scan(0i64, |end, &size| {
                *end += i64::from(size);
                Some(i32::try_from(*end).expect("a grouped buffer's rows fit in int32"))
            })
            .collect()
    }
}

/// One output tile of a grouped walk: expert `group`'s rows `row_start..row_end` (at most a
/// tile's height; a group's last tile may be shorter) by tile column `tile_col`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct GroupTile {
    pub group: u32,
    /// The tile's row-tile index inside its expert.
    pub group_tile_row: u32,
    pub row_start: u32,
    pub row_end: u32,
    pub tile_col: u32,
}

/// The tile space of a grouped product: every expert's row tiles, one expert after another,
/// by the column tiles of N.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupedTiles {
    rows: GroupRows,
    tile_m: u32,
    tiles_n: u32,
    /// Per expert, the row tiles of the experts before it and its own (a prefix sum, as the
    /// kernel builds it in shared memory from the device's offsets).
    row_tiles_through: Vec<u64>,
}

impl GroupedTiles {
    pub fn new(rows: GroupRows, tile_m: u32, n: u32, tile_n: u32) -> GroupedTiles {
        let tile_m = tile_m.max(1);
        let row_tiles_through = rows
            .ranges
            .iter()
            .scan(0u64, |through, &(start, end)| {
                *through += u64::from((end - start).div_ceil(tile_m));
                Some(*through)
            })
            .collect();
        GroupedTiles {
            rows,
            tile_m,
            tiles_n: n.div_ceil(tile_n.max(1)),
            row_tiles_through,
        }
    }

    /// Row tiles of every expert together.
    pub fn tile_rows(&self) -> u64 {
        self.row_tiles_through.last().copied().unwrap_or(0)
    }

    pub fn tiles_n(&self) -> u32 {
        self.tiles_n
    }

    /// Tiles of the whole walk.
    pub fn tiles(&self) -> u64 {
        self.tile_rows() * u64::from(self.tiles_n)
    }

    /// The expert and rows of the walk's row tile `tile_row` (below [`GroupedTiles::tile_rows`]):
    /// the first expert whose prefix passes it (a binary search, as the kernel's).
    pub fn row_tile(&self, tile_row: u64) -> (u32, u32, u32, u32) {
        let group = self
            .row_tiles_through
            .partition_point(|&through| through <= tile_row);
        let before = if group == 0 {
            0
        } else {
            self.row_tiles_through[group - 1]
        };
        let (start, end) = self.rows.ranges[group];
        let local = (tile_row - before) as u32;
        let row_start = start + local * self.tile_m;
        (
            group as u32,
            local,
            row_start,
            (row_start + self.tile_m).min(end),
        )
    }

    /// Tile `index` of the walk in `schedule`'s order (its bands over the experts' row tiles
    /// taken as one tall product's).
    pub fn tile_at(&self, schedule: Schedule, index: u32, order: BandOrder) -> GroupTile {
        let tile_rows = u32::try_from(self.tile_rows()).expect("a walk's row tiles fit 32 bits");
        let (tile_row, tile_col) = schedule.tile_at(index, tile_rows, self.tiles_n, order);
        let (group, group_tile_row, row_start, row_end) = self.row_tile(u64::from(tile_row));
        GroupTile {
            group,
            group_tile_row,
            row_start,
            row_end,
            tile_col,
        }
    }

    pub fn rows(&self) -> &GroupRows {
        &self.rows
    }
}

#[cfg(test)]
mod tests;
