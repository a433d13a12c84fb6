//! The stream-K walk of the Hopper family, replayed from the emitted PTX: the setup of the
//! tail (`stream_k_setup`), each role's next unit and advance (`stream_k_next_unit`,
//! `walk_advance`) and the consumers' fixup (`stream_k_fixup`) are cut out of each kernel's
//! text and run on the CPU, every walker (and every block of its cluster) at once over a
//! shared workspace of records and flags, as the grid runs them when all of it is resident.
//!
//! The walk must compute every k tile of every tile exactly once; each tile has one finisher
//! (the unit that starts it), which adds the sums of exactly the walkers that share the tile,
//! all after it in walker order, each published before it is read; the producer walks the
//! units the consumers walk; every flag is clear again at the end; and the walkers finish
//! whichever of them runs first (no walker waits on one that waits on it).
//!
//! The sums themselves are replayed too: after its main loop a unit's accumulators hold a
//! model value of its k tiles (per tile, block rank and accumulator), and the fixup's stores
//! (`st.global.v4.f32`), loads (`ld.global.cg.v4.f32`) and `add.f32` run on those values. A
//! store reaches the other walkers only at the writer's `fence.acq_rel.gpu` (a load of sums no
//! fence published fails), other walkers may run between a flag's store and what follows it,
//! and each finisher's accumulators must hold its tile's whole sum. The fp8 kernels (tensor
//! and block scales) and a fused epilogue's walk the same way.

use gemm_codegen::emit_str;
use gemm_codegen::gemm_dsl::StreamKSplit;
use std::collections::{BTreeSet, HashMap};
use std::hash::{BuildHasherDefault, Hasher};

/// A fast hash for the replay's registers and workspace (the default SipHash dominated its
/// time): multiply-rotate over the key's words.
#[derive(Default)]
struct Quick(u64);

impl Hasher for Quick {
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(word));
        }
    }

    fn write_u64(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x517c_c1b7_2722_0a95);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

type Map<K, V> = HashMap<K, V, BuildHasherDefault<Quick>>;

/// One instruction of the replayed text: its guard, opcode and operands.
#[derive(Clone, Debug)]
struct Instruction {
    guard: Option<(bool, String)>,
    opcode: String,
    operands: Vec<String>,
    text: String,
}

/// A line of a replayed program: a label, an instruction, or the points the replay watches.
#[derive(Clone, Debug)]
enum Line {
    Label(String),
    Op(Instruction),
    /// The unit (`%tile`, `%k_first`, `%k_count`) is computed here.
    Unit,
    /// The main loop is over: the `count` accumulators hold the unit's sums.
    Accumulate {
        count: usize,
    },
    /// The consumers' fixup is over: the finisher stores the tile (or skips the store).
    FixedUp,
    Exit,
}

fn parse(line: &str) -> Option<Line> {
    let line = line.trim();
    if line.is_empty()
        || line.starts_with("//")
        || line.starts_with('.')
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
    let mut split = Vec::new();
    let mut depth = 0;
    let mut current = String::new();
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

/// The lines from the first that contains `from` through the first after it that `to` accepts.
fn cut<'p>(ptx: &'p str, from: &str, to: impl Fn(&str) -> bool) -> Vec<&'p str> {
    let lines: Vec<&str> = ptx.lines().collect();
    let start = lines
        .iter()
        .position(|line| line.contains(from))
        .unwrap_or_else(|| panic!("no `{from}` in the kernel"));
    let end = start
        + lines[start..]
            .iter()
            .position(|line| to(line.trim()))
            .unwrap_or_else(|| panic!("`{from}` does not end"));
    lines[start..=end].to_vec()
}

