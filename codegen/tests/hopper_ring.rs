//! Pipeline proofs of the Hopper family's stage ring, on the emitted PTX itself.
//!
//! The ring's protocol is read out of each kernel's text: the mbarrier init counts, the bytes
//! the producer announces (`arrive.expect_tx`) and the copies of its first fill, replayed from
//! the text (the boxes its TMA loads bring, from the kernel's tensor-map parameters, multicast
//! or not; fp8 block scales' bulk copy of A's rows and `cp.async` of B's scale, whose
//! completion arrives on the full barrier), whether a consumer warp releases a slot from lane 0
//! or from every thread (block scales, read from the slot by every thread), the parity each
//! side waits for, when the
//! consumers release a slot (after the next k tile's `wgmma.wait_group 1`, or the last after
//! `wait_group 0`) and on which blocks' barriers. A model of the cluster's blocks then runs
//! that protocol over several output tiles (at least three laps of the ring) under many
//! interleavings, with mbarriers as the PTX ISA defines them (phases, pending arrivals,
//! transaction bytes) and TMA loads landing whenever they like. It fails on a deadlock, on a
//! load landing in a slot some consumer warp still reads, and on a consumer reading a slot
//! before all of its fill's bytes landed. A block of a cluster leaves only when no load or
//! remote release is still on its way to it: releases to a peer travel, and land whenever
//! they like. Ping-pong kernels (`consumers: pingpong`) run their two consumer warpgroups on
//! alternate tiles, each skipping the other's fills in the ring and waiting for its turn (a
//! named barrier the other arrives on once its tile's wgmmas retired): without the turn, a
//! warpgroup waiting a lap or more ahead of the producer would pass on a phase of the same
//! parity. Their consumer warps are not modelled but replayed: the kernel's text runs for each
//! warp (lane 0) and walk, from its first instruction to the consumers' end, and what it does
//! with the ring is what the model runs: each full-barrier wait's slot and parity and the tile
//! and k tile in its registers then, the stages its wgmmas' descriptors read, its commits and
//! retirements, the empty barriers it arrives on (its own block's or a peer's), and the named
//! barriers it waits at and arrives on with their ids and thread counts. The model then also
//! fails on a warpgroup that finds another fill than its tile's k tile in the slot it waited
//! on, a wgmma that reads outside the slot waited for, both warpgroups at the tensor cores at
//! once, an arrival on a named barrier nobody waits at, and a block that exits with a named
//! barrier's arrivals pending. Each check has a negative case: a broken variant of the PTX is
//! caught, with the message of what it breaks.

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
    /// Each copy's bytes: they land one by one.
    unicast_copies: Vec<u32>,
    multicast_copies: Vec<u32>,
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
    /// Ping-pong: the consumer warpgroups take alternate units, and the model replays their
    /// warps from `kernel` for each walk.
    pingpong: bool,
    kernel: Replay,
    /// Bytes of the fill's `cp.async` copies, and their arrivals on the full barrier.
    async_bytes: u32,
    async_arrivals: u32,
    /// Arrivals of one consumer warp's release: its lane 0's, or every thread's (block-scale
    /// kernels, whose threads read their scales from the slot).
    release_arrivals: u32,
    /// Bytes from one slot's stage to the next (the producer's stage base).
    stage_stride: u32,
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
    let kernel = Replay {
        ptx: ptx.to_string(),
        kernel: emitted.kernel_name().to_string(),
        tile: (
            emitted.launch().tile_m,
            emitted.launch().tile_n,
            emitted.launch().tile_k,
        ),
        cluster: emitted.launch().cluster,
        stages: full.len() as u32,
        boxes: box_bytes(emitted),
    };
    // What the producer's first fill announces and copies, replayed: the tensors' boxes (its
    // block's own, or multicast to every block of the cluster), bulk copies (block scales'
    // rows) and `cp.async` copies whose completion arrives on the barrier (a column's scale).
    let (mut expect_tx, mut unicast_copies, mut multicast_copies) = (None, Vec::new(), Vec::new());
    let (mut async_bytes, mut async_arrivals) = (0, 0);
    for event in replay_first_fill(&kernel) {
        match event {
            Event::ExpectTx { bytes } => {
                assert!(expect_tx.is_none(), "one announcement a fill");
                expect_tx = Some(bytes as u32);
            }
            Event::TensorLoad {
                bytes,
                multicast: false,
            }
            | Event::BulkCopy { bytes } => unicast_copies.push(bytes as u32),
            Event::TensorLoad {
                bytes,
                multicast: true,
            } => multicast_copies.push(bytes as u32),
            Event::AsyncCopy { bytes } => async_bytes += bytes as u32,
            Event::AsyncArrive => async_arrivals += 1,
            _ => {}
        }
    }
    let expect_tx = expect_tx.expect("the producer announces its bytes");
    let (unicast_bytes, multicast_bytes) =
        (unicast_copies.iter().sum(), multicast_copies.iter().sum());
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
    // The release's guard: lane 0's (`and.pred %p_release, %p_accumulate, %p_lane0`), or none.
    let guard = release
        .strip_prefix('@')
        .and_then(|rest| rest.split_whitespace().next());
    let release_arrivals = match guard {
        Some(guard)
            if lines.iter().any(|l| {
                l.starts_with(&format!("and.pred\t{guard}, ")) && l.contains("%p_lane0")
            }) =>
        {
            1
        }
        _ => 32,
    };
    let (rows, cols) = emitted.launch().cluster;
    let blocks = rows * cols;
    let consumer_warps = (emitted.launch().threads_per_block - 128) / 32;
    let pingpong = emitted.spec().pingpong;
    let stage_stride = lines
        .iter()
        .find(|l| l.starts_with("mad.lo.u32\t%stage_base, %slot, "))
        .and_then(|l| l.split(", ").nth(2))
        .and_then(|n| n.parse().ok())
        .expect("the producer's stage base");
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
        unicast_copies,
        multicast_copies,
        blocks,
        consumer_warps,
        producer_waits_previous_phase,
        consumers_wait_lap_phase,
        releases_after_retirement,
        releases_remote,
        pingpong,
        kernel,
        async_bytes,
        async_arrivals,
        release_arrivals,
        stage_stride,
        drain_slots,
        exit_barrier,
    }
}

/// What a replay of a kernel's threads needs: its text and launch, and its tensor maps' box
/// bytes by register.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Replay {
    ptx: String,
    kernel: String,
    tile: (u32, u32, u32),
    cluster: (u32, u32),
    stages: u32,
    boxes: HashMap<String, u32>,
}

/// One instruction of a replayed kernel: its guard, opcode and operands.
#[derive(Clone, Debug)]
struct Instruction {
    guard: Option<(bool, String)>,
    opcode: String,
    operands: Vec<String>,
    text: String,
}

