gemm_macros::gemm! {
    name: k,
    arch: sm_80,
    dtype: f32,
    mma: mma_sync,
}

fn main() {}
