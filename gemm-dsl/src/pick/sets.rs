//! Kernel sets: the specs a picker chooses among, for one target and element type, in every
//! layout.
//!
//! A member is a spec body without `name`, `dtype`, `out` and `layout`; [`KernelSet::spec`]
//! writes the full spec for one (types, layout). Each set covers every shape: its members
//! compute partial edge tiles, and at least one admits every problem a launch accepts.

use crate::{DType, Layout};
use std::fmt;

/// The compute capabilities (`major * 10 + minor`) a set's members run on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunsOn {
    /// Architecture-specific code (`sm_90a`): that capability only.
    Exactly(u32),
    /// That capability and newer (the driver compiles the PTX forward).
    From(u32),
}

impl RunsOn {
    pub fn admits(self, cc: u32) -> bool {
        match self {
            RunsOn::Exactly(only) => cc == only,
            RunsOn::From(first) => cc >= first,
        }
    }
}

impl fmt::Display for RunsOn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            RunsOn::Exactly(only) => write!(f, "compute capability {} only", Capability(only)),
            RunsOn::From(first) => write!(f, "compute capability {} and newer", Capability(first)),
        }
    }
}

/// A compute capability `major * 10 + minor`, written `major.minor`.
struct Capability(u32);

impl fmt::Display for Capability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.0 / 10, self.0 % 10)
    }
}

/// One spec of a set, without its name, element types and layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SetMember {
    /// Short name, unique in its set: the kernel's name is `<set>_<member>_<types>_<layout>`.
    pub name: &'static str,
    pub body: &'static str,
    /// Which problems it is in the set for.
    pub role: &'static str,
    /// Whether it also builds with a fused epilogue (`Matmul::with_set_fused`): not where the
    /// epilogue's registers on top of the tile's accumulators make ptxas spill.
    pub fuses: bool,
}

/// A named set of specs for one target.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelSet {
    pub name: &'static str,
    /// What the set is for.
    pub about: &'static str,
    /// Input element types the members take (`dtype`).
    pub dtypes: &'static [DType],
    /// Compute capabilities that run every member.
    pub runs_on: RunsOn,
    pub members: &'static [SetMember],
}

