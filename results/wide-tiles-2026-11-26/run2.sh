#!/bin/bash
# 128x320 tiles: correctness on edge shapes (both N-major layouts, a cluster, stream-K, a
# batch), memcheck, then speed against the set's large members.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
D=results/wide-tiles-2026-11-26
spec() { grep "^name: $1," $D/wide-specs.txt; }
{
for n in w128x320 w128x320_c2x1 w128x320_sk; do
  for layout in rr cr; do
    s="$(spec $n), layout: $layout"
    for shape in 777x1001x520 2000x3000x256 1x321x64 129x641x70 3x300x700x128 1280x3200x4096; do
      printf "%s %s %s: " $n $layout $shape
      .gpu/bin/gemm-run "$s" --shape $shape --seed 7 2>&1 | tail -1
    done
  done
done
} > $OUT/wide-checks.log 2>&1
grep -c . $OUT/wide-checks.log
for n in w128x320 w128x320_c2x1 w128x320_sk; do
  /usr/local/cuda/bin/compute-sanitizer --tool memcheck .gpu/bin/gemm-run "$(spec $n)" --shape 777x1001x520 2>&1 | tail -2
done > $OUT/wide-memcheck.log 2>&1
SH=3072x3072x3072,4096x4096x4096,5120x5120x5120,5632x5632x5632,6144x6144x6144,7680x7680x7680,8192x8192x8192,512x28672x4096,4096x28672x4096,512x10240x8192
for i in 1 2; do
  .gpu/bin/gemm-bench --spec-file $D/wide-specs.txt --shapes $SH --check --time-limit 170 --out $OUT/wide$i.json > $OUT/wide$i.log 2>&1
  echo "bench rc $?"
done
grep -ci fail $OUT/wide1.log $OUT/wide2.log
