#!/bin/bash
# The final set: the entry point's picks (model, then the cache from run15.sh) over
# shapes/models.txt, and the model's over the squares.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
B=.gpu/bin/gemm-bench
R=results/squares-2026-11-26
SQ=$(for s in $(seq 1024 512 8192); do printf "%sx%sx%s," $s $s $s; done); SQ=${SQ%,}
$B --set sm90 --shape-file shapes/models.txt --check --auto --picks $OUT/auto-model-final.md --picks-svg $OUT/auto-model-final.svg --out $OUT/auto-model-final.json > /dev/null 2>&1
$B --set sm90 --shape-file shapes/models.txt --check --auto --tune-cache $R/tune-cache-final.json --picks $OUT/auto-cache-final.md --picks-svg $OUT/auto-cache-final.svg --out $OUT/auto-cache-final.json > /dev/null 2>&1
$B --set sm90 --shapes $SQ --check --auto --picks $OUT/auto-squares-final.md > /dev/null 2>&1
grep -h "entry point's picks" $OUT/auto-*.md
