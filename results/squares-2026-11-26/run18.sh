#!/bin/bash
# Is the per-process speed of 128x128 ping-pong at 512x28672x4096 a property of the buffers?
# gemm-bench-exp is gemm-bench built from this tree with two lines added (not committed):
# GEMM_EXPERIMENT_SETS forces the number of input sets rotated through (8 here: eight copies
# of A and B at different addresses, launch j of the timed rounds on set j mod 8 after 8
# warm-up launches), and GEMM_EXPERIMENT_PRINT prints ours' per-launch times. Four processes.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
P="arch: sm_90a, dtype: bf16, tile: 128x128x64, swizzle: 128B, copy: tma, mma: wgmma, schedule: persistent(raster = m, group = 8)"
echo "name: pp128, $P, consumers: pingpong, stages: 6" > /tmp/pp.txt
for i in 1 2 3 4; do
  GEMM_EXPERIMENT_SETS=8 GEMM_EXPERIMENT_PRINT=1 .gpu/bin/gemm-bench-exp --spec-file /tmp/pp.txt --shapes 512x28672x4096 \
    --iters 32 --warmup 8 --max-input-sets 8 2>&1 | grep -E "ours_ms|ratio" | sed "s/^/$i /"
done > $OUT/placement.txt
cat $OUT/placement.txt | cut -c1-400
