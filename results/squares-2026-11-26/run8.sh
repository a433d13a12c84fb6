#!/bin/bash
# Raster band width and direction, and 2x1 clusters, on the leading square kernels; two passes.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
R=results/squares-2026-11-26
for pass in 1 2; do
  .gpu/bin/gemm-bench --spec-file $R/raster-specs.txt --shapes 1536x1536x1536,3072x3072x3072,4096x4096x4096,5632x5632x5632,6144x6144x6144,8192x8192x8192 \
    --check --out $OUT/raster-pass$pass.json > $OUT/raster-pass$pass.log 2>&1
done
grep -ci fail $OUT/*.log
