//! Promotion of fp8 partial sums (`promote: K`) and block scales (`quant: block`).
//!
//! The fp8 wgmma keeps about 14 bits of its running sums, so a long K loses precision. With a
//! promotion interval, each interval of k tiles starts the accumulators afresh (scale-d false)
//! and, once its wgmmas have retired, adds them into a second set of f32 registers, the
//! promoted sums; after the last k tile the sums move back into the accumulators, so the
//! stream-K fixup and the epilogue read them where they always do. With `quant: block` the
//! interval is one k tile of 128 and each accumulator is multiplied by its row's A scale and
//! its column block's B scale as it is added (`fma`): the scales of DeepSeek-V3's 1x128 and
//! 128x128 blocks. They travel with the operands: for each k tile the producer copies the
//! tile's BM rows of A scales (one bulk copy: A's scale lines hold a multiple of 4 rows) and its
//! B scales (`cp.async`) into a slot beside the stage, both counted by the stage's full
//! barrier; the consumers read their rows' scales from the slot before the tile's wgmmas.
//! Copies by the consumers themselves, shared through a barrier at every promotion, ran a
//! fifth slower (H100, 2026-11-25: `results/fp8-2026-11-25/`).

use super::epilogue::WgmmaEpilogue;
use gemm_dsl::family::wgmma::WgmmaGeometry;
use gemm_dsl::{GemmSpec, Quant};
use serde::Serialize;

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Promotion {
    /// k tiles per interval.
    pub k_tiles: u32,
    /// Accumulators, and promoted sums, per consumer thread.
    pub accumulators: u32,
    pub block: Option<BlockScales>,
}

/// A consumer thread's block scales: one A scale per distinct row it holds, one B scale per
/// 128-column block its tile spans, and the product of each pair it needs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct BlockScales {
    /// The thread's rows, as offsets from its first row.
    pub rows: Vec<u32>,
    /// B's column blocks the tile spans from its first column's (`block_n / 128`): `BN / 128`,
    /// or 1 where BN divides 128 (the tile lies within one).
    pub col_blocks: u32,
    /// `%bs_f{i} = %bs_a{row} · %bs_b{col}` for each pair an accumulator needs.
    pub factors: Vec<ScaleFactor>,
    /// Each accumulator and the factor it is promoted with.
    pub terms: Vec<ScaledTerm>,
    /// Where the slots of scales start, in bytes from the ring's base (after the barriers):
    /// one slot of `slot_bytes` per stage, the tile's `block_m` rows' A scales then its B
    /// scales.
    pub slots_offset: u32,
    pub slot_bytes: u32,
    pub block_m: u32,
    /// Bytes into a slot of the thread's row scales (from its first row's) and of the tile's
    /// B scales.
    pub a_offsets: Vec<u32>,
    pub b_offsets: Vec<u32>,
    /// `log2(128)` and `128 - 1`: a k coordinate or column over a block, and a count of them
    /// rounded up.
    pub block_shift: u32,
    pub block_round_up: u32,
    /// A's scale lines: M rounded up by adding this and masking with `a_line_mask`.
    pub a_line_round_up: u32,
    pub a_line_mask: i32,
    /// `groups:`: a tile starts at any row and multiplies its expert's B, so the copy of its
    /// A scales starts at the 16-byte unit holding its first row (`copied_a_rows` rows), a
    /// consumer reads from `row & a_row_in_unit_mask` rows into the slot, and B's scales are
    /// the expert's (each expert's after the one before).
    pub grouped: bool,
    pub copied_a_rows: u32,
    pub a_row_in_unit_mask: u32,
    /// The register that holds a consumer thread's byte offset of its rows in a slot: set
    /// once, or (grouped) at each tile.
    pub a_read_register: &'static str,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct ScaleFactor {
    pub row: usize,
    pub col: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct ScaledTerm {
    pub acc: u32,
    pub factor: usize,
}