/// The Hopper set for 16-bit inputs: wgmma kernels of every size, and a 16-row mma.sync tile.
pub const SM90_16BIT: KernelSet = KernelSet {
    name: "sm90",
    about: "bf16/f16 on Hopper (sm_90a): large persistent and cluster tiles, 320- and 160-column tiles, stream-K tails, ping-pong 128x192, 192x96, 128x128 and 128x64 tiles, 64-row tiles with and without split-K, a 16-row tile for decode and a 16-column one for its transpose, a 64x16 tile of the swapped product (C column-major) for decode; mma.sync tiles with narrow copies for lines and addresses that are not 16-byte aligned",
    dtypes: &[DType::Bf16, DType::F16],
    runs_on: RunsOn::Exactly(90),
    members: &[
        SetMember {
            name: "w128x256",
            body: "arch: sm_90a, tile: 128x256x64, consumers: 2, stages: 4, swizzle: 128B, copy: tma, mma: wgmma, schedule: persistent(raster = m, group = 8)",
            role: "large problems whose tiles fill whole rounds",
            fuses: true,
        },
        SetMember {
            name: "w128x256_sk",
            body: "arch: sm_90a, tile: 128x256x64, consumers: 2, stages: 4, swizzle: 128B, copy: tma, mma: wgmma, schedule: persistent(raster = m, group = 8, tail = stream_k)",
            role: "large problems with a small last round",
            fuses: true,
        },
        SetMember {
            name: "w256x128_sk",
            body: "arch: sm_90a, tile: 256x128x64, consumers: 2, stages: 4, swizzle: 128B, copy: tma, mma: wgmma, schedule: persistent(raster = m, group = 8, tail = stream_k)",
            role: "large problems whose B rows split cache lines (half the B bytes per flop)",
            fuses: true,
        },
        SetMember {
            name: "w128x256_c2x1",
            body: "arch: sm_90a, tile: 128x256x64, consumers: 2, stages: 4, swizzle: 128B, copy: tma(multicast = 2), mma: wgmma, schedule: persistent(raster = m, group = 8), cluster: 2x1",
            role: "large problems, B multicast to two blocks",
            fuses: true,
        },
        SetMember {
            name: "w128x320_c2x1",
            body: "arch: sm_90a, tile: 128x320x64, consumers: 2, stages: 3, swizzle: 128B, copy: tma(multicast = 2), mma: wgmma, schedule: persistent(raster = m, group = 8), cluster: 2x1",
            role: "large problems whose 128x256 tiles leave a ragged last round (5120^3, 5632^3, 7680^3): 1.25 times the tile, two wgmmas a row, B multicast to two blocks",
            fuses: true,
        },
        SetMember {
            name: "w128x192",
            body: "arch: sm_90a, tile: 128x192x64, consumers: 2, stages: 4, swizzle: 128B, copy: tma, mma: wgmma, schedule: persistent(raster = m, group = 8)",
            role: "M of a few hundred with N a multiple of 192: a round of tiles closer to the SM count",
            fuses: true,
        },
        SetMember {
            name: "w256x160",
            body: "arch: sm_90a, tile: 256x160x32, consumers: 2, stages: 7, swizzle: 64B, copy: tma, mma: wgmma, schedule: persistent(raster = m, group = 8)",
            role: "N a multiple of 160 (5120, 10240): one round of 128 tiles where 128x256 tiles leave a ragged last round (64-byte swizzle: 160 columns are five 32-column atoms)",
            fuses: true,
        },
        SetMember {
            name: "w128x128",
            body: "arch: sm_90a, tile: 128x128x64, consumers: 2, stages: 5, swizzle: 128B, copy: tma, mma: wgmma, schedule: persistent(raster = m, group = 8)",
            role: "M of a few hundred: twice the tiles of 128x256",
            fuses: true,
        },
        SetMember {
            name: "w128x128_sk",
            body: "arch: sm_90a, tile: 128x128x64, consumers: 2, stages: 5, swizzle: 128B, copy: tma, mma: wgmma, schedule: persistent(raster = m, group = 8, tail = stream_k)",
            role: "M of 128 to 512 with deep K: split-K on mid-size tiles",
            fuses: true,
        },
        SetMember {
            name: "w128x128_pp",
            body: "arch: sm_90a, tile: 128x128x64, consumers: pingpong, stages: 6, swizzle: 128B, copy: tma, mma: wgmma, schedule: persistent(raster = m, group = 8)",
            role: "M of a few hundred with rounds of tiles to spare: one consumer stores its tile while the other multiplies",
            fuses: true,
        },
        SetMember {
            name: "w128x192_pp",
            body: "arch: sm_90a, tile: 128x192x64, consumers: pingpong, stages: 4, swizzle: 128B, copy: tma, mma: wgmma, schedule: persistent(raster = m, group = 8)",
            role: "squares of 1536 to 3072 and problems whose 128x256 tiles leave a ragged round: one consumer stores while the other multiplies, on 1.5 times the 128x128 tile",
            fuses: false,
        },
        SetMember {
            name: "w192x96",
            body: "arch: sm_90a, tile: 192x96x64, consumers: 3, stages: 5, swizzle: 128B, copy: tma, mma: wgmma, schedule: persistent(raster = m, group = 8)",
            role: "squares near 1536 (one round of 128 tiles): cuBLAS's tile there, each block's one tile split over three consumers of 64 rows; A read through 128-byte rows while B's 96 columns take 64-byte ones",
            fuses: true,
        },
        SetMember {
            name: "w128x64",
            body: "arch: sm_90a, tile: 128x64x64, consumers: 2, stages: 8, swizzle: 128B, copy: tma, mma: wgmma, schedule: persistent(raster = m, group = 8)",
            role: "M of about 128 with N of a few thousand, and 1024^3: enough 64-wide columns for every SM, one tile each, whose rows and stores two consumers share",
            fuses: true,
        },
        SetMember {
            name: "w64x256",
            body: "arch: sm_90a, tile: 64x256x64, consumers: 1, stages: 4, swizzle: 128B, copy: tma, mma: wgmma",
            role: "M of a few hundred",
            fuses: true,
        },
        SetMember {
            name: "w64x128_sk",
            body: "arch: sm_90a, tile: 64x128x64, consumers: 1, stages: 6, swizzle: 128B, copy: tma, mma: wgmma, schedule: persistent(raster = m, group = 8, tail = stream_k)",
            role: "small M with few tiles: split-K over every SM",
            fuses: true,
        },
        SetMember {
            name: "w64x64",
            body: "arch: sm_90a, tile: 64x64x128, consumers: 1, stages: 6, swizzle: 128B, copy: tma, mma: wgmma",
            role: "small M, enough 64-wide columns for every SM",
            fuses: true,
        },
        SetMember {
            name: "w64x64_sk",
            body: "arch: sm_90a, tile: 64x64x128, consumers: 1, stages: 6, swizzle: 128B, copy: tma, mma: wgmma, schedule: persistent(raster = m, group = 8, tail = stream_k)",
            role: "small M and N, deep K: split-K",
            fuses: true,
        },
        SetMember {
            name: "m16x64",
            body: "arch: sm_90, tile: 16x64x64, warps: 1x2, stages: 4, swizzle: 128B, copy: cp_async, mma: mma_sync",
            role: "M of at most 16 (decode): no rows wasted",
            fuses: true,
        },
        SetMember {
            name: "m16x64_w4",
            body: "arch: sm_90, tile: 16x64x64, warps: 1x4, stages: 8, swizzle: 128B, copy: cp_async, mma: mma_sync",
            role: "M of at most 16 with a small weight: 8 stages in flight, 4 warps of 16 columns each",
            fuses: true,
        },
        SetMember {
            name: "m64x16",
            body: "arch: sm_90, tile: 64x16x128, warps: 2x1, stages: 6, swizzle: 128B, copy: cp_async, mma: mma_sync",
            role: "N of at most 16 (a weight times a few columns): no columns wasted",
            fuses: true,
        },
        // The swapped product's tile (`c_layout: col`, as `sm90_fp8`'s): `Matmul` runs a
        // decode problem as `Cᵀ = Bᵀ·Aᵀ` on it where the model predicts it faster. Chosen from
        // seven swapped tiles over M = 1, 16 and 64 of models.txt (results/swap-ab-2026-11-29/).
        SetMember {
            name: "swap64x16",
            body: "arch: sm_90a, c_layout: col, tile: 64x16x128, consumers: 1, stages: 6, swizzle: 128B, copy: tma, mma: wgmma",
            role: "M of 16 or less (decode), swapped: the weights' N on the tile's 64 rows, the tokens on its 16 columns; 0.95-1.14x cuBLAS in layout rc at M <= 16 where the best unswapped member ran 0.80-1.00x (H200)",
            fuses: true,
        },
        SetMember {
            name: "m128x256_c2",
            body: "arch: sm_90, tile: 128x256x32, warps: 2x4, stages: 4, swizzle: 128B, copy: cp_async, c_store: 2, mma: mma_sync",
            role: "A and B at 16-byte lines, C's rows at any 16-bit element (an odd N in layout rc: a vocabulary's logits): A and B copied 16 bytes wide, C stored 2 bytes at a time, picked only where no member with whole stores computes the problem",
            fuses: true,
        },
        SetMember {
            name: "m16x64_c2",
            body: "arch: sm_90, tile: 16x64x64, warps: 1x2, stages: 4, swizzle: 128B, copy: cp_async, c_store: 2, mma: mma_sync",
            role: "m128x256_c2's problems at M of at most 16 (decode)",
            fuses: true,
        },
        SetMember {
            name: "n128x256_cp4",
            body: "arch: sm_90, tile: 128x256x32, warps: 2x4, stages: 3, swizzle: 128B, copy: cp_async(ca, vector = 4), mma: mma_sync",
            role: "large problems whose lines or addresses are 4-byte aligned but not 16 (an even leading dimension that is no multiple of 8): 4-byte cp.async, picked only where no 16-byte member computes the problem",
            fuses: true,
        },
        SetMember {
            name: "n128x128_cp4",
            body: "arch: sm_90, tile: 128x128x32, warps: 2x4, stages: 4, swizzle: 128B, copy: cp_async(ca, vector = 4), mma: mma_sync",
            role: "n128x256_cp4's problems of a few hundred rows: twice the tiles",
            fuses: true,
        },
        SetMember {
            name: "n128x64_sync2",
            body: "arch: sm_90, tile: 128x64x32, warps: 4x2, stages: 3, swizzle: 128B, copy: sync(vector = 2), mma: mma_sync",
            role: "any line and any element-aligned address (an odd leading dimension, a view that starts at an odd element): 2-byte loads, picked only where no wider copy computes the problem",
            fuses: true,
        },
        SetMember {
            name: "n64x64_sync2",
            body: "arch: sm_90, tile: 64x64x32, warps: 2x2, stages: 2, swizzle: 128B, copy: sync(vector = 2), mma: mma_sync",
            role: "n128x64_sync2's problems when they are small: twice the tiles",
            fuses: true,
        },
        SetMember {
            name: "n16x64_sync2",
            body: "arch: sm_90, tile: 16x64x32, warps: 1x4, stages: 2, swizzle: 64B, copy: sync(vector = 2), mma: mma_sync",
            role: "n128x64_sync2's problems at M of at most 16 (decode)",
            fuses: true,
        },
    ],
};

