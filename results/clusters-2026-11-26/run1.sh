#!/bin/bash
# SIMT: does the partial last round of blocks explain 4096^3's gap to 8192^3?
# 4224x3840 holds 1980 tiles of 64x128 (5 rounds of 396 blocks) and 3960 of 64x64 (5 rounds of 792).
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
for i in 1 2; do
  .gpu/bin/gemm-bench --specs simt_64x128x32_cp3_h100,simt_64x64x16_cp4_h100 --shapes 4096x4096x4096,4224x3840x4096,8192x8192x8192,4224x3840x8192 --check 2>&1 | grep ratio | grep -v "^spec" | sed "s/^/$i /"
done > $OUT/simt-rounds.txt
cat $OUT/simt-rounds.txt
