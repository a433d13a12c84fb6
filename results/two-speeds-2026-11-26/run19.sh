#!/bin/bash
# 192x96 ping-pong with the mixed swizzle: 4 or 5 stages, and with A's or B's multicast in a
# cluster of two (cuBLAS runs its 192x96 tile with a cluster of two). Two processes.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
B="arch: sm_90a, dtype: bf16, mma: wgmma, schedule: persistent(raster = m, group = 8), consumers: pingpong, tile: 192x96x64, swizzle: 128B"
cat > /tmp/s.txt <<S
name: p192x96_s5, $B, stages: 5, copy: tma
name: p192x96_s4, $B, stages: 4, copy: tma
name: p192x96_s5_c1x2, $B, stages: 5, copy: tma(multicast = 2), cluster: 1x2
name: p192x96_s5_c2x1, $B, stages: 5, copy: tma(multicast = 2), cluster: 2x1
S
for i in 1 2; do
  .gpu/bin/gemm-bench --spec-file /tmp/s.txt --shapes 1024x1024x1024,1536x1536x1536,2048x2048x2048,3072x3072x3072 --check 2>&1 | grep ratio | grep -v "^spec" | sed "s/^/$i /"
done > $OUT/p192x96-variants.txt
python3 - $OUT/p192x96-variants.txt <<'P'
import sys, collections
v = collections.defaultdict(list); shapes=[]; specs=[]
for l in open(sys.argv[1]):
    f = l.split(); v[(f[1], f[3])].append(float(f[-3]))
    if f[3] not in shapes: shapes.append(f[3])
    if f[1] not in specs: specs.append(f[1])
print('%-18s' % 'spec' + ''.join('%12s' % s.split('x')[0] for s in shapes))
for s in specs:
    print('%-18s' % s + ''.join('%12s' % '/'.join('%.2f' % x for x in v[(s, sh)]) for sh in shapes))
P
