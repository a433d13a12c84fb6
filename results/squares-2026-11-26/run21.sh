#!/bin/bash
# Is the driver's JIT of the same PTX always the same SASS? gemm-run --sass writes what the JIT
# made of the kernel; eight processes of the ping-pong spec, checksums compared.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
P="name: pp128, arch: sm_90a, dtype: bf16, tile: 128x128x64, swizzle: 128B, copy: tma, mma: wgmma, schedule: persistent(raster = m, group = 8), consumers: pingpong, stages: 6"
mkdir -p /tmp/sass
for i in 1 2 3 4 5 6 7 8; do
  .gpu/bin/gemm-run "$P" --shape 512x2048x512 --sass /tmp/sass/$i.sass > /dev/null 2>&1
done
md5sum /tmp/sass/*.sass | tee $OUT/sass-md5.txt
cp /tmp/sass/1.sass $OUT/
for i in 2 3 4 5 6 7 8; do cmp -s /tmp/sass/1.sass /tmp/sass/$i.sass || { cp /tmp/sass/$i.sass $OUT/; break; }; done
