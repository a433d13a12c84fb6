#!/bin/bash
# The generated SIMT kernels with the accumulator copy and the snake order: GPU tests (every
# family but Hopper's, whose PTX did not change; fused epilogues; the entry point), memcheck and
# racecheck, then the catalog's SIMT kernels and other tiles at three squares, two processes.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
R=results/simt-stores-2026-11-26
CS=/usr/local/cuda/bin/compute-sanitizer
timeout 240 .gpu/tests/gpu --ignored --test-threads 2 --skip hopper_ 2>&1 | grep -E "^test |test result|panicked" > $OUT/gpu-tests.log
tail -1 $OUT/gpu-tests.log
timeout 90 .gpu/tests/epilogue --ignored 2>&1 | grep -E "^test |test result|panicked" > $OUT/epilogue-tests.log
tail -1 $OUT/epilogue-tests.log
timeout 120 .gpu/tests/matmul --ignored 2>&1 | grep -E "^test |test result|panicked" > $OUT/matmul-tests.log
tail -1 $OUT/matmul-tests.log
for k in simt_64x64x16_cp4_h100 simt_64x128x32_cp3_h100 fused_simt_128x128x8_cp2; do
  for t in memcheck racecheck; do
    echo "$k $t $($CS --tool $t .gpu/bin/gemm-run $k --shape 2x1000x1016x1000 2>&1 | tail -1)"
  done
done > $OUT/sanitizer.log
cat $OUT/sanitizer.log
S=simt_64x64x16_cp4_h100,simt_64x128x32_cp3_h100,simt_128x128x32_cp3_h100,simt_128x128x16_cp3
for i in 1 2; do
  timeout 150 .gpu/bin/gemm-bench --specs $S --spec-file $R/sweep-specs.txt \
    --shapes 2048x2048x2048,4096x4096x4096,8192x8192x8192 --check 2>&1 | grep -E "TFLOP|FAIL|rror" | sed "s/^/$i /"
done > $OUT/sweep.txt
grep -ci fail $OUT/sweep.txt; wc -l < $OUT/sweep.txt
