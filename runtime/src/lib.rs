//! gemm-dsl runtime: generated kernels on the GPU.
//!
//! - [`GemmKernel::load`] compiles a kernel's PTX with the driver's JIT (its error log
//!   surfaced on failure), checks the device's compute capability, opts into large dynamic
//!   shared memory, and in debug builds checks the driver's SASS against the spec.
//! - [`GemmKernel::launch`] checks sizes, strides, buffer lengths and alignment against the
//!   kernel's [`LaunchShape`] (the arithmetic lives in [`check`], testable without a GPU).
//! - [`GemmKernel::sass`] disassembles exactly what the driver runs.
//! - [`verify`] measures a kernel against a float64 or cuBLAS reference; [`bench`] times it
//!   against cuBLAS (the `gemm-bench` binary).

pub mod bench;
pub mod check;
mod device;
mod element;
mod error;
mod jit;
mod kernel;
pub mod verify;

pub use device::{driver_present, open_context, DeviceInfo};
pub use element::Element;
pub use error::{Error, Operand};
pub use jit::jit_cubin;
pub use kernel::GemmKernel;

pub use codegen::sass::SassReport;
pub use codegen::{KernelInfo, KernelParam, LaunchShape, Opcode, SassCheck, GEMM_PARAMS};
pub use cudarc::driver::{CudaContext, CudaSlice, CudaStream};
pub use gemm_macros::gemm;
