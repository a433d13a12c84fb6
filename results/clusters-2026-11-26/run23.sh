#!/bin/bash
# GPU checks of the review mend (commit e595cdc: the kernels' tile count through the walk's
# macro): the catalog's persistent and strided-batch tests, the entry point's edge shapes.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
{
  for t in persistent strided_batch stream_k; do .gpu/tests/gpu --ignored --test-threads 1 $t 2>&1 | grep -E "^test |test result"; done
  .gpu/tests/matmul --ignored --test-threads 1 every_kernel_of_the_built_in_sets 2>&1 | grep -E "^test |test result"
} > $OUT/gpu-tests-mend.log
grep -E "test result|FAILED|panicked" $OUT/gpu-tests-mend.log
