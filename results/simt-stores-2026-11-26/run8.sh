#!/bin/bash
# The snake with its rows visited in other orders (the static conflicts 0.24-0.25 per FFMA
# against the generated kernel's 0.30): gray [0,1,3,2,6,7,5,4], odds then evens, and the best
# of 40 random orders [3,6,1,5,7,0,4,2], two processes. The PTX in .gpu/ptx4/: `gemm-codegen
# emit simt_64x64x16_cp4_h100` at 4fe85e1, then `simt-variants.py IN OUT NAME rows=1,3,5,7,0,2,4,6`
# (and the other two orders), NAME as in specs4.txt.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
R=results/simt-stores-2026-11-26
for i in 1 2; do
  .gpu/bin/gemm-bench --specs simt_64x64x16_cp4_h100 --spec-file $R/specs4.txt --ptx-dir .gpu/ptx4 \
    --shapes 2048x2048x2048,4096x4096x4096,8192x8192x8192 --check 2>&1 | grep -E "TFLOP|FAIL|rror" | sed "s/^/$i /"
done > $OUT/rows.txt
grep -ci fail $OUT/rows.txt; wc -l < $OUT/rows.txt
