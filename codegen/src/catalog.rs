//! Named specs shared by the golden tests, the ptxas tests, benchmarks and the CLI.

/// The spec `gemm-codegen emit` writes when given none.
pub const DEFAULT_SPEC: &str =
    "name: gemm_f32, arch: sm_80, dtype: f32, tile: 128x128x8, stages: 2, copy: cp_async, mma: fma";

/// A catalog entry: a name and the spec text (whose `name:` is the same).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CatalogSpec {
    pub name: &'static str,
    pub spec: &'static str,
    pub summary: &'static str,
}

pub const CATALOG: &[CatalogSpec] = &[
    CatalogSpec {
        name: "simt_128x128x8_cp2",
        spec: "name: simt_128x128x8_cp2, arch: sm_80, tile: 128x128x8, warps: 4x2, stages: 2, copy: cp_async, mma: fma",
        summary: "SIMT f32, cp.async double buffer, 8x8 per thread",
    },
    CatalogSpec {
        name: "simt_128x128x8_sync2",
        spec: "name: simt_128x128x8_sync2, arch: sm_80, tile: 128x128x8, warps: 4x2, stages: 2, copy: sync, mma: fma",
        summary: "SIMT f32, LDG to registers to STS, double buffer",
    },
    CatalogSpec {
        name: "simt_128x128x8_sync1",
        spec: "name: simt_128x128x8_sync1, arch: sm_80, tile: 128x128x8, warps: 4x2, stages: 1, copy: sync, mma: fma",
        summary: "SIMT f32, one stage, no overlap of loads and math",
    },
    CatalogSpec {
        name: "simt_128x128x16_cp3",
        spec: "name: simt_128x128x16_cp3, arch: sm_80, tile: 128x128x16, warps: 4x2, stages: 3, copy: cp_async, mma: fma",
        summary: "SIMT f32, cp.async three-stage ring",
    },
    CatalogSpec {
        name: "simt_128x128x16_cp4_pad",
        spec: "name: simt_128x128x16_cp4_pad, arch: sm_80, tile: 128x128x16, warps: 4x2, stages: 4, swizzle: pad(16), copy: cp_async, mma: fma",
        summary: "SIMT f32, cp.async four stages, rows padded by 16 B",
    },
    CatalogSpec {
        name: "simt_128x256x8_cp2",
        spec: "name: simt_128x256x8_cp2, arch: sm_80, tile: 128x256x8, warps: 2x4, stages: 2, copy: cp_async, mma: fma",
        summary: "SIMT f32, 16x8 accumulators per thread, wide tile",
    },
    CatalogSpec {
        name: "simt_64x64x16_ca2",
        spec: "name: simt_64x64x16_ca2, arch: sm_86, tile: 64x64x16, warps: 2x1, stages: 2, copy: cp_async(ca), mma: fma",
        summary: "SIMT f32, small tile for small problems, L1-cached cp.async",
    },
    CatalogSpec {
        name: "simt_128x128x32_cp3_h100",
        spec: "name: simt_128x128x32_cp3_h100, arch: sm_90, tile: 128x128x32, warps: 4x2, stages: 3, copy: cp_async, mma: fma",
        summary: "SIMT f32 for Hopper, deep k tile",
    },
    CatalogSpec {
        name: "simt_64x128x32_cp3_h100",
        spec: "name: simt_64x128x32_cp3_h100, arch: sm_90, tile: 64x128x32, warps: 2x2, stages: 3, copy: cp_async, mma: fma",
        summary: "SIMT f32 for Hopper, tuned: 4 warps, 3 blocks/SM, best at 8192^3",
    },
    CatalogSpec {
        name: "simt_64x64x16_cp4_h100",
        spec: "name: simt_64x64x16_cp4_h100, arch: sm_90, tile: 64x64x16, warps: 2x1, stages: 4, copy: cp_async, mma: fma",
        summary: "SIMT f32 for Hopper, tuned: 2 warps, 6 blocks/SM, best at 4096^3",
    },
    CatalogSpec {
        name: "mma_bf16_128x128x32_s3",
        spec: "name: mma_bf16_128x128x32_s3, arch: sm_80, dtype: bf16, tile: 128x128x32, warps: 2x2, stages: 3, swizzle: 128B, copy: cp_async, mma: mma_sync",
        summary: "Ampere tensor cores bf16, 64x64 warp tiles, cp.async three-stage ring, 128B swizzle",
    },
    CatalogSpec {
        name: "mma_bf16_128x256x32_s4",
        spec: "name: mma_bf16_128x256x32_s4, arch: sm_80, dtype: bf16, tile: 128x256x32, warps: 2x4, stages: 4, swizzle: 128B, copy: cp_async, mma: mma_sync",
        summary: "Ampere tensor cores bf16, wide tile, 8 warps of 64x64, four stages",
    },
    CatalogSpec {
        name: "mma_bf16_256x128x32_s3",
        spec: "name: mma_bf16_256x128x32_s3, arch: sm_80, dtype: bf16, tile: 256x128x32, warps: 4x2, stages: 3, swizzle: 128B, copy: cp_async, mma: mma_sync",
        summary: "Ampere tensor cores bf16, tall tile, 8 warps of 64x64, three stages",
    },
    CatalogSpec {
        name: "mma_bf16_64x64x64_s2",
        spec: "name: mma_bf16_64x64x64_s2, arch: sm_86, dtype: bf16, tile: 64x64x64, warps: 2x2, stages: 2, swizzle: 128B, copy: cp_async, mma: mma_sync",
        summary: "Ampere tensor cores bf16, small tile for small problems, double buffer",
    },
    CatalogSpec {
        name: "mma_tf32_128x128x16_s4",
        spec: "name: mma_tf32_128x128x16_s4, arch: sm_80, dtype: tf32, out: f32, tile: 128x128x16, warps: 2x2, stages: 4, swizzle: 128B, copy: cp_async, mma: mma_sync",
        summary: "Ampere tensor cores tf32 (m16n8k8, inputs rounded to tf32), f32 out, four stages",
    },
    CatalogSpec {
        name: "mma_bf16_128x128x32_sync2",
        spec: "name: mma_bf16_128x128x32_sync2, arch: sm_80, dtype: bf16, tile: 128x128x32, warps: 2x4, stages: 2, swizzle: 128B, copy: sync, mma: mma_sync",
        summary: "Ampere tensor cores bf16, LDG to registers to STS, double buffer (for comparison)",
    },
    CatalogSpec {
        name: "mma_f16_128x128x64_s3",
        spec: "name: mma_f16_128x128x64_s3, arch: sm_80, dtype: f16, out: f16, tile: 128x128x64, warps: 2x2, stages: 3, swizzle: 128B, copy: cp_async, mma: mma_sync",
        summary: "Ampere tensor cores f16, 128-byte K rows, three stages",
    },
    CatalogSpec {
        name: "mma_bf16_128x128x32_s3_pad",
        spec: "name: mma_bf16_128x128x32_s3_pad, arch: sm_80, dtype: bf16, out: f32, tile: 128x128x32, warps: 2x2, stages: 3, swizzle: pad(16), copy: cp_async, mma: mma_sync",
        summary: "Ampere tensor cores bf16, rows padded by 16 B instead of swizzled, f32 out",
    },
    CatalogSpec {
        name: "mma_bf16_128x256x64_s4_h100",
        spec: "name: mma_bf16_128x256x64_s4_h100, arch: sm_90, dtype: bf16, tile: 128x256x64, warps: 2x4, stages: 4, swizzle: 128B, copy: cp_async, mma: mma_sync",
        summary: "mma.sync bf16 on Hopper: deep k tile, four stages in 192 KB of shared memory",
    },
    CatalogSpec {
        name: "mma_bf16_128x256x64_s3_h100",
        spec: "name: mma_bf16_128x256x64_s3_h100, arch: sm_90, dtype: bf16, tile: 128x256x64, warps: 2x4, stages: 3, swizzle: 128B, copy: cp_async, mma: mma_sync",
        summary: "mma.sync bf16 on Hopper, tuned: 8 warps of 64x64, three stages, best at 4096^3",
    },
    CatalogSpec {
        name: "mma_bf16_128x128x16_s4",
        spec: "name: mma_bf16_128x128x16_s4, arch: sm_80, dtype: bf16, tile: 128x128x16, warps: 2x2, stages: 4, swizzle: 128B, copy: cp_async, mma: mma_sync",
        summary: "Ampere tensor cores bf16, one mma k step per tile (fragments cannot run ahead across the barrier)",
    },
    CatalogSpec {
        name: "mma_bf16_128x256x64_s3_persistent",
        spec: "name: mma_bf16_128x256x64_s3_persistent, arch: sm_90, dtype: bf16, tile: 128x256x64, warps: 2x4, stages: 3, swizzle: 128B, copy: cp_async, mma: mma_sync, schedule: persistent(raster = m, group = 8)",
        summary: "mma.sync bf16 on Hopper, persistent: one block per SM walks raster bands 8 tiles wide; the next tile's copies fly during the epilogue",
    },
    CatalogSpec {
        name: "wgmma_bf16_128x256x64_s4_persistent",
        spec: "name: wgmma_bf16_128x256x64_s4_persistent, arch: sm_90a, dtype: bf16, tile: 128x256x64, consumers: 2, stages: 4, swizzle: 128B, copy: tma, mma: wgmma, schedule: persistent(raster = m, group = 8)",
        summary: "Hopper bf16: TMA ring of 4 stages, 2 consumer warpgroups of m64n256, persistent raster bands 8 tiles wide",
    },
    CatalogSpec {
        name: "wgmma_bf16_128x128x64_s6_pingpong",
        spec: "name: wgmma_bf16_128x128x64_s6_pingpong, arch: sm_90a, dtype: bf16, tile: 128x128x64, consumers: pingpong, stages: 6, swizzle: 128B, copy: tma, mma: wgmma, schedule: persistent(raster = m, group = 8)",
        summary: "Hopper bf16, ping-pong: 2 consumer warpgroups take alternate 128x128 tiles (two m64n128 rows each) and turns at the tensor cores, so one stores while the other multiplies",
    },
    CatalogSpec {
        name: "wgmma_bf16_128x192x64_s4_pingpong",
        spec: "name: wgmma_bf16_128x192x64_s4_pingpong, arch: sm_90a, dtype: bf16, tile: 128x192x64, consumers: pingpong, stages: 4, swizzle: 128B, copy: tma, mma: wgmma, schedule: persistent(raster = m, group = 8)",
        summary: "Hopper bf16, ping-pong on 128x192 tiles (two m64n192 rows per consumer): 3072^3 in 256 tiles, 1.5 times the flops per tile of 128x128",
    },
    CatalogSpec {
        name: "wgmma_bf16_192x96x64_s5_pingpong",
        spec: "name: wgmma_bf16_192x96x64_s5_pingpong, arch: sm_90a, dtype: bf16, tile: 192x96x64, consumers: pingpong, stages: 5, swizzle: 128B, copy: tma, mma: wgmma, schedule: persistent(raster = m, group = 8)",
        summary: "Hopper bf16, ping-pong on 192x96 tiles (three m64n96 rows per consumer): 1536^3 in 128 tiles; A through the 128-byte swizzle, B's 96 columns through the 64-byte one",
    },
    CatalogSpec {
        name: "wgmma_bf16_192x96x64_s5_c3",
        spec: "name: wgmma_bf16_192x96x64_s5_c3, arch: sm_90a, dtype: bf16, tile: 192x96x64, consumers: 3, stages: 5, swizzle: 128B, copy: tma, mma: wgmma, schedule: persistent(raster = m, group = 8)",
        summary: "Hopper bf16, three consumers of 64 rows on 192x96 tiles: at 1536^3 each block has one tile, which ping-pong would run on one consumer; here three split its wgmmas and its stores",
    },
    CatalogSpec {
        name: "wgmma_bf16_128x64x64_s8_pingpong",
        spec: "name: wgmma_bf16_128x64x64_s8_pingpong, arch: sm_90a, dtype: bf16, tile: 128x64x64, consumers: pingpong, stages: 8, swizzle: 128B, copy: tma, mma: wgmma, schedule: persistent(raster = m, group = 8)",
        summary: "Hopper bf16, ping-pong on 128x64 tiles with an 8-stage ring: 128 tiles at 1024^3 and at M = 128 with N = 8192, each consumer's store under the other's wgmmas",
    },
    CatalogSpec {
        name: "wgmma_bf16_128x256x64_s4_streamk",
        spec: "name: wgmma_bf16_128x256x64_s4_streamk, arch: sm_90a, dtype: bf16, tile: 128x256x64, consumers: 2, stages: 4, swizzle: 128B, copy: tma, mma: wgmma, schedule: persistent(raster = m, group = 8, tail = stream_k)",
        summary: "Hopper bf16, persistent with a stream-K tail: the tiles left after whole rounds are split along K over every block",
    },
    CatalogSpec {
        name: "wgmma_bf16_256x160x32_s7_sw64",
        spec: "name: wgmma_bf16_256x160x32_s7_sw64, arch: sm_90a, dtype: bf16, tile: 256x160x32, consumers: 2, stages: 7, swizzle: 64B, copy: tma, mma: wgmma, schedule: persistent(raster = m, group = 8)",
        summary: "Hopper bf16, 160-column tiles (five 32-column atoms of the 64-byte swizzle): one round of 128 tiles at 512x10240, five at 5120^3, where 128x256 tiles leave a ragged last round",
    },
    CatalogSpec {
        name: "wgmma_bf16_128x256x64_s4",
        spec: "name: wgmma_bf16_128x256x64_s4, arch: sm_90a, dtype: bf16, tile: 128x256x64, consumers: 2, stages: 4, swizzle: 128B, copy: tma, mma: wgmma",
        summary: "Hopper bf16: TMA ring of 4 stages, 2 consumer warpgroups of m64n256, one tile per block",
    },
    CatalogSpec {
        name: "wgmma_bf16_128x256x64_s4_cluster2x1",
        spec: "name: wgmma_bf16_128x256x64_s4_cluster2x1, arch: sm_90a, dtype: bf16, tile: 128x256x64, consumers: 2, stages: 4, swizzle: 128B, copy: tma(multicast = 2), mma: wgmma, schedule: persistent(raster = m, group = 8), cluster: 2x1",
        summary: "Hopper bf16, persistent clusters of 2 blocks down M: each loads half of the shared B tile and multicasts it",
    },
    CatalogSpec {
        name: "wgmma_bf16_128x320x64_s3_cluster2x1",
        spec: "name: wgmma_bf16_128x320x64_s3_cluster2x1, arch: sm_90a, dtype: bf16, tile: 128x320x64, consumers: 2, stages: 3, swizzle: 128B, copy: tma(multicast = 2), mma: wgmma, schedule: persistent(raster = m, group = 8), cluster: 2x1",
        summary: "Hopper bf16, 320-column tiles: each consumer's row of 64 in two wgmmas (m64n192 + m64n128), 2-block clusters down M sharing B; cuBLAS's tile at 5120^3, 5632^3, 7680^3 and 8192^3",
    },
    CatalogSpec {
        name: "wgmma_bf16_256x128x64_s4_cluster1x2",
        spec: "name: wgmma_bf16_256x128x64_s4_cluster1x2, arch: sm_90a, dtype: bf16, tile: 256x128x64, consumers: 2, stages: 4, swizzle: 128B, copy: tma(multicast = 2), mma: wgmma, schedule: persistent(raster = m, group = 8), cluster: 1x2",
        summary: "Hopper bf16, tall tile, persistent clusters of 2 blocks along N: each loads half of the shared A tile and multicasts it",
    },
    CatalogSpec {
        name: "wgmma_bf16_128x128x64_s4_c1",
        spec: "name: wgmma_bf16_128x128x64_s4_c1, arch: sm_90a, dtype: bf16, tile: 128x128x64, consumers: 1, stages: 4, swizzle: 128B, copy: tma, mma: wgmma",
        summary: "Hopper bf16: one consumer warpgroup of two m64n128 rows, no register split",
    },
    CatalogSpec {
        name: "wgmma_bf16_256x128x64_s4_persistent",
        spec: "name: wgmma_bf16_256x128x64_s4_persistent, arch: sm_90a, dtype: bf16, tile: 256x128x64, consumers: 2, stages: 4, swizzle: 128B, copy: tma, mma: wgmma, schedule: persistent(raster = m, group = 8)",
        summary: "Hopper bf16: tall tile, 2 consumers of two m64n128 rows each, persistent",
    },
    CatalogSpec {
        name: "wgmma_bf16_128x128x32_s6_sw64",
        spec: "name: wgmma_bf16_128x128x32_s6_sw64, arch: sm_90a, dtype: bf16, tile: 128x128x32, consumers: 2, stages: 6, swizzle: 64B, copy: tma, mma: wgmma",
        summary: "Hopper bf16: 64-byte swizzle (BK = 32), six shallow stages",
    },
    CatalogSpec {
        name: "wgmma_f16_128x256x64_s4_f32out",
        spec: "name: wgmma_f16_128x256x64_s4_f32out, arch: sm_90a, dtype: f16, out: f32, tile: 128x256x64, consumers: 2, stages: 4, swizzle: 128B, copy: tma, mma: wgmma, schedule: persistent(raster = m, group = 8)",
        summary: "Hopper f16 in, f32 out, persistent",
    },
    CatalogSpec {
        name: "wgmma_bf16_64x256x64_s4_c1",
        spec: "name: wgmma_bf16_64x256x64_s4_c1, arch: sm_90a, dtype: bf16, tile: 64x256x64, consumers: 1, stages: 4, swizzle: 128B, copy: tma, mma: wgmma",
        summary: "Hopper bf16 for small M (decode shapes): one consumer of m64n256",
    },
    CatalogSpec {
        name: "wgmma_bf16_64x64x128_s6",
        spec: "name: wgmma_bf16_64x64x128_s6, arch: sm_90a, dtype: bf16, tile: 64x64x128, consumers: 1, stages: 6, swizzle: 128B, copy: tma, mma: wgmma",
        summary: "Hopper bf16 for decode (M <= 64): narrow tiles put every SM on N, deep k tiles",
    },
    CatalogSpec {
        name: "wgmma_bf16_64x128x64_s6_streamk",
        spec: "name: wgmma_bf16_64x128x64_s6_streamk, arch: sm_90a, dtype: bf16, tile: 64x128x64, consumers: 1, stages: 6, swizzle: 128B, copy: tma, mma: wgmma, schedule: persistent(raster = m, group = 8, tail = stream_k)",
        summary: "Hopper bf16 for decode, stream-K: with fewer tiles than SMs every block takes an equal share of their k tiles (split-K, the sums added in a fixed order)",
    },
    CatalogSpec {
        name: "mma_bf16_16x64x64_s4",
        spec: "name: mma_bf16_16x64x64_s4, arch: sm_80, dtype: bf16, tile: 16x64x64, warps: 1x2, stages: 4, swizzle: 128B, copy: cp_async, mma: mma_sync",
        summary: "Ampere bf16 for decode (M <= 16): one row of m16 warps, five blocks per SM",
    },
];

