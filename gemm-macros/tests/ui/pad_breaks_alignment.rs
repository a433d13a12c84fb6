gemm_macros::gemm! {
    name: k,
    arch: sm_80,
    swizzle: pad(4),
}

fn main() {}
