#!/bin/bash
# 1. The two speeds under ncu with one-pass metrics and no cache flush (run1's multi-pass,
#    flushed replays ran all 72 launches fast): eight modules of 128x128 ping-pong at
#    512x28672x4096, two processes; duration, clock, DRAM and L2 traffic per launch.
#    Then the same eight modules timed by gemm-bench alone, two processes.
# 2. Where 1536^3 goes: ncu on our 192x96 and 128x192 ping-pong tiles and on cuBLAS.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
export PATH=/usr/local/cuda/bin:$PATH
P="arch: sm_90a, dtype: bf16, tile: 128x128x64, swizzle: 128B, copy: tma, mma: wgmma, schedule: persistent(raster = m, group = 8), consumers: pingpong, stages: 6"
for x in a b c d e f g h; do echo "name: pp128_$x, $P"; done > /tmp/pp8.txt
M=gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second,dram__bytes_read.sum,lts__t_sectors.sum
for i in 1 2; do
  ncu --clock-control none --cache-control none --metrics $M -k regex:pp128 --csv --page raw \
    .gpu/bin/gemm-bench --spec-file /tmp/pp8.txt --shapes 512x28672x4096 --iters 6 --warmup 2 \
    2>/dev/null | grep -v "^==" | sed "s/^/$i,/"
done > $OUT/ncu-onepass.csv
for i in 1 2; do
  .gpu/bin/gemm-bench --spec-file /tmp/pp8.txt --shapes 512x28672x4096 2>&1 | grep ratio | sed "s/^/$i /"
done > $OUT/bench-8modules.txt
cat $OUT/bench-8modules.txt | awk '{print $1, $2, $6, $12}'
B="arch: sm_90a, dtype: bf16, copy: tma, mma: wgmma, schedule: persistent(raster = m, group = 8), consumers: pingpong"
cat > /tmp/s1536.txt <<S
name: p192x96, $B, tile: 192x96x64, swizzle: 64B, stages: 5
name: p128x192, $B, tile: 128x192x64, swizzle: 128B, stages: 4
S
.gpu/bin/gemm-bench --spec-file /tmp/s1536.txt --shapes 1536x1536x1536 --check 2>&1 | grep ratio > $OUT/s1536.txt
cat $OUT/s1536.txt
ncu --clock-control none --section SpeedOfLight --section WarpStateStats --section MemoryWorkloadAnalysis --section LaunchStats --section SchedulerStats --launch-count 6 \
  .gpu/bin/gemm-bench --spec-file /tmp/s1536.txt --shapes 1536x1536x1536 --iters 1 --warmup 1 --max-input-sets 1 2>/dev/null | grep -v "^==PROF" > $OUT/ncu-1536.txt
grep -E "^  [a-zA-Z_]|Duration|Elapsed Cycles|SM Frequency|Throughput|Issued|Eligible|No Eligible|Grid Size" $OUT/ncu-1536.txt | head -80
