#!/bin/bash
# Wider tiles on three consumers (192x192, 192x128; 192x192 in a 2x1 cluster) against the set's
# 128x256 2x1 at the squares that 192 divides, and 4096^3 / 8192^3; two processes behind the hold.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
D=results/held-queue-2026-11-26
for i in 1 2; do
  .gpu/bin/gemm-bench --spec-file $D/c3-wide-specs.txt --shapes 3072x3072x3072,4096x4096x4096,4608x4608x4608,6144x6144x6144,7680x7680x7680,8192x8192x8192 --check 2>&1 | grep TFLOP | sed "s/^/$i /"
done > $OUT/c3-wide.txt
echo "$(grep -ci fail $OUT/c3-wide.txt) fail, $(wc -l < $OUT/c3-wide.txt) rows"
python3 - $OUT/c3-wide.txt <<'P'
import sys,collections
ours=collections.defaultdict(list)
for l in open(sys.argv[1]):
    f=l.split(); ours[(f[1],f[3])].append(float(f[5]))
shapes=list(dict.fromkeys(s for _,s in ours))
print('%-16s'%'spec'+''.join('%14s'%s.split('x')[0] for s in shapes))
for spec in dict.fromkeys(k for k,_ in ours):
    print('%-16s'%spec+''.join('%14s'%'/'.join('%.0f'%x for x in ours[(spec,s)]) for s in shapes))
P
