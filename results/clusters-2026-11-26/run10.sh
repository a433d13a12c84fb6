#!/bin/bash
# The 15 squares with the sm90 set (its cluster member has this session's start and exit), and
# raster-n twins of five members (128x128 ping-pong at 8192^3 ran 1.04-1.05 with raster n
# against 0.98 with m, walks.txt).
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
SQ=$(for s in $(seq 1024 512 8192); do printf "%sx%sx%s," $s $s $s; done); SQ=${SQ%,}
.gpu/bin/gemm-bench --set sm90 --shapes $SQ --check --time-limit 270 --out $OUT/squares-set.json > $OUT/squares-set.log 2>&1
grep -ci fail $OUT/squares-set.log
W="arch: sm_90a, dtype: bf16, swizzle: 128B, mma: wgmma, schedule: persistent(raster = n, group = 8)"
cat > /tmp/n.txt <<S
name: n128x128_pp, $W, tile: 128x128x64, consumers: pingpong, stages: 6, copy: tma
name: n128x192_pp, $W, tile: 128x192x64, consumers: pingpong, stages: 4, copy: tma
name: n128x256, $W, tile: 128x256x64, consumers: 2, stages: 4, copy: tma
name: n128x256_c2x1, $W, tile: 128x256x64, consumers: 2, stages: 4, copy: tma(multicast = 2), cluster: 2x1
name: n256x160, arch: sm_90a, dtype: bf16, swizzle: 64B, mma: wgmma, schedule: persistent(raster = n, group = 8), tile: 256x160x32, consumers: 2, stages: 7, copy: tma
S
.gpu/bin/gemm-bench --spec-file /tmp/n.txt --shapes $SQ --check --time-limit 200 --out $OUT/squares-n.json > $OUT/squares-n.log 2>&1
grep -ci fail $OUT/squares-n.log
grep ratio $OUT/squares-n.log | grep -v "^spec" | awk '{print $1, $3, $(NF-2)}' | head -80
