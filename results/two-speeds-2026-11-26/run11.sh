#!/bin/bash
# A second run of the entry point over shapes/models.txt (model alone, and run8.sh's cache).
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
B=.gpu/bin/gemm-bench
R=results/two-speeds-2026-11-26
$B --set sm90 --shape-file shapes/models.txt --check --auto --picks $OUT/auto-model-2.md --out $OUT/auto-model-2.json > /dev/null 2>&1
$B --set sm90 --shape-file shapes/models.txt --check --auto --tune-cache $R/tune-cache-final.json --picks $OUT/auto-cache-2.md --out $OUT/auto-cache-2.json > /dev/null 2>&1
grep -h "entry point's picks" $OUT/auto-*.md
