#!/bin/bash
# Where the 192x96 ping-pong tile's cluster of two loses: hand-edited PTX (.gpu/ptx) of the
# 1x2 cluster kernel. cl_mc: as generated (A multicast). cl_relax: the start's cluster
# barrier arrives relaxed. cl_nomc: each block loads all of A itself (two 96-row boxes), the
# peer arrivals stay. cl_free: that, without the peer arrivals (empty barriers back to 4).
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
B="arch: sm_90a, dtype: bf16, mma: wgmma, schedule: persistent(raster = m, group = 8), consumers: pingpong, tile: 192x96x64, swizzle: 128B, stages: 5"
cat > /tmp/s.txt <<S
name: plain, $B, copy: tma
name: cl_mc, $B, copy: tma(multicast = 2), cluster: 1x2
name: cl_relax, $B, copy: tma(multicast = 2), cluster: 1x2
name: cl_nomc, $B, copy: tma(multicast = 2), cluster: 1x2
name: cl_free, $B, copy: tma(multicast = 2), cluster: 1x2
S
for i in 1 2; do
  .gpu/bin/gemm-bench --spec-file /tmp/s.txt --ptx-dir .gpu/ptx --shapes 1536x1536x1536,3072x3072x3072,4096x4096x4096 --check 2>&1 | grep ratio | grep -v "^spec" | sed "s/^/$i /"
done > $OUT/cluster-parts.txt
cat $OUT/cluster-parts.txt | awk '{print $1, $2, $4, $7, $(NF-2)}'
