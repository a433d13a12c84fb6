//! How a thread's accumulators reach C: the one plan of the store paths every family picks
//! from, below the families. Each family lists its accumulators as rows of stores in its
//! fragment layout ([`EpilogueRow`] of [`PairStore`]s for the tensor-core fragments, of
//! [`VectorStore`]s for SIMT's column groups), which is the direct path, an edge tile's
//! path under the others, and the groups the fused epilogue transforms; the path says how
//! the rest reaches memory ([`StorePath`]):
//!
//! - **direct**: each store goes from registers to global memory.
//! - **staged** ([`StagedEpilogue`]): each warp writes a band of rows to its shared-memory
//!   slabs and reads it back as 16-byte vectors of whole row segments.
//! - **TMA store** ([`TmaStore`]): a warpgroup writes boxes of C into swizzled buffers with
//!   `stmatrix`, and one thread hands each box to a TMA store.

use super::edges::last_byte;
use super::epilogue::AccElement;
use gemm_dsl::geometry::COPY_VECTOR_BYTES;
use serde::Serialize;

/// The path of the stores that are not direct. The templates see `staged` or `tma` beside
/// the family's own epilogue fields (neither for the direct path).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StorePath {
    Direct {},
    Staged(StagedEpilogue),
    Tma(TmaStore),
}

impl StorePath {
    pub fn staged(&self) -> Option<&StagedEpilogue> {
        match self {
            StorePath::Staged(staged) => Some(staged),
            StorePath::Direct {} | StorePath::Tma(_) => None,
        }
    }

    pub fn tma(&self) -> Option<&TmaStore> {
        match self {
            StorePath::Tma(tma) => Some(tma),
            StorePath::Direct {} | StorePath::Staged(_) => None,
        }
    }
}

/// One row of a thread's accumulators as direct stores.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct EpilogueRow<Store> {
    /// Rows below the thread's first row.
    pub row: u32,
    /// The step from the previous row of its list (the first: from the thread's first row)
    /// is `ldc · ld_scale` bytes: the rows between them times the element size.
    pub ld_scale: u32,
    pub stores: Vec<Store>,
}

/// The rows of `rows`, each with its step from the one before in `out_bytes` elements.
pub fn rows_with_steps<Store>(
    rows: impl IntoIterator<Item = (u32, Vec<Store>)>,
    out_bytes: u32,
) -> Vec<EpilogueRow<Store>> {
    let mut previous = 0;
    rows.into_iter()
        .map(|(row, stores)| {
            let ld_scale = (row - previous) * out_bytes;
            previous = row;
            EpilogueRow {
                row,
                ld_scale,
                stores,
            }
        })
        .collect()
}

/// Accumulators `lo` and `hi` at columns `col` and `col_hi` (`col + 1`) right of the
/// thread's first column, `offset` and `offset_hi` bytes; an edge tile stores `lo` alone
/// where the pair's `last_byte` lies past N.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct PairStore {
    pub lo: u32,
    pub hi: u32,
    pub col: u32,
    pub col_hi: u32,
    pub offset: u32,
    pub offset_hi: u32,
    pub last_byte: u32,
}

impl PairStore {
    /// The pair of accumulators `lo`, `lo + 1` at column `col` of `out_bytes` elements, from
    /// `base` bytes on (a row pointer's, or a slab's).
    pub fn at(lo: u32, col: u32, out_bytes: u32, base: u32) -> PairStore {
        let offset = base + col * out_bytes;
        PairStore {
            lo,
            hi: lo + 1,
            col,
            col_hi: col + 1,
            offset,
            offset_hi: offset + out_bytes,
            last_byte: last_byte(offset, 2 * out_bytes),
        }
    }
}

/// Where the pairs of `rows` lie, for the fused epilogue: every pair's two elements.
pub fn pair_elements(rows: &[EpilogueRow<PairStore>]) -> Vec<AccElement> {
    rows.iter()
        .flat_map(|row| {
            row.stores.iter().flat_map(move |s| {
                [(s.lo, s.col), (s.hi, s.col_hi)].map(|(acc, col)| AccElement {
                    acc,
                    row: row.row,
                    col,
                })
            })
        })
        .collect()
}

