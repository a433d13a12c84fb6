#!/bin/bash
# memcheck of the K-major B split in a cluster (run3.sh's lines that were refused), then a
# tuning run of the sm90 set (20 members, w128x320_c2x1 new) over shapes/models.txt, for the
# cost model's refit and a new tuning cache.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
B="arch: sm_90a, dtype: bf16, tile: 128x320x64, consumers: 2, stages: 3, swizzle: 128B, copy: tma(multicast = 2), cluster: 2x1, mma: wgmma, schedule: persistent(raster = m, group = 8)"
for l in rc cc; do
  for shape in 777x1001x520 3x300x700x128; do
    /usr/local/cuda/bin/compute-sanitizer --tool memcheck .gpu/bin/gemm-run "name: k, $B, layout: $l" --shape $shape 2>&1 | tail -2 | tr '\n' ' '; echo
  done
done > $OUT/memcheck-cluster.log
grep -c "0 errors" $OUT/memcheck-cluster.log
.gpu/bin/gemm-bench --set sm90 --shape-file shapes/models.txt --check --time-limit 420 --tune-out $OUT/tune-cache.json --out $OUT/tune.json > $OUT/tune.log 2>&1
grep -ci fail $OUT/tune.log; tail -2 $OUT/tune.log
