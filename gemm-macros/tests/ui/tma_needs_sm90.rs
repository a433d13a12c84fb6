gemm_macros::gemm! {
    name: k,
    arch: sm_80,
    copy: tma,
}

fn main() {}
