#!/bin/bash
# Do 2x1 clusters (B multicast to the two blocks of a cluster, which run on one GPC) remove the
# slow speed? Three processes each:
#  512x28672x4096: 128x128 ping-pong, four modules, against its 2x1-cluster twin, four modules;
#  128x8192x28672: 64x128 stream-K, three modules, against its 2x1-cluster twin, three modules.
# Then ncu (one pass, no flush): DRAM reads and L2 fabric traffic per launch of the plain
# ping-pong modules (two processes).
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
export PATH=/usr/local/cuda/bin:$PATH
B="arch: sm_90a, dtype: bf16, swizzle: 128B, mma: wgmma"
PP="$B, tile: 128x128x64, consumers: pingpong, stages: 6"
SK="$B, tile: 64x128x64, consumers: 1, stages: 6, schedule: persistent(raster = m, group = 8, tail = stream_k)"
{ for x in a b c d; do echo "name: pp_$x, $PP, copy: tma, schedule: persistent(raster = m, group = 8)"; done
  for x in a b c d; do echo "name: ppc_$x, $PP, copy: tma(multicast = 2), schedule: persistent(raster = m, group = 8), cluster: 2x1"; done; } > /tmp/pp.txt
{ for x in a b c; do echo "name: sk_$x, $SK, copy: tma"; done
  for x in a b c; do echo "name: skc_$x, $SK, copy: tma(multicast = 2), cluster: 2x1"; done; } > /tmp/sk.txt
for i in 1 2 3; do
  .gpu/bin/gemm-bench --spec-file /tmp/pp.txt --shapes 512x28672x4096 --check 2>&1 | grep ratio | grep -v "^spec" | sed "s/^/$i /"
  .gpu/bin/gemm-bench --spec-file /tmp/sk.txt --shapes 128x8192x28672 --check 2>&1 | grep ratio | grep -v "^spec" | sed "s/^/$i /"
done > $OUT/clusters.txt
awk '{print $1, $2, $4, $6, $9, $12}' $OUT/clusters.txt
M=gpu__time_duration.sum,dram__bytes_read.sum,lts__t_sectors_srcunit_ltcfabric.sum
head -4 /tmp/pp.txt > /tmp/pp4.txt
for i in 1 2; do
  ncu --clock-control none --cache-control none --metrics $M -k regex:pp_ --csv --page raw \
    .gpu/bin/gemm-bench --spec-file /tmp/pp4.txt --shapes 512x28672x4096 --iters 6 --warmup 2 \
    2>/dev/null | grep -v "^==" | sed "s/^/$i,/"
done > $OUT/ncu-fabric.csv
python3 - $OUT/ncu-fabric.csv <<'P'
import csv,sys
hdr=None
for r in csv.reader(open(sys.argv[1])):
    if len(r)>3 and r[1]=='ID': hdr=r; continue
    if hdr is None or len(r)!=len(hdr) or not r[1].isdigit(): continue
    d=dict(zip(hdr,r)); print(r[0], d['Kernel Name'][:6], d['gpu__time_duration.sum'], d['dram__bytes_read.sum'], d['lts__t_sectors_srcunit_ltcfabric.sum'])
P
