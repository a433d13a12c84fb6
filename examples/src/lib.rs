//! A user crate of gemm-dsl: kernels are declared with `gemm!` exactly as any crate would,
//! and compiled to PTX while this crate builds, with no CUDA toolkit installed.

// The expansion's one `unsafe` (putting the kernel description together) is allowed where it
// is written, so crates that deny unsafe code can still use the macro.
#![deny(unsafe_code)]

// The README's examples compile as this crate's doc tests (they need a GPU to run), so the
// guide cannot drift from the API.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct ReadmeExamples;

gemm_runtime::gemm! {
    name: sgemm_cp_async,
    arch: sm_80,
    dtype: f32,
    tile: 128x128x8,
    warps: 4x2,
    stages: 2,
    copy: cp_async,
    mma: fma,
}

gemm_runtime::gemm! {
    name: sgemm_sync,
    arch: sm_80,
    tile: 128x128x8,
    stages: 2,
    copy: sync,
}

// Every key but the name left to its default: a 128x128x8 cp.async SIMT kernel for sm_80.
gemm_runtime::gemm! { name: sgemm_defaults }

// Tensor cores with a persistent grid: one block per resident slot walks the output tiles in
// raster bands 8 tiles wide.
gemm_runtime::gemm! {
    name: bf16_persistent,
    arch: sm_80,
    dtype: bf16,
    tile: 128x128x32,
    stages: 3,
    mma: mma_sync,
    schedule: persistent(raster = m, group = 8),
}

// Hopper for decode shapes (a few rows, long K): a persistent walk with a stream-K tail, so
// that 32 output tiles still keep every SM busy, each block summing a share of K.
gemm_runtime::gemm! {
    name: bf16_decode_stream_k,
    arch: sm_90a,
    dtype: bf16,
    tile: 64x128x64,
    consumers: 1,
    stages: 6,
    copy: tma,
    mma: wgmma,
    schedule: persistent(tail = stream_k),
}

// fp8 on Hopper: e4m3 operands (A row-major, B column-major: the fp8 wgmma reads both along
// K), one f32 dequantization scale each in device memory, bf16 out.
gemm_runtime::gemm! {
    name: fp8_linear,
    arch: sm_90a,
    mma: wgmma,
    dtype: e4m3,
    tile: 128x256x128,
    stages: 4,
    schedule: persistent,
    quant: tensor,
}

// A mixed fp8 pair, as in a backward pass: e5m2 gradients (the wider range) times e4m3
// weights. The launcher takes `&CudaSlice<E5m2>` for A and `&CudaSlice<E4m3>` for B.
gemm_runtime::gemm! {
    name: fp8_dgrad,
    arch: sm_90a,
    mma: wgmma,
    dtype: e5m2,
    b_dtype: e4m3,
    tile: 128x128x128,
    consumers: pingpong,
    stages: 6,
    schedule: persistent,
    quant: tensor,
}

// Grouped GEMM for a mixture-of-experts layer: every expert's rows of A (one expert's after
// another's, their ends an int32 prefix sum on the device) times the expert's own weight of
// `[G, N, K]`, in one launch: `kernel.launch_grouped(&stream, &a, &w, &mut d, &offsets, dims,
// lds)`.
gemm_runtime::gemm! {
    name: moe_experts,
    arch: sm_90a,
    dtype: bf16,
    layout: rc,
    tile: 128x256x64,
    stages: 3,
    mma: wgmma,
    epilogue: tma,
    groups: contiguous,
}

