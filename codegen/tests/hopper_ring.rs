//! Pipeline proofs of the Hopper family's stage ring, on the emitted PTX itself.
//!
//! The ring's protocol is read out of each kernel's text: the mbarrier init counts, the bytes
//! the producer announces (`arrive.expect_tx`) and the boxes its TMA loads bring (from the
//! kernel's tensor-map parameters, multicast or not), the parity each side waits for, when the
//! consumers release a slot (after the next k tile's `wgmma.wait_group 1`, or the last after
//! `wait_group 0`) and on which blocks' barriers. A model of the cluster's blocks then runs
//! that protocol over several output tiles (at least three laps of the ring) under many
//! interleavings, with mbarriers as the PTX ISA defines them (phases, pending arrivals,
//! transaction bytes) and TMA loads landing whenever they like. It fails on a deadlock, on a
//! load landing in a slot some consumer warp still reads, and on a consumer reading a slot
//! before all of its fill's bytes landed. A block of a cluster leaves only when no load or
//! remote release is still on its way to it: releases to a peer travel, and land whenever
//! they like. Ping-pong kernels (`consumers: pingpong`) run their two consumer warpgroups on
//! alternate units, each skipping the other's fills in the ring and waiting for its turn (a
//! named barrier the other arrives on once its unit's wgmmas retired): without the turn, a
//! warpgroup waiting a lap or more ahead of the producer would pass on a phase of the same
//! parity. Each check has a negative case: a broken variant of the PTX is caught.

use gemm_codegen::{Emitted, ParamKind};
use std::collections::HashMap;

/// The ring protocol as one kernel's PTX writes it.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Protocol {
    stages: u32,
    full_init: u32,
    empty_init: u32,
    expect_tx: u32,
    /// Bytes the producer's own (unicast) loads bring into its block's stage per fill, and
    /// bytes its multicast loads bring into every block's stage.
    unicast_bytes: u32,
    multicast_bytes: u32,
    /// Blocks of a cluster, consumer warps per block.
    blocks: u32,
    consumer_warps: u32,
    /// The producer waits for parity `lap + 1` (the phase before the lap's), the consumers
    /// for `lap`; false where the PTX waits for the other parity.
    producer_waits_previous_phase: bool,
    consumers_wait_lap_phase: bool,
    /// A consumer warp releases a fill after its next fill's `wait_group 1` (true), or right
    /// after committing the fill's own wgmmas (false: the wgmmas may still read it).
    releases_after_retirement: bool,
    /// Releases arrive on the peer blocks' empty barriers too.
    releases_remote: bool,
    /// Ping-pong: the consumer warpgroups take alternate units.
    pingpong: bool,
    /// Ping-pong: a warpgroup waits for its turn before a unit's first fill (all but the
    /// first warpgroup's first unit), and hands the turn over after its unit's last fill.
    waits_for_turn: bool,
    hands_over_turn: bool,
    /// Ping-pong: after its unit, a warpgroup steps its ring position over the other's unit.
    skips_other_units: bool,
    /// A cluster's producer, after its last fill, waits for this many slots' releases (as if
    /// to fill them again) before its block leaves.
    drain_slots: u32,
    /// Every block leaves through a cluster barrier (whose release arrival orders the
    /// threads' remote releases before it).
    exit_barrier: bool,
}

impl Protocol {
    /// Consumer warps that read (and release) one fill.
    fn warps_per_fill(&self) -> u32 {
        if self.pingpong {
            self.consumer_warps / 2
        } else {
            self.consumer_warps
        }
    }
}

/// The operand's tensor-map box bytes from the kernel's parameters, by map register.
fn box_bytes(emitted: &Emitted) -> HashMap<String, u32> {
    emitted
        .params()
        .iter()
        .filter_map(|param| match param.kind {
            ParamKind::TensorMap(tile) => Some((
                format!("%{}", param.name),
                tile.inner * tile.outer * emitted.spec().dtype.size_bytes(),
            )),
            _ => None,
        })
        .collect()
}

/// The number after the last comma of an instruction line (`..., 8;`).
fn last_number(line: &str) -> u32 {
    line.trim_end_matches(';')
        .rsplit(',')
        .next()
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no number at the end of `{line}`"))
}

fn protocol(emitted: &Emitted) -> Protocol {
    protocol_of(emitted, emitted.ptx())
}

