//! The grouped walk (`groups: contiguous | masked`), replayed from the emitted PTX on the CPU
//! and held to the model in `gemm_dsl::grouped`:
//!
//! 1. **The tables, per block.** A grouped kernel's blocks start by building two tables in
//!    shared memory from the device's int32 row table (the `build` macro): each expert's end,
//!    and the row tiles of the experts up to it. Those lines are run for a whole block, every
//!    thread with its own registers, over a shared memory that starts poisoned, and must
//!    leave [`GroupRows`]' ends and [`GroupedTiles`]' prefix sums in the tables, the walk's
//!    row tiles in every thread, and every word outside the tables untouched.
//! 2. **Each tile's expert, per tile.** For every index of the walk, the walk's
//!    `tile_coordinates` and then the consumers' `locate` (a binary search of those tables)
//!    are run, and must give [`GroupedTiles::tile_at`]'s expert, first row and column, and
//!    the expert's end as the bound of the tile's rows: every row tile of every expert by
//!    every tile column exactly once, none reaching past its expert or the buffer. The
//!    producer's copy of the search runs for some of the indices and must agree.
//!
//! **Why the warps run in two orders.** The build's scans shuffle inside a warp and meet across
//! warps in shared memory, behind `bar.sync`. A replay that ran all threads in lockstep would
//! pass with a barrier missing, so here only a warp's 32 lanes run in lockstep (a shuffle
//! needs them together); between two barriers one warp runs up to the barrier before the next
//! starts: warp 0 first, then warp 1 and so on, and in a second replay the last warp first.
//! A read that no barrier orders after the write it needs then sees the stale (poisoned) word
//! in one of the two orders, and the tables come out wrong.
//!
//! The replay knows only the instructions these blocks use and panics on any other, so a
//! template change cannot pass unreplayed. The checks return an error rather than panic, so
//! the last test can show that broken copies of the PTX fail them.

use gemm_codegen::emit_str;
use gemm_codegen::gemm_dsl::grouped::{GroupRows, GroupedTiles, SplitMix64, TABLE_BYTES};
use gemm_codegen::gemm_dsl::{BandOrder, Groups, Schedule};
use std::collections::{HashMap, HashSet};

/// The kernels replayed: each layout with tiles whose height is a power of two and one whose
/// height (192) divides by multiplication, with 1 to 3 consumer warpgroups (256 to 512
/// threads), and with bands advancing along M and along N.
const CONTIGUOUS_SPECS: [&str; 3] = [
    "name: g, arch: sm_90a, mma: wgmma, layout: rc, tile: 128x256x64, groups: contiguous",
    "name: g, arch: sm_90a, mma: wgmma, layout: rr, tile: 192x128x64, consumers: 3, groups: contiguous",
    "name: g, arch: sm_90a, mma: wgmma, layout: rr, tile: 192x128x64, consumers: 3, schedule: persistent(raster = n, group = 4), groups: contiguous",
];
const MASKED_SPECS: [&str; 2] = [
    "name: g, arch: sm_90a, mma: wgmma, layout: rc, tile: 128x128x64, consumers: 1, groups: masked",
    "name: g, arch: sm_90a, mma: wgmma, layout: rc, tile: 128x128x64, schedule: persistent(raster = n, group = 4), groups: masked",
];
/// The stream-K kernels (`tail = stream_k`): the same build and search, reached from the
/// stream-K walk's units (`codegen/tests/stream_k_walk.rs` replays how they split).
const STREAM_K_SPECS: [&str; 2] = [
    "name: g, arch: sm_90a, mma: wgmma, layout: rr, tile: 128x256x64, stages: 3, epilogue: tma, schedule: persistent(tail = stream_k), groups: contiguous",
    "name: g, arch: sm_90a, mma: wgmma, layout: rr, tile: 128x128x64, stages: 5, epilogue: tma, schedule: persistent(tail = stream_k), groups: masked",
];

/// Ping-pong consumers: each takes alternate tiles of its block's walk and finds their
/// experts with the same build and search.
const PINGPONG_SPECS: [&str; 2] = [
    "name: g, arch: sm_90a, mma: wgmma, layout: rc, tile: 128x128x64, consumers: pingpong, stages: 6, groups: contiguous",
    "name: g, arch: sm_90a, mma: wgmma, layout: rr, tile: 128x128x64, consumers: pingpong, stages: 5, epilogue: tma, groups: masked",
];

/// Every spec above names its kernel `g`: its parameters are `g_<param>`.
const PARAM_PREFIX: &str = "g_";
/// Blocks of the persistent grid (`%nctaid.x`): an H100's SMs.
const GRID_BLOCKS: u32 = 132;
/// Where the replay puts the block's (aligned) shared memory and the device's row table.
const SHARED_BASE: u32 = 0x1_0000;
const TABLE_ADDRESS: u64 = 0x7f12_3400_0000;
/// The kernel rounds its shared memory's address up to 1024 bytes: of the dynamic shared
/// memory it asks for, it may lose this many before `%smem`.
const ALIGNMENT_SLACK: u32 = 1023;
/// What shared memory holds before the build writes it: above any expert's end or row-tile
/// count, so a max-scan or a sum that reads it before its word is written goes wrong.
const POISON: u32 = 0xdead_beef;
/// Instructions (counted once a warp) one replay may run before it counts as a loop that
/// never ends.
const STEP_LIMIT: usize = 1_000_000;
/// The producer's search is replayed for every this-many-th tile.
const PRODUCER_EVERY: u32 = 7;
/// The registers the table build leaves for the walk (the `registers` macro's).
const BUILD_OUTPUTS: [&str; 5] = [
    "%groups",
    "%group_capacity",
    "%group_ends",
    "%group_through",
    "%group_row_tiles",
];

// ---------------------------------------------------------------------------------------
// The replayed text: a tiny interpreter of the u32 instructions the grouped walk uses.
// ---------------------------------------------------------------------------------------

#[derive(Clone, Copy, Debug)]
enum Compare {
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
    Ne,
}

