//! Launch-argument rules as plain arithmetic, so they are tested without a GPU.

use crate::error::{Error, Operand};
use gemm_dsl::abi::{LaunchShape, StorageOrder};

/// One matrix argument as the launcher sees it: where it starts, how many elements the
/// buffer holds, and its row stride in elements.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OperandArg {
    pub address: u64,
    pub len: usize,
    pub ld: u32,
}

/// A strided batch of products `C_i = A_i·B_i`, `i < count`: matrix `i` of each operand
/// starts `i · stride` elements after the operand's first (the buffer's start). A stride of
/// 0 shares one A (or one B) among all products; C's matrices must not overlap. A batch of
/// one product ignores the strides.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Batch {
    pub count: u32,
    pub stride_a: u64,
    pub stride_b: u64,
    pub stride_c: u64,
}

impl Batch {
    /// One product: what [`GemmKernel::launch`](crate::GemmKernel::launch) and
    /// `launch_with_ld` compute.
    pub const ONE: Batch = Batch {
        count: 1,
        stride_a: 0,
        stride_b: 0,
        stride_c: 0,
    };

    /// `count` products whose matrices lie back to back, each `lines x ld` elements of its
    /// buffer (rows, or columns of a column-major operand; see [`LaunchShape::stored_dims`]).
    pub fn packed(
        shape: &LaunchShape,
        count: u32,
        dims: (u32, u32, u32),
        lds: LeadingDims,
    ) -> Batch {
        let (m, n, k) = dims;
        let matrix =
            |operand, ld: u32| u64::from(shape.stored_dims(operand, m, n, k).0) * u64::from(ld);
        Batch {
            count,
            stride_a: matrix(Operand::A, lds.lda),
            stride_b: matrix(Operand::B, lds.ldb),
            stride_c: matrix(Operand::C, lds.ldc),
        }
    }

    /// The batch of the swapped product `Cᵀ = Bᵀ·Aᵀ` over the same memory: A's and B's
    /// strides change places (C's stays).
    pub const fn exchanged(self) -> Batch {
        Batch {
            stride_a: self.stride_b,
            stride_b: self.stride_a,
            ..self
        }
    }

    /// An operand's stride.
    pub const fn stride(&self, operand: Operand) -> u64 {
        match operand {
            Operand::A => self.stride_a,
            Operand::B => self.stride_b,
            Operand::C => self.stride_c,
        }
    }
}

/// The leading dimensions of one launch, in elements: the stride between the lines (rows,
/// or columns of a column-major operand) of A, B and C.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeadingDims {
    pub lda: u32,
    pub ldb: u32,
    pub ldc: u32,
}

impl LeadingDims {
    /// Packed operands: each leading dimension is the length of one of its operand's lines
    /// (row-major A: `k`, column-major A: `m`, ...; row-major C: `n`).
    pub const fn packed(shape: &LaunchShape, m: u32, n: u32, k: u32) -> LeadingDims {
        LeadingDims {
            lda: shape.stored_dims(Operand::A, m, n, k).1,
            ldb: shape.stored_dims(Operand::B, m, n, k).1,
            ldc: shape.stored_dims(Operand::C, m, n, k).1,
        }
    }

    /// The leading dimensions of the swapped product `Cᵀ = Bᵀ·Aᵀ` over the same memory: A's
    /// and B's change places; C's lines are the same lines, read the other way.
    pub const fn exchanged(self) -> LeadingDims {
        LeadingDims {
            lda: self.ldb,
            ldb: self.lda,
            ldc: self.ldc,
        }
    }
}

/// Every number of one launch: `batch.count` products `C = A·B` of `m x n x k`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LaunchArgs {
    pub m: u32,
    pub n: u32,
    pub k: u32,
    pub a: OperandArg,
    pub b: OperandArg,
    pub c: OperandArg,
    pub batch: Batch,
}

/// CUDA's grid limits: x up to 2^31 - 1 blocks, y and z up to 65535.
pub const MAX_GRID_X: u32 = i32::MAX as u32;
pub const MAX_GRID_YZ: u32 = 65_535;

/// Products in one batched launch, for every schedule: a one-tile-per-block grid runs them
/// along z.
pub const MAX_BATCH: u32 = MAX_GRID_YZ;

/// Checks a launch against the kernel's rules and returns the grid to launch;
/// `resident_blocks` (how many blocks the device holds at once) sizes persistent grids.
///
/// Order: the batch count and the problem size first (nothing else is meaningful for a size
/// the kernel cannot compute), then each operand's stride, alignment and buffer length, then
/// its batch stride and the length the whole batch needs.
pub fn check_launch(
    shape: &LaunchShape,
    args: &LaunchArgs,
    resident_blocks: u32,
) -> Result<(u32, u32, u32), Error> {
    let LaunchArgs { m, n, k, batch, .. } = *args;
    if batch.count == 0 || batch.count > MAX_BATCH {
        return Err(Error::BatchCount {
            count: batch.count,
            limit: MAX_BATCH,
        });
    }
    shape
        .check_batched_dims(m, n, k, batch.count)
        .map_err(|reason| Error::Dims { m, n, k, reason })?;
    let grid = shape.grid_batched(m, n, k, batch.count, resident_blocks);
    for (axis, blocks, limit) in [
        ('x', grid.0, MAX_GRID_X),
        ('y', grid.1, MAX_GRID_YZ),
        ('z', grid.2, MAX_GRID_YZ),
    ] {
        if blocks > limit {
            return Err(Error::GridTooLarge {
                axis,
                blocks,
                limit,
            });
        }
    }
    // A and B lines start aligned to the copy vector, C's rows to C's widest store.
    let operands = [
        (
            Operand::A,
            args.a,
            shape.input_element_bytes,
            shape.operand_align_bytes,
        ),
        (
            Operand::B,
            args.b,
            shape.input_element_bytes,
            shape.operand_align_bytes,
        ),
        (
            Operand::C,
            args.c,
            shape.output_element_bytes,
            shape.output_align_bytes,
        ),
    ];
    for (operand, arg, element_bytes, align) in operands {
        // Lines of the buffer (rows, or columns of a column-major operand) and their length.
        let (rows, cols) = shape.stored_dims(operand, m, n, k);
        check_operand(operand, shape, arg, rows, cols, element_bytes, align)?;
        check_batch_stride(
            operand,
            (batch.count, batch.stride(operand)),
            arg,
            elements_needed(rows, cols, arg.ld),
            element_bytes,
            align,
        )?;
    }
    Ok(grid)
}

