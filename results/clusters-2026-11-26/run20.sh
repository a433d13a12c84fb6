#!/bin/bash
# GPU checks of the walk without division instructions (commit e137c19): the catalog's tests
# of persistent, Hopper and batched kernels (both families' walks, strided batches past the
# first product, stream-K, SASS promises), the entry point's tests and fp8's; memcheck of a
# batched persistent launch in each family.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
T="persistent hopper strided_batch stream_k driver_sass multi_stage partial_tile every_hopper_epilogue"
{
  for t in $T; do .gpu/tests/gpu --ignored --test-threads 1 $t 2>&1 | grep -E "^test |test result"; done
  .gpu/tests/matmul --ignored --test-threads 1 2>&1 | grep -E "^test |test result"
  .gpu/tests/fp8 --ignored --test-threads 1 2>&1 | grep -E "^test |test result"
} > $OUT/gpu-tests-walk.log
grep -E "test result|FAILED|panicked" $OUT/gpu-tests-walk.log
{
  for k in wgmma_bf16_192x96x64_s5_pingpong mma_bf16_128x256x64_s3_persistent; do
    for shape in 3x777x1001x520 1000x3000x256; do
      echo "== $k $shape"
      compute-sanitizer --tool memcheck .gpu/bin/gemm-run $k --shape $shape 2>&1 | tail -2
    done
  done
} > $OUT/memcheck-walk.log
grep -E "^==|ERROR SUMMARY|rel" $OUT/memcheck-walk.log
