#!/bin/bash
# The set with m16x64_w4 in place of m16x64_s8: the entry point's GPU tests, memcheck of the
# new member on ragged shapes, and a tuning run over shapes/models.txt (a new cache).
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
B=.gpu/bin/gemm-bench
.gpu/tests/matmul --ignored --test-threads 1 > $OUT/matmul-tests-w4.log 2>&1; tail -2 $OUT/matmul-tests-w4.log
for shape in 13x1001x520 1x4099x777; do
  /usr/local/cuda/bin/compute-sanitizer --tool memcheck .gpu/bin/gemm-run "name: m16x64_w4, arch: sm_90, dtype: bf16, tile: 16x64x64, warps: 1x4, stages: 8, swizzle: 128B, copy: cp_async, mma: mma_sync" --shape $shape 2>&1 | tail -2
done > $OUT/memcheck-w4.log
cat $OUT/memcheck-w4.log
$B --set sm90 --shape-file shapes/models.txt --check --time-limit 400 --tune-out $OUT/tune-cache-w4.json --out $OUT/tune-w4.json > $OUT/tune-w4.log 2>&1
grep -ci fail $OUT/tune-w4.log
