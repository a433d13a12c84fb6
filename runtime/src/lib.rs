//! gemm-dsl runtime: generated kernels on the GPU.
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
//! - [`verify`] measures a kernel against a float64 or cuBLAS reference on random normal
//!   inputs from a seed; [`blas`] is cuBLAS for every element type.
//!
//! Emitting at run time is the default feature `emit` (`Matmul::new`, `new_fused`, `with_set`,
//! `with_set_fused`, `GemmKernel::from_emitted`, `AnyKernel::from_emitted`): a crate that
//! launches only its own `gemm!` / `gemm_set!` kernels turns default features off and links no
//! code generator. The picker and the SASS check need none ([`gemm_dsl::pick`],
//! [`gemm_dsl::sass`]).
//!
//! Tools are features, so a crate that launches `gemm!` kernels compiles none of their
//! dependencies:
//! - `bench`: the `bench` module times kernels against cuBLAS and writes JSON / markdown / SVG
//!   reports; the `probe` module runs a spec's main-loop math alone (emitted at run time), the
//!   ceiling `gemm-bench --math-only` shows.
//! - `cli`: the `gemm-bench` and `gemm-run` binaries (implies `bench`).

#[cfg(feature = "bench")]
pub mod bench;
pub mod blas;
pub mod blas_aux;
pub mod blas_fp8;
mod blas_lt;
pub mod check;
mod device;
mod dispatch;
mod element;
pub mod epilogue;
mod error;
pub mod fp8;
#[cfg(feature = "bench")]
pub mod fp8_bench;
#[cfg(feature = "bench")]
pub mod fused_bench;
mod jit;
mod kernel;
mod matmul;
#[cfg(feature = "bench")]
pub mod probe;
mod tensor_map;
pub mod tune;
pub mod verify;

pub use check::{Batch, LeadingDims};
pub use device::{driver_present, open_context, DeviceInfo};
pub use dispatch::{AnyKernel, TypedKernel};
pub use element::{Element, KernelTypes, Storage};
pub use epilogue::{BiasArg, CIn, Epilogue, FusedSpec, QuantScales};
pub use error::{Error, Operand};
pub use jit::{jit_cubin, jit_cubin_logged};
pub use kernel::GemmKernel;
pub use matmul::{device_key, device_model, Matmul, Pick, PickSource, Picked, Picker};
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
pub use gemm_dsl::{DType, Layout};
pub use gemm_macros::{gemm, gemm_set};
pub use tensor_map::{GlobalMatrix, TensorMap};