/// The Ampere set for 16-bit inputs (runs on every board from sm_80).
pub const SM80_16BIT: KernelSet = KernelSet {
    name: "sm80",
    about: "bf16/f16 from Ampere on (sm_80, mma.sync with cp.async rings), and narrow copies for lines and addresses that are not 16-byte aligned",
    dtypes: &[DType::Bf16, DType::F16],
    runs_on: RunsOn::From(80),
    members: &[
        SetMember {
            name: "m128x256",
            body: "arch: sm_80, tile: 128x256x32, warps: 2x4, stages: 4, swizzle: 128B, copy: cp_async, mma: mma_sync",
            role: "large problems",
            fuses: true,
        },
        SetMember {
            name: "m128x128",
            body: "arch: sm_80, tile: 128x128x32, warps: 2x2, stages: 3, swizzle: 128B, copy: cp_async, mma: mma_sync",
            role: "medium problems",
            fuses: true,
        },
        SetMember {
            name: "m64x64",
            body: "arch: sm_80, tile: 64x64x64, warps: 2x2, stages: 2, swizzle: 128B, copy: cp_async, mma: mma_sync",
            role: "small problems",
            fuses: true,
        },
        SetMember {
            name: "m16x64",
            body: "arch: sm_80, tile: 16x64x64, warps: 1x2, stages: 4, swizzle: 128B, copy: cp_async, mma: mma_sync",
            role: "M of at most 16 (decode)",
            fuses: true,
        },
        SetMember {
            name: "m128x256_c2",
            body: "arch: sm_80, tile: 128x256x32, warps: 2x4, stages: 4, swizzle: 128B, copy: cp_async, c_store: 2, mma: mma_sync",
            role: "A and B at 16-byte lines, C's rows at any 16-bit element (an odd N in layout rc: a vocabulary's logits): A and B copied 16 bytes wide, C stored 2 bytes at a time, picked only where no member with whole stores computes the problem",
            fuses: true,
        },
        SetMember {
            name: "m16x64_c2",
            body: "arch: sm_80, tile: 16x64x64, warps: 1x2, stages: 4, swizzle: 128B, copy: cp_async, c_store: 2, mma: mma_sync",
            role: "m128x256_c2's problems at M of at most 16 (decode)",
            fuses: true,
        },
        SetMember {
            name: "n128x256_cp4",
            body: "arch: sm_80, tile: 128x256x32, warps: 2x4, stages: 3, swizzle: 128B, copy: cp_async(ca, vector = 4), mma: mma_sync",
            role: "large problems whose lines or addresses are 4-byte aligned but not 16 (an even leading dimension that is no multiple of 8): 4-byte cp.async, picked only where no 16-byte member computes the problem",
            fuses: true,
        },
        SetMember {
            name: "n128x128_cp4",
            body: "arch: sm_80, tile: 128x128x32, warps: 2x4, stages: 4, swizzle: 128B, copy: cp_async(ca, vector = 4), mma: mma_sync",
            role: "n128x256_cp4's problems of a few hundred rows: twice the tiles",
            fuses: true,
        },
        SetMember {
            name: "n128x64_sync2",
            body: "arch: sm_80, tile: 128x64x32, warps: 4x2, stages: 3, swizzle: 128B, copy: sync(vector = 2), mma: mma_sync",
            role: "any line and any element-aligned address (an odd leading dimension, a view that starts at an odd element): 2-byte loads, picked only where no wider copy computes the problem",
            fuses: true,
        },
        SetMember {
            name: "n64x64_sync2",
            body: "arch: sm_80, tile: 64x64x32, warps: 2x2, stages: 2, swizzle: 128B, copy: sync(vector = 2), mma: mma_sync",
            role: "n128x64_sync2's problems when they are small: twice the tiles",
            fuses: true,
        },
        SetMember {
            name: "n16x64_sync2",
            body: "arch: sm_80, tile: 16x64x32, warps: 1x4, stages: 2, swizzle: 64B, copy: sync(vector = 2), mma: mma_sync",
            role: "n128x64_sync2's problems at M of at most 16 (decode)",
            fuses: true,
        },
    ],
};