/// A role's walk as the kernel writes it: the setup, the walk's first tile, the next unit,
/// then (consumers) the fixup, and the advance back to the next unit.
fn walk_program(ptx: &str, role: &str) -> Vec<Line> {
    let mut program: Vec<Line> = Vec::new();
    let push = |program: &mut Vec<Line>, lines: Vec<&str>| {
        program.extend(lines.into_iter().filter_map(parse))
    };
    push(
        &mut program,
        cut(
            ptx,
            "// Stream-K: the tiles of whole rounds go whole",
            |line| line == "}",
        ),
    );
    // `mov.u32 %tile, <walker>;` right before the role's loop label.
    let lines: Vec<&str> = ptx.lines().collect();
    let label = format!("$L_{role}_tile:");
    let at = lines
        .iter()
        .position(|line| line.trim() == label)
        .unwrap_or_else(|| panic!("no {label}"));
    assert!(
        lines[at - 1].trim().starts_with("mov.u32\t%tile, "),
        "{}",
        lines[at - 1]
    );
    push(&mut program, vec![lines[at - 1]]);
    let unit_label = format!("$L_{role}_unit:");
    push(&mut program, cut(ptx, &label, |line| line == unit_label));
    program.push(Line::Unit);
    if role == "consumer" {
        program.push(Line::Accumulate {
            count: accumulators(ptx),
        });
        push(
            &mut program,
            cut(
                ptx,
                "// Stream-K: a unit that starts inside its tile",
                |line| line == "$L_fixed_up:",
            ),
        );
        program.push(Line::FixedUp);
    }
    let next = format!("$L_{role}_next:");
    push(
        &mut program,
        cut(ptx, &next, |line| line.starts_with("bra.uni")),
    );
    // Where the next unit goes when the walk is over.
    let done = program
        .iter()
        .find_map(|line| match line {
            Line::Op(op) if op.guard.as_ref().is_some_and(|g| g.1 == "%p_done") => {
                Some(op.operands[0].clone())
            }
            _ => None,
        })
        .expect("the walk ends somewhere");
    program.push(Line::Label(done));
    program.push(Line::Exit);
    program
}

/// The accumulators a consumer thread holds: `.reg .f32 %acc<N>;`.
fn accumulators(ptx: &str) -> usize {
    let declared = ptx
        .lines()
        .find_map(|line| line.trim().strip_prefix(".reg .f32\t%acc<"))
        .expect("the accumulators are declared");
    declared.trim_end_matches(">;").parse().unwrap()
}

/// `%acc0` .. `%acc{count - 1}`.
fn accumulator_names(count: usize) -> &'static [String] {
    static NAMES: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    &NAMES.get_or_init(|| (0..256).map(|i| format!("%acc{i}")).collect())[..count]
}

fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// The model's value of accumulator `index` after k tiles `k_first..k_first + k_count` of a
/// tile is `scale(tile, rank, index) * k_sum(k_first, k_count)`: a sum over those k tiles of a number each k tile of each tile, block rank and
/// accumulator has its own (wrapping 64-bit sums, so that adding partial sums is exact). The
/// sums of pieces that cover a tile's k tiles once add up to the whole tile's; a piece left
/// out or added twice, a partial added to another accumulator or another block's record do
/// not (but for a chance of 2^-64).
/// Each k tile's number is `scale(tile, rank, index) * mix(k)`.
fn scale(tile: u32, rank: u32, index: usize) -> u64 {
    mix((u64::from(tile) << 40) ^ (u64::from(rank) << 32) ^ index as u64) | 1
}

fn k_sum(k_first: u32, k_count: u32) -> u64 {
    (k_first..k_first + k_count).fold(0, |sum, k| sum.wrapping_add(mix(u64::from(k) ^ 0x5eed)))
}

/// What one unit of a walker computed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Unit {
    walker: u32,
    rank: u32,
    tile: u32,
    k_first: u32,
    k_count: u32,
}

/// The workspace: flags, the units whose sums each record slot holds, and the sums (per
/// 4-byte address) that a fence has made visible to other walkers.
#[derive(Default)]
struct Workspace {
    flags: Map<u64, u64>,
    slots: Map<u64, Unit>,
    values: Map<u64, u64>,
}

/// Base of the flags; the slots start at 0 (the replay sets `%ws_lane` and `%ws_flag`).
const FLAGS: u64 = 1 << 48;

/// One block running a role's walk.
struct Agent<'p> {
    program: &'p [Line],
    labels: Map<&'p str, usize>,
    pc: usize,
    registers: Map<String, u64>,
    walker: u32,
    rank: u32,
    units: Vec<Unit>,
    /// Per finished tile: the units whose sums the finisher added, in order.
    gathered: Vec<(Unit, Vec<Unit>)>,
    added: Vec<Unit>,
    /// Sums stored to the workspace that no fence has published yet.
    unfenced: Vec<(u64, u64)>,
    /// Instructions run so far, over every call of `run`.
    steps: u64,
    done: bool,
}

