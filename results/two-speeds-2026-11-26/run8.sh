#!/bin/bash
# The final rule (Schedule::band_order: along first only where the band is shorter than its
# group): a tuning run of the sm90 set over shapes/models.txt (a new cache), the entry point
# with the model alone and with that cache, then the entry point's GPU tests.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
B=.gpu/bin/gemm-bench
$B --set sm90 --shape-file shapes/models.txt --check --time-limit 300 --tune-out $OUT/tune-cache-final.json --out $OUT/tune-final.json > /dev/null 2>&1
$B --set sm90 --shape-file shapes/models.txt --check --auto --picks $OUT/auto-model-final.md --picks-svg $OUT/auto-model-final.svg --out $OUT/auto-model-final.json > /dev/null 2>&1
$B --set sm90 --shape-file shapes/models.txt --check --auto --tune-cache $OUT/tune-cache-final.json --picks $OUT/auto-cache-final.md --out $OUT/auto-cache-final.json > /dev/null 2>&1
grep -h "entry point's picks" $OUT/auto-*.md
timeout 90 .gpu/tests/matmul --ignored --test-threads 1 2>&1 | grep -E "^test |test result|panicked|FAILED" > $OUT/matmul-tests.log
tail -1 $OUT/matmul-tests.log
