//! Grouped GEMM (`groups: contiguous | masked`) on the GPU: ragged experts (sizes 0, 1, a
//! tile ± 1, hundreds of experts) against a float64 reference, D poisoned first so that the
//! rows no expert owns must still hold the poison afterwards; row tables that decrease, go
//! negative or run past the buffer, clamped as `gemm_dsl::grouped::GroupRows` says; the host's
//! refusals; a CUDA-graph capture. The test that is not ignored checks, without a GPU, that
//! the specs here emit; run the rest with `--ignored` on a machine with an NVIDIA Hopper GPU.

use gemm_dsl::grouped::{GroupRows, SplitMix64};
use gemm_dsl::{Aux, DType, Layout, Quant, RowScale};
use gemm_harness::verify::{
    assert_refused_and_capture_goes_on, normal_values, Tolerance, BLOCK_SCALE_MAX,
};
use gemm_runtime::cudarc::driver::sys::{
    CUgraphInstantiate_flags, CUstreamCaptureMode, CUstreamCaptureStatus,
};
use gemm_runtime::fp8::E4m3;
use gemm_runtime::{
    begin_capture, open_context, Batch, BiasArg, CIn, CudaContext, CudaSlice, CudaStream, Element,
    Epilogue, Error, FusedSpec, GemmKernel, GroupedDims, GroupedMatmul, Groups, LeadingDims,
    Storage,
};
use half::bf16;
use std::sync::Arc;

/// The grouped kernels under test: both layouts of B, both grouped layouts, one and two
/// consumers, direct and TMA stores, and a 192-row tile (three consumers), whose tile-row
/// division is not a shift; with a stream-K tail, both layouts; ping-pong consumers, both
/// grouped layouts.
const SPECS: [&str; 9] = [
    "name: moe_rc, arch: sm_90a, mma: wgmma, layout: rc, tile: 128x256x64, stages: 4, groups: contiguous",
    "name: moe_rc_tma, arch: sm_90a, mma: wgmma, layout: rc, tile: 128x256x64, stages: 3, epilogue: tma, groups: contiguous",
    "name: moe_rr, arch: sm_90a, mma: wgmma, layout: rr, tile: 64x128x64, consumers: 1, stages: 6, groups: contiguous",
    "name: moe_masked, arch: sm_90a, mma: wgmma, layout: rc, tile: 128x128x64, stages: 5, groups: masked",
    "name: moe_192, arch: sm_90a, mma: wgmma, layout: rc, tile: 192x128x64, consumers: 3, stages: 4, groups: contiguous",
    "name: moe_sk, arch: sm_90a, mma: wgmma, layout: rr, tile: 128x256x64, stages: 3, epilogue: tma, schedule: persistent(tail = stream_k), groups: contiguous",
    "name: moe_sk_masked, arch: sm_90a, mma: wgmma, layout: rc, tile: 128x128x64, stages: 5, epilogue: tma, schedule: persistent(tail = stream_k), groups: masked",
    "name: moe_pp, arch: sm_90a, mma: wgmma, layout: rc, tile: 128x128x64, consumers: pingpong, stages: 5, epilogue: tma, groups: contiguous",
    "name: moe_pp_masked, arch: sm_90a, mma: wgmma, layout: rc, tile: 128x128x64, consumers: pingpong, stages: 6, groups: masked",
];

/// fp8 experts with block scales (`quant: block`): A's 1x128 scales over every row, each
/// expert's own 128x128 scales of B; contiguous whole tiles, and masked with a stream-K tail
/// and TMA stores.
const FP8_SPECS: [&str; 2] = [
    "name: moe_fp8, arch: sm_90a, mma: wgmma, dtype: e4m3, out: bf16, layout: rc, tile: 128x128x128, stages: 5, quant: block, promote: 128, groups: contiguous",
    "name: moe_fp8_masked_sk, arch: sm_90a, mma: wgmma, dtype: e4m3, out: bf16, layout: rc, tile: 128x128x128, stages: 4, epilogue: tma, schedule: persistent(tail = stream_k), quant: block, promote: 128, groups: masked",
];