impl<'p> Agent<'p> {
    fn new(program: &'p [Line], inputs: &[(&str, u64)], walker: u32, rank: u32) -> Self {
        let labels = program
            .iter()
            .enumerate()
            .filter_map(|(i, line)| match line {
                Line::Label(label) => Some((label.as_str(), i)),
                _ => None,
            })
            .collect();
        let mut registers: Map<String, u64> = inputs
            .iter()
            .map(|&(name, value)| (name.to_string(), value))
            .collect();
        for special in ["%clusterid.x", "%ctaid.x"] {
            registers.insert(special.to_string(), u64::from(walker));
        }
        registers.insert("%rank".into(), u64::from(rank));
        registers.insert("%ws_lane".into(), 0);
        registers.insert("%ws_flag".into(), FLAGS);
        registers.insert("%p_wg_leader".into(), 1);
        Agent {
            program,
            labels,
            pc: 0,
            registers,
            walker,
            rank,
            units: Vec::new(),
            gathered: Vec::new(),
            added: Vec::new(),
            unfenced: Vec::new(),
            steps: 0,
            done: false,
        }
    }

    fn value(&self, operand: &str) -> u64 {
        operand
            .parse()
            .ok()
            .or_else(|| self.registers.get(operand).copied())
            .unwrap_or_else(|| panic!("{operand} read before it is written"))
    }

    /// `[%reg+offset]` as an address.
    fn address(&self, operand: &str) -> u64 {
        let inner = operand.trim_matches(['[', ']']);
        match inner.split_once('+') {
            Some((register, offset)) => self.value(register) + offset.parse::<u64>().unwrap(),
            None => self.value(inner),
        }
    }

    fn current_unit(&self) -> Unit {
        Unit {
            walker: self.walker,
            rank: self.rank,
            tile: self.value("%tile") as u32,
            k_first: self.value("%k_first") as u32,
            k_count: self.value("%k_count") as u32,
        }
    }

