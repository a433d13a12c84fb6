//! Plan of the SIMT family (`mma: fma`): warp-tiled FFMA over f32.
//!
//! Shared memory holds, per stage, A as `BM x BK` and B as `BK x BN`, both in their global
//! layout (row-major, K resp. N contiguous) so that 16-byte `cp.async` copies land in place.
//! A warp's lanes form a 4 x 8 grid; lane (r, c) owns accumulator rows
//! `warp_m·WTM + r·TM + i` and column groups `warp_n·WTN + 4c + 32j`. Per group of four k it
//! reads its TM rows of A as one 16-byte vector each (k contiguous) and, per k, its TN columns
//! of B as TN/4 vectors. The 8 lanes of a 128-bit read phase share a lane row, so A reads
//! broadcast and B reads cover 128 consecutive bytes: conflict-free.

use super::batch::BatchPlan;
use super::edges::{chunk_words, last_byte, ChunkWord, ElementStore};
use super::{conflict_degree, BankReport, LaunchContract, PlanCopy, SmemLayout};
use crate::emit::{Opcode, SassCheck, GEMM_PARAMS};
use gemm_dsl::family::simt::{SimtGeometry, SIMT_COLUMN_GROUP, SIMT_LANE_COLS, SIMT_LANE_ROWS};
use gemm_dsl::geometry::{CopyGeometry, COPY_VECTOR_BYTES};
use gemm_dsl::{GemmSpec, ValidSpec};
use serde::Serialize;

/// Bytes of one f32.
const F32_BYTES: u32 = 4;
/// Blocks below this many threads get an explicit register limit (see `max_registers`).
const SMALL_BLOCK_THREADS: u32 = 256;
/// k values one A vector read covers (16 bytes of f32).
const K_PER_A_VECTOR: u32 = COPY_VECTOR_BYTES / F32_BYTES;

/// Every number the SIMT template prints.
#[derive(Clone, Debug, Serialize)]
pub struct SimtPlan {
    pub threads: u32,
    /// `.maxnreg` for blocks of fewer than eight warps: for those, ptxas otherwise aims at an
    /// occupancy its register cap cannot keep and spills (seen at 32, 64 and 128 threads). Larger
    /// blocks keep ptxas's own choice, which measured faster (128 instead of 138 registers
    /// for 128x128x8: two blocks per SM instead of one).
    pub max_registers: Option<u32>,
    pub element_bytes: u32,
    pub vector_bytes: u32,
    pub block_m: u32,
    pub block_n: u32,
    pub block_k: u32,
    pub smem: SmemLayout,
    pub copy: PlanCopy,
    /// `cp.async` cache qualifier (`cg` or `ca`); empty for `copy: sync`.
    pub cache_hint: &'static str,
    pub a_copy: OperandCopy,
    pub b_copy: OperandCopy,
    /// Bytes the A pointers advance per k tile (B advances `BK` rows, a runtime stride).
    pub a_tile_step_bytes: u32,
    pub b_tile_rows: u32,
    /// Added to K before dividing by BK: a partial last k tile counts.
    pub k_round_up: u32,
    /// Registers that stage one tile in flight for `copy: sync`.
    pub staging_registers: u32,
    /// The product of a strided batch the block computes, and its operands' strides.
    pub batch: BatchPlan,
    /// The math and the epilogue are large; the PTX writer hands them to the templates on
    /// their own so that partials called per copy don't carry (and clone) them.
    #[serde(skip)]
    pub consumer: Consumer,
    #[serde(skip)]
    pub epilogue: Epilogue,
}

/// How one operand's tile is copied: thread `t` starts at row `t / vectors_per_row`, vector
/// `t % vectors_per_row`; its `i`-th copy sits at a fixed offset from there.
#[derive(Clone, Debug, Serialize)]
pub struct OperandCopy {
    pub vectors_per_row: u32,
    /// Row bytes in shared memory (global row + padding).
    pub smem_row_bytes: u32,
    /// Offset of this operand inside a stage.
    pub smem_stage_offset: u32,
    pub copies: Vec<CopyOp>,
}

