//! Fragments: how each warp reads A and B from shared memory per k step (ldmatrix,
//! ldmatrix.trans or 32-bit loads), the registers they land in, and the warp tile's mma.sync
//! instructions.

use super::{base_slot, must_decompose, registers, K_STEP_BYTES};
use crate::plan::conflict_degree;
use crate::plan::flags::{flags, TemplateEnum};
use crate::plan::swizzle::{SmemSwizzle, XorOffset};
use gemm_dsl::family::mma_sync::MmaSyncGeometry;
use gemm_dsl::geometry::{StoredTile, COPY_VECTOR_BYTES};
use gemm_dsl::{DType, GemmSpec, Layout};
use serde::Serialize;

/// How one operand's fragments are read from shared memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadKind {
    /// `ldmatrix.x4` over lines along M or N, 16-byte chunks along K: row-major A,
    /// column-major B.
    Ldmatrix,
    /// `ldmatrix.x4.trans` over lines along K (16-bit types): column-major A, row-major B.
    LdmatrixTrans,
    /// `ld.shared.b32` per register over lines along K (tf32, which no 32-bit
    /// `ldmatrix.trans` exists for).
    Scalar,
}

impl TemplateEnum for ReadKind {
    const ALL: &'static [Self] = &[
        ReadKind::Ldmatrix,
        ReadKind::LdmatrixTrans,
        ReadKind::Scalar,
    ];
    fn name(self) -> &'static str {
        match self {
            ReadKind::Ldmatrix => "ldmatrix",
            ReadKind::LdmatrixTrans => "ldmatrix_trans",
            ReadKind::Scalar => "scalar",
        }
    }
}

impl ReadKind {
    /// The read of an operand whose stored lines run along K or not, for `dtype`.
    pub fn of(lines_are_k: bool, dtype: DType) -> ReadKind {
        match (lines_are_k, dtype) {
            (false, _) => ReadKind::Ldmatrix,
            (true, DType::Tf32 | DType::F32) => ReadKind::Scalar,
            (true, _) => ReadKind::LdmatrixTrans,
        }
    }

    pub fn instruction(self) -> &'static str {
        match self {
            ReadKind::Ldmatrix => "ldmatrix.sync.aligned.m8n8.x4.shared.b16",
            ReadKind::LdmatrixTrans => "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16",
            ReadKind::Scalar => "ld.shared.b32",
        }
    }

    /// Bytes one lane's address covers: a 16-byte matrix row, or one 32-bit word.
    pub fn access_bytes(self) -> u32 {
        match self {
            ReadKind::Ldmatrix | ReadKind::LdmatrixTrans => COPY_VECTOR_BYTES,
            ReadKind::Scalar => 4,
        }
    }
}

/// Where a warp's lanes read fragments from, in the operand's stored lines: the base offset
/// of lane `l` of warp `(warp_m, warp_n)` is the swizzled position of line
/// `warp_m·warp_m_rows + warp_n·warp_n_rows + (l & lane_row_mask)`, byte column
/// `warp_m·warp_m_bytes + warp_n·warp_n_bytes + (l >> lane_col_shift)·lane_col_bytes`.
#[derive(Clone, Debug, Serialize)]
pub struct FragmentReads {
    #[serde(serialize_with = "flags")]
    pub kind: ReadKind,
    pub instruction: &'static str,
    /// ldmatrix takes its registers in braces, `ld.shared.b32` one bare register.
    pub vector: bool,
    pub swizzle: SmemSwizzle,
    pub smem_tile_offset: u32,
    pub warp_m_rows: u32,
    pub warp_n_rows: u32,
    pub warp_m_bytes: u32,
    pub warp_n_bytes: u32,
    pub lane_row_mask: u32,
    pub lane_col_shift: u32,
    pub lane_col_bytes: u32,
    /// XOR constants of the per-thread base registers.
    pub bases: Vec<u32>,
}

impl FragmentReads {
    /// The (row, byte column) lane `lane` of warp `(warp_m, warp_n)` starts from.
    pub fn lane_position(&self, warp_m: u32, warp_n: u32, lane: u32) -> (u32, u32) {
        (
            warp_m * self.warp_m_rows + warp_n * self.warp_n_rows + (lane & self.lane_row_mask),
            warp_m * self.warp_m_bytes
                + warp_n * self.warp_n_bytes
                + (lane >> self.lane_col_shift) * self.lane_col_bytes,
        )
    }