    /// Runs until the walk ends or waits on a flag that is not set; whether it moved, or an
    /// error if it runs on without either.
    fn run(&mut self, workspace: &mut Workspace) -> Result<bool, String> {
        let start = self.pc;
        let mut steps = 0u32;
        while !self.done {
            steps += 1;
            self.steps += 1;
            if self.steps > 1_000_000 {
                return Err(format!("walker {} runs away", self.walker));
            }
            let line = &self.program[self.pc];
            self.pc += 1;
            let op = match line {
                Line::Label(_) => continue,
                Line::Exit => {
                    self.done = true;
                    break;
                }
                Line::Unit => {
                    self.units.push(self.current_unit());
                    continue;
                }
                Line::Accumulate { count } => {
                    let unit = self.current_unit();
                    let k_sum = k_sum(unit.k_first, unit.k_count);
                    for (index, name) in accumulator_names(*count).iter().enumerate() {
                        let sum = scale(unit.tile, unit.rank, index).wrapping_mul(k_sum);
                        match self.registers.get_mut(name) {
                            Some(register) => *register = sum,
                            None => {
                                self.registers.insert(name.clone(), sum);
                            }
                        }
                    }
                    continue;
                }
                Line::FixedUp => {
                    let unit = self.current_unit();
                    if unit.k_first == 0 {
                        // The finisher (or a whole tile) holds the tile's sums.
                        let whole = k_sum(0, self.value("%k_tiles") as u32);
                        let count = (0..)
                            .take_while(|i| self.registers.contains_key(&format!("%acc{i}")))
                            .count();
                        assert!(count > 0, "the accumulators are set");
                        for (index, name) in accumulator_names(count).iter().enumerate() {
                            if self.registers[name]
                                != scale(unit.tile, unit.rank, index).wrapping_mul(whole)
                            {
                                return Err(format!(
                                    "walker {} finishes tile {} with accumulator {index} other than its k tiles' sum",
                                    self.walker, unit.tile
                                ));
                            }
                        }
                        self.gathered.push((unit, std::mem::take(&mut self.added)));
                    }
                    continue;
                }
                Line::Op(op) => op,
            };
            if let Some((negated, predicate)) = &op.guard {
                if (self.value(predicate) != 0) == *negated {
                    continue;
                }
            }
            let o = &op.operands;
            let u32_of = |agent: &Self, i: usize| agent.value(&o[i]) as u32;
            let result: Option<u64> = match op.opcode.as_str() {
                "mov.u32" => Some(u64::from(u32_of(self, 1))),
                "add.u32" => Some(u64::from(u32_of(self, 1).wrapping_add(u32_of(self, 2)))),
                "sub.u32" => Some(u64::from(u32_of(self, 1).wrapping_sub(u32_of(self, 2)))),
                "mul.lo.u32" => Some(u64::from(u32_of(self, 1).wrapping_mul(u32_of(self, 2)))),
                "mad.lo.u32" => Some(u64::from(
                    u32_of(self, 1)
                        .wrapping_mul(u32_of(self, 2))
                        .wrapping_add(u32_of(self, 3)),
                )),
                "div.u32" => Some(u64::from(u32_of(self, 1) / u32_of(self, 2))),
                "rem.u32" => Some(u64::from(u32_of(self, 1) % u32_of(self, 2))),
                "min.u32" => Some(u64::from(u32_of(self, 1).min(u32_of(self, 2)))),
                "shl.b32" => Some(u64::from(u32_of(self, 1) << u32_of(self, 2))),
                "mul.wide.u32" => Some(u64::from(u32_of(self, 1)) * u64::from(u32_of(self, 2))),
                "cvt.u64.u32" => Some(u64::from(u32_of(self, 1))),
                "cvt.u32.u64" => Some(self.value(&o[1]) & 0xFFFF_FFFF),
                "mul.lo.u64" => Some(self.value(&o[1]).wrapping_mul(self.value(&o[2]))),
                "div.u64" => Some(self.value(&o[1]) / self.value(&o[2])),
                "min.u64" => Some(self.value(&o[1]).min(self.value(&o[2]))),
                "max.u64" => Some(self.value(&o[1]).max(self.value(&o[2]))),
                "add.u64" => Some(self.value(&o[1]).wrapping_add(self.value(&o[2]))),
                op_name if op_name.starts_with("setp.") => {
                    let (a, b) = (u32_of(self, 1), u32_of(self, 2));
                    let holds = match op_name {
                        "setp.eq.u32" => a == b,
                        "setp.ne.u32" => a != b,
                        "setp.lt.u32" => a < b,
                        "setp.le.u32" => a <= b,
                        "setp.gt.u32" => a > b,
                        "setp.ge.u32" => a >= b,
                        other => panic!("the replay does not know {other}: {}", op.text),
                    };
                    Some(u64::from(holds))
                }
                "bra" | "bra.uni" => {
                    self.pc = *self
                        .labels
                        .get(o[0].as_str())
                        .unwrap_or_else(|| panic!("{} leaves the replayed walk", op.text));
                    None
                }
                "ld.acquire.gpu.global.u32" => {
                    let flag = workspace.flags.get(&self.address(&o[1])).copied();
                    if flag.unwrap_or(0) == 0 {
                        // Spins: wait here until some other walker sets it.
                        self.pc -= 1;
                        return Ok(self.pc != start || steps > 1);
                    }
                    flag
                }
                "st.relaxed.gpu.global.u32" => {
                    let value = self.value(&o[1]);
                    workspace.flags.insert(self.address(&o[0]), value);
                    // Other walkers may run between the flag and what follows it.
                    return Ok(true);
                }
                "st.global.v4.f32" => {
                    let unit = self.current_unit();
                    let address = self.address(&o[0]);
                    workspace.slots.insert(address, unit);
                    for (lane, register) in vector(&o[1]).into_iter().enumerate() {
                        let value = self.value(register);
                        self.unfenced.push((address + 4 * lane as u64, value));
                    }
                    None
                }
                // The sums stored before it reach the other walkers (the warpgroup's barrier
                // before it makes the fence cumulative over every thread's stores; the replay
                // runs one thread).
                "fence.acq_rel.gpu" => {
                    workspace.values.extend(self.unfenced.drain(..));
                    None
                }
                "ld.global.cg.v4.f32" => {
                    let address = self.address(&o[1]);
                    let unit = *workspace.slots.get(&address).unwrap_or_else(|| {
                        panic!("walker {} reads a slot nobody wrote", self.walker)
                    });
                    for (lane, register) in vector(&o[0]).into_iter().enumerate() {
                        let at = address + 4 * lane as u64;
                        let value = *workspace.values.get(&at).ok_or_else(|| {
                            format!(
                                "walker {} reads walker {}'s sums for tile {} before a fence published them",
                                self.walker, unit.walker, unit.tile
                            )
                        })?;
                        self.registers.insert(register.to_string(), value);
                    }
                    // One record per peer: count it at its first vector.
                    if self.added.last() != Some(&unit) {
                        self.added.push(unit);
                    }
                    None
                }
                "add.f32" => Some(self.value(&o[1]).wrapping_add(self.value(&o[2]))),
                "barrier.sync" => None,
                other => panic!("the replay does not know {other}: {}", op.text),
            };
            if let Some(value) = result {
                self.registers.insert(o[0].clone(), value);
            }
        }
        Ok(true)
    }
}

