//! A proof of the Hopper TMA-store epilogue's two buffers per warpgroup, and of its C-in loads
//! (`scale: alpha_beta`), on the emitted PTX itself.
//!
//! The epilogue's script is read out of a kernel's text, operand by operand, and its integer
//! arithmetic is evaluated rather than recognised: the prologue's lines that place the two
//! buffers (`%c_buf`, `%c_buf_other`) and the C-in barriers (`%cin_bars`, their
//! `mbarrier.init` counts), then, for each box, the address each TMA load of C-in lands at,
//! the tensor map and coordinates it reads and the barrier it completes, the bytes the leader
//! announces on that barrier (`mbarrier.arrive.expect_tx`), the barrier and parity each warp
//! waits on (`mbarrier.try_wait.parity`, both registers computed by the lines before it), the
//! address each `ldmatrix` reads C-in from and each `stmatrix` stages D at, the leader's waits
//! for earlier stores to have read their buffers (`cp.async.bulk.wait_group.read N`: all
//! committed groups but the newest N), its commits, the warpgroup's barriers, the TMA stores
//! (buffer, tensor map, coordinates), the buffer swaps, and which of them a box stored directly
//! (a ragged N) skips. A box's place in the output is where its TMA store writes it; the loads
//! must bring C-in from that place. Each warp reads and stages its own rows of a box (the
//! `%st_off` offsets, whose layout is the layout tests' business, are given values inside
//! the box).
//!
//! A model of one consumer warpgroup (four warps, warp 0 holding the leader) then runs that
//! script over two output tiles (each with its own block origin and batch index), with every
//! pattern of directly stored boxes (past six boxes, the box columns a ragged N makes and a few
//! more), under many interleavings of the warps, the loads landing and the stores reading, with
//! mbarriers as the PTX ISA defines them (an arrival count, transaction bytes, a phase whose
//! parity a wait compares). It fails on a deadlock, a warp reading C-in other than its box's
//! (from where it was loaded, or before it landed), a load landing over C-in a warp has not
//! read or over D a store has not read, a warp staging D over C-in it has not read or over a
//! buffer a store has not read yet, a store of a box some warp has not staged, a barrier whose
//! loads bring more bytes than announced, a second arrival in one phase, an address outside the
//! buffers, a copy through another tensor map than its operand's, and C-in loaded but never
//! read. Each check but the last has a negative case: a broken variant of the PTX that fails
//! with that check's message (a load landing over C-in a warp has not read shows, in the
//! interleaving found first, as the warp reading the later box's C-in). Where one interleaving
//! deadlocks and another fails otherwise, the other failure is reported: it says more.

use gemm_codegen::{Emitted, Operand, ParamKind};
use std::collections::HashMap;

/// An operand: a register (an index into the script's register names) or a number.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Value {
    Reg(usize),
    Imm(i64),
}

/// Which threads run a line: all, the leader (`@%p_store_leader`, in warp 0), or those of a
/// box stored directly (`@%p_direct_box`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Guard {
    Every,
    Leader,
    Direct,
}

/// The integer operations the epilogue's bookkeeping uses (32-bit, wrapping).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Add,
    Sub,
    And,
    Or,
    Xor,
    Shl,
    Shr,
    MulLo,
    MadLo,
    Bfe,
    Mov,
}

/// One step of a consumer warp's epilogue, as the PTX writes it.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Step {
    /// `dst = op(args)` on a register the model tracks.
    Set {
        guard: Guard,
        dst: usize,
        op: Op,
        args: Vec<Value>,
    },
    /// The leader announces `bytes` on the barrier at `barrier` (and arrives on it).
    ExpectTx { barrier: Value, bytes: i64 },
    /// The leader's TMA load of C-in at `coords` through tensor map `map` into `buffer`,
    /// completing its bytes on the barrier at `barrier`.
    Load {
        buffer: Value,
        map: String,
        coords: [Value; 3],
        barrier: Value,
    },
    /// `mbarrier.try_wait.parity` on the barrier at `barrier`, in a loop until it passes.
    Wait { barrier: Value, parity: Value },
    /// `ldmatrix` of the thread's C-in at `address`, for the tile's box `box_index`.
    Read { address: Value, box_index: usize },
    /// The branch to the direct stores of box `box_index`, taken where that box is stored
    /// directly.
    DirectBranch { box_index: usize },
    /// `stmatrix` of the thread's D at `address`.
    Write { address: Value },
    /// The leader: wait until every committed store group but the newest `running` has read
    /// its buffer.
    WaitRead { running: usize },
    /// The leader: `cp.async.bulk.commit_group`.
    Commit,
    /// The warpgroup's named barrier.
    Barrier { guard: Guard },
    /// The leader's TMA store from `buffer` through `map` at `coords`.
    Store {
        buffer: Value,
        map: String,
        coords: [Value; 3],
    },
    /// The label the direct stores of box `box_index` come back to.
    Stored { box_index: usize },
}

/// The registers the model computes: the buffers, barriers, box coordinates and the
/// temporaries the PTX computes them in. Any other line that writes one fails the parse.
const TRACKED: [&str; 9] = [
    "%st_addr",
    "%st_tmp",
    "%c_buf",
    "%c_buf_other",
    "%cin_boxes",
    "%cin_bars",
    "%st_x",
    "%st_y",
    "%st_y0",
];

/// The registers the prologue sets for the epilogue and the model takes from it.
const PLACED: [&str; 4] = ["%c_buf", "%c_buf_other", "%cin_bars", "%cin_boxes"];

/// The epilogue as the PTX writes it.
#[derive(Clone, Debug)]
struct Script {
    /// Register names: `Value::Reg(i)` is `names[i]`.
    names: Vec<String>,
    /// The prologue's lines that place the buffers and the C-in barriers.
    prologue: Vec<Step>,
    /// From the first box (or C-in load) to the last box's swap.
    steps: Vec<Step>,
    /// `mbarrier.init` at `%smem + offset` with an arrival count.
    barriers: Vec<(i64, u32)>,
}

