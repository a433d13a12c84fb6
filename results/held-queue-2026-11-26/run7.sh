#!/bin/bash
# Three cooperative consumers (64 rows each) on 192-row tiles, an experiment behind a relaxed
# check (consumers 1..=3): correctness (plain, fused, stream-K tail, a batch), memcheck and
# racecheck, then the small squares against 192x96 ping-pong in three processes.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
D=results/held-queue-2026-11-26
B="arch: sm_90a, dtype: bf16, tile: 192x96x64, consumers: 3, stages: 5, swizzle: 128B, copy: tma, mma: wgmma"
S=/usr/local/cuda/bin/compute-sanitizer
{
for shape in 777x1001x520 1536x1536x1536 193x97x64 3x500x300x200; do
  .gpu/bin/gemm-run "name: k, $B, schedule: persistent(raster = m, group = 8)" --shape $shape 2>&1 | tail -1
done
.gpu/bin/gemm-run "name: k, $B, schedule: persistent(raster = m, group = 8, tail = stream_k)" --shape 1536x1536x1536 2>&1 | tail -1
.gpu/bin/gemm-run "name: k, $B, schedule: persistent(raster = m, group = 8, tail = stream_k)" --shape 2000x1000x3000 2>&1 | tail -1
.gpu/bin/gemm-run "name: k, $B, schedule: persistent(raster = m, group = 8), bias: col, activation: gelu, aux: pre_activation" --shape 777x1001x520 2>&1 | tail -1
.gpu/bin/gemm-run "name: k, $B, layout: cc, schedule: persistent(raster = m, group = 8)" --shape 777x1001x520 2>&1 | tail -1
for tool in memcheck racecheck; do
  $S --tool $tool .gpu/bin/gemm-run "name: k, $B, schedule: persistent(raster = m, group = 8, tail = stream_k)" --shape 777x1001x520 2>&1 | tail -1
done
} > $OUT/c3-checks.txt
cat $OUT/c3-checks.txt | cut -c1-160
for i in 1 2 3; do
  .gpu/bin/gemm-bench --spec-file $D/c3-specs.txt --shapes 1024x1024x1024,1536x1536x1536,2048x2048x2048,3072x3072x3072,4096x4096x4096 --check 2>&1 | grep TFLOP | sed "s/^/$i /"
done > $OUT/c3-variants.txt
echo "$(grep -ci fail $OUT/c3-variants.txt) fail, $(wc -l < $OUT/c3-variants.txt) rows"
python3 - $OUT/c3-variants.txt <<'P'
import sys,collections,statistics as st
ours=collections.defaultdict(list); cub=collections.defaultdict(list)
for l in open(sys.argv[1]):
    f=l.split(); ours[(f[1],f[3])].append(float(f[5])); cub[(f[0],f[3])].append(float(f[8]))
shapes=sorted({s for _,s in ours},key=lambda s:int(s.split('x')[0]))
print('%-12s'%'spec'+''.join('%21s'%s.split('x')[0] for s in shapes))
for spec in dict.fromkeys(k for k,_ in ours):
    row=[]
    for s in shapes:
        r=[o/st.median(cub[(p,s)]) for p,o in zip(['1','2','3'],ours[(spec,s)])]
        row.append('/'.join('%.3f'%x for x in r))
    print('%-12s'%spec+''.join('%21s'%x for x in row))
P