/// The experts' fused epilogues: each expert's bias, the router's weight per row and an
/// activation (direct stores, 128x256); with C-in, GELU and the aux output under TMA stores
/// and a stream-K tail (C-in loaded by TMA, masked); α with an f32 bias in layout rr; ping-pong
/// consumers; fp8 with block scales.
const FUSED_SPECS: [&str; 5] = [
    "name: moe_fused_rc, arch: sm_90a, mma: wgmma, layout: rc, tile: 128x256x64, stages: 4, groups: contiguous, bias: col, row_scale: f32, activation: silu",
    "name: moe_fused_masked_sk, arch: sm_90a, mma: wgmma, layout: rc, tile: 128x128x64, stages: 5, epilogue: tma, schedule: persistent(tail = stream_k), groups: masked, scale: alpha_beta, bias: col(f32), activation: gelu, aux: pre_activation, row_scale: f32",
    "name: moe_fused_rr_sk, arch: sm_90a, mma: wgmma, layout: rr, tile: 128x256x64, stages: 3, epilogue: tma, schedule: persistent(tail = stream_k), groups: contiguous, scale: alpha, bias: col(f32), row_scale: f32",
    "name: moe_fused_pp, arch: sm_90a, mma: wgmma, layout: rc, tile: 128x128x64, consumers: pingpong, stages: 5, epilogue: tma, groups: contiguous, bias: col, row_scale: f32, activation: silu",
    "name: moe_fused_fp8, arch: sm_90a, mma: wgmma, dtype: e4m3, out: bf16, layout: rc, tile: 128x128x128, stages: 5, epilogue: tma, quant: block, promote: 128, groups: contiguous, bias: col, row_scale: f32, activation: silu",
];

fn gpu() -> (Arc<CudaContext>, Arc<CudaStream>) {
    let ctx = open_context(0).expect("these tests need a CUDA GPU");
    let stream = ctx.default_stream();
    (ctx, stream)
}

fn kernel<In: Element>(ctx: &Arc<CudaContext>, spec: &str) -> GemmKernel<In, bf16> {
    let emitted = gemm_codegen::emit_str(spec).unwrap_or_else(|e| panic!("{spec}: {e}"));
    GemmKernel::from_emitted(ctx, &emitted).unwrap_or_else(|e| panic!("{spec}: {e}"))
}

/// One grouped problem: the row table as the device gets it, and where B's layout puts K.
struct Case {
    what: String,
    layout: Layout,
    masked: bool,
    table: Vec<i32>,
    /// Rows of A and D (masked: experts x capacity).
    rows: u32,
    n: u32,
    k: u32,
}

impl Case {
    fn groups(&self) -> u32 {
        self.table.len() as u32
    }

    /// The rows each expert owns once the kernel has clamped the table.
    fn ranges(&self) -> GroupRows {
        if self.masked {
            GroupRows::masked(&self.table, self.rows / self.groups())
        } else {
            GroupRows::contiguous(&self.table, self.rows)
        }
    }

    fn lds(&self) -> LeadingDims {
        LeadingDims {
            lda: self.k,
            ldb: if self.layout == Layout::RowCol {
                self.k
            } else {
                self.n
            },
            ldc: self.n,
        }
    }

    fn dims(&self) -> GroupedDims {
        GroupedDims {
            groups: self.groups(),
            rows: self.rows,
            n: self.n,
            k: self.k,
        }
    }
}

/// Contiguous cases: ragged sizes around the tile, rows past the last expert, bad tables,
/// and more experts than a block has threads (so the kernel's table build loops).
fn contiguous_cases(layout: Layout, tile_m: u32) -> Vec<Case> {
    let sizes = [0, 1, tile_m - 1, tile_m, tile_m + 1, 0, 2 * tile_m + 5, 3];
    let mut cases = vec![];
    let offsets = GroupRows::offsets_of(&sizes);
    let last = *offsets.last().unwrap() as u32;
    cases.push(Case {
        what: format!("sizes {sizes:?} and 7 rows past the last expert"),
        layout,
        masked: false,
        table: offsets,
        rows: last + 7,
        n: 384,
        k: 200,
    });
    cases.push(Case {
        what: "a decreasing, a negative and a past-the-end entry".to_string(),
        layout,
        masked: false,
        table: vec![100, 50, 300, -5, 2000, 400],
        rows: 500,
        n: 136,
        k: 64,
    });
    // With 128x256 tiles on 132 SMs: 176 tiles, a whole round and 44 left over, which a
    // stream-K tail splits along K over every SM, across the experts' boundaries.
    let sizes = [300, 0, 700, 129];
    let offsets = GroupRows::offsets_of(&sizes);
    cases.push(Case {
        what: format!("sizes {sizes:?}, N 4096, K 320"),
        layout,
        masked: false,
        rows: *offsets.last().unwrap() as u32,
        table: offsets,
        n: 4096,
        k: 320,
    });
    let mut rng = SplitMix64::new(0x40_0001);
    let many: Vec<u32> = (0..1000).map(|_| rng.below(9) as u32).collect();
    let offsets = GroupRows::offsets_of(&many);
    cases.push(Case {
        what: "1000 experts of 0 to 8 rows".to_string(),
        layout,
        masked: false,
        rows: *offsets.last().unwrap() as u32,
        table: offsets,
        n: 128,
        k: 64,
    });
    cases
}

fn masked_cases() -> Vec<Case> {
    vec![Case {
        what: "counts 0, 1, the capacity, over it, negative, a tile + 1".to_string(),
        layout: Layout::RowCol,
        masked: true,
        table: vec![0, 1, 200, 250, -3, 129],
        rows: 6 * 200,
        n: 256,
        k: 136,
    }]
}

