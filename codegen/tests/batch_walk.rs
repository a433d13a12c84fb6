//! The persistent tile walk over a strided batch, replayed from the emitted PTX: the
//! instructions that turn a tile index into (product, tile row, tile column) are run on the
//! CPU for every index of a batch, and must give `Schedule::batched_tile_at`'s answer, so
//! every product's every tile is computed exactly once.

use gemm_codegen::emit_str;
use std::collections::HashMap;

/// The lines of the walk's block: from its comment to the `}` that closes it.
fn walk_block(ptx: &str) -> Vec<&str> {
    let lines: Vec<&str> = ptx.lines().collect();
    let start = lines
        .iter()
        .position(|line| line.contains("// Tile %tile: raster bands"))
        .expect("a persistent kernel walks its tiles");
    let end = start
        + lines[start..]
            .iter()
            .position(|line| line.trim() == "}")
            .expect("the walk's block closes");
    lines[start..end].to_vec()
}

/// Runs the walk's u32 arithmetic with `%tile = index`, the kernel parameters `params` and
/// `walkers` blocks and clusters (predicates hold 0 or 1).
fn replay(
    block: &[&str],
    params: &HashMap<&str, u32>,
    walkers: u32,
    index: u32,
) -> HashMap<String, u32> {
    let mut registers: HashMap<String, u32> = HashMap::from([
        ("%tile".to_string(), index),
        ("%nctaid.x".to_string(), walkers),
        ("%nclusterid.x".to_string(), walkers),
    ]);
    for line in block {
        let line = line.trim();
        if line.is_empty() || line.starts_with("//") || line.starts_with('.') || line == "{" {
            continue;
        }
        // A guarded instruction (`@%p` or `@!%p`) runs where its predicate says.
        let (guard, line) = match line.strip_prefix('@') {
            Some(rest) => {
                let (predicate, instruction) = rest
                    .split_once(char::is_whitespace)
                    .unwrap_or_else(|| panic!("a guard without an instruction: {line}"));
                (Some(predicate), instruction.trim())
            }
            None => (None, line),
        };
        if let Some(predicate) = guard {
            let (negated, name) = match predicate.strip_prefix('!') {
                Some(name) => (true, name),
                None => (false, predicate),
            };
            if (registers[name] == 1) == negated {
                continue;
            }
        }
        let (opcode, operands) = line
            .trim_end_matches(';')
            .split_once(char::is_whitespace)
            .unwrap_or_else(|| panic!("no operands: {line}"));
        let operands: Vec<&str> = operands.split(',').map(str::trim).collect();
        let value =
            |operand: &str| -> u32 { operand.parse().unwrap_or_else(|_| registers[operand]) };
        let result = match opcode {
            "ld.param.u32" => {
                let name = operands[1].trim_matches(['[', ']']);
                params
                    .iter()
                    .find(|(key, _)| name.ends_with(&format!("_{key}")))
                    .map(|(_, value)| *value)
                    .unwrap_or_else(|| panic!("no parameter for {line}"))
            }
            "add.u32" => value(operands[1]) + value(operands[2]),
            "sub.u32" => value(operands[1]) - value(operands[2]),
            "mul.lo.u32" => value(operands[1]) * value(operands[2]),
            "mul.hi.u32" => {
                ((u64::from(value(operands[1])) * u64::from(value(operands[2]))) >> 32) as u32
            }
            "shr.u32" => value(operands[1]) >> value(operands[2]),
            "div.u32" => value(operands[1]) / value(operands[2]),
            "rem.u32" => value(operands[1]) % value(operands[2]),
            "min.u32" => value(operands[1]).min(value(operands[2])),
            "mov.u32" => value(operands[1]),
            "setp.gt.u32" => u32::from(value(operands[1]) > value(operands[2])),
            "setp.ge.u32" => u32::from(value(operands[1]) >= value(operands[2])),
            "setp.ne.u32" => u32::from(value(operands[1]) != value(operands[2])),
            "setp.lt.and.u32" => {
                u32::from(value(operands[1]) < value(operands[2]) && value(operands[3]) == 1)
            }
            "setp.le.and.u32" => {
                u32::from(value(operands[1]) <= value(operands[2]) && value(operands[3]) == 1)
            }
            "selp.b32" => {
                if value(operands[3]) == 1 {
                    value(operands[1])
                } else {
                    value(operands[2])
                }
            }
            other => panic!("the replay does not know {other}: {line}"),
        };
        registers.insert(operands[0].to_string(), result);
    }
    registers
}

#[test]
fn the_emitted_walk_covers_every_products_tiles_once() {
    for spec in [
        "name: k, arch: sm_90, dtype: bf16, tile: 128x256x64, warps: 2x4, stages: 3, mma: mma_sync, schedule: persistent(raster = m, group = 8)",
        "name: k, arch: sm_80, dtype: bf16, tile: 128x128x32, stages: 3, mma: mma_sync, schedule: persistent(raster = n, group = 3)",
        "name: k, arch: sm_90a, mma: wgmma, schedule: persistent",
        "name: k, arch: sm_90a, mma: wgmma, tile: 256x128x64, copy: tma(multicast = 2), cluster: 1x2, schedule: persistent",
    ] {
        let emitted = emit_str(spec).unwrap_or_else(|e| panic!("{spec}: {e}"));
        let block = walk_block(emitted.ptx());
        let launch = emitted.launch();
        let (walk_m, walk_n) = (
            launch.tile_m * launch.cluster.0,
            launch.tile_n * launch.cluster.1,
        );
        let schedule = emitted.spec().schedule;
        // Some walks go along their bands first, some not: each spec walks both ways.
        let mut orders = std::collections::HashSet::new();
        for (batch, m, n, walkers) in [
            (1, 1000, 700, 132),
            (1, 700, 5000, 132),
            (1, 700, 5000, 8),
            (1, 1000, 200, 132),
            (3, 129, 257, 132),
            (5, 3 * walk_m, 2 * walk_n + 1, 132),
        ] {
            let (tiles_m, tiles_n) = (m.div_ceil(walk_m), n.div_ceil(walk_n));
            let order = schedule.band_order((tiles_m, tiles_n), (walk_m, walk_n), walkers);
            orders.insert(order);
            let params = HashMap::from([("m", m), ("n", n), ("batch", batch)]);
            let mut seen = vec![false; (batch * tiles_m * tiles_n) as usize];
            for index in 0..batch * tiles_m * tiles_n {
                let registers = replay(&block, &params, walkers, index);
                let (product, row, col) = schedule.batched_tile_at(index, tiles_m, tiles_n, order);
                assert_eq!(
                    (
                        registers["%batch"],
                        registers["%block_m"],
                        registers["%block_n"]
                    ),
                    (product, row * walk_m, col * walk_n),
                    "{spec}: tile {index} of {batch} x {m} x {n}, {walkers} walkers ({order:?})"
                );
                let slot = &mut seen[((product * tiles_m + row) * tiles_n + col) as usize];
                assert!(!*slot, "{spec}: product {product} tile ({row}, {col}) twice");
                *slot = true;
            }
            assert!(seen.iter().all(|&s| s), "{spec}: a tile never walked");
        }
        assert_eq!(orders.len(), 2, "{spec}: walked only {orders:?}");
    }
}
