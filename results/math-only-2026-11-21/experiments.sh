#!/usr/bin/env bash
# Math-only ceilings, addressing A/B, sustained clocks. Writes one tarball to $OUT.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
B=target/runtime-gpu/bin/gemm-bench
W=$(mktemp -d)
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_throttle_reasons.active --format=csv -lms 500 > $W/smi.csv &
SMI=$!
mark() { echo "$(date +%H:%M:%S.%N) $*" >> $W/marks.txt; echo "== $*"; }
H100="mma_bf16_128x256x64_s3_h100,mma_bf16_128x256x64_s3_persistent,mma_bf16_128x256x64_s4_h100"
mark ab-cold
$B --spec-file .gpu-tune/r5/ab-specs.txt --ptx-dir .gpu-tune/r5/ptx --shapes 8192x8192x8192,4096x4096x4096 --math-only --check --out $W/ab-cold.json 2>&1 | grep -v "^\s*$" | tail -8
mark catalog-cold
$B --specs $H100,mma_bf16_128x128x32_s3,simt_64x128x32_cp3_h100 --shapes 4096x4096x4096,8192x8192x8192 --math-only --check --out $W/cat-cold.json 2>&1 | tail -12
mark sustained-8192
$B --specs $H100 --shapes 8192x8192x8192 --math-only --sustain 20 --out $W/sus-8192.json 2>&1 | tail -5
mark ab-sustained-8192
$B --spec-file .gpu-tune/r5/ab-specs.txt --ptx-dir .gpu-tune/r5/ptx --shapes 8192x8192x8192 --math-only --sustain 20 --out $W/ab-sus-8192.json 2>&1 | tail -4
mark sustained-4096
$B --specs mma_bf16_128x256x64_s3_persistent,mma_bf16_128x256x64_s3_h100 --shapes 4096x4096x4096 --math-only --sustain 20 --out $W/sus-4096.json 2>&1 | tail -4
mark done
kill $SMI
tar czf $OUT/r5.tgz -C $W .
