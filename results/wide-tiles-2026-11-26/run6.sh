#!/bin/bash
# The small squares: direct against TMA-store epilogues on the ping-pong tiles, and a 64x128
# one-consumer tile with and without a 2x1 cluster; two processes.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
D=results/wide-tiles-2026-11-26
SH=1024x1024x1024,1536x1536x1536,2048x2048x2048,3072x3072x3072
for i in 1 2; do
  .gpu/bin/gemm-bench --spec-file $D/small-specs.txt --shapes $SH --check --out $OUT/small$i.json > $OUT/small$i.log 2>&1
  echo "rc $?"
done
grep -ci fail $OUT/small1.log $OUT/small2.log
