#!/bin/bash
# 1. Fast and slow modules of one kernel side by side in ncu (clocks left alone): four
#    modules of 128x128 ping-pong at 512x28672x4096 (same PTX but the entry name), three
#    processes; every launch's duration, clock, stall reasons, L2 traffic across the fabric.
# 2. Does cuModuleLoadDataEx keep setmaxnreg? The driver's JIT cache of one gemm-bench run,
#    disassembled.
# 3. SIMT at 4096^3: our two best f32 specs against SGEMM, and what cuBLAS's SGEMM launches.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
export PATH=/usr/local/cuda/bin:$PATH
P="arch: sm_90a, dtype: bf16, tile: 128x128x64, swizzle: 128B, copy: tma, mma: wgmma, schedule: persistent(raster = m, group = 8), consumers: pingpong, stages: 6"
for x in a b c d; do echo "name: pp128_$x, $P"; done > /tmp/pp4.txt
M=gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second,smsp__average_warps_issue_stalled_no_instruction_per_issue_active.ratio,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio,smsp__average_warps_issue_stalled_wait_per_issue_active.ratio,smsp__average_warps_issue_stalled_sleeping_per_issue_active.ratio,smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_membar_per_issue_active.ratio,smsp__average_warps_issue_stalled_branch_resolving_per_issue_active.ratio,smsp__average_warps_issue_stalled_imc_miss_per_issue_active.ratio,smsp__inst_executed.sum,lts__t_sectors.sum,lts__t_sectors_srcunit_ltcfabric.sum,dram__bytes_read.sum,lts__t_sector_hit_rate.pct,sm__warps_active.avg.pct_of_peak_sustained_active
for i in 1 2 3; do
  ncu --clock-control none --metrics $M -k regex:pp128 --csv --page raw \
    .gpu/bin/gemm-bench --spec-file /tmp/pp4.txt --shapes 512x28672x4096 --iters 4 --warmup 2 \
    2>/dev/null | grep -v "^==" | sed "s/^/$i,/" 
done > $OUT/ncu-modules.csv
wc -l $OUT/ncu-modules.csv
# 2
export CUDA_CACHE_PATH=/tmp/jitcache; rm -rf /tmp/jitcache
.gpu/bin/gemm-bench --spec-file <(head -1 /tmp/pp4.txt) --shapes 1024x1024x1024 --iters 2 --warmup 1 > /dev/null 2>&1
python3 - <<'P' > $OUT/jit-cache.txt 2>&1
import os, subprocess
n = 0
for root, _, files in os.walk('/tmp/jitcache'):
    for f in files:
        data = open(os.path.join(root, f), 'rb').read()
        at = data.find(b'\x7fELF')
        while at >= 0:
            p = '/tmp/elf%d' % n; open(p, 'wb').write(data[at:]); n += 1
            out = subprocess.run(['cuobjdump', '-sass', p], capture_output=True, text=True).stdout
            if 'pp128' in out:
                print(f, 'functions', out.count('Function :'), 'USETMAXREG', out.count('USETMAXREG'), 'lines', out.count('\n'))
            at = data.find(b'\x7fELF', at + 4)
print('elf images', n)
P
unset CUDA_CACHE_PATH
cat $OUT/jit-cache.txt
# 3
.gpu/bin/gemm-bench --specs simt_64x64x16_cp4_h100,simt_64x128x32_cp3_h100 --shapes 4096x4096x4096 --check 2>&1 | grep -E "ratio" > $OUT/simt.txt
ncu --clock-control none --section LaunchStats --section Occupancy --section WarpStateStats --section SpeedOfLight --launch-count 8 \
  .gpu/bin/gemm-bench --specs simt_64x64x16_cp4_h100 --shapes 4096x4096x4096 --iters 2 --warmup 1 2>/dev/null | grep -v "^==PROF" > $OUT/simt-ncu.txt
cat $OUT/simt.txt; grep -E "^  [a-zA-Z_]|Grid Size|Block Size|Registers|Duration|Stall|Theoretical Occ|Achieved Occ" $OUT/simt-ncu.txt | head -60
