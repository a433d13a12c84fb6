//! A user crate whose Cargo.toml names the runtime `gpu`: no crate called `gemm_runtime` is in
//! scope here, so this compiles only if the `gemm!` expansion finds the runtime under the
//! name the manifest gives it.

gpu::gemm! { name: renamed_sgemm, arch: sm_80, tile: 64x64x8 }

#[cfg(test)]
mod tests {
    #[test]
    fn the_expansion_resolves_through_the_renamed_dependency() {
        let info: &gpu::KernelInfo<'static> = &super::renamed_sgemm::INFO;
        assert_eq!(info.name(), "renamed_sgemm");
        assert_eq!(*info.launch(), super::renamed_sgemm::LAUNCH);
        assert_eq!(super::renamed_sgemm::LAUNCH.tile_m, 64);
        assert!(super::renamed_sgemm::PTX.contains(".visible .entry renamed_sgemm("));
        type Loaded = Result<gpu::GemmKernel<f32, f32>, gpu::Error>;
        let _load: fn(&std::sync::Arc<gpu::CudaContext>) -> Loaded = super::renamed_sgemm::load;
    }
}
