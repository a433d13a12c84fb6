//! gemm-dsl runtime: generated kernels on the GPU.
//!
//! ```no_run
//! gemm_runtime::gemm! {
//!     name: sgemm,
//!     arch: sm_80,
//!     dtype: f32,
//!     tile: 128x128x8,
//!     copy: cp_async,
//! }
//!
//! fn main() -> Result<(), gemm_runtime::Error> {
//!     let ctx = gemm_runtime::open_context(0)?;
//!     let stream = ctx.default_stream();
//!     let kernel = sgemm::load(&ctx)?; // JIT, shared-memory opt-in, SASS check in debug builds
//!     let (m, n, k) = (1024, 1024, 1024);
//!     let a = stream.clone_htod(&vec![1.0f32; (m * k) as usize]).expect("A");
//!     let b = stream.clone_htod(&vec![0.5f32; (k * n) as usize]).expect("B");
//!     let mut c = stream.alloc_zeros::<f32>((m * n) as usize).expect("C");
//!     kernel.launch(&stream, &a, &b, &mut c, m, n, k)?; // sizes, strides, alignment checked
//!     assert!(stream.clone_dtoh(&c).expect("C").iter().all(|&x| x == 512.0));
//!     Ok(())
//! }
//! ```
//!
//! - [`GemmKernel::load`] compiles a kernel's PTX with the driver's JIT (its error log
//!   surfaced on failure), checks the device's compute capability, opts into large dynamic
//!   shared memory, and in debug builds checks the driver's SASS against the spec.
//! - [`GemmKernel::launch`] checks sizes, strides, buffer lengths and alignment against the
//!   kernel's [`LaunchShape`] (the arithmetic lives in [`check`], testable without a GPU);
//!   [`GemmKernel::launch_strided_batched`] runs a strided [`Batch`] of products in one launch.
//! - [`GemmKernel::sass`] disassembles exactly what the driver runs.
//! - [`AnyKernel`] loads a kernel with the Rust element types its spec names (f32 for f32 and
//!   tf32, `half::bf16`, `half::f16`); [`with_kernel!`] runs generic code on it.
//! - [`Matmul`] is the entry point that picks: one kernel set (built in for the device, or
//!   the caller's `gemm!` kernels), a kernel per problem from a [`tune`] cache or the cost
//!   model of [`gemm_dsl::pick`], each kernel loaded the first time it is picked.
//!
//! Emitting at run time is the default feature `emit` (`Matmul::new`, `new_fused`, `with_set`,
//! `with_set_fused`, `GemmKernel::from_emitted`, `AnyKernel::from_emitted`): a crate that
//! launches only its own `gemm!` / `gemm_set!` kernels turns default features off and links no
//! code generator. The picker and the SASS check need none ([`gemm_dsl::pick`],
//! [`gemm_dsl::sass`]).
//!
//! Measuring is not here: checking kernels against float64 and cuBLAS, the benchmarks
//! against cuBLAS and cuBLASLt, and the `gemm-bench` and `gemm-run` binaries are the
//! workspace's `gemm-harness` crate, so a crate that launches kernels compiles no cuBLAS
//! binding.

pub mod capture;
pub mod check;
mod device;
mod dispatch;
mod element;
pub mod epilogue;
mod error;
pub mod fp8;
mod jit;
mod jit_cache;
mod kernel;
mod matmul;
mod stage;
mod tensor_map;
pub mod tune;

pub use capture::{begin_capture, StreamCapture};
pub use check::{Batch, GroupedDims, LeadingDims};
pub use device::{driver_present, open_context, DeviceInfo};
pub use dispatch::{AnyKernel, TypedKernel};
pub use element::{Element, KernelTypes, Storage};
pub use epilogue::{BiasArg, CIn, Epilogue, FusedSpec, QuantScales};
pub use error::{Error, Operand};
pub use jit::{driver_cubin, jit_cubin, jit_cubin_logged, DriverCubin, DriverSass, SassOrigin};
pub use kernel::GemmKernel;
#[cfg(feature = "emit")]
pub use matmul::GroupedMatmul;
pub use matmul::{device_key, device_model, Matmul, Pick, PickSource, Picked, Picker, WarmUp};
pub use tune::TuneCache;

// Crates the `gemm!` expansion and users name through the runtime, so versions always match.
pub use cudarc;
pub use half;

pub use cudarc::driver::{CudaContext, CudaSlice, CudaStream};
pub use gemm_dsl::abi::{
    CopyPath, EpilogueBuffer, Factor, GridSchedule, KernelInfo, KernelParam, KernelParts,
    LaunchShape, Opcode, ParamKind, SassCheck, Scalar, StorageOrder, TensorMapBox, BATCH_PARAMS,
    GEMM_PARAMS,
};
pub use gemm_dsl::pick::{sets, Problem};
pub use gemm_dsl::sass::SassReport;
pub use gemm_dsl::{
    Activation, Aux, Bias, BiasAlong, DType, Groups, Layout, Quant, RowScale, Scale,
};
pub use gemm_macros::{gemm, gemm_set};
pub use tensor_map::{GlobalMatrix, TensorMap};