// A kernel set for the entry point that picks (`Matmul::from_kernels(&ctx, llm::KERNELS)`):
// large tiles for prefill, 64-row tiles with and without split-K for decode.
gemm_runtime::gemm_set! {
    name: llm,
    { name: llm_prefill, arch: sm_90a, dtype: bf16, tile: 128x256x64, consumers: 2, stages: 4,
      copy: tma, mma: wgmma, schedule: persistent(raster = m, group = 8) },
    { name: llm_decode, arch: sm_90a, dtype: bf16, tile: 64x64x128, consumers: 1, stages: 6,
      copy: tma, mma: wgmma },
    { name: llm_decode_split, arch: sm_90a, dtype: bf16, tile: 64x128x64, consumers: 1,
      stages: 6, copy: tma, mma: wgmma, schedule: persistent(tail = stream_k) },
}

#[cfg(test)]
mod tests {
    use super::*;
    use gemm_runtime::{Opcode, SassCheck};

    #[test]
    fn fp8_kernels_take_fp8_operands_and_their_scales() {
        assert!(fp8_linear::PTX.contains("wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e4m3"));
        let names: Vec<&str> = fp8_linear::PARAMS.iter().map(|p| p.name).collect();
        assert!(names.ends_with(&["a_scale", "b_scale"]), "{names:?}");
        assert!(fp8_linear::SPEC.contains("layout: rc"));
        assert!(fp8_linear::EXPECTED_SASS
            .contains(&SassCheck::PresentVariant("QGMMA.64x256x32.F32.E4M3.E4M3")));
        let _: fn() -> (fp8_linear::Input, fp8_linear::Output) = || {
            (
                gemm_runtime::fp8::E4m3::ZERO,
                gemm_runtime::half::bf16::ZERO,
            )
        };
    }

    #[test]
    fn a_grouped_kernel_takes_the_experts_row_table() {
        let names: Vec<&str> = moe_experts::PARAMS.iter().map(|p| p.name).collect();
        assert!(names.ends_with(&["group_rows", "groups"]), "{names:?}");
        assert_eq!(moe_experts::INFO.groups(), gemm_runtime::Groups::Contiguous);
        assert!(moe_experts::SPEC.contains("schedule: persistent"));
        assert!(moe_experts::PTX.contains("$L_consumer_group_search:"));
        assert!(moe_experts::EXPECTED_SASS.contains(&SassCheck::Present(Opcode::Utmastg)));
    }

    #[test]
    fn a_mixed_fp8_pair_types_each_operand() {
        assert!(fp8_dgrad::PTX.contains("wgmma.mma_async.sync.aligned.m64n128k32.f32.e5m2.e4m3"));
        assert!(fp8_dgrad::EXPECTED_SASS
            .contains(&SassCheck::PresentVariant("QGMMA.64x128x32.F32.E5M2.E4M3")));
        let _: fn() -> (fp8_dgrad::Input, fp8_dgrad::InputB) =
            || (gemm_runtime::fp8::E5m2::ZERO, gemm_runtime::fp8::E4m3::ZERO);
    }

    #[test]
    fn the_macro_bakes_the_kernel_into_the_crate() {
        assert!(sgemm_cp_async::PTX.contains(".visible .entry sgemm_cp_async("));
        assert!(sgemm_cp_async::PTX.contains("cp.async.cg.shared.global"));
        assert_eq!(sgemm_cp_async::KERNEL, "sgemm_cp_async");
        assert_eq!(sgemm_cp_async::THREADS, 256);
        assert_eq!(sgemm_cp_async::SMEM_BYTES, 2 * (128 * 8 + 8 * 128) * 4);
        assert_eq!(sgemm_cp_async::grid(4096, 2048, 512, 132), (16, 32, 1));
        // 32 x 16 tiles on a device holding 132 blocks at once: 4 rounds, spread evenly over
        // 128 blocks; or 4 x 4 tiles, one block each.
        assert_eq!(bf16_persistent::grid(4096, 2048, 512, 132), (128, 1, 1));
        assert_eq!(bf16_persistent::grid(512, 512, 512, 132), (16, 1, 1));
        assert!(bf16_persistent::PTX.contains("$L_tile:"));
        assert!(sgemm_cp_async::EXPECTED_SASS.contains(&SassCheck::Present(Opcode::Ldgsts)));
        assert!(sgemm_sync::EXPECTED_SASS.contains(&SassCheck::Absent(Opcode::Ldgsts)));
        assert_eq!(*sgemm_sync::INFO.launch(), sgemm_sync::LAUNCH);
        assert_eq!(sgemm_sync::INFO.ptx(), sgemm_sync::PTX);
        assert!(sgemm_defaults::SPEC.contains("copy: cp_async(cg)"));
    }