impl Compare {
    fn parse(text: &str) -> Option<Compare> {
        Some(match text {
            "lt" => Compare::Lt,
            "le" => Compare::Le,
            "gt" => Compare::Gt,
            "ge" => Compare::Ge,
            "eq" => Compare::Eq,
            "ne" => Compare::Ne,
            _ => return None,
        })
    }

    fn holds(self, a: u32, b: u32) -> bool {
        match self {
            Compare::Lt => a < b,
            Compare::Le => a <= b,
            Compare::Gt => a > b,
            Compare::Ge => a >= b,
            Compare::Eq => a == b,
            Compare::Ne => a != b,
        }
    }
}

/// The operations the replay knows (u32 unless named otherwise).
#[derive(Clone, Copy, Debug)]
enum Op {
    /// `ld.param.u32` and `.u64`: every parameter holds its value at its own width.
    LoadParam,
    /// `cvta.to.global.u64`: the replay's global addresses are generic ones.
    ToGlobal,
    Move,
    Add,
    Sub,
    MulLo,
    MulAdd,
    MulHi,
    ShiftRight,
    ShiftLeft,
    And,
    MulWide,
    Add64,
    MaxSigned,
    Max,
    Min,
    Div,
    Rem,
    Select,
    Compare(Compare),
    /// `setp.<cmp>.and.u32 p, a, b, q`: the comparison and `q`.
    CompareAnd(Compare),
    LoadGlobal,
    LoadShared,
    StoreShared,
    /// `shfl.sync.up.b32 d|p, a, distance, 0, -1`.
    ShuffleUp,
    /// `bar.sync 0`.
    Barrier,
    /// `bra` and `bra.uni`.
    Branch,
}

impl Op {
    fn parse(opcode: &str) -> Option<Op> {
        Some(match opcode {
            "ld.param.u32" | "ld.param.u64" => Op::LoadParam,
            "cvta.to.global.u64" => Op::ToGlobal,
            "mov.u32" => Op::Move,
            "add.u32" => Op::Add,
            "sub.u32" => Op::Sub,
            "mul.lo.u32" => Op::MulLo,
            "mad.lo.u32" => Op::MulAdd,
            "mul.hi.u32" => Op::MulHi,
            "shr.u32" => Op::ShiftRight,
            "shl.b32" => Op::ShiftLeft,
            "and.b32" => Op::And,
            "mul.wide.u32" => Op::MulWide,
            "add.u64" => Op::Add64,
            "max.s32" => Op::MaxSigned,
            "max.u32" => Op::Max,
            "min.u32" => Op::Min,
            "div.u32" => Op::Div,
            "rem.u32" => Op::Rem,
            "selp.u32" => Op::Select,
            "ld.global.u32" => Op::LoadGlobal,
            "ld.shared.u32" => Op::LoadShared,
            "st.shared.u32" => Op::StoreShared,
            "shfl.sync.up.b32" => Op::ShuffleUp,
            "bar.sync" => Op::Barrier,
            "bra" | "bra.uni" => Op::Branch,
            _ => {
                let compare = opcode.strip_prefix("setp.")?.strip_suffix(".u32")?;
                match compare.strip_suffix(".and") {
                    Some(compare) => Op::CompareAnd(Compare::parse(compare)?),
                    None => Op::Compare(Compare::parse(compare)?),
                }
            }
        })
    }
}

enum Operand {
    /// A register by its index in [`Program::registers`].
    Register(usize),
    Immediate(u64),
    /// `[%register+offset]`.
    Address {
        base: usize,
        offset: i64,
    },
    /// `[g_<name>]`: a kernel parameter.
    Param(String),
    /// An instruction index: a label's.
    Label(usize),
    /// `%d|%p`: a shuffle's value and whether its source lane was in the warp.
    Pair(usize, usize),
}

#[derive(Clone, Copy)]
struct Guard {
    predicate: usize,
    negated: bool,
}

struct Instruction {
    text: String,
    guard: Option<Guard>,
    op: Op,
    operands: Vec<Operand>,
}

/// Registers of one thread, by index (`None` until written).
type Registers = Vec<Option<u64>>;

/// Cut lines of PTX, parsed: instructions with their registers numbered.
struct Program {
    instructions: Vec<Instruction>,
    registers: Vec<String>,
}

impl Program {
    /// Parses `lines`, skipping comments, declarations and braces.
    fn parse(lines: &[&str]) -> Program {
        let statements: Vec<&str> = lines
            .iter()
            .map(|line| line.trim())
            .filter(|line| {
                !(line.is_empty()
                    || line.starts_with("//")
                    || line.starts_with('.')
                    || *line == "{"
                    || *line == "}")
            })
            .collect();
        // Labels first: a branch may jump forward.
        let mut labels = HashMap::new();
        let mut instructions = 0;
        for statement in &statements {
            if let Some(label) = statement.strip_suffix(':') {
                labels.insert(label, instructions);
            } else {
                instructions += 1;
            }
        }
        let mut program = Program {
            instructions: Vec::with_capacity(instructions),
            registers: Vec::new(),
        };
        for statement in statements.iter().filter(|s| !s.ends_with(':')) {
            let instruction = program.instruction(statement, &labels);
            program.instructions.push(instruction);
        }
        program
    }

    fn instruction(&mut self, text: &str, labels: &HashMap<&str, usize>) -> Instruction {
        let (guard, body) = match text.strip_prefix('@') {
            Some(guarded) => {
                let (predicate, body) = guarded
                    .split_once(char::is_whitespace)
                    .unwrap_or_else(|| panic!("a guard without an instruction: {text}"));
                let (negated, name) = match predicate.strip_prefix('!') {
                    Some(name) => (true, name),
                    None => (false, predicate),
                };
                let predicate = self.register(name);
                (Some(Guard { predicate, negated }), body.trim())
            }
            None => (None, text),
        };
        let (opcode, operands) = body
            .trim_end_matches(';')
            .split_once(char::is_whitespace)
            .unwrap_or_else(|| panic!("no operands: {text}"));
        let op = Op::parse(opcode)
            .unwrap_or_else(|| panic!("the replay does not know `{opcode}`: {text}"));
        let operands = operands
            .split(',')
            .map(|operand| self.operand(operand.trim(), labels, text))
            .collect();
        Instruction {
            text: text.to_string(),
            guard,
            op,
            operands,
        }
    }

