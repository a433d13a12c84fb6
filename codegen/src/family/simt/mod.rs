//! Plan of the SIMT family (`mma: fma`): warp-tiled FFMA over f32.
//!
//! Shared memory holds, per stage, A and B as they lie in global memory ([`StoredTile`]), so
//! that 16-byte `cp.async` copies along each operand's contiguous dimension land whole: a
//! row-major A as `BM` rows of `BK`, a column-major A as `BK` lines of `BM`, a row-major B as
//! `BK` rows of `BN`, a column-major B in column quarters (see below). Lines are padded by
//! `pad(N)`.
//!
//! A warp's lanes form a 4 x 8 grid; lane (r, c) owns accumulator rows
//! `warp_m·WTM + r·TM + i` and column groups `warp_n·WTN + 4c + 32j`. The 8 lanes of a 128-bit
//! read phase share a lane row, so A reads broadcast; B reads of the 8 lane columns must hit
//! 8 different 16-byte bank groups.
//! - Row-major A: per group of four k, one 16-byte vector (4 k) per thread row.
//! - Column-major A: per k, the thread's TM consecutive rows as vectors of 4 (or 2, or 1).
//! - Row-major B: per k, the thread's TN columns as TN/4 vectors, 128 consecutive bytes per
//!   phase.
//! - Column-major B: per group of four k, one vector (4 k) per thread column. A column-major
//!   B tile holds, per group of four k, a group row of four quarters; the 16-byte chunk of
//!   column `n` sits at chunk `n / 4` of quarter `n % 4`, so the lane columns, whose columns
//!   lie 4 apart, read 8 consecutive chunks: conflict-free.

mod explain;
mod probe;
pub mod write;

use crate::plan::batch::BatchPlan;
use crate::plan::copy::{copy_ops, CopyOp};
use crate::plan::edges::{c_global_store, c_store_bytes, last_byte, CopyVector};
use crate::plan::epilogue::{AccElement, FusedEpilogue};
use crate::plan::pipeline::CopyPipeline;
use crate::plan::store::{rows_with_steps, ElementStore, EpilogueRow, VectorStore};
use crate::plan::{conflict_degree, conflict_degree_for, BankReport, LaunchContract, Ring};
use gemm_dsl::abi::{epilogue_params, KernelParam, Opcode, SassCheck, GEMM_PARAMS};
use gemm_dsl::family::simt::{
    SimtGeometry, SIMT_B_QUARTERS, SIMT_COLUMN_GROUP, SIMT_LANE_COLS, SIMT_LANE_ROWS,
};
use gemm_dsl::geometry::{CopyGeometry, StoredTile, COPY_VECTOR_BYTES};
use gemm_dsl::ValidSpec;
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
    /// The validated geometry the plan was made from (for `explain`; templates never read it).
    #[serde(skip)]
    pub geometry: SimtGeometry,
    pub threads: u32,
    /// `.maxnreg` for blocks of fewer than eight warps: for those, ptxas otherwise aims at an
    /// occupancy its register cap cannot keep and spills (seen at 32, 64 and 128 threads). Larger
    /// blocks keep ptxas's own choice, which measured faster (128 instead of 138 registers
    /// for 128x128x8: two blocks per SM instead of one).
    pub max_registers: Option<u32>,
    pub element_bytes: u32,
    /// Bytes of one operand copy: 16, or the spec's narrower `vector`.
    pub vector_bytes: u32,
    /// Bytes of one C store: four accumulators (16 bytes), or as many as the spec's
    /// narrower copy vector holds, so C's rows need only the vector's alignment.
    pub c_store_bytes: u32,
    pub block_m: u32,
    pub block_n: u32,
    pub block_k: u32,
    /// How A and B lie in memory, for the kernel's header comment (`all row-major` for rr).
    pub layout_note: &'static str,
    /// The ring, copy path and vector, and each operand's copies (flattened: templates read
    /// `p.smem`, `p.a_src`, ..).
    #[serde(flatten)]
    pub pipeline: CopyPipeline<OperandCopy>,
    /// The product of a strided batch the block computes, and its operands' strides.
    pub batch: BatchPlan,
    /// The math and the epilogue are large; the PTX writer hands them to the templates on
    /// their own so that partials called per copy don't carry (and clone) them.
    #[serde(skip)]
    pub consumer: Consumer,
    #[serde(skip)]
    pub epilogue: Epilogue,
    /// `scale`, `bias`, `activation`: the math on the accumulators, row by row before each
    /// row's stores.
    pub fused: Option<FusedEpilogue>,
    #[serde(skip)]
    pub epilogue_params: Vec<KernelParam>,
}

