#!/bin/bash
# GPU checks of the cluster kernels' new start and exit (commit c790528): the catalog's Hopper
# tests (every layout, random shapes, batches, persistent rounds, stream-K with a cluster,
# the SASS promises), the entry point's tests, fp8's, and memcheck of four cluster kernels.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
T="hopper persistent stream_k every_catalog_kernel driver_sass multi_stage partial_tile every_hopper_epilogue"
{
  for t in $T; do .gpu/tests/gpu --ignored --test-threads 1 $t 2>&1 | grep -E "^test |test result"; done
  .gpu/tests/matmul --ignored --test-threads 1 2>&1 | grep -E "^test |test result"
  .gpu/tests/fp8 --ignored --test-threads 1 2>&1 | grep -E "^test |test result"
} > $OUT/gpu-tests.log
grep -E "test result|FAILED|panicked" $OUT/gpu-tests.log
B="arch: sm_90a, dtype: bf16, mma: wgmma, swizzle: 128B, copy: tma(multicast = 2)"
{
  for k in wgmma_bf16_128x256x64_s4_cluster2x1 wgmma_bf16_256x128x64_s4_cluster1x2 \
    "name: p192_c1x2, $B, consumers: pingpong, tile: 192x96x64, stages: 5, schedule: persistent(raster = m, group = 8), cluster: 1x2" \
    "name: sk_c2x1, $B, tile: 128x256x64, consumers: 2, stages: 4, schedule: persistent(raster = m, group = 8, tail = stream_k), cluster: 2x1"; do
    for shape in 777x1001x520 2000x3000x256; do
      echo "== $k $shape"
      compute-sanitizer --tool memcheck .gpu/bin/gemm-run "$k" --shape $shape 2>&1 | tail -3
    done
  done
} > $OUT/memcheck.log
grep -E "^==|ERROR SUMMARY|rel" $OUT/memcheck.log | head -40
