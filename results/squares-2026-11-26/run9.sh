#!/bin/bash
# After SetMember::fuses: the entry point's GPU tests again (the fused set has 17 members), and
# a second model run and cache run over shapes/models.txt (same cache as run5.sh).
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
B=.gpu/bin/gemm-bench
R=results/squares-2026-11-26
.gpu/tests/matmul --ignored --test-threads 1 > $OUT/matmul-tests-fuses.log 2>&1; tail -2 $OUT/matmul-tests-fuses.log
$B --set sm90 --shape-file shapes/models.txt --check --auto --picks $OUT/auto-model-2.md --out $OUT/auto-model-2.json > /dev/null 2>&1
$B --set sm90 --shape-file shapes/models.txt --check --auto --tune-cache $R/tune-cache.json --picks $OUT/auto-cache-2.md --out $OUT/auto-cache-2.json > /dev/null 2>&1
grep -h "entry point's picks" $OUT/auto-*.md
