gemm_macros::gemm! {
    name: k,
    stages: 2,
    stages: 3,
}

fn main() {}