/// A line of a kernel's body: a label or an instruction (declarations and comments dropped).
#[derive(Clone, Debug)]
enum Line {
    Label(String),
    Op(Instruction),
}

fn parse_line(line: &str) -> Option<Line> {
    let line = line.trim();
    if line.is_empty()
        || line.starts_with("//")
        || line.starts_with('.')
        || line.starts_with(')')
        || line == "{"
        || line == "}"
    {
        return None;
    }
    if let Some(label) = line.strip_suffix(':') {
        return Some(Line::Label(label.to_string()));
    }
    let (guard, rest) = match line.strip_prefix('@') {
        Some(guarded) => {
            let (predicate, rest) = guarded.split_once(char::is_whitespace).unwrap();
            let (negated, name) = match predicate.strip_prefix('!') {
                Some(name) => (true, name),
                None => (false, predicate),
            };
            (Some((negated, name.to_string())), rest.trim())
        }
        None => (None, line),
    };
    let rest = rest.trim_end_matches(';');
    let (opcode, operands) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
    // `{ %a, %b }` vectors and `[%addr+8]` addresses stay one operand each.
    let (mut split, mut depth, mut current) = (Vec::new(), 0, String::new());
    for c in operands.chars() {
        match c {
            '{' | '[' => depth += 1,
            '}' | ']' => depth -= 1,
            _ => {}
        }
        if c == ',' && depth == 0 {
            split.push(current.trim().to_string());
            current.clear();
        } else {
            current.push(c);
        }
    }
    if !current.trim().is_empty() {
        split.push(current.trim().to_string());
    }
    Some(Line::Op(Instruction {
        guard,
        opcode: opcode.to_string(),
        operands: split,
        text: line.to_string(),
    }))
}

/// What one consumer warp does with the ring and its named barriers, in program order, as the
/// kernel's text computes it for one walk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Event {
    /// `mbarrier.try_wait.parity` on slot `slot`'s full barrier for `parity`, with the walk's
    /// tile `tile` and its k tile `k` in the registers (`%tile`, `%k_tile`).
    WaitFull {
        slot: u64,
        parity: u64,
        tile: u64,
        k: u64,
    },
    /// A wgmma reads the stages its A and B descriptors start in (byte addresses).
    Read {
        a: u64,
        b: u64,
    },
    /// `wgmma.commit_group`.
    Commit,
    /// `wgmma.wait_group keep`: every committed group but the newest `keep` has retired.
    Retire {
        keep: usize,
    },
    /// `mbarrier.arrive` on slot `slot`'s empty barrier in block `block` of the cluster
    /// (relative to this one: 0 is its own).
    Release {
        block: u64,
        slot: u64,
    },
    /// `bar.sync id, threads`.
    BarrierWait {
        id: u64,
        threads: u64,
    },
    /// `bar.arrive id, threads`.
    BarrierArrive {
        id: u64,
        threads: u64,
    },
    /// The producer: `mbarrier.arrive.expect_tx` of a fill's bytes on its full barrier.
    ExpectTx {
        bytes: u64,
    },
    /// The producer: a tensor's box into its block's stage, or multicast to every block's.
    TensorLoad {
        bytes: u64,
        multicast: bool,
    },
    /// The producer: a bulk copy (not a tensor's box) that completes `bytes` on the full
    /// barrier, and a `cp.async` of `bytes` whose completion arrives on it
    /// (`cp.async.mbarrier.arrive.noinc`).
    BulkCopy {
        bytes: u64,
    },
    AsyncCopy {
        bytes: u64,
    },
    AsyncArrive,
}

/// A register's value, or none where the replay does not track it (floats, loaded data).
type Registers = HashMap<String, Option<u64>>;

/// Replays the consumer warp `warp` (lane 0) of consumer warpgroup `consumer` in block `rank`
/// of the first walker, for a walk over `tiles` output tiles down M of `k_tiles` k tiles each
/// on a grid of one walker: runs the kernel's text from its first instruction to the
/// consumers' end, and returns what the warp does with the ring.
fn replay_consumer(
    replay: &Replay,
    (consumer, warp, rank): (u64, u64, u64),
    walk: (u64, u64),
) -> Vec<Event> {
    replay_thread(replay, 128 * (consumer + 1) + 32 * warp, rank, walk, |_| {
        false
    })
}

/// The producer's first fill of a walk of whole tiles (thread 0, block 0), up to its first
/// step to the next slot: the bytes it announces and the copies it issues.
fn replay_first_fill(replay: &Replay) -> Vec<Event> {
    replay_thread(replay, 0, 0, (4, 4), |text| {
        text.starts_with("add.u32\t%slot, %slot, 1;")
    })
}