/// A grouped launch of A, B, D, the row table and what else the kernel takes.
type Launch<'a, In> = dyn Fn(
        &CudaSlice<In>,
        &CudaSlice<In>,
        &mut CudaSlice<bf16>,
        &CudaSlice<i32>,
        &mut Extras,
    ) -> Result<(), Error>
    + 'a;

/// What a launch takes besides A, B, D and the table: fp8 block scales (`quant: block`) and
/// a fused epilogue's inputs.
struct Extras {
    scales: Option<BlockScales>,
    fused: Option<ExpertsEpilogue>,
}

impl Extras {
    /// The epilogue's arguments for everything here.
    fn epilogue(&mut self) -> Epilogue<'_, bf16> {
        let mut epilogue = match &mut self.fused {
            Some(fused) => fused.epilogue(),
            None => Epilogue::none(),
        };
        if let Some(scales) = &self.scales {
            epilogue = epilogue.quant_scales(&scales.a, &scales.b);
        }
        epilogue
    }
}

/// A grouped fused epilogue's inputs, on the host and the device: α = 1.5 (and β = -0.75
/// with a C-in laid out as D), each expert's column bias (`[G, N]`, rounded to the type the
/// kernel reads), a factor per row of A from 1/4 to 5/4 and a poisoned aux output. C-in and
/// the bias at a quarter of the product's standard deviation (as `verify_fused_batch`).
struct ExpertsEpilogue {
    spec: FusedSpec,
    n: usize,
    bias_host: Vec<f64>,
    bias_out: CudaSlice<bf16>,
    bias_f32: CudaSlice<f32>,
    factors_host: Vec<f32>,
    factors: CudaSlice<f32>,
    c_in_host: Vec<bf16>,
    c_in: CudaSlice<bf16>,
    aux: CudaSlice<bf16>,
}

impl ExpertsEpilogue {
    const ALPHA: f32 = 1.5;
    const BETA: f32 = -0.75;

    fn random(stream: &Arc<CudaStream>, case: &Case, spec: FusedSpec, seed: u64) -> Self {
        let mut rng = SplitMix64::new(seed ^ 0xe1b1_0605);
        let mut uniform = || rng.below(1 << 24) as f64 / f64::from(1 << 24);
        let (rows, n) = (case.rows as usize, case.n as usize);
        let side = f64::from(case.k.max(16)).sqrt() / 4.0;
        let bias_f32: Vec<f32> = (0..case.groups() as usize * n)
            .map(|_| ((uniform() * 2.0 - 1.0) * side) as f32)
            .collect();
        let bias_out: Vec<bf16> = bias_f32.iter().map(|&v| bf16::from_f32(v)).collect();
        let bias_host = match spec.bias.vector() {
            Some((_, DType::F32)) => bias_f32.iter().map(|&v| f64::from(v)).collect(),
            _ => bias_out.iter().map(|v| v.to_f64()).collect(),
        };
        let factors_host: Vec<f32> = (0..rows).map(|_| (0.25 + uniform()) as f32).collect();
        let c_in_host: Vec<bf16> = (0..rows * n)
            .map(|_| bf16::from_f32(((uniform() * 2.0 - 1.0) * side) as f32))
            .collect();
        ExpertsEpilogue {
            spec,
            n,
            bias_host,
            bias_out: stream.clone_htod(&bias_out).unwrap(),
            bias_f32: stream.clone_htod(&bias_f32).unwrap(),
            factors: stream.clone_htod(&factors_host).unwrap(),
            factors_host,
            c_in: stream.clone_htod(&c_in_host).unwrap(),
            c_in_host,
            aux: stream.clone_htod(&vec![bf16::poison(); rows * n]).unwrap(),
        }
    }

    fn epilogue(&mut self) -> Epilogue<'_, bf16> {
        let ExpertsEpilogue {
            spec,
            n,
            bias_out,
            bias_f32,
            factors,
            c_in,
            aux,
            ..
        } = self;
        let mut epilogue = Epilogue::none();
        if spec.scale.has_alpha() {
            epilogue = epilogue.alpha(Self::ALPHA);
        }
        if spec.scale.reads_c() {
            epilogue = epilogue.beta(Self::BETA, CIn::Buffer(c_in));
        }
        if let Some((_, dtype)) = spec.bias.vector() {
            let bias = match dtype {
                DType::F32 => BiasArg::f32(bias_f32),
                _ => BiasArg::output(bias_out),
            };
            epilogue = epilogue.bias(bias.strided(*n as u64));
        }
        if spec.row_scale == RowScale::F32 {
            epilogue = epilogue.row_scale(factors);
        }
        if spec.aux == Aux::PreActivation {
            epilogue = epilogue.aux(aux);
        }
        epilogue
    }

    /// D's and aux's values in float64 at (row, col) of expert `g` from the product `ab`.
    fn reference(&self, ab: f64, g: usize, (row, col): (usize, usize)) -> (f64, f64) {
        let (alpha, beta) = (f64::from(Self::ALPHA), f64::from(Self::BETA));
        let c = self.c_in_host[row * self.n + col].to_f64();
        let bias = self.bias_host[g * self.n + col];
        let factor = f64::from(self.factors_host[row]);
        (
            self.spec.apply(ab, alpha, beta, c, bias, factor),
            self.spec.pre_activation(ab, alpha, beta, c, bias),
        )
    }
}

