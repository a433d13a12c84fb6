#!/bin/bash
# Three consumers in the other paths the check admits: fp8 (e4m3, layout rc), f16 -> f32 with
# the direct epilogue, a 2x1 cluster with multicast, alpha/beta with a bias; against float64,
# and memcheck of the fp8 and cluster ones.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
P="arch: sm_90a, mma: wgmma"
S=/usr/local/cuda/bin/compute-sanitizer
for v in "dtype: e4m3, layout: rc, tile: 192x128x128, consumers: 3, stages: 4, schedule: persistent" \
         "dtype: f16, out: f32, tile: 192x128x64, consumers: 3, stages: 4, epilogue: direct" \
         "tile: 192x96x64, consumers: 3, stages: 5, cluster: 2x1, copy: tma(multicast = 2), schedule: persistent" \
         "tile: 192x96x64, consumers: 3, stages: 4, scale: alpha_beta, bias: col"; do
  for shape in 777x1001x520 1536x1536x1536; do
    echo "$(.gpu/bin/gemm-run "name: k, $P, $v" --shape $shape 2>&1 | tail -1 | cut -c1-150) <- $v"
  done
done
for v in "dtype: e4m3, layout: rc, tile: 192x128x128, consumers: 3, stages: 4, schedule: persistent" \
         "tile: 192x96x64, consumers: 3, stages: 5, cluster: 2x1, copy: tma(multicast = 2), schedule: persistent"; do
  echo "$($S --tool memcheck .gpu/bin/gemm-run "name: k, $P, $v" --shape 777x1001x520 2>&1 | tail -1) <- memcheck $v"
done
