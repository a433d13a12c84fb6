gemm_macros::gemm! {
    name: k,
    arch: sm_90a,
    dtype: bf16,
    mma: wgmma,
    copy: tma(vector = 4),
}

fn main() {}