#[derive(Clone, Debug, Serialize)]
pub struct CopyOp {
    /// Rows below the thread's first row (scaled by the runtime leading dimension).
    pub global_rows: u32,
    /// Bytes right of the thread's first vector.
    pub global_col_bytes: u32,
    /// Offset in the stage from the thread's first shared-memory vector.
    pub smem_offset: u32,
    /// The four staging registers of `copy: sync`, e.g. `%stage0, %stage1, %stage2, %stage3`.
    pub staging: String,
    /// The same registers word by word, for a chunk that crosses the matrix's edge.
    pub words: Vec<ChunkWord>,
}

/// The FFMA inner loop over one k tile.
#[derive(Clone, Debug, Serialize)]
pub struct Consumer {
    pub warp_cols: u32,
    pub lane_cols: u32,
    /// Columns per lane column group (one 16-byte vector).
    pub column_group: u32,
    pub warp_tile_m: u32,
    pub warp_tile_n: u32,
    pub thread_tile_m: u32,
    pub thread_tile_n: u32,
    /// Shared-memory byte offsets of a thread's first A row and B column group.
    pub a_warp_row_bytes: u32,
    pub a_lane_row_bytes: u32,
    pub b_warp_col_bytes: u32,
    pub b_lane_col_bytes: u32,
    pub accumulators: u32,
    pub a_fragment_registers: u32,
    pub b_fragment_registers: u32,
    pub k_groups: Vec<KGroup>,
    /// The FFMAs of the i-th k step of every group (registers repeat from group to group).
    /// Rendered on their own by the PTX writer, so not part of the template context.
    #[serde(skip)]
    pub fma_blocks: Vec<FmaBlock>,
}

/// Four consecutive k: one A vector per thread row, then four k steps of B reads, each
/// followed by the FFMA block of its position in the group.
#[derive(Clone, Debug, Serialize)]
pub struct KGroup {
    pub a_loads: Vec<VectorLoad>,
    pub k_steps: Vec<KStep>,
}

#[derive(Clone, Debug, Serialize)]
pub struct KStep {
    pub b_loads: Vec<VectorLoad>,
}

#[derive(Clone, Debug, Serialize)]
pub struct FmaBlock {
    pub fmas: Vec<Fma>,
}

#[derive(Clone, Debug, Serialize)]
pub struct VectorLoad {
    /// Four destination registers, comma-separated.
    pub registers: String,
    pub offset: u32,
}

/// `%acc{acc} = %fa{a} * %fb{b} + %acc{acc}`: register indices.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Fma {
    pub acc: u32,
    pub a: u32,
    pub b: u32,
}

/// Accumulators to global memory, 16 bytes per store.
#[derive(Clone, Debug, Serialize)]
pub struct Epilogue {
    pub rows: Vec<EpilogueRow>,
}

#[derive(Clone, Debug, Serialize)]
pub struct EpilogueRow {
    /// Rows below the thread's first.
    pub row: u32,
    pub stores: Vec<EpilogueStore>,
}

/// Four accumulators stored as one vector `offset` bytes right of the thread's first column;
/// an edge block stores them one by one where the vector's `last_byte` lies past N.
#[derive(Clone, Debug, Serialize)]
pub struct EpilogueStore {
    pub registers: String,
    pub offset: u32,
    pub last_byte: u32,
    pub elements: Vec<ElementStore>,
}

fn vector_registers(prefix: &str, first: u32) -> Vec<String> {
    (first..first + 4)
        .map(|i| format!("%{prefix}{i}"))
        .collect()
}

fn vector(prefix: &str, first: u32) -> String {
    vector_registers(prefix, first).join(", ")
}