impl Script {
    fn reg(&mut self, name: &str) -> usize {
        match self.names.iter().position(|n| n == name) {
            Some(i) => i,
            None => {
                self.names.push(name.to_string());
                self.names.len() - 1
            }
        }
    }

    fn value(&mut self, word: &str) -> Value {
        let word = word.trim_matches(|c: char| "[]{},; \t".contains(c));
        if word.starts_with('%') {
            Value::Reg(self.reg(word))
        } else if let Some(hex) = word.strip_prefix("0x") {
            Value::Imm(i64::from_str_radix(hex, 16).unwrap())
        } else {
            Value::Imm(
                word.parse()
                    .unwrap_or_else(|_| panic!("`{word}` is no number")),
            )
        }
    }

    fn boxes(&self) -> usize {
        self.steps
            .iter()
            .filter(|s| matches!(s, Step::DirectBranch { .. }))
            .count()
    }
}

/// The texts between `[` and `]` in a line, in order.
fn brackets(body: &str) -> Vec<&str> {
    body.split('[')
        .skip(1)
        .map(|part| &part[..part.find(']').expect("a closed bracket")])
        .collect()
}

/// A tensor copy's `map, { x, y, batch }`.
fn map_and_coords(
    script: &mut Script,
    maps: &HashMap<String, String>,
    text: &str,
) -> (String, [Value; 3]) {
    let (map, coords) = text.split_once(',').expect("a tensor map and coordinates");
    let map = maps
        .get(map.trim())
        .unwrap_or_else(|| panic!("`{}` holds no tensor map's address", map.trim()))
        .clone();
    let coords: Vec<Value> = coords.split(',').map(|c| script.value(c)).collect();
    (map, coords.try_into().expect("three coordinates"))
}

/// The arithmetic line `body` as a step, where it writes a tracked register.
fn arithmetic(script: &mut Script, guard: Guard, words: &[&str]) -> Option<Step> {
    let dst = words.get(1)?.trim_end_matches(',');
    if !TRACKED.contains(&dst) {
        return None;
    }
    let mut parts = words[0].split('.');
    let op = match (parts.next(), parts.next()) {
        (Some("add"), _) => Op::Add,
        (Some("sub"), _) => Op::Sub,
        (Some("and"), _) => Op::And,
        (Some("or"), _) => Op::Or,
        (Some("xor"), _) => Op::Xor,
        (Some("shl"), _) => Op::Shl,
        (Some("shr"), _) => Op::Shr,
        (Some("mul"), Some("lo")) => Op::MulLo,
        (Some("mad"), Some("lo")) => Op::MadLo,
        (Some("bfe"), _) => Op::Bfe,
        (Some("mov"), _) => Op::Mov,
        _ => panic!(
            "the model does not evaluate `{}` (it writes {dst})",
            words.join(" ")
        ),
    };
    let dst = script.reg(dst);
    let args = words[2..].iter().map(|w| script.value(w)).collect();
    Some(Step::Set {
        guard,
        dst,
        op,
        args,
    })
}

