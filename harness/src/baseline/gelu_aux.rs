//! cuBLASLt's `GELU_AUX_BIAS` epilogue on bf16: the baseline of a fused kernel that also
//! stores its pre-activation (`aux: pre_activation`), in the same process.
//!
//! cudarc's safe cuBLASLt `Matmul` sets the epilogue but no aux output, so this drives the C
//! API itself, as [`crate::baseline::fp8`] does: `D = GELU(α·A·B + β·C + bias)` and
//! `aux = α·A·B + β·C + bias` (the value GELU is applied to, of D's type), one bias value per
//! column of our row-major D, C read in place from D. Planned once for a shape and reused.
//!
//! cuBLASLt is column-major: row-major D (M x N, ld N) is column-major Dᵀ = Bᵀ·Aᵀ (N x M, ld
//! N), so cuBLASLt's A is B's storage (N x K, ld N, not transposed), its B is A's storage (K x
//! M, ld K), its m, n, k are N, M, K, and aux is laid out as D. The bias runs along
//! cuBLASLt's m: our N.

use crate::baseline::lt::{self, lt_result, set_desc_attribute, start_plan, LtObjects};
use crate::error::{DriverContext, Error};
use cudarc::cublaslt::sys::{
    self, cublasLtEpilogue_t, cublasLtMatmulDescAttributes_t as DescAttribute, cudaDataType,
};
use cudarc::driver::{CudaSlice, CudaStream, DevicePtr, DevicePtrMut};
use half::bf16;
use std::ffi::c_void;
use std::sync::Arc;

/// One `GELU_AUX_BIAS` GEMM on row-major bf16 operands: A M x K (ld K), B K x N (ld N), D and
/// aux M x N (ld N), the bias N values, f32 accumulation and scale.
///
/// Not `Sync`: [`LtGeluAuxBias::run`] writes the launch's bias and aux pointers into the
/// descriptor.
#[derive(Debug)]
pub struct LtGeluAuxBias {
    /// cuBLASLt's A is B's storage, its B A's; C, D and aux share one layout.
    ///
    /// First, so that it drops first (fields drop in order, after `Drop::drop` binds the
    /// context), while the stream and the workspace still live.
    lt: LtObjects,
    stream: Arc<CudaStream>,
    m: u32,
    n: u32,
    k: u32,
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
        let workspace = start_plan(stream)?;
        // Stand-ins for the launches' bias and aux, so that the heuristic sees the descriptor
        // a launch uses; never read or written.
        let placeholder = stream
            .alloc_zeros::<bf16>(8)
            .during(|| "allocating a placeholder bias".to_string())?;
        // Built up in place, so that on an error `Drop` destroys what was made so far.
        let mut gemm = LtGeluAuxBias {
            stream: stream.clone(),
            m,
            n,
            k,
            lt: LtObjects::new()?,
            algo: sys::cublasLtMatmulAlgo_t { data: [0; 8] },
            workspace,
        };
        gemm.lt.create_desc(&name)?;
        let desc = gemm.lt.desc;
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
        let bf16_type = cudaDataType::CUDA_R_16BF;
        gemm.lt.create_layouts(
            [
                (bf16_type, n64, k64, i64::from(n), "B"),
                (bf16_type, k64, m64, i64::from(k), "A"),
                (bf16_type, n64, m64, i64::from(n), "D"),
            ],
            &name,
        )?;
        gemm.algo = gemm
            .lt
            .first_algorithm(gemm.workspace.len() as u64, &name, "", || {
                "cuBLASLt's heuristic returned no algorithm".to_string()
            })?;
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
        lt::bind(stream)?;
        let (a_ptr, _a_done) = a.device_ptr(stream);
        let (b_ptr, _b_done) = b.device_ptr(stream);
        let (bias_ptr, _bias_done) = bias.device_ptr(stream);
        let (d_ptr, _d_done) = d.device_ptr_mut(stream);
        let (aux_ptr, _aux_done) = aux.device_ptr_mut(stream);
        let (workspace_ptr, _workspace_done) = self.workspace.device_ptr(stream);
        self.lt.point_at(
            [
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
            ],
            &name(),
        )?;
        // SAFETY: the handle, descriptor, layouts and algorithm are live and were planned
        // together; the buffers hold at least the packed bf16 matrices the layouts describe
        // (checked above); C is D with D's layout, which cuBLASLt reads before it writes;
        // alpha and beta are f32, the scale type, and live across the call; the workspace
        // holds the bytes the heuristic was allowed; the stream is the context's, bound above.
        let status = unsafe {
            self.lt.matmul(
                &self.algo,
                (alpha, beta),
                [b_ptr, a_ptr, d_ptr],
                (workspace_ptr, self.workspace.len()),
                stream,
            )
        };
        lt_result(status, name)
    }
}

impl Drop for LtGeluAuxBias {
    fn drop(&mut self) {
        // As `LtFp8Gemm`'s: destroying the handle synchronizes the device, so the context is
        // bound before the fields drop.
        let _ = self.stream.context().bind_to_thread();
    }
}
