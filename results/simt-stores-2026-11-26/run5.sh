#!/bin/bash
# The GPU tests run4.sh's time limit cut (SIMT and mma.sync around their tiles and in every
# layout, random shapes in every layout, math-only probes, verification), a fused SIMT kernel
# under memcheck and racecheck, and SIMT at 4096^3 and 8192^3 in three processes.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
CS=/usr/local/cuda/bin/compute-sanitizer
F="name: fused_simt, arch: sm_80, tile: 128x128x8, warps: 4x2, stages: 2, copy: cp_async, mma: fma, scale: alpha_beta, bias: col, activation: gelu"
for t in memcheck racecheck; do
  echo "fused_simt $t $($CS --tool $t .gpu/bin/gemm-run "$F" --shape 2x1000x1016x1000 2>&1 | tail -1)"
done > $OUT/sanitizer-fused.log
cat $OUT/sanitizer-fused.log
for t in simt_and_mma_sync random_shapes_compute_in_every_layout math_only verif; do
  timeout 200 .gpu/tests/gpu --ignored --test-threads 2 $t 2>&1 | grep -E "^test .*(ok|FAILED)$|test result|panicked"
done > $OUT/gpu-tests-2.log
grep "test result" $OUT/gpu-tests-2.log
for i in 1 2 3; do
  .gpu/bin/gemm-bench --specs simt_64x64x16_cp4_h100,simt_64x128x32_cp3_h100 \
    --shapes 4096x4096x4096,8192x8192x8192 --check 2>&1 | grep -E "TFLOP|FAIL|rror" | sed "s/^/$i /"
done > $OUT/simt-3.txt
grep -ci fail $OUT/simt-3.txt; wc -l < $OUT/simt-3.txt
