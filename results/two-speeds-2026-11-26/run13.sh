#!/bin/bash
# Where 1536^3's time goes: ncu's warp-state sampling (top stall sites in SASS) for our 192x96
# and 128x192 ping-pong tiles and for cuBLAS's kernel, one launch each.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
export PATH=/usr/local/cuda/bin:$PATH
B="arch: sm_90a, dtype: bf16, copy: tma, mma: wgmma, schedule: persistent(raster = m, group = 8), consumers: pingpong"
cat > /tmp/s.txt <<S
name: p192x96, $B, tile: 192x96x64, swizzle: 64B, stages: 5
name: p128x192, $B, tile: 128x192x64, swizzle: 128B, stages: 4
S
ncu --clock-control none --section WarpStateStats --section SourceCounters --section SchedulerStats --section SpeedOfLight --section Occupancy --launch-skip 2 --launch-count 4 \
  .gpu/bin/gemm-bench --spec-file /tmp/s.txt --shapes 1536x1536x1536 --iters 1 --warmup 1 --max-input-sets 1 2>/dev/null | grep -v "^==PROF" > $OUT/ncu-1536-stalls.txt
grep -E "^  [a-zA-Z_]|Duration|Warp Cycles Per Issued|Active Warps Per Scheduler|Eligible Warps|Achieved Occupancy" $OUT/ncu-1536-stalls.txt | head -40
