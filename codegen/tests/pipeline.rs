//! The tensor-core cp.async ring, checked on the emitted PTX itself: the prologue, every trip
//! through the main loop of a K of several ring turns and the epilogue (for a persistent
//! schedule: of two output tiles, the second one's copies issued during the first one's
//! epilogue) are replayed as one thread's sequence of copies, commits, waits, barriers and
//! fragment loads (every thread runs the same sequence; guarded copies follow their guard),
//! and every shared-memory access is checked against the barriers around it. Each K is
//! replayed three ways: an interior block, a block whose partial last k tile goes through the
//! bounded copies, and an edge block whose every tile does. A missing or misplaced
//! `wait_group`/`bar.sync` fails here, without a GPU.

use codegen::catalog::CATALOG;
use codegen::plan::mma_sync::MmaSyncPlan;
use codegen::plan::{self, FamilyPlan};

/// Where one stage's contents stand.
#[derive(Clone, Debug, Default)]
struct Stage {
    /// Tile held (or being copied in) and the commit group that copies it.
    tile: Option<usize>,
    group: Option<usize>,
    /// Barrier epoch of the latest fragment load of the current tile.
    last_read: Option<usize>,
}

struct Replay {
    stage_bytes: u32,
    ring_bytes: u32,
    loads_per_k_step: usize,
    k_steps: usize,
    /// The simulated problem's K tiles, and the kernel's counters and copy guard.
    k_tiles: u32,
    /// Tiles from this one on go through the bounded copies (`u32::MAX`: none).
    k_bounded: u32,
    k_tile: u32,
    k_load: u32,
    p_load: bool,
    /// Copies issued so far: the i-th non-empty group holds the i-th K tile of the sequence
    /// (output tile after output tile).
    tiles_copied: usize,
    /// K tiles of earlier output tiles, and fragment loads of the current one.
    tiles_before: usize,
    loads_in_output_tile: usize,
    /// Whether the epilogue's slabs lie over the ring.
    slabs_over_ring: bool,
    stages: Vec<Stage>,
    /// Per committed group: the barrier epoch from which its data is visible to every thread
    /// (set by the first barrier after a `wait_group` that retired it).
    visible_from: Vec<Option<usize>>,
    waited: Vec<bool>,
    open_group_writes: Vec<usize>,
    epoch: usize,
    read_stage: u32,
    write_stage: u32,
    dst_stage: u32,
    src_stage: u32,
}

impl Replay {
    fn stage_of(&self, offset: u32) -> usize {
        (offset / self.stage_bytes) as usize
    }

    fn rotate(&self, value: u32, by: u32) -> u32 {
        (value + by) % self.ring_bytes
    }

