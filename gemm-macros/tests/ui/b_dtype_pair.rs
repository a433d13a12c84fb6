gemm_macros::gemm! {
    name: k,
    arch: sm_90a,
    mma: wgmma,
    dtype: bf16,
    b_dtype: f16,
}

fn main() {}