/// The protocol of `ptx`, the kernel of `emitted` or an edited copy of it.
fn protocol_of(emitted: &Emitted, ptx: &str) -> Protocol {
    let lines: Vec<&str> = ptx.lines().map(str::trim).collect();
    let boxes = box_bytes(emitted);
    let inits = |barrier: &str| -> Vec<u32> {
        lines
            .iter()
            .filter(|l| l.starts_with("mbarrier.init") && l.contains(barrier))
            .map(|l| last_number(l))
            .collect()
    };
    let (full, empty) = (inits("[%full_bar"), inits("[%empty_bar"));
    assert_eq!(full.len(), empty.len());
    assert!(full.windows(2).all(|w| w[0] == w[1]) && empty.windows(2).all(|w| w[0] == w[1]));
    let expect_tx = lines
        .iter()
        .find(|l| l.starts_with("mbarrier.arrive.expect_tx"))
        .map(|l| last_number(l))
        .expect("the producer announces its bytes");
    let (mut unicast_bytes, mut multicast_bytes) = (0, 0);
    // The ring's loads (the epilogue's TMA stores complete no barrier).
    let loads = lines
        .iter()
        .filter(|l| l.contains("cp.async.bulk.tensor") && l.contains("mbarrier::complete_tx"));
    for line in loads {
        let map = line
            .split('[')
            .nth(2)
            .and_then(|rest| rest.split(',').next())
            .expect("a tensor map operand");
        let bytes = boxes[map.trim()];
        if line.contains(".multicast::cluster") {
            multicast_bytes += bytes;
        } else {
            unicast_bytes += bytes;
        }
    }
    // The wait loops: the register each side's try_wait names.
    let wait_register = |barrier: &str| -> &str {
        let line = lines
            .iter()
            .find(|l| l.starts_with("mbarrier.try_wait.parity") && l.contains(barrier))
            .unwrap_or_else(|| panic!("no wait on {barrier}"));
        line.trim_end_matches(';').rsplit(", ").next().unwrap()
    };
    let producer_register = wait_register("[%empty_addr]");
    let producer_waits_previous_phase =
        producer_register == "%parity" && lines.contains(&"xor.b32\t%parity, %phase, 1;");
    let consumers_wait_lap_phase = wait_register("[%full_addr]") == "%phase";
    // The release inside the consumer loop: after `wait_group 1`, of the previous fill.
    let retire = lines
        .iter()
        .position(|l| *l == "wgmma.wait_group.sync.aligned\t1;")
        .expect("the consumers keep one group in flight");
    let release = lines[retire..]
        .iter()
        .find(|l| l.contains("mbarrier.arrive.shared::cta"))
        .expect("the consumers release slots");
    let releases_after_retirement = release.contains("[%prev_empty]");
    let releases_remote = lines[retire..]
        .iter()
        .take_while(|l| !l.starts_with("wgmma.wait_group.sync.aligned\t0"))
        .any(|l| l.contains("mbarrier.arrive.shared::cluster"));
    let (rows, cols) = emitted.launch().cluster;
    let blocks = rows * cols;
    let consumer_warps = (emitted.launch().threads_per_block - 128) / 32;
    let pingpong = emitted.spec().pingpong;
    let has = |prefix: &str| lines.iter().any(|l| l.starts_with(prefix));
    let after = |label: &'static str| lines.iter().skip_while(move |l| **l != label).skip(1);
    let drain_slots = after("$L_producer_drain:")
        .take_while(|l| !l.starts_with("$L_exit:"))
        .find(|l| l.starts_with("setp.lt.u32\t%p_more, %k_tile, "))
        .map_or(0, |l| last_number(l));
    let exit_barrier = after("$L_exit:")
        .take_while(|l| !l.starts_with("ret;"))
        .any(|l| l.starts_with("barrier.cluster.arrive"));
    Protocol {
        stages: full.len() as u32,
        full_init: full[0],
        empty_init: empty[0],
        expect_tx,
        unicast_bytes,
        multicast_bytes,
        blocks,
        consumer_warps,
        producer_waits_previous_phase,
        consumers_wait_lap_phase,
        releases_after_retirement,
        releases_remote,
        pingpong,
        waits_for_turn: has("@%p_turn bar.sync\t%turn_own,"),
        hands_over_turn: has("@%p_handoff bar.arrive\t%turn_other,"),
        skips_other_units: has("add.u32\t%ring_pos, %slot, %k_tiles;"),
        drain_slots,
        exit_barrier,
    }
}

