gemm_macros::gemm_set! {
    name: set,
    { name: fine, arch: sm_80 },
    { name: broken, arch: sm_75 },
}

fn main() {}
