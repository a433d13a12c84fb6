//! cuBLASLt's fp8 GEMM: the baseline the fp8 kernels are timed against, in the same process.
//!
//! cudarc's safe cuBLASLt `Matmul` has no fp8, so this drives the C API itself: a matmul
//! descriptor, three matrix layouts, a workspace and the heuristic's first algorithm, planned
//! once for a shape and reused for every launch.
//!
//! What cuBLASLt asks of fp8 GEMMs (cuBLAS documentation, `cublasLtMatmul()`, "To use FP8
//! kernels…", and "Tensor Core Usage"; <https://docs.nvidia.com/cuda/cublas/#cublasltmatmul>):
//! - A transposed and B not (the "TN" form) on Ada, Hopper and Blackwell GeForce;
//! - compute type `CUBLAS_COMPUTE_32F`, scale type `CUDA_R_32F`;
//! - tensor-core alignment: A, B, C and D 16-byte aligned, and in cuBLASLt's terms
//!   `(op_A == N ? m : k)`, `(op_B == N ? k : n)`, `lda`, `ldb` (in A/B bytes) and `m`, `ldc`
//!   (in C bytes) multiples of 16 bytes;
//! - A/B e4m3 x e4m3, e4m3 x e5m2 or e5m2 x e4m3 (no e5m2 x e5m2); with a bf16, f16 or f32
//!   D, C has D's type.
//!
//! Scaling ([`LtScales`]) is per tensor: `D = α · scale_A · scale_B · (A·B) + β · C`, the
//! scales one f32 each in device memory (`CUBLASLT_MATMUL_DESC_A_SCALE_POINTER`,
//! `B_SCALE_POINTER`); or by blocks, DeepSeek-V3's recipe (cuBLAS 12.9+, compute capability
//! 9.0; "1D and 128x128 2D block scaling for FP8 data types" in the same documentation): A's
//! activations one f32 per row per 128 of K, B's weights one per 128 x 128 block. Here α = 1
//! and β = 0, host scalars in the default pointer mode.
//!
//! cuBLASLt is column-major: a row-major matrix is its transpose. Row-major D (M x N, ld N) is
//! column-major Dᵀ (N x M, ld N) = Bᵀ·Aᵀ, so
//! - cuBLASLt's A is B's storage (N lines of K: column-major K x N, ld K), taken with
//!   transa = T as the N x K operand Bᵀ;
//! - cuBLASLt's B is A's storage (M rows of K: column-major K x M, ld K), transb = N;
//! - cuBLASLt's m, n, k are N, M, K: exactly the TN form. In our terms the alignment rules say
//!   K is a multiple of 16 and D's rows (N · sizeof(Out)) are 16-byte multiples; M is free.

use crate::baseline::lt::{self, lt_result, set_desc_attribute, start_plan, LtObjects};
use crate::error::{DriverContext, Error};
use cudarc::cublas::sys::cublasOperation_t;
use cudarc::cublaslt::sys::{self, cublasLtMatmulDescAttributes_t as DescAttribute, cudaDataType};
use cudarc::driver::{CudaSlice, CudaStream, DevicePtr, DevicePtrMut};
use gemm_dsl::abi::StorageOrder;
use gemm_dsl::Quant;
use gemm_runtime::check::elements_needed;
use gemm_runtime::Operand;
use gemm_runtime::{Element, Storage};
use std::ffi::c_void;
use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;

pub use crate::baseline::lt::WORKSPACE_BYTES;

/// The alignment of A, B, C and D that cuBLASLt's fp8 kernels need.
const ALIGN: u32 = 16;

/// Which OCP fp8 format an operand holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Fp8Format {
    /// 4 exponent bits, 3 mantissa bits; finite up to ±448.
    E4m3,
    /// 5 exponent bits, 2 mantissa bits; up to ±57344, with infinities.
    E5m2,
}

impl Fp8Format {
    /// cuBLASLt's name for the format.
    pub fn cuda_type(self) -> cudaDataType {
        match self {
            Fp8Format::E4m3 => cudaDataType::CUDA_R_8F_E4M3,
            Fp8Format::E5m2 => cudaDataType::CUDA_R_8F_E5M2,
        }
    }

    /// `e4m3` or `e5m2`.
    pub fn name(self) -> &'static str {
        match self {
            Fp8Format::E4m3 => "e4m3",
            Fp8Format::E5m2 => "e5m2",
        }
    }
}

impl fmt::Display for Fp8Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How cuBLASLt's fp8 GEMM scales the operands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LtScales {
    /// One f32 per operand.
    PerTensor,
    /// DeepSeek-V3's blocks, as the project's `quant: block` kernels take them: A one f32 per
    /// row per 128 of K, B one per 128 x 128 block; each in cuBLASLt's own layout
    /// ([`lt_block_scales`] converts the kernels' one). cuBLASLt's A is our B, so its A scale
    /// mode is `BLK128x128_32F` and its B's `VEC128_32F`.
    Blocks,
}

