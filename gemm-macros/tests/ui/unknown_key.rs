gemm_macros::gemm! {
    name: k,
    arch: sm_80,
    stagse: 2,
}

fn main() {}