/// fp8 kernels (Hopper, `dtype: e4m3`, K-major operands, per-tensor scales, bf16 out). They
/// take [`E4m3`](https://docs.rs/gemm-runtime) operands, which the run-time-typed loaders
/// and the 16-bit benchmark sets do not hold, so they are listed apart from [`CATALOG`].
pub const FP8: &[CatalogSpec] = &[
    CatalogSpec {
        name: "wgmma_e4m3_128x256x128_s4_persistent",
        spec: "name: wgmma_e4m3_128x256x128_s4_persistent, arch: sm_90a, dtype: e4m3, out: bf16, layout: rc, tile: 128x256x128, consumers: 2, stages: 4, swizzle: 128B, copy: tma, mma: wgmma, schedule: persistent(raster = m, group = 8), quant: tensor",
        summary: "Hopper fp8 (QGMMA k32), the bf16 flagship's bytes per stage: 128x256 tiles, persistent, per-tensor scales",
    },
    CatalogSpec {
        name: "wgmma_e4m3_128x256x128_s4_cluster2x1",
        spec: "name: wgmma_e4m3_128x256x128_s4_cluster2x1, arch: sm_90a, dtype: e4m3, out: bf16, layout: rc, tile: 128x256x128, consumers: 2, stages: 4, swizzle: 128B, copy: tma(multicast = 2), mma: wgmma, schedule: persistent(raster = m, group = 8), cluster: 2x1, quant: tensor",
        summary: "Hopper fp8, two-block clusters down M that load B once and multicast it",
    },
    CatalogSpec {
        name: "wgmma_e4m3_128x128x128_s6_pingpong",
        spec: "name: wgmma_e4m3_128x128x128_s6_pingpong, arch: sm_90a, dtype: e4m3, out: bf16, layout: rc, tile: 128x128x128, consumers: pingpong, stages: 6, swizzle: 128B, copy: tma, mma: wgmma, schedule: persistent(raster = m, group = 8), quant: tensor",
        summary: "Hopper fp8, ping-pong consumers: one's epilogue under the other's QGMMAs",
    },
    CatalogSpec {
        name: "wgmma_e4m3_128x128x128_s5_block",
        spec: "name: wgmma_e4m3_128x128x128_s5_block, arch: sm_90a, dtype: e4m3, out: bf16, layout: rc, tile: 128x128x128, consumers: 2, stages: 5, swizzle: 128B, copy: tma, mma: wgmma, schedule: persistent(raster = m, group = 8), quant: block, promote: 128",
        summary: "Hopper fp8 with DeepSeek-V3 block scales (A 1x128, B 128x128), applied as each k tile's partial sums are promoted into f32",
    },
    CatalogSpec {
        name: "wgmma_e4m3_64x128x128_s6_streamk",
        spec: "name: wgmma_e4m3_64x128x128_s6_streamk, arch: sm_90a, dtype: e4m3, out: bf16, layout: rc, tile: 64x128x128, consumers: 1, stages: 6, swizzle: 128B, copy: tma, mma: wgmma, schedule: persistent(raster = m, group = 8, tail = stream_k), quant: tensor",
        summary: "Hopper fp8 for small M, stream-K: few tiles share their k tiles over every SM",
    },
];

