//! A proof of the Hopper TMA-store epilogue's two buffers per warpgroup, and of its C-in loads
//! (`scale: alpha_beta`), on the emitted PTX itself.
//!
//! The epilogue's buffer protocol is read out of a kernel's text: which buffer each TMA load of
//! C-in lands in and which barrier counts it, the barrier and parity each box waits on, the
//! buffer each box reads its C-in from (`ldmatrix`) and stages its D in (`stmatrix`), where the
//! leader waits for earlier stores to have read their buffers and how many it lets run on
//! (`cp.async.bulk.wait_group.read N`: all but the newest N), the warpgroup's barriers, the
//! TMA stores and the buffer swaps, and which of them a box stored directly (a ragged N) skips.
//! A model of one consumer warpgroup (four warps, warp 0 holding the leader) then runs that
//! script over two output tiles, with every pattern of directly stored boxes (past six boxes,
//! the box columns a ragged N makes and a few more), under many interleavings of the warps,
//! the loads landing and the stores reading. It fails on a
//! deadlock, a warp reading C-in that is not its box's, a load landing in a buffer a warp still
//! has to read or a store still has to read, a warp staging D over a buffer a store has not
//! read yet, and a store of a box some warp has not staged. Each check has a negative case: a
//! broken variant of the PTX is caught.

use gemm_codegen::Emitted;

/// One step of a consumer warp's epilogue, as the PTX writes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    /// The leader: C-in of the next box in load order into `buffer`, counted by barrier
    /// `(boxes + later) % 2`.
    Load { buffer: Reg, later: u32 },
    /// Wait for the current box's C-in: barrier `boxes % 2`, phase `boxes / 2`; then
    /// `boxes += 1`.
    WaitCIn,
    /// `ldmatrix` of the thread's C-in from `buffer`.
    Read(Reg),
    /// The branch to the direct stores of box `box`, taken where that box is stored directly.
    DirectBranch { box_index: usize },
    /// `stmatrix` of the thread's D into `buffer`.
    Write(Reg),
    /// The leader: wait until every store issued but the newest `running` has read its buffer.
    WaitRead { running: usize },
    /// The warpgroup's named barrier; `direct_only`: predicated on the box being stored
    /// directly.
    Barrier { direct_only: bool },
    /// The leader: the TMA store of the current box from `buffer`.
    Store(Reg),
    /// The label the direct stores of box `box` come back to.
    Stored { box_index: usize },
    /// `mov dst, src`; `direct_only` as for the barrier.
    Move {
        dst: Reg,
        src: Reg,
        direct_only: bool,
    },
}

/// The registers that name the buffers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Reg {
    CBuf,
    CBufOther,
    Tmp,
}

fn reg(name: &str) -> Reg {
    match name.trim_matches(|c| c == '[' || c == ']' || c == ',' || c == ';') {
        "%c_buf" => Reg::CBuf,
        "%c_buf_other" => Reg::CBufOther,
        "%st_tmp" => Reg::Tmp,
        other => panic!("no buffer register `{other}`"),
    }
}