/// The registers of a `{ %a, %b, .. }` vector operand.
fn vector(operand: &str) -> Vec<&str> {
    operand
        .trim_matches(['{', '}'])
        .split(',')
        .map(str::trim)
        .collect()
}

/// Runs every walker's blocks of a role over one workspace; the agents in the order given
/// run first. An error names a deadlock.
fn run_grid<'p>(
    program: &'p [Line],
    inputs: &[(&str, u64)],
    order: &[u32],
    ranks: u32,
) -> Result<(Vec<Agent<'p>>, Workspace), String> {
    let mut agents: Vec<Agent<'p>> = order
        .iter()
        .flat_map(|&walker| (0..ranks).map(move |rank| (walker, rank)))
        .map(|(walker, rank)| Agent::new(program, inputs, walker, rank))
        .collect();
    let mut workspace = Workspace::default();
    loop {
        let mut moved = false;
        for agent in agents.iter_mut().filter(|a| !a.done) {
            moved |= agent.run(&mut workspace)?;
        }
        if agents.iter().all(|a| a.done) {
            return Ok((agents, workspace));
        }
        if !moved {
            let waiting: Vec<u32> = agents
                .iter()
                .filter(|a| !a.done)
                .map(|a| a.walker)
                .collect();
            return Err(format!("deadlock: walkers {waiting:?} wait for each other"));
        }
    }
}

/// The stream-K kernels whose walks are replayed: the catalog's (bf16 and fp8), one of a
/// cluster, a fused epilogue's, and fp8 with block scales promoted every k tile.
fn stream_k_specs() -> Vec<String> {
    let mut specs: Vec<String> = gemm_codegen::catalog::CATALOG
        .iter()
        .chain(gemm_codegen::catalog::FP8)
        .filter(|e| e.spec.contains("tail = stream_k"))
        .map(|e| e.spec.to_string())
        .collect();
    assert_eq!(specs.len(), 3);
    specs.extend(
        [
            "name: k, arch: sm_90a, mma: wgmma, tile: 128x256x64, cluster: 2x1, \
             copy: tma(multicast = 2), schedule: persistent(raster = m, group = 8, tail = stream_k)",
            "name: f, arch: sm_90a, mma: wgmma, tile: 64x128x64, consumers: 1, stages: 6, \
             schedule: persistent(tail = stream_k), scale: alpha_beta, bias: col",
            "name: b, arch: sm_90a, mma: wgmma, dtype: e4m3, out: bf16, layout: rc, \
             tile: 64x128x128, consumers: 1, stages: 6, schedule: persistent(tail = stream_k), \
             quant: block, promote: 128",
            // A grouped walk counts its tiles on the device; its units split as any walk's.
            "name: g, arch: sm_90a, mma: wgmma, layout: rr, tile: 128x128x64, stages: 5, \
             epilogue: tma, schedule: persistent(tail = stream_k), groups: masked",
        ]
        .map(String::from),
    );
    specs
}

/// The grid, tile and k-tile counts the walks are replayed for: one walker and many; tile
/// counts around whole rounds, with leftovers that are split and that are not; k tiles from
/// one (fewer leftover k tiles than walkers) to many.
fn cases() -> Vec<(u32, u32, u32)> {
    let mut cases = Vec::new();
    for grid in [1, 2, 3, 7, 66, 132] {
        let mut tiles: Vec<u32> = vec![
            1,
            2,
            grid / 2,
            grid - 1,
            grid,
            grid + 1,
            3 * grid + grid / 3,
            5 * grid - 1,
        ];
        tiles.retain(|&t| t > 0);
        tiles.sort_unstable();
        tiles.dedup();
        for &tiles in &tiles {
            for k_tiles in [1, 2, 5, 41, 64] {
                cases.push((grid, tiles, k_tiles));
            }
        }
    }
    cases
}