/// Kernels with copy vectors narrower than 16 bytes, for leading dimensions that are not
/// 16-byte multiples: every vector width, both families, layouts with lines along K and
/// along M or N, a swizzled and a padded tile, and column quarters. Tests (golden PTX,
/// ptxas, the CPU ring replay, the GPU) share them; they are not benchmarks, so they stay out
/// of [`CATALOG`].
pub const NARROW: &[CatalogSpec] = &[
    CatalogSpec {
        name: "narrow_simt_cp4",
        spec: "name: narrow_simt_cp4, arch: sm_80, tile: 128x128x8, warps: 4x2, stages: 3, copy: cp_async(ca, vector = 4), mma: fma",
        summary: "SIMT f32, 4-byte cp.async copies: any lda and ldb",
    },
    CatalogSpec {
        name: "narrow_simt_cc_cp8",
        spec: "name: narrow_simt_cc_cp8, arch: sm_80, layout: cc, tile: 128x128x8, warps: 4x2, stages: 2, copy: cp_async(ca, vector = 8), mma: fma",
        summary: "SIMT f32, column-major A and B, 8-byte cp.async copies into column quarters",
    },
    CatalogSpec {
        name: "narrow_simt_rc_sync4",
        spec: "name: narrow_simt_rc_sync4, arch: sm_80, layout: rc, tile: 64x64x16, warps: 2x2, stages: 2, swizzle: pad(16), copy: sync(vector = 4), mma: fma",
        summary: "SIMT f32, column-major B, 4-byte loads through registers, padded rows",
    },
    CatalogSpec {
        name: "narrow_mma_bf16_cp4",
        spec: "name: narrow_mma_bf16_cp4, arch: sm_80, dtype: bf16, tile: 128x128x32, warps: 2x4, stages: 3, swizzle: 128B, copy: cp_async(ca, vector = 4), mma: mma_sync",
        summary: "Ampere bf16, 4-byte cp.async copies inside 128B-swizzled chunks",
    },
    CatalogSpec {
        name: "narrow_mma_bf16_cr_cp4",
        spec: "name: narrow_mma_bf16_cr_cp4, arch: sm_80, dtype: bf16, layout: cr, tile: 64x128x32, warps: 2x2, stages: 3, copy: cp_async(ca, vector = 4), mma: mma_sync",
        summary: "Ampere bf16, column-major A, 4-byte cp.async copies along M and N",
    },
    CatalogSpec {
        name: "narrow_mma_bf16_sync2",
        spec: "name: narrow_mma_bf16_sync2, arch: sm_80, dtype: bf16, tile: 64x64x32, warps: 2x2, stages: 2, copy: sync(vector = 2), mma: mma_sync",
        summary: "Ampere bf16, 2-byte loads through registers: odd leading dimensions",
    },
    CatalogSpec {
        name: "narrow_mma_tf32_rc_cp8",
        spec: "name: narrow_mma_tf32_rc_cp8, arch: sm_80, dtype: tf32, layout: rc, tile: 64x64x32, warps: 2x2, stages: 3, copy: cp_async(ca, vector = 8), mma: mma_sync",
        summary: "Ampere tf32, column-major B, 8-byte cp.async copies",
    },
];

