gemm_macros::gemm! {
    name: k,
    arch: sm_90,
    dtype: bf16,
    mma: wgmma,
}

fn main() {}