/// `cublasLtMatmulMatrixScale_t`'s `VEC128_32F` and `BLK128x128_32F` (cuBLAS 12.9), which
/// the bound headers predate.
const SCALE_VEC128_32F: i32 = 4;
const SCALE_BLK128X128_32F: i32 = 5;

impl LtScales {
    /// The f32 counts of A's and B's scales for `m x n x k`, in cuBLASLt's layouts: A's
    /// `VEC128` scales ceil(K/128) lines of M (`[kb · M + row]`), B's `BLK128x128` scales
    /// ceil(N/128) lines of ceil(K/128) rounded up to 4 (`[nb · L4 + kb]`).
    pub fn lens(self, m: u32, n: u32, k: u32) -> (usize, usize) {
        match self {
            LtScales::PerTensor => (1, 1),
            LtScales::Blocks => {
                let k_blocks = k.div_ceil(Quant::BLOCK) as usize;
                (
                    k_blocks * m as usize,
                    n.div_ceil(Quant::BLOCK) as usize * k_blocks.next_multiple_of(4),
                )
            }
        }
    }

    /// For tables: `per-tensor` or `1x128 · 128x128 blocks`.
    pub fn name(self) -> &'static str {
        match self {
            LtScales::PerTensor => "per-tensor",
            LtScales::Blocks => "1x128 · 128x128 blocks",
        }
    }
}

/// The project's block scales for `m x n x k` (A: ceil(K/128) lines of M rounded up to 4, B:
/// ceil(N/128) lines of ceil(K/128); `gemm_runtime::epilogue`) in cuBLASLt's layouts
/// ([`LtScales::lens`]): the same values, A's lines M long, B's lines padded to 4 with ones.
pub fn lt_block_scales(
    (a_scales, b_scales): (&[f32], &[f32]),
    (m, n, k): (u32, u32, u32),
) -> (Vec<f32>, Vec<f32>) {
    let (m, n_blocks) = (m as usize, n.div_ceil(Quant::BLOCK) as usize);
    let k_blocks = k.div_ceil(Quant::BLOCK) as usize;
    let a_line = m.next_multiple_of(Quant::A_LINE_MULTIPLE as usize);
    let lt_a: Vec<f32> = (0..k_blocks)
        .flat_map(|kb| a_scales[kb * a_line..kb * a_line + m].iter().copied())
        .collect();
    let lt_line = k_blocks.next_multiple_of(4);
    let mut lt_b = vec![1.0f32; n_blocks * lt_line];
    for nb in 0..n_blocks {
        lt_b[nb * lt_line..nb * lt_line + k_blocks]
            .copy_from_slice(&b_scales[nb * k_blocks..(nb + 1) * k_blocks]);
    }
    (lt_a, lt_b)
}

/// cuBLASLt's name for an output type, of D and of C alike (fp8 GEMMs with a bf16, f16 or f32
/// D take C of D's type). Exhaustive: a new storage type must say what cuBLASLt calls it.
fn output_type(storage: Storage) -> cudaDataType {
    match storage {
        Storage::F32 => cudaDataType::CUDA_R_32F,
        Storage::Bf16 => cudaDataType::CUDA_R_16BF,
        Storage::F16 => cudaDataType::CUDA_R_16F,
        Storage::E4m3 | Storage::E5m2 => unreachable!("fp8 is an input type only"),
    }
}

/// Whether cuBLASLt's fp8 GEMM takes the problem `D (M x N, out) = A (M x K, a) · B (K x N, b)`
/// with the packed layouts of [`LtFp8Gemm`]: no empty dimension, not e5m2 x e5m2, K a
/// multiple of 16 and D's rows 16-byte multiples. [`LtFp8Gemm::new`] checks it; callers may
/// ask first to skip shapes.
pub fn check_problem(
    m: u32,
    n: u32,
    k: u32,
    a: Fp8Format,
    b: Fp8Format,
    out: Storage,
) -> Result<(), Error> {
    let dims = |reason: String| Error::Runtime(gemm_runtime::Error::Dims { m, n, k, reason });
    if m == 0 || n == 0 || k == 0 {
        return Err(dims(
            "cuBLASLt's fp8 GEMM needs M, N and K of at least 1".to_string(),
        ));
    }
    if a == Fp8Format::E5m2 && b == Fp8Format::E5m2 {
        return Err(Error::Baseline {
            action: format!("planning a cuBLASLt fp8 GEMM {m} x {n} x {k}"),
            reason: "cuBLASLt has no e5m2 x e5m2 GEMM (its fp8 pairs are e4m3 x e4m3, \
                     e4m3 x e5m2 and e5m2 x e4m3); make A or B e4m3"
                .to_string(),
        });
    }
    // A's rows and B's columns are K one-byte values, the leading dimension of both.
    if !k.is_multiple_of(ALIGN) {
        return Err(dims(format!(
            "cuBLASLt's fp8 kernels need A's rows and B's columns (K = {k} fp8 values = {k} B) \
             to be 16-byte multiples; pad K to {}",
            u64::from(k).next_multiple_of(u64::from(ALIGN))
        )));
    }
    // cuBLASLt's m and ldc are both N, counted in D's (and C's) elements.
    let row_bytes = u64::from(n) * u64::from(out.bytes());
    if !row_bytes.is_multiple_of(u64::from(ALIGN)) {
        let vector = u64::from(ALIGN / out.bytes());
        return Err(dims(format!(
            "cuBLASLt's fp8 kernels need D's rows (N = {n} {out} values = {row_bytes} B) to be \
             16-byte multiples; pad N to {} (a multiple of {vector})",
            u64::from(n).next_multiple_of(vector)
        )));
    }
    Ok(())
}