/// How one operand's tile is copied: thread `t` starts at line `t / vectors_per_row`, vector
/// `t % vectors_per_row`; its `i`-th copy sits at a fixed offset from there.
#[derive(Clone, Debug, Serialize)]
pub struct OperandCopy {
    pub vectors_per_row: u32,
    /// Line bytes in shared memory (global line + padding) of a plain tile.
    pub smem_row_bytes: u32,
    /// A column-major B tile's column quarters, in place of plain lines.
    pub quarters: Option<Quarters>,
    /// Offset of this operand inside a stage.
    pub smem_stage_offset: u32,
    pub copies: Vec<CopyOp>,
}

/// Column quarters: chunk `g` (k group) of column `n` sits at byte
/// `g·group_bytes + (n % 4)·quarter_bytes + (n / 4)·16`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Quarters {
    pub quarter_bytes: u32,
    pub group_bytes: u32,
    /// Copy vectors are narrower than a chunk: each lands at its byte offset inside it.
    pub vectors_in_chunk: bool,
}

impl OperandCopy {
    /// Tile-relative byte offset of 16-byte chunk `chunk` of stored line `line`.
    pub fn chunk_offset(&self, line: u32, chunk: u32) -> u32 {
        match self.quarters {
            None => line * self.smem_row_bytes + chunk * COPY_VECTOR_BYTES,
            Some(q) => {
                chunk * q.group_bytes
                    + (line % SIMT_B_QUARTERS) * q.quarter_bytes
                    + (line / SIMT_B_QUARTERS) * COPY_VECTOR_BYTES
            }
        }
    }

    /// Tile-relative byte offset of byte `byte` of stored line `line`: a vector narrower
    /// than a chunk keeps its place inside the chunk.
    pub fn byte_offset(&self, line: u32, byte: u32) -> u32 {
        self.chunk_offset(line, byte / COPY_VECTOR_BYTES) + byte % COPY_VECTOR_BYTES
    }
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

/// Four consecutive k: the loads of the group's vectors along K (a row-major A's, a
/// column-major B's), then four k steps of loads of one k (a column-major A's, a row-major
/// B's), each followed by the FFMA block of its position in the group.
#[derive(Clone, Debug, Serialize)]
pub struct KGroup {
    pub a_loads: Vec<VectorLoad>,
    pub b_loads: Vec<VectorLoad>,
    pub k_steps: Vec<KStep>,
}

#[derive(Clone, Debug, Serialize)]
pub struct KStep {
    pub a_loads: Vec<VectorLoad>,
    pub b_loads: Vec<VectorLoad>,
}

#[derive(Clone, Debug, Serialize)]
pub struct FmaBlock {
    pub fmas: Vec<Fma>,
}

#[derive(Clone, Debug, Serialize)]
pub struct VectorLoad {
    /// `.v4`, `.v2`, or empty for one register.
    pub vector: &'static str,
    /// The destination registers, comma-separated.
    pub registers: String,
    pub offset: u32,
}

impl VectorLoad {
    fn v4(registers: String, offset: u32) -> VectorLoad {
        VectorLoad {
            vector: ".v4",
            registers,
            offset,
        }
    }
}

/// `%acc{acc} = %fa{a} * %fb{b} + %acc{acc}`: register indices.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Fma {
    pub acc: u32,
    pub a: u32,
    pub b: u32,
}