/// The 64-row stream-K fp8 tile for small M, in both fp8 sets: its promoted sums fit beside
/// block scales.
const FP8_W64X128_SK: SetMember = SetMember {
    name: "w64x128_sk",
    body: "arch: sm_90a, tile: 64x128x128, consumers: 1, stages: 6, swizzle: 128B, copy: tma, mma: wgmma, schedule: persistent(raster = m, group = 8, tail = stream_k)",
    role: "small M: few tiles share their k tiles over every SM",
    fuses: true,
};

/// The 64-row fp8 tile a block for small M, in both fp8 sets: at M <= 64 over N of 4096 to
/// 8192, 0.78-1.02x cuBLASLt where the ping-pong tile ran 0.50-0.76x (H200,
/// results/fp8-small-m-2026-11-29/); with block scales, M <= 16, 0.69-0.92x where the
/// 128x128 tiles ran 0.35-0.66x (results/fp8-block-2026-11-29/).
const FP8_W64X128: SetMember = SetMember {
    name: "w64x128",
    body: "arch: sm_90a, tile: 64x128x128, consumers: 1, stages: 6, swizzle: 128B, copy: tma, mma: wgmma",
    role: "M up to 128 over a few thousand columns: a tile per block and no split sums to add",
    fuses: true,
};

/// The 16-column fp8 tile, in both fp8 sets: with block scales at N = 16, 0.84-0.98x
/// cuBLASLt's per-tensor GEMM (1.09-1.45x its block-scaled one) where the sets' other tiles
/// ran 0.51-0.73x (H200, results/fp8-block-2026-11-29/).
const FP8_W128X16: SetMember = SetMember {
    name: "w128x16",
    body: "arch: sm_90a, tile: 128x16x128, consumers: 2, stages: 8, swizzle: 128B, copy: tma, mma: wgmma",
    role: "N of 16 or less (decode problems transposed, 4096x16x4096): no 128-column tile spent on 16 columns; 0.87-1.06x cuBLASLt where 128-wide tiles ran at most 0.76x",
    fuses: true,
};

