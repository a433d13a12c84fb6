#!/bin/bash
# Which kernels cuBLAS launches on the sweep's squares and the weak model shapes (names, grid,
# cluster), and an A/B of one spec under two names at two memory-bound shapes.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
B=.gpu/bin/gemm-bench
R=results/squares-2026-11-26
SQ=$(for s in $(seq 1024 512 8192); do printf "%sx%sx%s," $s $s $s; done)
SH=${SQ}128x6144x4096,512x4096x14336,128x8192x28672,512x28672x4096,1x4096x4096,512x10240x8192,4096x28672x4096
/usr/local/cuda/bin/ncu --section LaunchStats --csv --kernel-name regex:'^(?!wgmma_)' \
  $B --specs wgmma_bf16_64x64x128_s6 --shapes $SH --iters 1 --warmup 0 --max-input-sets 1 > $OUT/cublas-kernels.csv 2> $OUT/ncu.err
for order in a b; do
  if [ $order = a ]; then F=$R/ab-specs.txt; else F=$R/ab-specs-reversed.txt; fi
  $B --spec-file $F --shapes 128x8192x28672,128x6144x4096 --check 2>&1 | grep ratio
done > $OUT/ab.txt
