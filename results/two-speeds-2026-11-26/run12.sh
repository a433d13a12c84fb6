#!/bin/bash
# Clusters on the small squares' ping-pong tiles, both ways: 1x2 shares A's tile between the two
# blocks of a cluster (multicast), 2x1 shares B's. cuBLAS runs 192x96 with a cluster of two at
# 1536^3 (13.5 us against our 19.6). Two processes.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
B="arch: sm_90a, dtype: bf16, mma: wgmma, schedule: persistent(raster = m, group = 8), consumers: pingpong"
{
for t in "192x96x64, swizzle: 64B, stages: 5" "128x192x64, swizzle: 128B, stages: 4" "128x64x64, swizzle: 128B, stages: 8" "192x128x64, swizzle: 128B, stages: 4"; do
  n=p$(echo $t | cut -dx -f1-2)
  echo "name: $n, $B, tile: $t, copy: tma"
  echo "name: ${n}_c1x2, $B, tile: $t, copy: tma(multicast = 2), cluster: 1x2"
  echo "name: ${n}_c2x1, $B, tile: $t, copy: tma(multicast = 2), cluster: 2x1"
done; } > /tmp/cl.txt
cat /tmp/cl.txt | cut -c1-60
for i in 1 2; do
  .gpu/bin/gemm-bench --spec-file /tmp/cl.txt --shapes 1024x1024x1024,1536x1536x1536,2048x2048x2048,3072x3072x3072 --check --out $OUT/clusters-small-$i.json 2>&1 | grep ratio | grep -v "^spec" | sed "s/^/$i /"
done > $OUT/clusters-small.txt
python3 - $OUT/clusters-small.txt <<'P'
import sys, collections
v = collections.defaultdict(list); shapes=[]
for l in open(sys.argv[1]):
    f = l.split(); v[(f[1], f[3])].append(float(f[-3]))
    if f[3] not in shapes: shapes.append(f[3])
specs = sorted({k[0] for k in v}, key=lambda s: list(dict.fromkeys(k[0] for k in v)).index(s))
print('%-16s' % 'spec' + ''.join('%16s' % s.split('x')[0] for s in shapes))
for s in specs:
    print('%-16s' % s + ''.join('%16s' % '/'.join('%.2f' % x for x in v[(s, sh)]) for sh in shapes))
P
