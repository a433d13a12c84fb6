gemm_macros::gemm! {
    name: k,
    arch: sm_90a,
    mma: wgmma,
    dtype: e4m3,
    layout: rr,
}

fn main() {}