    fn step(&mut self, line: &str, spec: &str) {
        let line = line.trim();
        let operand = |index: usize| -> &str {
            line.split(['\t', ','])
                .map(str::trim)
                .filter(|part| !part.is_empty())
                .nth(index)
                .unwrap_or("")
                .trim_end_matches(';')
        };
        // A bounded copy's own predicate implies %p_load; which of its bytes it copies does not
        // matter to the ring.
        let (guarded, line) = match line
            .strip_prefix("@%p_load ")
            .or_else(|| line.strip_prefix("@%p_copy "))
        {
            Some(rest) => (true, rest),
            None => (false, line),
        };
        if guarded && !self.p_load {
            return;
        }
        if line.starts_with("mov.u32\t%k_tile, 0;") {
            // A new output tile: its loads count from K tile 0 again.
            self.k_tile = 0;
            if self.loads_in_output_tile > 0 {
                self.tiles_before += self.k_tiles as usize;
                self.loads_in_output_tile = 0;
            }
        } else if line.starts_with("add.u32\t%k_tile, %k_tile, 1;") {
            self.k_tile += 1;
        } else if line.starts_with("add.u32\t%k_load, %k_tile,") {
            self.k_load = self.k_tile + operand(3).parse::<u32>().unwrap();
        } else if line.starts_with("mov.u32\t%k_load,") {
            self.k_load = operand(2).parse().unwrap();
        } else if line.starts_with("setp.lt.u32\t%p_load, %k_load, %k_tiles;") {
            self.p_load = self.k_load < self.k_tiles;
        } else if line.starts_with("setp.lt.u32\t%p_load, %k_load, %k_fast;") {
            self.p_load = self.k_load < self.k_tiles.min(self.k_bounded);
        } else if line.starts_with("setp.gt.u32\t%p_load, %k_tiles,") {
            self.p_load = self.k_tiles > operand(3).parse::<u32>().unwrap();
        } else if line.starts_with("mov.u32\t%read_stage,") {
            self.read_stage = operand(2).parse().unwrap();
        } else if line.starts_with("mov.u32\t%write_stage,") {
            self.write_stage = operand(2).parse().unwrap();
        } else if line.starts_with("add.u32\t%read_stage, %read_stage,") {
            self.read_stage = self.rotate(self.read_stage, operand(3).parse().unwrap());
        } else if line.starts_with("add.u32\t%write_stage, %write_stage,") {
            self.write_stage = self.rotate(self.write_stage, operand(3).parse().unwrap());
        } else if line.starts_with("add.u32\t%a_dst") || line.starts_with("add.u32\t%b_dst") {
            self.dst_stage = match operand(3) {
                "%write_stage" => self.write_stage,
                immediate => immediate.parse().unwrap(),
            };
        } else if line.starts_with("add.u32\t%a_src") || line.starts_with("add.u32\t%b_src") {
            assert_eq!(operand(3), "%read_stage", "{spec}: {line}");
            self.src_stage = self.read_stage;
        } else if line.contains("cp.async.cg.shared.global") || line.contains("cp.async.ca.shared")
        {
            let stage = self.stage_of(self.dst_stage);
            let group = self.visible_from.len();
            if self.open_group_writes.is_empty() {
                self.tiles_copied += 1;
            }
            if self.stages[stage].group != Some(group) {
                // The first copy of a new tile into this stage: every read of the tile it held
                // must be ordered before it by a barrier.
                if let Some(read) = self.stages[stage].last_read {
                    assert!(
                        read < self.epoch,
                        "{spec}: stage {stage} is refilled in barrier epoch {} while tile {:?} was read in the same epoch",
                        self.epoch,
                        self.stages[stage].tile
                    );
                }
                self.stages[stage] = Stage {
                    tile: Some(self.tiles_copied - 1),
                    group: Some(group),
                    last_read: None,
                };
            }
            self.open_group_writes.push(stage);
        } else if line.starts_with("cp.async.commit_group") {
            self.visible_from.push(None);
            self.waited.push(false);
            self.open_group_writes.clear();
        } else if let Some(n) = line.strip_prefix("cp.async.wait_group\t") {
            let pending: usize = n.trim_end_matches(';').parse().unwrap();
            let committed = self.waited.len();
            for group in 0..committed.saturating_sub(pending) {
                self.waited[group] = true;
            }
        } else if line.starts_with("bar.sync") {
            self.epoch += 1;
            for (group, visible) in self.visible_from.iter_mut().enumerate() {
                if self.waited[group] && visible.is_none() {
                    *visible = Some(self.epoch);
                }
            }
        } else if line.starts_with("ldmatrix") || line.starts_with("ld.shared.b32") {
            let stage = self.stage_of(self.src_stage);
            let k_tile = self.loads_in_output_tile / self.loads_per_k_step / self.k_steps;
            self.loads_in_output_tile += 1;
            if k_tile >= self.k_tiles as usize {
                // The last trip's look-ahead into the K tile past the end: dead registers,
                // but the read still has to be retired before the stage is refilled.
                self.stages[stage].last_read = Some(self.epoch);
                return;
            }
            let want_tile = self.tiles_before + k_tile;
            let held = &self.stages[stage];
            assert_eq!(
                held.tile,
                Some(want_tile),
                "{spec}: fragment load {} of the output tile reads stage {stage}",
                self.loads_in_output_tile - 1
            );
            let group = held.group.unwrap();
            assert!(
                self.visible_from[group].is_some_and(|from| from <= self.epoch),
                "{spec}: tile {want_tile} is read from stage {stage} before a wait and a barrier made it complete"
            );
            self.stages[stage].last_read = Some(self.epoch);
        } else if line.starts_with("st.shared") && self.slabs_over_ring {
            // Epilogue staging over the ring: after every copy and every read of the ring.
            assert!(
                self.waited.iter().all(|&w| w),
                "{spec}: copies still pending"
            );
            for (index, stage) in self.stages.iter().enumerate() {
                assert!(
                    stage.last_read.is_none_or(|read| read < self.epoch),
                    "{spec}: epilogue overwrites stage {index} in the epoch it was read"
                );
                assert!(
                    stage
                        .group
                        .is_none_or(|g| self.visible_from[g].is_some_and(|v| v <= self.epoch)),
                    "{spec}: epilogue overwrites stage {index} before its copy is complete"
                );
            }
        }
    }
}

