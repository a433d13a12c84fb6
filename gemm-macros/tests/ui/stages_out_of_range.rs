gemm_macros::gemm! {
    name: k,
    arch: sm_80,
    stages: 9,
}

fn main() {}
