gemm_macros::gemm! {
    name: k,
    arch: sm_80,
    tile: 128x128x6,
}

fn main() {}