    /// The reads of an operand of `kind` whose tile starts `smem_tile_offset` bytes into a
    /// stage, with warp `(warp_m, warp_n)` starting `warp_rows` lines and `warp_bytes` bytes
    /// into it.
    pub(super) fn new(
        kind: ReadKind,
        swizzle: SmemSwizzle,
        smem_tile_offset: u32,
        (warp_m_rows, warp_n_rows): (u32, u32),
        (warp_m_bytes, warp_n_bytes): (u32, u32),
    ) -> FragmentReads {
        // ldmatrix: lane l addresses line l % 16, chunk l / 16; ld.shared.b32: lane (g, t)
        // reads line t, word g.
        let (lane_row_mask, lane_col_shift, lane_col_bytes) = match kind {
            ReadKind::Ldmatrix | ReadKind::LdmatrixTrans => (15, 4, COPY_VECTOR_BYTES),
            ReadKind::Scalar => (3, 2, 4),
        };
        FragmentReads {
            kind,
            instruction: kind.instruction(),
            vector: kind != ReadKind::Scalar,
            swizzle,
            smem_tile_offset,
            warp_m_rows,
            warp_n_rows,
            warp_m_bytes,
            warp_n_bytes,
            lane_row_mask,
            lane_col_shift,
            lane_col_bytes,
            bases: Vec::new(),
        }
    }

    /// The tile-relative base offset, exactly as the kernel computes it.
    pub fn lane_base(&self, warp_m: u32, warp_n: u32, lane: u32) -> u32 {
        let (row, col) = self.lane_position(warp_m, warp_n, lane);
        self.swizzle.byte_offset(row, col)
    }
}

/// One fragment load: registers, base register index and immediate offset.
#[derive(Clone, Debug, Serialize)]
pub struct FragLoad {
    pub registers: String,
    pub base: usize,
    pub offset: u32,
}

/// `mma.sync` with accumulators `d` (also C), A registers `a` and B registers `b`.
#[derive(Clone, Debug, Serialize)]
pub struct MmaOp {
    pub d: String,
    pub a: String,
    pub b: String,
}

/// One k step: fragment loads, tf32 rounding, then the warp tile's mma instructions.
#[derive(Clone, Debug, Serialize)]
pub struct MmaKStep {
    pub a_loads: Vec<FragLoad>,
    pub b_loads: Vec<FragLoad>,
    /// Registers rounded to tf32 in place.
    pub rounds: Vec<String>,
    /// Written by the PTX writer itself (see `ptx::mma_block`), not through the templates.
    #[serde(skip)]
    pub mmas: Vec<MmaOp>,
}

/// Per-thread base offsets of a fragment-read pattern, for every thread of the block.
pub(super) fn read_bases(reads: &FragmentReads, g: &MmaSyncGeometry) -> Vec<u32> {
    (0..g.threads)
        .map(|t| {
            let warp = t / 32;
            reads.lane_base(warp / g.warps.cols, warp % g.warps.cols, t % 32)
        })
        .collect()
}

/// Decomposes one read whose lane `l` of warp `(wm, wn)` reads tile position `at(wm, wn, l)`
/// against the per-thread `base`, adding its XOR constant to `bases`.
pub(super) fn read_load(
    bases: &mut Vec<u32>,
    base: &[u32],
    g: &MmaSyncGeometry,
    registers: String,
    at: impl Fn(u32, u32, u32) -> u32,
) -> FragLoad {
    let target: Vec<u32> = (0..g.threads)
        .map(|t| {
            let warp = t / 32;
            at(warp / g.warps.cols, warp % g.warps.cols, t % 32)
        })
        .collect();
    let XorOffset { xor, offset } = must_decompose(base, &target, "fragment read");
    FragLoad {
        registers,
        base: base_slot(bases, xor),
        offset,
    }
}

/// How A and B fragments are read under the spec's layout and type.
pub fn read_kinds(spec: &GemmSpec) -> (ReadKind, ReadKind) {
    let (a, b) = StoredTile::of(spec.tile, spec.layout);
    (
        ReadKind::of(a.lines_are_k, spec.dtype),
        ReadKind::of(b.lines_are_k, spec.dtype),
    )
}

/// The kernel's comment on where the lanes' fragment reads start.
pub(super) fn fragment_note(
    a: &FragmentReads,
    b: &FragmentReads,
    layout: Layout,
    g: &MmaSyncGeometry,
) -> String {
    let lane = |r: &FragmentReads| {
        format!(
            "line (l & {}), byte column (l >> {})*{}",
            r.lane_row_mask, r.lane_col_shift, r.lane_col_bytes
        )
    };
    if layout == Layout::RowRow {
        return format!(
            "A lane l of warp (warp_m, warp_n) reads row warp_m*{} + (l & {}), 16-byte chunk l >> {};\n\t// B lane l reads k row l & {}, byte column warp_n*{} + (l >> {})*{}.",
            g.warp_tile_m,
            a.lane_row_mask,
            a.lane_col_shift,
            b.lane_row_mask,
            b.warp_n_bytes,
            b.lane_col_shift,
            b.lane_col_bytes
        );
    }
    let warp = |r: &FragmentReads| {
        format!(
            "lines warp_m*{} + warp_n*{}, bytes warp_m*{} + warp_n*{}",
            r.warp_m_rows, r.warp_n_rows, r.warp_m_bytes, r.warp_n_bytes
        )
    };
    format!(
        "A ({}) lane l of warp (warp_m, warp_n) reads {}, from {};\n\t// B ({}) lane l reads {}, from {}.",
        a.instruction,
        lane(a),
        warp(a),
        b.instruction,
        lane(b),
        warp(b)
    )
}

