gemm_macros::gemm! {
    name: k,
    arch: sm_80,
    tile: 128x128x8,
    swizzle: 128B,
}

fn main() {}
