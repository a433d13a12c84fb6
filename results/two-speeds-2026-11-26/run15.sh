#!/bin/bash
# 1536^3: L2 sectors of cuBLAS's kernel (a cluster of two) against ours, plain and with A
# multicast in a 1x2 cluster. Does our multicast read L2 once per cluster?
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
export PATH=/usr/local/cuda/bin:$PATH
B="arch: sm_90a, dtype: bf16, mma: wgmma, schedule: persistent(raster = m, group = 8), consumers: pingpong, tile: 192x96x64, swizzle: 64B, stages: 5"
cat > /tmp/s.txt <<S
name: p192x96, $B, copy: tma
name: p192x96_c1x2, $B, copy: tma(multicast = 2), cluster: 1x2
name: p192x96_c2x1, $B, copy: tma(multicast = 2), cluster: 2x1
S
M=gpu__time_duration.sum,lts__t_sectors.sum,lts__t_requests.sum,lts__t_sectors_srcunit_tex.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_bytes.sum.per_second,sm__sass_data_bytes_mem_shared.sum
ncu --clock-control none --metrics $M --csv --page raw --launch-count 12 \
  .gpu/bin/gemm-bench --spec-file /tmp/s.txt --shapes 1536x1536x1536 --iters 1 --warmup 1 2>/dev/null | grep -v "^==" > $OUT/ncu-1536-l2.csv
python3 - $OUT/ncu-1536-l2.csv <<'P'
import csv,sys
hdr=None
for r in csv.reader(open(sys.argv[1])):
    if len(r)>3 and r[0]=='ID': hdr=r; continue
    if hdr is None or len(r)!=len(hdr) or not r[0].isdigit(): continue
    d=dict(zip(hdr,r))
    print(d['Kernel Name'][:30], ' '.join('%s=%s'%(k,d[k]) for k in d if k.startswith(('gpu__','lts__','sm__'))))
P
