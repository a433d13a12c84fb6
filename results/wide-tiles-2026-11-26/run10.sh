#!/bin/bash
# SIMT at 4096^3: why the inner loop issues below cuBLAS SGEMM's rate. One pass of ncu (clocks
# left alone) over our 64x64 kernel and cuBLAS's, the stall reasons per issued instruction.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
M="regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio,smsp__issue_active.avg.pct_of_peak_sustained_active,smsp__warps_active.avg.per_cycle_active,smsp__warps_eligible.avg.per_cycle_active,sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum,gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second,launch__registers_per_thread"
ncu --clock-control none --metrics "$M" --launch-count 6 --csv --page raw \
  .gpu/bin/gemm-bench --specs simt_64x64x16_cp4_h100 --shapes 4096x4096x4096 --iters 1 --warmup 1 --max-input-sets 1 2>/dev/null | grep -v "^==PROF" > $OUT/simt-stalls.csv
wc -l $OUT/simt-stalls.csv
