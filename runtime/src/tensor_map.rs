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

/// Tensor maps encoded before, each under what it describes: a serving loop launches the same
/// problem on the same buffers again and again, and encoding one costs a driver call. A map
/// holds only addresses, sizes and strides (no hold on the memory), so one encoded for a
/// freed buffer is still the right map for whatever now lies at that address with those
/// sizes. The oldest entry makes room for a new one.
pub(crate) struct TensorMapCache {
    entries: std::sync::Mutex<MapEntries>,
}

/// What fixes an encoded map: everything [`TensorMap::encode`] passes to the driver.
#[derive(Clone, Copy, PartialEq, Eq)]
struct MapKey {
    tile: TensorMapBox,
    matrix: GlobalMatrix,
    data_type: CUtensorMapDataType,
}

struct MapEntries {
    entries: Vec<(MapKey, TensorMap)>,
    /// The slot the next new map replaces once every slot is taken.
    next_slot: usize,
}

impl TensorMapCache {
    /// Maps kept per kernel: its two or three operands' maps for several buffer sets (a
    /// rotation of inputs, a few layers' weights).
    const CAPACITY: usize = 32;

    pub(crate) fn new() -> TensorMapCache {
        TensorMapCache {
            entries: std::sync::Mutex::new(MapEntries {
                entries: Vec::with_capacity(Self::CAPACITY),
                next_slot: 0,
            }),
        }
    }

    /// The map [`TensorMap::encode`] returns for these arguments, encoded only when none
    /// is kept for them.
    pub(crate) fn encode(
        &self,
        tile: &TensorMapBox,
        matrix: GlobalMatrix,
        data_type: CUtensorMapDataType,
    ) -> Result<TensorMap, Error> {
        self.encode_with(tile, matrix, data_type, TensorMap::encode)
    }

    fn encode_with(
        &self,
        tile: &TensorMapBox,
        matrix: GlobalMatrix,
        data_type: CUtensorMapDataType,
        encode: impl FnOnce(
            &TensorMapBox,
            GlobalMatrix,
            CUtensorMapDataType,
        ) -> Result<TensorMap, Error>,
    ) -> Result<TensorMap, Error> {
        let key = MapKey {
            tile: *tile,
            matrix,
            data_type,
        };
        let mut cache = self
            .entries
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some((_, map)) = cache.entries.iter().find(|(kept, _)| *kept == key) {
            return Ok(*map);
        }
        let map = encode(tile, matrix, data_type)?;
        if cache.entries.len() < Self::CAPACITY {
            cache.entries.push((key, map));
        } else {
            let slot = cache.next_slot;
            cache.entries[slot] = (key, map);
            cache.next_slot = (slot + 1) % Self::CAPACITY;
        }
        Ok(map)
    }

    /// How many maps are kept.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.entries.lock().unwrap().entries.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gemm_dsl::abi::Operand;
    use std::cell::Cell;

    fn matrix(address: u64) -> GlobalMatrix {
        GlobalMatrix {
            address,
            rows: 128,
            cols: 64,
            ld: 64,
            element_bytes: 2,
            matrices: 1,
            matrix_stride: 0,
        }
    }

    const TILE: TensorMapBox = TensorMapBox {
        operand: Operand::A,
        inner: 64,
        outer: 128,
        swizzle_bytes: 128,
    };
    const BF16: CUtensorMapDataType = CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;

    /// A stand-in for the driver's encoder: a map whose first word is the address, and a
    /// count of the calls.
    fn fake(
        calls: &Cell<u32>,
    ) -> impl Fn(&TensorMapBox, GlobalMatrix, CUtensorMapDataType) -> Result<TensorMap, Error> + '_
    {
        move |_, matrix, _| {
            calls.set(calls.get() + 1);
            // SAFETY: a CUtensorMap is plain words, valid when zeroed.
            let mut map: sys::CUtensorMap = unsafe { std::mem::zeroed() };
            map.opaque[0] = matrix.address;
            Ok(TensorMap(map))
        }
    }

    #[test]
    fn a_map_is_encoded_once_per_matrix_tile_and_type() {
        let cache = TensorMapCache::new();
        let calls = Cell::new(0);
        for _ in 0..3 {
            let map = cache
                .encode_with(&TILE, matrix(0x1000), BF16, fake(&calls))
                .unwrap();
            assert_eq!(map.0.opaque[0], 0x1000);
        }
        assert_eq!(calls.get(), 1);
        // Any other address, size, stride, box or type is another map.
        let taller = GlobalMatrix {
            rows: 256,
            ..matrix(0x1000)
        };
        let strided = GlobalMatrix {
            ld: 72,
            ..matrix(0x1000)
        };
        let other_box = TensorMapBox { outer: 64, ..TILE };
        cache
            .encode_with(&TILE, matrix(0x2000), BF16, fake(&calls))
            .unwrap();
        cache
            .encode_with(&TILE, taller, BF16, fake(&calls))
            .unwrap();
        cache
            .encode_with(&TILE, strided, BF16, fake(&calls))
            .unwrap();
        cache
            .encode_with(&other_box, matrix(0x1000), BF16, fake(&calls))
            .unwrap();
        let f16 = CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
        cache
            .encode_with(&TILE, matrix(0x1000), f16, fake(&calls))
            .unwrap();
        assert_eq!(calls.get(), 6);
        assert_eq!(cache.len(), 6);
    }

    #[test]
    fn the_cache_keeps_its_capacity_and_replaces_the_oldest() {
        let cache = TensorMapCache::new();
        let calls = Cell::new(0);
        let capacity = TensorMapCache::CAPACITY as u64;
        for address in 0..capacity + 1 {
            cache
                .encode_with(&TILE, matrix(address * 256), BF16, fake(&calls))
                .unwrap();
        }
        assert_eq!(cache.len(), TensorMapCache::CAPACITY);
        // The first map made room for the last; the second is still kept.
        cache
            .encode_with(&TILE, matrix(256), BF16, fake(&calls))
            .unwrap();
        assert_eq!(calls.get(), capacity as u32 + 1);
        let map = cache
            .encode_with(&TILE, matrix(0), BF16, fake(&calls))
            .unwrap();
        assert_eq!(calls.get(), capacity as u32 + 2);
        assert_eq!(map.0.opaque[0], 0);
    }

    #[test]
    fn a_failed_encoding_is_not_kept() {
        let cache = TensorMapCache::new();
        let failing = |_: &TensorMapBox, _: GlobalMatrix, _: CUtensorMapDataType| {
            Err(Error::BatchMismatch {
                problem: 1,
                batch: 2,
            })
        };
        assert!(cache
            .encode_with(&TILE, matrix(0x1000), BF16, failing)
            .is_err());
        assert_eq!(cache.len(), 0);
    }
}
