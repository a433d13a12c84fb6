#!/bin/bash
# The new SIMT loop capped at 144 registers (.maxnreg 144: 140 used, no spills, 7 blocks an SM
# instead of 6; static bank conflicts 0.73 per FFMA against 0.30), against the generated kernel.
# The PTX: `gemm-codegen emit simt_64x64x16_cp4_h100` at 4fe85e1 with `.maxnreg 255` -> 144
# and the entry renamed, in .gpu/ptx3/.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
R=results/simt-stores-2026-11-26
for i in 1 2; do
  .gpu/bin/gemm-bench --specs simt_64x64x16_cp4_h100 --spec-file $R/specs3.txt --ptx-dir .gpu/ptx3 \
    --shapes 2048x2048x2048,4096x4096x4096,8192x8192x8192 --check 2>&1 | grep -E "TFLOP|FAIL|rror" | sed "s/^/$i /"
done > $OUT/cap.txt
grep -ci fail $OUT/cap.txt; wc -l < $OUT/cap.txt
