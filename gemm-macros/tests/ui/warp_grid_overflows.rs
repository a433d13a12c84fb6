gemm_macros::gemm! {
    name: k,
    arch: sm_80,
    warps: 65536x65536,
}

fn main() {}
