#!/bin/bash
# One call on a GPU machine: the blas_lt checks (an fp8 row, an aux row), the noise study of
# short problems (--warm-ms 0 vs 30, twice each), the 15-square sweep and the explore rows.
# Run from the repository root with the release binaries in .gpu/bin; writes under $OUT.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
B=.gpu/bin/gemm-bench
R=results/squares-2026-11-26
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv,noheader > $OUT/device.txt
{
  $B --fp8 wgmma_e4m3_128x128x128_s6_pingpong --shapes 4096x4096x4096 --iters 30 --warmup 10 2>&1 | tail -4
  $B --fused "name: pp_aux, arch: sm_90a, dtype: bf16, tile: 128x128x64, consumers: pingpong, stages: 6, swizzle: 128B, copy: tma, mma: wgmma, schedule: persistent(raster = m, group = 8), bias: col, activation: gelu, aux: pre_activation" --shapes 4096x4096x4096 --sustain 1 2>&1 | tail -4
} > $OUT/lt-checks.txt
mkdir -p /tmp/noise
NOISE=1024x1024x1024,128x6144x4096,1x4096x4096,512x28672x4096,128x8192x28672,512x4096x14336
for round in 1 2; do
  for ms in 0 30; do
    $B --set sm90 --shapes $NOISE --check --warm-ms $ms --out /tmp/noise/r$round-ms$ms.json > /tmp/noise/r$round-ms$ms.log 2>&1
  done
done
tar czf $OUT/noise.tgz -C /tmp noise
SQ=$(for s in $(seq 1024 512 8192); do printf "%sx%sx%s," $s $s $s; done); SQ=${SQ%,}
$B --specs wgmma_bf16_128x256x64_s4_persistent,wgmma_bf16_128x128x64_s6_pingpong,wgmma_bf16_128x256x64_s4_streamk,wgmma_bf16_256x160x32_s7_sw64,wgmma_bf16_128x256x64_s4_cluster2x1,wgmma_bf16_64x128x64_s6_streamk,wgmma_bf16_256x128x64_s4_persistent \
   --spec-file $R/set-specs.txt --shapes $SQ --check --out $OUT/sweep.json > $OUT/sweep.log 2>&1
$B --specs wgmma_bf16_64x128x64_s6_streamk --spec-file $R/explore-specs.txt \
   --shapes 1024x1024x1024,1536x1536x1536,2048x2048x2048,3072x3072x3072,128x6144x4096,512x4096x14336,128x8192x28672 \
   --check --out $OUT/explore.json > $OUT/explore.log 2>&1
tail -3 $OUT/sweep.log $OUT/explore.log
