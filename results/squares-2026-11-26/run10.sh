#!/bin/bash
# 16-row decode tiles: more k per stage, more warps, 32-column tiles on 128 SMs; two passes.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
R=results/squares-2026-11-26
for pass in 1 2; do
  .gpu/bin/gemm-bench --spec-file $R/decode-specs.txt --shapes 1x4096x4096,1x4096x14336,1x6144x4096,1x8192x8192,1x10240x8192,16x4096x4096,16x6144x4096,16x4096x14336,16x8192x8192 \
    --check --out $OUT/decode-pass$pass.json > $OUT/decode-pass$pass.log 2>&1
done
grep -ci fail $OUT/*.log
