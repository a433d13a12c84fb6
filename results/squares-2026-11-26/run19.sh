#!/bin/bash
# Is the per-process speed a property of C's buffer? gemm-bench-exp as in run18.sh, plus
# GEMM_EXPERIMENT_C=8: ours writes eight C buffers in turn (launch j of the timed rounds to
# buffer j mod 8 after 8 warm-up launches). Six processes.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
P="arch: sm_90a, dtype: bf16, tile: 128x128x64, swizzle: 128B, copy: tma, mma: wgmma, schedule: persistent(raster = m, group = 8)"
echo "name: pp128, $P, consumers: pingpong, stages: 6" > /tmp/pp.txt
for i in 1 2 3 4 5 6; do
  GEMM_EXPERIMENT_C=8 GEMM_EXPERIMENT_PRINT=1 .gpu/bin/gemm-bench-exp --spec-file /tmp/pp.txt --shapes 512x28672x4096 \
    --iters 32 --warmup 8 --check 2>&1 | grep -E "ours_ms|ratio" | sed "s/^/$i /"
done > $OUT/c-placement.txt
python3 - $OUT/c-placement.txt <<'P'
import sys,re,ast
for l in open(sys.argv[1]):
    if 'ours_ms' in l:
        i=l.split()[0]; v=ast.literal_eval(l[l.index('['):])
        per=[sum(v[j] for j in range(c,len(v),8))/len(v[c::8]) for c in range(8)]
        print(i, ' '.join('%.3f'%x for x in per))
P
