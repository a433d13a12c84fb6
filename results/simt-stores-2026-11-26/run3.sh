#!/bin/bash
# SIMT: accumulators copied out through `add.f32 x, -0.0` before the v4 stores (exact), with
# three FFMA orders per k step: rows snaking, the snake reversed every other k step, row pairs.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
R=results/simt-stores-2026-11-26
for i in 1 2; do
  .gpu/bin/gemm-bench --spec-file $R/specs2.txt --ptx-dir $R/ptx2 \
    --shapes 1000x1016x1000,2048x2048x2048,4096x4096x4096,8192x8192x8192 --check 2>&1 | grep -E "TFLOP|FAIL|rror" | sed "s/^/$i /"
done > $OUT/orders.txt
grep -ci fail $OUT/orders.txt; wc -l < $OUT/orders.txt
