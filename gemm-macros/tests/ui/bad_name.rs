gemm_macros::gemm! {
    name: "my kernel",
    arch: sm_80,
}

fn main() {}
