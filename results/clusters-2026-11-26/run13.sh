#!/bin/bash
# The real cluster kernel (A multicast) placed as the plain launch places the plain kernel:
# t_mc4_smid is the 1x2 cluster kernel with group 4 (cluster tile i = the plain walk's blocks
# 2i, 2i+1) starting where run9's plain launch put that pair (a table by %smid).
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
for rep in 1 2; do
for shape in 1536x1536x1536 3072x3072x3072; do
  for run in "t_plain -" "t_smid -" "t_mc -" "t_mc4 -" "t_mc4_smid -"; do
    set -- $run; k=$1; extra=$2; [ $extra = - ] && extra=""
    body=$(grep "name: $k," .gpu/probe/specs.txt)
    .gpu/bin/cta_times "$body" .gpu/probe/$k.ptx $shape 20 $extra > /tmp/o.txt 2>&1
    [ $rep = 1 ] && cp /tmp/o.txt $OUT/$k-$2-$shape.txt
    python3 - /tmp/o.txt "$k $2" $shape <<'P'
import sys, statistics as st
rows=[l.split() for l in open(sys.argv[1]) if l.split() and l.split()[0].isdigit()]
if not rows: print(open(sys.argv[1]).read()[:500]); sys.exit()
col=lambda i:[float(r[i]) for r in rows]
entry,cd,cu,cdone=col(3),col(5),col(6),col(7)
main=[u-c for u,c in zip(cu,cd)]
print(f"{sys.argv[2]:18} {sys.argv[3]:15} blocks {len(rows)} | mainloop {st.mean(main):.2f} (max {max(main):.2f}) | c_done max {max(cdone):.2f}")
P
  done
done
done
