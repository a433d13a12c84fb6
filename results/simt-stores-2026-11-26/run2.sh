#!/bin/bash
# SIMT: accumulators freed from the epilogue's vector stores, three ways (`scalar_c`: scalar
# stores; `fadd`: v4 stores of acc + 0.0; `snake`/`fadd_snake`: the same with the FFMAs of
# every other A row in reverse), against the generated kernels; three processes.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
R=results/simt-stores-2026-11-26
for i in 1 2 3; do
  .gpu/bin/gemm-bench --spec-file $R/specs.txt --ptx-dir $R/ptx \
    --shapes 1000x1016x1000,2048x2048x2048,4096x4096x4096,8192x8192x8192 --check 2>&1 | grep -E "TFLOP|FAIL|rror" | sed "s/^/$i /"
done > $OUT/variants.txt
grep -ci fail $OUT/variants.txt; wc -l < $OUT/variants.txt
