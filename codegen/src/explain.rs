//! `gemm-codegen explain`: the numbers behind a spec, as text. Everything here is read from the
//! validated spec and its plan; ptxas's own resource line is appended when the tools exist.

use crate::plan::mma_sync::MmaSyncPlan;
use crate::plan::wgmma::descriptor::{Major, SmemDescriptor};
use crate::plan::wgmma::{BoxLoad, WgmmaPlan};
use crate::plan::{self, FamilyPlan, PlanCopy, SmemLayout};
use crate::sass::PtxasResources;
use gemm_dsl::family::wgmma::{WgmmaGeometry, WARPGROUP_THREADS};
use gemm_dsl::{Family, ValidSpec};
use std::fmt::Write;

/// Renders the explanation. `ptxas` is what ptxas reported for this kernel, or why it could
/// not be run.
pub fn explain(valid: &ValidSpec, ptxas: Result<&PtxasResources, &str>) -> String {
    let mut out = String::new();
    let spec = &valid.spec;
    let kernel_plan = plan::plan(valid);
    let _ = writeln!(out, "spec: {}", spec.to_spec_text());
    let _ = writeln!(out);
    match (&valid.family, &kernel_plan.family) {
        (Family::Simt(g), FamilyPlan::Simt(p)) => {
            let _ = writeln!(out, "family: SIMT f32 FFMA (mma: fma)");
            block_line(&mut out, spec.tile, g.threads, g.warps);
            let _ = writeln!(
                out,
                "  warp tile {}x{}, lanes 4x8, {}x{} accumulators per thread",
                g.warp_tile_m, g.warp_tile_n, g.thread_tile_m, g.thread_tile_n
            );
            let _ = writeln!(
                out,
                "  per stage each thread copies A {} x {vector} B and B {} x {vector} B ({})",
                g.a_copy.copies_per_thread,
                g.b_copy.copies_per_thread,
                spec.copy,
                vector = g.a_copy.vector_bytes,
            );
            budgets(&mut out, valid, ptxas);
            out.push_str(&timeline(&p.smem, p.copy));
            let _ = writeln!(out);
            let _ = writeln!(
                out,
                "shared-memory bank conflicts (bank = (addr >> 2) & 31; 16-byte accesses are served 8 lanes per phase):"
            );
            for report in p.bank_conflicts() {
                let _ = writeln!(out, "  {:<36} {}", report.access, verdict(report.degree));
            }
        }
        (Family::MmaSync(g), FamilyPlan::MmaSync(p)) => {
            let _ = writeln!(
                out,
                "family: Ampere tensor cores (mma: mma_sync), {} in, f32 accumulate, {} out",
                spec.dtype.name(),
                spec.out.name()
            );
            let _ = writeln!(out, "  {}", p.mma_instruction);
            block_line(&mut out, spec.tile, g.threads, g.warps);
            let _ = writeln!(
                out,
                "  warp tile {}x{} = {}x{} mma tiles of m{}n{}k{}, {} k steps per block tile, {} f32 accumulators per thread",
                g.warp_tile_m,
                g.warp_tile_n,
                g.m_frags,
                g.n_frags,
                g.shape.m,
                g.shape.n,
                g.shape.k,
                g.k_steps,
                g.accumulators()
            );
            use crate::plan::mma_sync::ReadKind;
            let load = |kind: ReadKind, loads: usize| match kind {
                ReadKind::Ldmatrix => format!("{loads} ldmatrix.x4"),
                ReadKind::LdmatrixTrans => format!("{loads} ldmatrix.x4.trans"),
                ReadKind::Scalar => {
                    format!("{loads} ld.shared.b32 (tf32 has no 32-bit ldmatrix.trans)")
                }
            };
            let first_step = &p.k_steps_plan[0];
            let a_load = load(p.a_read.kind, first_step.a_loads.len());
            let b_load = load(p.b_read.kind, first_step.b_loads.len());
            let _ = writeln!(
                out,
                "  per k step and warp: {a_load} (A), {b_load} (B), {} mma.sync",
                g.m_frags * g.n_frags
            );
            let _ = writeln!(
                out,
                "  per stage each thread copies A {} x {vector} B and B {} x {vector} B ({})",
                g.a_copy.copies_per_thread,
                g.b_copy.copies_per_thread,
                spec.copy,
                vector = g.a_copy.vector_bytes,
            );
            let layout = |s: &crate::plan::swizzle::SmemSwizzle| {
                if s.xor_bits > 0 && s.line_shift > 0 {
                    format!(
                        "rows of {} B, 16-byte chunk ^= (row >> {}) & {}",
                        s.row_bytes, s.line_shift, s.xor_mask
                    )
                } else if s.xor_bits > 0 {
                    format!(
                        "rows of {} B, 16-byte chunk ^= row & {} per 128-byte line",
                        s.row_bytes, s.xor_mask
                    )
                } else if s.pitch > s.row_bytes {
                    format!("rows of {} B padded to {} B", s.row_bytes, s.pitch)
                } else {
                    format!("rows of {} B, no swizzle", s.row_bytes)
                }
            };
            let _ = writeln!(
                out,
                "  shared layout (swizzle: {}): A {}; B {}",
                spec.swizzle,
                layout(&p.a_src.copy.swizzle),
                layout(&p.b_src.copy.swizzle)
            );
            let pairs = if p.pack_instruction.is_empty() {
                "f32 pairs".to_string()
            } else {
                format!("{} (round to nearest even)", p.pack_instruction)
            };
            let _ = match &p.epilogue.staged {
                Some(e) => writeln!(
                    out,
                    "  epilogue: {pairs} into 2 shared slabs per warp (16 rows of {} B each), read back as 16-byte vectors, st.global.v4 of whole {}-byte row segments",
                    e.pitch,
                    e.vectors_per_row * 16
                ),
                None => writeln!(
                    out,
                    "  epilogue: {pairs}, st.global straight from the registers ({} B per store; warp tile rows are not whole 16-byte vectors the lanes can share)",
                    p.out_bytes * 2
                ),
            };
            if let Some(walk) = &p.persistent {
                let _ = writeln!(
                    out,
                    "  schedule: persistent, grid = min(tiles, SMs x {} block(s)/SM); each block walks tiles blockIdx.x, + gridDim.x, .. in raster bands {} tiles across {} advancing along {}; after a tile's main loop, bar.sync, then the next tile's prologue copies, then this tile's epilogue",
                    valid.occupancy.blocks_per_sm,
                    walk.group,
                    walk.across.param.to_uppercase(),
                    walk.along.param.to_uppercase()
                );
            }
            budgets(&mut out, valid, ptxas);
            if p.smem.pipelined && p.copy == PlanCopy::CpAsync {
                out.push_str(&mma_ring_timeline(p));
            } else {
                out.push_str(&timeline(&p.smem, p.copy));
            }
            let _ = writeln!(out);
            let _ = writeln!(
                out,
                "shared-memory bank conflicts (bank = (addr >> 2) & 31; worst over all warps and instructions;"
            );
            let _ = writeln!(
                out,
                "16-byte accesses and each ldmatrix 8x8 matrix are served 8 lanes per phase, 4-byte accesses 32):"
            );
            for report in p.bank_conflicts() {
                let _ = writeln!(out, "  {:<36} {}", report.access, verdict(report.degree));
            }
            let _ = writeln!(out);
            let _ = writeln!(
                out,
                "first bank of each lane, warp 0, first instruction (tile offset -> bank; | separates phases):"
            );
            for (access, bytes, addresses) in p.first_phases() {
                let lanes_per_phase = (128 / bytes) as usize;
                let phases: Vec<String> = addresses
                    .chunks(lanes_per_phase)
                    .map(|phase| {
                        phase
                            .iter()
                            .map(|&a| crate::plan::bank(a).to_string())
                            .collect::<Vec<_>>()
                            .join(" ")
                    })
                    .collect();
                let _ = writeln!(out, "  {access}:");
                let _ = writeln!(out, "    {}", phases.join(" | "));
            }
        }
        (Family::Wgmma(g), FamilyPlan::Wgmma(p)) => {
            wgmma_family(&mut out, valid, g, p);
            budgets(&mut out, valid, ptxas);
            out.push_str(&wgmma_ring_timeline(p));
        }
        _ => unreachable!("the plan's family is the spec's family"),
    }
    out
}

