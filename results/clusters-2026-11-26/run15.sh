#!/bin/bash
# Where the producer's first 0.8 us go (t_start: the plain 192x96 ping-pong kernel with stamps
# after the ring's bar.sync and after the producer's setmaxnreg and tensor-map prefetches).
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
for shape in 1024x1024x1024 1536x1536x1536 3072x3072x3072; do
  body=$(grep "name: t_start," .gpu/probe/specs.txt)
  .gpu/bin/cta_times "$body" .gpu/probe/t_start.ptx $shape 20 > $OUT/t_start-$shape.txt 2>&1
  python3 - $OUT/t_start-$shape.txt $shape <<'P'
import sys, statistics as st
rows=[l.split() for l in open(sys.argv[1]) if l.split() and l.split()[0].isdigit()]
col=lambda i:[float(r[i]) for r in rows]
entry,ps,cd,cu,cdone,bar,pre=col(3),col(4),col(5),col(6),col(7),col(8),col(9)
m=lambda a,b: st.mean([x-y for x,y in zip(a,b)])
print(f"{sys.argv[1].split('/')[-1]}: entry->bar.sync {m(bar,entry):.2f} | bar.sync->setmaxnreg+prefetch {m(pre,bar):.2f} | ->first copy (walk) {m(ps,pre):.2f} | ->first data {m(cd,ps):.2f} | main loop {m(cu,cd):.2f} | epilogue {m(cdone,cu):.2f} | last block done {max(cdone):.2f}")
P
done
