// Safe code cannot write a kernel description out field by field: PTX and launch shape
// would be free to disagree.
fn main() {
    let emitted = gemm_codegen::emit_str("name: k, arch: sm_80").unwrap();
    let _info = gemm_codegen::KernelInfo {
        name: "k",
        ptx: "// another kernel",
        spec: "name: k",
        launch: *emitted.launch(),
        params: gemm_codegen::GEMM_PARAMS,
        expected_sass: &[],
    };
}
