// Putting edited parts together again is `unsafe`: the caller vouches that they agree.
fn main() {
    let emitted = gemm_codegen::emit_str("name: k, arch: sm_80").unwrap();
    let mut parts = emitted.info().parts();
    parts.launch.threads_per_block *= 2;
    let _info = gemm_codegen::KernelInfo::from_parts(parts);
}
