//! gemm-dsl code generation: spec → plan → PTX.
//!
//! [`emit()`](fn@emit) turns a validated spec into PTX text plus the launch geometry, parameter list and
//! the SASS opcodes the spec promises. Each kernel family is a folder of [`family`] (its plan
//! by concern, SASS promises, `explain` section, math-only probe and its part of the writer),
//! over the shared axes of [`plan`] (batch, edges, tile walks, swizzles, ring, banks); [`ptx`]
//! lays the plan out through tera templates (`templates/<family>/`, shared macros in
//! `templates/common/`). The kernel ABI ([`KernelInfo`] and its parts) is `gemm_dsl::abi`,
//! re-exported here.
//! [`catalog`] names the specs that tests, benches and the CLI share; [`pick`] is the cost
//! model over the kernels planned here; [`sass`] (`gemm_dsl::sass`, re-exported) assembles with
//! ptxas and reads the SASS back.

pub mod catalog;
pub mod emit;
pub mod explain;
pub mod family;
pub mod pick;
pub mod plan;
pub mod ptx;

pub use emit::{emit, emit_math_only, emit_str, Emitted, MathOnly};
pub use gemm_dsl;
pub use gemm_dsl::abi::{
    CopyPath, GridSchedule, KernelInfo, KernelParam, KernelParts, LaunchShape, Opcode, Operand,
    ParamKind, SassCheck, Scalar, StorageOrder, TensorMapBox, BATCH_PARAMS, GEMM_PARAMS,
    SIZE_PARAMS, TENSOR_MAP_ALIGN, TENSOR_MAP_BYTES,
};
pub use gemm_dsl::sass;
