//! The stream-K walk's plan: the workspace record of each block and a thread's partial
//! sums in it.

use gemm_dsl::family::wgmma::{WgmmaGeometry, WARPGROUP_THREADS};
use gemm_dsl::StreamKSplit;
use serde::Serialize;

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
    pub(super) fn of(g: &WgmmaGeometry, walks: bool) -> ScheduleKind {
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

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PartialVector {
    pub offset: u32,
    /// The four accumulator registers, `%accN`.
    pub registers: Vec<String>,
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
                    registers: (4 * i..4 * i + 4).map(|r| format!("%acc{r}")).collect(),
                })
                .collect(),
        })
    }
}