/// Accumulators stored as one vector `offset` bytes right of the thread's first column;
/// an edge block stores them one by one (`elements`, empty for a one-element store) where
/// the vector's `last_byte` lies past N.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct VectorStore {
    /// The store's registers as its operand: `{ %acc0, %acc1 }`, or `%acc0` alone.
    pub operand: String,
    pub offset: u32,
    pub last_byte: u32,
    pub elements: Vec<ElementStore>,
}

/// One element (or 16-bit half) of an edge block's vector store, stored when the row's bytes
/// left from the thread's first column exceed `offset`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ElementStore {
    /// Bytes right of the thread's first column (and of the C row pointer).
    pub offset: u32,
    pub register: String,
}

/// The epilogue through each warp's two shared-memory slabs, one 16-row band of accumulators
/// at a time. Lane `(g, t)` writes rows `g`, `g + 8`, columns `2t, 2t + 1` of each n8 tile
/// (from its write base `g·pitch + t·2·out_bytes`); lane `l` then reads 16-byte vector `l`
/// (and `l + 32`, ...) of the band, row `l / vectors_per_row`, chunk `l % vectors_per_row`,
/// and stores it to the same place in C: as one 16-byte store, or as several no wider than
/// a narrower copy vector.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct StagedEpilogue {
    /// Where the slabs start in shared memory: 0 (over the drained ring) or, for a persistent
    /// schedule, after the ring, which then already holds the next tile's first copies.
    pub smem_offset: u32,
    pub pitch: u32,
    pub vectors_per_row: u32,
    pub bytes_per_warp: u32,
    /// Bytes of C from one warp column to the next (the warp tile's row).
    pub warp_col_bytes: u32,
    /// `st.shared.b32` of a packed pair, or `st.shared.v2.f32`.
    pub pair_bytes: u32,
    /// The `st.global` of one piece of a read vector, e.g. `st.global.v4.b32`.
    pub global_store: String,
    pub bands: Vec<EpilogueBand>,
}

impl StagedEpilogue {
    /// The slabs lie over the ring, so every read of the ring must be retired first.
    pub fn over_ring(&self) -> bool {
        self.smem_offset == 0
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct EpilogueBand {
    /// Pairs into the slab, `offset` bytes from the lane's write base.
    pub writes: Vec<PairStore>,
    pub reads: Vec<SlabRead>,
}

/// One 16-byte vector from the slab to C, in `stores`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SlabRead {
    /// Bytes from the lane's read base.
    pub smem_offset: u32,
    /// Rows of C below the previous read's (the first read of the epilogue: below the lane's
    /// first row).
    pub global_row_delta: u32,
    /// Bytes right of the lane's first column.
    pub global_col_bytes: u32,
    /// Rows below the lane's first: an edge block skips the vector when it lies past M.
    pub row: u32,
    pub stores: Vec<SlabStore>,
}

/// One global store of (part of) a vector read from the slab: an edge block stores it whole
/// when its row is in M and its `last_byte` in N, else word by word (`words`, empty for a
/// one-element store).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SlabStore {
    /// Bytes right of the lane's first column.
    pub offset: u32,
    pub last_byte: u32,
    /// `{ %ep0, %ep1, %ep2, %ep3 }`, `{ %ep0, %ep1 }`, `%ep0`, or a 16-bit half `%h0`.
    pub operand: String,
    /// For 2-byte stores: the word to split into `%h0`, `%h1` before its first half's store.
    pub unpack: Option<String>,
    pub words: Vec<StoreWord>,
}

/// One 32-bit word of a vector an edge block stores on its own: whole (f32), or as its low
/// and high 16-bit halves, each when the row's bytes left exceed its offset.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct StoreWord {
    pub register: String,
    pub offset: u32,
    /// The high half's offset, for 16-bit elements.
    pub high_half: Option<u32>,
}