/// The Hopper set for fp8 inputs: the fp8 wgmma reads both operands K-major, so its members
/// take layout `rc` only ([`KernelSet::layouts`]); one 128-byte span of K per k tile.
pub const SM90_FP8: KernelSet = KernelSet {
    name: "sm90_fp8",
    about: "e4m3/e5m2 on Hopper (sm_90a), layout rc: large persistent and cluster tiles, ping-pong 128x128 tiles, 64-row tiles for small M (64x128 with and without a stream-K tail, 64x256 with one, 64x64), 16-column tiles (128x16, 64x16) for N <= 16, and 64x16 and 128x16 tiles of the swapped product (C column-major) for decode",
    dtypes: &[DType::E4m3, DType::E5m2],
    runs_on: RunsOn::Exactly(90),
    members: &[
        SetMember {
            name: "w128x256",
            body: "arch: sm_90a, tile: 128x256x128, consumers: 2, stages: 4, swizzle: 128B, copy: tma, mma: wgmma, schedule: persistent(raster = m, group = 8)",
            role: "large problems whose tiles fill whole rounds",
            fuses: true,
        },
        SetMember {
            name: "w128x128_pp",
            body: "arch: sm_90a, tile: 128x128x128, consumers: pingpong, stages: 6, swizzle: 128B, copy: tma, mma: wgmma, schedule: persistent(raster = m, group = 8)",
            role: "large problems: one consumer's epilogue under the other's wgmmas",
            fuses: true,
        },
        SetMember {
            name: "w128x256_c2x1",
            body: "arch: sm_90a, tile: 128x256x128, consumers: 2, stages: 4, swizzle: 128B, copy: tma(multicast = 2), mma: wgmma, schedule: persistent(raster = m, group = 8), cluster: 2x1",
            role: "large problems, B loaded once per two tiles down M",
            fuses: true,
        },
        FP8_W64X128_SK,
        // After the stream-K tile, which ties go to where the model predicts the two alike
        // (fewer tiles than SMs, no split). Measured both ways (results/fp8-small-m-2026-11-29/):
        // at M = 128 over N = 8192 the tile per block ran 0.72-0.79x cuBLASLt, the persistent
        // one 0.92-0.93x; at N = 10240, M <= 64, the other way (0.73-1.02x against 0.65-0.96x).
        FP8_W64X128,
        SetMember {
            name: "w64x64",
            body: "arch: sm_90a, tile: 64x64x128, consumers: 1, stages: 8, swizzle: 128B, copy: tma, mma: wgmma",
            role: "M of 64 to 128 over N of 4096 to 8192: twice the 64x128 tile's blocks; at M = 64 1.01-1.16x cuBLASLt where that ran 0.87-1.05x (H200, results/fp8-block-2026-11-29/)",
            fuses: true,
        },
        SetMember {
            name: "w64x256_sk",
            body: "arch: sm_90a, tile: 64x256x128, consumers: 1, stages: 4, swizzle: 128B, copy: tma, mma: wgmma, schedule: persistent(raster = m, group = 8, tail = stream_k)",
            role: "decode over tens of thousands of columns (28672, 57344): half the tiles of 64x128 share their k tiles over every SM; 0.90-1.06x cuBLASLt at M <= 64",
            fuses: true,
        },
        FP8_W128X16,
        SetMember {
            name: "w64x16",
            body: "arch: sm_90a, tile: 64x16x128, consumers: 1, stages: 8, swizzle: 128B, copy: tma, mma: wgmma",
            role: "N of 16 or less over K of 4096 and more: twice the 128x16 tile's blocks; 0.97-1.01x cuBLASLt where that ran 0.83-1.00x and the 64x64 tile 0.74-0.83x (H200, results/fp8-block-2026-11-29/)",
            fuses: true,
        },
        // The swapped product's tiles (`c_layout: col`): `Matmul` runs a problem as
        // `Cᵀ = Bᵀ·Aᵀ` on them where the model predicts it faster, so a decode problem's weights
        // fill the tile's rows and its few tokens the 16 columns. Measured over M = 1, 16 and
        // 64 of models.txt (results/fp8-swap-ab-2026-11-29/): at M <= 16 these ran 0.88-1.13x
        // cuBLASLt (64x16: geomean 1.04) where the best unswapped tile ran 0.76-1.00x; a
        // stream-K tail made them slower (0.70-1.08x), and 32- and 64-column ones won only
        // at M = 64.
        SetMember {
            name: "swap64x16",
            body: "arch: sm_90a, c_layout: col, tile: 64x16x128, consumers: 1, stages: 8, swizzle: 128B, copy: tma, mma: wgmma",
            role: "M of 16 or less (decode), swapped: the weights' N on the tile's 64 rows, the tokens on its 16 columns; two blocks an SM",
            fuses: true,
        },
        SetMember {
            name: "swap128x16_p",
            body: "arch: sm_90a, c_layout: col, tile: 128x16x128, consumers: 2, stages: 8, swizzle: 128B, copy: tma, mma: wgmma, schedule: persistent(raster = m, group = 8)",
            role: "M of 16 or less over tens of thousands of columns, swapped: 128 of them a tile, one resident walk",
            fuses: true,
        },
    ],
};

