//! The libraries the kernels are measured against, in the same process: cuBLAS for every
//! element type ([`cublas`], also the large problems' reference), cuBLASLt's fp8 GEMM
//! ([`fp8`]) and its `GELU_AUX_BIAS` epilogue ([`gelu_aux`]).

pub mod cublas;
pub mod fp8;
pub mod gelu_aux;
mod lt;