    fn operand(&mut self, operand: &str, labels: &HashMap<&str, usize>, text: &str) -> Operand {
        if let Some(inside) = operand
            .strip_prefix('[')
            .and_then(|rest| rest.strip_suffix(']'))
        {
            return match inside.strip_prefix(PARAM_PREFIX) {
                Some(param) => Operand::Param(param.to_string()),
                None => {
                    let (base, offset) = inside.split_once('+').unwrap_or((inside, "0"));
                    Operand::Address {
                        base: self.register(base),
                        offset: offset
                            .parse()
                            .unwrap_or_else(|_| panic!("an address's offset: {text}")),
                    }
                }
            };
        }
        if let Some((value, predicate)) = operand.split_once('|') {
            return Operand::Pair(self.register(value), self.register(predicate));
        }
        if operand.starts_with('%') {
            return Operand::Register(self.register(operand));
        }
        if operand.starts_with('$') {
            return Operand::Label(
                *labels
                    .get(operand)
                    .unwrap_or_else(|| panic!("no label {operand} in the cut lines: {text}")),
            );
        }
        let value = match operand.strip_prefix("0x") {
            Some(hex) => i64::from_str_radix(hex, 16),
            None => operand.parse(),
        };
        Operand::Immediate(
            value.unwrap_or_else(|_| panic!("the replay does not know operand `{operand}`: {text}"))
                as u64,
        )
    }

    /// The index of register `name`, numbering it if new.
    fn register(&mut self, name: &str) -> usize {
        match self.index(name) {
            Some(index) => index,
            None => {
                self.registers.push(name.to_string());
                self.registers.len() - 1
            }
        }
    }

    fn index(&self, name: &str) -> Option<usize> {
        self.registers.iter().position(|register| register == name)
    }

    /// Fresh registers: `values` set, every other unwritten.
    fn registers_with(&self, values: &[(&str, u64)]) -> Registers {
        let mut registers = vec![None; self.registers.len()];
        for &(name, value) in values {
            if let Some(index) = self.index(name) {
                registers[index] = Some(value);
            }
        }
        registers
    }

    /// What `registers` hold in register `name`, if the program has it and wrote it.
    fn value(&self, registers: &Registers, name: &str) -> Option<u64> {
        self.index(name).and_then(|index| registers[index])
    }
}

/// A block's shared memory from [`SHARED_BASE`], word by word.
struct SharedMemory {
    words: Vec<u32>,
}

impl SharedMemory {
    /// `bytes` of shared memory, every word [`POISON`].
    fn poisoned(bytes: u32) -> SharedMemory {
        SharedMemory {
            words: vec![POISON; (bytes / 4) as usize],
        }
    }

    /// The index in `words` of the word at `address`.
    fn index(&self, address: u32) -> Result<usize, String> {
        let index = address
            .checked_sub(SHARED_BASE)
            .filter(|offset| offset % 4 == 0)
            .map(|offset| (offset / 4) as usize)
            .filter(|&index| index < self.words.len());
        index.ok_or_else(|| format!("{address:#x} is not a word of the block's shared memory"))
    }

    fn load(&self, address: u32) -> Result<u32, String> {
        Ok(self.words[self.index(address)?])
    }

    fn store(&mut self, address: u32, value: u32) -> Result<(), String> {
        let index = self.index(address)?;
        self.words[index] = value;
        Ok(())
    }

    /// The addresses in `tables` (a byte range) aside, the first word written.
    fn written_outside(&self, tables: std::ops::Range<u32>) -> Option<u32> {
        (SHARED_BASE..)
            .step_by(4)
            .zip(&self.words)
            .find(|&(address, &word)| word != POISON && !tables.contains(&address))
            .map(|(address, _)| address)
    }
}

/// What the replayed lines read besides shared memory: the kernel's parameters and the
/// device's row table at [`TABLE_ADDRESS`].
struct Device<'a> {
    params: HashMap<&'static str, u64>,
    table: &'a [i32],
}

impl Device<'_> {
    fn param(&self, name: &str) -> u64 {
        *self
            .params
            .get(name)
            .unwrap_or_else(|| panic!("the replay passes no parameter `{name}`"))
    }

    fn load(&self, address: u64) -> Result<u32, String> {
        let entry = address
            .checked_sub(TABLE_ADDRESS)
            .filter(|offset| offset % 4 == 0)
            .and_then(|offset| self.table.get((offset / 4) as usize));
        entry
            .map(|&entry| entry as u32)
            .ok_or_else(|| format!("{address:#x} is not an entry of the row table"))
    }
}

/// The order the warps of a block take turns in between two barriers.
#[derive(Clone, Copy, Debug)]
enum WarpOrder {
    FirstWarpFirst,
    LastWarpFirst,
}

/// A replay of one program over one block.
struct Machine<'a> {
    program: &'a Program,
    device: &'a Device<'a>,
    shared: &'a mut SharedMemory,
    steps: usize,
}