/// The Hopper set for fp8 inputs with block scales (`quant: block`: A's per row and 128 k, B's
/// per 128x128 block, applied as each k tile's partial sums are promoted): the tiles whose
/// registers hold the promoted sums beside the accumulators. The 128x256 and ping-pong tiles
/// of [`SM90_FP8`] would need 292 registers a thread. Layout `rc`, as [`SM90_FP8`]; its
/// members are built with the caller's `quant` (`Matmul::new_fused` with `Quant::Block`
/// picks this set).
pub const SM90_FP8_BLOCK: KernelSet = KernelSet {
    name: "sm90_fp8_block",
    about: "e4m3/e5m2 on Hopper (sm_90a) with block scales, layout rc: 128x128 persistent, stream-K and cluster tiles, 64-row tiles for small M (64x128 with and without a stream-K tail), a 16-column tile for N <= 16",
    dtypes: &[DType::E4m3, DType::E5m2],
    runs_on: RunsOn::Exactly(90),
    members: &[
        SetMember {
            name: "w128x128",
            body: "arch: sm_90a, tile: 128x128x128, consumers: 2, stages: 5, swizzle: 128B, copy: tma, mma: wgmma, schedule: persistent(raster = m, group = 8)",
            role: "large problems whose tiles fill whole rounds",
            fuses: true,
        },
        SetMember {
            name: "w128x128_sk",
            body: "arch: sm_90a, tile: 128x128x128, consumers: 2, stages: 5, swizzle: 128B, copy: tma, mma: wgmma, schedule: persistent(raster = m, group = 8, tail = stream_k)",
            role: "large problems with a small last round",
            fuses: true,
        },
        SetMember {
            name: "w128x128_c2x1",
            body: "arch: sm_90a, tile: 128x128x128, consumers: 2, stages: 5, swizzle: 128B, copy: tma(multicast = 2), mma: wgmma, schedule: persistent(raster = m, group = 8), cluster: 2x1",
            role: "large problems, B loaded once per two tiles down M",
            fuses: true,
        },
        FP8_W64X128_SK,
        FP8_W64X128,
        FP8_W128X16,
    ],
};

/// The f32 SIMT set (runs on every board from sm_80).
pub const SM80_F32: KernelSet = KernelSet {
    name: "f32",
    about: "f32 SIMT (FFMA) from Ampere on, cp.async rings, and 4-byte copies for lines and addresses that are not 16-byte aligned",
    dtypes: &[DType::F32],
    runs_on: RunsOn::From(80),
    members: &[
        SetMember {
            name: "s128x128",
            body: "arch: sm_80, tile: 128x128x16, warps: 4x2, stages: 3, copy: cp_async, mma: fma",
            role: "large problems",
            fuses: true,
        },
        SetMember {
            name: "s64x128",
            body: "arch: sm_80, tile: 64x128x32, warps: 2x2, stages: 3, copy: cp_async, mma: fma",
            role: "medium problems",
            fuses: true,
        },
        SetMember {
            name: "s64x64",
            body: "arch: sm_80, tile: 64x64x16, warps: 2x1, stages: 4, copy: cp_async, mma: fma",
            role: "small problems",
            fuses: true,
        },
        SetMember {
            name: "s128x128_cp4",
            body: "arch: sm_80, tile: 128x128x16, warps: 4x2, stages: 3, copy: cp_async(ca, vector = 4), mma: fma",
            role: "any line and any element-aligned address (a leading dimension that is no multiple of 4, a view that starts inside a vector): 4-byte cp.async, picked only where no 16-byte member computes the problem",
            fuses: true,
        },
        SetMember {
            name: "s64x64_cp4",
            body: "arch: sm_80, tile: 64x64x16, warps: 2x2, stages: 4, copy: cp_async(ca, vector = 4), mma: fma",
            role: "s128x128_cp4's problems when they are small",
            fuses: true,
        },
    ],
};

/// Every set.
pub const SETS: &[KernelSet] = &[SM90_16BIT, SM90_FP8, SM90_FP8_BLOCK, SM80_16BIT, SM80_F32];

/// A set by name.
pub fn find(name: &str) -> Option<&'static KernelSet> {
    SETS.iter().find(|set| set.name == name)
}

/// The set for a device of compute capability `cc` and inputs of `dtype`: the Hopper set on
/// exactly 9.0 for 16-bit and fp8 inputs, else the first set whose members run there.
pub fn for_device(cc: u32, dtype: DType) -> Option<&'static KernelSet> {
    SETS.iter()
        .find(|set| set.dtypes.contains(&dtype) && set.runs_on.admits(cc))
}

/// [`for_device`] for kernels that take fp8 scales `quant`: the block-scaled set for
/// `quant: block` (the plain fp8 set's larger tiles cannot hold its promoted sums).
pub fn for_device_with(cc: u32, dtype: DType, quant: crate::Quant) -> Option<&'static KernelSet> {
    if quant == crate::Quant::Block && dtype.is_fp8() && SM90_FP8_BLOCK.runs_on.admits(cc) {
        return Some(&SM90_FP8_BLOCK);
    }
    for_device(cc, dtype)
}

