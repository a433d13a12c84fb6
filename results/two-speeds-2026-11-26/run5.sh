#!/bin/bash
# The walk with bands along first (Schedule::band_order), built from the tree:
# 1. the entry point's GPU tests (every set member on edge shapes, four streams of stream-K);
# 2. the two speeds again: 512x28672x4096 with 128x128 ping-pong and cooperative, four modules
#    a process, three processes, balanced and full grids; 128x8192x28672 with 64x128 stream-K;
# 3. the catalog's GPU tests (every catalog kernel on the test shapes, the SASS checks).
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
.gpu/tests/matmul --ignored --test-threads 1 2>&1 | grep -E "^test |test result|panicked|FAILED" > $OUT/matmul-tests.log
tail -1 $OUT/matmul-tests.log
B="arch: sm_90a, dtype: bf16, swizzle: 128B, mma: wgmma, copy: tma"
gen() { for x in a b c d; do echo "name: $1_$x, $B, $2"; done; }
gen pp "tile: 128x128x64, consumers: pingpong, stages: 6, schedule: persistent(raster = m, group = 8)" > /tmp/pp.txt
gen coop "tile: 128x128x64, consumers: 2, stages: 5, schedule: persistent(raster = m, group = 8)" > /tmp/coop.txt
gen sk "tile: 64x128x64, consumers: 1, stages: 6, schedule: persistent(raster = m, group = 8, tail = stream_k)" > /tmp/sk.txt
for i in 1 2 3; do
  .gpu/bin/gemm-bench --spec-file /tmp/pp.txt --shapes 512x28672x4096 --check 2>&1 | grep ratio | grep -v "^spec" | sed "s/^/$i pp /"
  .gpu/bin/gemm-bench --spec-file /tmp/pp.txt --shapes 512x28672x4096 --full-grid 2>&1 | grep ratio | grep -v "^spec" | sed "s/^/$i pp-full /"
  .gpu/bin/gemm-bench --spec-file /tmp/coop.txt --shapes 512x28672x4096 --check 2>&1 | grep ratio | grep -v "^spec" | sed "s/^/$i coop /"
  .gpu/bin/gemm-bench --spec-file /tmp/sk.txt --shapes 128x8192x28672 --check 2>&1 | grep ratio | grep -v "^spec" | sed "s/^/$i sk /"
done > $OUT/walk-along.txt
python3 - $OUT/walk-along.txt <<'P'
import sys, collections
v = collections.defaultdict(list)
for l in open(sys.argv[1]):
    f = l.split(); v[f[1]].append('%.0f/%.3f' % (float(f[6]), float(f[-3])))
for k, xs in v.items():
    print(k, ' '.join(xs))
P
timeout 240 .gpu/tests/gpu --ignored 2>&1 | grep -E "^test |test result|panicked|FAILED" > $OUT/gpu-tests.log
grep -E "test result|FAILED|panicked" $OUT/gpu-tests.log | head; grep -c " ok$" $OUT/gpu-tests.log
