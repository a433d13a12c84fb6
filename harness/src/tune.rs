//! Tuning caches as `gemm-bench` writes them: the entries of a tuning run (`--tune-out`,
//! merged into the file by
//! [`TuneFile::merge`](gemm_runtime::tune::TuneFile::merge)). None of it needs a GPU.
//!
//! An entry counts for a [`Matmul`](gemm_runtime::Matmul) only where its kernel is a member
//! of the set in hand with the same spec hash.

use gemm_dsl::pick::sets::KernelSet;
use gemm_dsl::pick::Problem;
use gemm_dsl::DType;
use gemm_runtime::tune::{spec_hash, stride_align, DeviceKey, TuneEntry};
use std::collections::HashMap;

/// Each member of `set` for these element types, in every layout it takes: its kernel name
/// and the hash of its validated spec text, which a cache entry names it by.
pub fn member_hashes(set: &KernelSet, dtype: DType, out: DType) -> HashMap<String, String> {
    set.specs(dtype, out)
        .iter()
        .filter_map(|text| {
            let valid = gemm_dsl::check_str(text).ok()?;
            Some((
                valid.spec.name.clone(),
                spec_hash(&valid.spec.to_spec_text()),
            ))
        })
        .collect()
}

/// What a tuning run of one kernel set, for one pair of element types, writes: per problem,
/// the member that measured fastest.
#[derive(Clone, Debug)]
pub struct TuneRun {
    device: DeviceKey,
    dtype: DType,
    out: DType,
    /// Kernel name to spec hash, every member in every layout.
    hashes: HashMap<String, String>,
}

impl TuneRun {
    pub fn new(device: DeviceKey, set: &KernelSet, dtype: DType, out: DType) -> TuneRun {
        TuneRun {
            device,
            dtype,
            out,
            hashes: member_hashes(set, dtype, out),
        }
    }

    /// The cache entry for `problem` (its layout, batch and leading dimensions as measured)
    /// whose fastest kernel was `kernel`, at `tflops` and `ratio_to_cublas`; `None` where
    /// `kernel` is not a member of the set.
    pub fn entry(
        &self,
        problem: &Problem,
        kernel: &str,
        tflops: f64,
        ratio_to_cublas: f64,
    ) -> Option<TuneEntry> {
        Some(TuneEntry {
            device: self.device.clone(),
            dtype: self.dtype.name().to_string(),
            out: self.out.name().to_string(),
            layout: problem.layout.name().to_string(),
            m: problem.m,
            n: problem.n,
            k: problem.k,
            batch: problem.batch,
            stride_align: stride_align(problem, self.dtype.size_bytes(), self.out.size_bytes()),
            kernel: kernel.to_string(),
            spec_hash: self.hashes.get(kernel)?.clone(),
            tflops,
            ratio_to_cublas,
        })
    }
}
