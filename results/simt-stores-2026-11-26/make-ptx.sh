#!/bin/bash
# The hand-edited PTX that run1.sh-run3.sh time (ptx/, ptx2/), from the generated kernels of
# 62669c9 (before the loop changed): GEMM_CODEGEN names a gemm-codegen built at that commit.
set -eu
cd "$(dirname "$0")"
G=${GEMM_CODEGEN:?a gemm-codegen built at 62669c9}
mkdir -p ptx ptx2
for base in simt_64x64x16_cp4 simt_64x128x32_cp3; do
  $G emit ${base}_h100 > /tmp/${base}_h100.ptx
  v() { out=$1 name=$2; shift 2; ./simt-variants.py /tmp/${base}_h100.ptx $out/$name.ptx $name "$@"; }
  v ptx ${base}_scalar_c scalar_c
  v ptx ${base}_fadd copy=+0
  v ptx ${base}_snake scalar_c order=row_snake
  v ptx ${base}_fadd_snake copy=+0 order=row_snake
  for o in row_snake row_snake_alt quad; do v ptx2 ${base}_nz_$o copy=-0 order=$o; done
done
