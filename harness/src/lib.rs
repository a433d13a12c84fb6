//! gemm-dsl's measuring harness: what proves and times the kernels, kept out of the runtime so
//! that a crate launching `gemm!` kernels compiles none of it (no cuBLAS binding, no plotting,
//! no command line).
//!
//! - [`verify`] measures a kernel against a float64 or cuBLAS reference on random normal
//!   inputs from a seed, C poisoned first.
//! - [`baseline`] holds the libraries the kernels are timed against: cuBLAS for every element
//!   type, cuBLASLt's fp8 GEMM and its `GELU_AUX_BIAS` epilogue.
//! - [`bench`](mod@bench) times kernels against them (event timing, suites, JSON / markdown / SVG
//!   reports), with the fused-epilogue and fp8 comparisons in [`bench::fused`] and
//!   [`bench::fp8`]; [`probe`] runs a spec's main-loop math alone, the ceiling
//!   `gemm-bench --math-only` shows.
//! - [`tune`] is the tuning cache as `gemm-bench` writes it (`--tune-out`) and inspects it
//!   (`gemm-bench cache show|prune|merge`).
//! - The binaries: `gemm-bench` (benchmarks, tuning caches) and `gemm-run` (one checked
//!   launch of a kernel, for compute-sanitizer).

pub mod baseline;
pub mod bench;
mod error;
pub mod probe;
pub mod replay;
pub mod tune;
pub mod verify;

pub use error::Error;
