#!/bin/bash
# The sm90 set with its two ping-pong members: the entry point's GPU tests, memcheck of the new
# members on a ragged shape, --auto (model, then the cache from run4) over shapes/models.txt,
# --auto over the squares, and 20 s sustained rows at 4096^3 and 8192^3.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
B=.gpu/bin/gemm-bench
R=results/squares-2026-11-26
.gpu/tests/matmul --ignored --test-threads 1 > $OUT/matmul-tests.log 2>&1; tail -2 $OUT/matmul-tests.log
for s in wgmma_bf16_128x192x64_s4_pingpong wgmma_bf16_128x64x64_s8_pingpong; do
  /usr/local/cuda/bin/compute-sanitizer --tool memcheck .gpu/bin/gemm-run $s --shape 777x1001x520 2>&1 | tail -2
done > $OUT/memcheck.log
$B --set sm90 --shape-file shapes/models.txt --check --auto --picks $OUT/auto-model.md --out $OUT/auto-model.json > /dev/null 2>&1
$B --set sm90 --shape-file shapes/models.txt --check --auto --tune-cache $R/tune-cache.json --picks $OUT/auto-cache.md --out $OUT/auto-cache.json > /dev/null 2>&1
SQ=$(for s in $(seq 1024 512 8192); do printf "%sx%sx%s," $s $s $s; done); SQ=${SQ%,}
$B --set sm90 --shapes $SQ --check --auto --picks $OUT/auto-squares.md > /dev/null 2>&1
$B --specs wgmma_bf16_128x128x64_s6_pingpong,wgmma_bf16_128x192x64_s4_pingpong,wgmma_bf16_128x256x64_s4_persistent \
   --shapes 4096x4096x4096,8192x8192x8192 --sustain 20 --check 2>&1 | grep ratio > $OUT/sustained.txt
cat $OUT/memcheck.log $OUT/sustained.txt
