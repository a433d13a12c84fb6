//! cuBLAS as the reference and the baseline, for every element type the kernels use.
//!
//! cuBLAS is column-major: a row-major matrix is its transpose in column-major, so row-major
//! `C = A·B` is computed as `Cᵀ = Bᵀ·Aᵀ`, with the operands swapped and m and n exchanged.

use crate::error::Error;
use cudarc::cublas::result as cublas;
use cudarc::cublas::sys::{
    cublasComputeType_t, cublasGemmAlgo_t, cublasMath_t, cublasOperation_t, cudaDataType,
};
use cudarc::cublas::CudaBlas;
use cudarc::driver::{CudaStream, DevicePtr, DevicePtrMut};
use gemm_dsl::abi::StorageOrder;
use gemm_dsl::DType;
use gemm_runtime::check::{elements_needed, Batch, LeadingDims};
use gemm_runtime::Operand;
use gemm_runtime::{Element, KernelTypes, Storage};
use std::ffi::c_void;
use std::sync::Arc;

/// Which cuBLAS GEMM: the call, the A/B and C types, and the compute type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CublasGemm {
    /// `cublasSgemm` in the default math mode: f32 FMA, no TF32.
    Sgemm,
    /// `cublasGemmEx` with these A/B and C types and `CUBLAS_COMPUTE_32F` (f32 accumulation).
    GemmEx { input: Storage, output: Storage },
    /// `cublasGemmEx` on f32 A/B/C with `CUBLAS_COMPUTE_32F_FAST_TF32`: tensor cores, inputs
    /// rounded to tf32.
    GemmExTf32,
}

impl CublasGemm {
    /// What a kernel of these types is timed against: the same inputs and output, f32
    /// accumulation, and for tf32 kernels cuBLAS's tf32 tensor-core path. `None` for fp8
    /// inputs, which cuBLAS's GemmEx does not take: their baseline is cuBLASLt's fp8 GEMM
    /// ([`crate::baseline::fp8`]).
    pub fn baseline(types: KernelTypes) -> Option<CublasGemm> {
        match types.dtype() {
            DType::F32 => Some(CublasGemm::Sgemm),
            DType::Tf32 => Some(CublasGemm::GemmExTf32),
            DType::Bf16 | DType::F16 => Some(CublasGemm::GemmEx {
                input: types.input(),
                output: types.output(),
            }),
            DType::E4m3 | DType::E5m2 => None,
        }
    }

    /// The accurate reference for inputs stored as `input`: the exact inputs (tf32 kernels'
    /// f32 values unrounded), f32 accumulation, an f32 result. fp8 inputs are widened to
    /// bf16 first, exactly (every e4m3 and e5m2 value is a bf16): see [`widen_fp8`].
    pub fn reference(input: Storage) -> CublasGemm {
        match input {
            Storage::F32 => CublasGemm::Sgemm,
            Storage::Bf16 | Storage::F16 => CublasGemm::GemmEx {
                input,
                output: Storage::F32,
            },
            Storage::E4m3 | Storage::E5m2 => CublasGemm::GemmEx {
                input: Storage::Bf16,
                output: Storage::F32,
            },
        }
    }

    pub fn input(self) -> Storage {
        match self {
            CublasGemm::Sgemm | CublasGemm::GemmExTf32 => Storage::F32,
            CublasGemm::GemmEx { input, .. } => input,
        }
    }

    pub fn output(self) -> Storage {
        match self {
            CublasGemm::Sgemm | CublasGemm::GemmExTf32 => Storage::F32,
            CublasGemm::GemmEx { output, .. } => output,
        }
    }

    /// For tables: `SGEMM`, `GemmEx bf16->bf16`, `GemmEx tf32->f32`.
    pub fn short_name(self) -> String {
        match self {
            CublasGemm::Sgemm => "SGEMM".to_string(),
            CublasGemm::GemmEx { input, output } => format!("GemmEx {input}->{output}"),
            CublasGemm::GemmExTf32 => "GemmEx tf32->f32".to_string(),
        }
    }

    /// The label of the call that computes `batch` products: the plain call for one, its
    /// strided batched form (`cublasSgemmStridedBatched`, `cublasGemmStridedBatchedEx`) for
    /// more, so a report's rows and chart panels keep the two apart.
    pub fn short_name_for(self, batch: u32) -> String {
        if batch <= 1 {
            return self.short_name();
        }
        match self {
            CublasGemm::Sgemm => "SgemmStridedBatched".to_string(),
            CublasGemm::GemmEx { input, output } => {
                format!("GemmStridedBatchedEx {input}->{output}")
            }
            CublasGemm::GemmExTf32 => "GemmStridedBatchedEx tf32->f32".to_string(),
        }
    }

