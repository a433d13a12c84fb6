#!/bin/bash
# The kernel's start, hand-edited (start-variants.py): tensor-map prefetch before the ring's
# init, the producer passing the ring's barrier with bar.arrive, both; against the generated
# kernels in the same process, three processes. .gpu/ptx was made here first:
#   python3 results/wide-tiles-2026-11-26/start-variants.py results/wide-tiles-2026-11-26/start-specs.txt target/release/gemm-codegen .gpu/ptx
#   mkdir .gpu/ptx/all && cp .gpu/ptx/*/*.ptx .gpu/ptx/all/
#   cat results/wide-tiles-2026-11-26/start-specs.txt .gpu/ptx/{prefetch,arrive,both}-specs.txt > .gpu/ptx/all-specs.txt
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
SH=1024x1024x1024,1536x1536x1536,2048x2048x2048,4096x4096x4096,128x4096x4096,64x10240x8192
for i in 1 2 3; do
  .gpu/bin/gemm-bench --spec-file .gpu/ptx/all-specs.txt --ptx-dir .gpu/ptx/all --shapes $SH --check --out $OUT/start$i.json > $OUT/start$i.log 2>&1
  echo "rc $?"
done
grep -ci fail $OUT/start1.log $OUT/start2.log $OUT/start3.log