/// The batch's matrices of one operand, `count` of `matrix` elements each, `stride` apart:
/// every one starts aligned (the kernels' vector copies and the TMA's 16-byte strides), C's
/// do not overlap, and the buffer holds the last. A batch of one product has nothing to check.
pub(crate) fn check_batch_stride(
    operand: Operand,
    (count, stride): (u32, u64),
    arg: OperandArg,
    matrix: u64,
    element_bytes: u32,
    align: u32,
) -> Result<(), Error> {
    if count <= 1 {
        return Ok(());
    }
    let align = align.max(1);
    if !(u128::from(stride) * u128::from(element_bytes)).is_multiple_of(u128::from(align)) {
        return Err(Error::MisalignedBatchStride {
            operand,
            stride,
            element_bytes,
            align,
        });
    }
    if operand == Operand::C && stride < matrix {
        return Err(Error::OverlappingBatch { stride, matrix });
    }
    let needed = u64::from(count - 1)
        .checked_mul(stride)
        .and_then(|start| start.checked_add(matrix))
        .unwrap_or(u64::MAX);
    if (arg.len as u64) < needed {
        return Err(Error::BatchBufferTooSmall {
            operand,
            len: arg.len,
            needed,
            count,
            stride,
            matrix,
        });
    }
    Ok(())
}

/// A grouped product's sizes (`groups:` kernels): `groups` experts, whose rows together are
/// `rows` rows of A and of D (`masked`: `groups x capacity`); each expert multiplies its rows
/// by its own `K x N` matrix of B, B's matrices packed one after another.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GroupedDims {
    pub groups: u32,
    pub rows: u32,
    pub n: u32,
    pub k: u32,
}

/// What a grouped launch passes besides the operands: the device's row table and the counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct GroupedArgs {
    pub table: u64,
    pub groups: u32,
    /// `masked`: the rows each expert owns; 0 for `contiguous`.
    pub capacity: u32,
}

/// Checks a grouped launch: A and D as one product of `rows` rows ([`check_launch`]), B as
/// `groups` packed matrices, the row table long enough, a masked layout's rows whole experts.
/// Returns B's matrix stride in elements. The table's values only the device knows: the
/// kernel clamps them (see `gemm_dsl::grouped::GroupRows`).
pub(crate) fn check_grouped_launch(
    shape: &LaunchShape,
    args: &LaunchArgs,
    dims: GroupedDims,
    masked: bool,
    table_len: usize,
) -> Result<u64, String> {
    use gemm_dsl::grouped::MAX_GROUPS;
    if dims.groups == 0 || dims.groups > MAX_GROUPS {
        return Err(format!(
            "{} experts: a grouped launch takes 1 to {MAX_GROUPS}",
            dims.groups
        ));
    }
    if table_len < dims.groups as usize {
        return Err(format!(
            "the row table holds {table_len} entries, fewer than the {} experts",
            dims.groups
        ));
    }
    if masked && !dims.rows.is_multiple_of(dims.groups) {
        return Err(format!(
            "a masked layout's {} rows are not {} experts of equal capacity",
            dims.rows, dims.groups
        ));
    }
    let matrix = shape.stored_dims(Operand::B, dims.rows, dims.n, dims.k);
    let stride_b = u64::from(matrix.0) * u64::from(args.b.ld);
    check_batch_stride(
        Operand::B,
        (dims.groups, stride_b),
        args.b,
        elements_needed(matrix.0, matrix.1, args.b.ld),
        shape.input_element_bytes,
        shape.operand_align_bytes,
    )
    .map_err(|error| format!("B's experts: {error}"))?;
    Ok(stride_b)
}

/// The rows of the tallest walk a grouped launch's table can make, the experts' row tiles
/// one after another: each expert adds at most one partial tile to the buffer's rows
/// (`contiguous`), or has at most its capacity's tiles (`masked`). The grid is sized for it.
pub(crate) fn grouped_walk_rows(shape: &LaunchShape, dims: GroupedDims, masked: bool) -> u32 {
    let tile = u64::from(shape.tile_m.max(1));
    let groups = u64::from(dims.groups);
    let rows = if masked {
        groups * (u64::from(dims.rows) / groups.max(1)).div_ceil(tile) * tile
    } else {
        u64::from(dims.rows) + groups * tile
    };
    u32::try_from(rows).unwrap_or(u32::MAX)
}

/// Elements a `rows x cols` row-major matrix with row stride `ld` spans: the last row needs
/// only its own columns, not a whole stride.
pub fn elements_needed(rows: u32, cols: u32, ld: u32) -> u64 {
    if rows == 0 || cols == 0 {
        return 0;
    }
    u64::from(rows - 1) * u64::from(ld) + u64::from(cols)
}

/// One operand of `shape`'s launch: its lines (`rows` of `cols`, in the operand's storage
/// order) start `align`-byte aligned and fit the buffer.
fn check_operand(
    operand: Operand,
    shape: &LaunchShape,
    arg: OperandArg,
    rows: u32,
    cols: u32,
    element_bytes: u32,
    align: u32,
) -> Result<(), Error> {
    let (order, copy_path) = (shape.order(operand), shape.copy_path);
    check_line_length(operand, order, arg.ld, cols)?;
    // Kernels load and store whole vectors of `align` bytes: every row must start aligned.
    let align = align.max(1);
    if !(u64::from(arg.ld) * u64::from(element_bytes)).is_multiple_of(u64::from(align)) {
        return Err(Error::MisalignedLeadingDim {
            operand,
            order,
            ld: arg.ld,
            element_bytes,
            align,
            copy_path,
        });
    }
    if !arg.address.is_multiple_of(u64::from(align)) {
        return Err(Error::MisalignedPointer {
            operand,
            address: arg.address,
            align,
        });
    }
    check_buffer_length(operand, order, arg, rows, cols)
}

/// An operand's line stride `ld` holds its lines of `cols` elements.
pub(crate) fn check_line_length(
    operand: Operand,
    order: StorageOrder,
    ld: u32,
    cols: u32,
) -> Result<(), Error> {
    if ld < cols {
        return Err(Error::LeadingDimTooSmall {
            operand,
            order,
            ld,
            row_len: cols,
        });
    }
    Ok(())
}

/// An operand's buffer holds its `rows` lines of `cols` elements, `arg.ld` apart.
pub(crate) fn check_buffer_length(
    operand: Operand,
    order: StorageOrder,
    arg: OperandArg,
    rows: u32,
    cols: u32,
) -> Result<(), Error> {
    let needed = elements_needed(rows, cols, arg.ld);
    if (arg.len as u64) < needed {
        return Err(Error::BufferTooSmall {
            operand,
            order,
            len: arg.len,
            needed,
            rows,
            cols,
            ld: arg.ld,
        });
    }
    Ok(())
}