/// The stores of the 16-byte vector read for C's bytes `col..col + 16`: one, or
/// `16 / store_bytes` narrower ones. Each store of several elements carries its 32-bit
/// words (16-bit halves for 16-bit elements) for an edge block's element-by-element path.
pub fn slab_stores(col: u32, out_bytes: u32, store_bytes: u32) -> Vec<SlabStore> {
    const WORD: u32 = 4;
    (0..COPY_VECTOR_BYTES / store_bytes)
        .map(|i| {
            let offset = col + i * store_bytes;
            let first_word = i * store_bytes / WORD;
            let (operand, unpack) = match store_bytes {
                // A 16-bit half of word `first_word`: the even half splits the word first.
                2 => (
                    format!("%h{}", i % 2),
                    (i % 2 == 0).then(|| format!("%ep{first_word}")),
                ),
                4 => (format!("%ep{first_word}"), None),
                _ => (
                    format!(
                        "{{ {} }}",
                        (first_word..first_word + store_bytes / WORD)
                            .map(|w| format!("%ep{w}"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                    None,
                ),
            };
            let words = if store_bytes > out_bytes {
                (first_word..first_word + store_bytes / WORD)
                    .map(|w| StoreWord {
                        register: format!("%ep{w}"),
                        offset: col + WORD * w,
                        high_half: (out_bytes == 2).then_some(col + WORD * w + 2),
                    })
                    .collect()
            } else {
                Vec::new()
            };
            SlabStore {
                offset,
                last_byte: last_byte(offset, store_bytes),
                operand,
                unpack,
                words,
            }
        })
        .collect()
}

/// The TMA-store epilogue of one consumer warpgroup.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TmaStore {
    pub box_rows: u32,
    pub box_cols: u32,
    pub swizzle_bytes: u32,
    /// `log2(swizzle_bytes)`: a box row's bytes as a shift.
    pub row_shift: u32,
    /// The swizzle XORs address bits `7..` masked by this into the 16-byte unit bits `4..`.
    pub swizzle_mask: u32,
    pub buffer_bytes: u32,
    /// Bytes of one consumer's buffers.
    pub consumer_bytes: u32,
    /// The boxes of one output tile, in store order.
    pub boxes: Vec<StoreBox>,
    /// `stmatrix` ops per box: one per 16 columns.
    pub matrices_per_box: u32,
    /// Per piece of 16 columns, what its 32 bytes XOR into the thread's swizzled unit.
    pub piece_xors: Vec<u32>,
    /// `N & ragged_column_mask != 0`: N ends inside a 16-byte unit of C's rows, and the boxes
    /// that cross column N take the direct path.
    pub ragged_column_mask: u32,
}

/// One box of a consumer's rows: `row` rows below its first, `col` columns right of the
/// tile's first.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct StoreBox {
    pub row: u32,
    pub col: u32,
    /// The column past the box's last.
    pub col_end: u32,
    /// The row past the box's last, below the consumer's first.
    pub row_end: u32,
    pub matrices: Vec<StoreMatrices>,
    /// The box's direct stores, for a box that crosses a ragged column N: rows below the
    /// thread's first row, each row's step `ld_scale` counted from that first row.
    pub direct_rows: Vec<EpilogueRow<PairStore>>,
}

/// One `stmatrix.x4` of a warp's 16x16 piece: four 8x8 matrices, (rows 0-7, columns 0-7),
/// (rows 8-15, columns 0-7), (rows 0-7, columns 8-15), (rows 8-15, columns 8-15), each
/// packed from a pair of accumulators; `address` indexes the thread's per-piece addresses.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct StoreMatrices {
    pub address: u32,
    pub pairs: [(u32, u32); 4],
}

impl TmaStore {
    /// The offset in a buffer of the row that thread `(warp, lane)` addresses for piece
    /// `piece` of a box, step by step as `tma_store_setup` computes it: lane `l` names row
    /// `l % 8` of matrix `l / 8`, which sits `8·(l/8 % 2)` rows and `8·(l/16)` columns into
    /// the warp's 16x16 piece.
    pub fn stmatrix_offset(&self, warp: u32, lane: u32, piece: u32) -> u32 {
        let row = 16 * warp + ((lane >> 3) & 1) * 8 + (lane & 7);
        let base = row << self.row_shift;
        let xor = ((base >> 7) & self.swizzle_mask) << 4;
        let half = (lane >> 4) << 4;
        base + ((xor ^ half) ^ self.piece_xors[piece as usize])
    }
}
