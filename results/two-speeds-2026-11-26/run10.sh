#!/bin/bash
# DRAM and cross-partition L2 traffic at the squares: ours against cuBLAS, one-pass ncu without
# cache flushes (the launches as gemm-bench runs them).
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
export PATH=/usr/local/cuda/bin:$PATH
M=gpu__time_duration.sum,dram__bytes_read.sum,lts__t_sectors_srcunit_ltcfabric.sum
for s in 1536x1536x1536 4096x4096x4096 5120x5120x5120 8192x8192x8192; do
  ncu --clock-control none --cache-control none --metrics $M --csv --page raw \
    .gpu/bin/gemm-bench --specs wgmma_bf16_128x128x64_s6_pingpong,wgmma_bf16_256x128x64_s4_persistent,wgmma_bf16_128x256x64_s4_cluster2x1 --shapes $s --iters 3 --warmup 2 \
    2>/dev/null | grep -v "^==" | sed "s/^/$s,/"
done > $OUT/ncu-squares.csv
python3 - $OUT/ncu-squares.csv <<'P'
import csv,sys,collections
hdr=None; acc=collections.defaultdict(list)
for r in csv.reader(open(sys.argv[1])):
    if len(r)>3 and r[1]=='ID': hdr=r; continue
    if hdr is None or len(r)!=len(hdr) or not r[1].isdigit(): continue
    d=dict(zip(hdr,r)); k=(r[0], d['Kernel Name'][:40])
    acc[k].append((float(d['gpu__time_duration.sum'].replace(',','')), float(d['dram__bytes_read.sum'].replace(',',''))/1e6, float(d['lts__t_sectors_srcunit_ltcfabric.sum'].replace(',',''))*32/1e6))
for k,v in acc.items():
    v=sorted(v)[len(v)//2]
    print(k[0], k[1], 'us %.1f dram_MB %.0f fabric_MB %.0f' % (v[0]/1000, v[1], v[2]))
P