/// Accumulators to global memory, `c_store_bytes` per store: each 16-byte group of four
/// columns is one store, or several where the copy vector is narrower.
#[derive(Clone, Debug, Serialize)]
pub struct Epilogue {
    /// The `st.global` of one store, e.g. `st.global.v4.f32`.
    pub store: String,
    /// Lane row i's accumulators, one row below the other.
    pub rows: Vec<EpilogueRow<VectorStore>>,
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
    vector: &CopyVector,
    threads: u32,
    smem_row_bytes: u32,
    quarters: Option<Quarters>,
    smem_stage_offset: u32,
    first_staging_vector: u32,
) -> OperandCopy {
    let copy = OperandCopy {
        vectors_per_row: geometry.vectors_per_row,
        smem_row_bytes,
        quarters,
        smem_stage_offset,
        copies: Vec::new(),
    };
    let (vpr, vb) = (geometry.vectors_per_row, geometry.vector_bytes);
    // One base register per operand: every copy is one offset from the thread's first (for
    // column quarters, the validation keeps the line step a multiple of 4; a narrow vector
    // keeps its byte within the chunk, since threads·vector bytes is a multiple of 16).
    let place = |i: u32, rows: u32, col_bytes: u32| {
        let smem_offset = copy.byte_offset(rows, col_bytes) - copy.byte_offset(0, 0);
        assert!(
            (0..threads).all(|t| {
                let (line, at) = (t / vpr, t % vpr);
                copy.byte_offset(line + rows, at * vb + col_bytes)
                    == copy.byte_offset(line, at * vb) + smem_offset
            }),
            "copy {i}: shared-memory destinations are not one offset from the first"
        );
        (0, smem_offset)
    };
    let copies = copy_ops(
        geometry,
        vector,
        F32_BYTES,
        threads,
        first_staging_vector,
        place,
    );
    OperandCopy { copies, ..copy }
}

