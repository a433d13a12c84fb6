//! The schedule's plan: how blocks (or clusters) take their output tiles, the ping-pong
//! consumers' turns, and the stream-K tail's workspace record and partial sums.

use super::copy::ClusterPlan;
use super::grouped::{GroupedWalk, ROW_TILES_REGISTER};
use crate::plan::batch::{BatchPlan, WALK_BATCH_REGISTER};
use crate::plan::schedule::TileWalk;
use gemm_dsl::family::wgmma::{WgmmaGeometry, WARPGROUP_THREADS};
use gemm_dsl::{GemmSpec, StreamKSplit, Tile};
use serde::Serialize;

/// How the kernel's blocks take their output tiles, and what the walk needs.
#[derive(Clone, Debug, Serialize)]
pub struct SchedulePlan {
    /// Which entry template writes the kernel.
    #[serde(skip)]
    pub kind: ScheduleKind,
    /// The persistent walk over the output tiles; `None` for one tile per block.
    pub walk: Option<TileWalk>,
    /// The output tiles a persistent block (or cluster) walks: one tile, or the cluster's.
    pub walk_tile_m: u32,
    pub walk_tile_n: u32,
    /// A two-block cluster that multicasts its shared operand.
    pub cluster: Option<ClusterPlan>,
    /// The product of a strided batch a tile belongs to: its index is always in `%batch`
    /// (from `%ctaid.z`, or from the tile walk), since it is a TMA coordinate too.
    pub batch: BatchPlan,
    /// `consumers: pingpong`: alternate tiles, turns at the tensor cores.
    pub pingpong: Option<PingPong>,
    /// `tail = stream_k`: the tail's split along K and the workspace the blocks meet in.
    pub stream_k: Option<StreamK>,
    /// `groups:`: the walk runs over every expert's row tiles.
    pub grouped: Option<GroupedWalk>,
}

impl SchedulePlan {
    /// `tables_offset`: where a grouped walk's tables may start in shared memory.
    pub(super) fn new(g: &WgmmaGeometry, spec: &GemmSpec, tables_offset: u32) -> SchedulePlan {
        let (walk_tile_m, walk_tile_n) = match g.cluster {
            Some(c) => (spec.tile.m * c.shape.rows, spec.tile.n * c.shape.cols),
            None => (spec.tile.m, spec.tile.n),
        };
        let walk_tile = Tile {
            m: walk_tile_m,
            n: walk_tile_n,
            k: spec.tile.k,
        };
        let grouped = GroupedWalk::of(spec, g.threads, tables_offset);
        let walk = TileWalk::of(spec.schedule, walk_tile, true, g.cluster.is_some()).map(|walk| {
            match grouped {
                Some(_) => walk.with_row_tiles_in(ROW_TILES_REGISTER),
                None => walk,
            }
        });
        SchedulePlan {
            kind: ScheduleKind::of(g, walk.is_some()),
            walk,
            walk_tile_m,
            walk_tile_n,
            cluster: g.cluster.map(|c| ClusterPlan::new(c, g, spec)),
            batch: BatchPlan {
                index: WALK_BATCH_REGISTER,
                ..BatchPlan::new(
                    spec.schedule,
                    spec.dtype.size_bytes(),
                    spec.out.size_bytes(),
                )
            },
            pingpong: PingPong::of(g),
            stream_k: StreamK::of(g),
            grouped,
        }
    }
}

/// How the kernel's blocks take their output tiles; each has its own entry template
/// (`templates/wgmma/kernel/`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScheduleKind {
    /// One output tile per block, from the grid.
    TilePerBlock,
    /// Each block (or cluster) walks the output tiles; its consumers split each tile's rows.
    Persistent,
    /// The persistent walk with two consumers that take alternate tiles ([`PingPong`]).
    PingPong,
    /// The persistent walk with its leftover tiles split along K ([`StreamK`]).
    StreamK,
}

impl ScheduleKind {
    fn of(g: &WgmmaGeometry, walks: bool) -> ScheduleKind {
        match (walks, g.pingpong, g.stream_k) {
            (false, _, _) => ScheduleKind::TilePerBlock,
            (true, true, _) => ScheduleKind::PingPong,
            (true, false, true) => ScheduleKind::StreamK,
            (true, false, false) => ScheduleKind::Persistent,
        }
    }
}

