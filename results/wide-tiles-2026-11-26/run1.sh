#!/bin/bash
# Layouts of the ping-pong tiles at the small squares, two processes: does B's 64-byte
# swizzle (rr, 96 columns N-major) cost 192x96 its speed against cuBLAS's orientation?
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
D=results/wide-tiles-2026-11-26
SH=1024x1024x1024,1536x1536x1536,2048x2048x2048,3072x3072x3072
for i in 1 2; do
  .gpu/bin/gemm-bench --spec-file $D/layout-specs.txt --shapes $SH --check --out $OUT/layouts$i.json > $OUT/layouts$i.log 2>&1
  echo "rc $?"
done
grep -ci fail $OUT/layouts1.log $OUT/layouts2.log
