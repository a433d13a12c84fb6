//! The Hopper family's `explain` section.

use super::descriptor::{Major, SmemDescriptor};
use super::write::{input_types, wgmma_instructions};
use super::{BoxLoad, WgmmaPlan};
use crate::explain::common::{bands, budgets};
use crate::sass::PtxasResources;
use gemm_dsl::family::wgmma::{WgmmaGeometry, WARPGROUP_THREADS};
use gemm_dsl::{DType, ValidSpec};
use std::fmt::Write;

impl WgmmaPlan {
    pub fn explain(
        &self,
        out: &mut String,
        valid: &ValidSpec,
        ptxas: Result<&PtxasResources, &str>,
    ) {
        wgmma_family(out, valid, &self.geometry, self);
        budgets(out, valid, ptxas);
        out.push_str(&wgmma_ring_timeline(self));
    }
}

/// The Hopper family: warpgroup roles, the register split, the TMA boxes, the decoded
/// descriptors and the epilogue.
fn wgmma_family(out: &mut String, valid: &ValidSpec, g: &WgmmaGeometry, p: &WgmmaPlan) {
    let spec = &valid.spec;
    let _ = writeln!(
        out,
        "family: Hopper (mma: wgmma), {} in, f32 accumulate, {} out",
        input_types(spec.dtype, spec.b_dtype),
        spec.out.name()
    );
    let _ = writeln!(out, "  {}", wgmma_instructions(&p.main_loop).join(" + "));
    let _ = writeln!(
        out,
        "  block tile {}, {} threads = 1 producer warpgroup (one thread issues the TMA) + {} consumer warpgroup(s)",
        spec.tile, g.threads, g.consumers
    );
    let _ = writeln!(
        out,
        "  each consumer: {} rows = {} x {}, {} k steps per k tile, {} f32 accumulators per thread",
        g.rows_per_consumer,
        g.m_wgmmas,
        row_of_64(g),
        g.k_steps,
        g.accumulators()
    );
    let (main_loop, launch, schedule) = (&p.main_loop, &p.launch, &p.schedule);
    match &launch.register_split {
        Some(split) => {
            let used = WARPGROUP_THREADS * split.producer
                + WARPGROUP_THREADS * g.consumers * split.consumer;
            let _ = writeln!(
                out,
                "  registers: .maxnreg {} (the even split); setmaxnreg.dec {} in the producer, setmaxnreg.inc {} in the consumers: {} x {} + {} x {} = {used} of 65536",
                launch.max_registers,
                split.producer,
                split.consumer,
                WARPGROUP_THREADS,
                split.producer,
                WARPGROUP_THREADS * g.consumers,
                split.consumer
            );
        }
        None => {
            let _ = writeln!(
                out,
                "  registers: .maxnreg {} for every warpgroup (one consumer: no split needed)",
                launch.max_registers
            );
        }
    }
    let boxes = |name: char, dtype: DType, loads: &[BoxLoad], outer: u32, inner: u32| {
        format!(
            "{name} {} box(es) of {outer} rows x {inner} {} ({} B each)",
            loads.len(),
            dtype.name(),
            loads.first().map_or(0, |l| l.bytes)
        )
    };
    let _ = writeln!(
        out,
        "  TMA per stage: {}, {}; arrive.expect_tx {} B",
        boxes(
            'A',
            spec.dtype,
            &main_loop.a_loads,
            launch.a_box.outer,
            launch.a_box.inner
        ),
        boxes(
            'B',
            spec.b_dtype,
            &main_loop.b_loads,
            launch.b_box.outer,
            launch.b_box.inner
        ),
        main_loop.ring.guard.expect_tx_bytes
    );
    for (operand, descriptor, major, per_step) in [
        (
            'A',
            main_loop.a_descriptor,
            main_loop.a_major,
            main_loop
                .k_steps
                .get(1)
                .map_or(0, |s| s.mmas[0].a_offset_units * 16),
        ),
        (
            'B',
            main_loop.b_descriptor,
            main_loop.b_major,
            main_loop
                .k_steps
                .get(1)
                .map_or(0, |s| s.mmas[0].b_offset_units * 16),
        ),
    ] {
        let bits = descriptor.encode();
        let decoded = SmemDescriptor::decode(bits);
        let _ = writeln!(
            out,
            "  descriptor {operand} (stage 0, first consumer, k step 0): {bits:#018x} = start +{} B, LBO {} B, SBO {} B, {}-byte swizzle; {} (imm-trans {}), +{per_step} B per k step",
            decoded.start_bytes,
            decoded.leading_bytes,
            decoded.stride_bytes,
            decoded.swizzle_bytes,
            match major {
                Major::K => "K-major",
                Major::MN if operand == 'A' => "M-major",
                Major::MN => "N-major",
            },
            major.transpose_flag()
        );
    }
    if let Some(promotion) = &main_loop.promotion {
        let _ = writeln!(
            out,
            "  promotion: every {} k tile(s) ({} k) each consumer waits for its wgmmas and adds the {} partial sums into as many f32 registers; the next interval starts them afresh (scale-d false), so the tensor cores' short accumulation spans one interval",
            promotion.k_tiles,
            promotion.k_tiles * main_loop.block_k,
            promotion.accumulators
        );
        if let Some(block) = &promotion.block {
            let _ = writeln!(
                out,
                "  block scales: per k tile the producer copies the tile's rows of A scales (one bulk copy of up to {} B, counted by the full barrier's bytes) and {} B scale(s) (cp.async, the full barrier's second arrival) into a {} B slot beside the stage; each consumer thread reads its {} row scales before the tile's wgmmas and promotes with fma by row scale x column-block scale ({} products)",
                block.block_m * 4,
                block.col_blocks,
                block.slot_bytes,
                block.rows.len(),
                block.factors.len()
            );
        }
    }
    let pairs = if p.epilogue.packs_pairs {
        format!("cvt.rn.{}x2.f32 pairs", p.epilogue.out.name())
    } else {
        "f32 pairs".to_string()
    };
    let _ = match p.epilogue.path.tma() {
        Some(t) => writeln!(
            out,
            "  epilogue: tma; per consumer, {} boxes of {}x{} per tile: {pairs} by stmatrix.x4 ({} per warp per box) into 2 buffers of {} B ({}B swizzle) in turn; thread 0 issues each box's TMA store (clipped at the matrix edge) once the previous box's store has read its buffer, and the warps go on without waiting for the stores",
            t.boxes.len(),
            t.box_rows,
            t.box_cols,
            t.matrices_per_box,
            t.buffer_bytes,
            t.swizzle_bytes
        ),
        None => writeln!(
            out,
            "  epilogue: direct; {pairs} stored straight from the registers; tiles over the matrix edge store element by element under bounds checks (any M, N, K >= 1)"
        ),
    };
    if let Some(loads) = &p.epilogue.c_in_loads {
        let _ = writeln!(
            out,
            "  C-in: each box's C-in comes by TMA ({} B, the map c_in_map) into the buffer the box is staged in, counted by that buffer's mbarrier; the warps read it back with ldmatrix at the addresses their stmatrix writes D to and apply alpha*acc + beta*C there; boxes 0 and 1 load when the epilogue starts, box b + 1 at box b's start into the buffer box b - 1's store has read",
            loads.box_bytes
        );
    }
    if let Some(c) = &schedule.cluster {
        let shared = if c.shares_a { 'A' } else { 'B' };
        let _ = writeln!(
            out,
            "  cluster: {} blocks share {}'s tiles; block rank r loads rows {}r..{}r+{} of each {} box ({} B) and multicasts them (mask {:#b}); empty barriers count the consumer warps of both blocks; a block leaves once its producer has seen every slot released (the peer's releases arrive on its barriers), with no cluster barrier at the exit",
            c.blocks,
            shared,
            c.slice_rows,
            c.slice_rows,
            c.slice_rows - 1,
            shared,
            c.slice_bytes,
            c.cta_mask
        );
    }
    if let Some(walk) = &schedule.walk {
        let _ = writeln!(
            out,
            "  schedule: persistent, grid = min(tiles, resident blocks); producer and consumers walk {}x{} tiles ({}) {}, + {}, .. in {}; the ring runs on across tiles, so the next tile's loads land while the consumers store this one",
            schedule.walk_tile_m,
            schedule.walk_tile_n,
            if schedule.cluster.is_some() { "one per cluster" } else { "one per block" },
            if schedule.cluster.is_some() { "%clusterid.x" } else { "%ctaid.x" },
            walk.walkers,
            bands(walk)
        );
    }
    if let Some(pingpong) = &schedule.pingpong {
        let _ = writeln!(
            out,
            "  ping-pong: consumer c computes tiles c, c + 2, .. of the block's walk, each whole, and skips the other's k tiles in the ring; turns at the tensor cores: consumer c waits on named barrier {} + c ({} threads) before its k tiles (consumer 0's first tile at once) and, once its last wgmma group retires, arrives on the other's if the walk holds the other's next tile, then stores its tile while the other's wgmmas run",
            pingpong.first_turn_barrier, pingpong.turn_threads
        );
    }
    if let Some(stream_k) = &schedule.stream_k {
        let _ = writeln!(
            out,
            "  stream-K tail: where the tiles left after the whole rounds are at most half the grid (the grid grows to up to one block per k tile), the blocks share their k tiles, at most {} blocks a tile; a share that starts inside a tile leaves its f32 sums in the workspace ({} B per block: {} B of sums per consumer, then the flags) for the block that computed the tile's first k tile, which adds them in block order and stores C",
            stream_k.max_walkers_per_tile, stream_k.record_bytes, stream_k.slot_bytes
        );
    }
}