impl Promotion {
    /// The plan of geometry `g`'s promotion; block scales' slots start `slots_offset` bytes
    /// from the ring's base.
    pub fn of(
        g: &WgmmaGeometry,
        spec: &GemmSpec,
        epilogue: &WgmmaEpilogue,
        slots_offset: u32,
    ) -> Option<Promotion> {
        let k_tiles = g.promote_k_tiles?;
        let grouped = spec.groups.is_grouped();
        let block = (spec.quant == Quant::Block).then(|| {
            let elements: Vec<_> = epilogue.fused_segments().into_iter().flatten().collect();
            let mut rows: Vec<u32> = elements.iter().map(|e| e.row).collect();
            rows.sort_unstable();
            rows.dedup();
            // A thread's columns start within its first 8, so column offset / 128 is the block
            // of the tile's column blocks it lies in.
            let col_blocks = g.block_scale_col_blocks();
            let mut factors: Vec<ScaleFactor> = Vec::new();
            let mut terms: Vec<ScaledTerm> = elements
                .iter()
                .map(|e| {
                    let factor = ScaleFactor {
                        row: rows.binary_search(&e.row).expect("every row is listed"),
                        col: e.col / Quant::BLOCK,
                    };
                    let index = factors
                        .iter()
                        .position(|&f| f == factor)
                        .unwrap_or_else(|| {
                            factors.push(factor);
                            factors.len() - 1
                        });
                    ScaledTerm {
                        acc: e.acc,
                        factor: index,
                    }
                })
                .collect();
            terms.sort_by_key(|t| t.acc);
            BlockScales {
                col_blocks,
                factors,
                terms,
                a_offsets: rows.iter().map(|row| row * 4).collect(),
                b_offsets: (0..col_blocks)
                    .map(|c| (g.block_scale_a_rows + c) * 4)
                    .collect(),
                block_shift: Quant::BLOCK.trailing_zeros(),
                block_round_up: Quant::BLOCK - 1,
                a_line_round_up: Quant::A_LINE_MULTIPLE - 1,
                a_line_mask: -(Quant::A_LINE_MULTIPLE as i32),
                grouped,
                copied_a_rows: g.block_scale_a_rows,
                a_row_in_unit_mask: Quant::A_LINE_MULTIPLE - 1,
                a_read_register: if grouped { "%bs_tile_read" } else { "%bs_read" },
                slots_offset,
                slot_bytes: g.block_scale_slot_bytes(),
                block_m: g.tile.m,
                rows,
            }
        });
        Some(Promotion {
            k_tiles,
            accumulators: g.accumulators(),
            block,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_spec;

    #[test]
    fn each_accumulator_is_scaled_by_its_row_and_column_block() {
        let (valid, g) = test_spec("dtype: e4m3, tile: 128x128x128, quant: block");
        let plan = super::super::plan(&valid, &g);
        let promotion = plan.main_loop.promotion.expect("quant: block promotes");
        assert_eq!(promotion.k_tiles, 1);
        let block = promotion.block.expect("block scales");
        // One wgmma row of 64 per consumer: rows 0 and 8 of the thread; one block of columns.
        assert_eq!((block.rows.as_slice(), block.col_blocks), (&[0, 8][..], 1));
        assert_eq!(block.factors.len(), 2);
        assert_eq!(block.terms.len() as u32, g.accumulators());
        // m64nN: accumulator 4j + 2h + e holds row 8h, column 8j + e.
        for term in &block.terms {
            let h = (term.acc % 4) / 2;
            let factor = block.factors[term.factor];
            assert_eq!((block.rows[factor.row], factor.col), (8 * h, 0));
        }
        // A tile within one block of B's columns.
        let (valid, g) = test_spec("dtype: e4m3, tile: 128x64x128, swizzle: 64B, quant: block");
        let block = super::super::plan(&valid, &g)
            .main_loop
            .promotion
            .unwrap()
            .block
            .unwrap();
        assert_eq!(block.col_blocks, 1);
        // Promotion alone keeps no scales.
        let (valid, g) = test_spec("dtype: e4m3, tile: 128x128x128, quant: tensor, promote: 256");
        let promotion = super::super::plan(&valid, &g).main_loop.promotion.unwrap();
        assert_eq!((promotion.k_tiles, promotion.block), (2, None));
    }

    /// Consumers read block scales from the slot with their own loads, so every consumer
    /// thread releases it; kernels whose slots only wgmma reads keep one arrival a warp.
    #[test]
    fn block_scale_slots_are_released_by_every_reader() {
        use super::super::SlotRelease;
        for (text, release, arrivals) in [
            ("quant: block", SlotRelease::EachThread, 2 * 128),
            ("quant: tensor, promote: 128", SlotRelease::EachWarp, 2 * 4),
            (
                "quant: block, cluster: 2x1, copy: tma(multicast = 2), schedule: persistent",
                SlotRelease::EachThread,
                2 * 2 * 128,
            ),
        ] {
            let (valid, g) = test_spec(&format!(
                "dtype: e4m3, tile: 128x128x128, stages: 4, {text}"
            ));
            let main_loop = super::super::plan(&valid, &g).main_loop;
            assert_eq!(main_loop.slot_release, release, "{text}");
            assert_eq!(
                main_loop.slot_release_each_thread,
                release == SlotRelease::EachThread
            );
            assert_eq!(main_loop.ring.guard.empty_arrivals, arrivals, "{text}");
        }
    }
}