/// What cuBLASLt's block-scaled fp8 GEMM asks beyond [`check_problem`]: its m and n (our N
/// and M) multiples of 4, so that each line of A's scales starts 16-byte aligned.
pub fn check_block_problem(m: u32, n: u32, k: u32) -> Result<(), Error> {
    if m.is_multiple_of(4) && n.is_multiple_of(4) {
        return Ok(());
    }
    Err(Error::Runtime(gemm_runtime::Error::Dims {
        m,
        n,
        k,
        reason: "cuBLASLt's block-scaled fp8 GEMM needs M and N to be multiples of 4 (each \
                 line of the 1x128 scales 16-byte aligned)"
            .to_string(),
    }))
}

/// The element counts of the buffers one launch is given.
#[derive(Clone, Copy, Debug)]
struct BufferLens {
    a: usize,
    b: usize,
    d: usize,
    a_scale: usize,
    b_scale: usize,
}

/// The packed operands must hold their matrices (A M rows of K, B N columns of K, D M rows of
/// N; D is named C, the output's name everywhere else) and each scale its one f32.
fn check_lengths(m: u32, n: u32, k: u32, lens: BufferLens, scales: LtScales) -> Result<(), Error> {
    for (operand, order, len, lines, line) in [
        (Operand::A, StorageOrder::RowMajor, lens.a, m, k),
        (Operand::B, StorageOrder::ColMajor, lens.b, n, k),
        (Operand::C, StorageOrder::RowMajor, lens.d, m, n),
    ] {
        let needed = elements_needed(lines, line, line);
        if (len as u64) < needed {
            return Err(Error::Runtime(gemm_runtime::Error::BufferTooSmall {
                operand,
                order,
                len,
                needed,
                rows: lines,
                cols: line,
                ld: line,
            }));
        }
    }
    let (a_needed, b_needed) = scales.lens(m, n, k);
    for (name, len, needed) in [
        ("a_scale", lens.a_scale, a_needed),
        ("b_scale", lens.b_scale, b_needed),
    ] {
        if len < needed {
            let holds = match scales {
                LtScales::PerTensor => "the operand's f32 scale".to_string(),
                LtScales::Blocks => format!("{needed} f32 block scales"),
            };
            return Err(Error::Baseline {
                action: format!("launching cuBLASLt's fp8 GEMM {m} x {n} x {k}"),
                reason: format!("{name} holds {len} values; it must hold {holds}"),
            });
        }
    }
    Ok(())
}

/// A cuBLASLt matrix layout: column-major `rows x cols`, columns `ld` elements apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct LtLayout {
    rows: u64,
    cols: u64,
    ld: i64,
}

/// The column-major product cuBLASLt computes for row-major `D = A·B` (see the module's
/// comment): its m, n, k and the layouts of its A (B's storage, transa = T), its B (A's
/// storage, transb = N) and its C and D.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct LtProblem {
    m: u64,
    n: u64,
    k: u64,
    lt_a: LtLayout,
    lt_b: LtLayout,
    lt_d: LtLayout,
}

fn lt_problem(m: u32, n: u32, k: u32) -> LtProblem {
    let (m, n, k) = (u64::from(m), u64::from(n), u64::from(k));
    LtProblem {
        m: n,
        n: m,
        k,
        // Stored as op(A) is transposed: k x m.
        lt_a: LtLayout {
            rows: k,
            cols: n,
            ld: k as i64,
        },
        // Not transposed: k x n.
        lt_b: LtLayout {
            rows: k,
            cols: m,
            ld: k as i64,
        },
        lt_d: LtLayout {
            rows: n,
            cols: m,
            ld: n as i64,
        },
    }
}