#[test]
fn the_emitted_stream_k_walk_computes_every_k_tile_once_and_gathers_every_split_tile() {
    for spec in stream_k_specs() {
        let emitted = emit_str(&spec).unwrap_or_else(|e| panic!("{spec}: {e}"));
        let ptx = emitted.ptx();
        let ranks = emitted.launch().cluster.0 * emitted.launch().cluster.1;
        let consumer = walk_program(ptx, "consumer");
        let producer = walk_program(ptx, "producer");
        let mut split_tiles = 0;
        for (grid, tiles, k_tiles) in cases() {
            let case = format!("{spec}: grid {grid}, {tiles} tiles of {k_tiles} k tiles");
            let inputs = [
                ("%tiles", u64::from(tiles)),
                ("%grid_blocks", u64::from(grid)),
                ("%k_tiles", u64::from(k_tiles)),
            ];
            let forward: Vec<u32> = (0..grid).collect();
            let backward: Vec<u32> = (0..grid).rev().collect();
            // Finishers first (they wait), then the walkers they wait for first.
            let mut runs = Vec::new();
            for order in [&forward, &backward] {
                let (agents, workspace) = run_grid(&consumer, &inputs, order, ranks)
                    .unwrap_or_else(|e| panic!("{case}: {e}"));
                assert!(
                    workspace.flags.values().all(|&flag| flag == 0),
                    "{case}: a flag is left set for the next launch"
                );
                runs.push(agents);
            }
            let (producers, _) = run_grid(&producer, &inputs, &forward, ranks)
                .unwrap_or_else(|e| panic!("{case}: producer: {e}"));
            for agents in &runs {
                let mut computed = vec![0u32; (tiles * k_tiles) as usize];
                let mut finisher: Vec<Option<Unit>> = vec![None; tiles as usize];
                let mut sharers: Vec<Vec<u32>> = vec![Vec::new(); tiles as usize];
                let mut in_order: Vec<&Agent> = agents.iter().filter(|a| a.rank == 0).collect();
                in_order.sort_by_key(|a| a.walker);
                for agent in in_order {
                    let walker = agent.walker;
                    let walk = &agent.units;
                    let whole_units = walk.iter().take_while(|u| u.k_count == k_tiles).count();
                    for (index, unit) in walk.iter().enumerate() {
                        let (tile, first, count) = (unit.tile, unit.k_first, unit.k_count);
                        assert!(tile < tiles, "{case}: walker {walker} past the last tile");
                        assert!(count > 0 && first + count <= k_tiles, "{case}: {unit:?}");
                        for k in first..first + count {
                            computed[(tile * k_tiles + k) as usize] += 1;
                        }
                        if first == 0 {
                            assert!(finisher[tile as usize].is_none(), "{case}: tile {tile}");
                            finisher[tile as usize] = Some(*unit);
                            if count < k_tiles {
                                // Only a walker's last unit waits for others.
                                assert_eq!(index, walk.len() - 1, "{case}: walker {walker}");
                            }
                        } else {
                            // Only a walker's first tail unit leaves sums for another.
                            assert!(index <= whole_units, "{case}: walker {walker}");
                            sharers[tile as usize].push(walker);
                        }
                    }
                    // The producer of the same block walks the same units.
                    let producer = producers
                        .iter()
                        .find(|p| p.walker == walker && p.rank == 0)
                        .unwrap();
                    assert_eq!(&producer.units, walk, "{case}: walker {walker}'s producer");
                }
                assert!(computed.iter().all(|&c| c == 1), "{case}: {computed:?}");
                // Every block of a cluster walks its cluster's units and gathers its own rank's
                // records.
                for agent in agents.iter().filter(|a| a.rank > 0) {
                    let first = agents
                        .iter()
                        .find(|a| a.walker == agent.walker && a.rank == 0)
                        .unwrap();
                    assert_eq!(
                        agent
                            .units
                            .iter()
                            .map(|u| (u.tile, u.k_first, u.k_count))
                            .collect::<Vec<_>>(),
                        first
                            .units
                            .iter()
                            .map(|u| (u.tile, u.k_first, u.k_count))
                            .collect::<Vec<_>>(),
                        "{case}"
                    );
                    for (_, added) in &agent.gathered {
                        assert!(added.iter().all(|u| u.rank == agent.rank), "{case}");
                    }
                }
                let gathered: HashMap<u32, &Vec<Unit>> = agents
                    .iter()
                    .filter(|a| a.rank == 0)
                    .flat_map(|a| a.gathered.iter().map(|(unit, added)| (unit.tile, added)))
                    .collect();
                for tile in 0..tiles {
                    let unit = finisher[tile as usize].expect("a finisher");
                    let added = gathered[&tile];
                    let peers: Vec<u32> = added.iter().map(|u| u.walker).collect();
                    // The finisher adds exactly the walkers that share the tile, each once,
                    // in walker order, all after it; with its own, the sums cover the tile.
                    assert_eq!(peers, sharers[tile as usize], "{case}: tile {tile}");
                    assert!(peers.iter().all(|&peer| peer > unit.walker), "{case}");
                    let mut covered: BTreeSet<u32> = (0..unit.k_count).collect();
                    for part in added {
                        assert_eq!(part.tile, tile, "{case}: tile {tile} adds {part:?}");
                        for k in part.k_first..part.k_first + part.k_count {
                            assert!(covered.insert(k), "{case}: tile {tile} adds k {k} twice");
                        }
                    }
                    assert_eq!(covered.len() as u32, k_tiles, "{case}: tile {tile}");
                    if unit.k_count < k_tiles {
                        split_tiles += 1;
                    }
                }
            }
        }
        // 752 split tiles over the cases, each replayed in both orders.
        assert_eq!(split_tiles, 2 * 752, "{spec}");
    }
}