    /// The exact call, for method lines.
    pub fn description(self) -> String {
        let cuda_type = |storage: Storage| match storage {
            Storage::F32 => "CUDA_R_32F",
            Storage::Bf16 => "CUDA_R_16BF",
            Storage::F16 => "CUDA_R_16F",
            Storage::E4m3 => "CUDA_R_8F_E4M3",
            Storage::E5m2 => "CUDA_R_8F_E5M2",
        };
        match self {
            CublasGemm::Sgemm => {
                "SGEMM = cublasSgemm, default math mode (f32 FMA, no TF32)".to_string()
            }
            CublasGemm::GemmEx { input, output } => format!(
                "{} = cublasGemmEx, A/B {}, C {}, CUBLAS_COMPUTE_32F",
                self.short_name(),
                cuda_type(input),
                cuda_type(output)
            ),
            CublasGemm::GemmExTf32 => format!(
                "{} = cublasGemmEx, A/B/C CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32",
                self.short_name()
            ),
        }
    }

    fn compute_type(self) -> cublasComputeType_t {
        match self {
            CublasGemm::GemmExTf32 => cublasComputeType_t::CUBLAS_COMPUTE_32F_FAST_TF32,
            CublasGemm::Sgemm | CublasGemm::GemmEx { .. } => {
                cublasComputeType_t::CUBLAS_COMPUTE_32F
            }
        }
    }
}

/// cuBLAS's name for an element type (the A/B/C types of `cublasGemmEx`).
pub fn cuda_type(storage: Storage) -> cudaDataType {
    match storage {
        Storage::F32 => cudaDataType::CUDA_R_32F,
        Storage::Bf16 => cudaDataType::CUDA_R_16BF,
        Storage::F16 => cudaDataType::CUDA_R_16F,
        Storage::E4m3 => cudaDataType::CUDA_R_8F_E4M3,
        Storage::E5m2 => cudaDataType::CUDA_R_8F_E5M2,
    }
}

/// fp8 values as bf16, exactly: e4m3's 3 and e5m2's 2 mantissa bits fit in bf16's 7, their
/// exponents (2^-9 to 2^8, 2^-16 to 2^15) in its 8 bits. cuBLAS's reference GEMM takes these.
pub fn widen_fp8<In: Element>(values: &[In]) -> Vec<half::bf16> {
    values
        .iter()
        .map(|value| half::bf16::from_f32(value.to_f32()))
        .collect()
}

/// A cuBLAS handle on one stream in the default math mode (so SGEMM never uses TF32 unless a
/// call asks for it by its compute type).
#[derive(Debug)]
pub struct Cublas {
    blas: CudaBlas,
    stream: Arc<CudaStream>,
}

impl Cublas {
    /// `Err(Error::NoCublas)` where the library cannot be loaded.
    pub fn new(stream: &Arc<CudaStream>) -> Result<Cublas, Error> {
        // cudarc loads the library at its first call and panics there if it is missing.
        // SAFETY: `is_culib_present` only tries to open the library.
        if !unsafe { cudarc::cublas::sys::is_culib_present() } {
            return Err(Error::NoCublas);
        }
        let blas = CudaBlas::new(stream.clone()).map_err(|source| Error::Cublas {
            action: "creating a cuBLAS handle".to_string(),
            source,
        })?;
        // SAFETY: the handle is live; setting the math mode has no other preconditions.
        unsafe {
            cudarc::cublas::sys::cublasSetMathMode(
                *blas.handle(),
                cublasMath_t::CUBLAS_DEFAULT_MATH,
            )
        }
        .result()
        .map_err(|source| Error::Cublas {
            action: "setting cuBLAS's math mode".to_string(),
            source,
        })?;
        Ok(Cublas {
            blas,
            stream: stream.clone(),
        })
    }

    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    /// The handle, for calls this wrapper does not make (its stream is [`Cublas::stream`]).
    pub fn handle(&self) -> cudarc::cublas::sys::cublasHandle_t {
        *self.blas.handle()
    }

