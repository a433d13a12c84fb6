#!/bin/bash
# Is it the cluster launch itself? t_emul is t_free (the 1x2 cluster kernel without multicast
# or peer releases) launched without the cluster attribute: the PTX takes rank = ctaid & 1 and
# the cluster's index = ctaid >> 1, so each block computes what it computes in the cluster.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
for rep in 1 2; do
for shape in 1536x1536x1536 3072x3072x3072; do
  for k in t_plain t_free t_emul; do
    body=$(grep "name: $k," .gpu/probe/specs.txt)
    extra=""; [ $k = t_emul ] && extra=emulate
    .gpu/bin/cta_times "$body" .gpu/probe/$k.ptx $shape 20 $extra > /tmp/$k-$shape.txt 2>&1
    [ $rep = 1 ] && cp /tmp/$k-$shape.txt $OUT/
    python3 - /tmp/$k-$shape.txt $k $shape <<'P'
import sys, statistics as st
rows=[l.split() for l in open(sys.argv[1]) if l.split() and l.split()[0].isdigit()]
if not rows: print(open(sys.argv[1]).read()[:500]); sys.exit()
col=lambda i:[float(r[i]) for r in rows]
entry,cd,cu,cdone=col(3),col(5),col(6),col(7)
main=[u-c for u,c in zip(cu,cd)]
print(f"{sys.argv[2]:8} {sys.argv[3]:15} blocks {len(rows)} entry spread {max(entry):.2f} | first data {st.mean([c-e for c,e in zip(cd,entry)]):.2f} | mainloop {st.mean(main):.2f} (max {max(main):.2f}) | c_done max {max(cdone):.2f}")
P
  done
done
done