/// The tail the setup computes: `(%dp_tiles, %tail_work, %grid_wide)` (the tail's walkers).
fn tail(setup: &[Line], grid: u32, tiles: u32, k_tiles: u32) -> (u64, u64, u64) {
    let inputs = [
        ("%tiles", u64::from(tiles)),
        ("%grid_blocks", u64::from(grid)),
        ("%k_tiles", u64::from(k_tiles)),
    ];
    let mut program = setup.to_vec();
    program.push(Line::Exit);
    let mut agent = Agent::new(&program, &inputs, 0, 0);
    agent.run(&mut Workspace::default()).unwrap();
    (
        agent.value("%dp_tiles"),
        agent.value("%tail_work"),
        agent.value("%grid_wide"),
    )
}

#[test]
fn the_emitted_tail_is_the_split_rule() {
    let emitted = emit_str(&stream_k_specs()[0]).unwrap();
    let setup: Vec<Line> = cut(
        emitted.ptx(),
        "// Stream-K: the tiles of whole rounds go whole",
        |line| line == "}",
    )
    .into_iter()
    .filter_map(parse)
    .collect();
    // 544 tiles: 16 left over, over 64 walkers (4 a tile).
    assert_eq!(tail(&setup, 132, 544, 64), (528, 16 * 64, 64));
    // 5 left over: over 20 walkers, 4 a tile.
    assert_eq!(tail(&setup, 132, 533, 64), (528, 5 * 64, 20));
    // 40 left over: 4 a tile would be 160, more than the grid: every walker.
    assert_eq!(tail(&setup, 132, 568, 64), (528, 40 * 64, 132));
    // Fewer tiles than walkers: all split (split-K).
    assert_eq!(tail(&setup, 132, 64, 112), (0, 64 * 112, 132));
    // 512 tiles: 116 left over, most walkers busy: the last round goes whole.
    assert_eq!(tail(&setup, 132, 512, 64), (512, 0, 1));
    assert_eq!(tail(&setup, 132, 528, 64), (528, 0, 1));
    // Everywhere else, the kernel computes the split gemm-dsl's rule (and the cost model) says.
    for grid in [1, 2, 3, 7, 66, 131, 132] {
        for tiles in 1..=5 * grid + 3 {
            let rule = StreamKSplit::of(u64::from(tiles), u64::from(grid));
            assert_eq!(
                tail(&setup, grid, tiles, 3),
                (rule.whole_tiles, rule.split_tiles * 3, rule.tail_walkers),
                "grid {grid}, {tiles} tiles"
            );
        }
    }
}

