#!/bin/bash
# StreamKSplit::MAX_WALKERS_PER_TILE = 2, 4 and 8 (shipped): gemm-bench-cap2 and -cap4 are
# gemm-bench built from this tree with that one constant changed (not committed). The set's
# stream-K members at problems whose leftover tiles are split; the three builds alternate, two
# rounds.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
R=results/squares-2026-11-26
SH=1536x1536x1536,2560x2560x2560,3072x3072x3072,5120x5120x5120,5632x5632x5632,4096x4352x4096,512x10240x8192,512x28672x4096,128x8192x8192,1x8192x8192
for round in 1 2; do
  for cap in 8 2 4; do
    B=.gpu/bin/gemm-bench-cap$cap; [ $cap = 8 ] && B=.gpu/bin/gemm-bench
    $B --spec-file $R/cap-specs.txt --shapes $SH --check 2>&1 | grep ratio | sed "s/^/$round cap$cap /"
  done
done > $OUT/cap.txt
grep -c . $OUT/cap.txt; grep -ci fail $OUT/cap.txt
