//! The pieces of cuBLASLt's C API that the baselines driving it share ([`crate::baseline::fp8`],
//! [`crate::baseline::gelu_aux`]): checked statuses, descriptor attributes, the objects of one planned
//! matmul (destroyed together) and the heuristic's first algorithm.

use crate::error::{DriverContext, Error};
use cudarc::cublaslt::sys::{
    self, cublasLtMatmulDescAttributes_t as DescAttribute,
    cublasLtMatmulPreferenceAttributes_t as PreferenceAttribute,
    cublasLtMatrixLayoutAttribute_t as LayoutAttribute, cublasStatus_t, cudaDataType,
};
use cudarc::driver::{CudaSlice, CudaStream};
use std::ffi::c_void;
use std::ptr;
use std::sync::Arc;

/// The workspace cuBLASLt may use (split-K and the like): NVIDIA's recommendation for Hopper.
pub const WORKSPACE_BYTES: usize = 32 << 20;

/// What planning a GEMM on `stream` starts with: the library present (cudarc loads it at
/// its first call and panics there if it is missing: `Err(Error::NoCublas)` instead), the
/// context bound, and the workspace.
pub(crate) fn start_plan(stream: &Arc<CudaStream>) -> Result<CudaSlice<u8>, Error> {
    // SAFETY: `is_culib_present` only tries to open the library.
    if !unsafe { sys::is_culib_present() } {
        return Err(Error::NoCublas);
    }
    bind(stream)?;
    stream
        .alloc_zeros::<u8>(WORKSPACE_BYTES)
        .during(|| "allocating cuBLASLt's workspace".to_string())
}

/// Binds `stream`'s context to this thread: the C-API calls that follow act on it.
pub(crate) fn bind(stream: &CudaStream) -> Result<(), Error> {
    stream
        .context()
        .bind_to_thread()
        .during(|| "binding the CUDA context".to_string())
}

/// A cuBLASLt status as a result; `action` names the call in an error.
pub(crate) fn lt_result(
    status: cublasStatus_t,
    action: impl FnOnce() -> String,
) -> Result<(), Error> {
    status.result().map_err(|source| Error::Baseline {
        action: action(),
        reason: format!("{source:?}"),
    })
}

/// Sets one attribute of a matmul descriptor to `value`.
///
/// # Safety
///
/// `desc` is live and `T` is the attribute's type as `cublasLtMatmulDescAttributes_t` lists it.
pub(crate) unsafe fn set_desc_attribute<T>(
    desc: sys::cublasLtMatmulDesc_t,
    attribute: DescAttribute,
    value: &T,
) -> cublasStatus_t {
    // SAFETY: the caller vouches for the descriptor and the type; cuBLASLt copies
    // `size_of::<T>()` bytes out of `value` before returning.
    unsafe {
        sys::cublasLtMatmulDescSetAttribute(
            desc,
            attribute,
            (value as *const T).cast::<c_void>(),
            size_of::<T>(),
        )
    }
}

/// The host objects of one planned matmul: the handle, the descriptor and the layouts of
/// cuBLASLt's A, B and D (C shares D's). Null until made; dropping destroys those made, the
/// layouts and descriptor before the handle. Destroying the handle synchronizes the device, so
/// the owner binds its context first (a field drops after its owner's `Drop`).
#[derive(Debug)]
pub(crate) struct LtObjects {
    pub handle: sys::cublasLtHandle_t,
    pub desc: sys::cublasLtMatmulDesc_t,
    pub lt_a: sys::cublasLtMatrixLayout_t,
    pub lt_b: sys::cublasLtMatrixLayout_t,
    pub lt_d: sys::cublasLtMatrixLayout_t,
}

impl LtObjects {
    /// A fresh handle, nothing else made yet.
    pub fn new() -> Result<LtObjects, Error> {
        let handle =
            cudarc::cublaslt::result::create_handle().map_err(|source| Error::Baseline {
                action: "creating a cuBLASLt handle".to_string(),
                reason: format!("{source:?}"),
            })?;
        Ok(LtObjects {
            handle,
            desc: ptr::null_mut(),
            lt_a: ptr::null_mut(),
            lt_b: ptr::null_mut(),
            lt_d: ptr::null_mut(),
        })
    }