/// The replay catches a broken walk, each with its own message: a finisher that stops one peer
/// short, a tail unit that does not move the tail position, a walker that never publishes its
/// sums, a partial added to the wrong accumulator or left out, a record stored from the wrong
/// accumulators, and sums published without the fence or after the flag.
#[test]
fn broken_stream_k_walks_are_caught() {
    let emitted = emit_str(&stream_k_specs()[0]).unwrap();
    let ptx = emitted.ptx();
    // The replay's verdict on an edited kernel: the error, if any.
    let check = |ptx: &str| -> Result<(), String> {
        let consumer = walk_program(ptx, "consumer");
        // Split tails with the last whole round (two pieces a tile), split-K (three or four
        // pieces a tile), and a last round that goes whole.
        for (grid, tiles, k_tiles) in [(7, 10, 5), (66, 20, 41), (66, 100, 41), (3, 4, 64)] {
            let inputs = [
                ("%tiles", u64::from(tiles)),
                ("%grid_blocks", u64::from(grid)),
                ("%k_tiles", u64::from(k_tiles)),
            ];
            let order: Vec<u32> = (0..grid).collect();
            let (agents, _) = run_grid(&consumer, &inputs, &order, 1)?;
            let mut covered = vec![0u32; (tiles * k_tiles) as usize];
            for agent in &agents {
                for (unit, added) in &agent.gathered {
                    for part in std::iter::once(unit).chain(added) {
                        for k in part.k_first..part.k_first + part.k_count {
                            covered[(part.tile * k_tiles + k) as usize] += 1;
                        }
                    }
                }
            }
            if covered.iter().any(|&c| c != 1) {
                return Err(format!("grid {grid}, {tiles} tiles: tiles not summed once"));
            }
        }
        Ok(())
    };
    check(ptx).expect("the emitted walk passes");
    let replace = |from: &str, to: &str| {
        assert_eq!(ptx.matches(from).count(), 1, "{from}");
        ptx.replace(from, to)
    };
    let fence_and_flag = "\t@%p_wg_leader fence.acq_rel.gpu;\n\t@%p_wg_leader st.relaxed.gpu.global.u32\t[%flag_addr], 1;\n";
    let cases = [
        (
            // The tiles' k tiles are then not covered once either; the sums say so first.
            "the finisher stops after the first peer",
            replace(
                "@%p_more_peers bra\t$L_next_peer;",
                "@%p_more_peers bra\t$L_fixed_up;",
            ),
            "with accumulator 0 other than its k tiles' sum",
        ),
        (
            "the tail position does not advance: the walker repeats its first tail unit for ever",
            // Both roles' advances.
            ptx.replace(
                "add.u32\t%tail_pos, %tail_pos, %k_count;",
                "add.u32\t%tail_pos, %tail_pos, 0;",
            ),
            "runs away",
        ),
        (
            "the partial sums are stored but their flag never set: the finisher waits for ever",
            replace(
                "@%p_wg_leader st.relaxed.gpu.global.u32\t[%flag_addr], 1;",
                "@%p_wg_leader st.relaxed.gpu.global.u32\t[%flag_addr], 0;",
            ),
            "deadlock: walkers",
        ),
        (
            "a peer's partial added to the wrong accumulator",
            replace(
                "add.f32\t%acc1, %acc1, %partial1;",
                "add.f32\t%acc1, %acc1, %partial0;",
            ),
            "with accumulator 1 other than its k tiles' sum",
        ),
        (
            "a peer's partial left out",
            replace("\tadd.f32\t%acc5, %acc5, %partial1;\n", ""),
            "with accumulator 5 other than its k tiles' sum",
        ),
        (
            "a record stored from the wrong accumulators",
            replace(
                "[%slot_addr+0], { %acc0, %acc1, %acc2, %acc3 };",
                "[%slot_addr+0], { %acc1, %acc0, %acc2, %acc3 };",
            ),
            "with accumulator 0 other than its k tiles' sum",
        ),
        (
            "the sums' flag set without the fence",
            replace(
                fence_and_flag,
                "\t@%p_wg_leader st.relaxed.gpu.global.u32\t[%flag_addr], 1;\n",
            ),
            "before a fence published them",
        ),
        (
            "the fence after the flag",
            replace(
                fence_and_flag,
                "\t@%p_wg_leader st.relaxed.gpu.global.u32\t[%flag_addr], 1;\n\t@%p_wg_leader fence.acq_rel.gpu;\n",
            ),
            "before a fence published them",
        ),
    ];
    let mut wrong = Vec::new();
    for (what, broken, want) in cases {
        match check(&broken) {
            Ok(()) => wrong.push(format!("{what}: passed")),
            Err(error) => {
                eprintln!("{what}: {error}");
                if !error.contains(want) {
                    wrong.push(format!("{what}: wanted `{want}`, got: {error}"));
                }
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
