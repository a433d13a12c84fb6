gemm_macros::gemm! {
    name: k,
    arch: sm_75,
}

fn main() {}
