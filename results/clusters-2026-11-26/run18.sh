#!/bin/bash
# The walk's divisions (walk-divisions.py): every division by a constant by multiplication and
# the first product's batch division skipped, against the generated kernels; four members,
# four squares, three processes.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
for i in 1 2 3; do
  .gpu/bin/gemm-bench --spec-file .gpu/walk.txt --ptx-dir .gpu/ptx --shapes 1024x1024x1024,1536x1536x1536,2048x2048x2048,4096x4096x4096 --check 2>&1 | grep ratio | grep -v "^spec" | sed "s/^/$i /"
done > $OUT/walk-divisions.txt
grep -ci "fail\|error" $OUT/walk-divisions.txt
python3 - $OUT/walk-divisions.txt <<'P'
import sys, collections, statistics
t = collections.defaultdict(list); shapes=[]; members=[]
for l in open(sys.argv[1]):
    f = l.split(); kind, member = f[1].split('_', 1); t[(member, f[3], kind)].append(float(f[5]))
    if f[3] not in shapes: shapes.append(f[3])
    if member not in members: members.append(member)
print('TFLOP/s, median of three processes: fast/base and the change')
print('%-12s' % 'member' + ''.join('%20s' % s.split('x')[0] for s in shapes))
for m in members:
    cells = []
    for s in shapes:
        n, o = statistics.median(t[(m, s, 'fast')]), statistics.median(t[(m, s, 'base')])
        cells.append('%.0f/%.0f %+.1f%%' % (n, o, 100 * (n / o - 1)))
    print('%-12s' % m + ''.join('%20s' % c for c in cells))
P
