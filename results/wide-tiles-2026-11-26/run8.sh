#!/bin/bash
# Ping-pong tiles in two-block clusters at the mid and large squares, two processes.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
D=results/wide-tiles-2026-11-26
SH=3072x3072x3072,4096x4096x4096,4608x4608x4608,6144x6144x6144,6656x6656x6656,7168x7168x7168,8192x8192x8192
for i in 1 2; do
  .gpu/bin/gemm-bench --spec-file $D/ppc-specs.txt --shapes $SH --check --out $OUT/ppc$i.json > $OUT/ppc$i.log 2>&1
  echo "rc $?"
done
grep -ci fail $OUT/ppc1.log $OUT/ppc2.log
