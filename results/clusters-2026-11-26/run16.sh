#!/bin/bash
# The plain 192x96 ping-pong kernel's start and epilogue with its C stores kept (k_plain: the
# stamps go past C's end): entry, first copy, first data, last k tile, last stores issued,
# last stores read (wait_group 0).
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
for shape in 1024x1024x1024 1536x1536x1536 3072x3072x3072; do
  body=$(grep "name: k_plain," .gpu/probe/specs.txt)
  .gpu/bin/cta_times "$body" .gpu/probe/k_plain.ptx $shape 20 keep > $OUT/k_plain-$shape.txt 2>&1
  python3 - $OUT/k_plain-$shape.txt $shape <<'P'
import sys, statistics as st
rows=[l.split() for l in open(sys.argv[1]) if l.split() and l.split()[0].isdigit()]
if not rows: print(open(sys.argv[1]).read()[:400]); sys.exit()
col=lambda i:[float(r[i]) for r in rows]
entry,ps,cd,cu,cdone,issued,ex=col(3),col(4),col(5),col(6),col(7),col(8),col(9)
m=lambda a,b: st.mean([x-y for x,y in zip(a,b)])
print(f"{sys.argv[2]}: entry->first copy {m(ps,entry):.2f} | ->first data {m(cd,ps):.2f} | main loop {m(cu,cd):.2f} | last k tile->stores issued {m(issued,cu):.2f} | ->stores read {m(cdone,issued):.2f} | last block: stores read {max(cdone):.2f}, exit {max(ex):.2f}")
P
done
