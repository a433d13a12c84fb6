#!/bin/bash
# The walk without divisions in its first band and whole bands (after commit 525b1b0) against
# 525b1b0 (walk-ab.py), five members, four squares, three processes; then the GPU tests.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
for i in 1 2 3; do
  .gpu/bin/gemm-bench --spec-file .gpu/walk-ab.txt --ptx-dir .gpu/ptx --shapes 1024x1024x1024,1536x1536x1536,2048x2048x2048,4096x4096x4096 --check 2>&1 | grep ratio | grep -v "^spec" | sed "s/^/$i /"
done > $OUT/walk-ab2.txt
grep -ci "fail\|error" $OUT/walk-ab2.txt
python3 - $OUT/walk-ab2.txt <<'P'
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
T="persistent hopper strided_batch stream_k driver_sass multi_stage partial_tile"
{
  for t in $T; do .gpu/tests/gpu --ignored --test-threads 1 $t 2>&1 | grep -E "^test |test result"; done
  .gpu/tests/matmul --ignored --test-threads 1 2>&1 | grep -E "^test |test result"
  .gpu/tests/fp8 --ignored --test-threads 1 2>&1 | grep -E "^test |test result"
} > $OUT/gpu-tests-walk2.log
grep -E "test result|FAILED|panicked" $OUT/gpu-tests-walk2.log
for k in wgmma_bf16_192x96x64_s5_pingpong mma_bf16_128x256x64_s3_persistent; do
  compute-sanitizer --tool memcheck .gpu/bin/gemm-run $k --shape 3x1000x3000x256 2>&1 | tail -1
done > $OUT/memcheck-walk2.log
cat $OUT/memcheck-walk2.log
