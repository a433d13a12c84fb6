//! cuBLASLt's `GELU_AUX_BIAS` epilogue on bf16: the baseline of a fused kernel that also
//! stores its pre-activation (`aux: pre_activation`), in the same process.
//!
//! cudarc's safe cuBLASLt `Matmul` sets the epilogue but no aux output, so this drives the C
//! API itself, as [`crate::blas_fp8`] does: `D = GELU(α·A·B + β·C + bias)` and
//! `aux = α·A·B + β·C + bias` (the value GELU is applied to, of D's type), one bias value per
//! column of our row-major D, C read in place from D. Planned once for a shape and reused.
//!
//! cuBLASLt is column-major: row-major D (M x N, ld N) is column-major Dᵀ = Bᵀ·Aᵀ (N x M, ld
//! N), so cuBLASLt's A is B's storage (N x K, ld N, not transposed), its B is A's storage (K x
//! M, ld K), its m, n, k are N, M, K, and aux is laid out as D. The bias runs along
//! cuBLASLt's m: our N.

use crate::blas_fp8::{lt_result, set_desc_attribute, WORKSPACE_BYTES};
use crate::error::{DriverContext, Error};
use cudarc::cublaslt::sys::{
    self, cublasComputeType_t, cublasLtEpilogue_t, cublasLtMatmulDescAttributes_t as DescAttribute,
    cublasLtMatmulPreferenceAttributes_t as PreferenceAttribute, cublasStatus_t, cudaDataType,
};
use cudarc::driver::{CudaSlice, CudaStream, DevicePtr, DevicePtrMut};
use half::bf16;
use std::ffi::c_void;
use std::ptr;
use std::sync::Arc;

/// One `GELU_AUX_BIAS` GEMM on row-major bf16 operands: A M x K (ld K), B K x N (ld N), D and
/// aux M x N (ld N), the bias N values, f32 accumulation and scale.
///
/// Not `Sync`: [`LtGeluAuxBias::run`] writes the launch's bias and aux pointers into the
/// descriptor.
#[derive(Debug)]
pub struct LtGeluAuxBias {
    stream: Arc<CudaStream>,
    m: u32,
    n: u32,
    k: u32,
    handle: sys::cublasLtHandle_t,
    desc: sys::cublasLtMatmulDesc_t,
    /// cuBLASLt's A: B's storage.
    lt_a: sys::cublasLtMatrixLayout_t,
    /// cuBLASLt's B: A's storage.
    lt_b: sys::cublasLtMatrixLayout_t,
    /// C, D and aux share one layout.
    lt_d: sys::cublasLtMatrixLayout_t,
    algo: sys::cublasLtMatmulAlgo_t,
    workspace: CudaSlice<u8>,
}