    /// Creates the descriptor: f32 accumulation (`CUBLAS_COMPUTE_32F`) and f32 scalars.
    pub fn create_desc(&mut self, name: &str) -> Result<(), Error> {
        let mut desc = ptr::null_mut();
        // SAFETY: `desc` is written on success and read only then.
        lt_result(
            unsafe {
                sys::cublasLtMatmulDescCreate(
                    &mut desc,
                    sys::cublasComputeType_t::CUBLAS_COMPUTE_32F,
                    cudaDataType::CUDA_R_32F,
                )
            },
            || format!("creating the matmul descriptor of {name}"),
        )?;
        self.desc = desc;
        Ok(())
    }

    /// Creates the layouts of cuBLASLt's A, B and D, each `(type, rows, cols, ld, what)`:
    /// column-major `rows x cols`, columns `ld` elements apart.
    pub fn create_layouts(
        &mut self,
        layouts: [(cudaDataType, u64, u64, i64, &str); 3],
        name: &str,
    ) -> Result<(), Error> {
        let slots = [&mut self.lt_a, &mut self.lt_b, &mut self.lt_d];
        for (slot, (data_type, rows, cols, ld, what)) in slots.into_iter().zip(layouts) {
            let mut created = ptr::null_mut();
            // SAFETY: `created` is written on success and read only then.
            lt_result(
                unsafe { sys::cublasLtMatrixLayoutCreate(&mut created, data_type, rows, cols, ld) },
                || format!("creating the layout of {what} for {name}"),
            )?;
            *slot = created;
        }
        Ok(())
    }

    /// Makes the layouts of cuBLASLt's A, B and D strided batches of `count` matrices,
    /// `strides` (A's, B's, D's, in elements) apart. Before [`LtObjects::first_algorithm`]:
    /// the heuristic plans for the batch.
    pub fn set_strided_batch(
        &self,
        count: i32,
        strides: [i64; 3],
        name: &str,
    ) -> Result<(), Error> {
        let layouts = [(self.lt_a, "A"), (self.lt_b, "B"), (self.lt_d, "D")];
        for ((layout, what), stride) in layouts.into_iter().zip(strides) {
            // SAFETY: the layout is live; the batch count is the int32 and the offset the
            // int64 that `cublasLtMatrixLayoutAttribute_t` lists, read before the call returns.
            let (counted, strided) = unsafe {
                (
                    sys::cublasLtMatrixLayoutSetAttribute(
                        layout,
                        LayoutAttribute::CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                        (&count as *const i32).cast::<c_void>(),
                        size_of::<i32>(),
                    ),
                    sys::cublasLtMatrixLayoutSetAttribute(
                        layout,
                        LayoutAttribute::CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                        (&stride as *const i64).cast::<c_void>(),
                        size_of::<i64>(),
                    ),
                )
            };
            lt_result(counted, || {
                format!("setting the batch count of {what} for {name}")
            })?;
            lt_result(strided, || {
                format!("setting the batch stride of {what} for {name}")
            })?;
        }
        Ok(())
    }

    /// The heuristic's first algorithm for the descriptor and layouts as they stand, within
    /// `workspace_bytes`. `hint` follows a failed query's error; `no_algorithm` is the reason
    /// given where the heuristic returns none.
    pub fn first_algorithm(
        &self,
        workspace_bytes: u64,
        name: &str,
        hint: &str,
        no_algorithm: impl FnOnce() -> String,
    ) -> Result<sys::cublasLtMatmulAlgo_t, Error> {
        let mut preference = ptr::null_mut();
        // SAFETY: `preference` is written on success and read only then.
        lt_result(
            unsafe { sys::cublasLtMatmulPreferenceCreate(&mut preference) },
            || format!("creating the heuristic's preferences for {name}"),
        )?;
        let mut found = sys::cublasLtMatmulHeuristicResult_t {
            algo: sys::cublasLtMatmulAlgo_t { data: [0; 8] },
            workspaceSize: 0,
            state: cublasStatus_t::CUBLAS_STATUS_SUCCESS,
            wavesCount: 0.0,
            reserved: [0; 4],
        };
        let mut count = 0i32;
        // SAFETY: the preference, handle, descriptor and layouts are live; the workspace
        // limit is the uint64 the attribute takes; the heuristic writes at most the one
        // result asked for into `found` and its count into `count`.
        let asked = unsafe {
            let status = sys::cublasLtMatmulPreferenceSetAttribute(
                preference,
                PreferenceAttribute::CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                (&workspace_bytes as *const u64).cast::<c_void>(),
                size_of::<u64>(),
            );
            if status == cublasStatus_t::CUBLAS_STATUS_SUCCESS {
                sys::cublasLtMatmulAlgoGetHeuristic(
                    self.handle,
                    self.desc,
                    self.lt_a,
                    self.lt_b,
                    self.lt_d,
                    self.lt_d,
                    preference,
                    1,
                    &mut found,
                    &mut count,
                )
            } else {
                status
            }
        };
        // SAFETY: the preference is live and used no more; the chosen algorithm is a copy.
        let destroyed = unsafe { sys::cublasLtMatmulPreferenceDestroy(preference) };
        lt_result(asked, || {
            format!("asking cuBLASLt for an algorithm for {name}{hint}")
        })?;
        lt_result(destroyed, || {
            format!("destroying the heuristic's preferences for {name}")
        })?;
        if count < 1 {
            return Err(Error::Baseline {
                action: format!("planning {name}"),
                reason: no_algorithm(),
            });
        }
        lt_result(found.state, || {
            format!("the algorithm cuBLASLt's heuristic chose for {name}")
        })?;
        Ok(found.algo)
    }
}