/// One cuBLASLt fp8 GEMM, planned once for a shape and reused: `D = scale_a·scale_b·(A·B)`,
/// A row-major M x K (K contiguous, ld = K), B column-major K x N (K contiguous: N lines of
/// K, ld = K), D row-major M x N (ld = N) of type `Out` (bf16, f16 or f32), accumulated in f32.
///
/// Not `Sync`: [`LtFp8Gemm::run`] writes the launch's scale pointers into the descriptor.
#[derive(Debug)]
pub struct LtFp8Gemm<Out> {
    /// cuBLASLt's A is B's storage, its B A's; C and D are the same matrix, as β = 0 never
    /// reads C.
    ///
    /// First, so that it drops first (fields drop in order, after `Drop::drop` binds the
    /// context), while the stream and the workspace still live.
    lt: LtObjects,
    stream: Arc<CudaStream>,
    m: u32,
    n: u32,
    k: u32,
    a_format: Fp8Format,
    b_format: Fp8Format,
    fast_accum: bool,
    scales: LtScales,
    algo: sys::cublasLtMatmulAlgo_t,
    workspace: CudaSlice<u8>,
    out: PhantomData<Out>,
}

impl<Out: Element> LtFp8Gemm<Out> {
    /// Plans the GEMM for `stream`: checks the problem ([`check_problem`]), creates the
    /// handle, descriptor and layouts, allocates the workspace and asks the heuristic for an
    /// algorithm. `fast_accum` turns on `CUBLASLT_MATMUL_DESC_FAST_ACCUM`: faster, but partial
    /// sums are not promoted to full f32 precision from time to time (per-tensor scales
    /// only). `scales`: how [`LtFp8Gemm::run`]'s scales apply.
    ///
    /// `Err(Error::NoCublas)` where the library cannot be loaded.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        stream: &Arc<CudaStream>,
        m: u32,
        n: u32,
        k: u32,
        a: Fp8Format,
        b: Fp8Format,
        fast_accum: bool,
        scales: LtScales,
    ) -> Result<Self, Error> {
        check_problem(m, n, k, a, b, Out::STORAGE)?;
        if scales == LtScales::Blocks {
            check_block_problem(m, n, k)?;
            if fast_accum {
                return Err(Error::Baseline {
                    action: format!("planning a cuBLASLt fp8 GEMM {m} x {n} x {k}"),
                    reason: "block scales are applied where partial sums are promoted, which \
                             fast accumulation skips: plan it without"
                        .to_string(),
                });
            }
        }
        let workspace = start_plan(stream)?;
        // The heuristic sees the descriptor a launch will use, scale pointers set; this one
        // stands in for the launches' scales and is never read.
        let placeholder_scale = stream
            .alloc_zeros::<f32>(1)
            .during(|| "allocating a placeholder fp8 scale".to_string())?;
        // Built up in place, so that on an error `Drop` destroys what was made so far.
        let mut gemm = LtFp8Gemm {
            stream: stream.clone(),
            m,
            n,
            k,
            a_format: a,
            b_format: b,
            fast_accum,
            scales,
            lt: LtObjects::new()?,
            algo: sys::cublasLtMatmulAlgo_t { data: [0; 8] },
            workspace,
            out: PhantomData,
        };
        let name = gemm.short_name();
        let problem = lt_problem(m, n, k);
        gemm.lt.create_desc(&name)?;
        let desc = gemm.lt.desc;
        let (placeholder, _placeholder_done) = placeholder_scale.device_ptr(stream);
        let placeholder = placeholder as *const c_void;
        // The attribute types are those `cublasLtMatmulDescAttributes_t` documents: the
        // operations int32 (`cublasOperation_t`), the scale pointers `const void*` to device
        // memory, fast accumulation int8.
        // SAFETY: the descriptor is live and each value has its attribute's type.
        let statuses = unsafe {
            [
                (
                    "transa = T",
                    set_desc_attribute(
                        desc,
                        DescAttribute::CUBLASLT_MATMUL_DESC_TRANSA,
                        &cublasOperation_t::CUBLAS_OP_T,
                    ),
                ),
                (
                    "transb = N",
                    set_desc_attribute(
                        desc,
                        DescAttribute::CUBLASLT_MATMUL_DESC_TRANSB,
                        &cublasOperation_t::CUBLAS_OP_N,
                    ),
                ),
                (
                    "the A scale pointer",
                    set_desc_attribute(
                        desc,
                        DescAttribute::CUBLASLT_MATMUL_DESC_A_SCALE_POINTER,
                        &placeholder,
                    ),
                ),
                (
                    "the B scale pointer",
                    set_desc_attribute(
                        desc,
                        DescAttribute::CUBLASLT_MATMUL_DESC_B_SCALE_POINTER,
                        &placeholder,
                    ),
                ),
                (
                    "fast accumulation",
                    set_desc_attribute(
                        desc,
                        DescAttribute::CUBLASLT_MATMUL_DESC_FAST_ACCUM,
                        &i8::from(fast_accum),
                    ),
                ),
            ]
        };
        for (what, status) in statuses {
            lt_result(status, || format!("setting {what} of {name}"))?;
        }
        if scales == LtScales::Blocks {
            // cuBLASLt's A is our B (the weights' 128 x 128 blocks), its B our A (the
            // activations' rows). The modes are int32 (`cublasLtMatmulMatrixScale_t`).
            for (what, attribute, mode) in [
                (
                    "A's scale mode (BLK128x128_32F)",
                    DescAttribute::CUBLASLT_MATMUL_DESC_A_SCALE_MODE,
                    SCALE_BLK128X128_32F,
                ),
                (
                    "B's scale mode (VEC128_32F)",
                    DescAttribute::CUBLASLT_MATMUL_DESC_B_SCALE_MODE,
                    SCALE_VEC128_32F,
                ),
            ] {
                // SAFETY: the descriptor is live; the scale modes are int32.
                let status = unsafe { set_desc_attribute(desc, attribute, &mode) };
                lt_result(status, || format!("setting {what} of {name}"))?;
            }
        }

        let layout =
            |data_type, shape: LtLayout, what| (data_type, shape.rows, shape.cols, shape.ld, what);
        gemm.lt.create_layouts(
            [
                layout(b.cuda_type(), problem.lt_a, "B"),
                layout(a.cuda_type(), problem.lt_b, "A"),
                layout(output_type(Out::STORAGE), problem.lt_d, "D"),
            ],
            &name,
        )?;
        let fp8_devices = "cuBLASLt's fp8 GEMMs run on compute capability 8.9 or newer";
        let layouts = gemm.layouts();
        gemm.algo = gemm.lt.first_algorithm(
            gemm.workspace.len() as u64,
            &name,
            &format!(" ({fp8_devices})"),
            || format!("cuBLASLt's heuristic returned no algorithm for {layouts}; {fp8_devices}"),
        )?;
        Ok(gemm)
    }

    /// Enqueues the GEMM on the stream it was made for. `a` and `b` hold one-byte fp8 values
    /// (packed: A M x K, B N lines of K), `d` M x N values of `Out`, all 16-byte aligned;
    /// `a_scale`/`b_scale` in device memory, read by the launch: one f32 each, or the block
    /// scales in cuBLASLt's layouts ([`LtScales::lens`], [`lt_block_scales`]).
    pub fn run<A: DevicePtr<TA>, TA, B: DevicePtr<TB>, TB, D: DevicePtrMut<Out>>(
        &self,
        a: &A,
        b: &B,
        a_scale: &CudaSlice<f32>,
        b_scale: &CudaSlice<f32>,
        d: &mut D,
    ) -> Result<(), Error> {
        const {
            assert!(
                size_of::<TA>() == 1 && size_of::<TB>() == 1,
                "fp8 operands are buffers of one-byte elements"
            );
        }
        let (m, n, k) = (self.m, self.n, self.k);
        check_lengths(
            m,
            n,
            k,
            BufferLens {
                a: a.len(),
                b: b.len(),
                d: d.len(),
                a_scale: a_scale.len(),
                b_scale: b_scale.len(),
            },
            self.scales,
        )?;
        let stream = &self.stream;
        lt::bind(stream)?;
        // The guards order these accesses after earlier work on other streams, and later work
        // after this call; they drop when the call is enqueued.
        let (a_ptr, _a_done) = a.device_ptr(stream);
        let (b_ptr, _b_done) = b.device_ptr(stream);
        let (d_ptr, _d_done) = d.device_ptr_mut(stream);
        let (a_scale_ptr, _a_scale_done) = a_scale.device_ptr(stream);
        let (b_scale_ptr, _b_scale_done) = b_scale.device_ptr(stream);
        let (workspace_ptr, _workspace_done) = self.workspace.device_ptr(stream);
        for (operand, address) in [
            (Operand::A, a_ptr),
            (Operand::B, b_ptr),
            (Operand::C, d_ptr),
        ] {
            if !address.is_multiple_of(u64::from(ALIGN)) {
                return Err(Error::Runtime(gemm_runtime::Error::MisalignedPointer {
                    operand,
                    address,
                    align: ALIGN,
                }));
            }
        }
        if self.scales == LtScales::Blocks {
            for (what, address) in [("a_scale", a_scale_ptr), ("b_scale", b_scale_ptr)] {
                if !address.is_multiple_of(u64::from(ALIGN)) {
                    return Err(Error::Baseline {
                        action: format!("launching cuBLASLt's fp8 GEMM {m} x {n} x {k}"),
                        reason: format!(
                            "{what} starts at {address:#x}; block scales must be 16-byte aligned"
                        ),
                    });
                }
            }
        }
        let name = || self.short_name();
        // cuBLASLt's A is our B, so its A scale is b_scale; the scales are read on the device
        // when the launch runs, their addresses when it is enqueued.
        self.lt.point_at(
            [
                (
                    DescAttribute::CUBLASLT_MATMUL_DESC_A_SCALE_POINTER,
                    b_scale_ptr,
                    "b_scale",
                ),
                (
                    DescAttribute::CUBLASLT_MATMUL_DESC_B_SCALE_POINTER,
                    a_scale_ptr,
                    "a_scale",
                ),
            ],
            &name(),
        )?;
        let (alpha, beta) = (1.0f32, 0.0f32);
        // SAFETY: the handle, descriptor, layouts and algorithm are live and were planned
        // together; the buffers hold the packed matrices the layouts describe (checked above),
        // with the element types they name (one-byte fp8 values, `Out`), 16-byte aligned; C is
        // D with D's layout, which cuBLASLt computes in place (and β = 0 never reads); alpha
        // and beta are f32, the scale type, and live across the call; the workspace holds the
        // bytes the heuristic was allowed; the stream is the context's, bound above.
        let status = unsafe {
            self.lt.matmul(
                &self.algo,
                (alpha, beta),
                [b_ptr, a_ptr, d_ptr],
                (workspace_ptr, self.workspace.len()),
                stream,
            )
        };
        lt_result(status, || format!("{} {m} x {n} x {k}", name()))
    }

    /// M, N and K.
    pub fn shape(&self) -> (u32, u32, u32) {
        (self.m, self.n, self.k)
    }

    /// The formats of A and B.
    pub fn formats(&self) -> (Fp8Format, Fp8Format) {
        (self.a_format, self.b_format)
    }

    pub fn fast_accum(&self) -> bool {
        self.fast_accum
    }

    pub fn scales(&self) -> LtScales {
        self.scales
    }

    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    /// For tables: `cuBLASLt e4m3 x e4m3 -> bf16`, with ` fast accum` where it is on and
    /// ` block scales` where the scales are blocks.
    pub fn short_name(&self) -> String {
        let name = short_name(self.a_format, self.b_format, Out::NAME, self.fast_accum);
        match self.scales {
            LtScales::PerTensor => name,
            LtScales::Blocks => format!("{name} block scales"),
        }
    }

    /// The exact call, for method lines.
    pub fn description(&self) -> String {
        format!(
            "{} = cublasLtMatmul, {}, CUBLAS_COMPUTE_32F, scale type CUDA_R_32F, {} f32 \
             scales, fast accumulation {}, {} MiB workspace, the heuristic's first algorithm",
            self.short_name(),
            self.layouts(),
            self.scales.name(),
            if self.fast_accum { "on" } else { "off" },
            self.workspace.len() >> 20,
        )
    }

    /// The operands as cuBLASLt sees them.
    fn layouts(&self) -> String {
        layouts(
            self.m,
            self.n,
            self.k,
            self.a_format,
            self.b_format,
            output_type(Out::STORAGE),
        )
    }
}

