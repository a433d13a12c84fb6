#!/bin/bash
# Ping-pong tiles of cuBLAS's sizes at the small squares and the weak 128/512-row problems, two passes.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
B=.gpu/bin/gemm-bench
R=results/squares-2026-11-26
SH=1024x1024x1024,1536x1536x1536,2048x2048x2048,2560x2560x2560,3072x3072x3072,128x6144x4096,128x4096x4096,512x4096x4096,512x4096x14336,128x8192x28672
for pass in 1 2; do
  $B --specs wgmma_bf16_128x128x64_s6_pingpong,wgmma_bf16_64x128x64_s6_streamk --spec-file $R/explore2-specs.txt \
     --shapes $SH --check --out $OUT/explore2-pass$pass.json > $OUT/explore2-pass$pass.log 2>&1
done
grep -ci fail $OUT/*.log
