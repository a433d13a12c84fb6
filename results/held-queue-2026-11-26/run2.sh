#!/bin/bash
# The 15 squares behind the hold and, in the next process, launched directly (the method
# before); 4096^3, 7168^3 and 8192^3 in three processes behind the hold (medians); a scratch
# probe of each launch call's host time (launch_cost.rs.txt).
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
W=/tmp/w; mkdir -p $W
.gpu/bin/launch_cost > $W/launch-cost.txt 2>&1; cat $W/launch-cost.txt
SQ=$(for s in $(seq 1024 512 8192); do printf "%sx%sx%s," $s $s $s; done); SQ=${SQ%,}
.gpu/bin/gemm-bench --set sm90 --shapes $SQ --check --time-limit 200 --out $W/squares.json --markdown $W/squares.md --svg $W/squares.svg > $W/squares.log 2>&1
.gpu/bin/gemm-bench --set sm90 --shapes $SQ --check --time-limit 200 --no-hold --out $W/squares-direct.json > $W/squares-direct.log 2>&1
echo "squares: $(grep -ci fail $W/squares*.log) fail, $(grep -ci 'not run' $W/squares*.log) not run"
for i in 1 2 3; do
  .gpu/bin/gemm-bench --set sm90 --shapes 4096x4096x4096,7168x7168x7168,8192x8192x8192 --check 2>&1 | grep TFLOP | sed "s/^/$i /"
done > $W/big-squares-3.txt
echo "big: $(grep -ci fail $W/big-squares-3.txt) fail, $(wc -l < $W/big-squares-3.txt) rows"
tar czf $OUT/run2.tgz -C $W .
