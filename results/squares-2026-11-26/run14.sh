#!/bin/bash
# StreamKSplit::MAX_WALKERS_PER_TILE = 4: the stream-K GPU tests (every tail kind, bitwise
# repeats, four streams at once), the entry point's tests, memcheck of two stream-K kernels at
# split shapes, and the set's stream-K members against the same rows as run13.sh.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
R=results/squares-2026-11-26
.gpu/tests/gpu --ignored stream_k > $OUT/stream-k-tests.log 2>&1; tail -2 $OUT/stream-k-tests.log
.gpu/tests/matmul --ignored --test-threads 1 > $OUT/matmul-tests-cap4.log 2>&1; tail -2 $OUT/matmul-tests-cap4.log
for spec in wgmma_bf16_128x256x64_s4_streamk wgmma_bf16_64x128x64_s6_streamk; do
  /usr/local/cuda/bin/compute-sanitizer --tool memcheck .gpu/bin/gemm-run $spec --shape 1000x4352x1000 2>&1 | tail -2
done > $OUT/memcheck-cap4.log; cat $OUT/memcheck-cap4.log
SH=1536x1536x1536,2560x2560x2560,3072x3072x3072,5120x5120x5120,5632x5632x5632,4096x4352x4096,512x10240x8192,512x28672x4096,128x8192x8192,1x8192x8192
.gpu/bin/gemm-bench --spec-file $R/cap-specs.txt --shapes $SH --check 2>&1 | grep ratio > $OUT/cap4-shipped.txt