/// fp8 block scales (`quant: block`), on the host and the device: A's ceil(K/128) lines of
/// the rows rounded up to 4, then each expert's B ceil(N/128) lines of ceil(K/128). Powers of
/// two up to [`BLOCK_SCALE_MAX`] either way, so every scaled product is exact.
struct BlockScales {
    a_host: Vec<f32>,
    b_host: Vec<f32>,
    a: CudaSlice<f32>,
    b: CudaSlice<f32>,
}

impl BlockScales {
    fn random(stream: &Arc<CudaStream>, case: &Case, seed: u64) -> BlockScales {
        let mut rng = SplitMix64::new(seed ^ 0x5ca1e);
        let most = BLOCK_SCALE_MAX.log2() as u64;
        let mut power_of_two = || 2f32.powi((rng.below(2 * most + 1) as i32) - most as i32);
        let k_blocks = case.k.div_ceil(Quant::BLOCK) as usize;
        let a_lines = (case.rows as usize).next_multiple_of(Quant::A_LINE_MULTIPLE as usize);
        let b_lines = case.groups() as usize * case.n.div_ceil(Quant::BLOCK) as usize;
        let a_host: Vec<f32> = (0..k_blocks * a_lines).map(|_| power_of_two()).collect();
        let b_host: Vec<f32> = (0..b_lines * k_blocks).map(|_| power_of_two()).collect();
        BlockScales {
            a: stream.clone_htod(&a_host).unwrap(),
            b: stream.clone_htod(&b_host).unwrap(),
            a_host,
            b_host,
        }
    }

    /// The scale of A's element (row, i) times that of expert g's B at (i, col).
    fn factor(&self, case: &Case, g: usize, (row, col, i): (usize, usize, usize)) -> f64 {
        let block = Quant::BLOCK as usize;
        let k_blocks = case.k.div_ceil(Quant::BLOCK) as usize;
        let a_lines = (case.rows as usize).next_multiple_of(Quant::A_LINE_MULTIPLE as usize);
        let n_blocks = case.n.div_ceil(Quant::BLOCK) as usize;
        let a = self.a_host[i / block * a_lines + row];
        let b = self.b_host[(g * n_blocks + col / block) * k_blocks + i / block];
        f64::from(a) * f64::from(b)
    }
}