pub fn plan(valid: &ValidSpec, g: &SimtGeometry) -> SimtPlan {
    let spec = &valid.spec;
    let tile = spec.tile;
    let pad = spec.swizzle.pad_bytes();
    let (a_stored, b_stored) = StoredTile::of(tile, spec.layout);
    let a_row_bytes = a_stored.line_elements * F32_BYTES + pad;
    let b_row_bytes = b_stored.line_elements * F32_BYTES + pad;
    let a_tile_bytes = a_stored.lines * a_row_bytes;
    let smem = Ring::cp_async(valid.smem.bytes_per_stage(), spec.stages);
    let a_row_major = !a_stored.lines_are_k;
    let b_row_major = b_stored.lines_are_k;
    // Column quarters of BN / 4 chunks each, padded by pad(N).
    let copy_vector = CopyVector::new(g.a_copy.vector_bytes, "f32");
    let b_quarters = (!b_row_major).then(|| {
        let quarter_bytes = tile.n / SIMT_B_QUARTERS * COPY_VECTOR_BYTES + pad;
        Quarters {
            quarter_bytes,
            group_bytes: SIMT_B_QUARTERS * quarter_bytes,
            vectors_in_chunk: g.b_copy.vector_bytes < COPY_VECTOR_BYTES,
        }
    });

    let a_copy = operand_copy(&g.a_copy, &copy_vector, g.threads, a_row_bytes, None, 0, 0);
    let b_copy = operand_copy(
        &g.b_copy,
        &copy_vector,
        g.threads,
        b_row_bytes,
        b_quarters,
        a_tile_bytes,
        g.a_copy.copies_per_thread,
    );

    let tm = g.thread_tile_m;
    let tn = g.thread_tile_n;
    let column_groups = tn / SIMT_COLUMN_GROUP;
    // Lane column groups are 4 floats wide and interleave across the 8 lane columns.
    let column_group_stride_bytes = SIMT_LANE_COLS * SIMT_COLUMN_GROUP * F32_BYTES;
    // A column-major A's rows are read along M: the widest vector that divides TM.
    let a_width = [4, 2, 1]
        .into_iter()
        .find(|w| tm.is_multiple_of(*w))
        .unwrap_or(1);
    let a_vector = match a_width {
        4 => ".v4",
        2 => ".v2",
        _ => "",
    };
    // The register of A row i at k step kk of a group, and of B column n.
    let a_register = |i: u32, kk: u32| if a_row_major { 4 * i + kk } else { kk * tm + i };
    let b_register = |n: u32, kk: u32| if b_row_major { kk * tn + n } else { 4 * n + kk };
    // Column n = 4j + e of the thread in a column-quarter tile: chunk `group` of quarter e,
    // 8j chunks in.
    let quarter_offset = |q: &Quarters, group: u32, n: u32| {
        let (j, e) = (n / SIMT_COLUMN_GROUP, n % SIMT_COLUMN_GROUP);
        group * q.group_bytes + e * q.quarter_bytes + j * SIMT_LANE_COLS * COPY_VECTOR_BYTES
    };
    let k_groups = (0..tile.k / K_PER_A_VECTOR)
        .map(|group| {
            let a_loads = if a_row_major {
                (0..tm)
                    .map(|i| {
                        VectorLoad::v4(
                            vector("fa", 4 * i),
                            i * a_row_bytes + group * COPY_VECTOR_BYTES,
                        )
                    })
                    .collect()
            } else {
                Vec::new()
            };
            // A column-major B: one vector of the group's 4 k per thread column. (Read one k at
            // a time, ptxas merges the four loads of a chunk back into one LDS.128.)
            let b_loads = match &b_quarters {
                Some(q) => (0..tn)
                    .map(|n| VectorLoad::v4(vector("fb", 4 * n), quarter_offset(q, group, n)))
                    .collect(),
                None => Vec::new(),
            };
            let k_steps = (0..K_PER_A_VECTOR)
                .map(|kk| {
                    let k = group * K_PER_A_VECTOR + kk;
                    let a_loads = if a_row_major {
                        Vec::new()
                    } else {
                        (0..tm / a_width)
                            .map(|v| {
                                let first = a_register(v * a_width, kk);
                                VectorLoad {
                                    vector: a_vector,
                                    registers: (first..first + a_width)
                                        .map(|r| format!("%fa{r}"))
                                        .collect::<Vec<_>>()
                                        .join(", "),
                                    offset: k * a_row_bytes + v * a_width * F32_BYTES,
                                }
                            })
                            .collect()
                    };
                    let b_loads = if b_row_major {
                        (0..column_groups)
                            .map(|j| {
                                VectorLoad::v4(
                                    vector("fb", b_register(4 * j, kk)),
                                    k * b_row_bytes + j * column_group_stride_bytes,
                                )
                            })
                            .collect()
                    } else {
                        Vec::new()
                    };
                    KStep { a_loads, b_loads }
                })
                .collect();
            KGroup {
                a_loads,
                b_loads,
                k_steps,
            }
        })
        .collect();
    // The FFMAs of k step kk read the same registers in every group: one block per kk.
    let fma_blocks = (0..K_PER_A_VECTOR)
        .map(|kk| FmaBlock {
            fmas: (0..tm)
                .flat_map(|i| (0..tn).map(move |n| (i, n)))
                .map(|(i, n)| Fma {
                    acc: i * tn + n,
                    a: a_register(i, kk),
                    b: b_register(n, kk),
                })
                .collect(),
        })
        .collect();
    // A thread's first A row and B column group: along lines or along a line.
    let (a_warp_row_bytes, a_lane_row_bytes) = if a_row_major {
        (g.warp_tile_m * a_row_bytes, tm * a_row_bytes)
    } else {
        (g.warp_tile_m * F32_BYTES, tm * F32_BYTES)
    };

    let consumer = Consumer {
        warp_cols: g.warps.cols,
        lane_cols: SIMT_LANE_COLS,
        column_group: SIMT_COLUMN_GROUP,
        warp_tile_m: g.warp_tile_m,
        warp_tile_n: g.warp_tile_n,
        thread_tile_m: tm,
        thread_tile_n: tn,
        a_warp_row_bytes,
        a_lane_row_bytes,
        // Column quarters put columns 4 apart 16 bytes apart: the same byte offsets as the
        // 4-column groups of a row-major B row.
        b_warp_col_bytes: g.warp_tile_n * F32_BYTES,
        b_lane_col_bytes: SIMT_COLUMN_GROUP * F32_BYTES,
        accumulators: tm * tn,
        a_fragment_registers: tm * K_PER_A_VECTOR,
        b_fragment_registers: K_PER_A_VECTOR * tn,
        k_groups,
        fma_blocks,
    };
    // C's stores are no wider than the copy vector, so C's rows need only its alignment
    // (the launch checks ldc against `c_store_bytes`): a group of four columns takes one
    // 16-byte store, or 16 / c_store_bytes narrower ones.
    let c_store_bytes = c_store_bytes(copy_vector.bytes, F32_BYTES);
    let per_store = c_store_bytes / F32_BYTES;
    let epilogue = Epilogue {
        store: c_global_store(c_store_bytes, "f32"),
        rows: rows_with_steps(
            (0..tm).map(|i| {
                let stores = (0..column_groups)
                    .flat_map(|j| (0..COPY_VECTOR_BYTES / c_store_bytes).map(move |v| (j, v)))
                    .map(|(j, v)| {
                        let offset = j * column_group_stride_bytes + v * c_store_bytes;
                        let first = i * tn + 4 * j + v * per_store;
                        let registers: Vec<String> = (first..first + per_store)
                            .map(|r| format!("%acc{r}"))
                            .collect();
                        VectorStore {
                            operand: copy_vector.operand(&registers),
                            offset,
                            last_byte: last_byte(offset, c_store_bytes),
                            elements: if per_store > 1 {
                                (0..per_store)
                                    .map(|e| ElementStore {
                                        offset: offset + e * F32_BYTES,
                                        register: registers[e as usize].clone(),
                                    })
                                    .collect()
                            } else {
                                Vec::new()
                            },
                        }
                    })
                    .collect();
                (i, stores)
            }),
            F32_BYTES,
        ),
    };
    debug_assert_eq!(SIMT_LANE_ROWS * SIMT_LANE_COLS, 32);
    // Row i's accumulators: column group j's four columns, column_group_stride_bytes apart.
    let fused_rows: Vec<Vec<AccElement>> = (0..tm)
        .map(|i| {
            (0..column_groups)
                .flat_map(|j| (0..SIMT_COLUMN_GROUP).map(move |e| (j, e)))
                .map(|(j, e)| AccElement {
                    acc: i * tn + SIMT_COLUMN_GROUP * j + e,
                    row: i,
                    col: j * column_group_stride_bytes / F32_BYTES + e,
                })
                .collect()
        })
        .collect();
    let fused = FusedEpilogue::of(spec, &fused_rows, c_store_bytes);

    let batch = BatchPlan::new(spec.schedule, F32_BYTES, F32_BYTES);
    SimtPlan {
        geometry: *g,
        threads: g.threads,
        max_registers: (g.threads < SMALL_BLOCK_THREADS).then_some(valid.registers.limit),
        element_bytes: F32_BYTES,
        vector_bytes: copy_vector.bytes,
        c_store_bytes,
        block_m: tile.m,
        block_n: tile.n,
        block_k: tile.k,
        layout_note: crate::plan::layout_note(spec.layout),
        pipeline: CopyPipeline::new(
            spec,
            (g.copy, copy_vector),
            smem,
            (a_stored, b_stored),
            (a_copy, b_copy),
            g.a_copy.copies_per_thread + g.b_copy.copies_per_thread,
            &batch,
        ),
        batch,
        consumer,
        epilogue,
        fused,
        epilogue_params: epilogue_params(spec.scale, spec.bias, spec.aux),
    }
}

