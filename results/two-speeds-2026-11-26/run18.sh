#!/bin/bash
# The sm90 set's 19th member, 192x96 ping-pong with A at the 128-byte swizzle and B at the
# 64-byte one (wgmma_bf16_192x96x64_s5_pingpong in the catalog):
# 1. the entry point's GPU tests (every member in every layout on edge shapes, fused sets, four
#    streams of stream-K), the catalog's Hopper tests (every layout, random shapes, partial
#    tiles), compute-sanitizer memcheck of the new kernel in two layouts;
# 2. the 15 squares with every member of the set.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
export PATH=/usr/local/cuda/bin:$PATH
.gpu/tests/matmul --ignored --test-threads 1 2>&1 | grep -E "^test |test result|panicked|FAILED" > $OUT/matmul-tests-19.log; tail -1 $OUT/matmul-tests-19.log
timeout 200 .gpu/tests/gpu --ignored hopper_kernels partial_tile_kernels 2>&1 | grep -E "^test |test result|panicked|FAILED" > $OUT/gpu-hopper-tests-19.log; tail -1 $OUT/gpu-hopper-tests-19.log
S="arch: sm_90a, dtype: bf16, tile: 192x96x64, consumers: pingpong, stages: 5, swizzle: 128B, copy: tma, mma: wgmma, schedule: persistent(raster = m, group = 8)"
for l in rr cc; do
  compute-sanitizer --tool memcheck .gpu/bin/gemm-run "name: p192x96_$l, $S, layout: $l" --shape 777x1001x520 2>&1 | tail -2
done > $OUT/memcheck-192x96.log; cat $OUT/memcheck-192x96.log
SQ=$(for s in $(seq 1024 512 8192); do printf "%sx%sx%s," $s $s $s; done); SQ=${SQ%,}
.gpu/bin/gemm-bench --set sm90 --shapes $SQ --check --time-limit 200 --out $OUT/squares-19.json > $OUT/squares-19.log 2>&1
grep -ci fail $OUT/squares-19.log