/// An mbarrier as the PTX ISA defines it.
#[derive(Clone, Debug)]
struct Mbarrier {
    init: u32,
    pending: u32,
    tx: i64,
    completed: u64,
}

impl Mbarrier {
    fn new(init: u32) -> Mbarrier {
        Mbarrier {
            init,
            pending: init,
            tx: 0,
            completed: 0,
        }
    }

    /// `try_wait.parity`: the phase of that parity is complete (the current phase, still
    /// running, has the other parity).
    fn passes(&self, parity: u64) -> bool {
        self.completed % 2 != parity % 2
    }

    fn settle(&mut self) {
        if self.pending == 0 && self.tx == 0 {
            self.completed += 1;
            self.pending = self.init;
        }
    }

    fn arrive(&mut self) -> Result<(), String> {
        if self.pending == 0 {
            return Err("arrival on a barrier whose phase has no pending arrivals".into());
        }
        self.pending -= 1;
        self.settle();
        Ok(())
    }

    fn expect_tx(&mut self, bytes: u32) {
        self.tx += i64::from(bytes);
    }

    fn complete_tx(&mut self, bytes: u32) {
        self.tx -= i64::from(bytes);
        self.settle();
    }
}

/// Where one consumer warp is: its fill, and the step of that fill.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum WarpStep {
    WaitFull,
    Release,
    Done,
}

#[derive(Clone, Debug)]
struct Warp {
    fill: u64,
    step: WarpStep,
    /// Fills whose wgmmas may still read their slot.
    reading: Vec<u64>,
    /// Fills this warp released.
    released_through: Option<u64>,
}

#[derive(Clone, Debug)]
struct Block {
    full: Vec<Mbarrier>,
    empty: Vec<Mbarrier>,
    /// Per slot, the fill whose bytes land there and how many have landed.
    landed: Vec<(u64, u32)>,
    producer_fill: u64,
    /// Slots the producer has seen released after its last fill.
    drained: u32,
    warps: Vec<Warp>,
    exited: bool,
}

impl Block {
    /// Every thread is through: the producer's fills and drain, every consumer warp's fills.
    fn finished(&self, fills: u64, p: &Protocol) -> bool {
        self.producer_fill == fills
            && self.drained == p.drain_slots
            && self.warps.iter().all(|w| w.step == WarpStep::Done)
    }
}

/// A release on its way to a peer block's empty barrier.
#[derive(Clone, Copy, Debug)]
struct RemoteRelease {
    dest: usize,
    slot: usize,
}

/// A TMA load in flight.
#[derive(Clone, Copy, Debug)]
struct Load {
    dest: usize,
    slot: u32,
    fill: u64,
    bytes: u32,
}

