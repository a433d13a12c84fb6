gemm_macros::gemm! {
    name: k,
    arch: sm_80,
    copy: cp_async(cg, vector = 4),
}

fn main() {}
