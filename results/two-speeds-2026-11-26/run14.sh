#!/bin/bash
# 1536^3: does A's multicast (a 1x2 cluster of 192x96 ping-pong tiles) cut the L2 traffic, and
# where do the two kernels stall? One launch each, ncu.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
export PATH=/usr/local/cuda/bin:$PATH
B="arch: sm_90a, dtype: bf16, mma: wgmma, schedule: persistent(raster = m, group = 8), consumers: pingpong, tile: 192x96x64, swizzle: 64B, stages: 5"
cat > /tmp/s.txt <<S
name: p192x96, $B, copy: tma
name: p192x96_c1x2, $B, copy: tma(multicast = 2), cluster: 1x2
S
M=gpu__time_duration.sum,lts__t_sectors.sum,lts__t_sectors_srcunit_tex.sum,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio,smsp__average_warps_issue_stalled_wait_per_issue_active.ratio,smsp__average_warps_issue_stalled_sleeping_per_issue_active.ratio,smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_membar_per_issue_active.ratio,smsp__inst_executed.sum,sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_elapsed
ncu --clock-control none --metrics $M --csv --page raw -k regex:p192 --launch-count 6 \
  .gpu/bin/gemm-bench --spec-file /tmp/s.txt --shapes 1536x1536x1536 --iters 2 --warmup 1 2>/dev/null | grep -v "^==" > $OUT/ncu-1536-multicast.csv
python3 - $OUT/ncu-1536-multicast.csv <<'P'
import csv,sys
hdr=None
for r in csv.reader(open(sys.argv[1])):
    if len(r)>3 and r[0]=='ID': hdr=r; continue
    if hdr is None or len(r)!=len(hdr) or not r[0].isdigit(): continue
    d=dict(zip(hdr,r))
    print(d['Kernel Name'][:14], ' '.join('%s=%s'%(k.replace('smsp__average_warps_issue_stalled_','').replace('_per_issue_active.ratio','')[:24],v) for k,v in d.items() if '__' in k))
P