impl LtGeluAuxBias {
    /// Plans the GEMM for `stream`: the handle, descriptor (epilogue, aux leading dimension,
    /// placeholder bias and aux pointers for the heuristic), layouts, workspace and the
    /// heuristic's first algorithm. cuBLASLt wants aux's leading dimension (N) a multiple of 8.
    ///
    /// `Err(Error::NoCublas)` where the library cannot be loaded.
    pub fn new(stream: &Arc<CudaStream>, m: u32, n: u32, k: u32) -> Result<Self, Error> {
        let name = format!("cuBLASLt GELU_AUX_BIAS bf16 {m} x {n} x {k}");
        if m == 0 || n == 0 || k == 0 || !n.is_multiple_of(8) {
            return Err(Error::Baseline {
                action: format!("planning {name}"),
                reason: "M, N and K must be positive and N (aux's leading dimension) a \
                         multiple of 8"
                    .to_string(),
            });
        }
        // SAFETY: `is_culib_present` only tries to open the library.
        if !unsafe { sys::is_culib_present() } {
            return Err(Error::NoCublas);
        }
        stream
            .context()
            .bind_to_thread()
            .during(|| "binding the CUDA context".to_string())?;
        let workspace = stream
            .alloc_zeros::<u8>(WORKSPACE_BYTES)
            .during(|| "allocating cuBLASLt's workspace".to_string())?;
        // Stand-ins for the launches' bias and aux, so that the heuristic sees the descriptor
        // a launch uses; never read or written.
        let placeholder = stream
            .alloc_zeros::<bf16>(8)
            .during(|| "allocating a placeholder bias".to_string())?;
        let handle =
            cudarc::cublaslt::result::create_handle().map_err(|source| Error::Baseline {
                action: "creating a cuBLASLt handle".to_string(),
                reason: format!("{source:?}"),
            })?;
        // Built up in place, so that on an error `Drop` destroys what was made so far.
        let mut gemm = LtGeluAuxBias {
            stream: stream.clone(),
            m,
            n,
            k,
            handle,
            desc: ptr::null_mut(),
            lt_a: ptr::null_mut(),
            lt_b: ptr::null_mut(),
            lt_d: ptr::null_mut(),
            algo: sys::cublasLtMatmulAlgo_t { data: [0; 8] },
            workspace,
        };
        let mut desc = ptr::null_mut();
        // SAFETY: `desc` is written on success and read only then.
        lt_result(
            unsafe {
                sys::cublasLtMatmulDescCreate(
                    &mut desc,
                    cublasComputeType_t::CUBLAS_COMPUTE_32F,
                    cudaDataType::CUDA_R_32F,
                )
            },
            || format!("creating the matmul descriptor of {name}"),
        )?;
        gemm.desc = desc;
        let (placeholder_ptr, _placeholder_done) = placeholder.device_ptr(stream);
        let placeholder_ptr = placeholder_ptr as *const c_void;
        let aux_ld = i64::from(n);
        // The attribute types `cublasLtMatmulDescAttributes_t` documents: the epilogue uint32,
        // the bias and aux pointers `void*` to device memory, aux's leading dimension int64.
        // SAFETY: the descriptor is live and each value has its attribute's type.
        let statuses = unsafe {
            [
                (
                    "the epilogue GELU_AUX_BIAS",
                    set_desc_attribute(
                        desc,
                        DescAttribute::CUBLASLT_MATMUL_DESC_EPILOGUE,
                        &cublasLtEpilogue_t::CUBLASLT_EPILOGUE_GELU_AUX_BIAS,
                    ),
                ),
                (
                    "the bias pointer",
                    set_desc_attribute(
                        desc,
                        DescAttribute::CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                        &placeholder_ptr,
                    ),
                ),
                (
                    "the aux pointer",
                    set_desc_attribute(
                        desc,
                        DescAttribute::CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER,
                        &placeholder_ptr,
                    ),
                ),
                (
                    "aux's leading dimension",
                    set_desc_attribute(
                        desc,
                        DescAttribute::CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD,
                        &aux_ld,
                    ),
                ),
            ]
        };
        for (what, status) in statuses {
            lt_result(status, || format!("setting {what} of {name}"))?;
        }
        let (m64, n64, k64) = (u64::from(m), u64::from(n), u64::from(k));
        for (layout, rows, cols, ld, what) in [
            (&mut gemm.lt_a, n64, k64, n64, "B"),
            (&mut gemm.lt_b, k64, m64, k64, "A"),
            (&mut gemm.lt_d, n64, m64, n64, "D"),
        ] {
            let mut created = ptr::null_mut();
            // SAFETY: `created` is written on success and read only then.
            lt_result(
                unsafe {
                    sys::cublasLtMatrixLayoutCreate(
                        &mut created,
                        cudaDataType::CUDA_R_16BF,
                        rows,
                        cols,
                        ld as i64,
                    )
                },
                || format!("creating the layout of {what} for {name}"),
            )?;
            *layout = created;
        }
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
        let workspace_bytes = gemm.workspace.len() as u64;
        // SAFETY: the preference, handle, descriptor and layouts are live; the workspace limit
        // is the uint64 the attribute takes; the heuristic writes at most one result.
        let asked = unsafe {
            let status = sys::cublasLtMatmulPreferenceSetAttribute(
                preference,
                PreferenceAttribute::CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                (&workspace_bytes as *const u64).cast::<c_void>(),
                size_of::<u64>(),
            );
            if status == cublasStatus_t::CUBLAS_STATUS_SUCCESS {
                sys::cublasLtMatmulAlgoGetHeuristic(
                    gemm.handle,
                    gemm.desc,
                    gemm.lt_a,
                    gemm.lt_b,
                    gemm.lt_d,
                    gemm.lt_d,
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
            format!("asking cuBLASLt for an algorithm for {name}")
        })?;
        lt_result(destroyed, || {
            format!("destroying the heuristic's preferences for {name}")
        })?;
        if count < 1 {
            return Err(Error::Baseline {
                action: format!("planning {name}"),
                reason: "cuBLASLt's heuristic returned no algorithm".to_string(),
            });
        }
        lt_result(found.state, || {
            format!("the algorithm cuBLASLt's heuristic chose for {name}")
        })?;
        gemm.algo = found.algo;
        Ok(gemm)
    }

    /// Enqueues `D = GELU(α·A·B + β·D + bias)`, `aux = α·A·B + β·D + bias` on the stream it
    /// was planned for, `(alpha, beta)` the scalars. The buffers hold the packed row-major matrices (A M·K, B K·N, D and aux
    /// M·N values) and the bias N values.
    pub fn run(
        &self,
        a: &CudaSlice<bf16>,
        b: &CudaSlice<bf16>,
        bias: &CudaSlice<bf16>,
        (alpha, beta): (f32, f32),
        d: &mut CudaSlice<bf16>,
        aux: &mut CudaSlice<bf16>,
    ) -> Result<(), Error> {
        let (m, n, k) = (self.m as usize, self.n as usize, self.k as usize);
        let name = || format!("cuBLASLt GELU_AUX_BIAS {m} x {n} x {k}");
        for (what, len, needed) in [
            ("A", a.len(), m * k),
            ("B", b.len(), k * n),
            ("the bias", bias.len(), n),
            ("D", d.len(), m * n),
            ("aux", aux.len(), m * n),
        ] {
            if len < needed {
                return Err(Error::Baseline {
                    action: name(),
                    reason: format!("{what} holds {len} values, the problem needs {needed}"),
                });
            }
        }
        let stream = &self.stream;
        stream
            .context()
            .bind_to_thread()
            .during(|| "binding the CUDA context".to_string())?;
        let (a_ptr, _a_done) = a.device_ptr(stream);
        let (b_ptr, _b_done) = b.device_ptr(stream);
        let (bias_ptr, _bias_done) = bias.device_ptr(stream);
        let (d_ptr, _d_done) = d.device_ptr_mut(stream);
        let (aux_ptr, _aux_done) = aux.device_ptr_mut(stream);
        let (workspace_ptr, _workspace_done) = self.workspace.device_ptr(stream);
        for (attribute, address, what) in [
            (
                DescAttribute::CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                bias_ptr,
                "the bias",
            ),
            (
                DescAttribute::CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER,
                aux_ptr,
                "aux",
            ),
        ] {
            let pointer = address as *const c_void;
            // SAFETY: the descriptor is live (and not shared across threads: the type is not
            // `Sync`); both attributes are device pointers.
            let status = unsafe { set_desc_attribute(self.desc, attribute, &pointer) };
            lt_result(status, || format!("setting {what} of {}", name()))?;
        }
        // SAFETY: the handle, descriptor, layouts and algorithm are live and were planned
        // together; the buffers hold at least the packed bf16 matrices the layouts describe
        // (checked above); C is D with D's layout, which cuBLASLt reads before it writes;
        // alpha and beta are f32, the scale type, and live across the call; the workspace
        // holds the bytes the heuristic was allowed; the stream is the context's, bound above.
        let status = unsafe {
            sys::cublasLtMatmul(
                self.handle,
                self.desc,
                (&alpha as *const f32).cast::<c_void>(),
                b_ptr as *const c_void,
                self.lt_a,
                a_ptr as *const c_void,
                self.lt_b,
                (&beta as *const f32).cast::<c_void>(),
                d_ptr as *const c_void,
                self.lt_d,
                d_ptr as *mut c_void,
                self.lt_d,
                &self.algo,
                workspace_ptr as *mut c_void,
                self.workspace.len(),
                stream.cu_stream() as sys::cudaStream_t,
            )
        };
        lt_result(status, name)
    }
}

impl Drop for LtGeluAuxBias {
    fn drop(&mut self) {
        // As `LtFp8Gemm`'s: destroying the handle synchronizes the device, so it needs the
        // context; nothing can be reported from here.
        let _ = self.stream.context().bind_to_thread();
        // SAFETY: each object is null or live, made by this value and destroyed once here,
        // the layouts and the descriptor before the handle they were used with.
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