/// The four layouts, in the order sets instantiate them.
pub const LAYOUTS: [Layout; 4] = [
    Layout::RowRow,
    Layout::RowCol,
    Layout::ColRow,
    Layout::ColCol,
];

impl KernelSet {
    /// Why this set cannot serve inputs of `dtype` on a device of compute capability `cc`, if
    /// it cannot: its members take other element types, or do not run there.
    pub fn refuses(&self, cc: u32, dtype: DType) -> Option<String> {
        if !self.dtypes.contains(&dtype) {
            let names: Vec<&str> = self.dtypes.iter().map(|d| d.name()).collect();
            return Some(format!(
                "set `{}` takes {} inputs, not {}",
                self.name,
                names.join(" or "),
                dtype.name()
            ));
        }
        if !self.runs_on.admits(cc) {
            return Some(format!(
                "set `{}` runs on {}, not on {}",
                self.name,
                self.runs_on,
                Capability(cc)
            ));
        }
        None
    }

    /// The full spec text of one member for inputs `dtype`, output `out` and `layout`.
    pub fn spec(&self, member: &SetMember, dtype: DType, out: DType, layout: Layout) -> String {
        let types = if out == dtype {
            dtype.name().to_string()
        } else {
            format!("{}{}", dtype.name(), out.name())
        };
        format!(
            "name: {}_{}_{}_{}, dtype: {}, out: {}, layout: {}, {}",
            self.name,
            member.name,
            types,
            layout.name(),
            dtype.name(),
            out.name(),
            layout.name(),
            member.body
        )
    }