/// A named spec of [`CATALOG`] or [`FP8`].
pub fn find(name: &str) -> Option<&'static CatalogSpec> {
    CATALOG.iter().chain(FP8).find(|entry| entry.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_entry_is_valid_and_named_after_itself() {
        for entry in CATALOG.iter() {
            let valid =
                gemm_dsl::check_str(entry.spec).unwrap_or_else(|e| panic!("{}: {e}", entry.name));
            assert_eq!(valid.spec.name, entry.name);
        }
        gemm_dsl::check_str(DEFAULT_SPEC).unwrap();
        for entry in NARROW {
            let valid =
                gemm_dsl::check_str(entry.spec).unwrap_or_else(|e| panic!("{}: {e}", entry.name));
            assert_eq!(valid.spec.name, entry.name);
            assert!(valid.spec.copy.vector_bytes() < 16, "{}", entry.name);
        }
        for entry in FP8 {
            let valid =
                gemm_dsl::check_str(entry.spec).unwrap_or_else(|e| panic!("{}: {e}", entry.name));
            assert_eq!(valid.spec.name, entry.name);
            assert!(valid.spec.dtype.is_fp8(), "{}", entry.name);
            assert_eq!(find(entry.name).map(|e| e.spec), Some(entry.spec));
        }
    }
}
