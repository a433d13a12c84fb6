#!/bin/bash
# The 15 squares with the sm90 set (20 members), 5120^3, 5632^3, 7680^3 in a second process
# for the members that compete there, and the f32 set at the shapes whose model pick moved
# with the memory latency 4000 -> 3000 clk (s64x128 -> s64x64).
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
D=results/wide-tiles-2026-11-26
SQ=$(for s in $(seq 1024 512 8192); do printf "%sx%sx%s," $s $s $s; done); SQ=${SQ%,}
.gpu/bin/gemm-bench --set sm90 --shapes $SQ --check --time-limit 300 --out $OUT/squares.json > $OUT/squares.log 2>&1
grep -ci fail $OUT/squares.log; grep -ci "not run" $OUT/squares.log
.gpu/bin/gemm-bench --spec-file $D/wide-specs.txt --shapes 5120x5120x5120,5632x5632x5632,7680x7680x7680 --check --out $OUT/wide3.json > $OUT/wide3.log 2>&1
grep -ci fail $OUT/wide3.log
.gpu/bin/gemm-bench --set f32 --set-types f32 --shapes 1x4096x4096,16x4096x4096,64x4096x4096,128x4096x4096,64x8192x8192,16x8192x28672,4096x16x4096,8192x16x8192,64x4096x14336 --check --out $OUT/f32-small.json > $OUT/f32-small.log 2>&1
grep -ci fail $OUT/f32-small.log