    /// The layouts a set's members take for inputs `dtype`: every one, or `rc` alone for fp8
    /// (whose wgmma reads both operands K-major).
    pub fn layouts(dtype: DType) -> &'static [Layout] {
        if dtype.is_fp8() {
            &[Layout::RowCol]
        } else {
            &LAYOUTS
        }
    }

    /// Why a set's members take fewer than every layout for inputs `dtype`, where they do.
    pub fn layouts_reason(dtype: DType) -> Option<&'static str> {
        dtype
            .is_fp8()
            .then_some("the fp8 wgmma reads A and B K-major")
    }

    /// Every member's spec in every layout it takes, for one pair of element types: what a
    /// picker over this set chooses among.
    pub fn specs(&self, dtype: DType, out: DType) -> Vec<String> {
        self.specs_of(dtype, out, |_| true)
    }

    /// [`KernelSet::specs`] of the members that take a fused epilogue ([`SetMember::fuses`]).
    pub fn fused_specs(&self, dtype: DType, out: DType) -> Vec<String> {
        self.specs_of(dtype, out, |member| member.fuses)
    }

    fn specs_of(&self, dtype: DType, out: DType, keep: fn(&SetMember) -> bool) -> Vec<String> {
        KernelSet::layouts(dtype)
            .iter()
            .flat_map(|&layout| {
                self.members
                    .iter()
                    .filter(move |member| keep(member))
                    .map(move |member| self.spec(member, dtype, out, layout))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_device_and_input_type_gets_its_set() {
        let set = |cc, dtype| for_device(cc, dtype).map(|set| set.name);
        // Hopper: the sm_90a sets for 16-bit and fp8 inputs; f32 from the SIMT set.
        assert_eq!(set(90, DType::Bf16), Some("sm90"));
        assert_eq!(set(90, DType::F16), Some("sm90"));
        assert_eq!(set(90, DType::E4m3), Some("sm90_fp8"));
        assert_eq!(set(90, DType::E5m2), Some("sm90_fp8"));
        assert_eq!(set(90, DType::F32), Some("f32"));
        // Ampere and Ada: mma.sync; no fp8 set; Blackwell (10.0) runs no sm_90a code.
        for cc in [80, 86, 89, 100] {
            assert_eq!(set(cc, DType::Bf16), Some("sm80"), "{cc}");
            assert_eq!(set(cc, DType::F32), Some("f32"), "{cc}");
            assert_eq!(set(cc, DType::E4m3), None, "{cc}");
        }
        // Before Ampere: nothing.
        assert_eq!(set(75, DType::F16), None);
        assert_eq!(set(75, DType::F32), None);
        // tf32 inputs have no set.
        assert_eq!(set(90, DType::Tf32), None);
        // Block scales take the block-scaled fp8 set; other scales and types the device's.
        use crate::Quant;
        let with = |cc, dtype, quant| for_device_with(cc, dtype, quant).map(|set| set.name);
        assert_eq!(with(90, DType::E4m3, Quant::Block), Some("sm90_fp8_block"));
        assert_eq!(with(90, DType::E5m2, Quant::Block), Some("sm90_fp8_block"));
        assert_eq!(with(90, DType::E4m3, Quant::Tensor), Some("sm90_fp8"));
        assert_eq!(with(90, DType::Bf16, Quant::None), Some("sm90"));
        assert_eq!(with(89, DType::E4m3, Quant::Block), None);
    }

    #[test]
    fn runs_on_admits_its_capability_or_newer() {
        assert!(RunsOn::Exactly(90).admits(90));
        assert!(!RunsOn::Exactly(90).admits(89));
        assert!(!RunsOn::Exactly(90).admits(100));
        assert!(RunsOn::From(80).admits(80));
        assert!(RunsOn::From(80).admits(120));
        assert!(!RunsOn::From(80).admits(75));
        assert_eq!(
            RunsOn::Exactly(90).to_string(),
            "compute capability 9.0 only"
        );
    }

    #[test]
    fn a_member_spec_names_its_set_types_and_layout() {
        let member = &SM90_16BIT.members[0];
        assert_eq!(
            SM90_16BIT.spec(member, DType::Bf16, DType::Bf16, Layout::RowRow),
            format!(
                "name: sm90_w128x256_bf16_rr, dtype: bf16, out: bf16, layout: rr, {}",
                member.body
            )
        );
        assert_eq!(
            SM90_FP8.spec(
                &SM90_FP8.members[1],
                DType::E4m3,
                DType::Bf16,
                Layout::RowCol
            ),
            format!(
                "name: sm90_fp8_w128x128_pp_e4m3bf16_rc, dtype: e4m3, out: bf16, layout: rc, {}",
                SM90_FP8.members[1].body
            )
        );
        // Every member of every set in every layout it takes, once, in member order per layout.
        for set in SETS {
            let dtype = set.dtypes[0];
            let specs = set.specs(dtype, dtype);
            let layouts = KernelSet::layouts(dtype);
            assert_eq!(
                specs.len(),
                set.members.len() * layouts.len(),
                "{}",
                set.name
            );
            for (layout, specs) in layouts.iter().zip(specs.chunks(set.members.len())) {
                for (member, spec) in set.members.iter().zip(specs) {
                    assert_eq!(*spec, set.spec(member, dtype, dtype, *layout));
                }
            }
            let mut names: Vec<&str> = set.members.iter().map(|m| m.name).collect();
            names.sort_unstable();
            names.dedup();
            assert_eq!(names.len(), set.members.len(), "{}: unique names", set.name);
            assert_eq!(find(set.name), Some(set));
        }
        assert_eq!(find("sm70"), None);
    }

    #[test]
    fn fp8_sets_take_layout_rc_only() {
        assert_eq!(KernelSet::layouts(DType::E4m3), &[Layout::RowCol]);
        assert_eq!(KernelSet::layouts(DType::E5m2), &[Layout::RowCol]);
        assert_eq!(KernelSet::layouts(DType::Bf16), &LAYOUTS);
        assert_eq!(
            KernelSet::layouts_reason(DType::E4m3),
            Some("the fp8 wgmma reads A and B K-major")
        );
        assert_eq!(KernelSet::layouts_reason(DType::F32), None);
    }

    #[test]
    fn fused_specs_are_the_members_that_fuse() {
        // The sm90 set's 128x192 ping-pong tile would spill with an epilogue; every other
        // member of every set fuses.
        let not_fusing: Vec<(&str, &str)> = SETS
            .iter()
            .flat_map(|set| {
                set.members
                    .iter()
                    .filter(|m| !m.fuses)
                    .map(move |m| (set.name, m.name))
            })
            .collect();
        assert_eq!(not_fusing, [("sm90", "w128x192_pp")]);
        let fused = SM90_16BIT.fused_specs(DType::Bf16, DType::Bf16);
        let all = SM90_16BIT.specs(DType::Bf16, DType::Bf16);
        assert_eq!(fused.len(), all.len() - LAYOUTS.len());
        assert!(fused.iter().all(|spec| all.contains(spec)));
        assert!(fused.iter().all(|spec| !spec.contains("sm90_w128x192_pp_")));
        assert_eq!(
            SM90_FP8.fused_specs(DType::E4m3, DType::Bf16),
            SM90_FP8.specs(DType::E4m3, DType::Bf16)
        );
    }

    #[test]
    fn a_set_refuses_devices_its_members_do_not_run_on_and_types_they_do_not_take() {
        assert_eq!(
            SM90_16BIT.refuses(80, DType::Bf16).as_deref(),
            Some("set `sm90` runs on compute capability 9.0 only, not on 8.0")
        );
        assert_eq!(
            SM80_F32.refuses(86, DType::Bf16).as_deref(),
            Some("set `f32` takes f32 inputs, not bf16")
        );
        assert_eq!(SM80_16BIT.refuses(90, DType::F16), None);
        assert_eq!(
            SM80_16BIT.runs_on.to_string(),
            "compute capability 8.0 and newer"
        );
        // The set a device gets is one it does not refuse.
        for cc in [80, 86, 89, 90] {
            for dtype in [DType::Bf16, DType::F16, DType::F32, DType::E4m3] {
                if let Some(set) = for_device(cc, dtype) {
                    assert_eq!(set.refuses(cc, dtype), None, "{} {cc}", set.name);
                }
            }
        }
    }
}