fn section<'a>(ptx: &'a str, from: &str, to: &str) -> Vec<&'a str> {
    let start = ptx.find(from).unwrap_or_else(|| panic!("no `{from}`"));
    let end = start + ptx[start..].find(to).unwrap_or_else(|| panic!("no `{to}`"));
    ptx[start..end].lines().collect()
}

fn replay(spec: &str) {
    let emitted = codegen::emit_str(spec).unwrap_or_else(|e| panic!("{spec}: {e:?}"));
    replay_ptx(spec, emitted.ptx());
}

/// Replays `ptx`, the kernel of `spec` (possibly edited), for Ks of two to three ring turns:
/// every residue of the K tile count modulo the stage count, so the tile past the end (which
/// the last trip looks ahead into) sits in every stage once.
fn replay_ptx(spec: &str, ptx: &str) {
    let valid = gemm_dsl::check_str(spec).unwrap();
    let FamilyPlan::MmaSync(p) = plan::plan(&valid).family else {
        panic!("{spec}: not a tensor-core spec");
    };
    assert!(
        p.smem.pipelined && p.copy == plan::PlanCopy::CpAsync,
        "{spec}"
    );
    for k_tiles in 2 * p.smem.stages..3 * p.smem.stages {
        // An interior block, a partial last k tile, an edge block.
        for k_bounded in [u32::MAX, k_tiles - 1, 0] {
            replay_k(spec, ptx, &p, k_tiles, k_bounded);
        }
    }
}

/// Runs `lines` through the replay, taking the way into the bounded copies (and back) where
/// the kernel would.
fn run(r: &mut Replay, lines: &[&str], bounded: &[&str], spec: &str) {
    for line in lines {
        if line.trim() == "@%p_bounded bra.uni\t$L_bounded_copy;" {
            if r.k_load >= r.k_bounded {
                for line in bounded {
                    r.step(line, spec);
                }
            }
        } else {
            r.step(line, spec);
        }
    }
}

fn replay_k(spec: &str, ptx: &str, p: &MmaSyncPlan, k_tiles: u32, k_bounded: u32) {
    let step = &p.k_steps_plan[0];
    let mut r = Replay {
        stage_bytes: p.smem.stage_bytes,
        ring_bytes: p.smem.ring_bytes,
        loads_per_k_step: step.a_loads.len() + step.b_loads.len(),
        k_steps: p.k_steps as usize,
        k_tiles,
        k_bounded,
        k_tile: 0,
        k_load: 0,
        p_load: false,
        tiles_copied: 0,
        tiles_before: 0,
        loads_in_output_tile: 0,
        slabs_over_ring: p.epilogue.staged.as_ref().is_some_and(|e| e.over_ring()),
        stages: vec![Stage::default(); p.smem.stages as usize],
        visible_from: Vec::new(),
        waited: Vec::new(),
        open_group_writes: Vec::new(),
        epoch: 0,
        read_stage: 0,
        write_stage: 0,
        dst_stage: 0,
        src_stage: 0,
    };
    let first_head = section(ptx, "\tsetp.eq.u32\t%p_empty", "$L_main_loop:");
    let body = section(ptx, "$L_main_loop:", "@%p_more bra");
    let tail = section(ptx, "$L_epilogue:", "ret;");
    let bounded = section(ptx, "$L_bounded_copy:", "bra.uni\t$L_copied;");
    // A persistent block's second output tile starts at `$L_tile`, its first copies issued
    // during the first tile's epilogue.
    let (output_tiles, next_head) = match p.persistent {
        Some(_) => (2, section(ptx, "$L_tile:", "$L_main_loop:")),
        None => (1, Vec::new()),
    };
    for output_tile in 0..output_tiles {
        let head = if output_tile == 0 {
            &first_head
        } else {
            &next_head
        };
        run(&mut r, head, &bounded, spec);
        for _ in 0..r.k_tiles {
            run(&mut r, &body, &bounded, spec);
        }
        // Every k step of every K tile, and the look-ahead into the tile past the end.
        assert_eq!(
            r.loads_in_output_tile,
            (r.k_tiles as usize * r.k_steps + 1) * r.loads_per_k_step,
            "{spec}: output tile {output_tile} of K = {k_tiles} tiles"
        );
        run(&mut r, &tail, &bounded, spec);
        let stores = tail
            .iter()
            .filter(|line| line.trim().starts_with("st.shared"))
            .count();
        assert!(
            stores > 0,
            "{spec}: the epilogue is staged through shared memory"
        );
    }
}

