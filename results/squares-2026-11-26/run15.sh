#!/bin/bash
# The final set (18 members, m16x64_w4, 4 walkers a split tile): a tuning run over
# shapes/models.txt (a new cache) and the 15 squares.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
B=.gpu/bin/gemm-bench
SQ=$(for s in $(seq 1024 512 8192); do printf "%sx%sx%s," $s $s $s; done); SQ=${SQ%,}
$B --set sm90 --shape-file shapes/models.txt --check --time-limit 330 --tune-out $OUT/tune-cache-final.json --out $OUT/tune-final.json > $OUT/tune-final.log 2>&1
$B --set sm90 --shapes $SQ --check --time-limit 200 --out $OUT/squares-final.json > $OUT/squares-final.log 2>&1
grep -ci fail $OUT/*.log
