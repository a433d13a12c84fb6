//! The cp.async rings of the SIMT and tensor-core families, checked on the emitted PTX itself:
//! the prologue, every trip through the main loop and the epilogue (for a persistent schedule:
//! of two output tiles, the second one's copies issued during the first one's epilogue) are
//! replayed as one thread's sequence of copies, commits, waits, barriers and shared-memory
//! reads, for every K from one k tile to three ring turns, each three ways: an interior block,
//! a block whose partial last k tile goes through the bounded copies, and an edge block whose
//! every tile does (the replay sets the block's first bounded tile, `%k_bounded`, and follows
//! the branches into the bounded copies and back). Every thread runs the same sequence;
//! guarded copies follow their guard (a bounded copy's own guard as `%p_load`: which of its
//! bytes it copies does not matter to the ring). The replay runs the loop counter, the stage
//! registers and their wrap as the PTX computes them, and follows each copy's global source
//! (the main loop's pointers, or the bounded copies' sources of tile `%k_load`), so it knows
//! which k tile every copy brings and which one every read finds. It fails when a read finds a
//! tile other than the one the math is on, or one no wait and barrier made complete; when a
//! stage is refilled in the barrier epoch it was read in; when a copy reaches past K; when a k
//! tile is never computed; when copies are still in flight at the end. A missing or misplaced
//! `wait_group`/`bar.sync`, or a skipped tile, fails here without a GPU.

use gemm_codegen::catalog::CATALOG;
use gemm_codegen::family::{self, FamilyPlan};
use gemm_codegen::plan::{CpAsyncGroups, PlanCopy, Ring as StageRing};
use std::collections::HashMap;

/// What the replay needs of a kernel's plan.
struct Ring {
    smem: StageRing<CpAsyncGroups>,
    /// Shared-memory reads (`ld.shared`, `ldmatrix`) of one k tile, per thread.
    reads_per_tile: usize,
    /// Reads the last trip makes of the k tile past the end (tensor cores load the next
    /// tile's first fragments ahead of the math): dead registers, but reads of the ring.
    look_ahead_reads: usize,
    /// What steps each operand's copy pointer by one k tile: an immediate byte count along
    /// its lines, or `%a_tile_step` / `%b_tile_step` (lines along K); the bytes one k tile
    /// moves along a line (a bounded copy's source of an operand whose lines run along M or
    /// N); and the k lines of one k tile (that of an operand whose lines run along K).
    steps: [String; 2],
    tile_bytes: [String; 2],
    tile_k: u32,
    persistent: bool,
    /// The epilogue stages C through shared memory (`st.shared`), and whether its slabs lie
    /// over the ring.
    staged_epilogue: bool,
    slabs_over_ring: bool,
}

impl Ring {
    fn of(spec: &str) -> Ring {
        let valid = gemm_dsl::check_str(spec).unwrap_or_else(|e| panic!("{spec}: {e:?}"));
        match family::plan(&valid).family {
            FamilyPlan::Simt(p) => {
                assert_eq!(p.pipeline.copy, PlanCopy::CpAsync, "{spec}");
                Ring {
                    reads_per_tile: p
                        .consumer
                        .k_groups
                        .iter()
                        .map(|g| {
                            g.a_loads.len()
                                + g.b_loads.len()
                                + g.k_steps
                                    .iter()
                                    .map(|s| s.a_loads.len() + s.b_loads.len())
                                    .sum::<usize>()
                        })
                        .sum(),
                    look_ahead_reads: 0,
                    steps: [
                        p.pipeline.a_src.tile_step.clone(),
                        p.pipeline.b_src.tile_step.clone(),
                    ],
                    tile_bytes: [
                        p.pipeline.a_src.tile_step_bytes.to_string(),
                        p.pipeline.b_src.tile_step_bytes.to_string(),
                    ],
                    tile_k: p.block_k,
                    persistent: false,
                    staged_epilogue: false,
                    slabs_over_ring: false,
                    smem: p.pipeline.smem,
                }
            }
            FamilyPlan::MmaSync(p) => {
                assert_eq!(p.pipeline.copy, PlanCopy::CpAsync, "{spec}");
                let reads =
                    |step: &family::mma_sync::MmaKStep| step.a_loads.len() + step.b_loads.len();
                Ring {
                    reads_per_tile: p.k_steps_plan.iter().map(reads).sum(),
                    look_ahead_reads: if p.pipeline.smem.guard.pipelined {
                        reads(&p.k_steps_plan[0])
                    } else {
                        0
                    },
                    steps: [
                        p.pipeline.a_src.tile_step.clone(),
                        p.pipeline.b_src.tile_step.clone(),
                    ],
                    tile_bytes: [
                        p.pipeline.a_src.tile_step_bytes.to_string(),
                        p.pipeline.b_src.tile_step_bytes.to_string(),
                    ],
                    tile_k: p.block_k,
                    persistent: p.persistent.is_some(),
                    staged_epilogue: p.epilogue.path.staged().is_some(),
                    slabs_over_ring: p.epilogue.path.staged().is_some_and(|e| e.over_ring()),
                    smem: p.pipeline.smem,
                }
            }
            FamilyPlan::Wgmma(_) => panic!("{spec}: the TMA ring is replayed in hopper_ring.rs"),
        }
    }
}

/// An operand's part of one stage.
#[derive(Clone, Copy, Debug, Default)]
struct Region {
    /// The (output tile, k tile) copied into it, and the commit group that copies it.
    tile: Option<(usize, u32)>,
    group: Option<usize>,
    /// Barrier epoch of the latest read of the current tile.
    last_read: Option<usize>,
}