/// The epilogue's script, with the prologue lines it depends on.
fn script(ptx: &str) -> Script {
    let lines: Vec<&str> = ptx.lines().map(str::trim).collect();
    let start = lines
        .iter()
        .position(|l| l.starts_with("// Warpgroup c's rows, one "))
        .expect("the epilogue stores through TMA");
    let total_boxes = lines
        .iter()
        .filter(|l| l.starts_with("$L_box") && l.ends_with("_stored:"))
        .count();
    let mut script = Script {
        names: Vec::new(),
        prologue: Vec::new(),
        steps: Vec::new(),
        barriers: Vec::new(),
    };
    // The tensor map parameter each 64-bit register holds (`mov.u64 %r, param`).
    let mut maps: HashMap<String, String> = HashMap::new();
    let mut boxes_seen = 0;
    let mut last_stored = None;
    for (at, line) in lines.iter().enumerate() {
        let (guard, body) = if let Some(body) = line.strip_prefix("@%p_store_leader") {
            (Guard::Leader, body.trim())
        } else if let Some(body) = line.strip_prefix("@%p_direct_box") {
            (Guard::Direct, body.trim())
        } else {
            (Guard::Every, *line)
        };
        if body.starts_with("//") || body.is_empty() {
            continue;
        }
        let words: Vec<&str> = body.split_whitespace().collect();
        if words[0] == "mov.u64" && !words[2].starts_with('%') {
            maps.insert(
                words[1].trim_end_matches(',').to_string(),
                words[2].trim_end_matches(';').to_string(),
            );
        }
        if at < start {
            if let Some(init) = body.strip_prefix("mbarrier.init.shared::cta.b64\t[%smem+") {
                let (offset, count) = init.split_once("],").unwrap();
                script.barriers.push((
                    offset.parse().unwrap(),
                    count.trim().trim_end_matches(';').parse().unwrap(),
                ));
            }
            if words.len() > 1 && PLACED.contains(&words[1].trim_end_matches(',')) {
                let step = arithmetic(&mut script, guard, &words).unwrap();
                script.prologue.push(step);
            }
            continue;
        }
        if let Some(label) = body
            .strip_prefix("$L_box")
            .and_then(|l| l.strip_suffix("_stored:"))
        {
            let box_index = label.parse().unwrap();
            script.steps.push(Step::Stored { box_index });
            last_stored = Some(box_index);
            continue;
        }
        if last_stored.is_some_and(|b| b + 1 == total_boxes) && guard != Guard::Direct {
            // Past the last box's swap: the walk's next tile.
            break;
        }
        if body.starts_with('$') {
            assert!(body.starts_with("$L_c_in_"), "an unknown label `{body}`");
            continue;
        }
        let operands = brackets(body);
        let op = words[0];
        let step = if op.starts_with("mbarrier.arrive.expect_tx") {
            assert_eq!(guard, Guard::Leader, "{line}");
            Some(Step::ExpectTx {
                barrier: script.value(operands[0]),
                bytes: words.last().unwrap().trim_end_matches(';').parse().unwrap(),
            })
        } else if op.starts_with("cp.async.bulk.tensor") && op.contains(".global.mbarrier") {
            assert_eq!(guard, Guard::Leader, "{line}");
            let buffer = script.value(operands[0]);
            let (map, coords) = map_and_coords(&mut script, &maps, operands[1]);
            Some(Step::Load {
                buffer,
                map,
                coords,
                barrier: script.value(operands[2]),
            })
        } else if op.starts_with("mbarrier.try_wait.parity") {
            assert_eq!(guard, Guard::Every, "{line}");
            assert!(
                lines[at + 1].starts_with("@!%p_ready bra"),
                "a wait loops until it passes: {line}"
            );
            Some(Step::Wait {
                barrier: script.value(operands[0]),
                parity: script.value(words.last().unwrap()),
            })
        } else if op.starts_with("ldmatrix") {
            Some(Step::Read {
                address: script.value(operands[0]),
                box_index: boxes_seen,
            })
        } else if op.starts_with("stmatrix") {
            Some(Step::Write {
                address: script.value(operands[0]),
            })
        } else if op == "bra" && guard == Guard::Direct {
            boxes_seen += 1;
            Some(Step::DirectBranch {
                box_index: boxes_seen - 1,
            })
        } else if op.starts_with("cp.async.bulk.wait_group.read") {
            assert_eq!(guard, Guard::Leader, "{line}");
            Some(Step::WaitRead {
                running: words[1].trim_end_matches(';').parse().unwrap(),
            })
        } else if op == "cp.async.bulk.commit_group;" {
            assert_eq!(guard, Guard::Leader, "{line}");
            Some(Step::Commit)
        } else if op == "bar.sync" {
            Some(Step::Barrier { guard })
        } else if op.starts_with("cp.async.bulk.tensor") && op.contains(".shared::cta.bulk_group") {
            assert_eq!(guard, Guard::Leader, "{line}");
            let (map, coords) = map_and_coords(&mut script, &maps, operands[0]);
            Some(Step::Store {
                buffer: script.value(operands[1]),
                map,
                coords,
            })
        } else {
            arithmetic(&mut script, guard, &words)
        };
        script.steps.extend(step);
    }
    assert_eq!(
        (last_stored.map(|b| b + 1), boxes_seen),
        (Some(total_boxes), total_boxes),
        "every box branches and ends"
    );
    script
}

/// What the model takes from the kernel's description rather than its text: the bytes of a
/// box (C's tensor-map box in the output type) and the tensor-map parameters' names.
struct Kernel {
    script: Script,
    box_bytes: i64,
    c_map: String,
    c_in_map: Option<String>,
}

fn kernel(emitted: &Emitted, ptx: &str) -> Kernel {
    let name = emitted.kernel_name();
    let mut c_map = None;
    let mut c_in_map = None;
    let mut box_bytes = None;
    for param in emitted.params() {
        match param.kind {
            ParamKind::TensorMap(b) if b.operand == Operand::C => {
                c_map = Some(format!("{name}_{}", param.name));
                box_bytes = Some(i64::from(
                    b.inner * b.outer * emitted.spec().out.size_bytes(),
                ));
            }
            ParamKind::CInTensorMap(_) => c_in_map = Some(format!("{name}_{}", param.name)),
            _ => {}
        }
    }
    Kernel {
        script: script(ptx),
        box_bytes: box_bytes.expect("C goes out through a tensor map"),
        c_map: c_map.unwrap(),
        c_in_map,
    }
}

/// A small deterministic generator for the interleavings.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

const WARPS: usize = 4;
const TILES: usize = 2;

/// The values the model gives the registers the epilogue reads but does not compute, for a
/// walk's `tile`: each tile its own block origin and batch index.
fn input(name: &str, tile: usize) -> Option<i64> {
    let tile = tile as i64;
    Some(match name {
        "%smem" | "%consumer" => 0,
        "%block_m" => 20_000 * (tile + 1),
        "%block_n" => 10_000 * (tile + 1),
        "%batch" => tile,
        "%st_off0" => 0,
        "%st_off1" => 16,
        "%st_off2" => 32,
        "%st_off3" => 48,
        _ => return None,
    })
}

fn evaluate(op: Op, args: &[i64]) -> i64 {
    let v = match (op, args) {
        (Op::Add, [a, b]) => a + b,
        (Op::Sub, [a, b]) => a - b,
        (Op::And, [a, b]) => a & b,
        (Op::Or, [a, b]) => a | b,
        (Op::Xor, [a, b]) => a ^ b,
        (Op::Shl, [a, b]) => a << b,
        (Op::Shr, [a, b]) => a >> b,
        (Op::MulLo, [a, b]) => a * b,
        (Op::MadLo, [a, b, c]) => a * b + c,
        (Op::Bfe, [a, b, c]) => (a >> b) & ((1 << c) - 1),
        (Op::Mov, [a]) => *a,
        _ => panic!("{op:?} of {args:?}"),
    };
    v & 0xffff_ffff
}

/// A warp's registers: the tracked ones it computed and the model's inputs for its tile.
#[derive(Clone)]
struct Registers {
    values: Vec<Option<i64>>,
}

impl Registers {
    fn new(script: &Script) -> Registers {
        Registers {
            values: vec![None; script.names.len()],
        }
    }

    /// Sets the model's inputs for `tile`.
    fn enter(&mut self, script: &Script, tile: usize) {
        for (value, name) in self.values.iter_mut().zip(&script.names) {
            if let Some(v) = input(name, tile) {
                *value = Some(v);
            }
        }
    }