/// Runs the protocol for units of work of `units[i]` fills each (whole output tiles, or
/// stream-K pieces of one) under the schedule `choose` picks; the error says what broke.
fn run(p: &Protocol, units: &[u64], mut choose: impl FnMut(usize) -> usize) -> Result<(), String> {
    assert!(units.iter().all(|&fills| fills > 0), "{units:?}");
    // The fills that start a unit, and the fills that end one.
    let mut starts = std::collections::BTreeSet::new();
    let mut ends = std::collections::BTreeSet::new();
    let mut unit_starts = Vec::new();
    let mut fills = 0;
    for &unit in units {
        starts.insert(fills);
        unit_starts.push(fills);
        fills += unit;
        ends.insert(fills - 1);
    }
    let unit_of = |fill: u64| unit_starts.partition_point(|&start| start <= fill) - 1;
    // Ping-pong: warp w is in warpgroup w / warps_per_fill and takes the units of its parity.
    let group_of = |warp: usize| warp / p.warps_per_fill() as usize;
    let reads = |warp: usize, fill: u64| !p.pingpong || unit_of(fill) % 2 == group_of(warp);
    let first_fill = |warp: usize| -> Option<u64> {
        if p.pingpong {
            unit_starts.get(group_of(warp)).copied()
        } else {
            Some(0)
        }
    };
    // Ping-pong turns handed over, per block (its own named barriers) and unit: the warps of
    // the unit's warpgroup that arrived after it.
    let mut turns_handed = vec![vec![0u32; units.len()]; p.blocks as usize];
    let stages = u64::from(p.stages);
    let stage_bytes = p.unicast_bytes + p.multicast_bytes * p.blocks;
    let mut blocks: Vec<Block> = (0..p.blocks)
        .map(|_| Block {
            full: (0..p.stages).map(|_| Mbarrier::new(p.full_init)).collect(),
            empty: (0..p.stages).map(|_| Mbarrier::new(p.empty_init)).collect(),
            landed: vec![(u64::MAX, 0); p.stages as usize],
            producer_fill: 0,
            drained: 0,
            exited: false,
            warps: (0..p.consumer_warps as usize)
                .map(|w| Warp {
                    fill: first_fill(w).unwrap_or(0),
                    step: if first_fill(w).is_some() {
                        WarpStep::WaitFull
                    } else {
                        WarpStep::Done
                    },
                    reading: Vec::new(),
                    released_through: None,
                })
                .collect(),
        })
        .collect();
    let mut in_flight: Vec<Load> = Vec::new();
    let mut releases_in_flight: Vec<RemoteRelease> = Vec::new();
    let parity = |lap: u64, previous: bool| if previous { lap + 1 } else { lap };
    loop {
        // Every action enabled now: (kind, block, index).
        let mut actions: Vec<(u8, usize, usize)> = Vec::new();
        for (b, block) in blocks.iter().enumerate() {
            // The producer's next fill, or after the last its next wait of the drain.
            let f = block.producer_fill + u64::from(block.drained);
            if block.producer_fill < fills || block.drained < p.drain_slots {
                let slot = (f % stages) as usize;
                let wait = parity(f / stages, p.producer_waits_previous_phase);
                if block.empty[slot].passes(wait) {
                    actions.push((0, b, 0));
                }
            }
            // The block leaves: through the cluster barrier only once every block is
            // through and their releases have landed.
            let leaves = block.finished(fills, p)
                && (!p.exit_barrier
                    || (blocks.iter().all(|other| other.finished(fills, p))
                        && releases_in_flight.is_empty()));
            if !block.exited && leaves {
                actions.push((3, b, 0));
            }
            for (w, warp) in block.warps.iter().enumerate() {
                let slot = (warp.fill % stages) as usize;
                // A ping-pong unit after the first waits for the turn the previous unit's
                // warpgroup hands over (all four of its warps arrive).
                let unit = unit_of(warp.fill);
                let turn =
                    !(p.pingpong && p.waits_for_turn && unit > 0 && starts.contains(&warp.fill))
                        || turns_handed[b][unit - 1] == p.warps_per_fill();
                let enabled = match warp.step {
                    WarpStep::WaitFull => {
                        turn && block.full[slot]
                            .passes(parity(warp.fill / stages, !p.consumers_wait_lap_phase))
                    }
                    WarpStep::Release => true,
                    WarpStep::Done => false,
                };
                if enabled {
                    actions.push((1, b, w));
                }
            }
        }
        for index in 0..in_flight.len() {
            actions.push((2, 0, index));
        }
        for index in 0..releases_in_flight.len() {
            actions.push((4, 0, index));
        }
        if actions.is_empty() {
            let done = blocks.iter().all(|b| b.exited);
            return if done {
                Ok(())
            } else {
                Err(format!(
                    "deadlock: producers at fills {:?}, consumer warps at {:?}",
                    blocks.iter().map(|b| b.producer_fill).collect::<Vec<_>>(),
                    blocks
                        .iter()
                        .map(|b| b.warps.iter().map(|w| (w.fill, w.step)).collect::<Vec<_>>())
                        .collect::<Vec<_>>()
                ))
            };
        }
        let (kind, b, index) = actions[choose(actions.len())];
        match kind {
            // The producer after its last fill: one more slot seen released.
            0 if blocks[b].producer_fill == fills => blocks[b].drained += 1,
            // The producer: announce the fill's bytes, then issue its loads.
            0 => {
                let f = blocks[b].producer_fill;
                let slot = (f % stages) as u32;
                let full = &mut blocks[b].full[slot as usize];
                full.expect_tx(p.expect_tx);
                full.arrive().map_err(|e| {
                    format!("block {b} re-arms slot {slot} for fill {f} before the fill before landed: {e}")
                })?;
                if p.unicast_bytes > 0 {
                    in_flight.push(Load {
                        dest: b,
                        slot,
                        fill: f,
                        bytes: p.unicast_bytes,
                    });
                }
                if p.multicast_bytes > 0 {
                    for dest in 0..p.blocks as usize {
                        in_flight.push(Load {
                            dest,
                            slot,
                            fill: f,
                            bytes: p.multicast_bytes,
                        });
                    }
                }
                blocks[b].producer_fill += 1;
            }
            // A consumer warp's next step.
            1 => {
                let warp = blocks[b].warps[index].clone();
                let f = warp.fill;
                let slot = (f % stages) as usize;
                match warp.step {
                    WarpStep::WaitFull => {
                        let (fill, bytes) = blocks[b].landed[slot];
                        if fill != f || bytes != stage_bytes {
                            return Err(format!(
                                "block {b} warp {index} reads fill {f} in slot {slot} with {} of {stage_bytes} bytes landed",
                                if fill == f { bytes } else { 0 }
                            ));
                        }
                        let warp = &mut blocks[b].warps[index];
                        warp.reading.push(f);
                        warp.step = WarpStep::Release;
                    }
                    WarpStep::Release => {
                        // Commit, then `wait_group 1` retires every earlier fill; the fill
                        // before this one in the same tile is released. At a tile's last
                        // fill, `wait_group 0` retires this one and releases it too.
                        let first_of_tile = starts.contains(&f);
                        let last_of_tile = ends.contains(&f);
                        let mut releases = Vec::new();
                        if p.releases_after_retirement {
                            blocks[b].warps[index].reading.retain(|&r| r == f);
                            if !first_of_tile {
                                releases.push(f - 1);
                            }
                            if last_of_tile {
                                blocks[b].warps[index].reading.clear();
                                releases.push(f);
                            }
                        } else {
                            // Released as soon as committed: the wgmmas may still read it
                            // until the next fill's wait_group 1 retires them.
                            blocks[b].warps[index].reading.retain(|&r| r + 1 >= f);
                            releases.push(f);
                            if last_of_tile {
                                blocks[b].warps[index].reading.clear();
                            }
                        }
                        for r in releases {
                            let s = (r % stages) as usize;
                            blocks[b].empty[s].arrive()?;
                            if p.releases_remote {
                                for dest in (0..blocks.len()).filter(|&peer| peer != b) {
                                    releases_in_flight.push(RemoteRelease { dest, slot: s });
                                }
                            }
                            blocks[b].warps[index].released_through = Some(r);
                        }
                        // After a ping-pong unit: hand the turn over (where the next unit exists)
                        // and step over the other warpgroup's unit.
                        let unit = unit_of(f);
                        let next = if p.pingpong && last_of_tile {
                            if p.hands_over_turn && unit + 1 < units.len() {
                                turns_handed[b][unit] += 1;
                            }
                            if p.skips_other_units {
                                unit_starts.get(unit + 2).copied().unwrap_or(fills)
                            } else {
                                f + 1
                            }
                        } else {
                            f + 1
                        };
                        let warp = &mut blocks[b].warps[index];
                        warp.fill = next;
                        warp.step = if warp.fill == fills {
                            WarpStep::Done
                        } else {
                            WarpStep::WaitFull
                        };
                    }
                    WarpStep::Done => unreachable!(),
                }
            }
            3 => blocks[b].exited = true,
            // A release lands on a peer's empty barrier, which must still exist.
            4 => {
                let release = releases_in_flight.swap_remove(index);
                if blocks[release.dest].exited {
                    return Err(format!(
                        "a release lands on block {}'s slot {} after the block exited",
                        release.dest, release.slot
                    ));
                }
                blocks[release.dest].empty[release.slot].arrive()?;
            }
            // A TMA load lands: its slot must be free of readers of older fills.
            _ => {
                let load = in_flight.swap_remove(index);
                if blocks[load.dest].exited {
                    return Err(format!(
                        "fill {} lands in block {} after the block exited",
                        load.fill, load.dest
                    ));
                }
                let block = &mut blocks[load.dest];
                for (w, warp) in block.warps.iter().enumerate() {
                    let older = load.fill.checked_sub(stages).filter(|&o| reads(w, o));
                    let still_reading = warp.reading.iter().any(|&r| Some(r) == older);
                    let not_released =
                        older.is_some_and(|o| warp.released_through.is_none_or(|r| r < o));
                    if still_reading || not_released {
                        return Err(format!(
                            "fill {} lands in block {} slot {} before warp {w} released fill {}",
                            load.fill,
                            load.dest,
                            load.slot,
                            older.unwrap_or(0)
                        ));
                    }
                }
                let landed = &mut block.landed[load.slot as usize];
                if landed.0 != load.fill {
                    *landed = (load.fill, 0);
                }
                landed.1 += load.bytes;
                block.full[load.slot as usize].complete_tx(load.bytes);
            }
        }
    }
}

