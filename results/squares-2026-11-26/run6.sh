#!/bin/bash
# Stream-K kernels launched cooperatively (as shipped) and not, alternating, two rounds.
# gemm-bench-exp is gemm-bench built from this tree with one line changed (not committed): in
# runtime/src/kernel.rs::launch_raw, the cooperative attribute is pushed only when
# GEMM_EXPERIMENT_NONCOOP is unset.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
R=results/squares-2026-11-26
SH=1024x1024x1024,1536x1536x1536,2560x2560x2560,5120x5120x5120,128x6144x4096,512x10240x8192,128x8192x28672
for round in 1 2; do
  for mode in coop noncoop; do
    if [ $mode = noncoop ]; then export GEMM_EXPERIMENT_NONCOOP=1; else unset GEMM_EXPERIMENT_NONCOOP; fi
    .gpu/bin/gemm-bench-exp --spec-file $R/coop-specs.txt --shapes $SH --check 2>&1 | grep ratio | sed "s/^/$round $mode /"
  done
done > $OUT/coop.txt
grep -c . $OUT/coop.txt
