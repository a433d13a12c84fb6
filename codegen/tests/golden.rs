//! Golden files: the PTX of every catalog spec, two math-only probes and three `explain`
//! outputs. A changed snapshot is a changed kernel: review the PTX diff like code
//! (`cargo insta review`).

use gemm_codegen::catalog::{CATALOG, DEFAULT_SPEC};
use gemm_codegen::explain::explain;

#[test]
fn catalog_ptx() {
    for entry in CATALOG {
        let emitted = gemm_codegen::emit_str(entry.spec).expect("catalog specs are valid");
        insta::assert_snapshot!(entry.name, emitted.ptx());
    }
}

#[test]
fn default_spec_ptx() {
    let emitted = gemm_codegen::emit_str(DEFAULT_SPEC).unwrap();
    insta::assert_snapshot!("default_spec", emitted.ptx());
}

/// The math-only probes of one kernel per family: the kernel's own math blocks in a loop.
#[test]
fn math_only_ptx() {
    for name in ["mma_bf16_128x256x64_s3_h100", "simt_64x64x16_cp4_h100"] {
        let entry = gemm_codegen::catalog::find(name).unwrap();
        let valid = gemm_dsl::check_str(entry.spec).unwrap();
        insta::assert_snapshot!(
            format!("math_only_{name}"),
            gemm_codegen::emit_math_only(&valid).ptx()
        );
    }
}

/// The Hopper family in the layouts with a column-major operand: transposed boxes, their
/// coordinates and the wgmma transpose flags. A 320-column tile of a K-major B: its rows in
/// two boxes, each row of 64 in two wgmmas of 160.
#[test]
fn hopper_layouts_ptx() {
    for layout in ["rc", "cr", "cc"] {
        let spec = format!("name: wgmma_layout_{layout}, arch: sm_90a, mma: wgmma, layout: {layout}, schedule: persistent");
        let emitted = gemm_codegen::emit_str(&spec).unwrap();
        insta::assert_snapshot!(format!("wgmma_layout_{layout}"), emitted.ptx());
    }
    let wide = "name: wgmma_layout_rc_128x320, arch: sm_90a, mma: wgmma, layout: rc, tile: 128x320x64, stages: 3, schedule: persistent";
    let emitted = gemm_codegen::emit_str(wide).unwrap();
    insta::assert_snapshot!("wgmma_layout_rc_128x320", emitted.ptx());
}

/// The SIMT and mma.sync families in the layouts with a column-major operand: which lines
/// the copies run along, the bounded copies' dimensions, column quarters of a SIMT B, and the
/// ldmatrix form (with or without `.trans`) of each mma.sync operand.
#[test]
fn simt_and_mma_sync_layouts_ptx() {
    for layout in ["rc", "cr", "cc"] {
        for (family, body) in [
            ("simt", "arch: sm_80, mma: fma, tile: 128x128x8, stages: 2"),
            (
                "mma_sync",
                "arch: sm_80, mma: mma_sync, tile: 128x128x32, stages: 3",
            ),
        ] {
            let name = format!("{family}_layout_{layout}");
            let spec = format!("name: {name}, {body}, layout: {layout}");
            let emitted = gemm_codegen::emit_str(&spec).unwrap();
            insta::assert_snapshot!(name, emitted.ptx());
        }
    }
}

/// Copy vectors narrower than 16 bytes: the copies' width and count, their destinations
/// inside swizzled or padded chunks and column quarters, the bounded copies' sizes.
#[test]
fn narrow_vector_ptx() {
    for entry in gemm_codegen::catalog::NARROW {
        let emitted = gemm_codegen::emit_str(entry.spec).unwrap();
        insta::assert_snapshot!(entry.name, emitted.ptx());
    }
}

/// fp8 kernels: k32 wgmmas without transpose operands, uint8 tensor-map boxes of 128 K, the
/// scales' loads and multiply in the fused epilogue.
#[test]
fn fp8_ptx() {
    for entry in gemm_codegen::catalog::FP8 {
        let emitted = gemm_codegen::emit_str(entry.spec).unwrap();
        insta::assert_snapshot!(entry.name, emitted.ptx());
    }
    // A mixed pair (`b_dtype`): the catalog's ping-pong kernel with e5m2 A and e4m3 B.
    let pingpong = gemm_codegen::catalog::find("wgmma_e4m3_128x128x128_s6_pingpong").unwrap();
    let mixed = pingpong
        .spec
        .replace(pingpong.name, "fp8_e5m2_e4m3_pingpong")
        .replace("dtype: e4m3", "dtype: e5m2, b_dtype: e4m3");
    let emitted = gemm_codegen::emit_str(&mixed).unwrap();
    insta::assert_snapshot!("fp8_e5m2_e4m3_pingpong", emitted.ptx());
}

