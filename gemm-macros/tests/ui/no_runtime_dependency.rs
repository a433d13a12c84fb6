// A valid spec in a crate whose Cargo.toml lists no runtime: the expansion could name none of
// its types, so the macro says which dependency is missing.
gemm_macros::gemm! { name: k, arch: sm_80 }

fn main() {}