    fn get(&self, script: &Script, value: Value) -> Result<i64, String> {
        match value {
            Value::Imm(v) => Ok(v),
            Value::Reg(r) => self.values[r]
                .ok_or_else(|| format!("{} is read before it is set", script.names[r])),
        }
    }

    fn set(&mut self, script: &Script, dst: usize, op: Op, args: &[Value]) -> Result<(), String> {
        let args = args
            .iter()
            .map(|&a| self.get(script, a))
            .collect::<Result<Vec<_>, _>>()?;
        self.values[dst] = Some(evaluate(op, &args));
        Ok(())
    }

    fn coords(&self, script: &Script, coords: &[Value; 3]) -> Result<[i64; 3], String> {
        Ok([
            self.get(script, coords[0])?,
            self.get(script, coords[1])?,
            self.get(script, coords[2])?,
        ])
    }
}

/// The registers after the prologue.
fn placed(script: &Script) -> Result<Registers, String> {
    let mut regs = Registers::new(script);
    regs.enter(script, 0);
    for step in &script.prologue {
        let Step::Set { dst, op, args, .. } = step else {
            unreachable!()
        };
        regs.set(script, *dst, *op, args)?;
    }
    Ok(regs)
}

/// Where each box of `tile` goes out: the coordinates of its TMA store, from the script run
/// straight through with no box stored directly.
fn box_places(script: &Script, tile: usize) -> Result<Vec<[i64; 3]>, String> {
    let mut regs = placed(script)?;
    regs.enter(script, tile);
    let mut places = Vec::new();
    for step in &script.steps {
        match step {
            Step::Set {
                guard,
                dst,
                op,
                args,
            } if *guard != Guard::Direct => regs.set(script, *dst, *op, args)?,
            Step::Store { coords, .. } => places.push(regs.coords(script, coords)?),
            _ => {}
        }
    }
    assert_eq!(places.len(), script.boxes(), "each box has its store");
    Ok(places)
}

/// An mbarrier: its arrival count, arrivals and transaction bytes still pending in the current
/// phase, the bytes announced in it, and the phases completed.
struct Mbarrier {
    count: u32,
    pending: u32,
    tx: i64,
    announced: i64,
    completed: usize,
}

impl Mbarrier {
    fn settle(&mut self) {
        if self.pending == 0 && self.tx == 0 {
            self.completed += 1;
            self.pending = self.count;
            self.announced = 0;
        }
    }
}

/// What a warp's rows of a buffer hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Rows {
    Empty,
    /// C-in from `at` (x, y, batch), read by the warp or not yet.
    CIn {
        at: [i64; 3],
        read: bool,
    },
    /// The D of box `box_in_walk`, not yet read by its store.
    D {
        box_in_walk: usize,
    },
}

impl std::fmt::Display for Rows {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Rows::Empty => write!(f, "nothing"),
            Rows::CIn { at, .. } => write!(f, "the C-in at {at:?}"),
            Rows::D { box_in_walk } => write!(f, "box {box_in_walk}'s D"),
        }
    }
}

struct Warp {
    pc: usize,
    tile: usize,
    regs: Registers,
    /// The box (in walk order) the warp is on: set at the box's branch to the direct stores.
    current: usize,
    /// Arrived at the named barrier of this generation.
    at_barrier: Option<usize>,
}

struct PendingStore {
    buffer: usize,
    box_in_walk: usize,
    /// The bulk group it was committed in; none yet: not waited for.
    group: Option<usize>,
}

struct PendingLoad {
    buffer: usize,
    barrier: i64,
    at: [i64; 3],
}

