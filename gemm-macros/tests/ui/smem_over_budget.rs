gemm_macros::gemm! {
    name: k,
    arch: sm_80,
    tile: 128x128x32,
    stages: 6,
}

fn main() {}