fn operand_copy(
    geometry: &CopyGeometry,
    threads: u32,
    smem_row_bytes: u32,
    smem_stage_offset: u32,
    first_staging_vector: u32,
) -> OperandCopy {
    let copies = (0..geometry.copies_per_thread)
        .map(|i| {
            // Thread t's i-th vector is t + i·threads; see CopyGeometry::new for why the
            // offset from vector t is the same for every thread.
            let vector_offset = i * threads;
            let rows = vector_offset / geometry.vectors_per_row;
            let cols = vector_offset % geometry.vectors_per_row;
            CopyOp {
                global_rows: rows,
                global_col_bytes: cols * COPY_VECTOR_BYTES,
                smem_offset: rows * smem_row_bytes + cols * COPY_VECTOR_BYTES,
                staging: vector("stage", 4 * (first_staging_vector + i)),
                words: chunk_words(
                    &vector_registers("stage", 4 * (first_staging_vector + i)),
                    F32_BYTES,
                ),
            }
        })
        .collect();
    OperandCopy {
        vectors_per_row: geometry.vectors_per_row,
        smem_row_bytes,
        smem_stage_offset,
        copies,
    }
}

pub fn plan(valid: &ValidSpec, g: &SimtGeometry) -> SimtPlan {
    let spec = &valid.spec;
    let tile = spec.tile;
    let pad = spec.swizzle.pad_bytes();
    let a_row_bytes = tile.k * F32_BYTES + pad;
    let b_row_bytes = tile.n * F32_BYTES + pad;
    let a_tile_bytes = tile.m * a_row_bytes;
    let smem = SmemLayout::new(valid.smem.bytes_per_stage(), spec.stages);

    let a_copy = operand_copy(&g.a_copy, g.threads, a_row_bytes, 0, 0);
    let b_copy = operand_copy(
        &g.b_copy,
        g.threads,
        b_row_bytes,
        a_tile_bytes,
        g.a_copy.copies_per_thread,
    );
    let (copy, cache_hint) = PlanCopy::of(spec.copy);

    let tm = g.thread_tile_m;
    let tn = g.thread_tile_n;
    let column_groups = tn / SIMT_COLUMN_GROUP;
    // Lane column groups are 4 floats wide and interleave across the 8 lane columns.
    let column_group_stride_bytes = SIMT_LANE_COLS * SIMT_COLUMN_GROUP * F32_BYTES;
    let k_groups = (0..tile.k / K_PER_A_VECTOR)
        .map(|group| KGroup {
            a_loads: (0..tm)
                .map(|i| VectorLoad {
                    registers: vector("fa", 4 * i),
                    offset: i * a_row_bytes + group * COPY_VECTOR_BYTES,
                })
                .collect(),
            k_steps: (0..K_PER_A_VECTOR)
                .map(|kk| {
                    let k = group * K_PER_A_VECTOR + kk;
                    KStep {
                        b_loads: (0..column_groups)
                            .map(|j| VectorLoad {
                                registers: vector("fb", kk * tn + 4 * j),
                                offset: k * b_row_bytes + j * column_group_stride_bytes,
                            })
                            .collect(),
                    }
                })
                .collect(),
        })
        .collect();
    // The FFMAs of k step kk read the same registers in every group: one block per kk.
    let fma_blocks = (0..K_PER_A_VECTOR)
        .map(|kk| {
            // Separate B registers per k step let ptxas overlap reads and FFMAs.
            let b_first = kk * tn;
            FmaBlock {
                fmas: (0..tm)
                    .flat_map(|i| (0..tn).map(move |n| (i, n)))
                    .map(|(i, n)| Fma {
                        acc: i * tn + n,
                        a: 4 * i + kk,
                        b: b_first + n,
                    })
                    .collect(),
            }
        })
        .collect();

    let consumer = Consumer {
        warp_cols: g.warps.cols,
        lane_cols: SIMT_LANE_COLS,
        column_group: SIMT_COLUMN_GROUP,
        warp_tile_m: g.warp_tile_m,
        warp_tile_n: g.warp_tile_n,
        thread_tile_m: tm,
        thread_tile_n: tn,
        a_warp_row_bytes: g.warp_tile_m * a_row_bytes,
        a_lane_row_bytes: tm * a_row_bytes,
        b_warp_col_bytes: g.warp_tile_n * F32_BYTES,
        b_lane_col_bytes: SIMT_COLUMN_GROUP * F32_BYTES,
        accumulators: tm * tn,
        a_fragment_registers: tm * K_PER_A_VECTOR,
        b_fragment_registers: K_PER_A_VECTOR * tn,
        k_groups,
        fma_blocks,
    };
    let epilogue = Epilogue {
        rows: (0..tm)
            .map(|i| EpilogueRow {
                row: i,
                stores: (0..column_groups)
                    .map(|j| {
                        let offset = j * column_group_stride_bytes;
                        let first = i * tn + 4 * j;
                        EpilogueStore {
                            registers: vector("acc", first),
                            offset,
                            last_byte: last_byte(offset, COPY_VECTOR_BYTES),
                            elements: (0..4)
                                .map(|e| ElementStore {
                                    offset: offset + e * F32_BYTES,
                                    register: format!("%acc{}", first + e),
                                })
                                .collect(),
                        }
                    })
                    .collect(),
            })
            .collect(),
    };
    debug_assert_eq!(SIMT_LANE_ROWS * SIMT_LANE_COLS, 32);

    SimtPlan {
        threads: g.threads,
        max_registers: (g.threads < SMALL_BLOCK_THREADS).then_some(valid.registers.limit),
        element_bytes: F32_BYTES,
        vector_bytes: COPY_VECTOR_BYTES,
        block_m: tile.m,
        block_n: tile.n,
        block_k: tile.k,
        smem,
        copy,
        cache_hint,
        a_tile_step_bytes: tile.k * F32_BYTES,
        b_tile_rows: tile.k,
        k_round_up: tile.k - 1,
        staging_registers: 4 * (g.a_copy.copies_per_thread + g.b_copy.copies_per_thread),
        batch: BatchPlan::new(spec.schedule, F32_BYTES, F32_BYTES),
        a_copy,
        b_copy,
        consumer,
        epilogue,
    }
}