/// Fused epilogues, one kernel per family, each storing its pre-activation too (aux): the
/// Hopper flagship with α, β·C-in (loaded by TMA into the store buffers and read back with
/// `ldmatrix`), a column bias and GELU; mma.sync with α, β·C-in, a row bias and SiLU; SIMT
/// with α, a column bias and ReLU.
#[test]
fn fused_epilogue_ptx() {
    for (name, keys) in [
        (
            "wgmma_bf16_128x256x64_s4_persistent",
            "scale: alpha_beta, bias: col, activation: gelu, aux: pre_activation",
        ),
        (
            "mma_bf16_128x128x32_s3",
            "scale: alpha_beta, bias: row, activation: silu, aux: pre_activation",
        ),
        (
            "simt_128x128x8_cp2",
            "scale: alpha, bias: col, activation: relu, aux: pre_activation",
        ),
    ] {
        let entry = gemm_codegen::catalog::find(name).unwrap();
        let fused = format!(
            "{}, {keys}",
            entry.spec.replace(name, &format!("fused_{name}"))
        );
        let emitted = gemm_codegen::emit_str(&fused).unwrap();
        insta::assert_snapshot!(format!("fused_{name}"), emitted.ptx());
    }
}

#[test]
fn emit_is_deterministic() {
    for entry in CATALOG {
        let first = gemm_codegen::emit_str(entry.spec).unwrap();
        let second = gemm_codegen::emit_str(entry.spec).unwrap();
        assert_eq!(first.ptx(), second.ptx(), "{}", entry.name);
    }
}

#[test]
fn explain_output() {
    for name in [
        "simt_128x128x16_cp3",
        "simt_128x128x8_sync2",
        "mma_bf16_128x128x32_s3",
    ] {
        let entry = gemm_codegen::catalog::find(name).unwrap();
        let valid = gemm_dsl::check_str(entry.spec).unwrap();
        // ptxas's line depends on the installed tools; the golden file covers the rest.
        let text = explain(&valid, Err("not run for golden files"));
        insta::assert_snapshot!(format!("explain_{name}"), text);
    }
}

/// Grouped GEMM for mixture-of-experts layers: the tables every block builds from the
/// experts' row table (a max-scan of the ends where the experts are contiguous; the counts
/// under each expert's capacity where masked), each tile's expert found in them, and (TMA
/// stores) the boxes past an expert's last row stored directly; with a stream-K tail, the
/// walk's last tiles split along K whichever experts they belong to; fp8 with block scales,
/// each tile's A scales copied from the 16-byte unit that holds its first row and its B
/// scales its expert's.
#[test]
fn grouped_ptx() {
    for (name, body) in [
        (
            "grouped_contiguous_rc",
            "layout: rc, tile: 128x256x64, stages: 3, epilogue: tma, groups: contiguous",
        ),
        (
            "grouped_masked_rr",
            "layout: rr, tile: 128x128x64, stages: 6, groups: masked",
        ),
        (
            "grouped_fp8_block_rc",
            "dtype: e4m3, out: bf16, layout: rc, tile: 128x128x128, stages: 5, epilogue: tma, quant: block, promote: 128, groups: contiguous",
        ),
        (
            "grouped_masked_stream_k_rr",
            "layout: rr, tile: 128x128x64, stages: 6, schedule: persistent(tail = stream_k), groups: masked",
        ),
        (
            "grouped_fused_rc",
            "layout: rc, tile: 128x128x64, stages: 5, epilogue: tma, groups: contiguous, bias: col, activation: silu, row_scale: f32",
        ),
    ] {
        let spec = format!("name: {name}, arch: sm_90a, mma: wgmma, {body}");
        let emitted = gemm_codegen::emit_str(&spec).unwrap();
        insta::assert_snapshot!(name, emitted.ptx());
    }
}