/// Whether a device of compute capability `device_cc` runs a kernel built for `shape`.
/// `sm_90a`-style code runs only on exactly its capability; plain targets run on theirs and
/// newer (the driver JIT-compiles the PTX forward).
pub fn check_arch(kernel: &str, shape: &LaunchShape, device_cc: u32) -> Result<(), Error> {
    let kernel_cc = shape.compute_capability;
    let runs = if shape.arch_specific {
        device_cc == kernel_cc
    } else {
        device_cc >= kernel_cc
    };
    if runs {
        Ok(())
    } else {
        Err(Error::ArchMismatch {
            kernel: kernel.to_string(),
            kernel_cc,
            arch_specific: shape.arch_specific,
            device_cc,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gemm_dsl::abi::{CopyPath, GridSchedule, StorageOrder};

    /// A 128x128x8 f32 kernel with 16-byte vectors that computes whole tiles only.
    const SHAPE: LaunchShape = LaunchShape {
        threads_per_block: 256,
        tile_m: 128,
        tile_n: 128,
        tile_k: 8,
        dynamic_smem_bytes: 16384,
        operand_align_bytes: 16,
        output_align_bytes: 16,
        copy_path: CopyPath::CpAsync,
        input_element_bytes: 4,
        output_element_bytes: 4,
        compute_capability: 80,
        arch_specific: false,
        schedule: GridSchedule::Tiles,
        cluster: (1, 1),
        partial_tiles: false,
        a_order: StorageOrder::RowMajor,
        b_order: StorageOrder::RowMajor,
        c_order: StorageOrder::RowMajor,
        workspace_bytes_per_block: 0,
    };

    /// One block per SM of a 132-SM device.
    const RESIDENT: u32 = 132;

    fn packed(m: u32, n: u32, k: u32) -> LaunchArgs {
        let operand = |address, rows: u32, cols: u32| OperandArg {
            address,
            len: (rows * cols) as usize,
            ld: cols,
        };
        LaunchArgs {
            m,
            n,
            k,
            a: operand(0x7f00_0000_0000, m, k),
            b: operand(0x7f00_1000_0000, k, n),
            c: operand(0x7f00_2000_0000, m, n),
            batch: Batch::ONE,
        }
    }

    /// `count` products of `packed(m, n, k)`, each operand's matrices back to back.
    fn batched(m: u32, n: u32, k: u32, count: u32) -> LaunchArgs {
        let mut args = packed(m, n, k);
        let lds = LeadingDims::packed(&PARTIAL, m, n, k);
        args.batch = Batch::packed(&PARTIAL, count, (m, n, k), lds);
        for operand in [Operand::A, Operand::B, Operand::C] {
            let arg = match operand {
                Operand::A => &mut args.a,
                Operand::B => &mut args.b,
                Operand::C => &mut args.c,
            };
            arg.len *= count as usize;
        }
        args
    }

    #[test]
    fn a_packed_batch_runs_along_z_or_through_the_walk() {
        let args = batched(256, 384, 64, 7);
        assert_eq!(
            (
                args.batch.stride_a,
                args.batch.stride_b,
                args.batch.stride_c
            ),
            (256 * 64, 64 * 384, 256 * 384)
        );
        assert_eq!(check_launch(&PARTIAL, &args, RESIDENT).unwrap(), (3, 2, 7));
        // 6 tiles per product, 42 in all: a persistent grid of one block per tile.
        let persistent = LaunchShape {
            schedule: GridSchedule::Persistent { group: 8 },
            ..PARTIAL
        };
        assert_eq!(
            check_launch(&persistent, &args, RESIDENT).unwrap(),
            (42, 1, 1)
        );
        // 3 x 32 x 32 tiles: 24 rounds of the resident blocks, spread over 128.
        assert_eq!(
            check_launch(&persistent, &batched(4096, 4096, 64, 3), RESIDENT).unwrap(),
            (128, 1, 1)
        );
        // Column-major operands: a matrix is its columns.
        let cc = LaunchShape {
            a_order: StorageOrder::ColMajor,
            b_order: StorageOrder::ColMajor,
            c_order: StorageOrder::RowMajor,
            ..PARTIAL
        };
        let lds = LeadingDims::packed(&cc, 100, 60, 20);
        assert_eq!((lds.lda, lds.ldb, lds.ldc), (100, 20, 60));
        let batch = Batch::packed(&cc, 2, (100, 60, 20), lds);
        assert_eq!((batch.stride_a, batch.stride_b), (20 * 100, 60 * 20));
    }

    #[test]
    fn a_shared_operand_has_stride_zero_and_one_matrix() {
        let mut args = batched(128, 128, 64, 5);
        args.batch.stride_b = 0;
        args.b.len = 64 * 128;
        check_launch(&PARTIAL, &args, RESIDENT).unwrap();
        args.batch.stride_a = 0;
        args.a.len = 128 * 64;
        check_launch(&PARTIAL, &args, RESIDENT).unwrap();
    }

    #[test]
    fn short_batch_buffers_name_the_length_the_last_matrix_needs() {
        // Padded strides: 3 products, A's matrices 9000 elements apart.
        let mut args = batched(128, 128, 64, 3);
        args.batch.stride_a = 9000;
        args.a.len = 2 * 9000 + 128 * 64 - 1;
        let error = check_launch(&PARTIAL, &args, RESIDENT).unwrap_err();
        assert!(
            matches!(
                error,
                Error::BatchBufferTooSmall {
                    operand: Operand::A,
                    needed,
                    count: 3,
                    stride: 9000,
                    matrix,
                    ..
                } if needed == 2 * 9000 + 128 * 64 && matrix == 128 * 64
            ),
            "{error:?}"
        );
        assert_eq!(
            error.to_string(),
            "A holds 26191 elements, but 3 matrices 9000 elements apart need 26192 ((count - 1) * stride_a + one matrix of 8192)"
        );
        args.a.len += 1;
        check_launch(&PARTIAL, &args, RESIDENT).unwrap();
        // A stride too large for any buffer is refused, not wrapped.
        args.batch.stride_a = 1 << 63;
        assert!(matches!(
            check_launch(&PARTIAL, &args, RESIDENT),
            Err(Error::BatchBufferTooSmall {
                needed: u64::MAX,
                ..
            })
        ));
    }

    #[test]
    fn overlapping_outputs_are_refused() {
        let mut args = batched(128, 128, 64, 2);
        // One C is 128 x 128: its matrices must lie at least 16384 elements apart.
        args.batch.stride_c = 16384 - 4;
        let error = check_launch(&PARTIAL, &args, RESIDENT).unwrap_err();
        assert!(
            matches!(
                error,
                Error::OverlappingBatch {
                    stride: 16380,
                    matrix: 16384
                }
            ),
            "{error:?}"
        );
        let message = error.to_string();
        assert!(message.contains("write over each other"), "{message}");
        assert!(message.contains("use stride_c >= 16384"), "{message}");
        // A shared C is an overlap too; with one product the strides do not matter.
        args.batch.stride_c = 0;
        assert!(matches!(
            check_launch(&PARTIAL, &args, RESIDENT),
            Err(Error::OverlappingBatch { stride: 0, .. })
        ));
        args.batch.count = 1;
        check_launch(&PARTIAL, &args, RESIDENT).unwrap();
        // The last row of a padded C needs only its columns.
        let mut args = batched(128, 128, 64, 2);
        args.c.ld = 132;
        args.batch.stride_c = 127 * 132 + 128;
        args.c.len = 2 * 127 * 132 + 2 * 128;
        check_launch(&PARTIAL, &args, RESIDENT).unwrap();
    }

    #[test]
    fn misaligned_batch_strides_name_the_operand_and_the_fix() {
        // bf16: 8 elements per 16 bytes, so stride_b = 8196 leaves the second B 8 B off.
        let bf16 = LaunchShape {
            input_element_bytes: 2,
            output_element_bytes: 2,
            ..PARTIAL
        };
        let mut args = batched(64, 128, 64, 2);
        args.batch.stride_b = 8196;
        args.b.len = 8196 + 64 * 128;
        let error = check_launch(&bf16, &args, RESIDENT).unwrap_err();
        assert!(
            matches!(
                error,
                Error::MisalignedBatchStride {
                    operand: Operand::B,
                    stride: 8196,
                    element_bytes: 2,
                    align: 16
                }
            ),
            "{error:?}"
        );
        let message = error.to_string();
        for needle in [
            "stride_b = 8196 elements = 16392 B is not a multiple of 16 B",
            "every matrix of B",
            "pad the batch to stride_b = 8200 (a multiple of 8 elements)",
        ] {
            assert!(message.contains(needle), "{message}");
        }
    }

    #[test]
    fn batch_counts_outside_one_to_the_z_limit_are_refused() {
        let mut args = batched(128, 128, 8, 1);
        args.batch.count = 0;
        let error = check_launch(&PARTIAL, &args, RESIDENT).unwrap_err();
        assert!(
            matches!(
                error,
                Error::BatchCount {
                    count: 0,
                    limit: 65_535
                }
            ),
            "{error:?}"
        );
        assert_eq!(
            error.to_string(),
            "a batch of 0 products: a batched launch computes 1 to 65535 products (the grid's z limit); split larger batches"
        );
        let args = batched(16, 16, 8, 65_535);
        assert_eq!(
            check_launch(&PARTIAL, &args, RESIDENT).unwrap(),
            (1, 1, 65_535)
        );
        let args = batched(16, 16, 8, 65_536);
        assert!(matches!(
            check_launch(&PARTIAL, &args, RESIDENT),
            Err(Error::BatchCount { count: 65_536, .. })
        ));
        assert!(PARTIAL.check_batched_dims(8, 8, 8, 0).is_err());
        // A persistent walk's 32-bit index over every product's tiles.
        let persistent = LaunchShape {
            schedule: GridSchedule::Persistent { group: 8 },
            tile_m: 16,
            tile_n: 16,
            ..PARTIAL
        };
        let error = persistent
            .check_batched_dims(1 << 14, 1 << 14, 8, 1024)
            .unwrap_err();
        assert!(error.contains("in each of 1024 products"), "{error}");
        persistent
            .check_batched_dims(1 << 14, 1 << 14, 8, 1)
            .unwrap();
        // A stream-K tail numbers every tile's k tiles with 32 bits.
        let stream_k = LaunchShape {
            workspace_bytes_per_block: 64 << 10,
            ..persistent
        };
        let (m, n) = (1 << 12, 1 << 12);
        persistent.check_batched_dims(m, n, 1 << 20, 1).unwrap();
        let error = stream_k.check_batched_dims(m, n, 1 << 20, 1).unwrap_err();
        assert!(
            error.contains("stream-K tail's 32-bit positions"),
            "{error}"
        );
        stream_k.check_batched_dims(m, n, 1 << 14, 1).unwrap();
    }

    #[test]
    fn packed_launch_passes_and_returns_the_grid() {
        assert_eq!(
            check_launch(&SHAPE, &packed(256, 384, 64), RESIDENT).unwrap(),
            (3, 2, 1)
        );
    }

    #[test]
    fn persistent_grids_hold_at_most_the_resident_blocks() {
        let persistent = LaunchShape {
            schedule: GridSchedule::Persistent { group: 8 },
            ..SHAPE
        };
        // 32 x 32 tiles: 8 rounds of the resident blocks, spread over 128 of them; 2 x 3
        // tiles: one block per tile.
        assert_eq!(
            check_launch(&persistent, &packed(4096, 4096, 64), RESIDENT).unwrap(),
            (128, 1, 1)
        );
        assert_eq!(
            check_launch(&persistent, &packed(256, 384, 64), RESIDENT).unwrap(),
            (6, 1, 1)
        );
        // A stream-K walk shares the 6 tiles' 8 k tiles each: 48 blocks; 40 k tiles each
        // would need 240, the device holds 132.
        let stream_k = LaunchShape {
            workspace_bytes_per_block: 64 << 10,
            ..persistent
        };
        assert_eq!(
            check_launch(&stream_k, &packed(256, 384, 64), RESIDENT).unwrap(),
            (48, 1, 1)
        );
        assert_eq!(
            check_launch(&stream_k, &packed(256, 384, 320), RESIDENT).unwrap(),
            (132, 1, 1)
        );
        // The tile index is 32-bit: a problem of more than 2^30 tiles is refused, not wrapped.
        let wide = LaunchShape {
            tile_m: 16,
            tile_n: 16,
            ..persistent
        };
        let error = wide.check_dims(1 << 20, 1 << 20, 8).unwrap_err();
        assert!(error.contains("32-bit tile index"), "{error}");
    }

    #[test]
    fn balanced_grids_keep_the_rounds_on_fewer_blocks() {
        let persistent = LaunchShape {
            schedule: GridSchedule::Persistent { group: 8 },
            ..SHAPE
        };
        let balanced =
            |shape: &LaunchShape, m, n, k, batch| shape.grid_batched(m, n, k, batch, RESIDENT);
        // 32 x 32 tiles: 8 rounds of 132 blocks, or of 128; 24 x 24: 5 rounds on 116.
        assert_eq!(balanced(&persistent, 4096, 4096, 64, 1), (128, 1, 1));
        assert_eq!(balanced(&persistent, 3072, 3072, 64, 1), (116, 1, 1));
        // Three products of 32 x 32 tiles: 24 rounds on 128 blocks; fewer tiles than blocks:
        // one block per tile, as without balancing.
        assert_eq!(balanced(&persistent, 4096, 4096, 64, 3), (128, 1, 1));
        assert_eq!(balanced(&persistent, 256, 384, 64, 1), (6, 1, 1));
        // Two-block clusters: 512 cluster tiles, 8 rounds of the 66 clusters, or of 64.
        let cluster = LaunchShape {
            cluster: (2, 1),
            ..persistent
        };
        assert_eq!(balanced(&cluster, 4096, 4096, 64, 1), (128, 1, 1));
        // A stream-K walk keeps every block: each takes a share of the tail.
        let stream_k = LaunchShape {
            workspace_bytes_per_block: 64 << 10,
            ..persistent
        };
        assert_eq!(balanced(&stream_k, 4096, 4096, 64, 1), (RESIDENT, 1, 1));
        // Whatever the shape, the rounds stay those of the full grid.
        for size in (256..=8192).step_by(256) {
            let full = persistent.full_grid_batched(size, size, 64, 1, RESIDENT).0;
            let even = balanced(&persistent, size, size, 64, 1).0;
            let tiles = (size / 128) * (size / 128);
            assert!(even <= full, "{size}");
            assert_eq!(tiles.div_ceil(even), tiles.div_ceil(full), "{size}");
        }
    }

    #[test]
    fn padded_leading_dims_pass_when_aligned() {
        let mut args = packed(128, 128, 16);
        args.a.ld = 20;
        args.a.len = elements_needed(128, 16, 20) as usize;
        args.c.ld = 132;
        args.c.len = elements_needed(128, 128, 132) as usize;
        check_launch(&SHAPE, &args, RESIDENT).unwrap();
    }

    #[test]
    fn dims_that_are_not_tile_multiples_are_rejected() {
        let error = check_launch(&SHAPE, &packed(256, 200, 64), RESIDENT).unwrap_err();
        assert!(matches!(error, Error::Dims { n: 200, .. }), "{error:?}");
        let message = error.to_string();
        assert!(message.contains("256 x 200 x 64"), "{message}");
        assert!(message.contains("N = 200"), "{message}");
        assert!(message.contains("128"), "{message}");
        let zero_k = check_launch(&SHAPE, &packed(128, 128, 0), RESIDENT).unwrap_err();
        assert!(matches!(zero_k, Error::Dims { k: 0, .. }), "{zero_k:?}");
    }

    /// Like the SIMT catalog entries: any M, N, K of at least 1.
    const PARTIAL: LaunchShape = LaunchShape {
        partial_tiles: true,
        ..SHAPE
    };

    /// `packed` with each row of A, B and C padded to `lda`, `ldb`, `ldc` elements.
    fn padded(m: u32, n: u32, k: u32, (lda, ldb, ldc): (u32, u32, u32)) -> LaunchArgs {
        let mut args = packed(m, n, k);
        for (arg, rows, ld) in [
            (&mut args.a, m, lda),
            (&mut args.b, k, ldb),
            (&mut args.c, m, ldc),
        ] {
            arg.ld = ld;
            arg.len = (rows * ld) as usize;
        }
        args
    }

    #[test]
    fn partial_tile_kernels_take_any_positive_dims() {
        // Rows padded to 16 bytes: 777 x 4099 x 2048 and every size around one tile.
        let args = padded(777, 4099, 2048, (2048, 4100, 4100));
        assert_eq!(check_launch(&PARTIAL, &args, RESIDENT).unwrap(), (33, 7, 1));
        for (m, n, k) in [(1, 1, 1), (127, 129, 7), (129, 127, 9), (1, 4096, 3)] {
            let round = |v: u32| v.div_ceil(4) * 4;
            let args = padded(m, n, k, (round(k), round(n), round(n)));
            let (tiles_m, tiles_n) = PARTIAL.tiles(m, n);
            assert_eq!(
                check_launch(&PARTIAL, &args, RESIDENT).unwrap(),
                (tiles_n, tiles_m, 1)
            );
        }
        let zero = check_launch(&PARTIAL, &packed(0, 8, 8), RESIDENT).unwrap_err();
        assert!(zero.to_string().contains("M = 0"), "{zero}");
    }

    #[test]
    fn packed_rows_that_break_the_copy_width_name_the_padding_that_fixes_them() {
        // K = 1234 f32: packed rows of A are 4936 B, not a multiple of 16.
        let error = check_launch(&PARTIAL, &packed(64, 64, 1234), RESIDENT).unwrap_err();
        assert!(
            matches!(
                error,
                Error::MisalignedLeadingDim {
                    operand: Operand::A,
                    order: StorageOrder::RowMajor,
                    ld: 1234,
                    element_bytes: 4,
                    align: 16,
                    ..
                }
            ),
            "{error:?}"
        );
        let message = error.to_string();
        for needle in [
            "lda = 1234 elements = 4936 B is not a multiple of 16 B",
            "copies 16-byte vectors",
            "pad the rows to lda = 1236 (a multiple of 4 elements)",
            "launch_with_ld",
        ] {
            assert!(message.contains(needle), "{message}");
        }
        // N = 4099 bf16: B's and C's rows break it too; padded, the launch passes.
        let bf16 = LaunchShape {
            input_element_bytes: 2,
            ..PARTIAL
        };
        let error =
            check_launch(&bf16, &padded(64, 4099, 64, (64, 4099, 4100)), RESIDENT).unwrap_err();
        assert!(
            error.to_string().contains("ldb = 4099 elements = 8198 B")
                && error
                    .to_string()
                    .contains("ldb = 4104 (a multiple of 8 elements)"),
            "{error}"
        );
        check_launch(&bf16, &padded(64, 4099, 64, (64, 4104, 4100)), RESIDENT).unwrap();
    }

    #[test]
    fn grids_over_the_hardware_limit_are_rejected() {
        // 65536 row tiles of 128 would need grid.y = 65536 > 65535.
        let m = 65_536 * 128;
        let error = check_launch(&SHAPE, &packed(m, 128, 8), RESIDENT).unwrap_err();
        match &error {
            Error::GridTooLarge {
                axis,
                blocks,
                limit,
            } => assert_eq!((*axis, *blocks, *limit), ('y', 65_536, 65_535)),
            other => panic!("expected GridTooLarge, got {other:?}"),
        }
        assert!(error.to_string().contains("65536 blocks along y"));
    }

    #[test]
    fn short_buffers_are_rejected_with_the_needed_length() {
        let mut args = packed(128, 256, 32);
        args.b.len -= 1;
        let error = check_launch(&SHAPE, &args, RESIDENT).unwrap_err();
        match &error {
            Error::BufferTooSmall {
                operand,
                order,
                len,
                needed,
                rows,
                cols,
                ld,
            } => {
                assert_eq!((*operand, *order), (Operand::B, StorageOrder::RowMajor));
                assert_eq!((*len, *needed), (32 * 256 - 1, 32 * 256));
                assert_eq!((*rows, *cols, *ld), (32, 256, 256));
            }
            other => panic!("expected BufferTooSmall, got {other:?}"),
        }
        let message = error.to_string();
        assert!(message.contains("B holds 8191 elements"), "{message}");
        assert!(message.contains("need 8192"), "{message}");
    }

    /// A column-major operand is lines of columns: its leading dimension covers a column (M
    /// for A, K for B), and its buffer K (or N) of them.
    #[test]
    fn column_major_operands_are_checked_by_columns() {
        let shape = LaunchShape {
            a_order: StorageOrder::ColMajor,
            b_order: StorageOrder::ColMajor,
            c_order: StorageOrder::RowMajor,
            ..SHAPE
        };
        let (m, n, k) = (256, 128, 32);
        let mut args = packed(m, n, k);
        // Packed column-major: A is K columns of M, B is N columns of K.
        args.a.ld = m;
        args.b.ld = k;
        check_launch(&shape, &args, RESIDENT).unwrap();
        args.a.ld = k;
        let error = check_launch(&shape, &args, RESIDENT).unwrap_err();
        assert!(
            matches!(
                error,
                Error::LeadingDimTooSmall {
                    operand: Operand::A,
                    order: StorageOrder::ColMajor,
                    ld: 32,
                    row_len: 256
                }
            ),
            "{error:?}"
        );
        assert_eq!(
            error.to_string(),
            "lda = 32 is shorter than a column of A (256 elements; the operand is column-major)"
        );
        args.a.ld = m + 4;
        let error = check_launch(&shape, &args, RESIDENT).unwrap_err();
        assert!(
            matches!(
                error,
                Error::BufferTooSmall { operand: Operand::A, order: StorageOrder::ColMajor, needed, .. }
                    if needed == u64::from((k - 1) * (m + 4) + m)
            ),
            "{error:?}"
        );
        assert!(
            error.to_string().contains("32 columns x 256 rows"),
            "{error}"
        );
    }

    /// Every layout of the cp.async families: a packed column-major operand whose columns are
    /// no 16-byte multiple is refused naming the operand, its column length and the padded
    /// leading dimension; padded, the launch passes.
    #[test]
    fn packed_columns_that_break_the_copy_width_name_the_padding_that_fixes_them() {
        let orders = |a, b| LaunchShape {
            a_order: a,
            b_order: b,
            c_order: StorageOrder::RowMajor,
            ..PARTIAL
        };
        use StorageOrder::{ColMajor, RowMajor};
        // M = 777, K = 1234, N = 64 f32: a column of A is 777 elements, a column of B 1234.
        let (m, n, k) = (777, 64, 1234);
        let column_major = |args: &mut LaunchArgs, a: bool, b: bool| {
            if a {
                args.a.ld = m;
            }
            if b {
                args.b.ld = k;
            }
        };
        for (a_col, b_col) in [(true, false), (false, true), (true, true)] {
            let shape = orders(
                if a_col { ColMajor } else { RowMajor },
                if b_col { ColMajor } else { RowMajor },
            );
            let mut args = packed(m, n, k);
            column_major(&mut args, a_col, b_col);
            // A row-major A of K = 1234 breaks the alignment too: pad it first.
            if !a_col {
                args.a.ld = 1236;
                args.a.len = elements_needed(m, k, 1236) as usize;
            }
            let error = check_launch(&shape, &args, RESIDENT).unwrap_err();
            let (operand, ld, fix, line) = if a_col {
                (Operand::A, m, 780, "column")
            } else {
                (Operand::B, k, 1236, "column")
            };
            assert!(
                matches!(
                    error,
                    Error::MisalignedLeadingDim { operand: o, order: ColMajor, ld: l, element_bytes: 4, align: 16, .. }
                        if o == operand && l == ld
                ),
                "{error:?}"
            );
            let message = error.to_string();
            let name = if operand == Operand::A { "lda" } else { "ldb" };
            for needle in [
                format!(
                    "{name} = {ld} elements = {} B is not a multiple of 16 B",
                    4 * ld
                ),
                format!("every {line} of {operand} must start 16-byte aligned"),
                "the operand is column-major".to_string(),
                format!("pad the {line}s to {name} = {fix} (a multiple of 4 elements)"),
            ] {
                assert!(message.contains(&needle), "{needle}: {message}");
            }
            // Padded as the message says, every column-major operand passes.
            if a_col {
                args.a.ld = 780;
                args.a.len = elements_needed(k, m, 780) as usize;
            }
            if b_col {
                args.b.ld = 1236;
                args.b.len = elements_needed(n, k, 1236) as usize;
            }
            args.c.ld = 64;
            check_launch(&shape, &args, RESIDENT).unwrap();
        }
    }

    #[test]
    fn the_last_row_needs_only_its_columns() {
        assert_eq!(elements_needed(3, 4, 10), 24);
        assert_eq!(elements_needed(1, 4, 10), 4);
        let mut args = packed(128, 128, 8);
        args.c.ld = 132;
        args.c.len = 127 * 132 + 128;
        check_launch(&SHAPE, &args, RESIDENT).unwrap();
        args.c.len -= 1;
        assert!(matches!(
            check_launch(&SHAPE, &args, RESIDENT),
            Err(Error::BufferTooSmall {
                operand: Operand::C,
                needed: 16892,
                ..
            })
        ));
    }

    #[test]
    fn leading_dims_shorter_than_a_row_are_rejected() {
        let mut args = packed(128, 128, 16);
        args.a.ld = 12;
        let error = check_launch(&SHAPE, &args, RESIDENT).unwrap_err();
        assert!(
            matches!(
                error,
                Error::LeadingDimTooSmall {
                    operand: Operand::A,
                    order: StorageOrder::RowMajor,
                    ld: 12,
                    row_len: 16
                }
            ),
            "{error:?}"
        );
        assert_eq!(
            error.to_string(),
            "lda = 12 is shorter than a row of A (16 elements)"
        );
    }

    #[test]
    fn misaligned_pointers_are_rejected() {
        let mut args = packed(128, 128, 8);
        args.c.address += 4;
        let error = check_launch(&SHAPE, &args, RESIDENT).unwrap_err();
        assert!(
            matches!(
                error,
                Error::MisalignedPointer {
                    operand: Operand::C,
                    align: 16,
                    ..
                }
            ),
            "{error:?}"
        );
        assert!(error
            .to_string()
            .contains("not 16-byte aligned (off by 4 B)"));
    }

    #[test]
    fn misaligned_leading_dims_are_rejected() {
        let mut args = packed(128, 128, 8);
        // 130 floats = 520 B per row: the second row starts 8 B off a 16-B boundary.
        args.b.ld = 130;
        args.b.len = elements_needed(8, 128, 130) as usize;
        let error = check_launch(&SHAPE, &args, RESIDENT).unwrap_err();
        assert!(
            matches!(
                error,
                Error::MisalignedLeadingDim {
                    operand: Operand::B,
                    order: StorageOrder::RowMajor,
                    ld: 130,
                    element_bytes: 4,
                    align: 16,
                    ..
                }
            ),
            "{error:?}"
        );
        assert!(error
            .to_string()
            .contains("520 B is not a multiple of 16 B"));
    }

    #[test]
    fn misaligned_leading_dims_name_the_narrower_copy_that_takes_them() {
        // f32, ldb = 129: 516 B lines, a multiple of 4 but not 8.
        let shape = LaunchShape {
            partial_tiles: true,
            ..SHAPE
        };
        let mut args = packed(128, 129, 8);
        args.c.ld = 132;
        args.c.len = elements_needed(128, 129, 132) as usize;
        let error = check_launch(&shape, &args, RESIDENT).unwrap_err();
        assert_eq!(
            error.to_string(),
            "ldb = 129 elements = 516 B is not a multiple of 16 B: the kernel copies 16-byte vectors, \
             so every row of B must start 16-byte aligned (a packed B has ldb = its row length); \
             pad the rows to ldb = 132 (a multiple of 4 elements) and launch with `launch_with_ld`, \
             or re-specify with `copy: cp_async(ca, vector = 4)`"
        );
        // bf16 with an odd lda: only 2-byte loads keep the rows aligned.
        let bf16 = LaunchShape {
            input_element_bytes: 2,
            output_element_bytes: 2,
            ..shape
        };
        let args = packed(128, 128, 9);
        let error = check_launch(&bf16, &args, RESIDENT).unwrap_err();
        assert!(
            error
                .to_string()
                .ends_with("pad the rows to lda = 16 (a multiple of 8 elements) and launch with `launch_with_ld`, or re-specify with `copy: sync(vector = 2)`"),
            "{error}"
        );
        // 12-byte lines (lda = 6 bf16) take 4-byte cp.async copies; a sync kernel 4-byte loads.
        let args6 = packed(128, 128, 6);
        let error = check_launch(&bf16, &args6, RESIDENT).unwrap_err();
        assert!(
            error
                .to_string()
                .ends_with("`copy: cp_async(ca, vector = 4)`"),
            "{error}"
        );
        let sync = LaunchShape {
            copy_path: CopyPath::Sync,
            ..bf16
        };
        let error = check_launch(&sync, &args6, RESIDENT).unwrap_err();
        assert!(
            error.to_string().ends_with("`copy: sync(vector = 4)`"),
            "{error}"
        );
        // The TMA takes no narrower vector: pad, or an mma.sync spec.
        let tma = LaunchShape {
            copy_path: CopyPath::Tma,
            ..bf16
        };
        let error = check_launch(&tma, &args6, RESIDENT).unwrap_err();
        let text = error.to_string();
        assert!(
            text.contains("B is not a multiple of 16 B: the TMA needs 16-byte strides"),
            "{text}"
        );
        assert!(
            text.ends_with("or use an mma.sync spec with a narrower vector, e.g. `copy: cp_async(ca, vector = 4)`"),
            "{text}"
        );
    }

    #[test]
    fn narrow_vectors_take_narrow_leading_dims_and_c_follows_its_stores() {
        // A 4-byte-vector f32 kernel stores C in 4-byte vectors too: odd lda, ldb and ldc
        // all pass, and C may be packed (ldc = N).
        let narrow = LaunchShape {
            operand_align_bytes: 4,
            output_align_bytes: 4,
            partial_tiles: true,
            ..SHAPE
        };
        let mut args = packed(100, 129, 7);
        check_launch(&narrow, &args, RESIDENT).unwrap();
        args.a.address += 4;
        args.c.address += 4;
        check_launch(&narrow, &args, RESIDENT).unwrap();
        // C's batch stride needs only the store's alignment: 99 x 129 f32 matrices back to
        // back are 51084 B apart, no 16-byte multiple.
        let batch = batched(99, 129, 7, 2);
        assert_eq!(batch.batch.stride_c * 4 % 16, 12);
        check_launch(&narrow, &batch, RESIDENT).unwrap();
        // A pointer off the 4-byte vector is refused.
        args.b.address += 2;
        assert!(matches!(
            check_launch(&narrow, &args, RESIDENT).unwrap_err(),
            Error::MisalignedPointer {
                operand: Operand::B,
                align: 4,
                ..
            }
        ));

        // An 8-byte-vector kernel stores f32 C in 8-byte vectors: an even ldc passes, an odd
        // one is refused with the 4-byte spec that takes it.
        let eight = LaunchShape {
            operand_align_bytes: 8,
            output_align_bytes: 8,
            partial_tiles: true,
            ..SHAPE
        };
        let mut args = packed(100, 130, 8);
        check_launch(&eight, &args, RESIDENT).unwrap();
        args = packed(100, 129, 8);
        args.b.ld = 130;
        args.b.len = elements_needed(8, 129, 130) as usize;
        let error = check_launch(&eight, &args, RESIDENT).unwrap_err();
        assert!(
            matches!(
                error,
                Error::MisalignedLeadingDim {
                    operand: Operand::C,
                    ld: 129,
                    align: 8,
                    ..
                }
            ),
            "{error:?}"
        );
        assert_eq!(
            error.to_string(),
            "ldc = 129 elements = 516 B is not a multiple of 8 B: the kernel stores C in 8-byte vectors, \
             no wider than its copy vector, so every row of C must start 8-byte aligned (a packed C has ldc = its row length); \
             pad the rows to ldc = 130 (a multiple of 2 elements) and launch with `launch_with_ld`, \
             or re-specify with `copy: cp_async(ca, vector = 4)`"
        );

        // A 2-byte sync kernel with bf16 C: odd ldc passes.
        let sync2 = LaunchShape {
            operand_align_bytes: 2,
            output_align_bytes: 2,
            input_element_bytes: 2,
            output_element_bytes: 2,
            copy_path: CopyPath::Sync,
            partial_tiles: true,
            ..SHAPE
        };
        check_launch(&sync2, &packed(33, 17, 7), RESIDENT).unwrap();
    }

    #[test]
    fn sixteen_byte_kernels_refuse_a_narrow_ldc_with_the_spec_that_takes_it() {
        let shape = LaunchShape {
            partial_tiles: true,
            ..SHAPE
        };
        // f32 C with ldc = N = 129: 516 B rows take 4-byte stores (B padded to 132).
        let mut args = packed(100, 129, 8);
        args.b.ld = 132;
        args.b.len = elements_needed(8, 129, 132) as usize;
        let error = check_launch(&shape, &args, RESIDENT).unwrap_err();
        assert!(
            matches!(
                error,
                Error::MisalignedLeadingDim {
                    operand: Operand::C,
                    align: 16,
                    ..
                }
            ),
            "{error:?}"
        );
        let text = error.to_string();
        assert!(
            text.contains("the kernel stores C in 16-byte vectors, no wider than its copy vector"),
            "{text}"
        );
        assert!(
            text.ends_with("pad the rows to ldc = 132 (a multiple of 4 elements) and launch with `launch_with_ld`, or re-specify with `copy: cp_async(ca, vector = 4)`"),
            "{text}"
        );
        // bf16 C with an odd ldc: only 2-byte stores, `sync(vector = 2)`.
        let bf16 = LaunchShape {
            input_element_bytes: 2,
            output_element_bytes: 2,
            ..shape
        };
        args.b.ld = 136;
        args.b.len = elements_needed(8, 129, 136) as usize;
        let error = check_launch(&bf16, &args, RESIDENT).unwrap_err();
        assert!(
            error.to_string().ends_with("`copy: sync(vector = 2)`"),
            "{error}"
        );
        // The TMA's kernel points at an mma.sync spec.
        let tma = LaunchShape {
            copy_path: CopyPath::Tma,
            ..bf16
        };
        let text = check_launch(&tma, &args, RESIDENT).unwrap_err().to_string();
        assert!(
            text.contains("the kernel stores C in 16-byte vectors, so every row of C"),
            "{text}"
        );
        assert!(
            text.ends_with(
                "or use an mma.sync spec with a narrower vector, e.g. `copy: sync(vector = 2)`"
            ),
            "{text}"
        );
    }

    #[test]
    fn output_alignment_uses_the_output_element_size() {
        // bf16 in, f32 out: ldc = 4 f32 = 16 B is fine, lda = 4 bf16 = 8 B is not.
        let shape = LaunchShape {
            input_element_bytes: 2,
            tile_m: 4,
            tile_n: 4,
            tile_k: 4,
            ..SHAPE
        };
        let mut args = packed(4, 4, 4);
        args.b.ld = 8;
        args.b.len = 32;
        let error = check_launch(&shape, &args, RESIDENT).unwrap_err();
        assert!(matches!(
            error,
            Error::MisalignedLeadingDim {
                operand: Operand::A,
                element_bytes: 2,
                ..
            }
        ));
    }

    #[test]
    fn arch_rules() {
        check_arch("k", &SHAPE, 80).unwrap();
        check_arch("k", &SHAPE, 90).unwrap();
        let too_old = check_arch("k", &SHAPE, 75).unwrap_err();
        assert_eq!(
            too_old.to_string(),
            "`k` needs compute capability 8.0 or newer; this device is 7.5"
        );
        let hopper_only = LaunchShape {
            compute_capability: 90,
            arch_specific: true,
            ..SHAPE
        };
        check_arch("h", &hopper_only, 90).unwrap();
        let newer = check_arch("h", &hopper_only, 100).unwrap_err();
        assert!(matches!(
            newer,
            Error::ArchMismatch {
                kernel_cc: 90,
                device_cc: 100,
                arch_specific: true,
                ..
            }
        ));
        assert!(newer
            .to_string()
            .contains("9.0a, which runs only on compute capability 9.0"));
        assert!(check_arch("h", &hopper_only, 89).is_err());
    }

    /// A grouped launch: B's experts back to back (its stride returned), the table one entry
    /// per expert at least, 1 to 1024 experts, a masked buffer of whole experts.
    #[test]
    fn grouped_launches_check_the_experts_the_host_knows() {
        let (rows, n, k) = (300, 256, 64);
        let mut args = packed(rows, n, k);
        args.b.len *= 8;
        let dims = GroupedDims {
            groups: 8,
            rows,
            n,
            k,
        };
        assert_eq!(
            check_grouped_launch(&PARTIAL, &args, dims, false, 8),
            Ok(u64::from(k * n))
        );
        let error = |dims, masked, table_len, args: &LaunchArgs| {
            check_grouped_launch(&PARTIAL, args, dims, masked, table_len).unwrap_err()
        };
        assert!(error(GroupedDims { groups: 0, ..dims }, false, 8, &args).contains("0 experts"));
        assert!(error(
            GroupedDims {
                groups: 1025,
                ..dims
            },
            false,
            2000,
            &args
        )
        .contains("1 to 1024"));
        assert!(error(dims, false, 7, &args).contains("holds 7 entries, fewer than the 8"));
        assert!(error(dims, true, 8, &args).contains("300 rows are not 8 experts"));
        assert_eq!(
            check_grouped_launch(&PARTIAL, &args, GroupedDims { groups: 4, ..dims }, true, 4),
            Ok(u64::from(k * n))
        );
        let mut short = args;
        short.b.len -= 1;
        assert!(error(dims, false, 8, &short).starts_with("B's experts"));
    }

    /// 128 rows of 128 experts may make 128 row tiles (one row each), not one: the grid must
    /// not be sized by the buffer's rows.
    #[test]
    fn a_grouped_grid_is_sized_for_the_most_tiles_the_table_can_make() {
        let dims = GroupedDims {
            groups: 128,
            rows: 128,
            n: 1536,
            k: 2048,
        };
        let tall = grouped_walk_rows(&PARTIAL, dims, false);
        assert_eq!(tall, 128 + 128 * PARTIAL.tile_m);
        assert_eq!(PARTIAL.tiles(tall, dims.n).0, 129);
        let masked = GroupedDims {
            groups: 4,
            rows: 4 * 200,
            ..dims
        };
        assert_eq!(grouped_walk_rows(&PARTIAL, masked, true), 4 * 256);
    }
}
