#!/bin/bash
# The landed row order (odd rows, then even; c5ada7d): the SIMT GPU tests, memcheck,
# and the two Hopper SIMT kernels at three squares in three processes.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
CS=/usr/local/cuda/bin/compute-sanitizer
timeout 90 .gpu/tests/gpu --ignored --test-threads 2 simt_and_mma_sync 2>&1 | grep -E "^test .*(ok|FAILED)$|test result|panicked" > $OUT/gpu-tests-rows.log
timeout 90 .gpu/tests/gpu --ignored every_catalog_kernel_matches_float64_on_the_shape_suite 2>&1 | grep -E "^test .*(ok|FAILED)$|test result|panicked" >> $OUT/gpu-tests-rows.log
grep "test result" $OUT/gpu-tests-rows.log
echo "memcheck $($CS --tool memcheck .gpu/bin/gemm-run simt_64x64x16_cp4_h100 --shape 2x1000x1016x1000 2>&1 | tail -1)" > $OUT/sanitizer-rows.log
cat $OUT/sanitizer-rows.log
for i in 1 2 3; do
  .gpu/bin/gemm-bench --specs simt_64x64x16_cp4_h100,simt_64x128x32_cp3_h100 \
    --shapes 2048x2048x2048,4096x4096x4096,8192x8192x8192 --check 2>&1 | grep -E "TFLOP|FAIL|rror" | sed "s/^/$i /"
done > $OUT/rows-final.txt
grep -ci fail $OUT/rows-final.txt; wc -l < $OUT/rows-final.txt