/// A `.b32` operand: an immediate, a shared-memory base the setup code computed (taken as
/// 0: the stage offset added to it is what the replay follows), or a register.
#[derive(Clone, Copy, Debug)]
enum Value<'a> {
    Immediate(u32),
    Base,
    Register(&'a str),
}

impl<'a> Value<'a> {
    fn of(operand: &'a str) -> Value<'a> {
        if let Ok(immediate) = operand.parse() {
            return Value::Immediate(immediate);
        }
        let name = operand.trim_start_matches('%');
        let numbered = |prefix: &str| {
            name.strip_prefix(prefix)
                .is_some_and(|n| n.chars().all(|c| c.is_ascii_digit()))
        };
        if ["a_smem_copy", "b_smem_copy", "a_smem_read", "b_smem_read"].contains(&name)
            || ["a_cp", "b_cp", "a_rd", "b_rd"].into_iter().any(numbered)
        {
            Value::Base
        } else {
            Value::Register(operand)
        }
    }
}

/// What one PTX line does to the ring; lines that do nothing to it are dropped.
#[derive(Clone, Copy, Debug)]
enum Op<'a> {
    Move(&'a str, Value<'a>),
    Add(&'a str, Value<'a>, Value<'a>),
    Select(&'a str, Value<'a>, Value<'a>, &'a str),
    Compare(&'a str, fn(u32, u32) -> bool, Value<'a>, Value<'a>),
    /// A write to a ring register the replay does not model: an error when run.
    Unmodelled,
    /// A copy pointer set to the next output tile's source, stepped one k tile, copied.
    ResetPointer(&'a str),
    StepPointer(&'a str),
    CopyPointer(&'a str, &'a str),
    /// A bounded copy's sources, worked out afresh: the k tiles a row register holds (`%row`,
    /// `%wide_row`: none, those of another, those of another plus a count of tiles), and a
    /// base that starts at the block's output tile and moves by k tiles or by a row register.
    RowFresh(&'a str),
    RowKeep(&'a str, &'a str),
    RowAddTiles(&'a str, Value<'a>, &'a str),
    BaseLoad(&'a str),
    BaseAddTiles(&'a str, Value<'a>),
    BaseAddRows(&'a str, &'a str),
    Copy {
        destination: &'a str,
        source: &'a str,
    },
    Commit,
    Wait(usize),
    Barrier,
    Read(&'a str),
    SharedStore,
    /// `@%p_empty bra $L_epilogue`, `@!%p_next bra $L_store`, `$L_store:`.
    SkipIfEmpty,
    SkipIfLastTile,
    StoreLabel,
    /// `@%p_bounded bra.uni $L_bounded_copy`, and `$L_copied:`, where the bounded copies
    /// return to.
    ToBounded,
    CopiedLabel,
}

/// A decoded line: its op, whether `@%p_load` guards it, and the text for messages.
#[derive(Clone, Copy, Debug)]
struct Instr<'a> {
    op: Op<'a>,
    guarded: bool,
    line: &'a str,
}

/// The registers of a line's operands, in order (`op d, a, b;`, `op [d+o], [s+o], n;`).
fn operands(line: &str) -> Vec<&str> {
    let Some((_, rest)) = line.split_once(char::is_whitespace) else {
        return Vec::new();
    };
    rest.trim_end_matches(';')
        .split(',')
        .map(str::trim)
        .filter(|part| !part.is_empty())
        .collect()
}

/// The register of an address operand `[%reg+offset]`.
fn address_register(operand: &str) -> &str {
    let inner = operand.trim_start_matches('[').trim_end_matches(']');
    inner.split('+').next().unwrap_or(inner)
}

/// Registers whose values the ring depends on: the replay computes every write to them.
fn is_ring_register(register: &str) -> bool {
    let name = register.trim_start_matches('%');
    ["k_tile", "k_load", "k_tiles", "read_stage", "write_stage"].contains(&name)
        || ["a_dst", "b_dst", "a_src", "b_src"]
            .iter()
            .any(|prefix| name.starts_with(prefix))
}

/// The main loop's copy pointers (reset and stepped by the kernel).
fn is_main_pointer(register: &str) -> bool {
    register.starts_with("%a_ptr") || register.starts_with("%b_ptr")
}

/// Registers that hold a global copy source.
fn is_pointer(register: &str) -> bool {
    is_main_pointer(register) || ["%a_base", "%b_base", "%a_g", "%b_g", "%g"].contains(&register)
}

/// A and B: index of an operand's region in a stage, from a register's name.
fn operand_of(register: &str) -> usize {
    usize::from(register.starts_with("%b"))
}

fn decode<'a>(line: &'a str, ring: &Ring) -> Option<Instr<'a>> {
    let line = line.trim();
    if line.starts_with("//") {
        return None;
    }
    // A bounded copy's own guard implies %p_load; which of its bytes it copies does not
    // matter to the ring.
    let (guarded, text) = match line
        .strip_prefix("@%p_load ")
        .or_else(|| line.strip_prefix("@%p_copy "))
    {
        Some(rest) => (true, rest),
        None => (false, line),
    };
    let instr = |op| Some(Instr { op, guarded, line });
    if text.starts_with("@%p_empty bra") {
        return instr(Op::SkipIfEmpty);
    }
    if text.starts_with("@!%p_next bra") {
        return instr(Op::SkipIfLastTile);
    }
    if text.starts_with("$L_store:") {
        return instr(Op::StoreLabel);
    }
    if text.starts_with("@%p_bounded bra") {
        return instr(Op::ToBounded);
    }
    if text.starts_with("$L_copied:") {
        return instr(Op::CopiedLabel);
    }
    if text.starts_with('@') {
        // Other branches are the driver's (`replay_k` loops on `@%p_more` and walks two output
        // tiles for `@%p_next`) or not taken (the edge stores: the replay stores as an interior
        // block does); a guarded write to a ring register is not modelled, one to any other
        // register (the tile walk's product of a batch) does not touch the ring.
        let instruction = text
            .split_once(char::is_whitespace)
            .map_or("", |(_, rest)| rest);
        let writes_ring = operands(instruction)
            .first()
            .is_some_and(|d| is_ring_register(d));
        return (!text.contains(" bra") && writes_ring).then_some(Instr {
            op: Op::Unmodelled,
            guarded,
            line,
        });
    }
    let ops = operands(text);
    let opcode = text
        .split_whitespace()
        .next()
        .unwrap_or("")
        .trim_end_matches(';');
    let writes_ring = ops.first().is_some_and(|d| is_ring_register(d));
    let op = match opcode {
        "mov.u32" if writes_ring => Op::Move(ops[0], Value::of(ops[1])),
        "add.u32" if writes_ring => Op::Add(ops[0], Value::of(ops[1]), Value::of(ops[2])),
        "selp.u32" if writes_ring => {
            Op::Select(ops[0], Value::of(ops[1]), Value::of(ops[2]), ops[3])
        }
        _ if writes_ring => Op::Unmodelled,
        _ if opcode.starts_with("setp.")
            && opcode.ends_with(".u32")
            && ["%p_load", "%p_more", "%p_wrap", "%p_empty", "%p_bounded"].contains(&ops[0]) =>
        {
            let holds: fn(u32, u32) -> bool =
                match &opcode["setp.".len()..opcode.len() - ".u32".len()] {
                    "eq" => |a, b| a == b,
                    "ne" => |a, b| a != b,
                    "lt" => |a, b| a < b,
                    "le" => |a, b| a <= b,
                    "gt" => |a, b| a > b,
                    "ge" => |a, b| a >= b,
                    _ => return instr(Op::Unmodelled),
                };
            Op::Compare(ops[0], holds, Value::of(ops[1]), Value::of(ops[2]))
        }
        "mad.lo.u64" if is_main_pointer(ops[0]) => Op::ResetPointer(ops[0]),
        "add.u64" if is_main_pointer(ops[0]) => {
            let step = ring.steps[operand_of(ops[0])].as_str();
            if ops[0] == ops[1] && ops[2] == step {
                Op::StepPointer(ops[0])
            } else if ops[0] == ops[1] && matches!(ops[2], "%a" | "%b") {
                // The matrix's base added to the next output tile's offset.
                return None;
            } else {
                Op::Unmodelled
            }
        }
        // The k tiles of an operand whose lines run along K enter a bounded copy's source as
        // lines (`k_load * BK + row`), those of one whose lines run along M or N as bytes
        // (`k_load * BK * element bytes`); only %k_load counts tiles there.
        _ if matches!(ops.first(), Some(&("%row" | "%wide_row"))) => {
            let k_rows = ring.tile_k.to_string();
            if opcode == "mad.lo.u32" && ops[1] == "%k_load" && ops[2] == k_rows {
                Op::RowAddTiles(ops[0], Value::of(ops[1]), ops[3])
            } else if let Some(source) = ops[1..]
                .iter()
                .find(|o| matches!(**o, "%row" | "%wide_row"))
            {
                Op::RowKeep(ops[0], source)
            } else {
                Op::RowFresh(ops[0])
            }
        }
        _ if matches!(ops.first(), Some(&("%a_base" | "%b_base"))) => {
            if opcode == "ld.param.u64" {
                Op::BaseLoad(ops[0])
            } else if opcode == "mad.wide.u32"
                && ops[1] == "%k_load"
                && ops[2] == ring.tile_bytes[operand_of(ops[0])]
            {
                Op::BaseAddTiles(ops[0], Value::of(ops[1]))
            } else if ops.get(1) == Some(&"%wide_row") {
                Op::BaseAddRows(ops[0], ops[1])
            } else {
                // The thread's column within the tile, a conversion: the same k tile.
                return None;
            }
        }
        _ if matches!(ops.first(), Some(&("%a_g" | "%b_g" | "%g")))
            && ops.last().is_some_and(|source| is_pointer(source)) =>
        {
            Op::CopyPointer(ops[0], ops[ops.len() - 1])
        }
        _ if opcode.starts_with("cp.async.c") && opcode.ends_with(".shared.global") => Op::Copy {
            destination: address_register(ops[0]),
            source: address_register(ops[1]),
        },
        "cp.async.commit_group" => Op::Commit,
        "cp.async.wait_group" => match ops[0].parse() {
            Ok(pending) => Op::Wait(pending),
            Err(_) => Op::Unmodelled,
        },
        "bar.sync" => Op::Barrier,
        _ if (opcode.starts_with("ldmatrix") || opcode.starts_with("ld.shared"))
            && ops
                .last()
                .is_some_and(|a| a.starts_with("[%a_src") || a.starts_with("[%b_src")) =>
        {
            Op::Read(address_register(ops[ops.len() - 1]))
        }
        _ if opcode.starts_with("st.shared") => Op::SharedStore,
        _ => return None,
    };
    instr(op)
}

/// The ring's instructions of the PTX between `from` and `to`.
fn section<'a>(ptx: &'a str, ring: &Ring, from: &str, to: &str) -> Vec<Instr<'a>> {
    let start = ptx.find(from).unwrap_or_else(|| panic!("no `{from}`"));
    let end = start + ptx[start..].find(to).unwrap_or_else(|| panic!("no `{to}`"));
    ptx[start..end]
        .lines()
        .filter_map(|line| decode(line, ring))
        .collect()
}

/// Where a global copy source points: into A or B (0, 1), at which output tile's k tile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Position {
    operand: usize,
    output_tile: usize,
    k: u32,
}

/// One thread's view of a kernel while its PTX is replayed.
struct Replay<'r, 'a> {
    ring: &'r Ring,
    k_tiles: u32,
    /// `.b32` registers the ring's control flow computes (counters, stage offsets, stage
    /// addresses), and predicates.
    values: HashMap<&'a str, u32>,
    predicates: HashMap<&'a str, bool>,
    /// Global copy sources, and the output tile the block's coordinates are on (the newest
    /// its pointers were set to).
    pointers: HashMap<&'a str, Position>,
    block_tile: usize,
    /// k tiles a row register holds (a bounded copy's B rows count from `k_load * BK`).
    row_tiles: HashMap<&'a str, u32>,
    /// Per stage, A's and B's regions.
    regions: Vec<[Region; 2]>,
    /// Per committed group: the barrier epoch from which its data is visible to every thread
    /// (set by the first barrier after a `wait_group` that retired it).
    visible_from: Vec<Option<usize>>,
    waited: Vec<bool>,
    epoch: usize,
    /// The output tile the math is on, and its shared-memory reads so far.
    output_tile: usize,
    reads: usize,
    /// Shared-memory stores run (the staged epilogue's).
    shared_stores: usize,
}

impl<'r, 'a> Replay<'r, 'a> {
    fn new(ring: &'r Ring, k_tiles: u32) -> Replay<'r, 'a> {
        Replay {
            ring,
            k_tiles,
            values: HashMap::from([("%k_tiles", k_tiles)]),
            predicates: HashMap::new(),
            pointers: HashMap::new(),
            block_tile: 0,
            row_tiles: HashMap::new(),
            regions: vec![[Region::default(); 2]; ring.smem.stages as usize],
            visible_from: Vec::new(),
            waited: Vec::new(),
            epoch: 0,
            output_tile: 0,
            reads: 0,
            shared_stores: 0,
        }
    }

    fn value(&self, value: Value<'a>) -> Result<u32, String> {
        match value {
            Value::Immediate(immediate) => Ok(immediate),
            Value::Base => Ok(0),
            Value::Register(name) => self
                .values
                .get(name)
                .copied()
                .ok_or_else(|| format!("`{name}` is read before the replay saw it written")),
        }
    }

    fn predicate(&self, name: &str) -> Result<bool, String> {
        self.predicates
            .get(name)
            .copied()
            .ok_or_else(|| format!("predicate `{name}` is read before it is set"))
    }

    /// The stage an address register points into.
    fn stage(&self, register: &'a str) -> Result<usize, String> {
        let offset = self.value(Value::Register(register))?;
        if offset % self.ring.smem.stage_bytes != 0 || offset >= self.ring.smem.ring_bytes {
            return Err(format!(
                "`{register}` = {offset} is no stage of the {}-byte ring",
                self.ring.smem.ring_bytes
            ));
        }
        Ok((offset / self.ring.smem.stage_bytes) as usize)
    }

    fn pointer(&self, register: &str) -> Result<Position, String> {
        match self.pointers.get(register) {
            Some(&position) => Ok(position),
            // The main loop's pointers as the setup code leaves them: the first output tile,
            // k tile 0.
            None if is_main_pointer(register) => Ok(Position {
                operand: operand_of(register),
                output_tile: 0,
                k: 0,
            }),
            None => Err(format!("copy source `{register}` is read before it is set")),
        }
    }

    /// Runs one instruction (branches are the driver's); `Err` says what the kernel got wrong.
    fn step(&mut self, instr: &Instr<'a>) -> Result<(), String> {
        if instr.guarded && !self.predicate("%p_load")? {
            return Ok(());
        }
        match instr.op {
            Op::Move(dst, src) => {
                let value = self.value(src)?;
                self.values.insert(dst, value);
            }
            Op::Add(dst, a, b) => {
                let value = self.value(a)?.wrapping_add(self.value(b)?);
                self.values.insert(dst, value);
            }
            Op::Select(dst, a, b, predicate) => {
                let value = if self.predicate(predicate)? {
                    self.value(a)?
                } else {
                    self.value(b)?
                };
                self.values.insert(dst, value);
            }
            Op::Compare(predicate, holds, a, b) => {
                let holds = holds(self.value(a)?, self.value(b)?);
                self.predicates.insert(predicate, holds);
            }
            Op::Unmodelled => {
                return Err(format!(
                    "`{}` changes the ring in a way the replay does not model",
                    instr.line
                ));
            }
            Op::ResetPointer(register) => {
                let position = self.pointer(register)?;
                let output_tile = position.output_tile + 1;
                self.block_tile = self.block_tile.max(output_tile);
                self.pointers.insert(
                    register,
                    Position {
                        output_tile,
                        k: 0,
                        ..position
                    },
                );
            }
            Op::StepPointer(register) => {
                let position = self.pointer(register)?;
                self.pointers.insert(
                    register,
                    Position {
                        k: position.k + 1,
                        ..position
                    },
                );
            }
            Op::CopyPointer(dst, src) => {
                let position = self.pointer(src)?;
                self.pointers.insert(dst, position);
            }
            Op::RowFresh(register) => {
                self.row_tiles.insert(register, 0);
            }
            Op::RowKeep(register, source) => {
                let tiles = self.row_tiles.get(source).copied().unwrap_or(0);
                self.row_tiles.insert(register, tiles);
            }
            Op::RowAddTiles(register, count, source) => {
                let tiles = self.row_tiles.get(source).copied().unwrap_or(0) + self.value(count)?;
                self.row_tiles.insert(register, tiles);
            }
            Op::BaseLoad(register) => {
                let position = Position {
                    operand: operand_of(register),
                    output_tile: self.block_tile,
                    k: 0,
                };
                self.pointers.insert(register, position);
            }
            Op::BaseAddTiles(register, count) => {
                let mut position = self.pointer(register)?;
                position.k += self.value(count)?;
                self.pointers.insert(register, position);
            }
            Op::BaseAddRows(register, rows) => {
                let mut position = self.pointer(register)?;
                position.k += self.row_tiles.get(rows).copied().unwrap_or(0);
                self.pointers.insert(register, position);
            }
            Op::Copy {
                destination,
                source,
            } => self.copy(destination, source)?,
            Op::Commit => {
                self.visible_from.push(None);
                self.waited.push(false);
            }
            Op::Wait(pending) => {
                let committed = self.waited.len();
                for group in 0..committed.saturating_sub(pending) {
                    self.waited[group] = true;
                }
            }
            Op::Barrier => {
                self.epoch += 1;
                for (group, visible) in self.visible_from.iter_mut().enumerate() {
                    if self.waited[group] && visible.is_none() {
                        *visible = Some(self.epoch);
                    }
                }
            }
            Op::Read(address) => self.read(address)?,
            Op::SharedStore => {
                self.shared_stores += 1;
                if self.ring.slabs_over_ring {
                    self.epilogue_store()?;
                }
            }
            Op::SkipIfEmpty
            | Op::SkipIfLastTile
            | Op::StoreLabel
            | Op::ToBounded
            | Op::CopiedLabel => {}
        }
        Ok(())
    }

    fn copy(&mut self, destination: &'a str, source: &str) -> Result<(), String> {
        let stage = self.stage(destination)?;
        let operand = operand_of(destination);
        let Position {
            operand: from,
            output_tile,
            k,
        } = self.pointer(source)?;
        if from != operand {
            return Err(format!(
                "`{source}` points into {} and is copied into `{destination}`",
                ["A", "B"][from]
            ));
        }
        if k >= self.k_tiles {
            return Err(format!(
                "a copy reads k tile {k} of {}: past the end of K",
                self.k_tiles
            ));
        }
        let group = self.visible_from.len();
        let region = &mut self.regions[stage][operand];
        if region.group == Some(group) {
            if region.tile != Some((output_tile, k)) {
                return Err(format!(
                    "one group copies two tiles into stage {stage}: {:?} and {:?}",
                    region.tile,
                    (output_tile, k)
                ));
            }
            return Ok(());
        }
        // The first copy of a new tile into this region: every read of the tile it held must
        // be ordered before it by a barrier.
        if let Some(read) = region.last_read {
            if read >= self.epoch {
                return Err(format!(
                    "stage {stage} is refilled in barrier epoch {} while tile {:?} was read in the same epoch",
                    self.epoch, region.tile
                ));
            }
        }
        *region = Region {
            tile: Some((output_tile, k)),
            group: Some(group),
            last_read: None,
        };
        Ok(())
    }

    fn read(&mut self, address: &'a str) -> Result<(), String> {
        let stage = self.stage(address)?;
        let operand = operand_of(address);
        let index = self.reads;
        self.reads += 1;
        let k = (index / self.ring.reads_per_tile) as u32;
        let region = self.regions[stage][operand];
        if k >= self.k_tiles {
            // The last trip's look-ahead into the tile past the end: dead registers, but the
            // read still has to be retired before the stage is refilled.
            let past = index - self.k_tiles as usize * self.ring.reads_per_tile;
            if past >= self.ring.look_ahead_reads {
                return Err(format!(
                    "read {index} of the output tile is past its {} k tiles",
                    self.k_tiles
                ));
            }
        } else {
            let want = (self.output_tile, k);
            if region.tile != Some(want) {
                return Err(format!(
                    "read {index} of the output tile wants (output tile, k tile) {want:?} and finds {:?} in stage {stage}",
                    region.tile
                ));
            }
            let visible = region
                .group
                .and_then(|g| self.visible_from.get(g).copied().flatten())
                .is_some_and(|from| from <= self.epoch);
            if !visible {
                return Err(format!(
                    "k tile {k} is read from stage {stage} before a wait and a barrier made it complete"
                ));
            }
        }
        self.regions[stage][operand].last_read = Some(self.epoch);
        Ok(())
    }

    /// Epilogue staging over the ring: after every copy and every read of the ring.
    fn epilogue_store(&self) -> Result<(), String> {
        if !self.waited.iter().all(|&w| w) {
            return Err("the epilogue overwrites the ring with copies still pending".into());
        }
        for (stage, regions) in self.regions.iter().enumerate() {
            for region in regions {
                if region.last_read.is_some_and(|read| read >= self.epoch) {
                    return Err(format!(
                        "the epilogue overwrites stage {stage} in the epoch it was read"
                    ));
                }
                if region
                    .group
                    .is_some_and(|g| self.visible_from[g].is_none_or(|v| v > self.epoch))
                {
                    return Err(format!(
                        "the epilogue overwrites stage {stage} before its copy is complete"
                    ));
                }
            }
        }
        Ok(())
    }
}

/// Replays the kernel of `spec` for every K from one k tile to three ring turns.
fn replay(spec: &str) {
    let emitted = gemm_codegen::emit_str(spec).unwrap_or_else(|e| panic!("{spec}: {e:?}"));
    if let Err(error) = replay_ptx(spec, emitted.ptx()) {
        panic!("{spec}: {error}");
    }
}

/// A kernel's replayed code: the prologue up to the main loop, the loop's body, the epilogue,
/// the bounded copies, and a persistent block's head of its next output tile.
struct Sections<'a> {
    first_head: Vec<Instr<'a>>,
    body: Vec<Instr<'a>>,
    tail: Vec<Instr<'a>>,
    bounded: Vec<Instr<'a>>,
    next_head: Option<Vec<Instr<'a>>>,
}

/// The blocks each K is replayed for, by their first bounded k tile: an interior block (none),
/// one whose partial last k tile is, an edge block (all).
fn block_cases(k_tiles: u32) -> [(&'static str, u32); 3] {
    [
        ("interior block", u32::MAX),
        ("partial last k tile", k_tiles - 1),
        ("edge block", 0),
    ]
}

/// Replays `ptx`, the kernel of `spec` (possibly edited), for every K from one k tile to three
/// ring turns: Ks shorter than the ring, and every residue of the k tile count modulo the
/// stage count, so the last tile (and the one past the end the last trip may look ahead into)
/// sits in every stage once; each K for every block case. The first failure, with its K.
fn replay_ptx(spec: &str, ptx: &str) -> Result<(), String> {
    let ring = Ring::of(spec);
    let sections = Sections {
        first_head: section(ptx, &ring, "\tsetp.eq.u32\t%p_empty", "$L_main_loop:"),
        body: section(ptx, &ring, "$L_main_loop:", "@%p_more bra"),
        tail: section(ptx, &ring, "$L_epilogue:", "\tret;"),
        bounded: section(ptx, &ring, "$L_bounded_copy:", "bra.uni\t$L_copied;"),
        // A persistent block's second output tile starts at `$L_tile`, its first copies
        // issued during the first tile's epilogue.
        next_head: ring
            .persistent
            .then(|| section(ptx, &ring, "$L_tile:", "$L_main_loop:")),
    };
    for k_tiles in 1..=3 * ring.smem.stages {
        for (case, k_bounded) in block_cases(k_tiles) {
            replay_k(&ring, &sections, k_tiles, k_bounded)
                .map_err(|error| format!("K = {k_tiles} k tile(s), {case}: {error}"))?;
        }
    }
    Ok(())
}

impl<'a> Replay<'_, 'a> {
    /// Runs `instrs` as the kernel would: into the bounded copies and back to `$L_copied`
    /// where `%p_bounded` holds, past the next tile's copies to `$L_store` on the last output
    /// tile (`last`). `Ok(false)`: `%p_empty` held at `@%p_empty bra`, so the rest of the
    /// head and the main loop are skipped.
    fn run(
        &mut self,
        instrs: &[Instr<'a>],
        sections: &Sections<'a>,
        last: bool,
    ) -> Result<bool, String> {
        let (mut to_copied, mut to_store) = (false, false);
        for instr in instrs {
            match instr.op {
                Op::CopiedLabel => to_copied = false,
                Op::StoreLabel => to_store = false,
                _ if to_copied || to_store => {}
                Op::SkipIfEmpty if self.predicate("%p_empty")? => return Ok(false),
                Op::SkipIfLastTile => to_store = last,
                Op::ToBounded if self.predicate("%p_bounded")? => {
                    for instr in &sections.bounded {
                        self.step(instr)?;
                    }
                    to_copied = true;
                }
                _ => self.step(instr)?,
            }
        }
        Ok(true)
    }
}

fn replay_k(
    ring: &Ring,
    sections: &Sections<'_>,
    k_tiles: u32,
    k_bounded: u32,
) -> Result<(), String> {
    let mut r = Replay::new(ring, k_tiles);
    // What the kernel works out for this block (`bounded_from`); the replay sets it.
    r.values.insert("%k_bounded", k_bounded);
    r.values.insert("%k_fast", k_tiles.min(k_bounded));
    let output_tiles = if sections.next_head.is_some() { 2 } else { 1 };
    for output_tile in 0..output_tiles {
        r.output_tile = output_tile;
        r.reads = 0;
        let last = output_tile + 1 == output_tiles;
        let head = match &sections.next_head {
            Some(next_head) if output_tile > 0 => next_head,
            _ => &sections.first_head,
        };
        // The loop runs as the PTX counts it; one that does not end by K trips is broken.
        let mut more = r.run(head, sections, last)?;
        let mut trips = 0;
        while more {
            r.run(&sections.body, sections, last)?;
            trips += 1;
            more = r.predicate("%p_more")?;
            if more && trips > k_tiles {
                return Err(format!("the main loop runs past {k_tiles} trips"));
            }
        }
        let want = k_tiles as usize * ring.reads_per_tile + ring.look_ahead_reads;
        if r.reads != want {
            return Err(format!(
                "output tile {output_tile}: the main loop makes {} shared-memory reads in {trips} \
                 trip(s), not the {want} of {k_tiles} k tile(s)",
                r.reads
            ));
        }
        // The epilogue; the next output tile's copies are issued only if there is one.
        let stores_before = r.shared_stores;
        r.run(&sections.tail, sections, last)?;
        if ring.staged_epilogue && r.shared_stores == stores_before {
            return Err("the epilogue is staged through shared memory but stores none".into());
        }
    }
    if !r.waited.iter().all(|&w| w) {
        return Err("the kernel exits with copies into shared memory still in flight".into());
    }
    Ok(())
}

/// `ptx` with the first `from` after `after` replaced by `to`.
fn edit(ptx: &str, after: &str, from: &str, to: &str) -> String {
    let start = ptx.find(after).unwrap_or_else(|| panic!("no `{after}`"));
    let at = start
        + ptx[start..]
            .find(from)
            .unwrap_or_else(|| panic!("no `{from}` after `{after}`"));
    format!("{}{to}{}", &ptx[..at], &ptx[at + from.len()..])
}

/// The replay's verdict on an edited kernel: the error, which must exist.
fn caught(spec: &str, edited: &str) -> String {
    match replay_ptx(spec, edited) {
        Ok(()) => panic!("{spec}: the edited kernel passes the replay"),
        Err(error) => error,
    }
}

/// The bounded copies broken four ways, each caught: copying nothing, sourcing B's or A's rows
/// of tile `%k_tile` instead of `%k_load`, and a main loop that never branches to them.
fn assert_broken_bounded_copies_fail(spec: &str, ptx: &str) {
    let start = ptx.find("$L_bounded_copy:").unwrap();
    let no_copies: String = ptx[start..]
        .lines()
        .filter(|line| !line.contains("cp.async.c"))
        .map(|line| format!("{line}\n"))
        .collect();
    let error = caught(spec, &format!("{}{no_copies}", &ptx[..start]));
    assert!(
        error.contains("wants (output tile, k tile)"),
        "{spec}: {error}"
    );
    for (from, to) in [
        ("mad.lo.u32\t%row, %k_load,", "mad.lo.u32\t%row, %k_tile,"),
        (
            "mad.wide.u32\t%a_base, %k_load,",
            "mad.wide.u32\t%a_base, %k_tile,",
        ),
    ] {
        let error = caught(spec, &edit(ptx, "$L_bounded_copy:", from, to));
        assert!(
            error.contains("wants (output tile, k tile)"),
            "{spec}, {to}: {error}"
        );
    }
    let error = caught(
        spec,
        &edit(
            ptx,
            "$L_main_loop:",
            "@%p_bounded bra.uni\t$L_bounded_copy;",
            "",
        ),
    );
    assert!(
        error.contains("wants (output tile, k tile)"),
        "{spec}: {error}"
    );
}

/// Breaks that both families' rings must catch: waiting for one copy group too few (the tile
/// read next may still be in flight), a loop that counts two k tiles per trip, and broken
/// bounded copies.
fn assert_shared_ring_breaks_fail(spec: &str, ptx: &str, ring: &Ring) {
    let wait = format!(
        "\tcp.async.wait_group\t{};",
        ring.smem.guard.groups_in_flight
    );
    let short_wait = format!(
        "\tcp.async.wait_group\t{};",
        ring.smem.guard.groups_in_flight + 1
    );
    let error = caught(spec, &edit(ptx, "$L_main_loop:", &wait, &short_wait));
    assert!(
        error.contains("before a wait and a barrier made it complete"),
        "{spec}: {error}"
    );
    let error = caught(
        spec,
        &edit(
            ptx,
            "$L_main_loop:",
            "add.u32\t%k_tile, %k_tile, 1;",
            "add.u32\t%k_tile, %k_tile, 2;",
        ),
    );
    assert!(error.contains("the main loop makes"), "{spec}: {error}");
    assert_broken_bounded_copies_fail(spec, ptx);
}

fn cp_async_catalog(mma: &str) -> Vec<&'static str> {
    CATALOG
        .iter()
        .filter(|e| e.spec.contains(&format!("mma: {mma}")) && e.spec.contains("copy: cp_async"))
        .map(|e| e.spec)
        .collect()
}

#[test]
fn catalog_rings_order_every_shared_access() {
    let tensor_cores = cp_async_catalog("mma_sync");
    let simt = cp_async_catalog("fma");
    assert!(tensor_cores.len() >= 6 && simt.len() >= 6);
    for spec in tensor_cores.into_iter().chain(simt) {
        replay(spec);
    }
}

#[test]
fn every_simt_depth_orders_every_shared_access() {
    for stages in 1..=8 {
        for (tile, warps, copy, swizzle) in [
            ("128x128x8", "4x2", "cp_async", "none"),
            ("128x128x16", "4x2", "cp_async", "pad(16)"),
            ("64x64x16", "2x1", "cp_async(ca)", "none"),
            ("64x128x32", "2x2", "cp_async", "none"),
        ] {
            let spec = format!(
                "name: k, arch: sm_90, mma: fma, tile: {tile}, warps: {warps}, stages: {stages}, \
                 copy: {copy}, swizzle: {swizzle}"
            );
            if gemm_dsl::check_str(&spec).is_ok() {
                replay(&spec);
            } else {
                // Only the deepest rings of the largest tile may exceed shared memory.
                assert!(stages > 4 && tile == "64x128x32", "{spec}");
            }
        }
    }
}

#[test]
fn every_depth_and_k_step_count_orders_every_shared_access() {
    for stages in 1..=6 {
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

/// The layouts with a column-major operand change where copies come from (a column-major A
/// steps k tiles by `%a_tile_step` lines, a column-major B along its lines) and which reads
/// find them: every cp.async catalog ring, and the persistent one, in rc, cr and cc.
#[test]
fn every_layout_orders_every_shared_access() {
    let (mut replayed, mut refused) = (0, Vec::new());
    for layout in ["rc", "cr", "cc"] {
        for spec in cp_async_catalog("mma_sync")
            .into_iter()
            .chain(cp_async_catalog("fma"))
        {
            let spec = format!("{spec}, layout: {layout}");
            if gemm_dsl::check_str(&spec).is_ok() {
                replay(&spec);
                replayed += 1;
            } else {
                refused.push(spec);
            }
        }
    }
    // 16x8 accumulators per thread with both operands read along K do not fit the
    // registers: refused, not spilled.
    assert_eq!(
        refused,
        [
            "name: simt_128x256x8_cp2, arch: sm_80, tile: 128x256x8, warps: 2x4, stages: 2, \
          copy: cp_async, mma: fma, layout: rc"
        ]
    );
    let rings = cp_async_catalog("mma_sync").len() + cp_async_catalog("fma").len();
    assert_eq!(replayed, 3 * rings - refused.len());
}

/// Narrower copy vectors issue more copies per stage into the same ring: every narrow
/// cp.async kernel, in every layout, orders every shared access.
#[test]
fn narrow_vector_rings_order_every_shared_access() {
    let (mut replayed, mut refused, mut rings) = (0, Vec::new(), 0);
    for entry in gemm_codegen::catalog::NARROW {
        if !entry.spec.contains("copy: cp_async") {
            continue;
        }
        rings += 1;
        for layout in ["rr", "rc", "cr", "cc"] {
            let spec: Vec<&str> = entry
                .spec
                .split(", ")
                .filter(|part| !part.starts_with("layout:"))
                .collect();
            let spec = format!("{}, layout: {layout}", spec.join(", "));
            if gemm_dsl::check_str(&spec).is_ok() {
                replay(&spec);
                replayed += 1;
            } else {
                refused.push(spec);
            }
        }
    }
    assert_eq!(refused, Vec::<String>::new(), "refused");
    assert_eq!(replayed, 4 * rings - refused.len());
}

/// Each way a ring could be broken, written into the PTX, is caught; the error says how.
#[test]
fn broken_simt_rings_fail_the_replay() {
    for spec in cp_async_catalog("fma") {
        let ring = Ring::of(spec);
        let ptx = gemm_codegen::emit_str(spec).unwrap().ptx().to_string();
        let wait = format!(
            "\tcp.async.wait_group\t{};",
            ring.smem.guard.groups_in_flight
        );
        // No barrier after the main loop's wait: other threads' copies are not yet visible.
        let error = caught(
            spec,
            &edit(
                &ptx,
                "$L_main_loop:",
                &format!("{wait}\n\tbar.sync\t0;"),
                &wait,
            ),
        );
        assert!(
            error.contains("before a wait and a barrier made it complete"),
            "{spec}: {error}"
        );
        // A k tile skipped three ways: the copies jump a tile, the loop counts two per trip,
        // the read stage stays put.
        let loop_start = ptx.find("$L_main_loop:").unwrap();
        let advance_at = loop_start + ptx[loop_start..].find("\t// Next k tile:").unwrap();
        let advance: String = ptx[advance_at..]
            .lines()
            .take_while(|line| !line.starts_with("\tadd.u32") && !line.starts_with("\tld.shared"))
            .map(|line| format!("{line}\n"))
            .collect();
        assert!(advance.contains("%b_tile_step"), "{advance}");
        let error = caught(
            spec,
            &edit(
                &ptx,
                "$L_main_loop:",
                &advance,
                &format!("{advance}{advance}"),
            ),
        );
        assert!(
            error.contains("past the end of K") || error.contains("wants (output tile, k tile)"),
            "{spec}: {error}"
        );
        let rotate = format!(
            "add.u32\t%read_stage, %read_stage, {};",
            ring.smem.stage_bytes
        );
        let error = caught(
            spec,
            &edit(
                &ptx,
                "$L_main_loop:",
                &rotate,
                "add.u32\t%read_stage, %read_stage, 0;",
            ),
        );
        assert!(
            error.contains("wants (output tile, k tile)"),
            "{spec}: {error}"
        );
        // The guard of the copies ahead removed: the last trips copy past the end of K.
        let error = caught(
            spec,
            &edit(&ptx, "$L_main_loop:", "@%p_load cp.async", "cp.async"),
        );
        assert!(error.contains("past the end of K"), "{spec}: {error}");
        assert_shared_ring_breaks_fail(spec, &ptx, &ring);
    }
}

#[test]
fn broken_tensor_core_rings_fail_the_replay() {
    for spec in cp_async_catalog("mma_sync") {
        let ring = Ring::of(spec);
        let ptx = gemm_codegen::emit_str(spec).unwrap().ptx().to_string();
        let wait = format!(
            "\tcp.async.wait_group\t{};",
            ring.smem.guard.groups_in_flight
        );
        let barrier = format!("{wait}\n\tbar.sync\t0;");
        // No barrier after the wait in the main loop, or before it.
        let error = caught(spec, &edit(&ptx, "$L_main_loop:", &barrier, &wait));
        assert!(
            error.contains("before a wait and a barrier made it complete")
                || error.contains("is refilled in barrier epoch"),
            "{spec}: {error}"
        );
        let error = caught(
            spec,
            &edit(&ptx, "\tsetp.eq.u32\t%p_empty", &barrier, &wait),
        );
        assert!(
            error.contains("before a wait and a barrier made it complete"),
            "{spec}: {error}"
        );
        assert_shared_ring_breaks_fail(spec, &ptx, &ring);
    }
}

#[test]
fn a_persistent_kernel_without_its_tile_end_barrier_fails_the_replay() {
    let spec = "name: k, arch: sm_90, mma: mma_sync, dtype: bf16, tile: 128x128x32, stages: 3, \
                schedule: persistent";
    let ptx = gemm_codegen::emit_str(spec).unwrap().ptx().to_string();
    let error = caught(spec, &edit(&ptx, "$L_epilogue:", "\tbar.sync\t0;", ""));
    assert!(error.contains("is refilled in barrier epoch"), "{error}");
}