/// The ring over time: for each fill of the sequence, its slot and lap, the parities the
/// producer and the consumers wait for, and when the slot is released.
fn wgmma_ring_timeline(p: &WgmmaPlan) -> String {
    let ring = &p.main_loop.ring;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "ring: {} stages; fill i of the k-tile sequence uses slot i mod {}, lap i / {}",
        ring.stages, ring.stages, ring.stages
    );
    let _ = writeln!(
        out,
        "  {:>4}  {:>4}  {:>3}  {:<46} {:<34} release",
        "fill", "slot", "lap", "producer", "consumers"
    );
    for fill in 0..u64::from(2 * ring.stages + 2) {
        let f = ring.fill(fill);
        let producer = format!(
            "wait empty[{}] parity {}{}; expect_tx; TMA",
            f.slot,
            f.empty_parity(),
            if f.lap == 0 { " (fresh)" } else { "" }
        );
        let consumers = format!("wait full[{}] parity {}; wgmmas", f.slot, f.full_parity());
        let _ = writeln!(
            out,
            "  {fill:>4}  {:>4}  {:>3}  {producer:<46} {consumers:<34} after fill {}'s wait_group 1",
            f.slot,
            f.lap,
            fill + 1
        );
    }
    let _ = writeln!(
        out,
        "  ...   (a tile's last fill is released after wait_group 0, before its epilogue)"
    );
    out
}

/// One row of 64 of a consumer's tile: `m64n256`, or its two wgmmas where BN is over 256,
/// `(m64n192 + m64n128)`.
fn row_of_64(g: &WgmmaGeometry) -> String {
    let pieces: Vec<String> = g
        .n_pieces()
        .iter()
        .map(|p| format!("m64n{}", p.n))
        .collect();
    match pieces.as_slice() {
        [one] => one.clone(),
        many => format!("({})", many.join(" + ")),
    }
}