fn short_name(a: Fp8Format, b: Fp8Format, out: &str, fast_accum: bool) -> String {
    let fast = if fast_accum { " fast accum" } else { "" };
    format!("cuBLASLt {a} x {b} -> {out}{fast}")
}

fn layouts(m: u32, n: u32, k: u32, a: Fp8Format, b: Fp8Format, out: cudaDataType) -> String {
    let p = lt_problem(m, n, k);
    format!(
        "TN, m x n x k = {} x {} x {} (our N x M x K): A = our B {:?} {} x {} ld {} (transposed), \
         B = our A {:?} {} x {} ld {}, C = D {out:?} {} x {} ld {}",
        p.m,
        p.n,
        p.k,
        b.cuda_type(),
        p.lt_a.rows,
        p.lt_a.cols,
        p.lt_a.ld,
        a.cuda_type(),
        p.lt_b.rows,
        p.lt_b.cols,
        p.lt_b.ld,
        p.lt_d.rows,
        p.lt_d.cols,
        p.lt_d.ld,
    )
}

impl<Out> Drop for LtFp8Gemm<Out> {
    fn drop(&mut self) {
        // Destroying the handle synchronizes the device (cuBLASLt's documentation), so it
        // needs the context: bound here, before the fields (`lt`, then the workspace, freed in
        // stream order behind the launches that use it) drop.
        let _ = self.stream.context().bind_to_thread();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use half::{bf16, f16};

    #[test]
    fn formats_are_cudas_fp8_types() {
        assert_eq!(Fp8Format::E4m3.cuda_type(), cudaDataType::CUDA_R_8F_E4M3);
        assert_eq!(Fp8Format::E5m2.cuda_type(), cudaDataType::CUDA_R_8F_E5M2);
        // library_types.h's values.
        assert_eq!(Fp8Format::E4m3.cuda_type() as u32, 28);
        assert_eq!(Fp8Format::E5m2.cuda_type() as u32, 29);
        assert_eq!(Fp8Format::E4m3.to_string(), "e4m3");
        assert_eq!(Fp8Format::E5m2.to_string(), "e5m2");
    }

    #[test]
    fn output_types_match_cublas_names() {
        // cuBLAS and cuBLASLt each bind their own `cudaDataType`; the values are CUDA's.
        fn same<E: Element>() {
            assert_eq!(
                output_type(E::STORAGE) as u32,
                crate::baseline::cublas::cuda_type(E::STORAGE) as u32,
                "{}",
                E::NAME
            );
        }
        same::<f32>();
        same::<bf16>();
        same::<f16>();
        assert_eq!(output_type(Storage::Bf16), cudaDataType::CUDA_R_16BF);
    }

    #[test]
    fn row_major_d_is_cublaslt_tn_on_swapped_operands() {
        let (m, n, k) = (48, 256, 64);
        let p = lt_problem(m, n, k);
        assert_eq!((p.m, p.n, p.k), (256, 48, 64));
        // cuBLASLt's A: B's N lines of K, stored k x m for transa = T.
        assert_eq!(
            p.lt_a,
            LtLayout {
                rows: 64,
                cols: 256,
                ld: 64
            }
        );
        // cuBLASLt's B: A's M rows of K, k x n for transb = N.
        assert_eq!(
            p.lt_b,
            LtLayout {
                rows: 64,
                cols: 48,
                ld: 64
            }
        );
        // D: N x M, ld N, column-major: row-major M x N.
        assert_eq!(
            p.lt_d,
            LtLayout {
                rows: 256,
                cols: 48,
                ld: 256
            }
        );
        let text = layouts(
            m,
            n,
            k,
            Fp8Format::E4m3,
            Fp8Format::E5m2,
            cudaDataType::CUDA_R_16BF,
        );
        assert_eq!(
            text,
            "TN, m x n x k = 256 x 48 x 64 (our N x M x K): A = our B CUDA_R_8F_E5M2 64 x 256 \
             ld 64 (transposed), B = our A CUDA_R_8F_E4M3 64 x 48 ld 64, C = D CUDA_R_16BF \
             256 x 48 ld 256"
        );
    }

    #[test]
    fn problems_cublaslt_takes() {
        use Fp8Format::{E4m3, E5m2};
        for (a, b) in [(E4m3, E4m3), (E4m3, E5m2), (E5m2, E4m3)] {
            check_problem(128, 256, 64, a, b, Storage::Bf16).unwrap();
        }
        // M is free; N need only make D's rows 16-byte multiples.
        check_problem(1, 8, 16, E4m3, E4m3, Storage::Bf16).unwrap();
        check_problem(3, 8, 16, E4m3, E4m3, Storage::F16).unwrap();
        check_problem(5, 4, 16, E4m3, E4m3, Storage::F32).unwrap();
    }

    #[test]
    fn problems_cublaslt_refuses_say_why() {
        use Fp8Format::{E4m3, E5m2};
        let refuse = |m, n, k, a, b, out| check_problem(m, n, k, a, b, out).unwrap_err();

        let error = refuse(128, 128, 128, E5m2, E5m2, Storage::Bf16);
        assert!(matches!(error, Error::Baseline { .. }), "{error:?}");
        assert!(error.to_string().contains("no e5m2 x e5m2 GEMM"), "{error}");

        let error = refuse(128, 128, 40, E4m3, E4m3, Storage::Bf16);
        assert!(
            matches!(
                error,
                Error::Runtime(gemm_runtime::Error::Dims {
                    m: 128,
                    n: 128,
                    k: 40,
                    ..
                })
            ),
            "{error:?}"
        );
        assert_eq!(
            error.to_string(),
            "cannot compute M x N x K = 128 x 128 x 40: cuBLASLt's fp8 kernels need A's rows \
             and B's columns (K = 40 fp8 values = 40 B) to be 16-byte multiples; pad K to 48"
        );

        let error = refuse(128, 4, 64, E4m3, E4m3, Storage::Bf16);
        assert_eq!(
            error.to_string(),
            "cannot compute M x N x K = 128 x 4 x 64: cuBLASLt's fp8 kernels need D's rows \
             (N = 4 bf16 values = 8 B) to be 16-byte multiples; pad N to 8 (a multiple of 8)"
        );
        let error = refuse(128, 6, 64, E4m3, E4m3, Storage::F32);
        assert!(
            error.to_string().contains("pad N to 8 (a multiple of 4)"),
            "{error}"
        );

        for (m, n, k) in [(0, 16, 16), (16, 0, 16), (16, 16, 0)] {
            let error = refuse(m, n, k, E4m3, E4m3, Storage::F16);
            assert!(error.to_string().contains("at least 1"), "{error}");
        }
    }

    #[test]
    fn short_buffers_name_their_numbers() {
        let (m, n, k) = (32, 16, 64);
        let full = BufferLens {
            a: 32 * 64,
            b: 64 * 16,
            d: 32 * 16,
            a_scale: 1,
            b_scale: 1,
        };
        check_lengths(m, n, k, full, LtScales::PerTensor).unwrap();
        check_lengths(m, n, k, BufferLens { a: 4096, ..full }, LtScales::PerTensor).unwrap();

        let error = check_lengths(m, n, k, BufferLens { a: 2047, ..full }, LtScales::PerTensor)
            .unwrap_err();
        assert_eq!(
            error.to_string(),
            "A holds 2047 elements, but 32 rows x 64 columns with leading dimension 64 need \
             2048 ((rows - 1) * ld + cols)"
        );
        let error = check_lengths(m, n, k, BufferLens { b: 1000, ..full }, LtScales::PerTensor)
            .unwrap_err();
        assert_eq!(
            error.to_string(),
            "B holds 1000 elements, but 16 columns x 64 rows with leading dimension 64 need \
             1024 ((columns - 1) * ld + rows; B is column-major)"
        );
        let error =
            check_lengths(m, n, k, BufferLens { d: 511, ..full }, LtScales::PerTensor).unwrap_err();
        assert!(
            matches!(
                error,
                Error::Runtime(gemm_runtime::Error::BufferTooSmall {
                    operand: Operand::C,
                    needed: 512,
                    len: 511,
                    ..
                })
            ),
            "{error:?}"
        );
        let error = check_lengths(
            m,
            n,
            k,
            BufferLens { b_scale: 0, ..full },
            LtScales::PerTensor,
        )
        .unwrap_err();
        assert_eq!(
            error.to_string(),
            "launching cuBLASLt's fp8 GEMM 32 x 16 x 64 failed: b_scale holds 0 values; it must \
             hold the operand's f32 scale"
        );
        // Block scales: 2 lines of 32 for A (K = 200), 1 line of 2 padded to 4 for B.
        let (m, n, k) = (32, 16, 200);
        let blocks = BufferLens {
            a: 32 * 200,
            b: 200 * 16,
            d: 32 * 16,
            a_scale: 64,
            b_scale: 4,
        };
        check_lengths(m, n, k, blocks, LtScales::Blocks).unwrap();
        let error = check_lengths(
            m,
            n,
            k,
            BufferLens {
                b_scale: 3,
                ..blocks
            },
            LtScales::Blocks,
        )
        .unwrap_err();
        assert_eq!(
            error.to_string(),
            "launching cuBLASLt's fp8 GEMM 32 x 16 x 200 failed: b_scale holds 3 values; it must \
             hold 4 f32 block scales"
        );
    }

    #[test]
    fn block_scales_take_cublaslts_layouts() {
        // M = 6 (A's lines 8 long in the kernels' layout), N = 300 (3 blocks), K = 300 (3).
        let (m, n, k) = (6u32, 300u32, 300u32);
        let a: Vec<f32> = (0..3 * 8).map(|i| i as f32).collect();
        let b: Vec<f32> = (0..3 * 3).map(|i| 100.0 + i as f32).collect();
        let (lt_a, lt_b) = lt_block_scales((&a, &b), (m, n, k));
        assert_eq!(LtScales::Blocks.lens(m, n, k), (lt_a.len(), lt_b.len()));
        // A: each k block's line of M, the kernels' padding dropped.
        assert_eq!(
            lt_a,
            [0., 1., 2., 3., 4., 5., 8., 9., 10., 11., 12., 13., 16., 17., 18., 19., 20., 21.]
        );
        // B: each N block's line of K blocks, padded to 4.
        assert_eq!(
            lt_b,
            [100., 101., 102., 1., 103., 104., 105., 1., 106., 107., 108., 1.]
        );
        assert_eq!(LtScales::PerTensor.lens(m, n, k), (1, 1));
    }

    #[test]
    fn block_scaled_problems_need_m_and_n_in_fours() {
        check_block_problem(128, 4096, 7168).unwrap();
        let error = check_block_problem(1, 4096, 7168).unwrap_err();
        assert!(error.to_string().contains("multiples of 4"), "{error}");
    }

    #[test]
    fn launches_take_byte_buffers() {
        // A function pointer to the instance makes the compiler build it, evaluating `run`'s
        // compile-time check of the element sizes.
        type Bytes = CudaSlice<u8>;
        let run: fn(&LtFp8Gemm<bf16>, &Bytes, &Bytes, &_, &_, &mut CudaSlice<bf16>) -> _ =
            LtFp8Gemm::<bf16>::run::<Bytes, u8, Bytes, u8, CudaSlice<bf16>>;
        std::hint::black_box(run);
    }

    #[test]
    fn names_for_tables() {
        assert_eq!(
            short_name(Fp8Format::E4m3, Fp8Format::E4m3, "bf16", false),
            "cuBLASLt e4m3 x e4m3 -> bf16"
        );
        assert_eq!(
            short_name(Fp8Format::E5m2, Fp8Format::E4m3, "f32", true),
            "cuBLASLt e5m2 x e4m3 -> f32 fast accum"
        );
    }
}
