gemm_macros::gemm_set! {
    name: empty,
}

gemm_macros::gemm_set! {
    name: loose,
    name: k, arch: sm_80
}

fn main() {}
