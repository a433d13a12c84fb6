#!/bin/bash
# The TMA-store epilogue, new against old in one process (epilogue-ab.py): each box waits for
# the store before last, not the last one. Seven sm90 members, six squares, two processes.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
for i in 1 2; do
  .gpu/bin/gemm-bench --spec-file .gpu/ab.txt --ptx-dir .gpu/ptx --shapes 1024x1024x1024,1536x1536x1536,2048x2048x2048,3072x3072x3072,4096x4096x4096,8192x8192x8192 --check 2>&1 | grep ratio | grep -v "^spec" | sed "s/^/$i /"
done > $OUT/epilogue-ab.txt
grep -ci "fail\|error" $OUT/epilogue-ab.txt
python3 - $OUT/epilogue-ab.txt <<'P'
import sys, collections
t = collections.defaultdict(list); shapes=[]; members=[]
for l in open(sys.argv[1]):
    f = l.split(); kind, member = f[1].split('_', 1); t[(member, f[3], kind)].append(float(f[5]))
    if f[3] not in shapes: shapes.append(f[3])
    if member not in members: members.append(member)
print('TFLOP/s new/old (two processes), gain of the better new over the better old')
print('%-14s' % 'member' + ''.join('%22s' % s.split('x')[0] for s in shapes))
for m in members:
    cells = []
    for s in shapes:
        n, o = t[(m, s, 'new')], t[(m, s, 'old')]
        cells.append('%.0f/%.0f %+.1f%%' % (max(n), max(o), 100 * (max(n) / max(o) - 1)))
    print('%-14s' % m + ''.join('%22s' % c for c in cells))
P
