#!/bin/bash
# Which tiles consecutive clusters take (walk-variants.py): raster n, a spread start (perm8),
# the band along first; against the plain launch, with this session's cluster start and exit.
# perm8 needs a grid of a multiple of 8 clusters: the shapes are chosen so.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
P="arch: sm_90a, dtype: bf16, mma: wgmma, consumers: pingpong, swizzle: 128B"
cat > /tmp/s192.txt <<S
name: p192, $P, copy: tma, tile: 192x96x64, stages: 5, schedule: persistent(raster = m, group = 8)
name: p192_n, $P, copy: tma, tile: 192x96x64, stages: 5, schedule: persistent(raster = n, group = 8)
name: c192, $P, copy: tma(multicast = 2), tile: 192x96x64, stages: 5, schedule: persistent(raster = m, group = 8), cluster: 1x2
name: c192_n, $P, copy: tma(multicast = 2), tile: 192x96x64, stages: 5, schedule: persistent(raster = n, group = 8), cluster: 1x2
name: c192_perm8, $P, copy: tma(multicast = 2), tile: 192x96x64, stages: 5, schedule: persistent(raster = m, group = 8), cluster: 1x2
name: c192_along, $P, copy: tma(multicast = 2), tile: 192x96x64, stages: 5, schedule: persistent(raster = m, group = 8), cluster: 1x2
S
cat > /tmp/s128.txt <<S
name: p128, $P, copy: tma, tile: 128x128x64, stages: 6, schedule: persistent(raster = m, group = 8)
name: p128_n, $P, copy: tma, tile: 128x128x64, stages: 6, schedule: persistent(raster = n, group = 8)
name: c128, $P, copy: tma(multicast = 2), tile: 128x128x64, stages: 6, schedule: persistent(raster = m, group = 8), cluster: 2x1
name: c128_n, $P, copy: tma(multicast = 2), tile: 128x128x64, stages: 6, schedule: persistent(raster = n, group = 8), cluster: 2x1
name: c128_perm8, $P, copy: tma(multicast = 2), tile: 128x128x64, stages: 6, schedule: persistent(raster = m, group = 8), cluster: 2x1
name: c128_along, $P, copy: tma(multicast = 2), tile: 128x128x64, stages: 6, schedule: persistent(raster = m, group = 8), cluster: 2x1
S
for i in 1 2; do
  .gpu/bin/gemm-bench --spec-file /tmp/s192.txt --ptx-dir .gpu/ptx --shapes 1536x1536x1536,3072x3072x3072,6144x6144x6144 --check 2>&1 | grep ratio | grep -v "^spec" | sed "s/^/$i /"
  .gpu/bin/gemm-bench --spec-file /tmp/s128.txt --ptx-dir .gpu/ptx --shapes 2048x2048x2048,4096x4096x4096,8192x8192x8192 --check 2>&1 | grep ratio | grep -v "^spec" | sed "s/^/$i /"
done > $OUT/walks.txt
grep -c ratio $OUT/walks.txt
python3 - $OUT/walks.txt <<'P'
import sys, collections
v = collections.defaultdict(list); shapes=collections.defaultdict(list); specs=[]
for l in open(sys.argv[1]):
    f = l.split(); v[(f[1], f[3])].append(float(f[-3]))
    fam=f[1][1:4]
    if f[3] not in shapes[fam]: shapes[fam].append(f[3])
    if f[1] not in specs: specs.append(f[1])
for fam in shapes:
    print('%-12s' % fam + ''.join('%12s' % s.split('x')[0] for s in shapes[fam]))
    for s in specs:
        if s[1:4]!=fam: continue
        print('%-12s' % s + ''.join('%12s' % '/'.join('%.2f' % x for x in v[(s, sh)]) for sh in shapes[fam]))
P
