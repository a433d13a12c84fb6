#!/bin/bash
# One tile a block (1024^3, 1536^3; 2048^3 for reference): the set's ping-pong tiles against the
# same tiles with one consumer, two cooperative consumers, BK 128, a sixth stage; three
# processes behind the hold.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
D=results/held-queue-2026-11-26
for i in 1 2 3; do
  .gpu/bin/gemm-bench --spec-file $D/small-specs.txt --shapes 1024x1024x1024,1536x1536x1536,2048x2048x2048 --check 2>&1 | grep TFLOP | sed "s/^/$i /"
done > $OUT/small-variants.txt
echo "$(grep -ci fail $OUT/small-variants.txt) fail, $(wc -l < $OUT/small-variants.txt) rows"
python3 - $OUT/small-variants.txt <<'P'
import sys,collections,statistics as st
ours=collections.defaultdict(list); cub=collections.defaultdict(list)
for l in open(sys.argv[1]):
    f=l.split(); ours[(f[1],f[3])].append(float(f[5])); cub[(f[0],f[3])].append(float(f[8]))
shapes=sorted({s for _,s in ours},key=lambda s:int(s.split('x')[0]))
med={s:st.median([st.median(v) for (p,sh),v in cub.items() if sh==s]) for s in shapes}
print('%-16s'%'spec'+''.join('%22s'%s.split('x')[0] for s in shapes))
for spec in dict.fromkeys(k for k,_ in ours):
    print('%-16s'%spec+''.join('%22s'%('/'.join('%.3f'%(x/med[s]) for x in ours[(spec,s)])) for s in shapes))
P
