#!/bin/bash
# run6.sh again with the final SIMT loop (odd rows first, c5ada7d): the f32 set's three members
# over shapes/models.txt and six squares, against the model's picks (s64x64 at every shape).
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
R=results/simt-stores-2026-11-26
grep -v "^#" shapes/models.txt > /tmp/shapes.txt
for s in 1024 2048 3072 4096 6144 8192; do echo ${s}x${s}x${s}; done >> /tmp/shapes.txt
timeout 200 .gpu/bin/gemm-bench --set f32 --set-types f32 --shape-file /tmp/shapes.txt --check \
  --iters 10 --warmup 2 --time-limit 170 --out $OUT/f32-set-rows.json --markdown $OUT/f32-set-rows.md > $OUT/f32-set-rows.log 2>&1
echo "rc $?"; grep -ci fail $OUT/f32-set-rows.log; grep -c "f32_s" $OUT/f32-set-rows.md