/// A stream-K walk (`schedule: persistent(.., tail = stream_k)`). The tiles of the whole
/// rounds go whole, as in any persistent walk; the `T mod grid` tiles left over are split
/// along K where they are at most half the grid (more would keep most walkers busy anyway,
/// and the split's partial sums cost more than the idle ones): with `U` their k tiles in
/// walk order, walker `w` (block, or cluster) takes positions `[w·U / grid, (w+1)·U / grid)`,
/// one unit per tile it touches. A unit that
/// starts inside its tile writes its accumulators to the walker's record in the workspace
/// and raises its consumer's flag; the unit that starts the tile (its *finisher*) waits for
/// the flags of the walkers after it that share the tile, adds their sums in walker order
/// (so results do not depend on timing), clears the flags and stores C. Only a walker's
/// first tail unit can start inside a tile and only its last can finish one, so no walker
/// waits before it has written what others wait for: with the whole grid resident, the walk
/// cannot deadlock.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct StreamK {
    /// The most walkers one leftover tile is split over ([`StreamKSplit::MAX_WALKERS_PER_TILE`]).
    pub max_walkers_per_tile: u32,
    /// Workspace bytes per block: `consumers` slots of partial sums, then the flags.
    pub record_bytes: u32,
    /// One consumer warpgroup's slot: every thread's accumulators.
    pub slot_bytes: u32,
    /// Where the record's flags start (one 32-bit flag per consumer).
    pub flags_offset: u32,
    /// Bytes from one of a thread's 16-byte vectors to its next: a warpgroup's 128 threads
    /// store each vector side by side, so a warp's stores and loads are 512 contiguous bytes.
    pub vector_stride_bytes: u32,
    /// A thread's accumulators as 16-byte vectors, vector `i` at `i x vector_stride_bytes`.
    pub vectors: Vec<PartialVector>,
}

/// Ping-pong consumers (`consumers: pingpong`): consumer `c` takes tiles `c, c + 2, ..` of
/// its block's persistent walk, each whole, so its epilogue runs while the other consumer's
/// wgmmas run. The ring holds the walk's k tiles in order, so a consumer skips the other's
/// k tiles in it. Turns at the tensor cores are an ordered pair of named barriers: a consumer
/// waits on its own before its k tiles (except consumer 0's first), and once its k tiles have
/// retired arrives on the other's where the walk holds the other's next tile. The turn also
/// keeps each consumer's ring waits within one lap of the producer, as the parity waits need:
/// a consumer starts waiting on its tile's first slot only after every earlier slot was
/// waited for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PingPong {
    /// Consumer `c` waits on named barrier `first_turn_barrier + c`.
    pub first_turn_barrier: u32,
    /// The two turn barriers' ids added: a consumer's own subtracted from it is the other's.
    pub turn_barrier_sum: u32,
    /// The threads of one turn barrier: the waiting warpgroup and the arriving one.
    pub turn_threads: u32,
}

impl PingPong {
    /// Named barriers 1 and 2 are the consumers' own (the TMA-store epilogue's).
    pub const FIRST_TURN_BARRIER: u32 = 3;

    pub(super) fn of(g: &WgmmaGeometry) -> Option<PingPong> {
        g.pingpong.then_some(PingPong {
            first_turn_barrier: Self::FIRST_TURN_BARRIER,
            turn_barrier_sum: 2 * Self::FIRST_TURN_BARRIER + 1,
            turn_threads: 2 * WARPGROUP_THREADS,
        })
    }
}

/// One of a thread's 16-byte vectors of partial sums: four accumulators from
/// `first_accumulator`, at `offset` in the consumer's slot.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PartialVector {
    pub offset: u32,
    pub first_accumulator: u32,
}

impl StreamK {
    pub(super) fn of(g: &WgmmaGeometry) -> Option<StreamK> {
        let vector_stride_bytes = WARPGROUP_THREADS * 16;
        g.stream_k.then(|| StreamK {
            max_walkers_per_tile: StreamKSplit::MAX_WALKERS_PER_TILE,
            record_bytes: g.workspace_bytes_per_block(),
            slot_bytes: g.partial_slot_bytes(),
            flags_offset: g.consumers * g.partial_slot_bytes(),
            vector_stride_bytes,
            vectors: (0..g.accumulators() / 4)
                .map(|i| PartialVector {
                    offset: i * vector_stride_bytes,
                    first_accumulator: 4 * i,
                })
                .collect(),
        })
    }
}