/// The epilogue's script, from its first box (or C-in load) to the last box's swap.
fn script(ptx: &str) -> Vec<Step> {
    let lines: Vec<&str> = ptx.lines().map(str::trim).collect();
    let start = lines
        .iter()
        .position(|l| l.starts_with("// Warpgroup c's rows, one "))
        .expect("the epilogue stores through TMA");
    let total_boxes = lines
        .iter()
        .filter(|l| l.starts_with("$L_box") && l.ends_with("_stored:"))
        .count();
    let mut steps = Vec::new();
    let mut later = None;
    let mut boxes_seen = 0;
    let mut last_stored = None;
    for line in &lines[start..] {
        let leader = line.starts_with("@%p_store_leader");
        let direct_only = line.starts_with("@%p_direct_box");
        let body = line
            .trim_start_matches("@%p_store_leader")
            .trim_start_matches("@%p_direct_box")
            .trim();
        if body.starts_with("//") {
            continue;
        }
        let words: Vec<&str> = body.split_whitespace().collect();
        if let Some(label) = body
            .strip_prefix("$L_box")
            .and_then(|l| l.strip_suffix("_stored:"))
        {
            let box_index = label.parse().unwrap();
            steps.push(Step::Stored { box_index });
            last_stored = Some(box_index);
            continue;
        }
        if last_stored.is_some_and(|b| b + 1 == total_boxes) && !direct_only && !body.is_empty() {
            // Past the last box's swap: the walk's next tile.
            break;
        }
        match words.first().copied() {
            Some("add.u32") if leader && words[2] == "%cin_boxes," => {
                later = Some(words[3].trim_end_matches(';').parse().unwrap());
            }
            Some(op)
                if op.starts_with("cp.async.bulk.tensor") && op.contains(".global.mbarrier") =>
            {
                assert!(leader, "{line}");
                steps.push(Step::Load {
                    buffer: reg(words[1]),
                    later: later.take().expect("a load names its barrier"),
                });
            }
            Some(op) if op.starts_with("mbarrier.try_wait") => steps.push(Step::WaitCIn),
            Some(op) if op.starts_with("ldmatrix") => {}
            Some("add.u32") if words[1] == "%st_addr," && words[2] == "%c_buf," => {}
            Some(op) if op.starts_with("stmatrix") => steps.push(Step::Write(Reg::CBuf)),
            Some("bra") if direct_only => {
                steps.push(Step::DirectBranch {
                    box_index: boxes_seen,
                });
                boxes_seen += 1;
            }
            Some(op) if op.starts_with("cp.async.bulk.wait_group.read") => {
                assert!(leader, "{line}");
                let running = words[1].trim_end_matches(';').parse().unwrap();
                steps.push(Step::WaitRead { running });
            }
            Some("bar.sync") => steps.push(Step::Barrier { direct_only }),
            Some(op)
                if op.starts_with("cp.async.bulk.tensor")
                    && op.contains(".shared::cta.bulk_group") =>
            {
                assert!(leader, "{line}");
                steps.push(Step::Store(reg(words.last().unwrap())));
            }
            Some("mov.u32") if ["%c_buf,", "%c_buf_other,", "%st_tmp,"].contains(&words[1]) => {
                let src = words[2];
                if src.starts_with("%c_buf") || src.starts_with("%st_tmp") {
                    steps.push(Step::Move {
                        dst: reg(words[1]),
                        src: reg(src),
                        direct_only,
                    });
                }
            }
            _ => {}
        }
        // `ldmatrix` reads the buffer `%st_addr` was just set from.
        if words.first().is_some_and(|op| op.starts_with("ldmatrix")) {
            steps.push(Step::Read(Reg::CBuf));
        }
    }
    assert_eq!(
        (last_stored.map(|b| b + 1), boxes_seen),
        (Some(total_boxes), total_boxes),
        "every box branches and ends"
    );
    steps
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

struct Warp {
    pc: usize,
    tile: usize,
    /// What `%c_buf`, `%c_buf_other` and `%st_tmp` hold: buffer numbers.
    regs: [usize; 3],
    /// `%cin_boxes`: boxes waited for so far.
    boxes: usize,
    /// The box (in walk order) the warp is on: set where it waits for the box's C-in.
    current: usize,
    /// Arrived at the named barrier of this generation.
    at_barrier: Option<usize>,
}

/// Runs the script `steps` for two tiles, box `b` stored directly where `direct[b]`.
fn run(steps: &[Step], direct: &[bool], seed: u64) -> Result<(), String> {
    let boxes_per_tile = direct.len();
    let total_boxes = boxes_per_tile * TILES;
    let mut rng = Rng(seed | 1);
    let slowness = 1 + (seed % 16) as usize;
    let mut warps: Vec<Warp> = (0..WARPS)
        .map(|_| Warp {
            pc: 0,
            tile: 0,
            regs: [0, 1, 0],
            boxes: 0,
            current: 0,
            at_barrier: None,
        })
        .collect();
    // Loads go in box order; those not landed yet: (buffer, barrier, box).
    let mut loads_issued = 0;
    let mut loads_pending: Vec<(usize, usize, usize)> = Vec::new();
    // Per barrier: phases completed.
    let mut phases = [0usize; 2];
    // Per buffer, the box whose C-in last landed there; the stores that have not read their
    // buffer yet: (buffer, box, the store's place in the leader's issue order).
    let mut c_in_in: [Option<usize>; 2] = [None, None];
    let mut stores_pending: Vec<(usize, usize, usize)> = Vec::new();
    let mut stores_issued = 0;
    // Per box and warp: C-in read, D staged.
    let mut read = vec![[false; WARPS]; total_boxes];
    let mut staged = vec![[false; WARPS]; total_boxes];
    let (mut barrier_arrived, mut barrier_generation) = (0, 0);
    let is_direct = |b: usize| direct[b % boxes_per_tile];
    let has_c_in = steps.contains(&Step::WaitCIn);
    loop {
        // What can move: a warp's next step, a load landing, a store reading its buffer.
        let movable: Vec<usize> = (0..WARPS)
            .filter(|&w| {
                let warp = &warps[w];
                if warp.tile == TILES || warp.at_barrier == Some(barrier_generation) {
                    return false;
                }
                if warp.at_barrier.is_some() {
                    return true;
                }
                match steps[warp.pc] {
                    Step::WaitCIn => phases[warp.boxes % 2] > warp.boxes / 2,
                    Step::WaitRead { running } => {
                        w != 0
                            || stores_pending
                                .iter()
                                .all(|&(_, _, order)| order + running >= stores_issued)
                    }
                    _ => true,
                }
            })
            .collect();
        let asynchronous = loads_pending.len() + stores_pending.len();
        if movable.is_empty() && asynchronous == 0 {
            return if warps.iter().all(|w| w.tile == TILES) {
                Ok(())
            } else {
                Err(format!(
                    "deadlock: warps at {:?}",
                    warps.iter().map(|w| steps[w.pc]).collect::<Vec<_>>()
                ))
            };
        }
        // The copies take their time: a slow seed lets the warps run far ahead of them.
        let take_async = asynchronous > 0 && (movable.is_empty() || rng.below(slowness) == 0);
        if take_async {
            let index = rng.below(asynchronous);
            if index < loads_pending.len() {
                let (buffer, barrier, b) = loads_pending.remove(index);
                if let Some(previous) = c_in_in[buffer] {
                    if let Some(w) = (0..WARPS).find(|&w| !read[previous][w]) {
                        return Err(format!(
                            "box {b}'s C-in landed in buffer {buffer} before warp {w} read box {previous}'s there"
                        ));
                    }
                }
                if let Some(&(_, s, _)) = stores_pending.iter().find(|&&(buf, _, _)| buf == buffer)
                {
                    return Err(format!(
                        "box {b}'s C-in landed in buffer {buffer} before the store of box {s} read it"
                    ));
                }
                c_in_in[buffer] = Some(b);
                phases[barrier] += 1;
            } else {
                stores_pending.remove(index - loads_pending.len());
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
                let box_in_walk = warp.tile * boxes_per_tile + box_index;
                if has_c_in {
                    assert_eq!(warp.current, box_in_walk, "C-in waited for in box order");
                }
                warp.current = box_in_walk;
            }
            let direct_box = is_direct(warp.current);
            match steps[warp.pc] {
                Step::Load { buffer, later } if leader => {
                    let barrier = (warp.boxes + later as usize) % 2;
                    loads_pending.push((warp.regs[buffer as usize], barrier, loads_issued));
                    loads_issued += 1;
                }
                Step::WaitCIn => {
                    warp.current = warp.boxes;
                    warp.boxes += 1;
                }
                Step::Read(buffer) => {
                    let buffer = warp.regs[buffer as usize];
                    if c_in_in[buffer] != Some(warp.current) {
                        return Err(format!(
                            "warp {w} read box {}'s C-in from buffer {buffer}, which holds box {:?}'s",
                            warp.current, c_in_in[buffer]
                        ));
                    }
                    read[warp.current][w] = true;
                }
                Step::DirectBranch { box_index } if direct_box => {
                    assert_eq!(box_index, warp.current % boxes_per_tile);
                    next = steps
                        .iter()
                        .position(|s| *s == Step::Stored { box_index })
                        .expect("each box has its label");
                }
                Step::Write(buffer) => {
                    let buffer = warp.regs[buffer as usize];
                    if let Some(&(_, s, _)) =
                        stores_pending.iter().find(|&&(buf, _, _)| buf == buffer)
                    {
                        return Err(format!(
                            "warp {w} staged box {}'s D in buffer {buffer} before the store of box {s} read it",
                            warp.current
                        ));
                    }
                    staged[warp.current][w] = true;
                }
                Step::Barrier { direct_only } if !direct_only || direct_box => {
                    warp.at_barrier = Some(barrier_generation);
                    barrier_arrived += 1;
                    if barrier_arrived == WARPS {
                        barrier_arrived = 0;
                        barrier_generation += 1;
                    }
                    continue;
                }
                Step::Store(buffer) if leader => {
                    if let Some(other) = (0..WARPS).find(|&o| !staged[warp.current][o]) {
                        return Err(format!(
                            "the store of box {} read its buffer before warp {other} staged its D",
                            warp.current
                        ));
                    }
                    stores_pending.push((warp.regs[buffer as usize], warp.current, stores_issued));
                    stores_issued += 1;
                }
                Step::Move {
                    dst,
                    src,
                    direct_only,
                } if !direct_only || direct_box => {
                    warp.regs[dst as usize] = warp.regs[src as usize];
                }
                _ => {}
            }
        }
        warp.pc = next;
        if warp.pc == steps.len() {
            warp.pc = 0;
            warp.tile += 1;
        }
    }
}

/// Every pattern of directly stored boxes, under many interleavings.
fn check(steps: &[Step]) -> Result<(), String> {
    let boxes = steps
        .iter()
        .filter(|s| matches!(s, Step::DirectBranch { .. }))
        .count();
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
    for direct in patterns {
        for seed in 0..300 {
            run(steps, &direct, seed * 0x9e37_79b9 + 1)
                .map_err(|e| format!("direct boxes {direct:?}, seed {seed}: {e}"))?;
        }
    }
    Ok(())
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
        let steps = script(emitted.ptx());
        check(&steps).unwrap_or_else(|e| panic!("{}: {e}", emitted.kernel_name()));
    }
}

