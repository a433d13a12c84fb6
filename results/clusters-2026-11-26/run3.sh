#!/bin/bash
# The cluster kernel's start and exit: cl_mc2 / cl_free2 are cl_mc / cl_free with the start's
# cluster barrier arriving relaxed and, instead of the exit's cluster barrier, the producer
# waiting until every slot's consumers (the peer's included) released it. Then ncu at 3072^3.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
B="arch: sm_90a, dtype: bf16, mma: wgmma, schedule: persistent(raster = m, group = 8), consumers: pingpong, tile: 192x96x64, swizzle: 128B, stages: 5"
cat > /tmp/s.txt <<S
name: plain, $B, copy: tma
name: cl_mc, $B, copy: tma(multicast = 2), cluster: 1x2
name: cl_mc2, $B, copy: tma(multicast = 2), cluster: 1x2
name: cl_free, $B, copy: tma(multicast = 2), cluster: 1x2
name: cl_free2, $B, copy: tma(multicast = 2), cluster: 1x2
S
for i in 1 2; do
  .gpu/bin/gemm-bench --spec-file /tmp/s.txt --ptx-dir .gpu/ptx --shapes 1536x1536x1536,2048x2048x2048,3072x3072x3072 --check 2>&1 | grep ratio | grep -v "^spec" | sed "s/^/$i /"
done > $OUT/cluster-exit.txt
awk '{print $1, $2, $4, $6, $(NF-2)}' $OUT/cluster-exit.txt
grep -E "name: (plain|cl_mc2|cl_free2)," /tmp/s.txt > /tmp/s3.txt
M=gpu__time_duration.sum,dram__bytes_read.sum,lts__t_sectors.sum,lts__t_sectors_srcunit_ltcfabric.sum,lts__t_sector_hit_rate.pct,sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_elapsed,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,sm__cycles_active.avg
for S in 1536 3072; do
ncu --clock-control none --cache-control none --metrics $M --csv --page raw -k regex:'plain|cl_' --launch-count 9 \
  .gpu/bin/gemm-bench --spec-file /tmp/s3.txt --ptx-dir .gpu/ptx --shapes ${S}x${S}x${S} --iters 1 --warmup 1 2>/dev/null | grep -v "^==" > $OUT/ncu-$S.csv
python3 - $OUT/ncu-$S.csv <<'P'
import csv,sys
hdr=None
for r in csv.reader(open(sys.argv[1])):
    if len(r)>3 and r[0]=='ID': hdr=r; continue
    if hdr and len(r)==len(hdr) and r[0].isdigit():
        d=dict(zip(hdr,r)); print(d['Kernel Name'][:10], ' '.join('%s=%s'%(k.split('__')[1][:22],d[k]) for k in hdr if '__' in k and not k.startswith(('device','launch','numa','nvlink','profiler','c2c'))))
P
done
