gemm_macros::gemm! {
    name: k,
    arch: sm_90a,
    mma: wgmma,
    layout: rc,
}

fn main() {}
