//! The epilogue: each thread's accumulators, row by row, to C as vector stores of its column
//! groups (element by element where a vector crosses N).

use super::{COLUMN_GROUP_STRIDE_BYTES, F32_BYTES};
use crate::plan::edges::{c_global_store, c_store_bytes, last_byte, CopyVector, StagingWord};
use crate::plan::epilogue::AccElement;
use crate::plan::store::{rows_with_steps, ElementStore, EpilogueRow, VectorStore};
use gemm_dsl::family::simt::{SimtGeometry, SIMT_COLUMN_GROUP, SIMT_LANE_COLS, SIMT_LANE_ROWS};
use gemm_dsl::geometry::COPY_VECTOR_BYTES;
use serde::Serialize;

/// Accumulators to global memory, `c_store_bytes` per store: each 16-byte group of four
/// columns is one store, or several where the copy vector is narrower.
#[derive(Clone, Debug, Serialize)]
pub struct Epilogue {
    /// The `st.global` of one store, e.g. `st.global.v4.f32`.
    pub store: String,
    /// Lane row i's accumulators, one row below the other.
    pub rows: Vec<EpilogueRow<VectorStore>>,
    /// Copy the accumulators (`add.f32 x, -0.0`, exact) before vector stores read them.
    /// Stores straight from them would pin each group of four to consecutive registers for
    /// the whole main loop; copied, ptxas places them by register bank instead, away from the
    /// FFMA's other operands (4096³: 0.907 → 0.918 of cuBLAS on its own, 0.969 with the
    /// snake order). Fused kernels copy too, so their main loop stays the plain kernel's.
    pub copy_accumulators: bool,
}

/// The stores of the thread's accumulators (geometry `g`) to C, no wider than copies of
/// `copy_vector` nor the spec's `c_store`; the store bytes; and where each row's accumulators lie, for the fused
/// epilogue.
pub(super) fn epilogue(
    g: &SimtGeometry,
    copy_vector: &CopyVector,
    c_store: Option<u32>,
) -> (Epilogue, u32, Vec<Vec<AccElement>>) {
    let (tm, tn) = (g.thread_tile_m, g.thread_tile_n);
    let column_groups = tn / SIMT_COLUMN_GROUP;
    // C's stores are no wider than the copy vector, so C's rows need only its alignment
    // (the launch checks ldc against `c_store_bytes`): a group of four columns takes one
    // 16-byte store, or 16 / c_store_bytes narrower ones.
    let c_store_bytes = c_store_bytes(copy_vector.bytes, c_store, F32_BYTES);
    let per_store = c_store_bytes / F32_BYTES;
    let epilogue = Epilogue {
        store: c_global_store(c_store_bytes, StagingWord::F32),
        copy_accumulators: per_store > 1,
        rows: rows_with_steps(
            (0..tm).map(|i| {
                let stores = (0..column_groups)
                    .flat_map(|j| (0..COPY_VECTOR_BYTES / c_store_bytes).map(move |v| (j, v)))
                    .map(|(j, v)| {
                        let offset = j * COLUMN_GROUP_STRIDE_BYTES + v * c_store_bytes;
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
    // Row i's accumulators: column group j's four columns, COLUMN_GROUP_STRIDE_BYTES apart.
    let fused_rows: Vec<Vec<AccElement>> = (0..tm)
        .map(|i| {
            (0..column_groups)
                .flat_map(|j| (0..SIMT_COLUMN_GROUP).map(move |e| (j, e)))
                .map(|(j, e)| AccElement {
                    acc: i * tn + SIMT_COLUMN_GROUP * j + e,
                    row: i,
                    col: j * COLUMN_GROUP_STRIDE_BYTES / F32_BYTES + e,
                })
                .collect()
        })
        .collect();
    (epilogue, c_store_bytes, fused_rows)
}
