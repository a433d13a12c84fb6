#!/bin/bash
# Per-block timelines (%globaltimer) of the 192x96 ping-pong kernel, plain and in a 1x2
# cluster (A multicast; and without multicast or peer releases), from instrumented PTX whose
# C stores are replaced by the stamps (scratch probe, .gpu/probe). The 20th launch's stamps.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
for shape in 1536x1536x1536 3072x3072x3072; do
  for k in t_plain t_mc t_free; do
    body=$(grep "name: $k," .gpu/probe/specs.txt)
    .gpu/bin/cta_times "$body" .gpu/probe/$k.ptx $shape 20 > $OUT/$k-$shape.txt 2>&1
    python3 - $OUT/$k-$shape.txt $k $shape <<'P'
import sys, statistics as st
rows=[l.split() for l in open(sys.argv[1]) if l.split() and l.split()[0].isdigit()]
col=lambda i:[float(r[i]) for r in rows]
entry,ps,cd,cu,cdone,ex=col(3),col(4),col(5),col(6),col(7),col(9)
first=[c-e for c,e in zip(cd,entry)]; main=[u-c for u,c in zip(cu,cd)]
print(f"{sys.argv[2]:8} {sys.argv[3]:15} blocks {len(rows)} entry spread {max(entry):.2f} | first data {st.mean(first):.2f} (max {max(first):.2f}) | c_data->last unit {st.mean(main):.2f} (max {max(main):.2f}) | last unit done max {max(cu):.2f} | c_done max {max(cdone):.2f} | exit max {max(ex):.2f}")
P
  done
done
