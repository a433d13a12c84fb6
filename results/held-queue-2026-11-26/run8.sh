#!/bin/bash
# Three consumers landed (catalog wgmma_bf16_192x96x64_s5_c3, the sm90 set's w192x96): the
# catalog's GPU tests that cover it (float64 on the shape suite, any shape, every layout,
# random shapes, strided batches, many persistent rounds, short K, the SASS promises), the
# entry point's, and memcheck / racecheck of the catalog kernel.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
timeout 420 .gpu/tests/gpu --ignored --test-threads 1 every_catalog_kernel partial_tile_kernels_compute_any_shape hopper_kernels driver_sass_keeps persistent_kernels multi_stage_kernels 2>&1 | grep -E "^test |test result|panicked|FAILED" > $OUT/gpu-tests.log
tail -1 $OUT/gpu-tests.log; grep -c "ok$" $OUT/gpu-tests.log
timeout 120 .gpu/tests/matmul --ignored 2>&1 | grep -E "^test |test result|panicked|FAILED" > $OUT/matmul-tests-c3.log
tail -1 $OUT/matmul-tests-c3.log
S=/usr/local/cuda/bin/compute-sanitizer
for tool in memcheck racecheck synccheck; do
  $S --tool $tool .gpu/bin/gemm-run wgmma_bf16_192x96x64_s5_c3 2>&1 | tail -2 | tr '\n' ' '; echo " <- $tool"
done > $OUT/sanitizer-c3.log
cat $OUT/sanitizer-c3.log
