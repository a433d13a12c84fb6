#!/bin/bash
# Is the per-process speed a property of the loaded module? Four modules of the same ping-pong
# spec (different names, same body) in each of six processes, at 512x28672x4096.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
P="arch: sm_90a, dtype: bf16, tile: 128x128x64, swizzle: 128B, copy: tma, mma: wgmma, schedule: persistent(raster = m, group = 8), consumers: pingpong, stages: 6"
for c in a b c d; do echo "name: pp128_$c, $P"; done > /tmp/pp4.txt
for i in 1 2 3 4 5 6; do
  .gpu/bin/gemm-bench --spec-file /tmp/pp4.txt --shapes 512x28672x4096 --check 2>&1 | grep ratio | sed "s/^/$i /"
done > $OUT/modules.txt
awk '{print $1, $2, $6, $9, $12}' $OUT/modules.txt
