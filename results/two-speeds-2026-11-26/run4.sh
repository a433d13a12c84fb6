#!/bin/bash
# What in the plain 128x128 ping-pong walk makes the slow speed possible? 512x28672x4096,
# four modules per process, three processes per variant:
#  default: the balanced grid (128 blocks), bands of 8 tiles across N;
#  full:    the full grid (132 blocks, --full-grid);
#  g4:      bands of 4 tiles (the four row tiles sharing a B column tile 4 blocks apart, not 8);
#  g1:      bands of 1 tile (the four in consecutive blocks);
#  coop:    the cooperative 128x128 twin (both consumers on one tile).
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
B="arch: sm_90a, dtype: bf16, swizzle: 128B, mma: wgmma, copy: tma, tile: 128x128x64"
gen() { for x in a b c d; do echo "name: $1_$x, $B, $2"; done; }
gen pp "consumers: pingpong, stages: 6, schedule: persistent(raster = m, group = 8)" > /tmp/pp.txt
gen g4 "consumers: pingpong, stages: 6, schedule: persistent(raster = m, group = 4)" > /tmp/g4.txt
gen g1 "consumers: pingpong, stages: 6, schedule: persistent(raster = m, group = 1)" > /tmp/g1.txt
gen coop "consumers: 2, stages: 5, schedule: persistent(raster = m, group = 8)" > /tmp/coop.txt
S=512x28672x4096
for i in 1 2 3; do
  .gpu/bin/gemm-bench --spec-file /tmp/pp.txt --shapes $S 2>&1 | grep ratio | grep -v "^spec" | sed "s/^/$i default /"
  .gpu/bin/gemm-bench --spec-file /tmp/pp.txt --shapes $S --full-grid 2>&1 | grep ratio | grep -v "^spec" | sed "s/^/$i full /"
  .gpu/bin/gemm-bench --spec-file /tmp/g4.txt --shapes $S 2>&1 | grep ratio | grep -v "^spec" | sed "s/^/$i g4 /"
  .gpu/bin/gemm-bench --spec-file /tmp/g1.txt --shapes $S 2>&1 | grep ratio | grep -v "^spec" | sed "s/^/$i g1 /"
  .gpu/bin/gemm-bench --spec-file /tmp/coop.txt --shapes $S 2>&1 | grep ratio | grep -v "^spec" | sed "s/^/$i coop /"
done > $OUT/walk.txt
python3 - $OUT/walk.txt <<'P'
import sys, collections
v = collections.defaultdict(list)
for l in open(sys.argv[1]):
    f = l.split(); v[f[1]].append(float(f[6]))
for k, xs in v.items():
    print(k, ' '.join('%.0f' % x for x in xs))
P