#[test]
fn catalog_rings_order_every_shared_access() {
    let mut count = 0;
    for entry in CATALOG.iter().filter(|e| {
        e.spec.contains("mma: mma_sync")
            && !e.spec.contains("copy: sync")
            && !e.spec.contains("stages: 1,")
    }) {
        replay(entry.spec);
        count += 1;
    }
    assert!(count >= 6);
}

#[test]
fn every_depth_and_k_step_count_orders_every_shared_access() {
    for stages in 2..=6 {
        for (dtype, tile, warps) in [
            ("bf16", "128x128x16", "2x2"), // one k step per tile
            ("bf16", "128x128x32", "2x2"),
            ("bf16", "64x64x64", "2x2"),
            ("tf32", "64x64x8", "2x2"), // one k step per tile
            ("tf32", "128x128x16", "2x2"),
            ("f16", "128x256x32", "2x4"),
        ] {
            replay(&format!(
                "name: k, mma: mma_sync, dtype: {dtype}, tile: {tile}, warps: {warps}, stages: {stages}"
            ));
        }
    }
}

#[test]
fn persistent_schedules_order_the_next_tiles_copies_after_every_read() {
    for stages in 2..=4 {
        for (dtype, tile, warps, raster) in [
            ("bf16", "128x256x32", "2x4", "m"),
            ("bf16", "128x128x16", "2x2", "n"), // one k step per tile
            ("tf32", "128x128x16", "2x2", "m"),
            ("f16", "64x64x64", "2x2", "n"),
        ] {
            replay(&format!(
                "name: k, arch: sm_90, mma: mma_sync, dtype: {dtype}, tile: {tile}, warps: {warps}, \
                 stages: {stages}, schedule: persistent(raster = {raster}, group = 4)"
            ));
        }
    }
}

#[test]
#[should_panic(expected = "is refilled in barrier epoch")]
fn a_persistent_kernel_without_its_tile_end_barrier_fails_the_replay() {
    let spec = "name: k, arch: sm_90, mma: mma_sync, dtype: bf16, tile: 128x128x32, stages: 3, \
                schedule: persistent";
    let ptx = codegen::emit_str(spec).unwrap().ptx().to_string();
    let tail = ptx.find("$L_epilogue:").unwrap();
    let barrier = tail + ptx[tail..].find("\tbar.sync\t0;").unwrap();
    let edited = format!(
        "{}{}",
        &ptx[..barrier],
        &ptx[barrier + "\tbar.sync\t0;".len()..]
    );
    replay_ptx(spec, &edited);
}

#[test]
#[should_panic(expected = "reads stage")]
fn bounded_copies_that_copy_nothing_fail_the_replay() {
    let spec = "name: k, mma: mma_sync, dtype: bf16, tile: 128x128x32, warps: 2x2, stages: 3";
    let ptx = codegen::emit_str(spec).unwrap().ptx().to_string();
    let start = ptx.find("$L_bounded_copy:").unwrap();
    let bounded: String = ptx[start..]
        .lines()
        .filter(|line| !line.contains("cp.async.cg.shared.global"))
        .map(|line| format!("{line}\n"))
        .collect();
    replay_ptx(spec, &format!("{}{bounded}", &ptx[..start]));
}