impl Machine<'_> {
    /// Runs the program for `threads` (warps of 32 in lockstep), one warp at a time between
    /// barriers, in `order`.
    fn run_block(&mut self, threads: &mut [Registers], order: WarpOrder) -> Result<(), String> {
        let mut warps: Vec<(usize, &mut [Registers])> =
            threads.chunks_mut(32).enumerate().collect();
        if let WarpOrder::LastWarpFirst = order {
            warps.reverse();
        }
        // Where each warp goes on from (`None`: it has run the last instruction).
        let mut resume = vec![Some(0); warps.len()];
        while resume.iter().any(Option::is_some) {
            for (warp, lanes) in &mut warps {
                if let Some(pc) = resume[*warp] {
                    resume[*warp] = self.run_warp(lanes, pc)?;
                }
            }
            if resume.iter().any(Option::is_none) && resume.iter().any(Option::is_some) {
                return Err("warps wait at a barrier that others have run past the end of".into());
            }
        }
        Ok(())
    }

    /// Runs one warp from instruction `pc` to a barrier (`Some` of the instruction after it)
    /// or the end (`None`).
    fn run_warp(
        &mut self,
        lanes: &mut [Registers],
        mut pc: usize,
    ) -> Result<Option<usize>, String> {
        while let Some(instruction) = self.program.instructions.get(pc) {
            self.steps += 1;
            if self.steps > STEP_LIMIT {
                return Err(format!("still running after {STEP_LIMIT} instructions"));
            }
            // Which lanes the guard lets run.
            let mut active = [false; 32];
            for (runs, registers) in active.iter_mut().zip(lanes.iter()) {
                *runs = self.runs(instruction, registers)?;
            }
            let active = &active[..lanes.len()];
            let every_lane = active.iter().all(|&runs| runs);
            match instruction.op {
                Op::Barrier | Op::ShuffleUp if !every_lane => {
                    return Err(format!("`{}` without every lane", instruction.text));
                }
                Op::Barrier => return Ok(Some(pc + 1)),
                Op::ShuffleUp => self.shuffle_up(instruction, lanes)?,
                Op::Branch => {
                    if !every_lane && active.iter().any(|&runs| runs) {
                        return Err(format!("the warp diverges at `{}`", instruction.text));
                    }
                    if every_lane {
                        let [Operand::Label(target)] = instruction.operands[..] else {
                            panic!("a branch to a label: {}", instruction.text);
                        };
                        pc = target;
                        continue;
                    }
                }
                _ => {
                    for (registers, _) in lanes.iter_mut().zip(active).filter(|(_, &runs)| runs) {
                        self.execute(instruction, registers)?;
                    }
                }
            }
            pc += 1;
        }
        Ok(None)
    }

    /// Whether `instruction`'s guard lets it run in a thread with `registers`.
    fn runs(&self, instruction: &Instruction, registers: &Registers) -> Result<bool, String> {
        Ok(match instruction.guard {
            None => true,
            Some(guard) => {
                (self.read(instruction, registers, &Operand::Register(guard.predicate))? != 0)
                    != guard.negated
            }
        })
    }

    fn read(
        &self,
        instruction: &Instruction,
        registers: &Registers,
        operand: &Operand,
    ) -> Result<u64, String> {
        match *operand {
            Operand::Register(index) => registers[index].ok_or_else(|| {
                format!(
                    "`{}` reads {} before anything writes it",
                    instruction.text, self.program.registers[index]
                )
            }),
            Operand::Immediate(value) => Ok(value),
            _ => panic!("not a value: {}", instruction.text),
        }
    }

    /// `shfl.sync.up.b32 d|p, a, distance, 0, -1`: lane i takes lane i - distance's `a` and
    /// p = 1, or its own `a` and p = 0 where there is no such lane; every lane's `a` is read
    /// before any lane's `d` is written.
    fn shuffle_up(&self, instruction: &Instruction, lanes: &mut [Registers]) -> Result<(), String> {
        let [Operand::Pair(value, inside), ref source, Operand::Immediate(distance), Operand::Immediate(0), Operand::Immediate(u64::MAX)] =
            instruction.operands[..]
        else {
            panic!(
                "the replay knows only a whole warp's shfl.up: {}",
                instruction.text
            );
        };
        assert_eq!(
            lanes.len(),
            32,
            "a shuffle needs a whole warp: {}",
            instruction.text
        );
        let sources = lanes
            .iter()
            .map(|registers| self.read(instruction, registers, source))
            .collect::<Result<Vec<u64>, String>>()?;
        for (lane, registers) in lanes.iter_mut().enumerate() {
            let from = lane.checked_sub(distance as usize);
            registers[value] = Some(sources[from.unwrap_or(lane)]);
            registers[inside] = Some(u64::from(from.is_some()));
        }
        Ok(())
    }

    /// Runs one instruction (neither a barrier, a branch nor a shuffle) in one thread.
    fn execute(
        &mut self,
        instruction: &Instruction,
        registers: &mut Registers,
    ) -> Result<(), String> {
        let operands = &instruction.operands;
        let wide = |i: usize| self.read(instruction, registers, &operands[i]);
        let word = |i: usize| wide(i).map(|value| value as u32);
        let address = |i: usize| match operands[i] {
            Operand::Address { base, offset } => {
                let base = self.read(instruction, registers, &Operand::Register(base))?;
                Ok::<u64, String>(base.wrapping_add(offset as u64))
            }
            _ => panic!("not an address: {}", instruction.text),
        };
        let result = match instruction.op {
            Op::LoadParam => match &operands[1] {
                Operand::Param(name) => self.device.param(name),
                _ => panic!("not a parameter: {}", instruction.text),
            },
            Op::ToGlobal => wide(1)?,
            Op::Move => u64::from(word(1)?),
            Op::Add => u64::from(word(1)?.wrapping_add(word(2)?)),
            Op::Sub => u64::from(word(1)?.wrapping_sub(word(2)?)),
            Op::MulLo => u64::from(word(1)?.wrapping_mul(word(2)?)),
            Op::MulAdd => u64::from(word(1)?.wrapping_mul(word(2)?).wrapping_add(word(3)?)),
            Op::MulHi => (u64::from(word(1)?) * u64::from(word(2)?)) >> 32,
            Op::ShiftRight => u64::from(word(1)?.checked_shr(word(2)?).unwrap_or(0)),
            Op::ShiftLeft => u64::from(word(1)?.checked_shl(word(2)?).unwrap_or(0)),
            Op::And => u64::from(word(1)? & word(2)?),
            Op::MulWide => u64::from(word(1)?) * u64::from(word(2)?),
            Op::Add64 => wide(1)?.wrapping_add(wide(2)?),
            Op::MaxSigned => u64::from((word(1)? as i32).max(word(2)? as i32) as u32),
            Op::Max => u64::from(word(1)?.max(word(2)?)),
            Op::Min => u64::from(word(1)?.min(word(2)?)),
            Op::Div | Op::Rem => {
                let (dividend, divisor) = (word(1)?, word(2)?);
                if divisor == 0 {
                    return Err(format!("`{}` divides by 0", instruction.text));
                }
                u64::from(match instruction.op {
                    Op::Div => dividend / divisor,
                    _ => dividend % divisor,
                })
            }
            Op::Select => u64::from(if word(3)? != 0 { word(1)? } else { word(2)? }),
            Op::Compare(compare) => u64::from(compare.holds(word(1)?, word(2)?)),
            Op::CompareAnd(compare) => {
                u64::from(compare.holds(word(1)?, word(2)?) && word(3)? != 0)
            }
            Op::LoadGlobal => u64::from(self.device.load(address(1)?)?),
            Op::LoadShared => u64::from(self.shared.load(address(1)? as u32)?),
            Op::StoreShared => {
                let (at, value) = (address(0)? as u32, word(1)?);
                return self.shared.store(at, value);
            }
            Op::ShuffleUp | Op::Barrier | Op::Branch => unreachable!("run by the warp"),
        };
        let Operand::Register(destination) = operands[0] else {
            panic!("no destination register: {}", instruction.text);
        };
        registers[destination] = Some(result);
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------
// The kernel's walk, cut out of its PTX.
// ---------------------------------------------------------------------------------------

/// A grouped kernel's walk, cut into the blocks the replay runs.
struct Kernel {
    schedule: Schedule,
    tile_m: u32,
    tile_n: u32,
    masked: bool,
    /// `.reqntid`.
    threads: u32,
    /// The block's shared memory from the kernel's `%smem`.
    shared_bytes: u32,
    /// The table build, run by every thread of the block.
    build: Program,
    /// The walk's `tile_coordinates` and then `locate`, as the consumers and the producer
    /// run them.
    consumer_walk: Program,
    producer_walk: Program,
}

/// Where the walk puts one tile: its expert (B's matrix), first row and column, and the end
/// of its expert's rows (where its stores stop).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Located {
    expert: u32,
    first_row: u32,
    expert_end: u32,
    first_col: u32,
}

