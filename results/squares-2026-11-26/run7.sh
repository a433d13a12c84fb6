#!/bin/bash
# Where a stream-K kernel spends its time at 1024^3: ncu source counters (warp stall samples
# per SASS instruction) of w128x128_sk, one warm launch, and its details page.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
R=results/squares-2026-11-26
NCU=/usr/local/cuda/bin/ncu
sed -n 2p $R/coop-specs.txt > /tmp/sk.txt
$NCU --clock-control none --set full -k regex:w128x128_sk --launch-skip 3 --launch-count 1 -o /tmp/rep \
  .gpu/bin/gemm-bench --spec-file /tmp/sk.txt --shapes 1024x1024x1024 --iters 5 --warmup 2 > /tmp/ncu.log 2>&1
tail -3 /tmp/ncu.log
$NCU -i /tmp/rep.ncu-rep --page source --print-source sass --csv > $OUT/sk-source.csv 2>&1
$NCU -i /tmp/rep.ncu-rep --page details --print-details all > $OUT/sk-details.txt 2>&1
wc -c $OUT/*
