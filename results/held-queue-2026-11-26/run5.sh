#!/bin/bash
# The set's 128x64 ping-pong tile against the same tile with two cooperative consumers and with
# one, where the model picks it (128x6144x4096, 128x8192x8192, 128x8192x28672, 1024^3) and
# around; three processes behind the hold.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
D=results/held-queue-2026-11-26
S=1024x1024x1024,1536x1536x1536,2048x2048x2048,3072x3072x3072,128x6144x4096,128x8192x8192,128x8192x28672,128x4096x4096,128x14336x4096,64x8192x8192,256x8192x8192,512x4096x4096
for i in 1 2 3; do
  .gpu/bin/gemm-bench --spec-file $D/x64-specs.txt --shapes $S --check 2>&1 | grep TFLOP | sed "s/^/$i /"
done > $OUT/x64-variants.txt
echo "$(grep -ci fail $OUT/x64-variants.txt) fail, $(wc -l < $OUT/x64-variants.txt) rows"
python3 - $OUT/x64-variants.txt <<'P'
import sys,collections
ours=collections.defaultdict(list)
for l in open(sys.argv[1]):
    f=l.split(); ours[(f[1],f[3])].append(float(f[5]))
shapes=list(dict.fromkeys(s for _,s in ours))
print('%-18s %24s %24s'%('shape','co/pp','one/pp'))
for s in shapes:
    pp=ours[('pp128x64',s)]
    print('%-18s %24s %24s  pp %s TF'%(s,'/'.join('%.3f'%(c/p) for c,p in zip(ours[('co128x64',s)],pp)),'/'.join('%.3f'%(c/p) for c,p in zip(ours[('one128x64',s)],pp)),'/'.join('%.0f'%p for p in pp)))
P