/// Runs the script for two tiles, box `b` stored directly where `direct[b]`.
fn run(kernel: &Kernel, direct: &[bool], seed: u64) -> Result<(), String> {
    let script = &kernel.script;
    let steps = &script.steps;
    let boxes_per_tile = direct.len();
    let places: Vec<Vec<[i64; 3]>> = (0..TILES)
        .map(|t| box_places(script, t))
        .collect::<Result<_, _>>()?;
    let start = placed(script)?;
    let register = |name: &str| {
        let r = script.names.iter().position(|n| n == name);
        start.get(script, Value::Reg(r.unwrap_or_else(|| panic!("no {name}"))))
    };
    let bases = [register("%c_buf")?, register("%c_buf_other")?];
    // The buffer an address is in.
    let buffer_of = |address: i64| -> Result<usize, String> {
        (0..2)
            .find(|&b| (bases[b]..bases[b] + kernel.box_bytes).contains(&address))
            .ok_or_else(|| {
                format!(
                    "address {address} is in neither buffer (at {bases:?}, {} bytes each)",
                    kernel.box_bytes
                )
            })
    };
    // A copy's buffer: its start.
    let copy_buffer = |address: i64| -> Result<usize, String> {
        let b = buffer_of(address)?;
        if address == bases[b] {
            Ok(b)
        } else {
            Err(format!(
                "a box copied at {address}, inside buffer {b} (at {})",
                bases[b]
            ))
        }
    };
    let mut rng = Rng(seed | 1);
    // One copy in `slowness` steps; a seed of 16 in 17 lets the copies move only when no warp
    // can: the warps run as far ahead of them as the waits let them.
    let slowness = match seed % 17 {
        16 => None,
        s => Some(1 + s as usize),
    };
    let mut warps: Vec<Warp> = (0..WARPS)
        .map(|_| Warp {
            pc: 0,
            tile: 0,
            regs: start.clone(),
            current: 0,
            at_barrier: None,
        })
        .collect();
    let mut barriers: HashMap<i64, Mbarrier> = script
        .barriers
        .iter()
        .map(|&(at, count)| {
            (
                at,
                Mbarrier {
                    count,
                    pending: count,
                    tx: 0,
                    announced: 0,
                    completed: 0,
                },
            )
        })
        .collect();
    let mut loads_pending: Vec<PendingLoad> = Vec::new();
    let mut stores_pending: Vec<PendingStore> = Vec::new();
    let mut groups_committed = 0;
    let mut rows = [[Rows::Empty; WARPS]; 2];
    let (mut barrier_arrived, mut barrier_generation) = (0, 0);
    let is_direct = |b: usize| direct[b % boxes_per_tile];
    loop {
        // What can move: a warp's next step, a load landing, a store reading its buffer.
        let mut movable = Vec::new();
        for (w, warp) in warps.iter().enumerate() {
            if warp.tile == TILES || warp.at_barrier == Some(barrier_generation) {
                continue;
            }
            let ready = warp.at_barrier.is_some()
                || match steps[warp.pc] {
                    Step::Wait { barrier, parity } => {
                        let at = warp.regs.get(script, barrier)?;
                        let parity = warp.regs.get(script, parity)?;
                        let barrier = barriers
                            .get(&at)
                            .ok_or_else(|| format!("warp {w} waits on {at}, no mbarrier there"))?;
                        // `try_wait.parity P` passes once the phase of parity P completed:
                        // while the current phase's parity is not P.
                        (barrier.completed % 2) as i64 != parity
                    }
                    Step::WaitRead { running } => {
                        w != 0
                            || stores_pending
                                .iter()
                                .all(|s| s.group.is_none_or(|g| g + running >= groups_committed))
                    }
                    _ => true,
                };
            if ready {
                movable.push(w);
            }
        }
        let asynchronous = loads_pending.len() + stores_pending.len();
        if movable.is_empty() && asynchronous == 0 {
            if warps.iter().any(|w| w.tile < TILES) {
                let waits: Vec<String> = warps
                    .iter()
                    .enumerate()
                    .filter(|(_, warp)| warp.tile < TILES)
                    .map(|(w, warp)| match steps[warp.pc] {
                        Step::Wait { barrier, parity } => {
                            let at = warp.regs.get(script, barrier).unwrap();
                            format!(
                                "warp {w} waits for parity {} of the barrier at {at} ({} phases completed)",
                                warp.regs.get(script, parity).unwrap(),
                                barriers[&at].completed
                            )
                        }
                        ref step => format!("warp {w} at {step:?}"),
                    })
                    .collect();
                return Err(format!("deadlock: {}", waits.join("; ")));
            }
            for (b, buffer) in rows.iter().enumerate() {
                for (w, r) in buffer.iter().enumerate() {
                    if let Rows::CIn { at, read: false } = r {
                        return Err(format!(
                            "the C-in at {at:?} was loaded into buffer {b} and never read by warp {w}"
                        ));
                    }
                }
            }
            return Ok(());
        }
        // The copies take their time: a slow seed lets the warps run far ahead of them.
        let take_async =
            asynchronous > 0 && (movable.is_empty() || slowness.is_some_and(|s| rng.below(s) == 0));
        if take_async {
            let index = rng.below(asynchronous);
            if index < loads_pending.len() {
                let PendingLoad {
                    buffer,
                    barrier,
                    at,
                } = loads_pending.remove(index);
                for (w, r) in rows[buffer].iter().enumerate() {
                    match r {
                        Rows::CIn { read: false, at: previous } => {
                            return Err(format!(
                                "the C-in at {at:?} landed in buffer {buffer} before warp {w} read the C-in at {previous:?} there"
                            ))
                        }
                        Rows::D { box_in_walk } => {
                            return Err(format!(
                                "the C-in at {at:?} landed in buffer {buffer} over box {box_in_walk}'s D before its store read it"
                            ))
                        }
                        _ => {}
                    }
                }
                rows[buffer] = [Rows::CIn { at, read: false }; WARPS];
                let bar = barriers.get_mut(&barrier).unwrap();
                bar.tx -= kernel.box_bytes;
                if bar.tx < 0 {
                    return Err(format!(
                        "the C-in at {at:?} brings {} bytes to the barrier at {barrier}, whose phase announced {}",
                        kernel.box_bytes, bar.announced
                    ));
                }
                bar.settle();
            } else {
                let store = stores_pending.remove(index - loads_pending.len());
                for r in &mut rows[store.buffer] {
                    assert_eq!(
                        *r,
                        Rows::D {
                            box_in_walk: store.box_in_walk
                        }
                    );
                    *r = Rows::Empty;
                }
            }
            continue;
        }
        let w = movable[rng.below(movable.len())];
        let leader = w == 0;
        let warp = &mut warps[w];
        let mut next = warp.pc + 1;
        if warp.at_barrier.take().is_none() {
            // A box starts at its branch to the direct stores (after its C-in, if any).
            if let Step::DirectBranch { box_index } = steps[warp.pc] {
                warp.current = warp.tile * boxes_per_tile + box_index;
            }
            let direct_box = is_direct(warp.current);
            let runs = |guard: Guard| match guard {
                Guard::Every => true,
                Guard::Leader => leader,
                Guard::Direct => direct_box,
            };
            match &steps[warp.pc] {
                Step::Set {
                    guard,
                    dst,
                    op,
                    args,
                } if runs(*guard) => warp.regs.set(script, *dst, *op, args)?,
                Step::ExpectTx { barrier, bytes } if leader => {
                    let at = warp.regs.get(script, *barrier)?;
                    let bar = barriers
                        .get_mut(&at)
                        .ok_or_else(|| format!("bytes announced on {at}, no mbarrier there"))?;
                    if bar.pending == 0 {
                        return Err(format!(
                            "the barrier at {at}: an arrival past its count in one phase"
                        ));
                    }
                    bar.pending -= 1;
                    bar.tx += bytes;
                    bar.announced += bytes;
                    bar.settle();
                }
                Step::Load {
                    buffer,
                    map,
                    coords,
                    barrier,
                } if leader => {
                    if Some(map) != kernel.c_in_map.as_ref() {
                        return Err(format!(
                            "a C-in load reads the tensor map `{map}`, not `{}`",
                            kernel.c_in_map.as_deref().unwrap_or("(none)")
                        ));
                    }
                    let barrier = warp.regs.get(script, *barrier)?;
                    if !barriers.contains_key(&barrier) {
                        return Err(format!(
                            "a C-in load completes on {barrier}, no mbarrier there"
                        ));
                    }
                    loads_pending.push(PendingLoad {
                        buffer: copy_buffer(warp.regs.get(script, *buffer)?)?,
                        barrier,
                        at: warp.regs.coords(script, coords)?,
                    });
                }
                Step::Wait { .. } => {}
                Step::Read { address, box_index } => {
                    let buffer = buffer_of(warp.regs.get(script, *address)?)?;
                    let box_in_walk = warp.tile * boxes_per_tile + box_index;
                    let want = places[warp.tile][*box_index];
                    match &mut rows[buffer][w] {
                        Rows::CIn { at, read } if *at == want => *read = true,
                        other => {
                            return Err(format!(
                                "warp {w} read box {box_in_walk}'s C-in (at {want:?}) from buffer {buffer}, which holds {other}"
                            ))
                        }
                    }
                }
                Step::DirectBranch { box_index } if direct_box => {
                    next = steps
                        .iter()
                        .position(|s| {
                            *s == Step::Stored {
                                box_index: *box_index,
                            }
                        })
                        .expect("each box has its label");
                }
                Step::Write { address } => {
                    let buffer = buffer_of(warp.regs.get(script, *address)?)?;
                    let staging = warp.current;
                    match rows[buffer][w] {
                        Rows::CIn { at, read: false } => {
                            return Err(format!(
                                "warp {w} staged box {staging}'s D over the C-in at {at:?} before reading it"
                            ))
                        }
                        Rows::D { box_in_walk } if box_in_walk != staging => {
                            return Err(format!(
                                "warp {w} staged box {staging}'s D in buffer {buffer} before the store of box {box_in_walk} read it"
                            ))
                        }
                        _ => {}
                    }
                    rows[buffer][w] = Rows::D {
                        box_in_walk: staging,
                    };
                }
                Step::Barrier { guard } if runs(*guard) => {
                    warp.at_barrier = Some(barrier_generation);
                    barrier_arrived += 1;
                    if barrier_arrived == WARPS {
                        barrier_arrived = 0;
                        barrier_generation += 1;
                    }
                    continue;
                }
                Step::Commit if leader => {
                    for s in &mut stores_pending {
                        s.group.get_or_insert(groups_committed);
                    }
                    groups_committed += 1;
                }
                Step::Store {
                    buffer,
                    map,
                    coords: _,
                } if leader => {
                    if *map != kernel.c_map {
                        return Err(format!(
                            "a store writes through the tensor map `{map}`, not `{}`",
                            kernel.c_map
                        ));
                    }
                    let buffer = copy_buffer(warp.regs.get(script, *buffer)?)?;
                    let storing = warp.current;
                    if let Some(other) = (0..WARPS).find(|&o| {
                        rows[buffer][o]
                            != Rows::D {
                                box_in_walk: storing,
                            }
                    }) {
                        return Err(format!(
                            "the store of box {storing} read buffer {buffer} before warp {other} staged its D there (it holds {})",
                            rows[buffer][other]
                        ));
                    }
                    stores_pending.push(PendingStore {
                        buffer,
                        box_in_walk: storing,
                        group: None,
                    });
                }
                _ => {}
            }
        }
        warp.pc = next;
        if warp.pc == steps.len() {
            warp.pc = 0;
            warp.tile += 1;
            warp.regs.enter(script, warp.tile);
        }
    }
}