/// A block after the table build: its threads' registers and its shared memory.
struct BuiltBlock {
    threads: Vec<Registers>,
    shared: SharedMemory,
}

impl Kernel {
    /// The kernel of `spec`, its PTX first changed by `edit` (the broken variants').
    fn emit(spec: &str, edit: impl FnOnce(&str) -> String) -> Kernel {
        let emitted = emit_str(spec).unwrap_or_else(|e| panic!("{spec}: {e}"));
        let ptx = edit(emitted.ptx());
        let lines: Vec<&str> = ptx.lines().collect();
        let threads = lines
            .iter()
            .find_map(|line| line.strip_prefix(".reqntid "))
            .and_then(|sizes| sizes.split(',').next())
            .and_then(|x_threads| x_threads.trim().parse().ok())
            .expect("the kernel names its block size");
        let launch = emitted.launch();
        Kernel {
            schedule: emitted.spec().schedule,
            tile_m: launch.tile_m,
            tile_n: launch.tile_n,
            masked: emitted.spec().groups == Groups::Masked,
            threads,
            shared_bytes: launch.dynamic_smem_bytes - ALIGNMENT_SLACK,
            build: Program::parse(build_lines(&lines)),
            consumer_walk: Program::parse(walk_lines(&lines, "consumer")),
            producer_walk: Program::parse(walk_lines(&lines, "producer")),
        }
    }

    /// Replays the table build for a block, its warps taking turns in `order`.
    fn build_tables(&self, device: &Device, order: WarpOrder) -> Result<BuiltBlock, String> {
        let mut shared = SharedMemory::poisoned(self.shared_bytes);
        let mut threads: Vec<Registers> = (0..self.threads)
            .map(|thread| {
                self.build.registers_with(&[
                    ("%thread", u64::from(thread)),
                    ("%smem", u64::from(SHARED_BASE)),
                    ("%m", device.param("m")),
                ])
            })
            .collect();
        Machine {
            program: &self.build,
            device,
            shared: &mut shared,
            steps: 0,
        }
        .run_block(&mut threads, order)?;
        Ok(BuiltBlock { threads, shared })
    }

    /// Replays `walk` for tile `index` in the thread whose registers after the build are
    /// `built` (the walk's inputs, [`BUILD_OUTPUTS`]).
    fn locate(
        &self,
        walk: &Program,
        built: &Registers,
        shared: &mut SharedMemory,
        device: &Device,
        index: u32,
    ) -> Result<Located, String> {
        let mut inputs = vec![
            ("%tile", u64::from(index)),
            ("%nctaid.x", u64::from(GRID_BLOCKS)),
        ];
        inputs.extend(
            BUILD_OUTPUTS
                .iter()
                .filter_map(|&name| Some((name, self.build.value(built, name)?))),
        );
        let mut thread = [walk.registers_with(&inputs)];
        Machine {
            program: walk,
            device,
            shared,
            steps: 0,
        }
        .run_block(&mut thread, WarpOrder::FirstWarpFirst)?;
        let output = |name| {
            walk.value(&thread[0], name)
                .map(|value| value as u32)
                .ok_or_else(|| format!("the walk leaves no {name}"))
        };
        Ok(Located {
            expert: output("%batch")?,
            first_row: output("%block_m")?,
            expert_end: output("%m")?,
            first_col: output("%block_n")?,
        })
    }
}