    #[test]
    fn a_strided_batch_runs_along_z_or_through_the_tile_walk() {
        // Eight products of 1000 x 1023 x 999: z runs over them, or the persistent grid walks
        // all 8 x 64 of their tiles: 4 rounds of the device's 132 resident blocks, on 128.
        assert_eq!(
            sgemm_cp_async::grid_batched(1000, 1023, 999, 8, 132),
            (8, 8, 8)
        );
        assert_eq!(
            bf16_persistent::grid_batched(1000, 1023, 999, 8, 132),
            (128, 1, 1)
        );
        assert_eq!(
            bf16_persistent::grid_batched(256, 256, 64, 3, 132),
            (12, 1, 1)
        );
        // Matrices back to back, rows padded to 16 bytes.
        let lds = gemm_runtime::LeadingDims {
            lda: 1000,
            ldb: 1024,
            ldc: 1024,
        };
        let batch = gemm_runtime::Batch::packed(&sgemm_cp_async::LAUNCH, 8, (1000, 1023, 999), lds);
        assert_eq!(
            (batch.stride_a, batch.stride_b, batch.stride_c),
            (1000 * 1000, 999 * 1024, 1000 * 1024)
        );
        assert!(sgemm_cp_async::PARAMS
            .iter()
            .any(|param| param.kind
                == gemm_runtime::ParamKind::BatchStride(gemm_runtime::Operand::C)));
    }

    #[test]
    fn a_stream_k_kernel_fills_the_device_and_takes_a_workspace() {
        // 16 x 4096 x 14336: 32 tiles of 224 k tiles each, shared by all 132 blocks; one tile
        // of 3 k tiles, by 3.
        assert_eq!(
            bf16_decode_stream_k::grid(16, 4096, 14336, 132),
            (132, 1, 1)
        );
        assert_eq!(bf16_decode_stream_k::grid(16, 100, 150, 132), (3, 1, 1));
        // Per block: 64 x 128 f32 partial sums and a 16-byte flag record.
        assert_eq!(
            bf16_decode_stream_k::LAUNCH.workspace_bytes_per_block,
            64 * 128 * 4 + 16
        );
        assert!(bf16_decode_stream_k::PARAMS
            .iter()
            .any(|param| param.kind == gemm_runtime::ParamKind::Workspace));
        assert!(bf16_decode_stream_k::SPEC.contains("tail = stream_k"));
    }

    #[test]
    fn launch_geometry_takes_any_positive_dims() {
        sgemm_cp_async::LAUNCH.check_dims(1000, 1023, 999).unwrap();
        assert_eq!(sgemm_cp_async::grid(1000, 1023, 999, 132), (8, 8, 1));
        let error = sgemm_cp_async::LAUNCH
            .check_dims(0, 1024, 1024)
            .unwrap_err();
        assert!(error.contains("M = 0"), "{error}");
    }

    #[test]
    fn a_kernel_set_lists_its_kernels_for_the_picker() {
        let names: Vec<&str> = llm::KERNELS.iter().map(|info| info.name()).collect();
        assert_eq!(names, ["llm_prefill", "llm_decode", "llm_decode_split"]);
        assert_eq!(llm::llm_decode::LAUNCH.tile_m, 64);
        // Each entry is its module's own description.
        assert_eq!(llm::KERNELS[2].spec(), llm::llm_decode_split::SPEC);
        assert!(llm::KERNELS[2].launch().workspace_bytes_per_block > 0);
    }
}