/// The SIMT kernel's SASS: its copy path, FFMA, and LDS for the shared-memory reads.
pub fn sass_promises(p: &SimtPlan) -> Vec<SassCheck> {
    let mut checks = p.pipeline.copy.sass_promises().to_vec();
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
            output_align_bytes: self.c_store_bytes,
            params: [GEMM_PARAMS, &self.epilogue_params].concat(),
            partial_tiles: true,
            cluster: (1, 1),
            workspace_bytes_per_block: 0,
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
        let vb = self.vector_bytes;
        let copy_write = |copy: &OperandCopy| -> u32 {
            let addresses: Vec<u32> = lanes
                .clone()
                .map(|t| {
                    copy.byte_offset(t / copy.vectors_per_row, (t % copy.vectors_per_row) * vb)
                })
                .collect();
            conflict_degree_for(&addresses, vb)
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
                access: copy_write_label('A', vb),
                degree: copy_write(&self.pipeline.a_src.copy),
            },
            BankReport {
                access: copy_write_label('B', vb),
                degree: copy_write(&self.pipeline.b_src.copy),
            },
        ]
    }
}

/// The bank report's name for an operand's copy writes of `vector_bytes`.
pub fn copy_write_label(operand: char, vector_bytes: u32) -> &'static str {
    match (operand, vector_bytes) {
        ('A', 16) => "A tile write (16-byte copies)",
        ('A', 8) => "A tile write (8-byte copies)",
        ('A', 4) => "A tile write (4-byte copies)",
        ('A', _) => "A tile write (2-byte copies)",
        (_, 16) => "B tile write (16-byte copies)",
        (_, 8) => "B tile write (8-byte copies)",
        (_, 4) => "B tile write (4-byte copies)",
        _ => "B tile write (2-byte copies)",
    }
}

#[cfg(test)]
mod tests;
