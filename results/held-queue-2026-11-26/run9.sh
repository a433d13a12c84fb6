#!/bin/bash
# The final sm90 set (w128x64 cooperative, w192x96 on three consumers): the 15 squares behind
# the hold, and 1024^3-2048^3 in three processes.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
W=/tmp/w9; mkdir -p $W
SQ=$(for s in $(seq 1024 512 8192); do printf "%sx%sx%s," $s $s $s; done); SQ=${SQ%,}
.gpu/bin/gemm-bench --set sm90 --shapes $SQ --check --time-limit 200 --out $W/squares-final.json --markdown $W/squares-final.md --svg $W/squares-final.svg > $W/squares-final.log 2>&1
echo "squares: $(grep -ci fail $W/squares-final.log) fail, $(grep -ci 'not run' $W/squares-final.log) not run"
for i in 1 2 3; do
  .gpu/bin/gemm-bench --set sm90 --shapes 1024x1024x1024,1536x1536x1536,2048x2048x2048 --check 2>&1 | grep TFLOP | sed "s/^/$i /"
done > $W/small-final.txt
echo "small: $(grep -ci fail $W/small-final.txt) fail, $(wc -l < $W/small-final.txt) rows"
rm $W/squares-final.log
tar czf $OUT/run9.tgz -C $W .