    /// Row-major, packed `C = A·B` (`A` m x k, `B` k x n) by `gemm`, enqueued on the handle's
    /// stream.
    ///
    /// Panics if `In`/`Out` are not `gemm`'s types, a mistake of the calling code; a buffer
    /// shorter than its packed matrix is a [`gemm_runtime::Error::BufferTooSmall`].
    #[allow(clippy::too_many_arguments)]
    pub fn gemm<In, Out, A, B, C>(
        &self,
        gemm: CublasGemm,
        a: &A,
        b: &B,
        c: &mut C,
        m: u32,
        n: u32,
        k: u32,
    ) -> Result<(), Error>
    where
        In: Element,
        Out: Element,
        A: DevicePtr<In>,
        B: DevicePtr<In>,
        C: DevicePtrMut<Out>,
    {
        self.gemm_with_ld(gemm, a, b, c, m, n, k, k, n, n)
    }

    /// `batch.count` row-major products `C_i = A_i·B_i` in one cuBLAS call
    /// (`cublasSgemmStridedBatched` / `cublasGemmStridedBatchedEx`): matrix `i` of each
    /// operand starts `i · stride` elements into its buffer, rows `lds` apart. The buffers
    /// must hold the last matrix, like [`GemmKernel::launch_strided_batched`](gemm_runtime::GemmKernel::launch_strided_batched)'s.
    #[allow(clippy::too_many_arguments)]
    pub fn gemm_strided_batched<In, Out, A, B, C>(
        &self,
        gemm: CublasGemm,
        a: &A,
        b: &B,
        c: &mut C,
        (m, n, k): (u32, u32, u32),
        lds: LeadingDims,
        batch: Batch,
    ) -> Result<(), Error>
    where
        In: Element,
        Out: Element,
        A: DevicePtr<In>,
        B: DevicePtr<In>,
        C: DevicePtrMut<Out>,
    {
        assert_types::<In, Out>(gemm);
        if batch.count == 0 || batch.count > i32::MAX as u32 {
            return Err(Error::Runtime(gemm_runtime::Error::BatchCount {
                count: batch.count,
                limit: i32::MAX as u32,
            }));
        }
        for (operand, len, rows, cols, ld) in [
            (Operand::A, a.len(), m, k, lds.lda),
            (Operand::B, b.len(), k, n, lds.ldb),
            (Operand::C, c.len(), m, n, lds.ldc),
        ] {
            check_row_stride(operand, ld, cols)?;
            let matrix = elements_needed(rows, cols, ld);
            let stride = batch.stride(operand);
            let needed = u64::from(batch.count - 1)
                .checked_mul(stride)
                .and_then(|start| start.checked_add(matrix))
                .unwrap_or(u64::MAX);
            if (len as u64) < needed {
                return Err(Error::Runtime(gemm_runtime::Error::BatchBufferTooSmall {
                    operand,
                    len,
                    needed,
                    count: batch.count,
                    stride,
                    matrix,
                }));
            }
        }
        self.enqueue(gemm, a, b, c, (m, n, k), lds, Some(batch), || {
            format!(
                "cuBLAS {} strided batched {} x {m} x {n} x {k}",
                gemm.short_name(),
                batch.count
            )
        })
    }

    /// [`Cublas::gemm`] with row strides in elements (each at least its row's length).
    #[allow(clippy::too_many_arguments)]
    pub fn gemm_with_ld<In, Out, A, B, C>(
        &self,
        gemm: CublasGemm,
        a: &A,
        b: &B,
        c: &mut C,
        m: u32,
        n: u32,
        k: u32,
        lda: u32,
        ldb: u32,
        ldc: u32,
    ) -> Result<(), Error>
    where
        In: Element,
        Out: Element,
        A: DevicePtr<In>,
        B: DevicePtr<In>,
        C: DevicePtrMut<Out>,
    {
        assert_types::<In, Out>(gemm);
        for (operand, len, rows, cols, ld) in [
            (Operand::A, a.len(), m, k, lda),
            (Operand::B, b.len(), k, n, ldb),
            (Operand::C, c.len(), m, n, ldc),
        ] {
            check_row_stride(operand, ld, cols)?;
            let needed = elements_needed(rows, cols, ld);
            if (len as u64) < needed {
                return Err(Error::Runtime(gemm_runtime::Error::BufferTooSmall {
                    order: StorageOrder::RowMajor,
                    operand,
                    len,
                    needed,
                    rows,
                    cols,
                    ld,
                }));
            }
        }
        let lds = LeadingDims { lda, ldb, ldc };
        self.enqueue(gemm, a, b, c, (m, n, k), lds, None, || {
            format!("cuBLAS {} {m} x {n} x {k}", gemm.short_name())
        })
    }