/// Replays thread `thread` of block `rank` (see [`replay_consumer`]) until the consumers' end,
/// the exit, or an instruction `stop` accepts.
fn replay_thread(
    replay: &Replay,
    thread: u64,
    rank: u64,
    (tiles, k_tiles): (u64, u64),
    stop: impl Fn(&str) -> bool,
) -> Vec<Event> {
    let body: Vec<Line> = replay
        .ptx
        .lines()
        .skip_while(|line| !line.starts_with('{'))
        .filter_map(parse_line)
        .collect();
    let labels: HashMap<&str, usize> = body
        .iter()
        .enumerate()
        .filter_map(|(i, line)| match line {
            Line::Label(label) => Some((label.as_str(), i)),
            Line::Op(_) => None,
        })
        .collect();
    let (rows, cols) = replay.cluster;
    let (tile_m, tile_n, tile_k) = replay.tile;
    let blocks = u64::from(rows * cols);
    // One cluster tile down M per walk step: `tiles` of them, one tile across.
    let params: HashMap<String, u64> = [
        ("m", tiles * u64::from(tile_m * rows)),
        ("n", u64::from(tile_n * cols)),
        ("k", k_tiles * u64::from(tile_k)),
        ("ldc", u64::from(tile_n * cols)),
        ("batch", 1),
    ]
    .into_iter()
    .map(|(param, value)| (format!("{}_{param}", replay.kernel), value))
    .collect();
    let mut registers: Registers = [
        ("%tid.x", thread),
        ("%ctaid.x", rank),
        ("%nctaid.x", blocks),
        // A one-tile-per-block grid's first tile row and product.
        ("%ctaid.y", 0),
        ("%ctaid.z", 0),
        ("%clusterid.x", 0),
        ("%nclusterid.x", 1),
        ("%cluster_ctarank", rank),
    ]
    .into_iter()
    .map(|(name, value)| (name.to_string(), Some(value)))
    .collect();
    let mut events = Vec::new();
    let mut pc = 0;
    let mut steps = 0;
    loop {
        steps += 1;
        assert!(steps < 1_000_000, "thread {thread} runs away");
        let op = match &body[pc] {
            Line::Label(label) if label == "$L_consumers_done" || label == "$L_exit" => break,
            Line::Label(_) => {
                pc += 1;
                continue;
            }
            Line::Op(op) if stop(&op.text) => break,
            Line::Op(op) => op,
        };
        pc += 1;
        let value = |operand: &str| -> Option<u64> {
            if let Ok(number) = operand.parse::<i64>() {
                return Some(number as u64);
            }
            if let Some(hex) = operand.strip_prefix("0x") {
                return u64::from_str_radix(hex, 16).ok();
            }
            match registers.get(operand) {
                Some(value) => *value,
                // The shared-memory window and the parameters' addresses: symbols at 0.
                None if !operand.starts_with('%') => Some(0),
                None => panic!("{operand} read before it is written: {}", op.text),
            }
        };
        let known = |operand: &str| -> u64 {
            value(operand).unwrap_or_else(|| panic!("{operand} is not known: {}", op.text))
        };
        // `[%reg+offset]`, or a parameter's name.
        let address = |operand: &str| -> u64 {
            let inner = operand.trim_matches(['[', ']']);
            match inner.split_once('+') {
                Some((register, offset)) => known(register) + offset.parse::<u64>().unwrap(),
                None => known(inner),
            }
        };
        let o = &op.operands;
        if let Some((negated, predicate)) = &op.guard {
            match value(predicate) {
                Some(holds) if (holds != 0) == *negated => continue,
                Some(_) => {}
                // A guard the replay does not know (a column past N's edge, say) may only
                // keep a value from being computed, never an event or a branch.
                None => {
                    assert!(
                        !op.opcode.starts_with("bra")
                            && !op.opcode.contains("barrier")
                            && !op.opcode.starts_with("bar.")
                            && !op.opcode.starts_with("wgmma"),
                        "an unknown guard on {}",
                        op.text
                    );
                    if o.first().is_some_and(|d| d.starts_with('%')) {
                        registers.insert(o[0].clone(), None);
                    }
                    continue;
                }
            }
        }
        let u32_of = |i: usize| value(&o[i]).map(|v| v as u32);
        let binary =
            |f: fn(u32, u32) -> u32| Some(u32_of(1).zip(u32_of(2)).map(|(a, b)| f(a, b).into()));
        let result: Option<Option<u64>> = match op.opcode.as_str() {
            "bra" | "bra.uni" => {
                pc = labels[o[0].as_str()];
                None
            }
            "ret" => break,
            "ld.param.u32" | "ld.param.u64" => Some(
                params
                    .get(o[1].trim_matches(['[', ']']))
                    .copied()
                    .or(Some(1 << 40)),
            ),
            "mov.u32" | "mov.b32" | "mov.u64" | "mov.pred" | "cvta.param.u64"
            | "cvta.to.global.u64" | "cvt.u64.u32" => Some(value(&o[1])),
            "mov.b64" if o[1].starts_with('{') => {
                let halves: Vec<&str> = o[1].trim_matches(['{', '}', ' ']).split(", ").collect();
                Some(
                    value(halves[0])
                        .zip(value(halves[1]))
                        .map(|(lo, hi)| lo | hi << 32),
                )
            }
            "cvt.u32.u64" => Some(value(&o[1]).map(|v| v & 0xFFFF_FFFF)),
            "add.u32" => binary(u32::wrapping_add),
            "sub.u32" | "sub.s32" => binary(u32::wrapping_sub),
            "mul.lo.u32" => binary(u32::wrapping_mul),
            "div.u32" => binary(|a, b| a / b),
            "rem.u32" => binary(|a, b| a % b),
            "min.u32" => binary(u32::min),
            "max.u32" => binary(u32::max),
            "shl.b32" => binary(|a, b| a << b),
            "shr.u32" => binary(|a, b| a >> b),
            "and.b32" => binary(|a, b| a & b),
            "or.b32" => binary(|a, b| a | b),
            "xor.b32" => binary(|a, b| a ^ b),
            "mul.hi.u32" => binary(|a, b| ((u64::from(a) * u64::from(b)) >> 32) as u32),
            "mad.lo.u32" => Some(
                u32_of(1)
                    .zip(u32_of(2))
                    .zip(u32_of(3))
                    .map(|((a, b), c)| a.wrapping_mul(b).wrapping_add(c).into()),
            ),
            "bfe.u32" => Some(
                u32_of(1)
                    .zip(u32_of(2))
                    .zip(u32_of(3))
                    .map(|((a, start), len)| ((a >> start) & ((1 << len) - 1)).into()),
            ),
            "mul.wide.u32" => Some(
                u32_of(1)
                    .zip(u32_of(2))
                    .map(|(a, b)| u64::from(a) * u64::from(b)),
            ),
            "mad.wide.u32" | "mad.lo.u64" | "mul.lo.u64" | "add.u64" => {
                // 64-bit addresses of global memory: not followed.
                Some(None)
            }
            "selp.u32" => Some(if known(&o[3]) != 0 {
                value(&o[1])
            } else {
                value(&o[2])
            }),
            "and.pred" => Some(Some(u64::from(known(&o[1]) != 0 && known(&o[2]) != 0))),
            "xor.pred" => Some(
                value(&o[1])
                    .zip(value(&o[2]))
                    .map(|(a, b)| u64::from((a != 0) != (b != 0))),
            ),
            "mapa.shared::cluster.u32" => {
                // A peer's address: the peer's rank relative to this block above the window's
                // offsets (which stay below 2^24).
                let peer = (known(&o[2]) + blocks - rank) % blocks;
                Some(Some(known(&o[1]) | peer << 24))
            }
            setp if setp.starts_with("setp.") => {
                let parts: Vec<&str> = setp.split('.').collect();
                let (cmp, ty) = (parts[1], *parts.last().unwrap());
                let combine = parts.get(2).filter(|p| ["and", "or"].contains(p));
                let holds = value(&o[1]).zip(value(&o[2])).map(|(a, b)| {
                    let (a, b) = match ty {
                        "s32" => (i64::from(a as u32 as i32), i64::from(b as u32 as i32)),
                        "u32" => (i64::from(a as u32), i64::from(b as u32)),
                        _ => (a as i64, b as i64),
                    };
                    match cmp {
                        "eq" => a == b,
                        "ne" => a != b,
                        "lt" => a < b,
                        "le" => a <= b,
                        "gt" => a > b,
                        "ge" => a >= b,
                        other => panic!("the replay does not know {other}: {}", op.text),
                    }
                });
                Some(match combine {
                    Some(&"and") => holds.zip(value(&o[3])).map(|(h, c)| u64::from(h && c != 0)),
                    Some(_) => holds.zip(value(&o[3])).map(|(h, c)| u64::from(h || c != 0)),
                    None => holds.map(u64::from),
                })
            }
            wait if wait.starts_with("mbarrier.try_wait.parity") => {
                let (full, empty) = (known("%full_bar"), known("%empty_bar"));
                let ring = 8 * u64::from(replay.stages);
                let at = address(&o[1]);
                if (full..full + ring).contains(&at) {
                    events.push(Event::WaitFull {
                        slot: (at - full) / 8,
                        parity: known(&o[2]) & 1,
                        tile: known("%tile"),
                        k: known("%k_tile"),
                    });
                } else if !(empty..empty + ring).contains(&at) {
                    // C-in's barriers, whose protocol store_buffers.rs proves, pass here; the
                    // producer's waits on the empty barriers are the model's own.
                    let c_in = registers
                        .get("%cin_bars")
                        .copied()
                        .flatten()
                        .expect("a barrier outside the ring is C-in's");
                    assert!((c_in..c_in + 16).contains(&at), "{}", op.text);
                }
                Some(Some(1))
            }
            "mbarrier.arrive.expect_tx.shared::cta.b64" => {
                let at = address(&o[1]);
                let c_in = registers
                    .get("%cin_bars")
                    .copied()
                    .flatten()
                    .map_or(0..0, |c_in| c_in..c_in + 16);
                if !c_in.contains(&at) {
                    events.push(Event::ExpectTx {
                        bytes: known(&o[2]),
                    });
                }
                None
            }
            load if load.starts_with("cp.async.bulk.tensor")
                && load.contains(".global.mbarrier::complete_tx::bytes") =>
            {
                // The ring's loads (C-in's complete its own barriers).
                let full = known("%full_bar");
                let barrier = address(&o[2]);
                if (full..full + 8 * u64::from(replay.stages)).contains(&barrier) {
                    let map = o[1].trim_start_matches('[').split(',').next().unwrap();
                    events.push(Event::TensorLoad {
                        bytes: u64::from(replay.boxes[map.trim()]),
                        multicast: load.contains(".multicast::cluster"),
                    });
                }
                None
            }
            "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes" => {
                events.push(Event::BulkCopy {
                    bytes: known(&o[2]),
                });
                None
            }
            "cp.async.ca.shared.global" => {
                events.push(Event::AsyncCopy {
                    bytes: known(&o[2]),
                });
                None
            }
            "cp.async.mbarrier.arrive.noinc.shared::cta.b64" => {
                events.push(Event::AsyncArrive);
                None
            }
            arrive if arrive.starts_with("mbarrier.arrive.shared::") => {
                let at = address(&o[1]);
                let (block, offset) = (at >> 24, at & 0xFF_FFFF);
                let empty = known("%empty_bar");
                events.push(Event::Release {
                    block,
                    slot: (offset - empty) / 8,
                });
                None
            }
            mma if mma.starts_with("wgmma.mma_async") => {
                let start = |descriptor: &str| (known(descriptor) & 0x3FFF) << 4;
                events.push(Event::Read {
                    a: start(&o[1]),
                    b: start(&o[2]),
                });
                None
            }
            "wgmma.commit_group.sync.aligned" => {
                events.push(Event::Commit);
                None
            }
            "wgmma.wait_group.sync.aligned" => {
                events.push(Event::Retire {
                    keep: known(&o[0]) as usize,
                });
                None
            }
            // The start's block-wide barrier: the ring's initialisation, before any fill.
            "bar.sync" if o.len() == 1 => None,
            "bar.sync" | "bar.arrive" => {
                let (id, threads) = (known(&o[0]), known(&o[1]));
                events.push(if op.opcode == "bar.sync" {
                    Event::BarrierWait { id, threads }
                } else {
                    Event::BarrierArrive { id, threads }
                });
                None
            }
            // Cluster barriers, fences, register reallocation, stores, TMA stores and their
            // waits: no part of the ring's protocol the consumers run.
            other
                if [
                    "barrier.cluster.",
                    "fence.",
                    "setmaxnreg.",
                    "wgmma.fence",
                    "prefetch.",
                    "st.",
                    "stmatrix.",
                    "cp.async.bulk.",
                ]
                .iter()
                .any(|prefix| other.starts_with(prefix)) =>
            {
                None
            }
            // Float arithmetic, conversions and loads of data: untracked values.
            _ => Some(None),
        };
        if let Some(result) = result {
            let destination = &o[0];
            if destination.starts_with('{') {
                for register in destination.trim_matches(['{', '}', ' ']).split(", ") {
                    registers.insert(register.to_string(), None);
                }
            } else {
                registers.insert(destination.clone(), result);
            }
        }
    }
    events
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
        self.arrive_n(1)
    }

    /// `count` arrivals at once (a warp's threads).
    fn arrive_n(&mut self, count: u32) -> Result<(), String> {
        if self.pending < count {
            return Err("arrival on a barrier whose phase has no pending arrivals".into());
        }
        self.pending -= count;
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

/// A consumer warp that runs its replayed events.
#[derive(Clone, Debug)]
struct ScriptedWarp {
    events: Vec<Event>,
    next: usize,
    /// The named barrier and generation it has arrived at and waits to pass.
    at_barrier: Option<(u64, u64)>,
    /// The slot and fill of its last full-barrier wait.
    waited: Option<(u64, u64)>,
    /// Fills read since the last commit, and per committed group not retired yet.
    open: Vec<u64>,
    groups: Vec<Vec<u64>>,
    /// Between a tile's first wgmma and the `wait_group 0` that retires its last.
    computing: bool,
}

impl ScriptedWarp {
    fn reading(&self, fill: u64) -> bool {
        self.open.contains(&fill) || self.groups.iter().any(|group| group.contains(&fill))
    }
}

/// A named barrier of a block: warps arrived in the current generation, and its count.
#[derive(Clone, Copy, Debug, Default)]
struct NamedBarrier {
    arrived: u64,
    generation: u64,
    threads: u64,
}

impl NamedBarrier {
    /// One warp arrives (32 threads); the generation completes at the barrier's count.
    fn arrive(&mut self, id: u64, threads: u64) -> Result<u64, String> {
        if self.arrived > 0 && self.threads != threads {
            return Err(format!(
                "named barrier {id} is used with {} and {threads} threads",
                self.threads
            ));
        }
        self.threads = threads;
        let generation = self.generation;
        self.arrived += 1;
        if self.arrived * 32 == threads {
            self.arrived = 0;
            self.generation += 1;
        }
        Ok(generation)
    }
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
    /// The consumer warps: modelled from the protocol, or replayed (ping-pong).
    warps: Vec<Warp>,
    scripted: Vec<ScriptedWarp>,
    barriers: HashMap<u64, NamedBarrier>,
    exited: bool,
}

impl Block {
    /// Every thread is through: the producer's fills and drain, every consumer warp's fills.
    fn finished(&self, fills: u64, p: &Protocol) -> bool {
        self.producer_fill == fills
            && self.drained == p.drain_slots
            && self.warps.iter().all(|w| w.step == WarpStep::Done)
            && self.scripted.iter().all(|w| w.next == w.events.len())
    }
}

/// A release on its way to a peer block's empty barrier: `count` arrivals (a warp's).
#[derive(Clone, Copy, Debug)]
struct RemoteRelease {
    dest: usize,
    slot: usize,
    count: u32,
}

/// A copy in flight, and what its landing does to the slot's full barrier.
#[derive(Clone, Copy, Debug)]
struct Load {
    dest: usize,
    slot: u32,
    fill: u64,
    bytes: u32,
    completion: Completion,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Completion {
    /// A TMA or bulk copy: completes its bytes (`complete_tx`).
    Bytes,
    /// A `cp.async` followed by `cp.async.mbarrier.arrive.noinc`: arrives once it lands.
    Arrival,
    /// A `cp.async` nothing waits for.
    Nothing,
}

/// What every thread that has not finished waits for, for a deadlock's message.
fn waits(blocks: &[Block], fills: u64, p: &Protocol) -> String {
    let stages = u64::from(p.stages);
    let stage_bytes = p.unicast_bytes + p.multicast_bytes * p.blocks + p.async_bytes;
    let mut waits = Vec::new();
    for (b, block) in blocks.iter().enumerate() {
        let f = block.producer_fill + u64::from(block.drained);
        if block.producer_fill < fills || block.drained < p.drain_slots {
            waits.push(format!(
                "block {b}'s producer waits for slot {}'s release (fill {f})",
                f % stages
            ));
        }
        for (slot, full) in block.full.iter().enumerate() {
            let (fill, bytes) = block.landed[slot];
            if full.tx < 0 {
                waits.push(format!(
                    "block {b} slot {slot}'s full barrier has {} bytes landed beyond those announced",
                    -full.tx
                ));
            } else if fill != u64::MAX
                && bytes == stage_bytes
                && full.completed <= fill / stages
                && full.tx == 0
            {
                waits.push(format!(
                    "block {b} slot {slot}'s full barrier has fill {fill}'s bytes and waits for {} more arrivals",
                    full.pending
                ));
            }
        }
        if !block.warps.is_empty() {
            waits.push(format!(
                "block {b}'s consumer warps at fills {:?}",
                block
                    .warps
                    .iter()
                    .map(|w| (w.fill, w.step))
                    .collect::<Vec<_>>()
            ));
        }
        let mut seen = Vec::new();
        for (w, warp) in block.scripted.iter().enumerate() {
            let group = w / p.warps_per_fill() as usize;
            let wait = match warp.events.get(warp.next) {
                Some(Event::BarrierWait { id, threads }) => {
                    let barrier = block.barriers.get(id).copied().unwrap_or_default();
                    format!(
                        "block {b} warpgroup {group} waits at named barrier {id} ({} of {} warps arrived)",
                        barrier.arrived,
                        threads / 32
                    )
                }
                Some(Event::WaitFull {
                    slot,
                    parity,
                    tile,
                    k,
                }) => format!(
                    "block {b} warpgroup {group} waits for tile {tile}'s k tile {k} on slot {slot}'s full barrier, parity {parity}"
                ),
                _ => continue,
            };
            if !seen.contains(&wait) {
                seen.push(wait);
            }
        }
        waits.extend(seen);
    }
    waits.join("; ")
}

/// Runs the protocol for units of work of `units[i]` fills each (whole output tiles, or
/// stream-K pieces of one) under the schedule `choose` picks; the error says what broke.
/// Ping-pong consumer warps run `scripts` (per block, per warp: replayed from the kernel for
/// these units, whole tiles of equal length).
fn run(
    p: &Protocol,
    units: &[u64],
    scripts: Option<&[Vec<Vec<Event>>]>,
    mut choose: impl FnMut(usize) -> usize,
) -> Result<(), String> {
    assert!(units.iter().all(|&fills| fills > 0), "{units:?}");
    // The fills that start a unit, and the fills that end one.
    let mut starts = std::collections::BTreeSet::new();
    let mut ends = std::collections::BTreeSet::new();
    let mut fills = 0;
    for &unit in units {
        starts.insert(fills);
        fills += unit;
        ends.insert(fills - 1);
    }
    let stages = u64::from(p.stages);
    let stage_bytes = p.unicast_bytes + p.multicast_bytes * p.blocks + p.async_bytes;
    let mut blocks: Vec<Block> = (0..p.blocks as usize)
        .map(|b| Block {
            full: (0..p.stages).map(|_| Mbarrier::new(p.full_init)).collect(),
            empty: (0..p.stages).map(|_| Mbarrier::new(p.empty_init)).collect(),
            landed: vec![(u64::MAX, 0); p.stages as usize],
            producer_fill: 0,
            drained: 0,
            exited: false,
            warps: match scripts {
                Some(_) => Vec::new(),
                None => (0..p.consumer_warps)
                    .map(|_| Warp {
                        fill: 0,
                        step: WarpStep::WaitFull,
                        reading: Vec::new(),
                        released_through: None,
                    })
                    .collect(),
            },
            scripted: scripts.map_or_else(Vec::new, |scripts| {
                scripts[b]
                    .iter()
                    .map(|events| ScriptedWarp {
                        events: events.clone(),
                        next: 0,
                        at_barrier: None,
                        waited: None,
                        open: Vec::new(),
                        groups: Vec::new(),
                        computing: false,
                    })
                    .collect()
            }),
            barriers: HashMap::new(),
        })
        .collect();
    let warps_per_group = p.warps_per_fill() as usize;
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
                let enabled = match warp.step {
                    WarpStep::WaitFull => block.full[slot]
                        .passes(parity(warp.fill / stages, !p.consumers_wait_lap_phase)),
                    WarpStep::Release => true,
                    WarpStep::Done => false,
                };
                if enabled {
                    actions.push((1, b, w));
                }
            }
            for (w, warp) in block.scripted.iter().enumerate() {
                let enabled = match warp.events.get(warp.next) {
                    None => false,
                    Some(Event::WaitFull { slot, parity, .. }) => {
                        block.full[*slot as usize].passes(*parity)
                    }
                    Some(Event::BarrierWait { id, .. }) => warp
                        .at_barrier
                        .is_none_or(|(_, generation)| block.barriers[id].generation > generation),
                    Some(_) => true,
                };
                if enabled {
                    actions.push((5, b, w));
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
            if blocks.iter().all(|b| b.exited) {
                return Ok(());
            }
            return Err(format!("deadlock: {}", waits(&blocks, fills, p)));
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
                for &bytes in &p.unicast_copies {
                    in_flight.push(Load {
                        dest: b,
                        slot,
                        fill: f,
                        bytes,
                        completion: Completion::Bytes,
                    });
                }
                for &bytes in &p.multicast_copies {
                    for dest in 0..p.blocks as usize {
                        in_flight.push(Load {
                            dest,
                            slot,
                            fill: f,
                            bytes,
                            completion: Completion::Bytes,
                        });
                    }
                }
                // A `cp.async` copy lands whether or not its completion arrives anywhere.
                if p.async_bytes > 0 {
                    in_flight.push(Load {
                        dest: b,
                        slot,
                        fill: f,
                        bytes: p.async_bytes,
                        completion: if p.async_arrivals > 0 {
                            Completion::Arrival
                        } else {
                            Completion::Nothing
                        },
                    });
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
                            blocks[b].empty[s].arrive_n(p.release_arrivals)?;
                            if p.releases_remote {
                                for dest in (0..blocks.len()).filter(|&peer| peer != b) {
                                    releases_in_flight.push(RemoteRelease {
                                        dest,
                                        slot: s,
                                        count: p.release_arrivals,
                                    });
                                }
                            }
                            blocks[b].warps[index].released_through = Some(r);
                        }
                        let warp = &mut blocks[b].warps[index];
                        warp.fill = f + 1;
                        warp.step = if warp.fill == fills {
                            WarpStep::Done
                        } else {
                            WarpStep::WaitFull
                        };
                    }
                    WarpStep::Done => unreachable!(),
                }
            }
            3 => {
                if let Some((id, barrier)) = blocks[b]
                    .barriers
                    .iter()
                    .find(|(_, barrier)| barrier.arrived > 0)
                {
                    return Err(format!(
                        "block {b} exits with {} of named barrier {id}'s {} warps arrived: a turn handed over that no warpgroup takes",
                        barrier.arrived,
                        barrier.threads / 32
                    ));
                }
                blocks[b].exited = true;
            }
            // A release lands on a peer's empty barrier, which must still exist.
            4 => {
                let release = releases_in_flight.swap_remove(index);
                if blocks[release.dest].exited {
                    return Err(format!(
                        "a release lands on block {}'s slot {} after the block exited",
                        release.dest, release.slot
                    ));
                }
                blocks[release.dest].empty[release.slot].arrive_n(release.count)?;
            }
            // A replayed consumer warp's next event.
            5 => {
                let group = index / warps_per_group;
                let block = &mut blocks[b];
                let event = block.scripted[index].events[block.scripted[index].next];
                let mut advance = true;
                match event {
                    Event::WaitFull {
                        slot,
                        parity: _,
                        tile,
                        k,
                    } => {
                        // The walk's tiles, in order, are the producer's units.
                        let want = tile * units[0] + k;
                        let (fill, bytes) = block.landed[slot as usize];
                        if fill != want || bytes != stage_bytes {
                            let found = if fill == u64::MAX {
                                "no fill".to_string()
                            } else {
                                format!(
                                    "fill {fill} (tile {}'s k tile {}) with {bytes} of {stage_bytes} bytes",
                                    fill / units[0],
                                    fill % units[0]
                                )
                            };
                            return Err(format!(
                                "block {b} warpgroup {group} passes its wait for tile {tile}'s k tile {k} (fill {want}) on slot {slot} and finds {found} there"
                            ));
                        }
                        let warp = &mut block.scripted[index];
                        warp.waited = Some((slot, fill));
                        warp.open.push(fill);
                    }
                    Event::Read { a, b: b_address } => {
                        let (slot, _) = block.scripted[index]
                            .waited
                            .ok_or("a wgmma reads before any wait")?;
                        let stage = slot * u64::from(p.stage_stride)
                            ..(slot + 1) * u64::from(p.stage_stride);
                        if !stage.contains(&a) || !stage.contains(&b_address) {
                            return Err(format!(
                                "block {b} warpgroup {group} waits on slot {slot}'s barrier and its wgmma reads addresses {a} and {b_address}, outside the slot's stage"
                            ));
                        }
                        if !block.scripted[index].computing {
                            let other =
                                block.scripted.iter().enumerate().find(|(w, warp)| {
                                    w / warps_per_group != group && warp.computing
                                });
                            if let Some((w, _)) = other {
                                return Err(format!(
                                    "block {b}: warpgroups {group} and {} at the tensor cores at once",
                                    w / warps_per_group
                                ));
                            }
                            block.scripted[index].computing = true;
                        }
                    }
                    Event::Commit => {
                        let warp = &mut block.scripted[index];
                        let group = std::mem::take(&mut warp.open);
                        warp.groups.push(group);
                    }
                    Event::Retire { keep } => {
                        let warp = &mut block.scripted[index];
                        let retired = warp.groups.len().saturating_sub(keep);
                        warp.groups.drain(..retired);
                        if keep == 0 {
                            warp.computing = false;
                        }
                    }
                    Event::Release { block: peer, slot } => {
                        // Lane 0 stands for its warp's threads where each releases.
                        if peer == 0 {
                            block.empty[slot as usize].arrive_n(p.release_arrivals)?;
                        } else {
                            releases_in_flight.push(RemoteRelease {
                                dest: (b + peer as usize) % p.blocks as usize,
                                slot: slot as usize,
                                count: p.release_arrivals,
                            });
                        }
                    }
                    Event::BarrierWait { id, threads } => match block.scripted[index].at_barrier {
                        None => {
                            let generation =
                                block.barriers.entry(id).or_default().arrive(id, threads)?;
                            block.scripted[index].at_barrier = Some((id, generation));
                            advance = false;
                        }
                        Some(_) => block.scripted[index].at_barrier = None,
                    },
                    Event::BarrierArrive { id, threads } => {
                        let waited = block
                            .scripted
                            .iter()
                            .any(|warp| warp.events.contains(&Event::BarrierWait { id, threads }));
                        if !waited {
                            return Err(format!(
                                "block {b} warpgroup {group} arrives at named barrier {id}, which no warpgroup waits at"
                            ));
                        }
                        block.barriers.entry(id).or_default().arrive(id, threads)?;
                    }
                    Event::ExpectTx { .. }
                    | Event::TensorLoad { .. }
                    | Event::BulkCopy { .. }
                    | Event::AsyncCopy { .. }
                    | Event::AsyncArrive => {
                        return Err(format!("a consumer warp copies into the ring: {event:?}"));
                    }
                }
                if advance {
                    block.scripted[index].next += 1;
                }
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
                let older = load.fill.checked_sub(stages);
                for (w, warp) in block.warps.iter().enumerate() {
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
                if let Some(older) = older {
                    if let Some(w) = block.scripted.iter().position(|w| w.reading(older)) {
                        return Err(format!(
                            "fill {} lands in block {} slot {} before warp {w} retired its reads of fill {older}",
                            load.fill, load.dest, load.slot
                        ));
                    }
                }
                let landed = &mut block.landed[load.slot as usize];
                if landed.0 != load.fill {
                    *landed = (load.fill, 0);
                }
                landed.1 += load.bytes;
                match load.completion {
                    Completion::Bytes => block.full[load.slot as usize].complete_tx(load.bytes),
                    Completion::Arrival => block.full[load.slot as usize].arrive()?,
                    Completion::Nothing => {}
                }
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
    for (walk_index, units) in walks.iter().enumerate() {
        assert!(units.iter().sum::<u64>() >= 3 * stages);
        // Ping-pong consumer warps run what the kernel's text does on this walk. The warps of
        // a warpgroup do the same with the ring (the first walk replays each to check so);
        // the other walks replay one warp per warpgroup.
        let scripts: Option<Vec<Vec<Vec<Event>>>> = p.pingpong.then(|| {
            let group = u64::from(p.warps_per_fill());
            (0..u64::from(p.blocks))
                .map(|rank| {
                    (0..u64::from(p.consumer_warps) / group)
                        .flat_map(|consumer| {
                            let walk = (units.len() as u64, units[0]);
                            let first = replay_consumer(&p.kernel, (consumer, 0, rank), walk);
                            (0..group)
                                .map(move |warp| {
                                    if walk_index == 0 && warp > 0 {
                                        let own = replay_consumer(
                                            &p.kernel,
                                            (consumer, warp, rank),
                                            walk,
                                        );
                                        assert_eq!(
                                            own, first,
                                            "warp {warp} of consumer {consumer}"
                                        );
                                    }
                                    first.clone()
                                })
                                .collect::<Vec<_>>()
                        })
                        .collect()
                })
                .collect()
        });
        let scripts = scripts.as_deref();
        // Producers first, consumers first, loads first; then random interleavings.
        for policy in 0..3u8 {
            run(p, units, scripts, |n| match policy {
                0 => 0,
                1 => n / 2,
                _ => n - 1,
            })?;
        }
        for seed in 0..40 {
            let mut schedule = Schedule(seed * 7919 + walk_index as u64);
            run(p, units, scripts, |n| schedule.next(n))?;
        }
    }
    Ok(())
}

/// Fused epilogues and fp8 variants beyond the catalog's: C-in, bias and activations on every
/// schedule (their C-in loads complete barriers of their own, outside the ring), fp8 with block
/// scales (whose scales ride in the ring: a bulk copy of A's and a `cp.async` of B's, and
/// every consumer thread releases) on stream-K units and in clusters, promotion, e5m2.
const FUSED_AND_FP8: &[&str] = &[
    "name: f, arch: sm_90a, mma: wgmma, tile: 128x256x64, schedule: persistent, scale: alpha_beta, bias: col, activation: gelu",
    "name: f, arch: sm_90a, mma: wgmma, tile: 128x128x64, consumers: pingpong, stages: 6, schedule: persistent, scale: alpha_beta, bias: col, activation: gelu",
    "name: f, arch: sm_90a, mma: wgmma, tile: 64x128x64, consumers: pingpong, stages: 4, schedule: persistent, bias: row, activation: silu, aux: pre_activation",
    "name: f, arch: sm_90a, mma: wgmma, tile: 64x128x64, consumers: 1, stages: 6, schedule: persistent(tail = stream_k), scale: alpha_beta, bias: col",
    "name: f, arch: sm_90a, mma: wgmma, layout: rc, schedule: persistent, cluster: 1x2, copy: tma(multicast = 2), scale: alpha_beta, activation: silu",
    "name: f, arch: sm_90a, mma: wgmma, tile: 64x128x64, consumers: 1, epilogue: direct, scale: alpha_beta, activation: gelu",
    "name: f, arch: sm_90a, mma: wgmma, dtype: e4m3, out: bf16, layout: rc, tile: 128x128x128, consumers: pingpong, stages: 6, schedule: persistent, quant: tensor, scale: alpha_beta, bias: col",
    "name: f, arch: sm_90a, mma: wgmma, dtype: e5m2, b_dtype: e4m3, out: bf16, layout: rc, tile: 128x128x128, consumers: pingpong, stages: 6, schedule: persistent, quant: tensor",
    "name: f, arch: sm_90a, mma: wgmma, dtype: e4m3, out: bf16, layout: rc, tile: 128x128x128, consumers: 2, stages: 5, schedule: persistent, quant: tensor, promote: 256",
    "name: f, arch: sm_90a, mma: wgmma, dtype: e4m3, out: bf16, layout: rc, tile: 64x128x128, consumers: 1, stages: 6, schedule: persistent(tail = stream_k), quant: block, promote: 128",
    "name: f, arch: sm_90a, mma: wgmma, dtype: e4m3, out: bf16, layout: rc, tile: 128x128x128, consumers: 2, stages: 5, schedule: persistent, copy: tma(multicast = 2), cluster: 2x1, quant: block, promote: 128",
    "name: f, arch: sm_90a, mma: wgmma, dtype: e4m3, out: f32, layout: rc, tile: 128x128x128, consumers: 2, stages: 3, quant: block, promote: 128, scale: alpha, bias: col, activation: relu",
];

fn hopper_specs() -> Vec<Emitted> {
    let catalog = gemm_codegen::catalog::CATALOG
        .iter()
        .chain(gemm_codegen::catalog::FP8)
        .filter(|e| e.spec.contains("mma: wgmma"))
        .map(|e| e.spec);
    let mut specs: Vec<Emitted> = catalog
        .chain(FUSED_AND_FP8.iter().copied())
        .map(|spec| gemm_codegen::emit_str(spec).unwrap_or_else(|e| panic!("{spec}: {e}")))
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
        assert_eq!(p.full_init, 1 + p.async_arrivals, "{}", emitted.spec_text());
        assert_eq!(
            p.expect_tx,
            p.unicast_bytes + p.multicast_bytes * p.blocks,
            "{}",
            emitted.spec_text()
        );
        assert_eq!(
            p.empty_init,
            p.warps_per_fill() * p.blocks * p.release_arrivals,
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

/// Each way a ping-pong ring could be wrong, written into the PTX, is caught, each by what it
/// breaks: the replay reads the consumers' ring positions, phases, turn barriers and
/// hand-overs from the edited text.
#[test]
fn broken_pingpong_rings_are_caught() {
    let base = gemm_codegen::emit_str(
        "name: ring, arch: sm_90a, mma: wgmma, tile: 64x128x64, consumers: pingpong, stages: 3, schedule: persistent",
    )
    .unwrap();
    let good = protocol(&base);
    assert!(good.pingpong);
    check(&good).unwrap();
    let ptx = base.ptx();
    // The text with the `nth` occurrence (0: the first) of `from` replaced.
    let edit = |from: &str, to: &str, nth: usize| -> String {
        let at = ptx
            .match_indices(from)
            .nth(nth)
            .unwrap_or_else(|| panic!("no {from} #{nth}"))
            .0;
        format!("{}{to}{}", &ptx[..at], &ptx[at + from.len()..])
    };
    let doubled_empty_counts = (0..good.stages).fold(ptx.to_string(), |text, slot| {
        let line = |count| format!("[%empty_bar+{}], {count};", slot * 8);
        text.replacen(&line(good.empty_init), &line(good.empty_init * 2), 1)
    });
    let turn_threads = ptx
        .replace("%turn_own, 256;", "%turn_own, 128;")
        .replace("%turn_other, 256;", "%turn_other, 128;");
    let cases = [
        (
            "no turn: the second warpgroup starts its first tile under the first's",
            edit("\t@%p_turn bar.sync\t%turn_own, 256;\n", "", 0),
            // Whichever warpgroup hands over first: its turn barrier has no waiter.
            ", which no warpgroup waits at",
        ),
        (
            "no hand-over: the second warpgroup waits for a turn that never comes",
            edit("\t@%p_handoff bar.arrive\t%turn_other, 256;\n", "", 0),
            "warpgroup 1 waits at named barrier 4 (4 of 8 warps arrived)",
        ),
        (
            "a turn barrier of one warpgroup's threads: each passes its own",
            turn_threads,
            // Fill 3 waited for on the phase of fill 0, of the same parity.
            "passes its wait for tile 3's k tile 0 (fill 3) on slot 0 and finds fill 0",
        ),
        (
            "the turn handed over before the tile's last wgmmas retired",
            {
                let hand_over = "\tadd.u32\t%ring_pos, %tile, %grid_blocks;\n\tsetp.lt.u32\t%p_handoff, %ring_pos, %tiles;\n\t@%p_handoff bar.arrive\t%turn_other, 256;\n";
                let retire = "\twgmma.wait_group.sync.aligned\t0;\n";
                let text = ptx.replacen(hand_over, "", 1);
                let at = text.find(retire).expect("the last retirement");
                format!("{}{hand_over}{}", &text[..at], &text[at..])
            },
            "block 0: warpgroups 0 and 1 at the tensor cores at once",
        ),
        (
            "the other warpgroup's barrier id swapped for one nobody waits on",
            edit(
                "sub.u32\t%turn_other, 7, %turn_own;",
                "sub.u32\t%turn_other, 8, %turn_own;",
                0,
            ),
            "block 0 warpgroup 0 arrives at named barrier 5, which no warpgroup waits at",
        ),
        (
            "a hand-over after the last tile: the turn is left at the barrier",
            edit(
                "setp.lt.u32\t%p_handoff, %ring_pos, %tiles;",
                "setp.le.u32\t%p_handoff, %ring_pos, %tiles;",
                0,
            ),
            "block 0 exits with 4 of named barrier 3's 8 warps arrived",
        ),
        (
            "no skip: a warpgroup reads the other's fills after its own tile",
            edit(
                "add.u32\t%ring_pos, %slot, %k_tiles;",
                "mov.u32\t%ring_pos, %slot;",
                0,
            ),
            "wait for tile 2's k tile 0 (fill 2) on slot 1 and finds fill 1 (tile 1's k tile 0)",
        ),
        (
            "the skip's phase never flips: a lap's parity is waited for a lap late or early",
            edit(
                "xor.b32\t%phase, %phase, %ring_pos;",
                "xor.b32\t%phase, %phase, 0;",
                1,
            ),
            // Fill 3 waited for on the phase of fill 0, of the same parity.
            "warpgroup 1 passes its wait for tile 3's k tile 0 (fill 3) on slot 0 and finds fill 0",
        ),
        (
            "the skip's slot wraps at the wrong count",
            edit(
                &format!("rem.u32\t%slot, %ring_pos, {};", good.stages),
                &format!("rem.u32\t%slot, %ring_pos, {};", good.stages - 1),
                1,
            ),
            // Fill 2 is slot 2's.
            "warpgroup 0 passes its wait for tile 2's k tile 0 (fill 2) on slot 0 and finds fill 0",
        ),
        (
            "the wgmmas read another slot's stage than the one waited for",
            edit(
                "mad.lo.u32\t%a_stage, %slot, ",
                "mad.lo.u32\t%a_stage, %ring_pos, ",
                0,
            ),
            "outside the slot's stage",
        ),
        (
            "an empty barrier counting both warpgroups' warps: a slot is never released",
            doubled_empty_counts,
            "block 0's producer waits for slot 0's release (fill 3)",
        ),
    ];
    for (what, text, want) in cases {
        assert_ne!(text, ptx, "{what}: the edit changes the kernel");
        let error = check(&protocol_of(&base, &text)).expect_err(&format!("{what}: passed"));
        eprintln!("{what}: {error}");
        assert!(error.contains(want), "{what}: {error}");
    }
}

/// Block scales ride in the ring: the fill's bytes announced must include A's scale rows,
/// and the `cp.async` of B's scale must arrive on the full barrier; each way of breaking that,
/// written into the PTX, is caught.
#[test]
fn broken_block_scale_rings_are_caught() {
    let base = gemm_codegen::emit_str(
        "name: ring, arch: sm_90a, mma: wgmma, dtype: e4m3, out: bf16, layout: rc, tile: 128x128x128, consumers: 2, stages: 3, schedule: persistent, quant: block, promote: 128",
    )
    .unwrap();
    let good = protocol(&base);
    // A's 128 rows of 4-byte scales in the bulk copy, B's one scale by cp.async.
    assert_eq!(
        (
            good.expect_tx,
            good.async_bytes,
            good.async_arrivals,
            good.release_arrivals
        ),
        (2 * 16384 + 128 * 4, 4, 1, 32)
    );
    check(&good).unwrap();
    let ptx = base.ptx();
    let edit = |from: &str, to: &str| {
        assert_eq!(ptx.matches(from).count(), 1, "{from}");
        ptx.replace(from, to)
    };
    let cases = [
        (
            "the scale rows' bytes left out of the announcement",
            edit(
                "add.u32\t%ps_tx, %ps_rows_bytes, 32768;",
                "mov.u32\t%ps_tx, 32768;",
            ),
            "block 0 slot 0's full barrier has 512 bytes landed beyond those announced",
        ),
        (
            "B's scale copied without an arrival on the full barrier",
            edit(
                "\tcp.async.mbarrier.arrive.noinc.shared::cta.b64\t[%full_addr];\n",
                "",
            ),
            "block 0 slot 0's full barrier has fill 0's bytes and waits for 1 more arrivals",
        ),
    ];
    for (what, text, want) in cases {
        let error = check(&protocol_of(&base, &text)).expect_err(&format!("{what}: passed"));
        eprintln!("{what}: {error}");
        assert!(error.contains(want), "{what}: {error}");
    }
}
