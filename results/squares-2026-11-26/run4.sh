#!/bin/bash
# The sm90 set with its two ping-pong members (18) over shapes/models.txt (tuning run, cache)
# and over the 15 squares.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
B=.gpu/bin/gemm-bench
SQ=$(for s in $(seq 1024 512 8192); do printf "%sx%sx%s," $s $s $s; done); SQ=${SQ%,}
$B --set sm90 --shape-file shapes/models.txt --check --time-limit 330 --tune-out $OUT/tune-cache.json --out $OUT/tune.json > $OUT/tune.log 2>&1
$B --set sm90 --shapes $SQ --check --time-limit 220 --out $OUT/squares-set.json > $OUT/squares-set.log 2>&1
grep -ci fail $OUT/*.log; tail -2 $OUT/tune.log
