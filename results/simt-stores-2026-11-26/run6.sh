#!/bin/bash
# The f32 set's three members over shapes/models.txt and the squares 1024^3..8192^3 (the new
# SIMT loop), to check the cost model's refitted picks (s64x64 at every shape) against the
# measured best member.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
R=results/simt-stores-2026-11-26
grep -v "^#" shapes/models.txt > /tmp/shapes.txt
for s in 1024 2048 3072 4096 6144 8192; do echo ${s}x${s}x${s}; done >> /tmp/shapes.txt
timeout 280 .gpu/bin/gemm-bench --set f32 --set-types f32 --shape-file /tmp/shapes.txt --check \
  --iters 10 --warmup 2 --time-limit 240 --out $OUT/f32-set.json --markdown $OUT/f32-set.md > $OUT/f32-set.log 2>&1
echo "rc $?"; grep -ci fail $OUT/f32-set.log; grep -c "f32_s" $OUT/f32-set.md
