#!/bin/bash
# The entry point with m16x64_w4: the model's picks, then the cache from run11.sh, over
# shapes/models.txt.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
B=.gpu/bin/gemm-bench
R=results/squares-2026-11-26
$B --set sm90 --shape-file shapes/models.txt --check --auto --picks $OUT/auto-model-w4.md --out $OUT/auto-model-w4.json --picks-svg $OUT/auto-model-w4.svg > /dev/null 2>&1
$B --set sm90 --shape-file shapes/models.txt --check --auto --tune-cache $R/tune-cache-w4.json --picks $OUT/auto-cache-w4.md --out $OUT/auto-cache-w4.json --picks-svg $OUT/auto-cache-w4.svg > /dev/null 2>&1
grep -h "entry point's picks" $OUT/auto-*.md
