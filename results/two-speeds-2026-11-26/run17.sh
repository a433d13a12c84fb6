#!/bin/bash
# A swizzle per operand: under `swizzle: 128B`, an N-major B whose BN the 128-byte span does not
# divide takes 64 or 32 bytes while A keeps 128-byte rows (before: both at the narrower one).
# The same tiles both ways, every row checked, two processes.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
export PATH=/usr/local/cuda/bin:$PATH
B="arch: sm_90a, dtype: bf16, mma: wgmma, copy: tma, schedule: persistent(raster = m, group = 8)"
cat > /tmp/s.txt <<S
name: p192x96_sw64, $B, consumers: pingpong, tile: 192x96x64, swizzle: 64B, stages: 5
name: p192x96_mixed, $B, consumers: pingpong, tile: 192x96x64, swizzle: 128B, stages: 5
name: w256x160_sw64, $B, tile: 256x160x32, swizzle: 64B, stages: 7
name: w256x160_mixed4, $B, tile: 256x160x64, swizzle: 128B, stages: 4
name: w256x160_mixed3, $B, tile: 256x160x64, swizzle: 128B, stages: 3
name: p128x160_mixed, $B, consumers: pingpong, tile: 128x160x64, swizzle: 128B, stages: 5
name: p64x96_sw64, $B, consumers: pingpong, tile: 64x96x64, swizzle: 64B, stages: 8
name: p64x96_mixed, $B, consumers: pingpong, tile: 64x96x64, swizzle: 128B, stages: 8
S
SH=777x1001x520,1024x1024x1024,1536x1536x1536,2048x2048x2048,3072x3072x3072,5120x5120x5120,512x10240x8192,128x6144x4096
for i in 1 2; do
  .gpu/bin/gemm-bench --spec-file /tmp/s.txt --shapes $SH --check --out $OUT/mixed-$i.json 2>&1 | grep -E "ratio|FAIL|rror" | grep -v "^spec" | sed "s/^/$i /"
done > $OUT/mixed.txt
grep -ci "fail\|error" $OUT/mixed.txt
python3 - $OUT/mixed.txt <<'P'
import sys, collections
v = collections.defaultdict(list); shapes=[]; specs=[]
for l in open(sys.argv[1]):
    f = l.split()
    if len(f) < 8 or 'ratio' not in l: continue
    v[(f[1], f[3])].append(float(f[-3]))
    if f[3] not in shapes: shapes.append(f[3])
    if f[1] not in specs: specs.append(f[1])
print('%-16s' % 'spec' + ''.join('%11s' % s[:10] for s in shapes))
for s in specs:
    print('%-16s' % s + ''.join('%11s' % '/'.join('%.2f' % x for x in v[(s, sh)]) for sh in shapes))
P
M=gpu__time_duration.sum,lts__t_requests.sum,lts__t_sectors_srcunit_tex_op_read.sum
ncu --clock-control none --metrics $M --csv --page raw -k regex:p192 --launch-count 2 \
  .gpu/bin/gemm-bench --spec-file <(head -2 /tmp/s.txt) --shapes 1536x1536x1536 --iters 1 --warmup 0 2>/dev/null | grep -v "^==" > $OUT/ncu-mixed.csv
python3 - $OUT/ncu-mixed.csv <<'P'
import csv,sys
hdr=None
for r in csv.reader(open(sys.argv[1])):
    if len(r)>3 and r[0]=='ID': hdr=r; continue
    if hdr is None or len(r)!=len(hdr) or not r[0].isdigit(): continue
    d=dict(zip(hdr,r))
    print(d['Kernel Name'][:16], d['gpu__time_duration.sum'], d['lts__t_requests.sum'], d['lts__t_sectors_srcunit_tex_op_read.sum'])
P
