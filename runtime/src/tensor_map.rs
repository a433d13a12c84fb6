//! Tensor maps: the Tensor Memory Accelerator's description of an operand's global matrices,
//! encoded on the host at launch for the actual pointer, sizes, row stride and batch stride,
//! and passed to the kernel by value.

use crate::error::{DriverContext, Error};
use cudarc::driver::sys::{
    self, CUtensorMapDataType, CUtensorMapFloatOOBfill, CUtensorMapInterleave,
    CUtensorMapL2promotion, CUtensorMapSwizzle,
};
use gemm_dsl::abi::{TensorMapBox, TENSOR_MAP_ALIGN, TENSOR_MAP_BYTES};

/// A `CUtensorMap`: 128 opaque bytes that the driver fills and the kernel reads.
#[derive(Clone, Copy, Debug)]
#[repr(transparent)]
pub struct TensorMap(sys::CUtensorMap);

const _: () = assert!(std::mem::size_of::<TensorMap>() == TENSOR_MAP_BYTES as usize);
const _: () = assert!(std::mem::align_of::<TensorMap>().is_multiple_of(TENSOR_MAP_ALIGN as usize));

/// Row-major matrices in device memory: `rows x cols` elements of `element_bytes`, rows `ld`
/// elements apart; `matrices` of them (a strided batch), `matrix_stride` elements apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GlobalMatrix {
    pub address: u64,
    pub rows: u32,
    pub cols: u32,
    pub ld: u32,
    pub element_bytes: u32,
    /// At least 1; with 1, `matrix_stride` is not used.
    pub matrices: u32,
    pub matrix_stride: u64,
}

impl TensorMap {
    /// Encodes the map the kernel's `tile` describes over `matrix`, rank 3: columns, rows and
    /// matrices. Out-of-bounds parts of a box read as zeros, which is what lets the kernel
    /// compute partial edge tiles.
    pub fn encode(
        tile: &TensorMapBox,
        matrix: GlobalMatrix,
        data_type: CUtensorMapDataType,
    ) -> Result<TensorMap, Error> {
        let GlobalMatrix {
            address,
            rows,
            cols,
            ld,
            element_bytes,
            matrices,
            matrix_stride,
        } = matrix;
        let row_bytes = u64::from(ld) * u64::from(element_bytes);
        // One matrix is never stepped over, but its stride must still be a valid one: a
        // 16-byte multiple, past the matrix.
        let matrix_bytes = if matrices > 1 {
            matrix_stride * u64::from(element_bytes)
        } else {
            (u64::from(rows) * row_bytes).div_ceil(16).max(1) * 16
        };
        let global_dims: [u64; 3] = [u64::from(cols), u64::from(rows), u64::from(matrices)];
        // The strides of the outer dimensions, in bytes (the inner one is the element).
        let global_strides: [u64; 2] = [row_bytes, matrix_bytes];
        let box_dims: [u32; 3] = [tile.inner, tile.outer, 1];
        let element_strides: [u32; 3] = [1, 1, 1];
        let swizzle = match tile.swizzle_bytes {
            0 => CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_NONE,
            32 => CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_32B,
            64 => CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_64B,
            _ => CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_128B,
        };
        let mut map = std::mem::MaybeUninit::<sys::CUtensorMap>::uninit();
        // SAFETY: every pointer refers to a live local array of the length the rank (3)
        // implies; the driver writes the 128-byte map and reads nothing at `address`.
        unsafe {
            sys::cuTensorMapEncodeTiled(
                map.as_mut_ptr(),
                data_type,
                3,
                address as *mut std::ffi::c_void,
                global_dims.as_ptr(),
                global_strides.as_ptr(),
                box_dims.as_ptr(),
                element_strides.as_ptr(),
                CUtensorMapInterleave::CU_TENSOR_MAP_INTERLEAVE_NONE,
                swizzle,
                // 128-byte promotion, not 256: the same speed for 128-byte-aligned rows, and
                // 18 % faster where row strides split cache lines (4096x4104x4096 bf16 on an
                // H100, results/strides-2026-11-23/README.md).
                CUtensorMapL2promotion::CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                CUtensorMapFloatOOBfill::CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
            )
        }
        .result()
        .during(|| {
            format!(
                "encoding the tensor map of {} ({matrices} x {rows} x {cols}, ld {ld}, matrices {matrix_bytes} B apart, box {} x {}, {}-byte swizzle)",
                tile.operand, tile.outer, tile.inner, tile.swizzle_bytes
            )
        })?;
        // SAFETY: the call succeeded, so the driver wrote the whole map.
        Ok(TensorMap(unsafe { map.assume_init() }))
    }
}
