gemm_macros::gemm! {
    name: k,
    arch: sm_80,
    mma: mma_sync,
    epilogue: tma,
}

fn main() {}