/// The table build: from its comment through the `}` that closes its scope.
fn build_lines<'a>(lines: &'a [&'a str]) -> &'a [&'a str] {
    let start = lines
        .iter()
        .position(|line| line.contains("// The experts' tables"))
        .expect("a grouped kernel builds its tables");
    let last = start
        + lines[start..]
            .iter()
            .position(|line| line.trim() == "mov.u32\t%group_row_tiles, %g_carry_tiles;")
            .expect("the build leaves the walk's row tiles");
    assert_eq!(lines[last + 1].trim(), "}", "the build's scope closes");
    &lines[start..=last + 1]
}

/// The index of the `}` that closes the block from `start`.
fn block_end(lines: &[&str], start: usize) -> usize {
    start
        + lines[start..]
            .iter()
            .position(|line| line.trim() == "}")
            .expect("the block closes")
}

/// `role`'s walk to a tile: the walk's `tile_coordinates`, then the `locate` right after it
/// whose labels are `role`'s.
fn walk_lines<'a>(lines: &'a [&'a str], role: &str) -> &'a [&'a str] {
    let search = format!("$L_{role}_group_search:");
    let locate = (0..lines.len())
        .filter(|&i| lines[i].contains("// The tile's expert:"))
        .find(|&i| {
            lines[i..=block_end(lines, i)]
                .iter()
                .any(|line| line.trim() == search)
        })
        .unwrap_or_else(|| panic!("the {role} finds each tile's expert"));
    let coordinates = (0..locate)
        .rev()
        .find(|&i| lines[i].contains("// Tile %tile: raster bands"))
        .unwrap_or_else(|| panic!("the {role} walks the tiles"));
    assert_eq!(
        block_end(lines, coordinates) + 1,
        locate,
        "the {role} looks for the tile's expert right after its coordinates"
    );
    &lines[coordinates..=block_end(lines, locate)]
}

// ---------------------------------------------------------------------------------------
// The problems, and the checks against the model.
// ---------------------------------------------------------------------------------------

/// A grouped problem: the device's row table and the sizes around it.
struct Problem {
    label: String,
    /// Per expert, the end of its rows (contiguous) or the count of its rows (masked).
    table: Vec<i32>,
    /// The buffer's rows, the kernel's `m` (masked: experts × capacity).
    buffer_rows: u32,
    /// Masked: the rows each expert owns.
    capacity: Option<u32>,
    n: u32,
}

impl Problem {
    /// Contiguous experts of `sizes` rows, filling the buffer.
    fn sizes(label: &str, sizes: &[u32], n: u32) -> Problem {
        Problem::offsets(label, GroupRows::offsets_of(sizes), sizes.iter().sum(), n)
    }

    /// A contiguous row table as the device may hold it, over a buffer of `buffer_rows`.
    fn offsets(label: &str, table: Vec<i32>, buffer_rows: u32, n: u32) -> Problem {
        Problem {
            label: label.to_string(),
            table,
            buffer_rows,
            capacity: None,
            n,
        }
    }

    /// Masked experts of `capacity` rows each, holding `counts` as the device may hold them.
    fn counts(label: &str, counts: Vec<i32>, capacity: u32, n: u32) -> Problem {
        Problem {
            label: label.to_string(),
            buffer_rows: counts.len() as u32 * capacity,
            table: counts,
            capacity: Some(capacity),
            n,
        }
    }

    /// The experts' rows as the model clamps the table.
    fn rows(&self) -> GroupRows {
        match self.capacity {
            Some(capacity) => GroupRows::masked(&self.table, capacity),
            None => GroupRows::contiguous(&self.table, self.buffer_rows),
        }
    }

    fn device(&self) -> Device<'_> {
        let mut params = HashMap::from([
            ("m", u64::from(self.buffer_rows)),
            ("n", u64::from(self.n)),
            ("groups", self.table.len() as u64),
            ("group_rows", TABLE_ADDRESS),
        ]);
        if let Some(capacity) = self.capacity {
            params.insert("group_capacity", u64::from(capacity));
        }
        Device {
            params,
            table: &self.table,
        }
    }
}

/// The sizes at a tile's edges, after none and one.
fn edge_sizes(tile_m: u32) -> [u32; 6] {
    [0, 1, tile_m - 1, tile_m, tile_m + 1, 2 * tile_m + 1]
}

/// `count` sizes from 0 to `most`, drawn from `seed`.
fn random_sizes(seed: u64, count: usize, most: u32) -> Vec<u32> {
    let mut draws = SplitMix64::new(seed);
    (0..count)
        .map(|_| draws.below(u64::from(most) + 1) as u32)
        .collect()
}

/// The problems a kernel of `kernel`'s layout and tile height is replayed on: every edge
/// size, one expert, 1000 and 1024 experts (more than a block's threads, so the build takes
/// them in several chunks), random sizes, and tables the kernel must clamp.
fn problems(kernel: &Kernel) -> Vec<Problem> {
    if kernel.masked {
        masked_problems(kernel.tile_m)
    } else {
        contiguous_problems(kernel.tile_m)
    }
}

fn contiguous_problems(tile_m: u32) -> Vec<Problem> {
    let edges = edge_sizes(tile_m);
    let mut problems: Vec<Problem> = edges
        .iter()
        .map(|&size| Problem::sizes(&format!("9 experts of {size} rows"), &[size; 9], 512))
        .collect();
    problems.extend([
        Problem::sizes("the edge sizes in turn", &edges.repeat(5), 640),
        Problem::sizes("one expert", &[1000], 1024),
        // Few row tiles and a wide N: a walk along its bands first (raster m).
        Problem::sizes("one short expert, N wide", &[tile_m + 1], 4096),
        Problem::sizes("1000 experts", &random_sizes(1, 1000, 2 * tile_m + 1), 256),
        Problem::sizes("1024 experts", &edges.repeat(171)[..1024], 256),
    ]);
    problems.extend((2..5).map(|seed| {
        let label = format!("64 random experts, seed {seed}");
        Problem::sizes(&label, &random_sizes(seed, 64, 4 * tile_m), 768)
    }));
    let mut draws = SplitMix64::new(5);
    let unordered = (0..1000)
        .map(|_| draws.below(30_200) as i32 - 100)
        .collect();
    problems.extend([
        Problem::offsets("a negative entry", vec![300, -5, 700, 900], 1000, 512),
        Problem::offsets(
            "decreasing entries",
            vec![500, 200, 800, 100, 900, 900, 1200],
            1200,
            512,
        ),
        Problem::offsets(
            "entries past the buffer",
            vec![200, 700, 1500, i32::MAX],
            1000,
            512,
        ),
        Problem::offsets("all entries zero", vec![0; 20], 1000, 512),
        Problem::offsets(
            "rows past the last expert",
            GroupRows::offsets_of(&[300, 0, 500]),
            2000,
            512,
        ),
        Problem::offsets("1000 entries in no order", unordered, 30_000, 256),
    ]);
    problems
}

fn masked_problems(tile_m: u32) -> Vec<Problem> {
    let edges = edge_sizes(tile_m);
    let capacity = 2 * tile_m + 1;
    let counts = |sizes: &[u32]| sizes.iter().map(|&size| size as i32).collect();
    let mut problems: Vec<Problem> = edges
        .iter()
        .map(|&size| {
            let label = format!("9 experts holding {size} rows");
            Problem::counts(&label, vec![size as i32; 9], capacity, 512)
        })
        .collect();
    problems.extend([
        Problem::counts(
            "the edge sizes in turn",
            counts(&edges.repeat(5)),
            capacity,
            640,
        ),
        Problem::counts("one full expert", vec![capacity as i32], capacity, 1024),
        // Few row tiles and a wide N: a walk along its bands first (raster m).
        Problem::counts(
            "one short expert, N wide",
            vec![tile_m as i32 + 1],
            capacity,
            4096,
        ),
        Problem::counts(
            "1000 experts",
            counts(&random_sizes(1, 1000, tile_m + 7)),
            tile_m + 7,
            256,
        ),
        Problem::counts(
            "1024 experts",
            counts(&edges.repeat(171)[..1024]),
            capacity,
            256,
        ),
    ]);
    problems.extend((2..5).map(|seed| {
        let label = format!("64 random experts, seed {seed}");
        Problem::counts(&label, counts(&random_sizes(seed, 64, 300)), 300, 768)
    }));
    problems.extend([
        Problem::counts(
            "counts above the capacity",
            vec![capacity as i32 + 1, i32::MAX, capacity as i32, 5],
            capacity,
            512,
        ),
        Problem::counts(
            "negative counts",
            vec![-1, 7, i32::MIN, tile_m as i32],
            capacity,
            512,
        ),
    ]);
    problems
}

/// Replays `kernel`'s walk on `problem`: the table build with the warps in both orders,
/// then every tile. Returns the order the walk's bands took.
fn check(kernel: &Kernel, problem: &Problem) -> Result<BandOrder, String> {
    assert_eq!(
        problem.capacity.is_some(),
        kernel.masked,
        "{}",
        problem.label
    );
    let device = problem.device();
    let tiles = GroupedTiles::new(problem.rows(), kernel.tile_m, problem.n, kernel.tile_n);
    let built = |order| {
        kernel
            .build_tables(&device, order)
            .and_then(|block| check_tables(kernel, &tiles, &block).map(|()| block))
            .map_err(|why| format!("{}: the tables, warps {order:?}: {why}", problem.label))
    };
    built(WarpOrder::LastWarpFirst)?;
    let mut block = built(WarpOrder::FirstWarpFirst)?;
    check_tiles(kernel, problem, &tiles, &device, &mut block)
        .map_err(|why| format!("{}: {why}", problem.label))
}

/// The tables in `block` hold each expert's end and the row tiles of the experts through
/// it (recounted here from the model's ranges), every thread the row tiles of them all, and
/// no word outside the tables was written.
fn check_tables(kernel: &Kernel, tiles: &GroupedTiles, block: &BuiltBlock) -> Result<(), String> {
    let left = |registers: &Registers, name| {
        kernel
            .build
            .value(registers, name)
            .map(|value| value as u32)
            .ok_or_else(|| format!("the build leaves no {name}"))
    };
    let ends = left(&block.threads[0], "%group_ends")?;
    let through = left(&block.threads[0], "%group_through")?;
    let mut row_tiles = 0;
    for (expert, &(start, end)) in (0u32..).zip(&tiles.rows().ranges) {
        row_tiles += (end - start).div_ceil(kernel.tile_m);
        let built_end = block.shared.load(ends + 4 * expert)?;
        let built_through = block.shared.load(through + 4 * expert)?;
        if (built_end, built_through) != (end, row_tiles) {
            return Err(format!(
                "expert {expert} ends at row {built_end} with {built_through} row tiles through \
                 it, the model's at {end} with {row_tiles}"
            ));
        }
    }
    for (thread, registers) in block.threads.iter().enumerate() {
        let walked = left(registers, "%group_row_tiles")?;
        if walked != row_tiles {
            return Err(format!(
                "thread {thread} walks {walked} row tiles of {row_tiles}"
            ));
        }
    }
    match block.shared.written_outside(ends..ends + TABLE_BYTES) {
        Some(address) => Err(format!("the build wrote {address:#x}, outside its tables")),
        None => Ok(()),
    }
}

/// Every tile of the walk, as the replayed walk locates it, against
/// [`GroupedTiles::tile_at`]: every row tile of every expert by every tile column exactly
/// once, each tile's rows inside its expert's and the buffer's.
fn check_tiles(
    kernel: &Kernel,
    problem: &Problem,
    tiles: &GroupedTiles,
    device: &Device,
    block: &mut BuiltBlock,
) -> Result<BandOrder, String> {
    let ranges = &tiles.rows().ranges;
    let tile_rows = u32::try_from(tiles.tile_rows()).expect("row tiles fit 32 bits");
    let order = kernel.schedule.band_order(
        (tile_rows, tiles.tiles_n()),
        (kernel.tile_m, kernel.tile_n),
        GRID_BLOCKS,
    );
    // The consumers' search runs in the block's last thread, the producer's in its first.
    let BuiltBlock { threads, shared } = block;
    let (producer, consumer) = (&threads[0], &threads[threads.len() - 1]);
    let mut walked = HashSet::new();
    let walk_tiles = u32::try_from(tiles.tiles()).expect("the walk's tiles fit 32 bits");
    for index in 0..walk_tiles {
        let model = tiles.tile_at(kernel.schedule, index, order);
        let (start, end) = ranges[model.group as usize];
        let expected = Located {
            expert: model.group,
            first_row: model.row_start,
            expert_end: end,
            first_col: model.tile_col * kernel.tile_n,
        };
        let located = kernel.locate(&kernel.consumer_walk, consumer, shared, device, index)?;
        if located != expected {
            return Err(format!(
                "tile {index} ({order:?}): the walk gives {located:?}, the model {expected:?}"
            ));
        }
        // Where the model is right too: a whole tile of the expert's, inside the buffer.
        let rows_left = located.expert_end - located.first_row;
        let last = model.group_tile_row + 1 == (end - start).div_ceil(kernel.tile_m);
        let inside = start <= located.first_row
            && (located.first_row - start) % kernel.tile_m == 0
            && rows_left > 0
            && located.expert_end <= end.min(problem.buffer_rows)
            && located.first_col % kernel.tile_n == 0
            && located.first_col < problem.n;
        if !inside || (rows_left <= kernel.tile_m) != last {
            return Err(format!(
                "tile {index}: {located:?} is no tile of expert rows {start}..{end} (N {})",
                problem.n
            ));
        }
        if !walked.insert((located.expert, located.first_row, located.first_col)) {
            return Err(format!("tile {index}: {located:?} walked twice"));
        }
        if index.is_multiple_of(PRODUCER_EVERY) {
            let fed = kernel.locate(&kernel.producer_walk, producer, shared, device, index)?;
            if fed != located {
                return Err(format!(
                    "tile {index}: the producer loads {fed:?}, the consumers compute {located:?}"
                ));
            }
        }
    }
    // Distinct tiles, each a tile of its expert's: as many as the experts have is all of them.
    let every_tile = ranges
        .iter()
        .map(|&(start, end)| u64::from((end - start).div_ceil(kernel.tile_m)))
        .sum::<u64>()
        * u64::from(problem.n.div_ceil(kernel.tile_n));
    if walked.len() as u64 != every_tile {
        return Err(format!("{} tiles walked of {every_tile}", walked.len()));
    }
    Ok(order)
}

/// Replays every problem of its layout on `spec`'s kernel; the walks must take their bands
/// both ways.
fn check_spec(spec: &str) {
    let kernel = Kernel::emit(spec, str::to_string);
    let orders: HashSet<BandOrder> = problems(&kernel)
        .iter()
        .map(|problem| check(&kernel, problem).unwrap_or_else(|why| panic!("{spec}: {why}")))
        .collect();
    assert_eq!(orders.len(), 2, "{spec}: walked only {orders:?}");
}

#[test]
fn contiguous_walks_match_the_model() {
    for spec in CONTIGUOUS_SPECS {
        check_spec(spec);
    }
}

#[test]
fn masked_walks_match_the_model() {
    for spec in MASKED_SPECS {
        check_spec(spec);
    }
}

#[test]
fn stream_k_kernels_build_and_search_as_the_whole_tile_ones() {
    for spec in STREAM_K_SPECS {
        check_spec(spec);
    }
}

#[test]
fn pingpong_kernels_build_and_search_as_the_cooperative_ones() {
    for spec in PINGPONG_SPECS {
        check_spec(spec);
    }
}

/// A change to a kernel's PTX.
type Edit = fn(&str) -> String;

/// `ptx` with every `from` replaced by `to`; it must hold one.
fn replaced(ptx: &str, from: &str, to: &str) -> String {
    assert!(ptx.contains(from), "the PTX has no `{from}`");
    ptx.replace(from, to)
}

/// `ptx` without the table build's first barrier.
fn without_first_build_barrier(ptx: &str) -> String {
    const BARRIER: &str = "\tbar.sync\t0;\n";
    let build = ptx.find("// The experts' tables").expect("a table build");
    let barrier = build + ptx[build..].find(BARRIER).expect("a barrier in the build");
    [&ptx[..barrier], &ptx[barrier + BARRIER.len()..]].concat()
}

/// Copies of the PTX with a barrier, a clamp, a carry or the search's test broken: each must
/// fail the replay on one of its layout's problems (the error says which, with `--nocapture`).
#[test]
fn broken_walks_fail_the_replay() {
    let (contiguous, masked) = (CONTIGUOUS_SPECS[1], MASKED_SPECS[0]);
    let search_off_by_one: Edit =
        |ptx| replaced(ptx, "setp.le.u32\t%p_lower", "setp.lt.u32\t%p_lower");
    let breaks: [(&str, &str, Edit); 7] = [
        (
            "the build's first barrier deleted",
            contiguous,
            without_first_build_barrier,
        ),
        (
            "the build's first barrier deleted",
            masked,
            without_first_build_barrier,
        ),
        (
            "a chunk's ends not carried from the last chunk's",
            contiguous,
            |ptx| {
                replaced(
                    ptx,
                    "max.u32\t%g_end, %g_value, %g_carry_end;",
                    "mov.u32\t%g_end, %g_value;",
                )
            },
        ),
        ("the max-scan's steps dropped", contiguous, |ptx| {
            replaced(ptx, "\t@%p_up max.u32\t%g_value, %g_value, %g_up;\n", "")
        }),
        ("ends not clamped to the buffer", contiguous, |ptx| {
            replaced(ptx, "\tmin.u32\t%g_value, %g_value, %m;\n", "")
        }),
        (
            "the search's test off by one",
            contiguous,
            search_off_by_one,
        ),
        ("the search's test off by one", masked, search_off_by_one),
    ];
    for (broken, spec, edit) in breaks {
        let kernel = Kernel::emit(spec, edit);
        let caught = problems(&kernel)
            .iter()
            .find_map(|problem| check(&kernel, problem).err());
        match caught {
            Some(why) => eprintln!("{broken} ({spec}): {why}"),
            None => panic!("{spec}: {broken}, and the replay passes"),
        }
    }
}