    /// Enqueues one cuBLAS call on checked buffers: `gemm`'s plain form, or with `batch` its
    /// strided batched form; `action` names it in an error. Row-major `C = A·B` is column-major `Cᵀ (n x m) = Bᵀ (n x k) ·
    /// Aᵀ (k x m)`: B first, ld = row strides.
    #[allow(clippy::too_many_arguments)]
    fn enqueue<In, Out, A, B, C>(
        &self,
        gemm: CublasGemm,
        a: &A,
        b: &B,
        c: &mut C,
        (m, n, k): (u32, u32, u32),
        lds: LeadingDims,
        batch: Option<Batch>,
        action: impl Fn() -> String,
    ) -> Result<(), Error>
    where
        In: Element,
        Out: Element,
        A: DevicePtr<In>,
        B: DevicePtr<In>,
        C: DevicePtrMut<Out>,
    {
        let stream = &self.stream;
        stream.context().bind_to_thread().map_err(|source| {
            Error::Runtime(gemm_runtime::Error::Driver {
                action: "binding the CUDA context".to_string(),
                source,
            })
        })?;
        // The guards order these accesses after earlier work on other streams, and later work
        // after this call; they drop when the call is enqueued.
        let (a_ptr, _a_done) = a.device_ptr(stream);
        let (b_ptr, _b_done) = b.device_ptr(stream);
        let (c_ptr, _c_done) = c.device_ptr_mut(stream);
        let (alpha, beta) = (1.0f32, 0.0f32);
        let handle = *self.blas.handle();
        let no_op = cublasOperation_t::CUBLAS_OP_N;
        let (m, n, k) = (m as i32, n as i32, k as i32);
        let (lda, ldb, ldc) = (lds.lda as i32, lds.ldb as i32, lds.ldc as i32);
        // SAFETY: the callers checked that the buffers hold every matrix the call describes
        // and have the element types the call names; alpha and beta are f32, the scale type
        // of every call here, and live across the call.
        let result = unsafe {
            match (gemm, batch) {
                (CublasGemm::Sgemm, None) => cublas::sgemm(
                    handle,
                    no_op,
                    no_op,
                    n,
                    m,
                    k,
                    &alpha,
                    b_ptr as *const f32,
                    ldb,
                    a_ptr as *const f32,
                    lda,
                    &beta,
                    c_ptr as *mut f32,
                    ldc,
                ),
                (CublasGemm::Sgemm, Some(batch)) => cublas::sgemm_strided_batched(
                    handle,
                    no_op,
                    no_op,
                    n,
                    m,
                    k,
                    &alpha,
                    b_ptr as *const f32,
                    ldb,
                    batch.stride_b as i64,
                    a_ptr as *const f32,
                    lda,
                    batch.stride_a as i64,
                    &beta,
                    c_ptr as *mut f32,
                    ldc,
                    batch.stride_c as i64,
                    batch.count as i32,
                ),
                (CublasGemm::GemmEx { .. } | CublasGemm::GemmExTf32, None) => cublas::gemm_ex(
                    handle,
                    no_op,
                    no_op,
                    n,
                    m,
                    k,
                    (&alpha as *const f32).cast::<c_void>(),
                    b_ptr as *const c_void,
                    cuda_type(In::STORAGE),
                    ldb,
                    a_ptr as *const c_void,
                    cuda_type(In::STORAGE),
                    lda,
                    (&beta as *const f32).cast::<c_void>(),
                    c_ptr as *mut c_void,
                    cuda_type(Out::STORAGE),
                    ldc,
                    gemm.compute_type(),
                    cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
                ),
                (CublasGemm::GemmEx { .. } | CublasGemm::GemmExTf32, Some(batch)) => {
                    cublas::gemm_strided_batched_ex(
                        handle,
                        no_op,
                        no_op,
                        n,
                        m,
                        k,
                        (&alpha as *const f32).cast::<c_void>(),
                        b_ptr as *const c_void,
                        cuda_type(In::STORAGE),
                        ldb,
                        batch.stride_b as i64,
                        a_ptr as *const c_void,
                        cuda_type(In::STORAGE),
                        lda,
                        batch.stride_a as i64,
                        (&beta as *const f32).cast::<c_void>(),
                        c_ptr as *mut c_void,
                        cuda_type(Out::STORAGE),
                        ldc,
                        batch.stride_c as i64,
                        batch.count as i32,
                        gemm.compute_type(),
                        cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
                    )
                }
            }
        };
        result.map_err(|source| Error::Cublas {
            action: action(),
            source,
        })
    }
}