/// Runs `case` by `launch` and checks every expert's rows against float64 and every other
/// row of D untouched; with `block_scales`, fp8 operands scaled by random block scales; with
/// `fused`, the epilogue on random inputs (and its aux output checked as D is).
fn check_case<In: Element>(
    stream: &Arc<CudaStream>,
    case: &Case,
    seed: u64,
    block_scales: bool,
    fused: Option<FusedSpec>,
    launch: &Launch<'_, In>,
) {
    let (rows, n, k, groups) = (
        case.rows as usize,
        case.n as usize,
        case.k as usize,
        case.groups(),
    );
    let a_host: Vec<In> = normal_values(rows * k, seed);
    let b_host: Vec<In> = normal_values(groups as usize * n * k, seed ^ 0xB);
    let a = stream.clone_htod(&a_host).unwrap();
    let b = stream.clone_htod(&b_host).unwrap();
    let table = stream.clone_htod(&case.table).unwrap();
    let mut extras = Extras {
        scales: block_scales.then(|| BlockScales::random(stream, case, seed)),
        fused: fused.map(|spec| ExpertsEpilogue::random(stream, case, spec, seed)),
    };
    let mut d = stream.clone_htod(&vec![bf16::poison(); rows * n]).unwrap();
    launch(&a, &b, &mut d, &table, &mut extras).unwrap_or_else(|e| panic!("{}: {e}", case.what));
    let d_host = stream.clone_dtoh(&d).unwrap();
    let aux_host = extras
        .fused
        .as_ref()
        .filter(|f| f.spec.aux == Aux::PreActivation)
        .map(|f| stream.clone_dtoh(&f.aux).unwrap());

    let mut owner = vec![None; rows];
    for (g, &(start, end)) in case.ranges().ranges.iter().enumerate() {
        for row in start..end {
            owner[row as usize] = Some(g);
        }
    }
    let input = match In::STORAGE {
        Storage::Bf16 => DType::Bf16,
        Storage::E4m3 => DType::E4m3,
        other => panic!("no grouped test takes {other:?}"),
    };
    let tolerance = Tolerance::for_types(input, DType::Bf16, (rows * n) as u64, case.k);
    let tolerance = match &extras.scales {
        None => tolerance,
        Some(_) => tolerance.for_magnitude(f64::from(BLOCK_SCALE_MAX * BLOCK_SCALE_MAX)),
    };
    // D's and aux's errors: squared, the reference's squares, the largest.
    let mut errors = [(0.0f64, 0.0f64, 0.0f64); 2];
    let outputs = [Some(&d_host), aux_host.as_ref()];
    for (row, expert) in owner.iter().enumerate() {
        let Some(g) = *expert else {
            for (output, what) in outputs.iter().zip(["D", "aux"]) {
                let Some(output) = output else { continue };
                let written = &output[row * n..(row + 1) * n];
                let touched = written.iter().filter(|x| !x.is_poison()).count();
                assert_eq!(
                    touched, 0,
                    "{}: row {row} belongs to no expert, and {touched} of its elements of {what} were written",
                    case.what
                );
            }
            continue;
        };
        let b_g = &b_host[g * n * k..(g + 1) * n * k];
        for col in 0..n {
            let mut product = 0.0f64;
            for i in 0..k {
                let b_value = match case.layout {
                    Layout::RowCol => b_g[col * k + i],
                    _ => b_g[i * n + col],
                };
                let scale = extras
                    .scales
                    .as_ref()
                    .map_or(1.0, |s| s.factor(case, g, (row, col, i)));
                product += a_host[row * k + i].to_f64() * b_value.to_f64() * scale;
            }
            let (want_d, want_aux) = match &extras.fused {
                Some(fused) => fused.reference(product, g, (row, col)),
                None => (product, product),
            };
            for ((output, want), (error_sq, reference_sq, max_abs)) in outputs
                .iter()
                .zip([want_d, want_aux])
                .zip(errors.iter_mut())
            {
                let Some(output) = output else { continue };
                let value = output[row * n + col];
                assert!(
                    !value.is_poison(),
                    "{}: ({row}, {col}) of expert {g} was not written",
                    case.what
                );
                let diff = (value.to_f64() - want).abs();
                *max_abs = max_abs.max(diff);
                *error_sq += diff * diff;
                *reference_sq += want * want;
            }
        }
    }
    for ((error_sq, reference_sq, max_abs), what) in errors.into_iter().zip(["D", "aux"]) {
        let rel = (error_sq / reference_sq.max(f64::MIN_POSITIVE)).sqrt();
        assert!(
            rel <= tolerance.rel_frobenius && max_abs <= tolerance.max_abs,
            "{} ({what}): relative error {rel:.2e}, largest {max_abs:.2e} (bounds {:.1e}, {:.1e})",
            case.what,
            tolerance.rel_frobenius,
            tolerance.max_abs
        );
    }
}