/// Every pattern of directly stored boxes, under many interleavings.
fn check(kernel: &Kernel) -> Result<(), String> {
    let boxes = kernel.script.boxes();
    // Every pattern where there are few boxes; else none, all, each box alone, and every
    // box column of a grid 2, 3 or 4 boxes wide (a ragged N stores the boxes across it
    // directly, one in each box row).
    let patterns: Vec<Vec<bool>> = if boxes <= 6 {
        (0..1u32 << boxes)
            .map(|pattern| (0..boxes).map(|b| pattern >> b & 1 == 1).collect())
            .collect()
    } else {
        let mut patterns = vec![vec![false; boxes], vec![true; boxes]];
        patterns.extend((0..boxes).map(|one| (0..boxes).map(|b| b == one).collect()));
        for width in 2..=4 {
            patterns.extend((0..width).map(|col| (0..boxes).map(|b| b % width == col).collect()));
        }
        patterns
    };
    // A deadlock is reported only where no interleaving fails otherwise: a wait on the
    // wrong phase may deadlock one interleaving and read the wrong C-in in another, and the
    // second says more.
    let mut deadlock = None;
    for direct in patterns {
        for seed in 0..300 {
            match run(kernel, &direct, seed * 0x9e37_79b9 + 1) {
                Ok(()) => {}
                Err(e) if e.starts_with("deadlock") => {
                    deadlock.get_or_insert(format!("direct boxes {direct:?}, seed {seed}: {e}"));
                }
                Err(e) => return Err(format!("direct boxes {direct:?}, seed {seed}: {e}")),
            }
        }
    }
    deadlock.map_or(Ok(()), Err)
}

fn c_in_specs() -> Vec<Emitted> {
    [
        "name: c_in_flagship, arch: sm_90a, mma: wgmma, tile: 128x256x64, schedule: persistent, scale: alpha_beta, bias: col, activation: gelu",
        "name: c_in_pingpong, arch: sm_90a, mma: wgmma, tile: 128x128x64, consumers: pingpong, stages: 6, schedule: persistent, scale: alpha_beta",
        "name: c_in_one_box_row, arch: sm_90a, mma: wgmma, tile: 64x64x64, consumers: 1, scale: alpha_beta",
    ]
    .iter()
    .map(|spec| gemm_codegen::emit_str(spec).unwrap())
    .collect()
}

