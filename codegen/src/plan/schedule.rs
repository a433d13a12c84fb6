//! How a block finds its output tiles: one tile per block from the grid, or a persistent
//! block's walk over raster bands ([`TileWalk`]). Shared by the families whose specs take
//! `schedule:`.

use super::batch::WALK_BATCH_REGISTER;
use super::divide::ConstDivisor;
use gemm_dsl::{Raster, Schedule, Tile};
use serde::Serialize;

/// A persistent block's walk over the output tiles, [`Schedule::batched_tile_at`] in PTX
/// terms: the raster bands are `group` tiles across and advance along the `along` dimension.
///
/// [`Schedule::batched_tile_at`]: gemm_dsl::Schedule::batched_tile_at
#[derive(Clone, Debug, Serialize)]
pub struct TileWalk {
    pub group: u32,
    /// A whole band's division by `group`, without a division instruction (`None` for bands
    /// one tile wide).
    pub group_divide: Option<ConstDivisor>,
    /// The walk covers the tiles of every product of a strided batch, one product after
    /// another: its batch-count parameter, and the register that receives a tile's product.
    pub batch_param: &'static str,
    pub batch_register: &'static str,
    /// Dimension the bands advance along: its kernel parameter (`m` or `n`), block tile size
    /// and the register that receives the tile's first element index.
    pub along: WalkDim,
    pub across: WalkDim,
    /// The special register that counts the walkers (blocks, or clusters where the walk's
    /// tiles are clusters' tiles): where a band's tiles all fit in one round of them, the band
    /// may go along first ([`Schedule::band_order`]).
    ///
    /// [`Schedule::band_order`]: gemm_dsl::Schedule::band_order
    pub walkers: &'static str,
}

#[derive(Clone, Debug, Serialize)]
pub struct WalkDim {
    pub param: &'static str,
    pub tile: u32,
    /// The tile count's division by `tile`, without a division instruction.
    pub divide: ConstDivisor,
    pub block_register: &'static str,
    /// Added to the dimension before dividing by the tile, so a partial last tile counts:
    /// `tile - 1` for kernels that compute partial tiles, 0 for whole-tile kernels.
    pub round_up: u32,
    /// The register that holds the dimension's tile count, where the kernel counts them
    /// itself instead of dividing its parameter (a grouped walk's row tiles).
    pub tiles_register: Option<&'static str>,
}

impl TileWalk {
    /// The walk of a persistent schedule over `tile`-sized output tiles; `None` for one tile
    /// per block. `partial_tiles`: the kernel computes partial edge tiles, so tile counts
    /// round up. `clusters`: the walkers are clusters, each taking one `tile`.
    pub fn of(
        schedule: Schedule,
        tile: Tile,
        partial_tiles: bool,
        clusters: bool,
    ) -> Option<TileWalk> {
        let Schedule::Persistent { raster, group, .. } = schedule else {
            return None;
        };
        let dim = |param, tile: u32, block_register| WalkDim {
            param,
            tile,
            divide: ConstDivisor::new(tile),
            block_register,
            round_up: if partial_tiles { tile - 1 } else { 0 },
            tiles_register: None,
        };
        let m = dim("m", tile.m, "%block_m");
        let n = dim("n", tile.n, "%block_n");
        let (along, across) = match raster {
            Raster::M => (m, n),
            Raster::N => (n, m),
        };
        Some(TileWalk {
            group,
            group_divide: (group >= 2).then(|| ConstDivisor::new(group)),
            batch_param: "batch",
            batch_register: WALK_BATCH_REGISTER,
            along,
            across,
            walkers: if clusters {
                "%nclusterid.x"
            } else {
                "%nctaid.x"
            },
        })
    }

    /// The walk with its row tiles counted in `register` rather than from `m`: a grouped
    /// walk's rows are every expert's row tiles one after another.
    pub fn with_row_tiles_in(mut self, register: &'static str) -> TileWalk {
        for dim in [&mut self.along, &mut self.across] {
            if dim.param == "m" {
                dim.tiles_register = Some(register);
            }
        }
        self
    }
}
