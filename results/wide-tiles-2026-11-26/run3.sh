#!/bin/bash
# The 128x320 member landed (catalog wgmma_bf16_128x320x64_s3_cluster2x1, set member
# w128x320_c2x1): the catalog's Hopper GPU tests, the sets' members in every layout on edge
# shapes (fused too), and memcheck of the K-major B split (rc, cc) with and without a cluster
# (as run, the cluster lines repeated the copy key and were refused; run4.sh runs them).
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
D=results/wide-tiles-2026-11-26
timeout 330 .gpu/tests/gpu --ignored every_catalog_kernel_matches_float64_on_the_shape_suite hopper_kernels_compute_every_layout hopper_kernels_compute_random_shapes_in_every_layout every_catalog_kernel_computes_a_strided_batch hopper_kernels_compute_a_strided_batch_in_every_layout driver_sass_keeps_the_specs_promises persistent_kernels_compute_every_tile_over_many_rounds every_hopper_epilogue_computes_any_shape 2>&1 | grep -E "^test |test result|panicked|FAILED" > $OUT/gpu-tests.log
cat $OUT/gpu-tests.log | tail -3
timeout 200 .gpu/tests/matmul --ignored every_kernel_of_the_built_in_sets_computes_edge_shapes_in_every_layout fused_sets_compute_the_epilogue_with_every_member 2>&1 | grep -E "^test |test result|panicked|FAILED" > $OUT/matmul-tests.log
cat $OUT/matmul-tests.log | tail -3
B="arch: sm_90a, dtype: bf16, tile: 128x320x64, consumers: 2, stages: 3, swizzle: 128B, mma: wgmma, schedule: persistent(raster = m, group = 8)"
{
for l in rc cc; do
  for c in ", copy: tma" ", copy: tma(multicast = 2), cluster: 2x1"; do
    for shape in 777x1001x520 3x300x700x128; do
      /usr/local/cuda/bin/compute-sanitizer --tool memcheck .gpu/bin/gemm-run "name: k, $B, layout: $l$c" --shape $shape 2>&1 | tail -2 | tr '\n' ' '; echo
    done
  done
done
} > $OUT/memcheck.log
cat $OUT/memcheck.log | grep -c "0 errors"