/// Kernels that stage D only: two buffers, each box's store issued once the last box's store
/// has read the other buffer.
fn store_specs() -> Vec<Emitted> {
    [
        "name: stores_pingpong_192x96, arch: sm_90a, mma: wgmma, tile: 192x96x64, consumers: pingpong, stages: 5, schedule: persistent",
        "name: stores_flagship, arch: sm_90a, mma: wgmma, tile: 128x256x64, schedule: persistent",
        "name: stores_fused, arch: sm_90a, mma: wgmma, tile: 128x128x64, consumers: pingpong, stages: 6, schedule: persistent, bias: col, activation: gelu",
        "name: stores_one_box_row, arch: sm_90a, mma: wgmma, tile: 64x64x64, consumers: 1",
        "name: stores_f16, arch: sm_90a, mma: wgmma, dtype: f16, tile: 128x128x64, stages: 5, schedule: persistent(raster = n, group = 4)",
    ]
    .iter()
    .map(|spec| gemm_codegen::emit_str(spec).unwrap_or_else(|e| panic!("{spec}: {e}")))
    .collect()
}

#[test]
fn store_buffers_are_read_before_they_are_refilled_under_any_interleaving() {
    for emitted in c_in_specs().into_iter().chain(store_specs()) {
        let kernel = kernel(&emitted, emitted.ptx());
        check(&kernel).unwrap_or_else(|e| panic!("{}: {e}", emitted.kernel_name()));
    }
}

/// The C-in kernels' scripts read what the loads, waits and copies name from the PTX: a
/// first box's load into `%c_buf` at the tile's origin, completing on the first C-in barrier
/// with the bytes of one box announced.
#[test]
fn c_in_scripts_read_their_operands_from_the_ptx() {
    for emitted in c_in_specs() {
        let kernel = kernel(&emitted, emitted.ptx());
        let script = &kernel.script;
        let regs = placed(script).unwrap();
        let name = |v: &Value| match v {
            Value::Reg(r) => script.names[*r].as_str(),
            Value::Imm(_) => "a number",
        };
        let loads: Vec<&Step> = script
            .steps
            .iter()
            .filter(|s| matches!(s, Step::Load { .. }))
            .collect();
        assert!(!loads.is_empty(), "{}", emitted.kernel_name());
        let Step::Load {
            buffer, barrier, ..
        } = loads[0]
        else {
            unreachable!()
        };
        assert_eq!(name(buffer), "%c_buf");
        assert_eq!(name(barrier), "%st_addr");
        let announced: Vec<i64> = script
            .steps
            .iter()
            .filter_map(|s| match s {
                Step::ExpectTx { bytes, .. } => Some(*bytes),
                _ => None,
            })
            .collect();
        assert_eq!(announced.len(), loads.len());
        assert!(announced.iter().all(|&b| b == kernel.box_bytes));
        let bars = regs
            .get(
                script,
                Value::Reg(script.names.iter().position(|n| n == "%cin_bars").unwrap()),
            )
            .unwrap();
        assert!(
            script.barriers.contains(&(bars, 1)) && script.barriers.contains(&(bars + 8, 1)),
            "two C-in barriers of one arrival each at {bars}: {:?}",
            script.barriers
        );
        let places = box_places(script, 0).unwrap();
        assert_eq!(
            places[0],
            [10_000, 20_000, 0],
            "the first box at the tile's origin"
        );
    }
}

/// `text` with every `from` replaced by `to`, which must change it.
fn edit(text: &str, from: &str, to: &str) -> String {
    assert!(text.contains(from), "the PTX has `{from}`");
    text.replace(from, to)
}