/// Conflict degree of the `ldmatrix` pattern alone (16-byte rows, 8 lanes per phase).
pub fn ldmatrix_conflict_degree(addresses: &[u32]) -> u32 {
    conflict_degree(addresses)
}

/// Both operands' fragment reads and every k step's loads, tf32 roundings and mma
/// instructions: fragments run one k step ahead of the math in two alternating register sets.
pub(super) struct FragmentPlan {
    pub a_read: FragmentReads,
    pub b_read: FragmentReads,
    pub k_steps: Vec<MmaKStep>,
    /// The kernel header's account of the reads.
    pub note: String,
    pub a_registers_per_set: u32,
    pub b_registers_per_set: u32,
}

impl FragmentPlan {
    pub(super) fn new(
        spec: &GemmSpec,
        g: &MmaSyncGeometry,
        (a_stored, b_stored): (StoredTile, StoredTile),
        (a_swizzle, b_swizzle): (SmemSwizzle, SmemSwizzle),
    ) -> FragmentPlan {
        let element = spec.dtype.size_bytes();
        let tf32 = spec.dtype == DType::Tf32;
        let a_tile_bytes = a_stored.lines * a_swizzle.pitch;
        let (mi_count, ni_count) = (g.m_frags, g.n_frags);
        let (a_kind, b_kind) = read_kinds(spec);
        // A warp's first line and byte in each stored tile: along M (N) in lines where the lines
        // run along M (N), else in bytes.
        let a_warp = g.warp_tile_m * if a_stored.lines_are_k { element } else { 1 };
        let b_warp = g.warp_tile_n * if b_stored.lines_are_k { element } else { 1 };
        let (a_rows, a_bytes) = if a_stored.lines_are_k {
            ((0, 0), (a_warp, 0))
        } else {
            ((a_warp, 0), (0, 0))
        };
        let (b_rows, b_bytes) = if b_stored.lines_are_k {
            ((0, 0), (0, b_warp))
        } else {
            ((0, b_warp), (0, 0))
        };
        let mut a_read = FragmentReads::new(a_kind, a_swizzle, 0, a_rows, a_bytes);
        let mut b_read = FragmentReads::new(b_kind, b_swizzle, a_tile_bytes, b_rows, b_bytes);
        let a_base = read_bases(&a_read, g);
        let b_base = read_bases(&b_read, g);
        let fragment_note = fragment_note(&a_read, &b_read, spec.layout, g);
        let (mut a_bases, mut b_bases) = (Vec::new(), Vec::new());
        let a_regs_per_set = mi_count * 4;
        let b_regs_per_set = ni_count * 2;
        let fa = |set: u32, mi: u32, q: u32| set * a_regs_per_set + mi * 4 + q;
        let fb = |set: u32, ni: u32, h: u32| set * b_regs_per_set + ni * 2 + h;
        let k_lines_per_step = g.shape.k;
        let (a_reads, b_reads) = (&a_read, &b_read);
        let n_tile_bytes = g.shape.n * element;
        let m_tile_bytes = g.shape.m * element;

        let k_steps_plan: Vec<MmaKStep> = (0..g.k_steps)
            .map(|step| {
                let set = step % 2;
                // Stored (line, byte) of lane `lane` of warp (wm, wn) plus `(lines, bytes)`.
                let a_at = |lines: u32, bytes: u32| {
                    move |wm: u32, wn: u32, lane: u32| {
                        let (row, col) = a_reads.lane_position(wm, wn, lane);
                        a_swizzle.byte_offset(row + lines, col + bytes)
                    }
                };
                let b_at = |lines: u32, bytes: u32| {
                    move |wm: u32, wn: u32, lane: u32| {
                        let (row, col) = b_reads.lane_position(wm, wn, lane);
                        b_swizzle.byte_offset(row + lines, col + bytes)
                    }
                };
                let a_loads: Vec<FragLoad> = match a_kind {
                    // 16 rows of M by the step's two k chunks: a0..a3.
                    ReadKind::Ldmatrix => (0..mi_count)
                        .map(|mi| {
                            let regs = registers("fa", (0..4).map(|q| fa(set, mi, q)));
                            let at = a_at(mi * g.shape.m, step * K_STEP_BYTES);
                            read_load(&mut a_bases, &a_base, g, regs, at)
                        })
                        .collect(),
                    // The step's 16 k lines by two chunks of M: matrices (k 0-7, m 0-7),
                    // (k 8-15, m 0-7), (k 0-7, m 8-15), (k 8-15, m 8-15) are a0, a2, a1, a3.
                    ReadKind::LdmatrixTrans => (0..mi_count)
                        .map(|mi| {
                            let regs = registers("fa", [0, 2, 1, 3].map(|q| fa(set, mi, q)));
                            let at = a_at(step * k_lines_per_step, mi * m_tile_bytes);
                            read_load(&mut a_bases, &a_base, g, regs, at)
                        })
                        .collect(),
                    // tf32 a_q: k line t + 4·(q >> 1), m g + 8·(q & 1).
                    ReadKind::Scalar => (0..mi_count)
                        .flat_map(|mi| (0..4).map(move |q| (mi, q)))
                        .map(|(mi, q)| {
                            let regs = registers("fa", [fa(set, mi, q)]);
                            let at = a_at(
                                step * k_lines_per_step + 4 * (q >> 1),
                                mi * m_tile_bytes + 8 * (q & 1) * element,
                            );
                            read_load(&mut a_bases, &a_base, g, regs, at)
                        })
                        .collect(),
                };
                let b_loads: Vec<FragLoad> = match b_kind {
                    // 16 columns (lines) by the step's two k chunks: b0 of n8 tiles 2j and
                    // 2j + 1, then b1 of both.
                    ReadKind::Ldmatrix => (0..ni_count / 2)
                        .map(|j| {
                            let regs = registers(
                                "fb",
                                [
                                    fb(set, 2 * j, 0),
                                    fb(set, 2 * j + 1, 0),
                                    fb(set, 2 * j, 1),
                                    fb(set, 2 * j + 1, 1),
                                ],
                            );
                            let at = b_at(2 * j * g.shape.n, step * K_STEP_BYTES);
                            read_load(&mut b_bases, &b_base, g, regs, at)
                        })
                        .collect(),
                    ReadKind::Scalar => (0..ni_count)
                        .flat_map(|ni| (0..2).map(move |h| (ni, h)))
                        .map(|(ni, h)| {
                            let regs = registers("fb", [fb(set, ni, h)]);
                            let at = b_at(step * k_lines_per_step + 4 * h, ni * n_tile_bytes);
                            read_load(&mut b_bases, &b_base, g, regs, at)
                        })
                        .collect(),
                    ReadKind::LdmatrixTrans => (0..ni_count / 2)
                        .map(|j| {
                            // Matrices 0, 1: b0, b1 of n8 tile 2j; matrices 2, 3: of tile 2j + 1.
                            let regs = registers(
                                "fb",
                                [
                                    fb(set, 2 * j, 0),
                                    fb(set, 2 * j, 1),
                                    fb(set, 2 * j + 1, 0),
                                    fb(set, 2 * j + 1, 1),
                                ],
                            );
                            let at = b_at(step * k_lines_per_step, 2 * j * n_tile_bytes);
                            read_load(&mut b_bases, &b_base, g, regs, at)
                        })
                        .collect(),
                };
                let rounds =
                    if tf32 {
                        (0..mi_count)
                            .flat_map(|mi| (0..4).map(move |q| format!("%fa{}", fa(set, mi, q))))
                            .chain((0..ni_count).flat_map(|ni| {
                                (0..2).map(move |h| format!("%fb{}", fb(set, ni, h)))
                            }))
                            .collect()
                    } else {
                        Vec::new()
                    };
                // Serpentine over n so consecutive mmas share an A or B fragment.
                let mmas = (0..mi_count)
                    .flat_map(|mi| {
                        let columns: Vec<u32> = if mi % 2 == 0 {
                            (0..ni_count).collect()
                        } else {
                            (0..ni_count).rev().collect()
                        };
                        columns.into_iter().map(move |ni| (mi, ni))
                    })
                    .map(|(mi, ni)| {
                        let acc = (mi * ni_count + ni) * 4;
                        MmaOp {
                            d: registers("acc", acc..acc + 4),
                            a: registers("fa", (0..4).map(|q| fa(set, mi, q))),
                            b: registers("fb", (0..2).map(|h| fb(set, ni, h))),
                        }
                    })
                    .collect();
                MmaKStep {
                    a_loads,
                    b_loads,
                    rounds,
                    mmas,
                }
            })
            .collect();
        a_read.bases = a_bases;
        b_read.bases = b_bases;
        FragmentPlan {
            a_read,
            b_read,
            k_steps: k_steps_plan,
            note: fragment_note,
            a_registers_per_set: a_regs_per_set,
            b_registers_per_set: b_regs_per_set,
        }
    }
}