/// The store-only protocol's wait, removed or loosened in the PTX, is missed. (Letting the
/// last store run on needs a third buffer, or a second barrier before each box's staging:
/// measured no faster, `results/clusters-2026-11-26/epilogue-ab.txt`.)
#[test]
fn broken_store_waits_are_caught() {
    let emitted = &store_specs()[0];
    let ptx = emitted.ptx();
    let wait =
        "\t@%p_store_leader cp.async.bulk.wait_group.read\t0;\n\tbar.sync\t%store_bar, 128;\n";
    let breakages = [
        (
            "a box stored before the last box's store read the other buffer",
            wait.replace("read\t0;\n", "read\t1;\n"),
        ),
        (
            "no wait at all",
            "\tbar.sync\t%store_bar, 128;\n".to_string(),
        ),
    ];
    for (what, replacement) in breakages {
        assert!(ptx.contains(wait), "{what}: the PTX has `{wait}`");
        let broken = ptx.replace(wait, &replacement);
        let steps = script(&broken);
        let caught = check(&steps).expect_err(&format!("{what}: the model did not catch it"));
        println!("{what}: {caught}");
    }
}

/// Each guard of the protocol, removed from the PTX, is missed.
#[test]
fn broken_c_in_loads_are_caught() {
    let emitted = &c_in_specs()[0];
    let ptx = emitted.ptx();
    let breakages: [(&str, &str, &str); 3] = [
        (
            "a directly stored box without the warpgroup's barrier",
            "\t@%p_direct_box bar.sync\t%store_bar, 128;\n",
            "",
        ),
        (
            "a load into a buffer before its store read it",
            "\t@%p_store_leader cp.async.bulk.wait_group.read\t0;\n\t@%p_store_leader add.u32\t%st_addr, %cin_boxes, 1;",
            "\t@%p_store_leader add.u32\t%st_addr, %cin_boxes, 1;",
        ),
        (
            "a directly stored box that keeps its buffer",
            "\t@%p_direct_box mov.u32\t%c_buf, %c_buf_other;\n",
            "",
        ),
    ];
    for (what, guard, replacement) in breakages {
        assert!(ptx.contains(guard), "{what}: the PTX has `{guard}`");
        let broken = ptx.replace(guard, replacement);
        let steps = script(&broken);
        let caught = check(&steps).expect_err(&format!("{what}: the model did not catch it"));
        println!("{what}: {caught}");
    }
}
