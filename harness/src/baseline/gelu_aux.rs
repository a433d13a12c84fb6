//! cuBLASLt's `GELU_AUX_BIAS` epilogue on bf16: the baseline of a fused kernel that also
//! stores its pre-activation (`aux: pre_activation`), in the same process.
//!
//! cudarc's safe cuBLASLt `Matmul` sets the epilogue but no aux output, so this drives the C
//! API itself, as [`crate::baseline::fp8`] does: `D = GELU(α·A·B + β·C + bias)` and
//! `aux = α·A·B + β·C + bias` (the value GELU is applied to, of D's type), one bias value per
//! column of our row-major D, C read in place from D. Planned once for a shape and reused.
//! A strided batch lies back to back (each operand's matrices one matrix apart, aux's as D's)
//! and shares one bias vector among its products (bias batch stride 0).
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

/// One `GELU_AUX_BIAS` GEMM on row-major bf16 operands, or a packed strided batch of them: A
/// M x K (ld K), B K x N (ld N), D and aux M x N (ld N) per product, the bias N values shared
/// by all, f32 accumulation and scale.
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
    /// Products, each operand's matrices back to back.
    batch: u32,
    m: u32,
    n: u32,
    k: u32,
    algo: sys::cublasLtMatmulAlgo_t,
    workspace: CudaSlice<u8>,
}

impl LtGeluAuxBias {
    /// Plans the GEMM for `stream`: the handle, descriptor (epilogue, aux leading dimension,
    /// placeholder bias and aux pointers for the heuristic), layouts, workspace and the
    /// heuristic's first algorithm, for `batch` products (1: a single one) of `m x n x k`.
    /// cuBLASLt wants aux's leading dimension (N) a multiple of 8.
    ///
    /// `Err(Error::NoCublas)` where the library cannot be loaded.
    pub fn new(
        stream: &Arc<CudaStream>,
        batch: u32,
        m: u32,
        n: u32,
        k: u32,
    ) -> Result<Self, Error> {
        let name = match batch {
            1 => format!("cuBLASLt GELU_AUX_BIAS bf16 {m} x {n} x {k}"),
            batch => format!("cuBLASLt GELU_AUX_BIAS bf16 {batch} x {m} x {n} x {k}"),
        };
        let batch_count = i32::try_from(batch).ok().filter(|&count| count > 0);
        if m == 0 || n == 0 || k == 0 || batch_count.is_none() || !n.is_multiple_of(8) {
            return Err(Error::Baseline {
                action: format!("planning {name}"),
                reason: "M, N, K and the batch must be positive (the batch at most 2^31 - 1) \
                         and N (aux's leading dimension) a multiple of 8"
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
            batch,
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
        if batch > 1 {
            let (m64, n64, k64) = (m64 as i64, n64 as i64, k64 as i64);
            gemm.lt.set_strided_batch(
                batch_count.expect("checked above"),
                [k64 * n64, m64 * k64, m64 * n64],
                &name,
            )?;
            // Aux's matrices lie as D's; one bias for every product. The attributes' type is
            // int64. SAFETY: the descriptor is live and each value has its attribute's type.
            let statuses = unsafe {
                [
                    (
                        "the bias's batch stride",
                        set_desc_attribute(
                            desc,
                            DescAttribute::CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE,
                            &0i64,
                        ),
                    ),
                    (
                        "aux's batch stride",
                        set_desc_attribute(
                            desc,
                            DescAttribute::CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE,
                            &(m64 * n64),
                        ),
                    ),
                ]
            };
            for (what, status) in statuses {
                lt_result(status, || format!("setting {what} of {name}"))?;
            }
        }
        gemm.algo = gemm
            .lt
            .first_algorithm(gemm.workspace.len() as u64, &name, "", || {
                "cuBLASLt's heuristic returned no algorithm".to_string()
            })?;
        Ok(gemm)
    }

    /// Enqueues `D = GELU(α·A·B + β·D + bias)`, `aux = α·A·B + β·D + bias` on the stream it
    /// was planned for, `(alpha, beta)` the scalars, every product of the batch. The buffers
    /// hold the packed row-major matrices, the batch's back to back (A batch·M·K, B batch·K·N,
    /// D and aux batch·M·N values), and the bias N values.
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
        let batch = self.batch as usize;
        let name = || match batch {
            1 => format!("cuBLASLt GELU_AUX_BIAS {m} x {n} x {k}"),
            batch => format!("cuBLASLt GELU_AUX_BIAS {batch} x {m} x {n} x {k}"),
        };
        for (what, len, needed) in [
            ("A", a.len(), batch * m * k),
            ("B", b.len(), batch * k * n),
            ("the bias", bias.len(), n),
            ("D", d.len(), batch * m * n),
            ("aux", aux.len(), batch * m * n),
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
        // together; the buffers hold at least the packed bf16 matrices the layouts describe,
        // every product's (checked above); C is D with D's layout, which cuBLASLt reads before
        // it writes; alpha and beta are f32, the scale type, and live across the call; the
        // workspace holds the bytes the heuristic was allowed; the stream is the context's,
        // bound above.
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