/// The Hopper family: warpgroup roles, the register split, the TMA boxes, the decoded
/// descriptors and the epilogue.
fn wgmma_family(out: &mut String, valid: &ValidSpec, g: &WgmmaGeometry, p: &WgmmaPlan) {
    let spec = &valid.spec;
    let _ = writeln!(
        out,
        "family: Hopper (mma: wgmma), {} in, f32 accumulate, {} out",
        spec.dtype.name(),
        spec.out.name()
    );
    let _ = writeln!(out, "  {}", p.wgmma_instruction);
    let _ = writeln!(
        out,
        "  block tile {}, {} threads = 1 producer warpgroup (one thread issues the TMA) + {} consumer warpgroup(s)",
        spec.tile, g.threads, g.consumers
    );
    let _ = writeln!(
        out,
        "  each consumer: {} rows = {} x m64n{}, {} k steps per k tile, {} f32 accumulators per thread",
        g.rows_per_consumer,
        g.m_wgmmas,
        g.n,
        g.k_steps,
        g.accumulators()
    );
    match &p.register_split {
        Some(split) => {
            let used = WARPGROUP_THREADS * split.producer
                + WARPGROUP_THREADS * g.consumers * split.consumer;
            let _ = writeln!(
                out,
                "  registers: .maxnreg {} (the even split); setmaxnreg.dec {} in the producer, setmaxnreg.inc {} in the consumers: {} x {} + {} x {} = {used} of 65536",
                p.max_registers,
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
                p.max_registers
            );
        }
    }
    let boxes = |name: char, loads: &[BoxLoad], outer: u32, inner: u32| {
        format!(
            "{name} {} box(es) of {outer} rows x {inner} {} ({} B each)",
            loads.len(),
            spec.dtype.name(),
            loads.first().map_or(0, |l| l.bytes)
        )
    };
    let _ = writeln!(
        out,
        "  TMA per stage: {}, {}; arrive.expect_tx {} B",
        boxes('A', &p.a_loads, p.a_box.outer, p.a_box.inner),
        boxes('B', &p.b_loads, p.b_box.outer, p.b_box.inner),
        p.ring.expect_tx_bytes
    );
    for (operand, descriptor, major, per_step) in [
        (
            'A',
            p.a_descriptor,
            p.a_major,
            p.k_steps
                .get(1)
                .map_or(0, |s| s.mmas[0].a_offset_units * 16),
        ),
        (
            'B',
            p.b_descriptor,
            p.b_major,
            p.k_steps.get(1).map_or(0, |s| s.b_offset_units * 16),
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
    let pairs = if p.epilogue.pack_instruction.is_empty() {
        "f32 pairs".to_string()
    } else {
        format!("{} pairs", p.epilogue.pack_instruction)
    };
    let _ = match &p.epilogue.tma {
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
    if let Some(c) = &p.cluster {
        let _ = writeln!(
            out,
            "  cluster: {} blocks share {}'s tiles; block rank r loads rows {}r..{}r+{} of each {} box ({} B) and multicasts them (mask {:#b}); empty barriers count the consumer warps of both blocks",
            c.blocks,
            c.shared.to_uppercase(),
            c.slice_rows,
            c.slice_rows,
            c.slice_rows - 1,
            c.shared.to_uppercase(),
            c.slice_bytes,
            c.cta_mask
        );
    }
    if let Some(walk) = &p.persistent {
        let _ = writeln!(
            out,
            "  schedule: persistent, grid = min(tiles, resident blocks); producer and consumers walk {}x{} tiles ({}) {}, + {}, .. in raster bands {} tiles across {} advancing along {}; the ring runs on across tiles, so the next tile's loads land while the consumers store this one",
            p.walk_tile_m,
            p.walk_tile_n,
            if p.cluster.is_some() { "one per cluster" } else { "one per block" },
            p.tile_index_register,
            if p.cluster.is_some() { "%nclusterid.x" } else { "%nctaid.x" },
            walk.group,
            walk.across.param.to_uppercase(),
            walk.along.param.to_uppercase()
        );
    }
    if let Some(stream_k) = &p.stream_k {
        let _ = writeln!(
            out,
            "  stream-K tail: where the tiles left after the whole rounds are at most half the grid (the grid grows to up to one block per k tile), the blocks share their k tiles; a share that starts inside a tile leaves its f32 sums in the workspace ({} B per block: {} B of sums per consumer, then the flags) for the block that computed the tile's first k tile, which adds them in block order and stores C",
            stream_k.record_bytes, stream_k.slot_bytes
        );
    }
}

/// The ring over time: for each fill of the sequence, its slot and lap, the parities the
/// producer and the consumers wait for, and when the slot is released.
fn wgmma_ring_timeline(p: &WgmmaPlan) -> String {
    let ring = &p.ring;
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

fn verdict(degree: u32) -> String {
    if degree <= 1 {
        "conflict-free".to_string()
    } else {
        format!("{degree}-way conflict")
    }
}

fn block_line(out: &mut String, tile: gemm_dsl::Tile, threads: u32, warps: gemm_dsl::Grid2) {
    let _ = writeln!(
        out,
        "  block tile {tile}, {threads} threads = {} warps as {warps}",
        warps.count()
    );
}

/// The family-independent middle of an explanation: shared-memory ledger, register estimate
/// next to what ptxas reported, and occupancy.
fn budgets(out: &mut String, valid: &ValidSpec, ptxas: Result<&PtxasResources, &str>) {
    let _ = writeln!(out);
    let _ = writeln!(out, "{}", valid.smem);
    let _ = writeln!(out);
    let _ = writeln!(out, "{}", valid.registers);
    match ptxas {
        Ok(resources) => {
            let _ = writeln!(out, "  ptxas: {resources}");
        }
        Err(reason) => {
            let _ = writeln!(out, "  ptxas: not run ({reason})");
        }
    }
    let _ = writeln!(out);
    let _ = writeln!(out, "{}", valid.occupancy);
    let _ = writeln!(out);
}

/// The main loop as a table: which tile each step loads into which stage, which stage it
/// computes, and where the waits and barriers sit.
fn timeline(ring: &SmemLayout, copy: PlanCopy) -> String {
    let mut out = String::new();
    let stages = ring.stages;
    let copy_name = match copy {
        PlanCopy::Sync => "ld.global -> registers -> st.shared",
        PlanCopy::CpAsync => "cp.async",
    };
    let _ = writeln!(out, "pipeline: {stages} stage(s), {copy_name}");
    if !ring.pipelined {
        let _ = writeln!(
            out,
            "  every step: load tile k -> stage 0; {}bar.sync; compute stage 0; bar.sync",
            if copy == PlanCopy::CpAsync {
                "commit; wait_group 0; "
            } else {
                ""
            }
        );
        return out;
    }
    let _ = writeln!(
        out,
        "  prologue: tiles 0..{} -> stages 0..{}{}",
        ring.lookahead - 1,
        ring.lookahead - 1,
        if copy == PlanCopy::CpAsync {
            ", one commit group each"
        } else {
            ", then bar.sync"
        }
    );
    let _ = writeln!(
        out,
        "  {:>5}  {:<44} {:<14}",
        "step", "before the math", "math"
    );
    let steps = stages + 2;
    for k in 0..steps {
        let load_tile = k + ring.lookahead;
        let load_stage = load_tile % stages;
        let compute_stage = k % stages;
        let before = match copy {
            PlanCopy::CpAsync => format!(
                "wait_group {}; bar.sync; tile {load_tile} -> stage {load_stage}",
                ring.groups_in_flight
            ),
            PlanCopy::Sync => format!("tile {load_tile} -> registers"),
        };
        let math = format!("stage {compute_stage} (tile {k})");
        let after = match copy {
            PlanCopy::CpAsync => String::new(),
            PlanCopy::Sync => format!("; registers -> stage {load_stage}; bar.sync"),
        };
        let _ = writeln!(out, "  {k:>5}  {before:<44} {math}{after}");
    }
    let _ = writeln!(
        out,
        "  {:>5}  (the ring repeats every {stages} steps)",
        "..."
    );
    out
}

/// The tensor-core cp.async ring, k step by k step: fragments run one k step ahead of the
/// math, so the wait and barrier sit before a tile's last k step, and the next tile's first
/// fragments load behind them while that step computes.
fn mma_ring_timeline(p: &MmaSyncPlan) -> String {
    let ring = &p.smem;
    let stages = ring.stages;
    let last = p.k_steps - 1;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "pipeline: {stages} stages, cp.async; {} k step(s) per tile, fragments one k step ahead of the math{}",
        p.k_steps,
        if p.prefetch_across_barrier {
            " (2 register sets)"
        } else {
            " within a tile"
        }
    );
    let _ = writeln!(
        out,
        "  prologue: tiles 0..{} -> stages 0..{}, one commit group each; wait_group {}; bar.sync; fragments of tile 0 k step 0",
        ring.lookahead - 1,
        ring.lookahead - 1,
        ring.groups_in_flight
    );
    let steps_before_last = match last {
        0 => None,
        1 => Some("k step 0".to_string()),
        _ => Some(format!("k steps 0..{}", last - 1)),
    };
    if let Some(steps) = steps_before_last {
        let _ = writeln!(
            out,
            "  {steps}: fragments of the next k step, then the math of this one"
        );
    }
    let next_fragments = if p.prefetch_across_barrier {
        "fragments of tile {next} k step 0, then the math"
    } else {
        "the math, then fragments of tile {next} k step 0 (odd k steps: no spare register set)"
    };
    let _ = writeln!(
        out,
        "  {:>4}  {:<32} then, at k step {last}",
        "tile", "k step 0 first copies"
    );
    for tile in 0..stages + 2 {
        let load_tile = tile + ring.lookahead;
        let copies = format!("tile {load_tile} -> stage {}, commit", load_tile % stages);
        let next = tile + 1;
        let barrier = format!(
            "wait_group {}; bar.sync; {}",
            ring.groups_in_flight,
            next_fragments.replace("{next}", &format!("{next} (stage {})", next % stages))
        );
        let _ = writeln!(out, "  {tile:>4}  {copies:<32} {barrier}");
    }
    let _ = writeln!(
        out,
        "  {:>4}  (tile k computes from stage k mod {stages}; the barrier before its last k step also retires the reads of stage k - 1, refilled at the next tile's k step 0)",
        "..."
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn explains_ledger_timeline_and_banks() {
        let valid = gemm_dsl::check_str("name: k, tile: 128x128x16, stages: 3").unwrap();
        let text = explain(&valid, Err("tools not installed"));
        assert!(text.contains("3 stages x 16384 B"));
        assert!(text.contains("wait_group 1; bar.sync; tile 2 -> stage 2"));
        assert!(
            text.contains("A fragment read (ld.shared.v4)       conflict-free"),
            "{text}"
        );
        assert!(text.contains("ptxas: not run (tools not installed)"));
    }

    #[test]
    fn explains_a_stream_k_tail() {
        let valid = gemm_dsl::check_str(
            "name: k, arch: sm_90a, mma: wgmma, schedule: persistent(tail = stream_k)",
        )
        .unwrap();
        let text = explain(&valid, Err("tools not installed"));
        assert!(text.contains("131088 B per block"), "{text}");
        // setmaxnreg allocates every thread the even split: one block per SM.
        assert!(text.contains("occupancy: 1 block(s)/SM"), "{text}");
    }

    #[test]
    fn explains_the_hopper_family() {
        let valid = gemm_dsl::check_str("name: k, arch: sm_90a, mma: wgmma").unwrap();
        let text = explain(&valid, Err("tools not installed"));
        for needle in [
            "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16",
            "setmaxnreg.dec 40 in the producer, setmaxnreg.inc 232 in the consumers",
            "A 1 box(es) of 128 rows x 64 bf16 (16384 B each), B 4 box(es) of 64 rows x 64 bf16 (8192 B each); arrive.expect_tx 49152 B",
            "descriptor A (stage 0, first consumer, k step 0): 0x4000004000010000 = start +0 B, LBO 16 B, SBO 1024 B, 128-byte swizzle; K-major (imm-trans 0), +32 B per k step",
            "LBO 8192 B, SBO 1024 B, 128-byte swizzle; N-major (imm-trans 1), +2048 B per k step",
            "wait empty[0] parity 1 (fresh)",
            "wait full[0] parity 1",
            "4 stages x 49152 B",
        ] {
            assert!(text.contains(needle), "{needle}\n{text}");
        }
    }

    #[test]
    fn explains_the_tensor_core_family() {
        let valid =
            gemm_dsl::check_str("name: k, mma: mma_sync, tile: 128x128x32, stages: 3").unwrap();
        let text = explain(&valid, Err("tools not installed"));
        assert!(text.contains("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"));
        assert!(text.contains("3 stages x 16384 B"), "{text}");
        assert!(
            text.contains("tile 2 -> stage 2, commit")
                && text.contains("wait_group 1; bar.sync; fragments of tile 1 (stage 1) k step 0"),
            "{text}"
        );
        for access in [
            "A fragment read (ldmatrix.x4)",
            "B fragment read (ldmatrix.x4.trans)",
        ] {
            assert!(
                text.lines()
                    .any(|line| line.contains(access) && line.ends_with("conflict-free")),
                "{text}"
            );
        }
    }
}