/// A tiny deterministic generator for schedules.
struct Schedule(u64);

impl Schedule {
    fn next(&mut self, n: usize) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 33) % n as u64) as usize
    }
}

/// Runs the protocol under fixed and random schedules over at least three laps, for tiles of
/// one k tile, of fewer k tiles than stages and of more; and for the units of unequal length
/// a stream-K walker takes (whole tiles, then pieces of one: a tile's tail or head, shorter
/// than the ring or one fill), in both orders.
fn check(p: &Protocol) -> Result<(), String> {
    let stages = u64::from(p.stages);
    let mut walks: Vec<Vec<u64>> = [1, stages.saturating_sub(1).max(1), stages + 1]
        .into_iter()
        .map(|k_tiles| vec![k_tiles; ((3 * stages).div_ceil(k_tiles) + 1) as usize])
        .collect();
    let k_tiles = 2 * stages + 1;
    let unequal = vec![
        k_tiles,
        k_tiles,
        stages + 2,
        1,
        stages.saturating_sub(1).max(1),
        k_tiles,
        2,
        stages,
        1,
        1,
        k_tiles - 1,
    ];
    // Stream-K's units of unequal length; ping-pong walks whole tiles only (its ring skip
    // steps over one tile's k tiles).
    if !p.pingpong {
        walks.push(unequal.iter().rev().copied().collect());
        walks.push(unequal);
    }
    for (walk, units) in walks.iter().enumerate() {
        assert!(units.iter().sum::<u64>() >= 3 * stages);
        // Producers first, consumers first, loads first; then random interleavings.
        for policy in 0..3u8 {
            run(p, units, |n| match policy {
                0 => 0,
                1 => n / 2,
                _ => n - 1,
            })?;
        }
        for seed in 0..40 {
            let mut schedule = Schedule(seed * 7919 + walk as u64);
            run(p, units, |n| schedule.next(n))?;
        }
    }
    Ok(())
}