/// Panics unless `In`/`Out` are `gemm`'s types: a mistake of the calling code.
fn assert_types<In: Element, Out: Element>(gemm: CublasGemm) {
    assert_eq!(
        (In::STORAGE, Out::STORAGE),
        (gemm.input(), gemm.output()),
        "{} called with {} inputs and {} outputs",
        gemm.short_name(),
        In::NAME,
        Out::NAME
    );
}

/// A row-major operand's row stride must cover its row.
fn check_row_stride(operand: Operand, ld: u32, row_len: u32) -> Result<(), Error> {
    if ld < row_len {
        return Err(Error::Runtime(gemm_runtime::Error::LeadingDimTooSmall {
            order: StorageOrder::RowMajor,
            operand,
            ld,
            row_len,
        }));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn types(dtype: DType, out: DType) -> KernelTypes {
        KernelTypes::new(dtype, out).unwrap()
    }

    #[test]
    fn each_kernel_type_has_its_baseline() {
        assert_eq!(
            CublasGemm::baseline(types(DType::F32, DType::F32)),
            Some(CublasGemm::Sgemm)
        );
        assert_eq!(
            CublasGemm::baseline(types(DType::Tf32, DType::F32)),
            Some(CublasGemm::GemmExTf32)
        );
        // cuBLAS's GemmEx takes no fp8: cuBLASLt's fp8 GEMM is that baseline.
        assert_eq!(CublasGemm::baseline(types(DType::E4m3, DType::Bf16)), None);
        assert_eq!(
            CublasGemm::reference(Storage::E5m2),
            CublasGemm::GemmEx {
                input: Storage::Bf16,
                output: Storage::F32
            }
        );
        let bf16 = CublasGemm::baseline(types(DType::Bf16, DType::Bf16)).unwrap();
        assert_eq!(
            bf16,
            CublasGemm::GemmEx {
                input: Storage::Bf16,
                output: Storage::Bf16
            }
        );
        assert_eq!(bf16.short_name(), "GemmEx bf16->bf16");
        assert_eq!(bf16.short_name_for(1), "GemmEx bf16->bf16");
        assert_eq!(bf16.short_name_for(8), "GemmStridedBatchedEx bf16->bf16");
        assert_eq!(CublasGemm::Sgemm.short_name_for(2), "SgemmStridedBatched");
        assert_eq!(
            bf16.description(),
            "GemmEx bf16->bf16 = cublasGemmEx, A/B CUDA_R_16BF, C CUDA_R_16BF, CUBLAS_COMPUTE_32F"
        );
        let f16 = CublasGemm::baseline(types(DType::F16, DType::F32)).unwrap();
        assert_eq!((f16.input(), f16.output()), (Storage::F16, Storage::F32));
        assert_eq!(f16.compute_type(), cublasComputeType_t::CUBLAS_COMPUTE_32F);
        assert_eq!(
            CublasGemm::GemmExTf32.compute_type(),
            cublasComputeType_t::CUBLAS_COMPUTE_32F_FAST_TF32
        );
        assert!(CublasGemm::Sgemm.description().contains("no TF32"));
    }

    #[cfg(not(windows))]
    #[test]
    fn a_missing_cublas_names_the_library_and_the_path_variable() {
        let message = Error::NoCublas.to_string();
        assert!(
            message.contains("libcublas.so could not be loaded"),
            "{message}"
        );
        assert!(message.contains("LD_LIBRARY_PATH"), "{message}");
    }

    #[test]
    fn references_are_exact_inputs_with_f32_results() {
        for input in [Storage::F32, Storage::Bf16, Storage::F16] {
            let reference = CublasGemm::reference(input);
            assert_eq!(
                (reference.input(), reference.output()),
                (input, Storage::F32)
            );
            assert_ne!(reference, CublasGemm::GemmExTf32);
        }
        assert_eq!(
            cuda_type(<half::bf16 as Element>::STORAGE),
            cudaDataType::CUDA_R_16BF
        );
        assert_eq!(
            cuda_type(<half::f16 as Element>::STORAGE),
            cudaDataType::CUDA_R_16F
        );
        assert_eq!(
            cuda_type(<f32 as Element>::STORAGE),
            cudaDataType::CUDA_R_32F
        );
        assert_eq!(
            cuda_type(<gemm_runtime::fp8::E4m3 as Element>::STORAGE),
            cudaDataType::CUDA_R_8F_E4M3
        );
    }
}
