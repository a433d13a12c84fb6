#!/bin/bash
# The squares after the second walk step (commit 672f098): the sm90 set over the 15 squares,
# then 4096^3 and 8192^3 in three more processes (issue 21 asks for a median of three).
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
SQ=$(for s in $(seq 1024 512 8192); do printf "%sx%sx%s," $s $s $s; done); SQ=${SQ%,}
.gpu/bin/gemm-bench --set sm90 --shapes $SQ --check --time-limit 250 --out $OUT/squares-walk2.json > $OUT/squares-walk2.log 2>&1
grep -ci fail $OUT/squares-walk2.log
for i in 1 2 3; do
  .gpu/bin/gemm-bench --set sm90 --shapes 4096x4096x4096,8192x8192x8192 --check 2>&1 | grep ratio | grep -v "^spec" | sed "s/^/$i /"
done > $OUT/big-squares-3.txt
wc -l $OUT/big-squares-3.txt
