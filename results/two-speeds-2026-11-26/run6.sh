#!/bin/bash
# The walk with bands along first: a tuning run of the sm90 set over shapes/models.txt (a new
# cache), and the two catalog GPU tests run5.sh's time limit cut.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
B=.gpu/bin/gemm-bench
$B --set sm90 --shape-file shapes/models.txt --check --time-limit 330 --tune-out $OUT/tune-cache.json --out $OUT/tune.json > $OUT/tune.log 2>&1
grep -ci fail $OUT/tune.log; tail -2 $OUT/tune.log
timeout 200 .gpu/tests/gpu --ignored random_shapes_compute_in_every_layout math_only_probes_loop_over_their_trips 2>&1 | grep -E "^test |test result|panicked|FAILED" > $OUT/gpu-tests-rest.log
cat $OUT/gpu-tests-rest.log
