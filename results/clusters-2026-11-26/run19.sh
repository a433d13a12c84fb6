#!/bin/bash
# The landed walk (commit e137c19) against the one before (walk-ab.py), five members, four
# squares, three processes; then the sm90 set over the 15 squares.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
for i in 1 2 3; do
  .gpu/bin/gemm-bench --spec-file .gpu/walk-ab.txt --ptx-dir .gpu/ptx --shapes 1024x1024x1024,1536x1536x1536,2048x2048x2048,4096x4096x4096 --check 2>&1 | grep ratio | grep -v "^spec" | sed "s/^/$i /"
done > $OUT/walk-ab.txt
grep -ci "fail\|error" $OUT/walk-ab.txt
python3 - $OUT/walk-ab.txt <<'P'
import sys, collections, statistics
t = collections.defaultdict(list); shapes=[]; members=[]
for l in open(sys.argv[1]):
    f = l.split(); kind, member = f[1].split('_', 1); t[(member, f[3], kind)].append(float(f[5]))
    if f[3] not in shapes: shapes.append(f[3])
    if member not in members: members.append(member)
print('TFLOP/s, median of three processes: new/old and the change')
print('%-12s' % 'member' + ''.join('%20s' % s.split('x')[0] for s in shapes))
for m in members:
    cells = []
    for s in shapes:
        n, o = statistics.median(t[(m, s, 'new')]), statistics.median(t[(m, s, 'old')])
        cells.append('%.0f/%.0f %+.1f%%' % (n, o, 100 * (n / o - 1)))
    print('%-12s' % m + ''.join('%20s' % c for c in cells))
P
SQ=$(for s in $(seq 1024 512 8192); do printf "%sx%sx%s," $s $s $s; done); SQ=${SQ%,}
.gpu/bin/gemm-bench --set sm90 --shapes $SQ --check --time-limit 250 --out $OUT/squares-walk.json > $OUT/squares-walk.log 2>&1
grep -ci fail $OUT/squares-walk.log