/// Checks that the model fails each broken variant of `emitted`'s PTX with an error holding
/// every fragment of its `want`; all run before any fails.
fn assert_caught(emitted: &Emitted, breakages: &[(&str, String, &[&str])]) {
    let mut wrong = Vec::new();
    for (what, broken, want) in breakages {
        assert_ne!(broken, emitted.ptx(), "{what}: the edit changes the kernel");
        match check(&kernel(emitted, broken)) {
            Ok(()) => wrong.push(format!("{what}: the model did not catch it")),
            Err(caught) => {
                eprintln!("{what}: {caught}");
                if !want.iter().all(|fragment| caught.contains(fragment)) {
                    wrong.push(format!("{what}: wanted {want:?}, got: {caught}"));
                }
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// The store-only protocol's wait, removed or loosened in the PTX, is missed; so are a store
/// group never committed and D staged in the buffer the store does not read. (Letting the
/// last store run on needs a third buffer, or a second barrier before each box's staging:
/// measured no faster, `results/clusters-2026-11-26/epilogue-ab.txt`.)
#[test]
fn broken_store_waits_are_caught() {
    let emitted = &store_specs()[0];
    let ptx = emitted.ptx();
    let wait =
        "\t@%p_store_leader cp.async.bulk.wait_group.read\t0;\n\tbar.sync\t%store_bar, 128;\n";
    let staged_early: &[&str] = &[
        "staged box ",
        "'s D in buffer ",
        " before the store of box ",
    ];
    // Every stmatrix of every box into `%c_buf_other`.
    let mut other_buffer = ptx.to_string();
    for offset in 0..2 {
        let stage = format!("\tadd.u32\t%st_addr, %c_buf, %st_off{offset};\n\tstmatrix");
        other_buffer = edit(
            &other_buffer,
            &stage,
            &stage.replace("%c_buf,", "%c_buf_other,"),
        );
    }
    assert_caught(
        emitted,
        &[
            (
                "a box stored before the last box's store read the other buffer",
                edit(ptx, wait, &wait.replace("read\t0;\n", "read\t1;\n")),
                staged_early,
            ),
            (
                "no wait at all",
                edit(ptx, wait, "\tbar.sync\t%store_bar, 128;\n"),
                staged_early,
            ),
            (
                "stores never committed: the wait waits for none of them",
                edit(ptx, "\t@%p_store_leader cp.async.bulk.commit_group;\n", ""),
                staged_early,
            ),
            (
                "D staged in the other buffer than the store reads",
                other_buffer,
                &["the store of box 0 read buffer 0 before warp 0 staged its D there (it holds nothing)"],
            ),
        ],
    );
}

/// Each guard and each operand of the C-in protocol, broken in the PTX, is caught with the
/// message of what it breaks.
#[test]
fn broken_c_in_loads_are_caught() {
    let emitted = &c_in_specs()[0];
    let ptx = emitted.ptx();
    let wait_barrier = "\tand.b32\t%st_addr, %cin_boxes, 1;\n\tmad.lo.u32\t%st_addr, %st_addr, 8, %cin_bars;\n\tbfe.u32";
    let read = "\tadd.u32\t%st_addr, %c_buf, %st_off0;\n\tldmatrix";
    let second_load = "\t@%p_store_leader add.u32\t%st_x, %block_n, 64;\n\t@%p_store_leader add.u32\t%st_y, %st_y0, 0;\n\t@%p_store_leader mov.u64\t%wide";
    let announce = "mbarrier.arrive.expect_tx.shared::cta.b64\t_, [%st_addr], 8192;";
    let load_map = "\t@%p_store_leader mov.u64\t%wide, c_in_flagship_c_in_map;";
    // Tile 0's origin is (10000, 20000) in batch 0; its boxes are 64 columns wide.
    assert_caught(
        emitted,
        &[
            (
                "a directly stored box without the warpgroup's barrier",
                edit(ptx, "\t@%p_direct_box bar.sync\t%store_bar, 128;\n", ""),
                // The leader loads a later box into the buffer it passed on before a warp
                // read its C-in there.
                &["read box ", "'s C-in (at ", "from buffer 0, which holds the C-in at "],
            ),
            (
                "a load into a buffer before its store read it",
                edit(
                    ptx,
                    "\t@%p_store_leader cp.async.bulk.wait_group.read\t0;\n\t@%p_store_leader add.u32\t%st_addr, %cin_boxes, 1;",
                    "\t@%p_store_leader add.u32\t%st_addr, %cin_boxes, 1;",
                ),
                &["landed in buffer ", "'s D before its store read it"],
            ),
            (
                "a directly stored box that keeps its buffer",
                edit(ptx, "\t@%p_direct_box mov.u32\t%c_buf, %c_buf_other;\n", ""),
                &["read box 1's C-in (at [10064, 20000, 0]) from buffer 0, which holds the C-in at [10128, 20000, 0]"],
            ),
            (
                "the wait on the other C-in barrier",
                edit(
                    ptx,
                    wait_barrier,
                    &wait_barrier.replace(
                        "and.b32\t%st_addr, %cin_boxes, 1;",
                        "xor.b32\t%st_addr, %cin_boxes, 1;\n\tand.b32\t%st_addr, %st_addr, 1;",
                    ),
                ),
                &["read box 0's C-in (at [10000, 20000, 0]) from buffer 0, which holds nothing"],
            ),
            (
                "the wait for the wrong parity (the box's low bit, not its lap)",
                edit(
                    ptx,
                    "bfe.u32\t%st_tmp, %cin_boxes, 1, 1;",
                    "bfe.u32\t%st_tmp, %cin_boxes, 0, 1;",
                ),
                &["read box 1's C-in (at [10064, 20000, 0]) from buffer 1, which holds nothing"],
            ),
            (
                "C-in read from the other buffer",
                edit(ptx, read, &read.replace("%c_buf,", "%c_buf_other,")),
                &["read box 0's C-in (at [10000, 20000, 0]) from buffer 1, which holds"],
            ),
            (
                "the second box's C-in loaded from the first box's place",
                edit(ptx, second_load, &second_load.replace("%block_n, 64;", "%block_n, 0;")),
                &["read box 1's C-in (at [10064, 20000, 0]) from buffer 1, which holds the C-in at [10000, 20000, 0]"],
            ),
            (
                "half a box's bytes announced",
                edit(ptx, announce, &announce.replace("8192;", "4096;")),
                &["brings 8192 bytes to the barrier at 229440, whose phase announced 4096"],
            ),
            (
                "twice a box's bytes announced: the barrier never completes",
                edit(ptx, announce, &announce.replace("8192;", "16384;")),
                &["deadlock: warp 0 waits for parity 0 of the barrier at 229440 (0 phases completed)"],
            ),
            (
                "each box's bytes announced twice: two arrivals on a barrier of one",
                edit(ptx, announce, &format!("{announce}\n\t@%p_store_leader {announce}")),
                &["the barrier at 229440: an arrival past its count in one phase"],
            ),
            (
                "C-in read at the C-in barriers' address",
                edit(ptx, read, &read.replace("%c_buf,", "%cin_bars,")),
                &["address 229440 is in neither buffer (at [196608, 204800], 8192 bytes each)"],
            ),
            (
                "D stored through C-in's tensor map",
                edit(
                    ptx,
                    "bulk_group\t[%c_map, {",
                    "bulk_group\t[%wide, {",
                ),
                &["a store writes through the tensor map `c_in_flagship_c_in_map`, not `c_in_flagship_c_map`"],
            ),
            (
                "C-in loaded through C's tensor map",
                edit(ptx, load_map, &load_map.replace("c_in_map", "c_map")),
                &["a C-in load reads the tensor map `c_in_flagship_c_map`, not `c_in_flagship_c_in_map`"],
            ),
        ],
    );
}
