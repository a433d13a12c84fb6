gemm_macros::gemm! {
    name: fn,
    arch: sm_80,
}

fn main() {}