/// The SIMT kernel's SASS: its copy path, FFMA, and LDS for the shared-memory reads.
pub fn sass_promises(spec: &GemmSpec) -> Vec<SassCheck> {
    let mut checks = PlanCopy::of(spec.copy).0.sass_promises().to_vec();
    checks.extend(math_promises());
    checks.push(SassCheck::Present(Opcode::Lds));
    checks
}

pub fn math_promises() -> Vec<SassCheck> {
    vec![SassCheck::Present(Opcode::Ffma)]
}

impl SimtPlan {
    pub fn launch_contract(&self) -> LaunchContract {
        LaunchContract {
            tile_k: self.block_k,
            operand_align_bytes: self.vector_bytes,
            params: GEMM_PARAMS.to_vec(),
            partial_tiles: true,
            cluster: (1, 1),
        }
    }

    /// Bank-conflict degree of the warp's shared-memory accesses (warp 0, first of each kind).
    pub fn bank_conflicts(&self) -> Vec<BankReport> {
        let lanes = 0..32u32;
        let c = &self.consumer;
        let a_read: Vec<u32> = lanes
            .clone()
            .map(|lane| (lane / c.lane_cols) * c.a_lane_row_bytes)
            .collect();
        let b_read: Vec<u32> = lanes
            .clone()
            .map(|lane| (lane % c.lane_cols) * c.b_lane_col_bytes)
            .collect();
        let copy_write = |copy: &OperandCopy| -> Vec<u32> {
            lanes
                .clone()
                .map(|t| {
                    (t / copy.vectors_per_row) * copy.smem_row_bytes
                        + (t % copy.vectors_per_row) * self.vector_bytes
                })
                .collect()
        };
        vec![
            BankReport {
                access: "A fragment read (ld.shared.v4)",
                degree: conflict_degree(&a_read),
            },
            BankReport {
                access: "B fragment read (ld.shared.v4)",
                degree: conflict_degree(&b_read),
            },
            BankReport {
                access: "A tile write (16-byte copies)",
                degree: conflict_degree(&copy_write(&self.a_copy)),
            },
            BankReport {
                access: "B tile write (16-byte copies)",
                degree: conflict_degree(&copy_write(&self.b_copy)),
            },
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn simt(text: &str) -> SimtPlan {
        let valid = gemm_dsl::check_str(text).unwrap();
        let gemm_dsl::Family::Simt(g) = valid.family else {
            panic!("{text} is not a SIMT spec");
        };
        plan(&valid, &g)
    }

    #[test]
    fn copy_offsets_cover_the_tile_once() {
        let p = simt("tile: 128x128x32, warps: 4x2, swizzle: pad(16)");
        // A: 128 rows x 8 vectors, 256 threads -> 4 copies 32 rows apart.
        assert_eq!(p.a_copy.vectors_per_row, 8);
        let rows: Vec<u32> = p.a_copy.copies.iter().map(|c| c.global_rows).collect();
        assert_eq!(rows, [0, 32, 64, 96]);
        assert_eq!(p.a_copy.copies[1].smem_offset, 32 * (128 + 16));
        // B: 32 rows x 32 vectors -> 4 copies 8 rows apart, after the A tile.
        assert_eq!(p.b_copy.smem_stage_offset, 128 * 144);
        assert_eq!(p.b_copy.copies[3].global_rows, 24);
    }

    #[test]
    fn copies_within_a_row_when_the_row_is_wider_than_the_block() {
        // 128 vectors per row, 64 threads: copies 0 and 1 sit side by side in one row.
        let geometry = CopyGeometry::new(2, 128 * COPY_VECTOR_BYTES, 64).unwrap();
        let copy = operand_copy(&geometry, 64, 2048, 0, 0);
        assert_eq!(copy.copies.len(), 4);
        assert_eq!(copy.copies[1].global_rows, 0);
        assert_eq!(copy.copies[1].global_col_bytes, 64 * 16);
        assert_eq!(copy.copies[2].global_rows, 1);
        assert_eq!(copy.copies[2].smem_offset, 2048);
    }

    #[test]
    fn bank_conflict_degrees() {
        // Broadcast and consecutive 16-byte vectors: conflict-free.
        assert_eq!(conflict_degree(&[0; 8]), 1);
        assert_eq!(
            conflict_degree(&(0..8).map(|i| i * 16).collect::<Vec<_>>()),
            1
        );
        // Eight distinct rows of 128 bytes: all in the same four banks.
        assert_eq!(
            conflict_degree(&(0..8).map(|i| i * 128).collect::<Vec<_>>()),
            8
        );
        let reads = simt("tile: 128x128x8").bank_conflicts();
        assert!(reads.iter().all(|r| r.degree == 1), "{reads:?}");
        // Padding A rows of 32 bytes by 16 makes the copy writes of one phase collide.
        let padded = simt("tile: 128x128x8, swizzle: pad(16)").bank_conflicts();
        assert_eq!(padded[0].degree, 1);
        assert_eq!(padded[2].degree, 2);
    }

    #[test]
    fn inner_loop_shape() {
        let p = simt("tile: 128x128x8");
        let c = &p.consumer;
        assert_eq!((c.thread_tile_m, c.thread_tile_n), (8, 8));
        assert_eq!(c.k_groups.len(), 2);
        let step = &c.k_groups[1].k_steps[3];
        assert_eq!(step.b_loads[1].offset, 7 * 512 + 128);
        let block = &c.fma_blocks[3];
        assert_eq!(block.fmas.len(), 64);
        assert_eq!(
            block.fmas[9],
            Fma {
                acc: 9,
                a: 7,
                b: 25
            }
        );
    }
}
