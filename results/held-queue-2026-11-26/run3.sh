#!/bin/bash
# The hold in gemm-bench's other modes (--fused, --fp8), and the SIMT kernel at 4096^3 against
# SGEMM behind the hold in three processes.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
W=/tmp/w3; mkdir -p $W
B=.gpu/bin/gemm-bench
$B --fused "name: pp_aux, arch: sm_90a, dtype: bf16, tile: 128x128x64, consumers: pingpong, stages: 6, swizzle: 128B, copy: tma, mma: wgmma, schedule: persistent(raster = m, group = 8), bias: col, activation: gelu, aux: pre_activation" --shapes 1024x1024x1024,4096x4096x4096 > $W/fused.txt 2>&1; echo "fused rc $?"
$B --fp8 wgmma_e4m3_128x128x128_s6_pingpong --shapes 1024x1024x1024,4096x4096x4096 > $W/fp8.txt 2>&1; echo "fp8 rc $?"
for i in 1 2 3; do
  $B --specs simt_64x64x16_cp4_h100 --shapes 2048x2048x2048,4096x4096x4096,8192x8192x8192 --check 2>&1 | grep TFLOP | sed "s/^/$i /"
done > $W/simt-3.txt
cat $W/simt-3.txt | awk '{print $1, $2, $4, $6, $9, $12}'
tar czf $OUT/run3.tgz -C $W .
