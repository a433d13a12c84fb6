//! The gemm-dsl tile-spec language.
//!
//! A spec is the body of `gemm! { .. }`: comma-separated `key: value` pairs. This crate parses
//! it (with syn's tokenizer, so the macro and the `gemm-codegen` CLI read specs identically),
//! checks every rule the hardware imposes, and computes the resource budgets. Below the code
//! generator and the runtime it also holds what both read about a kernel without writing it:
//! the kernel ABI ([`abi`]), the SASS a spec promises and its check against a disassembly
//! ([`sass`]), and the cost model that picks a kernel per problem ([`pick`]).
//!
//! | key | values | default |
//! |---|---|---|
//! | `name` | identifier (becomes the PTX kernel and Rust module name) | `gemm` |
//! | `arch` | `sm_80`, `sm_86`, `sm_89`, `sm_90`, `sm_90a` | `sm_80` |
//! | `dtype` | A/B element type: `f16`, `bf16`, `tf32`, `f32`; `e4m3`, `e5m2` (OCP fp8, `mma: wgmma` only: k32 per wgmma, QGMMA) | `f32` for `mma: fma`, else `bf16` |
//! | `b_dtype` | B's element type where it differs from A's: the fp8 pairs `e4m3` x `e5m2` and `e5m2` x `e4m3` | `dtype` |
//! | `acc` | accumulator type: `f32` (the only one implemented; `f16`, `bf16`, `tf32` parse and are refused) | `f32` |
//! | `out` | C type (fp8 inputs: `bf16`, `f16` or `f32`) | `dtype` (`f32` for `tf32`, `bf16` for fp8) |
//! | `layout` | `rr`, `rc`, `cr`, `cc` (A then B; `r` = row-major, `c` = column-major; C is row-major; every family; fp8 reads both K-major: `rc` only) | `rr` (`rc` for fp8) |
//! | `c_layout` | `row`, `col` (C column-major, element (i, j) at `j·ldc + i`: the swapped product `Cᵀ = Bᵀ·Aᵀ` written where a row-major C lies, so a decode problem's few rows take a tile's N side; wgmma with `epilogue: direct`, no `scale: alpha_beta`, `aux` or `groups`) | `row` |
//! | `tile` | `BMxBNxBK` | `128x128x8` (fma), `128x128x32` (mma_sync), `128x256x64` (wgmma; `128x256x128` for fp8: one 128-byte span of K; BN up to 512, in two wgmmas a row of 64 past 256) |
//! | `warps` | warp grid `ROWSxCOLS` | fma: `BM/32 x BN/64` (8x8 per thread); mma_sync: `2x2` |
//! | `consumers` | consumer warpgroups (wgmma only): `1`, `2` or `3`, which split BM (64 rows each at least: three take a 192-row tile); or `pingpong`: two that take alternate tiles of a persistent walk of whole tiles, each the whole block tile, and turns at the tensor cores (one stores its tile while the other multiplies) | `2` for wgmma, else `1` |
//! | `stages` | pipeline depth, 1 to 8 | `2` (fma), `3` (mma_sync), `4` (wgmma) |
//! | `swizzle` | `none`, `pad(BYTES)`, `32B`, `64B`, `128B` | `none` (fma); `128B` (mma_sync; `pad(16)` where rows don't fit an XOR); the widest XOR that divides a K row (wgmma; there an N-major B whose BN the span does not divide takes the widest narrower one that does, so `tile: 192x96x64` reads A through 128-byte rows and B through 64-byte ones) |
//! | `copy` | `sync`, `cp_async` (= `cp_async(cg)`), `cp_async(ca)`, `tma`, `tma(multicast = N)`; `sync(vector = N)` and `cp_async(ca, vector = N)` copy `N`-byte vectors (`sync`: 2, 4, 8 or 16 and at least one element; `cp_async`: 4, 8 or 16, `.ca` only below 16) so that A's and B's lines need only `N`-byte alignment (the TMA needs 16-byte strides and takes no `vector`) | `tma` for wgmma on sm_90+, else `cp_async`; vector 16 |
//! | `c_store` | `2`, `4`, `8`, `16`: the bytes of C's widest store (SIMT and mma.sync), so that C's rows need only that alignment while A and B copy wide (an odd N of a 16-bit C with `c_store: 2`) | as wide as the copy vector |
//! | `mma` | `fma`, `mma_sync`, `wgmma` | `fma` |
//! | `schedule` | `tile` (one output tile per block), `persistent` (= `persistent(raster = m, group = 8)`: one block per resident slot walking the tiles in bands of `group`, 1 to 64; `raster = n` walks bands along N instead; `tail = whole | stream_k` (`stream_k`: wgmma, splits the last round's tiles along K); see [`Schedule::tile_at`] and [`Schedule::band_order`]) | `tile` |
//! | `cluster` | `ROWSxCOLS` blocks (wgmma: `2x1`, two tiles down M sharing B, or `1x2`, two tiles along N sharing A, with `copy: tma(multicast = 2)`) | `1x1` |
//! | `epilogue` | `direct` (threads store C from registers), `tma` (wgmma, 16-bit C: `stmatrix` into swizzled shared-memory buffers, TMA stores that clip at the matrix edge) | `tma` for wgmma with f16/bf16 C, else `direct` |
//! | `scale` | the fused epilogue `D = act(α·A·B + β·C + bias)`: `none`, `alpha` (α, a launch argument), `alpha_beta` (α and β; C-in, laid out as C, is read before D is written and may be C itself) | `none` |
//! | `bias` | `none`, `row` (one value per row of D, length M), `col` (one per column, length N, broadcast down the rows); `row(f32)` / `col(f32)` for an f32 vector, else the output type; shared by a batch or strided through it | `none` |
//! | `activation` | applied last, on f32: `none`, `relu`, `gelu` (the tanh approximation), `gelu_erf` (the exact form), `silu` | `none` |
//! | `aux` | `none`, `pre_activation` (also store the values before the activation, in the output type, laid out as C: cuBLASLt's `GELU_AUX`; needs an activation) | `none` |
//! | `row_scale` | `none`, `f32`: a factor per row of D, applied last (`D = s[row]·act(…)`; `aux` holds the values before it): one f32 per row, M per product, product after product; grouped, one per row of A, the router's weight of each routed row | `none` |
//! | `quant` | fp8 operands' dequantization scales: `none`, `tensor` (one f32 each for A and B, device pointers read at launch as cuBLASLt's scale pointers: `D = act(α·s_A·s_B·A·B + β·C + bias)`), `block` (DeepSeek-V3's: A one f32 per row per 128 k, `ceil(K/128)` lines of M rounded up to 4, 16-byte aligned; B one per 128x128 block, `ceil(N/128)` lines of `ceil(K/128)`; applied as each k tile of 128 is promoted; BK = 128, one product per launch) | `none` |
//! | `promote` | fp8: the k between promotions of the tensor cores' partial sums (about 14 bits) into f32 registers, a multiple of BK: `none` or a count; doubles the accumulators' registers | `none` (`128` with `quant: block`) |
//! | `groups` | grouped GEMM for mixture-of-experts layers (wgmma, persistent; f16/bf16, or fp8 with `quant: block`): `none`, `contiguous` (A `[rows, K]` with each expert's rows after the last's, ends in an int32 prefix sum on the device, no padding), `masked` (A `[G, capacity, K]`, an int32 count per expert); B `[G, N, K]` (`rc`) or `[G, K, N]` (`rr`); the fused epilogue per expert (`bias: col` strided by the expert, `row_scale` over A's rows); see [`grouped`] | `none` (with groups: `schedule: persistent`, `epilogue: direct`) |
//!
//! ```
//! let valid = gemm_dsl::check_str("name: k, arch: sm_80, tile: 128x128x8, stages: 2").unwrap();
//! assert_eq!(valid.threads_per_block(), 256);
//! assert!(gemm_dsl::check_str("name: k, arch: sm_80, copy: tma").is_err());
//! ```

pub mod abi;
pub mod budget;
pub mod error;
pub mod family;
pub mod geometry;
pub mod grouped;
pub mod parse;
pub mod pick;
mod rules;
pub mod sass;
mod spans;
pub mod spec;
pub mod validate;

pub use budget::{Occupancy, RegisterBudget, SmemLedger};
pub use error::{SpecError, SpecErrors};
pub use parse::{parse_str, parse_tokens, ParsedSpec, SpecSpans};
pub use spec::*;
pub use validate::{check_str, validate, Family, ValidSpec, MAX_RASTER_GROUP, MAX_STAGES};
