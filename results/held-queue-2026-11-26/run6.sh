#!/bin/bash
# The sm90 set with 128x64 cooperative (w128x64) in place of 128x64 ping-pong: the entry
# point's GPU tests (every member in every layout on edges, fused too; the picks on real model
# problems), memcheck and racecheck of the new member plain and fused, and the three smallest
# squares in three processes behind the hold.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
timeout 300 .gpu/tests/matmul --ignored 2>&1 | grep -E "^test |test result|panicked|FAILED" > $OUT/matmul-tests.log
tail -1 $OUT/matmul-tests.log
K="name: sm90_w128x64_bf16_rr, arch: sm_90a, dtype: bf16, tile: 128x64x64, consumers: 2, stages: 8, swizzle: 128B, copy: tma, mma: wgmma, schedule: persistent(raster = m, group = 8)"
F="$K, bias: col, activation: gelu, aux: pre_activation"
S=/usr/local/cuda/bin/compute-sanitizer
for spec in "$K" "$F"; do
  for tool in memcheck racecheck; do
    $S --tool $tool .gpu/bin/gemm-run "$spec" --shape 777x1001x520 2>&1 | tail -2 | tr '\n' ' '; echo " <- $tool $([ "$spec" = "$K" ] && echo plain || echo fused)"
  done
done > $OUT/sanitizer.log
cat $OUT/sanitizer.log
SQ=1024x1024x1024,1536x1536x1536,2048x2048x2048
for i in 1 2 3; do
  .gpu/bin/gemm-bench --set sm90 --shapes $SQ --check 2>&1 | grep TFLOP | sed "s/^/$i /"
done > $OUT/small-set.txt
echo "$(grep -ci fail $OUT/small-set.txt) fail, $(wc -l < $OUT/small-set.txt) rows"
python3 - $OUT/small-set.txt <<'P'
import sys,collections,statistics as st
rows=collections.defaultdict(dict)
for l in open(sys.argv[1]):
    f=l.split(); rows[(f[3],f[0])][f[1]]=(float(f[5]),float(f[8]))
for (shape,p),d in sorted(rows.items(),key=lambda kv:(int(kv[0][0].split('x')[0]),kv[0][1])):
    med=st.median(c for o,c in d.values()); spec,(o,c)=max(d.items(),key=lambda kv:kv[1][0])
    x=d.get('sm90_w128x64_bf16_rr'); 
    print(shape,p,spec[5:-8],'%.3f'%(o/med),'| w128x64 %.3f'%(x[0]/med))
P