fn hopper_specs() -> Vec<Emitted> {
    let mut specs: Vec<Emitted> = gemm_codegen::catalog::CATALOG
        .iter()
        .filter(|e| e.spec.contains("mma: wgmma"))
        .map(|e| gemm_codegen::emit_str(e.spec).unwrap())
        .collect();
    for stages in 2..=8 {
        for (tile, consumers) in [("64x128x64", 1), ("128x64x64", 2)] {
            for cluster in ["", ", cluster: 2x1, copy: tma(multicast = 2)"] {
                let text = format!(
                    "name: ring, arch: sm_90a, mma: wgmma, tile: {tile}, consumers: {consumers}, stages: {stages}{cluster}"
                );
                specs.push(gemm_codegen::emit_str(&text).unwrap_or_else(|e| panic!("{text}: {e}")));
            }
        }
        for cluster in ["", ", cluster: 2x1, copy: tma(multicast = 2)"] {
            let text = format!(
                "name: ring, arch: sm_90a, mma: wgmma, tile: 64x128x64, consumers: pingpong, stages: {stages}, schedule: persistent{cluster}"
            );
            specs.push(gemm_codegen::emit_str(&text).unwrap_or_else(|e| panic!("{text}: {e}")));
        }
    }
    specs
}

#[test]
fn every_ring_keeps_its_protocol_under_any_interleaving() {
    let specs = hopper_specs();
    assert!(specs.len() >= 30);
    for emitted in &specs {
        let p = protocol(emitted);
        // The numbers agree before anything runs: one producer arrival completes a full
        // barrier with exactly the bytes landing in the block; every consumer warp whose stage
        // a load reaches releases it.
        assert_eq!(p.full_init, 1, "{}", emitted.spec_text());
        assert_eq!(
            p.expect_tx,
            p.unicast_bytes + p.multicast_bytes * p.blocks,
            "{}",
            emitted.spec_text()
        );
        assert_eq!(
            p.empty_init,
            p.warps_per_fill() * p.blocks,
            "{}",
            emitted.spec_text()
        );
        check(&p).unwrap_or_else(|error| panic!("{}: {error}", emitted.spec_text()));
    }
}

