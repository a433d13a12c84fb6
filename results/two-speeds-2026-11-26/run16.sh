#!/bin/bash
# Does the 64-byte swizzle (2-sector TMA rows) cost at the small squares? The same tiles with
# the 128-byte and the 64-byte swizzle, 1024^3 to 3072^3, two processes; then ncu's L2
# requests at 1536^3.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
export PATH=/usr/local/cuda/bin:$PATH
B="arch: sm_90a, dtype: bf16, mma: wgmma, copy: tma, schedule: persistent(raster = m, group = 8), consumers: pingpong"
cat > /tmp/s.txt <<S
name: p192x128_sw128, $B, tile: 192x128x64, swizzle: 128B, stages: 4
name: p192x128_sw64, $B, tile: 192x128x64, swizzle: 64B, stages: 4
name: p128x192_sw128, $B, tile: 128x192x64, swizzle: 128B, stages: 4
name: p128x192_sw64, $B, tile: 128x192x64, swizzle: 64B, stages: 4
name: p128x128_sw128, $B, tile: 128x128x64, swizzle: 128B, stages: 6
name: p128x128_sw64, $B, tile: 128x128x64, swizzle: 64B, stages: 6
S
for i in 1 2; do
  .gpu/bin/gemm-bench --spec-file /tmp/s.txt --shapes 1024x1024x1024,1536x1536x1536,2048x2048x2048,3072x3072x3072 --check 2>&1 | grep ratio | grep -v "^spec" | sed "s/^/$i /"
done > $OUT/swizzle-small.txt
python3 - $OUT/swizzle-small.txt <<'P'
import sys, collections
v = collections.defaultdict(list); shapes=[]; specs=[]
for l in open(sys.argv[1]):
    f = l.split(); v[(f[1], f[3])].append(float(f[-3]))
    if f[3] not in shapes: shapes.append(f[3])
    if f[1] not in specs: specs.append(f[1])
print('%-16s' % 'spec' + ''.join('%12s' % s.split('x')[0] for s in shapes))
for s in specs:
    print('%-16s' % s + ''.join('%12s' % '/'.join('%.2f' % x for x in v[(s, sh)]) for sh in shapes))
P
M=gpu__time_duration.sum,lts__t_requests.sum,lts__t_sectors_srcunit_tex_op_read.sum
ncu --clock-control none --metrics $M --csv --page raw -k regex:p1 --launch-count 6 \
  .gpu/bin/gemm-bench --spec-file /tmp/s.txt --shapes 1536x1536x1536 --iters 1 --warmup 0 2>/dev/null | grep -v "^==" > $OUT/ncu-swizzle.csv
python3 - $OUT/ncu-swizzle.csv <<'P'
import csv,sys
hdr=None
for r in csv.reader(open(sys.argv[1])):
    if len(r)>3 and r[0]=='ID': hdr=r; continue
    if hdr is None or len(r)!=len(hdr) or not r[0].isdigit(): continue
    d=dict(zip(hdr,r))
    print(d['Kernel Name'][:16], d['gpu__time_duration.sum'], d['lts__t_requests.sum'], d['lts__t_sectors_srcunit_tex_op_read.sum'])
P
