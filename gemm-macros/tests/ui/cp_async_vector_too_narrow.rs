gemm_macros::gemm! {
    name: k,
    arch: sm_80,
    dtype: bf16,
    mma: mma_sync,
    tile: 64x64x32,
    copy: cp_async(ca, vector = 2),
}

fn main() {}