/// A persistent walk counts the tiles of its unit, the block's or the cluster's: a count in
/// block tiles would send clusters past the last tile with coordinates off the matrix.
#[test]
fn persistent_walks_count_their_own_tiles() {
    // The kernel's tile count of one dimension (from its `ld.param` of M or N into %tiles or
    // %tiles_n to the division's last instruction), run for M or N = 1, 2, ..: the tile is the
    // largest value that counts one.
    let divisor = |ptx: &str, dim: &str| -> u32 {
        let lines: Vec<&str> = ptx.lines().map(str::trim).collect();
        let start = lines
            .iter()
            .position(|l| {
                (l.starts_with("ld.param.u32\t%tiles, [")
                    || l.starts_with("ld.param.u32\t%tiles_n, ["))
                    && l.ends_with(&format!("_{dim}];"))
            })
            .unwrap_or_else(|| panic!("no tile count of {dim}"));
        let register = lines[start].split(['\t', ',']).nth(1).unwrap();
        let count = |value: u32| -> u32 {
            let mut registers = HashMap::new();
            for line in &lines[start..] {
                let (opcode, operands) = line.trim_end_matches(';').split_once('\t').unwrap();
                let o: Vec<&str> = operands.split(", ").collect();
                let v = |operand: &str| operand.parse().unwrap_or_else(|_| registers[operand]);
                let result = match opcode {
                    "ld.param.u32" => value,
                    "add.u32" => v(o[1]) + v(o[2]),
                    "sub.u32" => v(o[1]) - v(o[2]),
                    "shr.u32" => v(o[1]) >> v(o[2]),
                    "mul.hi.u32" => ((u64::from(v(o[1])) * u64::from(v(o[2]))) >> 32) as u32,
                    other => panic!("the replay of the tile count does not know {other}: {line}"),
                };
                registers.insert(o[0].to_string(), result);
                if o[0] == register && !matches!(opcode, "ld.param.u32" | "add.u32") {
                    break;
                }
            }
            registers[register]
        };
        (1..4096)
            .take_while(|&value| count(value) == 1)
            .last()
            .unwrap()
    };
    let mut walks = 0;
    for emitted in hopper_specs() {
        if !emitted.spec_text().contains("persistent") {
            continue;
        }
        let (rows, cols) = emitted.launch().cluster;
        let unit = (
            emitted.launch().tile_m * rows,
            emitted.launch().tile_n * cols,
        );
        assert_eq!(
            (divisor(emitted.ptx(), "m"), divisor(emitted.ptx(), "n")),
            unit,
            "{}",
            emitted.spec_text()
        );
        walks += 1;
    }
    assert!(walks >= 4);
}

