#!/bin/bash
# Does a cluster launch slow a kernel with no cluster code? t_plain (the plain 192x96 ping-pong
# kernel, instrumented) launched as before and in clusters of two blocks (cluster12); t_emul
# (the cluster kernel's code without multicast or peer releases) likewise.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
for shape in 1536x1536x1536 3072x3072x3072; do
  for run in "t_plain -" "t_plain cluster12" "t_emul emulate" "t_emul cluster12" "t_free -"; do
    set -- $run; k=$1; extra=$2; [ $extra = - ] && extra=""
    body=$(grep "name: $k," .gpu/probe/specs.txt)
    .gpu/bin/cta_times "$body" .gpu/probe/$k.ptx $shape 20 $extra > $OUT/$k-$2-$shape.txt 2>&1
    python3 - $OUT/$k-$2-$shape.txt "$k $2" $shape <<'P'
import sys, statistics as st
rows=[l.split() for l in open(sys.argv[1]) if l.split() and l.split()[0].isdigit()]
if not rows: print(open(sys.argv[1]).read()[:500]); sys.exit()
col=lambda i:[float(r[i]) for r in rows]
entry,cd,cu,cdone=col(3),col(5),col(6),col(7)
main=[u-c for u,c in zip(cu,cd)]
print(f"{sys.argv[2]:18} {sys.argv[3]:15} blocks {len(rows)} | mainloop {st.mean(main):.2f} (max {max(main):.2f}) | c_done max {max(cdone):.2f} | smids {' '.join(r[1] for r in rows[:12])}")
P
  done
done