impl LtObjects {
    /// Points descriptor attributes that take a device address (`void*`: scale, bias, aux
    /// pointers) at `(attribute, address, what)` each, for the next launch. The objects are
    /// not `Sync` (raw handles), so no other thread's launch reads the descriptor meanwhile.
    pub fn point_at(
        &self,
        pointers: [(DescAttribute, u64, &str); 2],
        name: &str,
    ) -> Result<(), Error> {
        for (attribute, address, what) in pointers {
            let pointer = address as *const c_void;
            // SAFETY: the descriptor is live; the attributes take a device pointer.
            let status = unsafe { set_desc_attribute(self.desc, attribute, &pointer) };
            lt_result(status, || format!("setting {what} of {name}"))?;
        }
        Ok(())
    }

    /// Enqueues `D = α·op(A)·op(B) + β·C` with C = D in place, the operands `[cuBLASLt's A,
    /// cuBLASLt's B, D]` as device addresses and the workspace as `(address, bytes)`.
    ///
    /// # Safety
    ///
    /// The objects and `algo` were planned together and are live; the buffers hold, with the
    /// element types the layouts name, what the layouts describe, and cuBLASLt may read D before
    /// writing it; the workspace holds at least the bytes the heuristic was allowed; `stream`
    /// belongs to the context bound on this thread.
    pub unsafe fn matmul(
        &self,
        algo: &sys::cublasLtMatmulAlgo_t,
        (alpha, beta): (f32, f32),
        [lt_a, lt_b, d]: [u64; 3],
        (workspace, workspace_bytes): (u64, usize),
        stream: &CudaStream,
    ) -> cublasStatus_t {
        // SAFETY: as the caller vouches; alpha and beta are f32, the scale type, and live
        // across the call.
        unsafe {
            sys::cublasLtMatmul(
                self.handle,
                self.desc,
                (&alpha as *const f32).cast::<c_void>(),
                lt_a as *const c_void,
                self.lt_a,
                lt_b as *const c_void,
                self.lt_b,
                (&beta as *const f32).cast::<c_void>(),
                d as *const c_void,
                self.lt_d,
                d as *mut c_void,
                self.lt_d,
                algo,
                workspace as *mut c_void,
                workspace_bytes,
                stream.cu_stream() as sys::cudaStream_t,
            )
        }
    }
}

impl Drop for LtObjects {
    fn drop(&mut self) {
        // Nothing can be reported from here, and a failure leaves nothing to retry.
        // SAFETY: each object is null or live, made by this value and destroyed once here:
        // the layouts and the descriptor (host objects an enqueued launch no longer reads)
        // first, then the handle they were used with.
        unsafe {
            for layout in [self.lt_d, self.lt_b, self.lt_a] {
                if !layout.is_null() {
                    let _ = sys::cublasLtMatrixLayoutDestroy(layout);
                }
            }
            if !self.desc.is_null() {
                let _ = sys::cublasLtMatmulDescDestroy(self.desc);
            }
            if !self.handle.is_null() {
                let _ = sys::cublasLtDestroy(self.handle);
            }
        }
    }
}