/// Each way the ring could be wrong, written into the PTX, is caught.
#[test]
fn broken_rings_are_caught() {
    let base = gemm_codegen::emit_str(
        "name: ring, arch: sm_90a, mma: wgmma, tile: 128x128x64, consumers: 2, stages: 3, cluster: 2x1, copy: tma(multicast = 2)",
    )
    .unwrap();
    let good = protocol(&base);
    check(&good).unwrap();
    let broken = |edits: &[(String, String)]| {
        let mut ptx = base.ptx().to_string();
        for (from, to) in edits {
            assert!(ptx.contains(from.as_str()), "{from}");
            ptx = ptx.replace(from.as_str(), to);
        }
        protocol_of(&base, &ptx)
    };
    let edit = |from: &str, to: &str| vec![(from.to_string(), to.to_string())];
    assert_eq!((good.drain_slots, good.exit_barrier), (good.stages, false));
    let drain = {
        let ptx = base.ptx();
        let start = ptx
            .find("$L_producer_drain:")
            .expect("a cluster's producer drains");
        let end = ptx[start..].find("@%p_more bra\t$L_drain;").unwrap() + start;
        ptx[start..end].to_string()
    };
    // The exit the drain replaced, every thread at a cluster barrier, was safe too (and
    // measured slower: `results/clusters-2026-11-26`).
    let cluster_barrier_exit = broken(&[
        (drain.clone(), String::new()),
        (
            "$L_exit:\n\tret;".to_string(),
            "$L_exit:\n\tbarrier.cluster.arrive.release;\n\tbarrier.cluster.wait.acquire;\n\tret;"
                .to_string(),
        ),
    ]);
    assert_eq!(
        (
            cluster_barrier_exit.drain_slots,
            cluster_barrier_exit.exit_barrier
        ),
        (0, true)
    );
    check(&cluster_barrier_exit).unwrap();
    let halve_empty_counts: Vec<(String, String)> = (0..good.stages)
        .map(|slot| {
            let line = |count| format!("[%empty_bar+{}], {count};", slot * 8);
            (line(good.empty_init), line(good.empty_init / 2))
        })
        .collect();
    let cases = [
        (
            // The producer waits for the lap's own phase: on a fresh barrier, forever.
            broken(&edit(
                "xor.b32\t%parity, %phase, 1;",
                "mov.u32\t%parity, %phase;",
            )),
            "deadlock",
        ),
        (
            // Half the consumer warps complete an empty phase: a slot refills under readers
            // (or is re-armed before its last fill even landed).
            broken(&halve_empty_counts),
            "before",
        ),
        (
            // One box's bytes too few announced: the consumers may start before it lands.
            broken(&edit(
                &format!("[%full_addr], {};", good.expect_tx),
                &format!("[%full_addr], {};", good.expect_tx - good.unicast_bytes / 2),
            )),
            "reads fill",
        ),
        (
            // The current slot released right after the commit, not the previous one after
            // wait_group 1.
            broken(&edit(
                "@%p_release mbarrier.arrive.shared::cta.b64\t_, [%prev_empty];",
                "@%p_release mbarrier.arrive.shared::cta.b64\t_, [%empty_addr];",
            )),
            "before warp",
        ),
        (
            // No remote release: the peer's producer waits for arrivals that never come.
            broken(&edit(
                "@%p_release mbarrier.arrive.shared::cluster.b64\t_, [%prev_peer_empty];",
                "",
            )),
            "deadlock",
        ),
        (
            // No drain: a block leaves while the peer's releases are on their way to it.
            broken(&edit(&drain, "")),
            "after the block exited",
        ),
        (
            // A drain one slot short: the last fill's remote release may come too late.
            broken(&edit(
                &format!("setp.lt.u32\t%p_more, %k_tile, {};", good.stages),
                &format!("setp.lt.u32\t%p_more, %k_tile, {};", good.stages - 1),
            )),
            "after the block exited",
        ),
    ];
    for (index, (p, want)) in cases.iter().enumerate() {
        let error = check(p).expect_err(&format!("broken ring {index} passed"));
        eprintln!("broken ring {index}: {error}");
        assert!(error.contains(want), "broken ring {index}: {error}");
    }
}

/// Each way a ping-pong ring could be wrong, written into the PTX, is caught.
#[test]
fn broken_pingpong_rings_are_caught() {
    let base = gemm_codegen::emit_str(
        "name: ring, arch: sm_90a, mma: wgmma, tile: 64x128x64, consumers: pingpong, stages: 3, schedule: persistent",
    )
    .unwrap();
    let good = protocol(&base);
    assert!(good.pingpong && good.waits_for_turn && good.hands_over_turn && good.skips_other_units);
    check(&good).unwrap();
    let broken = |from: &str, to: &str| {
        assert!(base.ptx().contains(from), "{from}");
        protocol_of(&base, &base.ptx().replacen(from, to, 1))
    };
    let both_warpgroups_release: Vec<(String, String)> = (0..good.stages)
        .map(|slot| {
            let line = |count| format!("[%empty_bar+{}], {count};", slot * 8);
            (line(good.empty_init), line(good.empty_init * 2))
        })
        .collect();
    let mut doubled = base.ptx().to_string();
    for (from, to) in &both_warpgroups_release {
        doubled = doubled.replacen(from.as_str(), to, 1);
    }
    let cases = [
        (
            // No turn: the second warpgroup waits a lap ahead of the producer and passes on
            // an earlier phase of the same parity.
            broken("@%p_turn bar.sync\t%turn_own, 256;", ""),
            "reads fill",
        ),
        (
            // No hand-over: the second warpgroup waits for a turn that never comes.
            broken("@%p_handoff bar.arrive\t%turn_other, 256;", ""),
            "deadlock",
        ),
        (
            // No skip: a warpgroup reads the other's fills after its own unit.
            broken(
                "add.u32\t%ring_pos, %slot, %k_tiles;",
                "mov.u32\t%ring_pos, %slot;",
            ),
            "",
        ),
        (
            // An empty barrier counting both warpgroups' warps: a slot is never released.
            protocol_of(&base, &doubled),
            "deadlock",
        ),
    ];
    for (index, (p, want)) in cases.iter().enumerate() {
        let error = check(p).expect_err(&format!("broken ping-pong ring {index} passed"));
        eprintln!("broken ping-pong ring {index}: {error}");
        assert!(
            error.contains(want),
            "broken ping-pong ring {index}: {error}"
        );
    }
}
