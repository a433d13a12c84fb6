#!/bin/bash
# Ping-pong 128x128 at 512x28672x4096 ran at 160 or 212 us depending on the process: eight
# processes each of it and of its cooperative twin (128x128, two consumers), alternating.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
R=results/squares-2026-11-26
P="arch: sm_90a, dtype: bf16, tile: 128x128x64, swizzle: 128B, copy: tma, mma: wgmma, schedule: persistent(raster = m, group = 8)"
echo "name: pp128, $P, consumers: pingpong, stages: 6" > /tmp/pp.txt
echo "name: co128, $P, consumers: 2, stages: 5" > /tmp/co.txt
for i in 1 2 3 4 5 6 7 8; do
  for s in pp co; do
    .gpu/bin/gemm-bench --spec-file /tmp/$s.txt --shapes 512x28672x4096 --check 2>&1 | grep ratio | sed "s/^/$i /"
  done
done > $OUT/bimodal.txt
cat $OUT/bimodal.txt | awk '{print $1, $2, $6, $9, $12}'
