#!/bin/bash
# The cluster walk's band width: a 1x2 cluster's walk counts `group` in cluster tiles, two
# block tiles wide, so its bands are twice as wide as the plain walk's (ncu at 3072^3: 59 MB
# read from DRAM against 39). Group 4 gives the plain walk's width. With this session's
# cluster start and exit (commit c790528).
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
P="arch: sm_90a, dtype: bf16, mma: wgmma, consumers: pingpong, swizzle: 128B, copy: tma"
C="arch: sm_90a, dtype: bf16, mma: wgmma, consumers: pingpong, swizzle: 128B, copy: tma(multicast = 2)"
cat > /tmp/s.txt <<S
name: p192, $P, tile: 192x96x64, stages: 5, schedule: persistent(raster = m, group = 8)
name: p192_c1x2_g8, $C, tile: 192x96x64, stages: 5, schedule: persistent(raster = m, group = 8), cluster: 1x2
name: p192_c1x2_g4, $C, tile: 192x96x64, stages: 5, schedule: persistent(raster = m, group = 4), cluster: 1x2
name: p192_c2x1_g8, $C, tile: 192x96x64, stages: 5, schedule: persistent(raster = m, group = 8), cluster: 2x1
name: p128, $P, tile: 128x128x64, stages: 6, schedule: persistent(raster = m, group = 8)
name: p128_c1x2_g4, $C, tile: 128x128x64, stages: 6, schedule: persistent(raster = m, group = 4), cluster: 1x2
name: p128_c2x1_g8, $C, tile: 128x128x64, stages: 6, schedule: persistent(raster = m, group = 8), cluster: 2x1
S
for i in 1 2; do
  .gpu/bin/gemm-bench --spec-file /tmp/s.txt --shapes 1536x1536x1536,2048x2048x2048,3072x3072x3072,4096x4096x4096 --check 2>&1 | grep ratio | grep -v "^spec" | sed "s/^/$i /"
done > $OUT/cluster-walk.txt
python3 - $OUT/cluster-walk.txt <<'P'
import sys, collections
v = collections.defaultdict(list); shapes=[]; specs=[]
for l in open(sys.argv[1]):
    f = l.split(); v[(f[1], f[3])].append(float(f[-3]))
    if f[3] not in shapes: shapes.append(f[3])
    if f[1] not in specs: specs.append(f[1])
print('%-14s' % 'spec' + ''.join('%12s' % s.split('x')[0] for s in shapes))
for s in specs:
    print('%-14s' % s + ''.join('%12s' % '/'.join('%.2f' % x for x in v[(s, sh)]) for sh in shapes))
P
grep -E "name: (p192|p192_c1x2_g8|p192_c1x2_g4)," /tmp/s.txt > /tmp/s3.txt
M=gpu__time_duration.sum,dram__bytes_read.sum,lts__t_sectors_srcunit_ltcfabric.sum
ncu --clock-control none --cache-control none --metrics $M --csv --page raw -k regex:'p192' --launch-count 9 \
  .gpu/bin/gemm-bench --spec-file /tmp/s3.txt --shapes 3072x3072x3072 --iters 1 --warmup 1 2>/dev/null | grep -v "^==" > $OUT/ncu-walk-3072.csv
python3 - $OUT/ncu-walk-3072.csv <<'P'
import csv,sys
hdr=None
for r in csv.reader(open(sys.argv[1])):
    if len(r)>3 and r[0]=='ID': hdr=r; continue
    if hdr and len(r)==len(hdr) and r[0].isdigit():
        d=dict(zip(hdr,r)); print(d['Kernel Name'][:14], d['gpu__time_duration.sum'], 'ns', d['dram__bytes_read.sum'], 'dram', d['lts__t_sectors_srcunit_ltcfabric.sum'], 'fabric')
P
