#!/bin/bash
# The catalog's GPU tests with the final band rule (every catalog kernel on the test shapes and
# random shapes, in every layout; the SASS checks).
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
timeout 560 .gpu/tests/gpu --ignored 2>&1 | grep -E "^test |test result|panicked|FAILED" > $OUT/gpu-tests-final.log
grep -E "test result|FAILED|panicked" $OUT/gpu-tests-final.log | head; grep -c " ok$" $OUT/gpu-tests-final.log
