#!/usr/bin/env bash
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
B=target/runtime-gpu/bin/gemm-bench
W=$(mktemp -d)
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_throttle_reasons.active --format=csv -lms 500 > $W/smi.csv &
SMI=$!
for order in a b; do
  for shape in 4096x4096x4096 8192x8192x8192; do
    $B --spec-file .gpu-tune/r6/specs.txt --ptx-dir .gpu-tune/r6/ptx --shapes $shape --math-only --out $W/abl-$order-$shape.json 2>&1 | grep abl_ | grep -v replaced
  done
  tac .gpu-tune/r6/specs.txt > .gpu-tune/r6/specs-rev.txt
  cp .gpu-tune/r6/specs-rev.txt .gpu-tune/r6/specs.txt
done
kill $SMI
tar czf $OUT/r6.tgz -C $W .