#[test]
fn the_grouped_specs_emit() {
    for spec in SPECS.iter().chain(&FP8_SPECS).chain(&FUSED_SPECS) {
        let emitted = gemm_codegen::emit_str(spec).unwrap_or_else(|e| panic!("{spec}: {e}"));
        assert_ne!(emitted.info().groups(), Groups::None, "{spec}");
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn ragged_experts_match_float64_and_leave_other_rows_alone() {
    let (ctx, stream) = gpu();
    for (index, spec) in SPECS.iter().enumerate() {
        let kernel = kernel::<bf16>(&ctx, spec);
        let valid = gemm_dsl::check_str(spec).unwrap();
        let cases = match valid.spec.groups {
            Groups::Masked => masked_cases(),
            _ => contiguous_cases(valid.spec.layout, valid.spec.tile.m),
        };
        for (seed, case) in cases.iter().enumerate() {
            // Fresh inputs per kernel and case.
            check_case(
                &stream,
                case,
                0x40_1000 + (index * 16 + seed) as u64,
                false,
                None,
                &|a, b, d, table, _| {
                    kernel.launch_grouped(&stream, a, b, d, table, case.dims(), case.lds())
                },
            );
        }
    }
}

/// fp8 cases: K a multiple of 16 (whole 16-byte lines for the TMA) with a partial last block
/// of 128, 9 k tiles (the ring and its scale slots go round more than once), experts of 0, 1,
/// a tile ± 1 rows, starting at rows that are not multiples of 4 (the A scales' 16-byte
/// units), and masked counts over the capacity and negative.
fn fp8_cases() -> Vec<Case> {
    let sizes = [0, 1, 127, 128, 129, 0, 261, 3];
    let offsets = GroupRows::offsets_of(&sizes);
    let last = *offsets.last().unwrap() as u32;
    vec![
        Case {
            what: format!("fp8, sizes {sizes:?} and 5 rows past the last expert"),
            layout: Layout::RowCol,
            masked: false,
            table: offsets,
            rows: last + 5,
            n: 384,
            k: 1040,
        },
        Case {
            what: "fp8, counts 0, 1, the capacity, over it, negative, a tile + 1".to_string(),
            layout: Layout::RowCol,
            masked: true,
            table: vec![0, 1, 203, 250, -3, 129],
            rows: 6 * 203,
            n: 256,
            k: 1040,
        },
    ]
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn fp8_experts_with_block_scales_match_float64() {
    let (ctx, stream) = gpu();
    for (index, spec) in FP8_SPECS.iter().enumerate() {
        let kernel = kernel::<E4m3>(&ctx, spec);
        let masked = kernel.info().groups() == Groups::Masked;
        for (seed, case) in fp8_cases()
            .iter()
            .filter(|c| c.masked == masked)
            .enumerate()
        {
            check_case(
                &stream,
                case,
                0x40_5000 + (index * 16 + seed) as u64,
                true,
                None,
                &|a, b, d, table, extras| {
                    let mut epilogue = extras.epilogue();
                    kernel.launch_grouped_with(
                        &stream,
                        a,
                        b,
                        d,
                        table,
                        case.dims(),
                        case.lds(),
                        &mut epilogue,
                    )
                },
            );
        }
    }
}

/// The experts' fused epilogues ([`FUSED_SPECS`]) on the ragged, masked and fp8 cases: each
/// expert's bias, the rows' factors, C-in and the aux output against float64, other rows
/// untouched in D and aux.
#[test]
#[ignore = "needs a CUDA GPU"]
fn fused_experts_match_float64() {
    let (ctx, stream) = gpu();
    for (index, spec) in FUSED_SPECS.iter().enumerate() {
        let valid = gemm_dsl::check_str(spec).unwrap();
        let fused = FusedSpec::of_spec(&valid.spec);
        let masked = valid.spec.groups == Groups::Masked;
        let fp8 = valid.spec.quant == Quant::Block;
        let cases = match (fp8, masked) {
            (true, _) => fp8_cases()
                .into_iter()
                .filter(|c| c.masked == masked)
                .collect(),
            (false, true) => masked_cases(),
            (false, false) => contiguous_cases(valid.spec.layout, valid.spec.tile.m),
        };
        let seeds = 0x40_7000 + (index * 16) as u64;
        if fp8 {
            check_fused_cases(&stream, &kernel::<E4m3>(&ctx, spec), &cases, fused, seeds);
        } else {
            check_fused_cases(&stream, &kernel::<bf16>(&ctx, spec), &cases, fused, seeds);
        }
    }
}

/// [`check_case`] of every case with a fused epilogue (and fp8 block scales where the kernel
/// takes them), fresh inputs from `seeds` on.
fn check_fused_cases<In: Element>(
    stream: &Arc<CudaStream>,
    kernel: &GemmKernel<In, bf16>,
    cases: &[Case],
    fused: FusedSpec,
    seeds: u64,
) {
    for (seed, case) in cases.iter().enumerate() {
        check_case(
            stream,
            case,
            seeds + seed as u64,
            fused.quant == Quant::Block,
            Some(fused),
            &|a, b, d, table, extras| {
                kernel.launch_grouped_with(
                    stream,
                    a,
                    b,
                    d,
                    table,
                    case.dims(),
                    case.lds(),
                    &mut extras.epilogue(),
                )
            },
        );
    }
}

/// The entry point: its pick is a member of the set, and its run computes every case.
#[test]
#[ignore = "needs a CUDA GPU"]
fn the_grouped_entry_point_picks_a_member_and_computes_every_case() {
    let (ctx, stream) = gpu();
    for (layout, groups) in [
        (Layout::RowCol, Groups::Contiguous),
        (Layout::RowRow, Groups::Contiguous),
        (Layout::RowCol, Groups::Masked),
    ] {
        let experts = GroupedMatmul::<bf16, bf16>::new(&ctx, groups, layout).unwrap();
        let cases = match groups {
            Groups::Masked => masked_cases(),
            _ => contiguous_cases(layout, 128),
        };
        for (seed, case) in cases.iter().enumerate() {
            let picked = experts.pick(&case.dims()).unwrap().to_string();
            assert!(experts.names().contains(&picked.as_str()), "{picked}");
            check_case(
                &stream,
                case,
                0x40_3000 + seed as u64,
                false,
                None,
                &|a, b, d, table, _| experts.run(&stream, a, b, d, table, case.dims()),
            );
        }
    }
}

/// The entry point with an experts' epilogue (`GroupedMatmul::new_fused`): bf16 with each
/// expert's bias, SiLU and the rows' factors; fp8 with block scales, an f32 bias and the rows'
/// factors; each on its cases against float64. What the set does not take is refused.
#[test]
#[ignore = "needs a CUDA GPU"]
fn the_fused_grouped_entry_point_computes_the_experts_epilogue() {
    use gemm_dsl::{Activation, Bias, BiasAlong, Scale};
    let (ctx, stream) = gpu();
    let bias = |dtype| Bias::Vector {
        along: BiasAlong::Col,
        dtype,
    };
    let swiglu_like = FusedSpec {
        bias: bias(DType::Bf16),
        activation: Activation::Silu,
        row_scale: RowScale::F32,
        ..FusedSpec::NONE
    };
    for (groups, cases) in [
        (Groups::Contiguous, contiguous_cases(Layout::RowCol, 128)),
        (Groups::Masked, masked_cases()),
    ] {
        let experts =
            GroupedMatmul::<bf16, bf16>::new_fused(&ctx, groups, Layout::RowCol, swiglu_like)
                .unwrap();
        for (seed, case) in cases.iter().enumerate() {
            check_case(
                &stream,
                case,
                0x40_8000 + seed as u64,
                false,
                Some(swiglu_like),
                &|a, b, d, table, extras| {
                    experts.run_with(&stream, a, b, d, table, case.dims(), &mut extras.epilogue())
                },
            );
        }
    }
    let fp8_down = FusedSpec {
        scale: Scale::Alpha,
        bias: bias(DType::F32),
        row_scale: RowScale::F32,
        quant: Quant::Block,
        ..FusedSpec::NONE
    };
    for groups in [Groups::Contiguous, Groups::Masked] {
        let experts =
            GroupedMatmul::<E4m3, bf16>::new_fused(&ctx, groups, Layout::RowCol, fp8_down).unwrap();
        let cases: Vec<Case> = fp8_cases()
            .into_iter()
            .filter(|c| c.masked == (groups == Groups::Masked))
            .collect();
        for (seed, case) in cases.iter().enumerate() {
            check_case(
                &stream,
                case,
                0x40_9000 + seed as u64,
                true,
                Some(fp8_down),
                &|a, b, d, table, extras| {
                    experts.run_with(&stream, a, b, d, table, case.dims(), &mut extras.epilogue())
                },
            );
        }
    }
    let refused = |result: Result<(), Error>, words: &str| {
        let text = result.expect_err(words).to_string();
        assert!(text.contains(words), "`{text}` does not say `{words}`");
    };
    let with_c_in = FusedSpec {
        scale: Scale::AlphaBeta,
        ..FusedSpec::NONE
    };
    refused(
        GroupedMatmul::<bf16, bf16>::new_fused(&ctx, Groups::Contiguous, Layout::RowCol, with_c_in)
            .map(drop),
        "launch_grouped_with",
    );
    refused(
        GroupedMatmul::<E4m3, bf16>::new_fused(&ctx, Groups::Contiguous, Layout::RowRow, fp8_down)
            .map(drop),
        "layout rc",
    );
    refused(
        GroupedMatmul::<E4m3, bf16>::new(&ctx, Groups::Contiguous, Layout::RowCol).map(drop),
        "block scales",
    );
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn bad_grouped_launches_are_refused_before_the_gpu() {
    let (ctx, stream) = gpu();
    let grouped = kernel(&ctx, SPECS[0]);
    let (rows, n, k) = (256u32, 256u32, 64u32);
    let a = stream.alloc_zeros::<bf16>((rows * k) as usize).unwrap();
    let b = stream.alloc_zeros::<bf16>((4 * n * k) as usize).unwrap();
    let mut d = stream.alloc_zeros::<bf16>((rows * n) as usize).unwrap();
    let table = stream.clone_htod(&[64i32, 128, 192, 256]).unwrap();
    let lds = LeadingDims {
        lda: k,
        ldb: k,
        ldc: n,
    };
    let dims = |groups| GroupedDims { groups, rows, n, k };
    let refused = |result: Result<(), Error>, words: &str| {
        let text = result.expect_err(words).to_string();
        assert!(text.contains(words), "`{text}` does not say `{words}`");
    };
    refused(
        grouped.launch_grouped(&stream, &a, &b, &mut d, &table, dims(0), lds),
        "0 experts",
    );
    refused(
        grouped.launch_grouped(&stream, &a, &b, &mut d, &table, dims(5), lds),
        "the row table holds 4 entries",
    );
    let short_b = b.slice(..(3 * n * k) as usize);
    refused(
        grouped.launch_grouped(&stream, &a, &short_b, &mut d, &table, dims(4), lds),
        "B's experts",
    );
    refused(
        grouped.launch_strided_batched(&stream, &a, &b, &mut d, rows, n, k, lds, Batch::ONE),
        "launch it with `launch_grouped`",
    );
    let masked = kernel(&ctx, SPECS[3]);
    refused(
        masked.launch_grouped(&stream, &a, &b, &mut d, &table, dims(3), lds),
        "not 3 experts of equal capacity",
    );
    let dense = kernel(
        &ctx,
        "name: dense_rc, arch: sm_90a, mma: wgmma, layout: rc, schedule: persistent",
    );
    refused(
        dense.launch_grouped(&stream, &a, &b, &mut d, &table, dims(4), lds),
        "the kernel is not grouped",
    );
    grouped
        .launch_grouped(&stream, &a, &b, &mut d, &table, dims(4), lds)
        .unwrap();
    stream.synchronize().unwrap();
}

/// A grouped launch captured in a CUDA graph and replayed: D bitwise equal to the eager
/// launch, and a change of the table's values between replays followed (the graph reads the
/// table when it runs).
#[test]
#[ignore = "needs a CUDA GPU"]
fn a_captured_grouped_launch_replays_and_follows_the_table() {
    let ctx = open_context(0).expect("these tests need a CUDA GPU");
    // SAFETY: the test orders its work on its one stream.
    unsafe { ctx.disable_event_tracking() };
    let stream = ctx.new_stream().unwrap();
    let kernel = kernel(&ctx, SPECS[0]);
    let case = &contiguous_cases(Layout::RowCol, 128)[0];
    let (rows, n, k) = (case.rows as usize, case.n as usize, case.k as usize);
    let a = stream
        .clone_htod(&normal_values::<bf16>(rows * k, 0x40_2000))
        .unwrap();
    let b = stream
        .clone_htod(&normal_values::<bf16>(
            case.groups() as usize * n * k,
            0x40_2001,
        ))
        .unwrap();
    let mut table = stream.clone_htod(&case.table).unwrap();
    let mut d: CudaSlice<bf16> = stream.clone_htod(&vec![bf16::poison(); rows * n]).unwrap();
    kernel
        .launch_grouped(&stream, &a, &b, &mut d, &table, case.dims(), case.lds())
        .unwrap();
    let eager = stream.clone_dtoh(&d).unwrap();

    stream
        .memcpy_htod(&vec![bf16::poison(); rows * n], &mut d)
        .unwrap();
    stream.synchronize().unwrap();
    // Thread-local: the other tests of this binary may run beside it, and a global capture
    // would fail their allocations (`harness/tests/graphs.rs` captures in global mode).
    begin_capture(
        &stream,
        CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
    )
    .unwrap();
    kernel
        .launch_grouped(&stream, &a, &b, &mut d, &table, case.dims(), case.lds())
        .unwrap();
    assert_eq!(
        stream.capture_status().unwrap(),
        CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_ACTIVE
    );
    let graph = stream
        .end_capture(CUgraphInstantiate_flags(0))
        .unwrap()
        .expect("the capture holds the launch");
    graph.launch().unwrap();
    stream.synchronize().unwrap();
    let replayed = stream.clone_dtoh(&d).unwrap();
    let differ = replayed
        .iter()
        .zip(&eager)
        .filter(|(r, e)| r.to_bits() != e.to_bits())
        .count();
    assert_eq!(differ, 0, "the replay differs from the eager launch");

    // All rows to expert 0 now: the replay writes every row.
    let everything = vec![case.rows as i32; case.table.len()];
    stream.memcpy_htod(&everything, &mut table).unwrap();
    stream
        .memcpy_htod(&vec![bf16::poison(); rows * n], &mut d)
        .unwrap();
    graph.launch().unwrap();
    stream.synchronize().unwrap();
    let unwritten = stream
        .clone_dtoh(&d)
        .unwrap()
        .iter()
        .filter(|x| x.is_poison())
        .count();
    assert_eq!(unwritten, 0, "the replay did not follow the new table");
}

/// With event tracking on (a second stream), a grouped launch inside a capture is refused
/// before the row table's events are touched: the capture stays active and ends.
#[test]
#[ignore = "needs a CUDA GPU"]
fn a_grouped_launch_in_a_tracked_capture_is_refused_and_the_capture_goes_on() {
    let ctx = open_context(0).expect("these tests need a CUDA GPU");
    let stream = ctx.new_stream().unwrap();
    assert!(ctx.is_managing_stream_synchronization());
    let kernel = kernel(&ctx, SPECS[0]);
    let case = &contiguous_cases(Layout::RowCol, 128)[1];
    let (rows, n, k) = (case.rows as usize, case.n as usize, case.k as usize);
    let a = stream.alloc_zeros::<bf16>(rows * k).unwrap();
    let b = stream
        .alloc_zeros::<bf16>(case.groups() as usize * n * k)
        .unwrap();
    let mut d = stream.alloc_zeros::<bf16>(rows * n).unwrap();
    let table = stream.clone_htod(&case.table).unwrap();
    stream.synchronize().unwrap();
    // Thread-local, as above.
    stream
        .begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
        .unwrap();
    let refused = kernel
        .launch_grouped(&stream, &a, &b, &mut d, &table, case.dims(), case.lds())
        .unwrap_err();
    assert_refused_and_capture_goes_on(&ctx, &stream, &refused);
}
