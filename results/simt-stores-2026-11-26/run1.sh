#!/bin/bash
# SIMT: the epilogue's accumulator stores as scalars (frees ptxas from keeping each group of four
# accumulators in consecutive registers), against the generated kernels, three processes.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
R=results/simt-stores-2026-11-26
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv,noheader > $OUT/device.txt
for i in 1 2 3; do
  .gpu/bin/gemm-bench --spec-file $R/specs.txt --ptx-dir $R/ptx \
    --shapes 1000x1016x1000,4096x4096x4096,8192x8192x8192 --check 2>&1 | grep -E "TFLOP|FAIL|rror" | sed "s/^/$i /"
done > $OUT/stores.txt
grep -ci fail $OUT/stores.txt; wc -l < $OUT/stores.txt
