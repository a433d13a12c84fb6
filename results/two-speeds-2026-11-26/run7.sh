#!/bin/bash
# The walk with bands along first: the entry point over shapes/models.txt with the cost model
# alone and with run6.sh's tuning cache.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
B=.gpu/bin/gemm-bench
R=results/two-speeds-2026-11-26
$B --set sm90 --shape-file shapes/models.txt --check --auto --picks $OUT/auto-model.md --picks-svg $OUT/auto-model.svg --out $OUT/auto-model.json > /dev/null 2>&1
$B --set sm90 --shape-file shapes/models.txt --check --auto --tune-cache $R/tune-cache.json --picks $OUT/auto-cache.md --picks-svg $OUT/auto-cache.svg --out $OUT/auto-cache.json > /dev/null 2>&1
grep -h "entry point's picks\|slowest\|worst" $OUT/auto-*.md | head
