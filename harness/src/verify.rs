//! Correctness of a kernel against a reference: fresh random normal inputs from a seed, a
//! poisoned output, and the error measured in float64.

use crate::baseline::cublas::{Cublas, CublasGemm};
use crate::error::{DriverContext, Error};
use cudarc::driver::{CudaSlice, CudaStream};
use gemm_dsl::abi::{LaunchShape, StorageOrder};
use gemm_dsl::grouped::SplitMix64;
use gemm_dsl::{Aux, BiasAlong, DType, Quant, RowScale};
use gemm_runtime::check::{Batch, LeadingDims};
use gemm_runtime::epilogue::{BiasArg, CIn, Epilogue, FusedSpec};
use gemm_runtime::GemmKernel;
use gemm_runtime::Operand;
use gemm_runtime::{Element, KernelTypes};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

/// One GEMM problem: row-major, packed `A` (m x k) and `B` (k x n); B of its own type in a
/// mixed fp8 pair.
#[derive(Clone, Debug)]
pub struct Problem<In, InB = In> {
    pub m: u32,
    pub n: u32,
    pub k: u32,
    pub a: Vec<In>,
    pub b: Vec<InB>,
}

impl<In: Element, InB: Element> Problem<In, InB> {
    /// Standard normal entries (rounded to `In` and `InB`), reproducible from `seed` (see
    /// [`normal_values`]).
    pub fn random(m: u32, n: u32, k: u32, seed: u64) -> Self {
        let mut seeds = NormalRng::new(seed);
        let a = normal_values(m as usize * k as usize, seeds.next_u64());
        let b = normal_values(k as usize * n as usize, seeds.next_u64());
        Problem { m, n, k, a, b }
    }

    pub fn flops(&self) -> f64 {
        2.0 * f64::from(self.m) * f64::from(self.n) * f64::from(self.k)
    }

    /// `Ok` if `a` and `b` are packed `m x k` and `k x n`: the fields are public, so only
    /// this check keeps them consistent.
    pub fn check_packed(&self) -> Result<(), Error> {
        require_packed("the problem's A", self.a.len(), self.m, self.k)?;
        require_packed("the problem's B", self.b.len(), self.k, self.n)
    }
}

/// An `m x n x k` problem size, or a strided batch of `batch` such products.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Shape {
    pub m: u32,
    pub n: u32,
    pub k: u32,
    /// Products in one launch (reports written before batches existed read back as 1).
    #[serde(default = "one_product", skip_serializing_if = "is_one_product")]
    pub batch: u32,
}

fn one_product() -> u32 {
    1
}

fn is_one_product(batch: &u32) -> bool {
    *batch == 1
}

impl Shape {
    pub const fn new(m: u32, n: u32, k: u32) -> Shape {
        Shape { m, n, k, batch: 1 }
    }

    /// `batch` products of `m x n x k` in one launch.
    pub const fn batched(batch: u32, m: u32, n: u32, k: u32) -> Shape {
        Shape { m, n, k, batch }
    }

    pub const fn cube(size: u32) -> Shape {
        Shape::new(size, size, size)
    }

    /// Every product's flops.
    pub fn flops(&self) -> f64 {
        2.0 * f64::from(self.batch) * f64::from(self.m) * f64::from(self.n) * f64::from(self.k)
    }

    /// The row stride the benchmark gives a matrix of rows `row_len` elements of
    /// `element_bytes` long: the row length rounded up to `align_bytes` (a packed row where
    /// that already holds). 16 bytes is the alignment every kernel's copies and the TMA need;
    /// a wider one (128 bytes: whole cache lines) shows what a stride costs.
    pub fn leading_dim(&self, row_len: u32, element_bytes: u32, align_bytes: u32) -> u32 {
        let vector = (align_bytes / element_bytes).max(1);
        row_len.div_ceil(vector) * vector
    }

    /// Whether a kernel with this launch shape computes this size (every catalog kernel takes
    /// any M, N, K of at least 1; a whole-tile launch shape needs tile multiples).
    pub fn admitted_by(&self, launch: &LaunchShape) -> Result<(), String> {
        launch.check_batched_dims(self.m, self.n, self.k, self.batch)
    }

    /// A problem of more than `rounds x blocks` tiles, `k_tiles` deep, for a persistent grid
    /// of `blocks`: odd tile rows and two more tile columns, so no raster band width divides
    /// both and the last round is ragged.
    pub fn rounds_of(launch: &LaunchShape, blocks: u32, rounds: u32, k_tiles: u32) -> Shape {
        let rows = (f64::from(rounds * blocks + 1).sqrt().ceil() as u32) | 1;
        Shape::new(
            rows * launch.tile_m,
            (rows + 2) * launch.tile_n,
            k_tiles * launch.tile_k,
        )
    }
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.batch != 1 {
            write!(f, "{}x", self.batch)?;
        }
        write!(f, "{}x{}x{}", self.m, self.n, self.k)
    }
}

impl FromStr for Shape {
    type Err = String;

    /// `MxNxK`, e.g. `4096x4096x1024`, or `BxMxNxK` for a strided batch of B products,
    /// e.g. `8x1024x1024x1024`.
    fn from_str(text: &str) -> Result<Shape, String> {
        // The picker's grammar of problem sizes, read once; the layout plays no part here.
        let problem = gemm_dsl::pick::Problem::parse(text, gemm_dsl::Layout::RowRow)
            .map_err(|_| {
                format!(
                    "`{text}` is not a shape: write MxNxK, e.g. 4096x4096x1024, or BxMxNxK for a batch of B products"
                )
            })?;
        Ok(Shape::batched(
            problem.batch,
            problem.m,
            problem.n,
            problem.k,
        ))
    }
}

/// Standard normal numbers reproducible from a seed, for test inputs (not for cryptography,
/// nor for statistics finer than a GEMM's inputs need).
///
/// Uniform 64-bit words come from SplitMix64 (Steele, Lea and Flood, "Fast splittable
/// pseudorandom number generators", 2014: the generator Java's `SplittableRandom` and the
/// seeding of xoshiro use); the Box–Muller transform turns two uniforms in (0, 1] into two
/// independent standard normals, the second kept for the next call. The same seed gives the
/// same sequence on every platform: only integer arithmetic, `ln`, `sqrt`, `sin` and `cos` of
/// f64 are involved.
#[derive(Clone, Debug)]
pub struct NormalRng {
    words: SplitMix64,
    spare: Option<f64>,
}

impl NormalRng {
    pub fn new(seed: u64) -> NormalRng {
        NormalRng {
            words: SplitMix64::new(seed),
            spare: None,
        }
    }

    /// The next SplitMix64 word.
    pub fn next_u64(&mut self) -> u64 {
        self.words.next_u64()
    }

    /// Uniform in (0, 1]: the top 53 bits of a word, plus one, times 2^-53 (never 0, so its
    /// logarithm is finite).
    pub fn next_uniform(&mut self) -> f64 {
        ((self.next_u64() >> 11) + 1) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// A standard normal number (mean 0, variance 1).
    pub fn next_normal(&mut self) -> f64 {
        if let Some(spare) = self.spare.take() {
            return spare;
        }
        let radius = (-2.0 * self.next_uniform().ln()).sqrt();
        let angle = std::f64::consts::TAU * self.next_uniform();
        self.spare = Some(radius * angle.sin());
        radius * angle.cos()
    }
}

/// Values one [`normal_values`] chunk draws from its own generator.
const NORMAL_CHUNK: usize = 1 << 20;

/// `len` standard normal numbers rounded to `In`, the same for the same `seed` on every
/// machine: chunk `c` of 2^20 values comes from a [`NormalRng`] seeded with the
/// `c`-th word of a generator seeded with `seed`, so the chunks fill on every core at once
/// (a weight of a few hundred MB takes a fraction of a second, not several).
pub fn normal_values<In: Element>(len: usize, seed: u64) -> Vec<In> {
    let mut values = vec![In::from_f32(0.0); len];
    let mut seeds = NormalRng::new(seed);
    let chunks: Vec<(u64, &mut [In])> = values
        .chunks_mut(NORMAL_CHUNK)
        .map(|chunk| (seeds.next_u64(), chunk))
        .collect();
    let threads = std::thread::available_parallelism().map_or(1, usize::from);
    let per_thread = chunks.len().div_ceil(threads).max(1);
    let mut chunks = chunks.into_iter();
    std::thread::scope(|scope| loop {
        let share: Vec<_> = chunks.by_ref().take(per_thread).collect();
        if share.is_empty() {
            break;
        }
        scope.spawn(move || {
            for (chunk_seed, chunk) in share {
                let mut rng = NormalRng::new(chunk_seed);
                for value in chunk {
                    *value = In::from_f32(rng.next_normal() as f32);
                }
            }
        });
    });
    values
}

/// Which reference an [`ErrorReport`] was measured against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reference {
    /// Float64 GEMM on the CPU (exact to far below f32 rounding).
    CpuF64,
    /// cuBLAS on the exact inputs with f32 accumulation and an f32 result, no TF32
    /// ([`CublasGemm::reference`]): SGEMM for f32 inputs, GemmEx for bf16 and f16.
    Cublas,
}

/// Picks the reference by size: the CPU's float64 GEMM up to 2^31 multiply-adds (1290³; a
/// second or so on a many-core host), cuBLAS beyond.
pub fn reference_for(m: u32, n: u32, k: u32) -> Reference {
    let multiply_adds = u64::from(m) * u64::from(n) * u64::from(k);
    if multiply_adds <= 1 << 31 {
        Reference::CpuF64
    } else {
        Reference::Cublas
    }
}

/// `A·B` of a packed problem by the reference [`reference_for`] picks for its size, and
/// which one that was.
pub fn reference_of<In: Element, InB: Element>(
    stream: &Arc<CudaStream>,
    problem: &Problem<In, InB>,
) -> Result<(Vec<f64>, Reference), Error> {
    let kind = reference_for(problem.m, problem.n, problem.k);
    let reference = match kind {
        Reference::CpuF64 => cpu_reference(problem)?,
        Reference::Cublas => cublas_reference(stream, problem)?,
    };
    Ok((reference, kind))
}

/// How far a kernel's output is from the reference.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ErrorReport {
    /// Largest |C - R| over written elements (NaN if the kernel wrote a NaN).
    pub max_abs: f64,
    /// ||C - R||_F / ||R||_F over written elements.
    pub rel_frobenius: f64,
    /// Elements of C still holding the poison pattern: never written.
    pub unwritten: usize,
    pub reference: Reference,
}

/// Bounds an [`ErrorReport`] must stay within.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Tolerance {
    pub rel_frobenius: f64,
    pub max_abs: f64,
}

impl Tolerance {
    /// For f32 inputs with f32 accumulation over `k` products of standard normals.
    ///
    /// Rounding in a length-k f32 sum grows like sqrt(k) relative to the result: about 1e-6
    /// against float64 at k = 2048 for sequential FFMA chains. The bound is
    /// 1e-5 up to k = 2048 and grows as sqrt(k) after it, so it stays about 10x above the
    /// expected error, and also covers the error of an f32 reference such as cuBLAS. The
    /// absolute error of one element has a standard deviation near 3e-8·k; 1e-6·k is over
    /// 5 sigma at every size.
    pub fn f32_accumulation(k: u32) -> Tolerance {
        let k = f64::from(k);
        Tolerance {
            rel_frobenius: 1e-5 * (k / 2048.0).sqrt().max(1.0),
            max_abs: 1e-6 * k,
        }
    }

    /// For tensor cores summing `k` exact products (bf16 or f16 inputs: 8 or 11 significant
    /// bits, so a product fits f32's 24) in f32, against float64 on the same inputs.
    ///
    /// Only accumulation error is left, but tensor cores truncate where FFMA rounds to
    /// nearest: each addition loses up to one f32 ulp of the running sum (2^-23 of it),
    /// always towards zero, so the error drifts with the sum's sign instead of cancelling.
    /// Measured on H100 and H200: 2.1e-6 (bf16) and 2.5e-6 (f16) at k = 2048, 1.2e-5 at
    /// k = 16384 (against cuBLAS): about linear in k. A CPU model that truncates after every
    /// single product, worse than any tensor core (they add 4 to 16 products before one
    /// truncation), gives 7e-6 at k = 2048. The bound, 2e-5·max(1, k/2048), is 3x above that
    /// model and 10x above the hardware; C rounded to bf16 (1.7e-3) or to f16 (2e-4) breaks
    /// it below k = 170,000 and 20,000.
    pub fn tensor_core_f32_accumulation(k: u32) -> Tolerance {
        Tolerance::scaled(2e-5 * (f64::from(k) / 2048.0).max(1.0), k)
    }

    /// For fp8 tensor cores summing `k` exact products (e4m3 and e5m2 products fit f32) with
    /// the fp8 path's short accumulator, against float64 on the same (decoded) inputs, any
    /// output type. The fp8 wgmma keeps about 14 bits of its sums, so the error grows with K.
    /// Measured on an H100 (2026-11-25, e4m3, no promotion of the partial sums): 1.3e-3 at
    /// k = 4096 and 3.1e-3 at k = 16384 (f32 out), 2.0e-3 at k = 4096 with bf16 out (its
    /// rounding adds ~1.7e-3). The bound, [`FP8_REL_PER_4096`] up to k = 4096 and linear in k
    /// beyond, is 3x above the worst of those.
    pub fn fp8_accumulation(k: u32) -> Tolerance {
        Tolerance::scaled(FP8_REL_PER_4096 * (f64::from(k) / 4096.0).max(1.0), k)
    }

    /// For fp8 tensor cores whose partial sums are promoted into f32 every k tile (`promote:
    /// 128`, and block scales), f32 out: the short accumulator only ever sums one k tile, so
    /// the error stays that of one k tile whatever K. Measured on an H100 (2026-11-25, e4m3,
    /// 256x256, `results/fp8-2026-11-25`): 1.27e-4 at k = 1024, 4096 and 16384. The bound,
    /// [`FP8_PROMOTED_REL`] at every k, is 3x above that; a kernel that does not promote
    /// breaks it from k = 4096 (1.34e-3 there, 3.1e-3 at k = 16384), and an output rounded to
    /// bf16 or f16 breaks it at any k.
    pub fn fp8_promoted_accumulation(k: u32) -> Tolerance {
        Tolerance::scaled(FP8_PROMOTED_REL, k)
    }

    /// The same bounds for outputs up to `factor` times larger than those of standard normal
    /// inputs (block-scaled operands): the relative error stays, the absolute one scales.
    pub fn for_magnitude(self, factor: f64) -> Tolerance {
        Tolerance {
            max_abs: self.max_abs * factor,
            ..self
        }
    }

    /// Relative error `rel_frobenius` and `max_abs` = `8 · rel_frobenius · sqrt(max(k, 32))`.
    ///
    /// An element of C has a standard deviation of sqrt(k), the largest of a big matrix about
    /// 6·sqrt(k); an honest kernel's error per element is about `rel_frobenius / 3 · sqrt(k)`
    /// at most, so 8x that is over 20 sigma and still catches one element far off where the
    /// relative error, averaged over all of C, hides it. Below k = 32, C is far from normal
    /// (at k = 1 each element is a product of two normals, whose largest over a million
    /// elements is about 25, not 6), so 32 stands in for k there: an H100 tf32 kernel at
    /// 1332x1023x1 was off by 8.2e-3 in one element, honestly.
    fn scaled(rel_frobenius: f64, k: u32) -> Tolerance {
        Tolerance {
            rel_frobenius,
            max_abs: 8.0 * rel_frobenius * f64::from(k.max(32)).sqrt(),
        }
    }

    /// For a kernel that reads `dtype`, writes `out` and computes `outputs` (= m·n) elements
    /// of depth `k`, against float64 on the inputs as stored (bf16 and f16 inputs rounded, f32
    /// and tf32 ones not).
    ///
    /// - f32 -> f32 (SIMT, FFMA): [`Tolerance::f32_accumulation`].
    /// - bf16 or f16 -> f32: [`Tolerance::tensor_core_f32_accumulation`]; the products are
    ///   exact, only the f32 sum errs.
    /// - bf16 -> bf16: relative error [`BF16_OUT_REL`] (rounding C costs ~1.7e-3 and at most
    ///   2^-8 = 3.9e-3), largest element 8e-2·sqrt(k); f16 -> f16: 1e-3 (rounding C costs
    ///   ~2e-4, to bf16's precision instead ~1.6e-3). The f32 sum ~1e-6.
    /// - tf32 -> f32: 1e-3. The kernel rounds the f32 inputs to tf32 (10 mantissa bits, to
    ///   nearest), the reference does not: each product is off by about 2^-11/sqrt(3)·sqrt(2)
    ///   of itself, 2.9e-4 of C (measured 2.9e-4 to 3.0e-4 at k = 128 to 16384; the sum's
    ///   error is 100x smaller). Inputs cut to tf32 instead of rounded give 7.8e-4 and pass;
    ///   inputs rounded to bf16 (7 mantissa bits, 2.4e-3) or C rounded to bf16 (1.7e-3) do not.
    ///
    /// Below 64 elements the relative Frobenius error is a ratio of a handful of normals (a
    /// sum that cancels has a tiny norm, and any error is large beside it), so where the bound
    /// above is tighter than 1e-2, 1e-2 replaces it there; `max_abs`, scaled by sqrt(k) and
    /// not by C, keeps its tight value.
    pub fn for_types(dtype: DType, out: DType, outputs: u64, k: u32) -> Tolerance {
        let tight = match (dtype, out) {
            (DType::F32, _) => Tolerance::f32_accumulation(k),
            (DType::Tf32, _) => Tolerance::scaled(1e-3, k),
            (DType::Bf16 | DType::F16, DType::F32 | DType::Tf32) => {
                Tolerance::tensor_core_f32_accumulation(k)
            }
            // Rounding to nearest bf16 moves each element by at most 2^-8 (3.9e-3) of itself,
            // so C's relative Frobenius error cannot pass that; measured 1.6e-3 to 1.8e-3
            // (results/). The bound leaves room for the f32 sums and the epilogue's
            // approximations; the largest element's error keeps the old, looser bound.
            (DType::Bf16 | DType::F16, DType::Bf16) => Tolerance {
                rel_frobenius: BF16_OUT_REL,
                ..Tolerance::scaled(1e-2, k)
            },
            (DType::Bf16 | DType::F16, DType::F16) => Tolerance::scaled(1e-3, k),
            (DType::Bf16 | DType::F16, DType::E4m3 | DType::E5m2) => {
                unreachable!("fp8 is an input type only (KernelTypes)")
            }
            (DType::E4m3 | DType::E5m2, _) => Tolerance::fp8_accumulation(k),
        };
        if outputs >= FROBENIUS_MIN_OUTPUTS || dtype == DType::F32 {
            tight
        } else {
            Tolerance {
                rel_frobenius: tight.rel_frobenius.max(1e-2),
                ..tight
            }
        }
    }

    /// The error bounds a correct kernel of these types meets on an `m x n x k` problem
    /// (against float64): [`Tolerance::for_types`].
    pub fn for_kernel(types: KernelTypes, m: u32, n: u32, k: u32) -> Tolerance {
        Tolerance::for_types(types.dtype(), types.out(), u64::from(m) * u64::from(n), k)
    }
}

/// The largest block scale [`verify_fused_batch`] draws for a `quant: block` kernel (and 1 over
/// it the smallest): powers of two, so every scaled product is exact. An output element can be
/// `BLOCK_SCALE_MAX²` times larger than without scales ([`Tolerance::for_magnitude`]).
pub const BLOCK_SCALE_MAX: f32 = 4.0;

/// [`Tolerance::fp8_accumulation`]'s bound at k = 4096.
pub const FP8_REL_PER_4096: f64 = 6e-3;

/// The relative Frobenius bound of 16-bit inputs with bf16 out ([`Tolerance::for_types`]).
pub const BF16_OUT_REL: f64 = 5e-3;

/// [`Tolerance::fp8_promoted_accumulation`]'s bound.
pub const FP8_PROMOTED_REL: f64 = 4e-4;

/// The fewest elements of C whose relative Frobenius error [`Tolerance::for_types`] holds to
/// its tight bound: over 64 elements the error's and C's norms each average enough terms that
/// their ratio stays within 2x of its mean (F(64, 64) passes 4 with odds below 1e-8).
pub const FROBENIUS_MIN_OUTPUTS: u64 = 64;

impl ErrorReport {
    /// `Err` with every broken bound, or `Ok` if all hold. NaNs break every bound.
    pub fn check(&self, tolerance: &Tolerance) -> Result<(), String> {
        let mut broken = Vec::new();
        if self.unwritten > 0 {
            broken.push(format!("{} elements of C never written", self.unwritten));
        }
        if !within(self.rel_frobenius, tolerance.rel_frobenius) {
            broken.push(format!(
                "relative Frobenius error {:.3e} > {:.1e}",
                self.rel_frobenius, tolerance.rel_frobenius
            ));
        }
        if !within(self.max_abs, tolerance.max_abs) {
            broken.push(format!(
                "max abs error {:.3e} > {:.1e}",
                self.max_abs, tolerance.max_abs
            ));
        }
        if broken.is_empty() {
            Ok(())
        } else {
            Err(broken.join("; "))
        }
    }
}

impl ErrorReport {
    /// Every element written and equal to the reference. Against cuBLAS this is common: both
    /// accumulate each element in the same k order, so the same roundings happen.
    pub fn is_exact(&self) -> bool {
        self.max_abs == 0.0 && self.unwritten == 0
    }

    /// The error in a few words, for tables: `identical to cuBLAS` (or `to float64`) for an
    /// exact match, else `rel 1.2e-6, max abs 3.4e-5`.
    pub fn brief(&self) -> String {
        if self.is_exact() {
            format!("identical to {}", self.reference.short_name())
        } else {
            format!(
                "rel {:.1e}, max abs {:.1e}",
                self.rel_frobenius, self.max_abs
            )
        }
    }
}

impl Reference {
    /// `float64` or `cuBLAS`.
    pub fn short_name(self) -> &'static str {
        match self {
            Reference::CpuF64 => "float64",
            Reference::Cublas => "cuBLAS",
        }
    }
}

/// `value <= bound`, false for NaN.
fn within(value: f64, bound: f64) -> bool {
    value <= bound
}

impl std::fmt::Display for ErrorReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // "rel Frobenius 0.000e0" reads like a kernel compared with itself.
        if self.is_exact() {
            return match self.reference {
                Reference::CpuF64 => f.write_str("identical to the CPU float64 reference"),
                Reference::Cublas => f.write_str("identical to cuBLAS (f32 accumulation)"),
            };
        }
        write!(
            f,
            "rel Frobenius {:.3e}, max abs {:.3e}, unwritten {} (vs {})",
            self.rel_frobenius,
            self.max_abs,
            self.unwritten,
            match self.reference {
                Reference::CpuF64 => "CPU float64",
                Reference::Cublas => "cuBLAS, f32 accumulation",
            }
        )
    }
}

/// Compares an `m x n` result with row stride `ldc` to a packed reference. A reference of
/// another size, a stride shorter than a row or a result too short for its rows are errors.
pub fn compare<Out: Element>(
    c: &[Out],
    reference: &[f64],
    m: u32,
    n: u32,
    ldc: u32,
    kind: Reference,
) -> Result<ErrorReport, Error> {
    require_packed("the reference", reference.len(), m, n)?;
    if ldc < n {
        return Err(Error::Runtime(gemm_runtime::Error::LeadingDimTooSmall {
            order: StorageOrder::RowMajor,
            operand: Operand::C,
            ld: ldc,
            row_len: n,
        }));
    }
    let needed = match m {
        0 => 0,
        m => u64::from(m - 1) * u64::from(ldc) + u64::from(n),
    };
    if (c.len() as u64) < needed {
        return Err(Error::Runtime(gemm_runtime::Error::BufferTooSmall {
            order: StorageOrder::RowMajor,
            operand: Operand::C,
            len: c.len(),
            needed,
            rows: m,
            cols: n,
            ld: ldc,
        }));
    }
    let (m, n, ldc) = (m as usize, n as usize, ldc as usize);
    let (mut max_abs, mut error_sq, mut reference_sq, mut unwritten) = (0.0f64, 0.0, 0.0, 0);
    for row in 0..m {
        let computed = &c[row * ldc..row * ldc + n];
        let expected = &reference[row * n..row * n + n];
        for (&value, &want) in computed.iter().zip(expected) {
            reference_sq += want * want;
            if value.is_poison() {
                unwritten += 1;
                continue;
            }
            let diff = (value.to_f64() - want).abs();
            // A NaN difference must land in max_abs, not be skipped by the comparison.
            if diff.is_nan() || diff > max_abs {
                max_abs = diff;
            }
            error_sq += diff * diff;
        }
    }
    Ok(ErrorReport {
        max_abs,
        rel_frobenius: (error_sq / reference_sq).sqrt(),
        unwritten,
        reference: kind,
    })
}

/// `Ok` if `len` elements are exactly a packed `rows x cols` matrix.
fn require_packed(what: &'static str, len: usize, rows: u32, cols: u32) -> Result<(), Error> {
    if len as u64 == u64::from(rows) * u64::from(cols) {
        Ok(())
    } else {
        Err(Error::PackedSize {
            what,
            len,
            rows,
            cols,
        })
    }
}

/// `A·B` in float64 on all CPU cores: packed `m x n`. A problem whose `a` or `b` is not
/// packed `m x k` or `k x n` is an error.
pub fn cpu_reference<In: Element, InB: Element>(
    problem: &Problem<In, InB>,
) -> Result<Vec<f64>, Error> {
    problem.check_packed()?;
    let a: Vec<f64> = problem.a.iter().map(|x| x.to_f64()).collect();
    let b: Vec<f64> = problem.b.iter().map(|x| x.to_f64()).collect();
    Ok(gemm_f64(&a, &b, problem.m, problem.n, problem.k))
}

/// `A·B` of a packed problem whose fp8 operands carry block scales (`quant: block`) in float64:
/// A's element (r, k) times its scale `a_scales[(k / 128)·M' + r]` (M' = M rounded up to 4,
/// the length of A's scale lines), B's (k, c) times
/// `b_scales[(c / 128)·ceil(K/128) + k / 128]`, exactly (the scales fold into the operands
/// element by element, so one GEMM of the scaled operands is the sum of the scaled blocks).
pub fn block_scaled_reference<In: Element, InB: Element>(
    problem: &Problem<In, InB>,
    a_scales: &[f32],
    b_scales: &[f32],
) -> Result<Vec<f64>, Error> {
    problem.check_packed()?;
    let (m, n, k) = (problem.m as usize, problem.n as usize, problem.k as usize);
    let block = Quant::BLOCK as usize;
    let k_blocks = k.div_ceil(block);
    let m_lines = m.next_multiple_of(Quant::A_LINE_MULTIPLE as usize);
    require_packed(
        "A's block scales",
        a_scales.len(),
        k_blocks as u32,
        m_lines as u32,
    )?;
    require_packed(
        "B's block scales",
        b_scales.len(),
        n.div_ceil(block) as u32,
        k_blocks as u32,
    )?;
    let a: Vec<f64> = (0..m * k)
        .map(|i| {
            let (row, kk) = (i / k, i % k);
            problem.a[i].to_f64() * f64::from(a_scales[kk / block * m_lines + row])
        })
        .collect();
    let b: Vec<f64> = (0..k * n)
        .map(|i| {
            let (kk, col) = (i / n, i % n);
            problem.b[i].to_f64() * f64::from(b_scales[col / block * k_blocks + kk / block])
        })
        .collect();
    Ok(gemm_f64(&a, &b, problem.m, problem.n, problem.k))
}

/// `a·b` in float64 on all CPU cores: `a` is m x k, `b` k x n, both packed row-major.
fn gemm_f64(a: &[f64], b: &[f64], m: u32, n: u32, k: u32) -> Vec<f64> {
    let (m, n, k) = (m as usize, n as usize, k as usize);
    let mut c = vec![0.0f64; m * n];
    if m == 0 || n == 0 {
        return c;
    }
    let threads = std::thread::available_parallelism().map_or(1, |p| p.get());
    let rows_per_thread = m.div_ceil(threads);
    std::thread::scope(|scope| {
        for (chunk, c_rows) in c.chunks_mut(rows_per_thread * n).enumerate() {
            let first_row = chunk * rows_per_thread;
            let a_rows = &a[first_row * k..(first_row + c_rows.len() / n) * k];
            let b = &b;
            scope.spawn(move || gemm_f64_rows(a_rows, b, c_rows, n, k));
        }
    });
    c
}

/// `c += a·b` for a band of rows: `a` is rows x k, `b` is k x n, `c` is rows x n, packed.
///
/// Cache blocking keeps a K_BLOCK x N_BLOCK block of B (128 KB) hot while the band's rows pass
/// over it; inside, a 4 x 8 block of C stays in registers for the whole K_BLOCK run, so each
/// B value loaded serves four rows and each A value eight columns.
fn gemm_f64_rows(a: &[f64], b: &[f64], c: &mut [f64], n: usize, k: usize) {
    const N_BLOCK: usize = 128;
    const K_BLOCK: usize = 128;
    const MR: usize = 4;
    const NR: usize = 8;
    let rows = c.len() / n;
    for j0 in (0..n).step_by(N_BLOCK) {
        let j1 = (j0 + N_BLOCK).min(n);
        for p0 in (0..k).step_by(K_BLOCK) {
            let p1 = (p0 + K_BLOCK).min(k);
            for r0 in (0..rows).step_by(MR) {
                let mr = MR.min(rows - r0);
                for j in (j0..j1).step_by(NR) {
                    let nr = NR.min(j1 - j);
                    if mr == MR && nr == NR {
                        let mut acc = [[0.0f64; NR]; MR];
                        for (r, acc_row) in acc.iter_mut().enumerate() {
                            acc_row.copy_from_slice(&c[(r0 + r) * n + j..][..NR]);
                        }
                        for p in p0..p1 {
                            let b_values: &[f64; NR] =
                                b[p * n + j..][..NR].try_into().expect("NR values");
                            for (r, acc_row) in acc.iter_mut().enumerate() {
                                let a_value = a[(r0 + r) * k + p];
                                for (out, &b_value) in acc_row.iter_mut().zip(b_values) {
                                    *out += a_value * b_value;
                                }
                            }
                        }
                        for (r, acc_row) in acc.iter().enumerate() {
                            c[(r0 + r) * n + j..][..NR].copy_from_slice(acc_row);
                        }
                    } else {
                        // Edges of the matrix: the same sums, one element at a time.
                        for r in r0..r0 + mr {
                            for q in j..j + nr {
                                let mut sum = c[r * n + q];
                                for p in p0..p1 {
                                    sum += a[r * k + p] * b[p * n + q];
                                }
                                c[r * n + q] = sum;
                            }
                        }
                    }
                }
            }
        }
    }
}

/// `A·B` by cuBLAS on the exact inputs with f32 accumulation ([`CublasGemm::reference`]).
pub fn cublas_reference<In: Element, InB: Element>(
    stream: &Arc<CudaStream>,
    problem: &Problem<In, InB>,
) -> Result<Vec<f64>, Error> {
    problem.check_packed()?;
    let blas = Cublas::new(stream)?;
    let mut c = stream
        .alloc_zeros::<f32>(problem.m as usize * problem.n as usize)
        .during(|| "allocating C".to_string())?;
    let reference = CublasGemm::reference(In::STORAGE);
    let (m, n, k) = (problem.m, problem.n, problem.k);
    if In::STORAGE.is_fp8() {
        // cuBLAS's GemmEx takes no fp8: the same values as bf16, exactly.
        let widened = |values: Vec<half::bf16>, what: &str| {
            stream
                .clone_htod(&values)
                .during(|| format!("copying {what}, widened to bf16, to the device"))
        };
        let a = widened(crate::baseline::cublas::widen_fp8(&problem.a), "A")?;
        let b = widened(crate::baseline::cublas::widen_fp8(&problem.b), "B")?;
        blas.gemm(reference, &a, &b, &mut c, m, n, k)?;
    } else if InB::STORAGE != In::STORAGE {
        return Err(Error::Runtime(gemm_runtime::Error::UnsupportedTypes {
            kernel: "the cuBLAS reference".to_string(),
            dtype: format!("{}x{}", In::NAME, InB::NAME),
            out: "f32".to_string(),
        }));
    } else {
        let a = stream
            .clone_htod(&problem.a)
            .during(|| "copying A to the device".to_string())?;
        // B's type is A's here: its values pass through f32 unchanged.
        let b: Vec<In> = problem.b.iter().map(|v| In::from_f32(v.to_f32())).collect();
        let b = stream
            .clone_htod(&b)
            .during(|| "copying B to the device".to_string())?;
        blas.gemm(reference, &a, &b, &mut c, m, n, k)?;
    }
    let c = stream
        .clone_dtoh(&c)
        .during(|| "copying the cuBLAS result back".to_string())?;
    Ok(c.into_iter().map(f64::from).collect())
}

/// A packed row-major `rows x cols` matrix as it lies in memory in `order`: itself, or its
/// transpose (packed columns).
pub fn in_order<T: Copy>(packed: &[T], rows: u32, cols: u32, order: StorageOrder) -> Vec<T> {
    match order {
        StorageOrder::RowMajor => packed.to_vec(),
        StorageOrder::ColMajor => {
            let (rows, cols) = (rows as usize, cols as usize);
            (0..cols)
                .flat_map(|col| (0..rows).map(move |row| packed[row * cols + col]))
                .collect()
        }
    }
}

/// Runs the kernel once on the problem with C (row stride `ldc`) poisoned first, A and B
/// laid out as the kernel's layout says; returns all of C, gaps between rows included.
pub fn run_poisoned<In: Element, Out: Element, InB: Element>(
    kernel: &GemmKernel<In, Out, InB>,
    stream: &Arc<CudaStream>,
    problem: &Problem<In, InB>,
    ldc: u32,
) -> Result<Vec<Out>, Error> {
    let Problem { m, n, k, .. } = *problem;
    let launch = kernel.info().launch();
    // Packed: each operand's leading dimension is the length of one of its lines.
    let lda = launch.stored_dims(Operand::A, m, n, k).1;
    let ldb = launch.stored_dims(Operand::B, m, n, k).1;
    run_poisoned_with_ld(kernel, stream, problem, (lda, ldb, ldc))
}

/// [`run_poisoned`] with leading dimensions `(lda, ldb, ldc)` at least the lines' lengths:
/// the padding of A and B holds NaN (a kernel that reads past a line computes NaNs), C's is
/// poisoned like the rest of C and returned with it.
pub fn run_poisoned_with_ld<In: Element, Out: Element, InB: Element>(
    kernel: &GemmKernel<In, Out, InB>,
    stream: &Arc<CudaStream>,
    problem: &Problem<In, InB>,
    (lda, ldb, ldc): (u32, u32, u32),
) -> Result<Vec<Out>, Error> {
    problem.check_packed()?;
    let Problem { m, n, k, .. } = *problem;
    let launch = kernel.info().launch();
    let a = stream
        .clone_htod(&padded_operand(
            launch,
            Operand::A,
            &problem.a,
            (m, n, k),
            lda,
        ))
        .during(|| "copying A to the device".to_string())?;
    let b = stream
        .clone_htod(&padded_operand(
            launch,
            Operand::B,
            &problem.b,
            (m, n, k),
            ldb,
        ))
        .during(|| "copying B to the device".to_string())?;
    let c_len = m as usize * ldc as usize;
    let mut c = stream
        .clone_htod(&vec![Out::poison(); c_len])
        .during(|| "writing the poisoned C".to_string())?;
    kernel.launch_with_ld(stream, &a, &b, &mut c, m, n, k, lda, ldb, ldc)?;
    stream
        .clone_dtoh(&c)
        .during(|| format!("copying C of `{}` back", kernel.info().name()))
}

/// A packed row-major operand laid out as the kernel reads it (its storage order), each line
/// padded with NaN to `ld` (a kernel that reads past a line computes NaNs).
pub fn padded_operand<E: Element>(
    launch: &LaunchShape,
    operand: Operand,
    values: &[E],
    (m, n, k): (u32, u32, u32),
    ld: u32,
) -> Vec<E> {
    let (lines, len) = launch.stored_dims(operand, m, n, k);
    let (rows, cols) = match operand {
        Operand::A => (m, k),
        _ => (k, n),
    };
    let values = in_order(values, rows, cols, launch.order(operand));
    if ld <= len {
        // Too short a stride is the launch's error to report; pass the packed lines.
        return values;
    }
    let (ld, len) = (ld as usize, len as usize);
    let mut padded = vec![E::from_f32(f32::NAN); lines as usize * ld];
    for (line, values) in values.chunks_exact(len).enumerate() {
        padded[line * ld..][..len].copy_from_slice(values);
    }
    padded
}

/// Runs the kernel on `problem` and measures it against a precomputed reference (packed
/// `m x n`, else an error before anything runs).
pub fn check_against<In: Element, Out: Element, InB: Element>(
    kernel: &GemmKernel<In, Out, InB>,
    stream: &Arc<CudaStream>,
    problem: &Problem<In, InB>,
    reference: &[f64],
    kind: Reference,
) -> Result<ErrorReport, Error> {
    require_packed("the reference", reference.len(), problem.m, problem.n)?;
    let c = run_poisoned(kernel, stream, problem, problem.n)?;
    compare(&c, reference, problem.m, problem.n, problem.n, kind)
}

/// One verification: fresh inputs from `seed`, poisoned C, and the reference `reference_for`
/// picks for the size.
pub fn verify<In: Element, Out: Element, InB: Element>(
    kernel: &GemmKernel<In, Out, InB>,
    stream: &Arc<CudaStream>,
    m: u32,
    n: u32,
    k: u32,
    seed: u64,
) -> Result<ErrorReport, Error> {
    let problem = Problem::<In, InB>::random(m, n, k, seed);
    let (reference, kind) = reference_of(stream, &problem)?;
    check_against(kernel, stream, &problem, &reference, kind)
}

/// How far each product of a strided batch is from its reference, and whether the kernel
/// wrote anything of C outside the products (the gaps between rows and between matrices).
#[derive(Clone, Debug, PartialEq)]
pub struct BatchReport {
    pub products: Vec<ErrorReport>,
    /// Elements of C's buffer outside every product's `m x n` that no longer hold the poison.
    pub gap_writes: usize,
}

impl BatchReport {
    /// `Err` naming every product that breaks a bound, and any write outside the products.
    pub fn check(&self, tolerance: &Tolerance) -> Result<(), String> {
        let mut broken: Vec<String> = self
            .products
            .iter()
            .enumerate()
            .filter_map(|(i, report)| {
                report
                    .check(tolerance)
                    .err()
                    .map(|why| format!("product {i}: {why}"))
            })
            .collect();
        if self.gap_writes > 0 {
            broken.push(format!(
                "{} elements of C outside the products written",
                self.gap_writes
            ));
        }
        if broken.is_empty() {
            Ok(())
        } else {
            Err(broken.join("; "))
        }
    }

    /// The worst product's relative error.
    pub fn worst(&self) -> Option<&ErrorReport> {
        self.products
            .iter()
            .max_by(|x, y| x.rel_frobenius.total_cmp(&y.rel_frobenius))
    }
}

/// Each product of a strided batch in `c` (rows `ldc` apart, products `stride` apart) against
/// its reference, and how many elements outside the products no longer hold the poison.
fn compare_batch<Out: Element>(
    c: &mut [Out],
    references: &[Vec<f64>],
    (m, n, ldc, stride, kind): (u32, u32, u32, u64, Reference),
) -> Result<(Vec<ErrorReport>, usize), Error> {
    let mut products = Vec::with_capacity(references.len());
    for (i, reference) in references.iter().enumerate() {
        let matrix = &mut c[i * stride as usize..];
        products.push(compare(matrix, reference, m, n, ldc, kind)?);
        // What the product owns is compared; mark it, so that only gaps stay to be counted.
        for row in 0..m as usize {
            let at = row * ldc as usize;
            matrix[at..at + n as usize].fill(Out::poison());
        }
    }
    let gap_writes = c.iter().filter(|value| !value.is_poison()).count();
    Ok((products, gap_writes))
}

/// The strided-batch buffer of one operand: `matrices[i]` (packed `rows x cols`, row-major)
/// laid out in `order` with lines `ld` apart, at `i · stride` elements; `fill` elsewhere. A
/// stride of 0 holds `matrices[0]` alone.
pub fn batch_buffer<T: Copy>(
    matrices: &[&[T]],
    (rows, cols): (u32, u32),
    order: StorageOrder,
    ld: u32,
    stride: u64,
    fill: T,
) -> Vec<T> {
    let (lines, line_len) = match order {
        StorageOrder::RowMajor => (rows, cols),
        StorageOrder::ColMajor => (cols, rows),
    };
    let stored = if stride == 0 {
        &matrices[..1]
    } else {
        matrices
    };
    let matrix_len = lines as usize * ld as usize;
    let len = (stored.len() - 1) * stride as usize + matrix_len;
    let mut buffer = vec![fill; len];
    for (i, matrix) in stored.iter().enumerate() {
        let laid_out = in_order(matrix, rows, cols, order);
        let start = i * stride as usize;
        for (line, values) in laid_out.chunks(line_len.max(1) as usize).enumerate() {
            let at = start + line * ld as usize;
            buffer[at..at + values.len()].copy_from_slice(values);
        }
    }
    buffer
}

/// Runs the kernel once on a strided batch of `batch.count` random problems (seeds `seed`,
/// `seed + 1`, ..), laid out at the batch's strides with the leading dimensions `lds`, C
/// poisoned everywhere first; measures each product against its own reference (the one
/// [`reference_for`] picks) and checks that nothing outside the products was written. An
/// operand of stride 0 is the first problem's, shared by every product.
#[allow(clippy::too_many_arguments)]
pub fn verify_batch<In: Element, Out: Element, InB: Element>(
    kernel: &GemmKernel<In, Out, InB>,
    stream: &Arc<CudaStream>,
    m: u32,
    n: u32,
    k: u32,
    lds: LeadingDims,
    batch: Batch,
    seed: u64,
) -> Result<BatchReport, Error> {
    verify_fused_batch(kernel, stream, m, n, k, lds, batch, seed, &FusedCase::PLAIN)
}

/// The fused-epilogue arguments [`verify_fused_batch`] passes: α, β, where C-in comes from,
/// and the bias's batch stride (`None`: one vector shared by the batch; `Some(0)` is the
/// same, spelled out). C-in and the bias hold fresh random normal values.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FusedCase {
    pub alpha: f32,
    pub beta: f32,
    /// C-in is C itself (filled with C-in's values before the launch) rather than a buffer
    /// of its own.
    pub in_place: bool,
    /// Elements from one product's bias vector to the next, beyond the vector's length.
    pub bias_gap: Option<u64>,
    /// fp8 A's and B's dequantization scales (`quant: tensor`; 1 and 1 otherwise).
    pub quant_scales: (f32, f32),
}

impl FusedCase {
    /// A plain kernel's arguments.
    pub const PLAIN: FusedCase = FusedCase {
        alpha: 1.0,
        beta: 0.0,
        in_place: false,
        bias_gap: None,
        quant_scales: (1.0, 1.0),
    };

    /// Arguments for what a kernel's spec reads: α = 1.5 (with `scale`), β = -0.75 and a C-in
    /// buffer (`alpha_beta`), a bias strided through the batch with a gap of 3 elements, fp8
    /// scales 0.5 and 1.25 (`quant: tensor`; their product is exact in f32, as the kernel
    /// forms it).
    pub fn for_spec(fused: &FusedSpec) -> FusedCase {
        FusedCase {
            alpha: if fused.scale.has_alpha() { 1.5 } else { 1.0 },
            beta: if fused.scale.reads_c() { -0.75 } else { 0.0 },
            in_place: false,
            bias_gap: fused.bias.vector().map(|_| 3),
            quant_scales: match fused.quant {
                Quant::Tensor => (0.5, 1.25),
                // Block scales are random powers of two, drawn by the verification.
                Quant::None | Quant::Block => (1.0, 1.0),
            },
        }
    }
}

/// [`verify_batch`] for a kernel with a fused epilogue: random C-in and bias (normal, with a
/// quarter of the product's standard deviation, at least 1; rounded to their types) are
/// passed as `case` says, with random rows' factors (`row_scale`, from 1/4 to 5/4), and each
/// product's reference is the epilogue
/// applied in float64 ([`FusedSpec::apply`]) to the product's. C is poisoned first, or holds
/// C-in where `case.in_place`. A kernel that writes an aux output (`aux: pre_activation`)
/// gets a poisoned one; its products follow D's in the report, measured against the values
/// before the activation, and its gaps count with C's.
#[allow(clippy::too_many_arguments)]
pub fn verify_fused_batch<In: Element, Out: Element, InB: Element>(
    kernel: &GemmKernel<In, Out, InB>,
    stream: &Arc<CudaStream>,
    m: u32,
    n: u32,
    k: u32,
    lds: LeadingDims,
    batch: Batch,
    seed: u64,
    case: &FusedCase,
) -> Result<BatchReport, Error> {
    verify_fused_batch_through(
        kernel,
        stream,
        (m, n, k),
        lds,
        batch,
        seed,
        case,
        |a, b, c, epilogue| kernel.launch_fused(stream, a, b, c, m, n, k, lds, batch, epilogue),
    )
}

/// [`verify_fused_batch`] with the launch given: `run(a, b, c, epilogue)` computes the
/// products with the operands laid out as `kernel` reads them, for instance through
/// `Matmul::run_fused`, which picks `kernel`.
#[allow(clippy::too_many_arguments)]
pub fn verify_fused_batch_through<In: Element, Out: Element, InB: Element>(
    kernel: &GemmKernel<In, Out, InB>,
    stream: &Arc<CudaStream>,
    (m, n, k): (u32, u32, u32),
    lds: LeadingDims,
    batch: Batch,
    seed: u64,
    case: &FusedCase,
    run: impl FnOnce(
        &CudaSlice<In>,
        &CudaSlice<InB>,
        &mut CudaSlice<Out>,
        &mut Epilogue<'_, Out>,
    ) -> Result<(), gemm_runtime::Error>,
) -> Result<BatchReport, Error> {
    if batch.count == 0 {
        return Err(Error::Runtime(gemm_runtime::Error::BatchCount {
            count: 0,
            limit: gemm_runtime::check::MAX_BATCH,
        }));
    }
    let fused = FusedSpec::of_info(kernel.info())?;
    let launch = kernel.info().launch();
    let mut problems: Vec<Problem<In, InB>> = (0..u64::from(batch.count))
        .map(|i| Problem::random(m, n, k, seed + i))
        .collect();
    let (first_a, first_b) = (problems[0].a.clone(), problems[0].b.clone());
    for problem in problems.iter_mut().skip(1) {
        if batch.stride_a == 0 {
            problem.a.clone_from(&first_a);
        }
        if batch.stride_b == 0 {
            problem.b.clone_from(&first_b);
        }
    }
    // Block scales (`quant: block`): powers of two from 1/BLOCK_SCALE_MAX to BLOCK_SCALE_MAX,
    // so every scaled product is exact; the references scale the operands in float64. One product (the launch refuses
    // more).
    let k_blocks = k.div_ceil(Quant::BLOCK) as usize;
    let mut scale_rng = NormalRng::new(seed ^ 0xb10c_5ca1e);
    let max_exponent = BLOCK_SCALE_MAX.log2() as i32;
    let mut power_of_two = || {
        let exponent = (scale_rng.next_u64() % (2 * max_exponent as u64 + 1)) as i32;
        2f32.powi(exponent - max_exponent)
    };
    let (a_block_scales, b_block_scales): (Vec<f32>, Vec<f32>) = if fused.quant == Quant::Block {
        (
            (0..k_blocks * (m as usize).next_multiple_of(Quant::A_LINE_MULTIPLE as usize))
                .map(|_| power_of_two())
                .collect(),
            (0..n.div_ceil(Quant::BLOCK) as usize * k_blocks)
                .map(|_| power_of_two())
                .collect(),
        )
    } else {
        (Vec::new(), Vec::new())
    };
    let (kind, mut references) = if fused.quant == Quant::Block {
        let references = problems
            .iter()
            .map(|problem| block_scaled_reference(problem, &a_block_scales, &b_block_scales))
            .collect::<Result<Vec<_>, Error>>()?;
        (Reference::CpuF64, references)
    } else {
        let references = problems
            .iter()
            .map(|problem| reference_of(stream, problem).map(|(reference, _)| reference))
            .collect::<Result<Vec<_>, Error>>()?;
        (reference_for(m, n, k), references)
    };
    let a_matrices: Vec<&[In]> = problems.iter().map(|p| p.a.as_slice()).collect();
    let a = batch_buffer(
        &a_matrices,
        (m, k),
        launch.a_order,
        lds.lda,
        batch.stride_a,
        In::from_f32(0.0),
    );
    let b_matrices: Vec<&[InB]> = problems.iter().map(|p| p.b.as_slice()).collect();
    let b = batch_buffer(
        &b_matrices,
        (k, n),
        launch.b_order,
        lds.ldb,
        batch.stride_b,
        InB::from_f32(0.0),
    );
    let c_len =
        (batch.count as usize - 1) * batch.stride_c as usize + m as usize * lds.ldc as usize;
    let a = stream
        .clone_htod(&a)
        .during(|| "copying the batch's A to the device".to_string())?;
    let b = stream
        .clone_htod(&b)
        .during(|| "copying the batch's B to the device".to_string())?;

    // The epilogue's inputs: C-in laid out as C, and the bias vectors; the references become
    // the epilogue of the products.
    let mut rng = NormalRng::new(seed ^ 0x5eed_e1b1_0605_u64);
    let mut c_in_host = vec![Out::poison(); c_len];
    // C-in and the bias at a quarter of the product's standard deviation (sqrt(k)), at least
    // 1: a kernel that leaves either out is off by about a tenth of D at any K, where
    // standard normal ones would hide under the output's rounding from K = 4096 on.
    let side = (f64::from(k.max(16))).sqrt() / 4.0;
    let c_in_products: Vec<Vec<Out>> = (0..batch.count)
        .map(|_| {
            (0..u64::from(m) * u64::from(n))
                .map(|_| Out::from_f32((rng.next_normal() * side) as f32))
                .collect()
        })
        .collect();
    if fused.scale.reads_c() {
        for (i, values) in c_in_products.iter().enumerate() {
            for row in 0..m as usize {
                let at = i * batch.stride_c as usize + row * lds.ldc as usize;
                c_in_host[at..at + n as usize]
                    .copy_from_slice(&values[row * n as usize..][..n as usize]);
            }
        }
    }
    let bias_len = match fused.bias.vector() {
        Some((BiasAlong::Row, _)) => m,
        _ => n,
    };
    let bias_stride = case.bias_gap.map_or(0, |gap| u64::from(bias_len) + gap);
    let bias_host: Vec<f32> = (0..(u64::from(batch.count) - 1) * bias_stride + u64::from(bias_len))
        .map(|_| (rng.next_normal() * side) as f32)
        .collect();
    let bias_f32 = matches!(fused.bias.vector(), Some((_, DType::F32)));
    let bias_value = |product: u32, row: u32, col: u32| -> f64 {
        let at = u64::from(product) * bias_stride
            + u64::from(match fused.bias.vector() {
                Some((BiasAlong::Row, _)) => row,
                _ => col,
            });
        let value = bias_host[at as usize];
        if bias_f32 {
            f64::from(value)
        } else {
            Out::from_f32(value).to_f64()
        }
    };
    // Per-tensor scales multiply the product; block scales are in the references already.
    let quant_factor = match fused.quant {
        Quant::Tensor => f64::from(case.quant_scales.0) * f64::from(case.quant_scales.1),
        Quant::None | Quant::Block => 1.0,
    };
    // The rows' factors (`row_scale`): M per product, from 1/4 to 5/4 (a router's weights,
    // and far enough from 1 that a kernel that leaves them out fails).
    let row_factors: Vec<f32> = (0..u64::from(batch.count) * u64::from(m))
        .map(|_| (0.25 + rng.next_uniform()) as f32)
        .collect();
    let mut aux_references = references.clone();
    for (i, (reference, aux_reference)) in references
        .iter_mut()
        .zip(aux_references.iter_mut())
        .enumerate()
    {
        for row in 0..m {
            for col in 0..n {
                let at = (row * n + col) as usize;
                let pre = fused.pre_activation(
                    reference[at] * quant_factor,
                    f64::from(case.alpha),
                    f64::from(case.beta),
                    c_in_products[i][at].to_f64(),
                    bias_value(i as u32, row, col),
                );
                aux_reference[at] = pre;
                reference[at] = fused.scale_row(
                    gemm_runtime::epilogue::activate(fused.activation, pre),
                    f64::from(row_factors[i * m as usize + row as usize]),
                );
            }
        }
    }
    let c_in = if fused.scale.reads_c() && !case.in_place {
        Some(
            stream
                .clone_htod(&c_in_host)
                .during(|| "copying C-in to the device".to_string())?,
        )
    } else {
        None
    };
    let bias_out = stream
        .clone_htod(
            &bias_host
                .iter()
                .map(|&v| Out::from_f32(v))
                .collect::<Vec<_>>(),
        )
        .during(|| "copying the bias to the device".to_string())?;
    let bias_wide = stream
        .clone_htod(&bias_host)
        .during(|| "copying the bias to the device".to_string())?;
    let initial = if case.in_place && fused.scale.reads_c() {
        c_in_host
    } else {
        vec![Out::poison(); c_len]
    };
    let mut c = stream
        .clone_htod(&initial)
        .during(|| "writing the initial C".to_string())?;
    let mut epilogue = Epilogue::none().alpha(case.alpha);
    if fused.scale.reads_c() {
        epilogue = epilogue.beta(
            case.beta,
            match &c_in {
                Some(buffer) => CIn::Buffer(buffer),
                None => CIn::Output,
            },
        );
    } else if case.beta != 0.0 {
        // A β for a kernel that reads no C: the launch refuses it, as it should.
        epilogue = epilogue.beta(case.beta, CIn::Output);
    }
    if fused.bias.vector().is_some() {
        let bias = if bias_f32 {
            BiasArg::f32(&bias_wide)
        } else {
            BiasArg::output(&bias_out)
        };
        epilogue = epilogue.bias(bias.strided(bias_stride));
    }
    let quant_scales = match fused.quant {
        Quant::Block => [a_block_scales, b_block_scales],
        _ => [vec![case.quant_scales.0], vec![case.quant_scales.1]],
    }
    .into_iter()
    .map(|scales| {
        stream
            .clone_htod(&scales)
            .during(|| "copying fp8 scales to the device".to_string())
    })
    .collect::<Result<Vec<_>, Error>>()?;
    if fused.quant != Quant::None {
        epilogue = epilogue.quant_scales(&quant_scales[0], &quant_scales[1]);
    }
    let row_factors = stream
        .clone_htod(&row_factors)
        .during(|| "copying the rows' factors to the device".to_string())?;
    if fused.row_scale != RowScale::None {
        epilogue = epilogue.row_scale(&row_factors);
    }
    // The aux output, poisoned like C, and its references: the values before the activation.
    let writes_aux = fused.aux != Aux::None;
    let mut aux = stream
        .clone_htod(&vec![Out::poison(); if writes_aux { c_len } else { 1 }])
        .during(|| "writing the poisoned aux output".to_string())?;
    if writes_aux {
        epilogue = epilogue.aux(&mut aux);
    }
    run(&a, &b, &mut c, &mut epilogue)?;
    let mut c = stream
        .clone_dtoh(&c)
        .during(|| format!("copying C of `{}` back", kernel.info().name()))?;
    let shape = (m, n, lds.ldc, batch.stride_c, kind);
    let (mut products, mut gap_writes) = compare_batch(&mut c, &references, shape)?;
    if writes_aux {
        let mut aux = stream
            .clone_dtoh(&aux)
            .during(|| format!("copying the aux output of `{}` back", kernel.info().name()))?;
        let (aux_products, aux_gap_writes) = compare_batch(&mut aux, &aux_references, shape)?;
        products.extend(aux_products);
        gap_writes += aux_gap_writes;
    }
    Ok(BatchReport {
        products,
        gap_writes,
    })
}

/// A launch refused inside a CUDA-graph capture the caller began on `stream` without the
/// runtime (cudarc's event tracking on): asserts the refusal is
/// [`gemm_runtime::Error::CaptureNeedsUntrackedBuffers`] and that the capture is still active,
/// then ends it (dropping its graph) and asserts the context holds no error.
pub fn assert_refused_and_capture_goes_on(
    ctx: &cudarc::driver::CudaContext,
    stream: &Arc<CudaStream>,
    refused: &gemm_runtime::Error,
) {
    use cudarc::driver::sys::{CUgraphInstantiate_flags, CUstreamCaptureStatus};
    assert!(
        matches!(
            refused,
            gemm_runtime::Error::CaptureNeedsUntrackedBuffers { .. }
        ),
        "{refused}"
    );
    assert_eq!(
        stream.capture_status().unwrap(),
        CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_ACTIVE
    );
    drop(stream.end_capture(CUgraphInstantiate_flags(0)).unwrap());
    ctx.check_err().unwrap();
}

#[cfg(test)]
mod tests {
    use super::*;
    use half::bf16;

    #[test]
    fn batch_buffers_put_each_matrix_at_its_stride() {
        let first = [1, 2, 3, 4, 5, 6];
        let second = [7, 8, 9, 10, 11, 12];
        // Two 2 x 3 row-major matrices, rows 4 apart, matrices 10 apart.
        let buffer = batch_buffer(&[&first, &second], (2, 3), StorageOrder::RowMajor, 4, 10, 0);
        assert_eq!(
            buffer,
            [1, 2, 3, 0, 4, 5, 6, 0, 0, 0, 7, 8, 9, 0, 10, 11, 12, 0]
        );
        // Column-major: columns of 2, 2 apart; a shared operand holds the first matrix once.
        let shared = batch_buffer(&[&first, &second], (2, 3), StorageOrder::ColMajor, 2, 0, 0);
        assert_eq!(shared, [1, 4, 2, 5, 3, 6]);
    }

    #[test]
    fn batch_reports_name_the_broken_product_and_gap_writes() {
        let good = compare(&[3.0f32, 4.0], &[3.0, 4.0], 1, 2, 2, Reference::CpuF64).unwrap();
        let bad = compare(&[3.0f32, 5.0], &[3.0, 4.0], 1, 2, 2, Reference::CpuF64).unwrap();
        let tolerance = Tolerance::f32_accumulation(64);
        let report = BatchReport {
            products: vec![good, bad],
            gap_writes: 0,
        };
        let broken = report.check(&tolerance).unwrap_err();
        assert!(broken.starts_with("product 1: "), "{broken}");
        assert_eq!(report.worst(), Some(&bad));
        let report = BatchReport {
            products: vec![good, good],
            gap_writes: 3,
        };
        assert_eq!(
            report.check(&tolerance).unwrap_err(),
            "3 elements of C outside the products written"
        );
        BatchReport {
            products: vec![good],
            gap_writes: 0,
        }
        .check(&tolerance)
        .unwrap();
    }

    fn naive(problem: &Problem<f32>) -> Vec<f64> {
        let (m, n, k) = (problem.m as usize, problem.n as usize, problem.k as usize);
        let mut c = vec![0.0; m * n];
        for i in 0..m {
            for j in 0..n {
                c[i * n + j] = (0..k)
                    .map(|p| f64::from(problem.a[i * k + p]) * f64::from(problem.b[p * n + j]))
                    .sum();
            }
        }
        c
    }

    #[test]
    fn column_major_storage_is_the_transpose() {
        let packed = [1, 2, 3, 4, 5, 6];
        assert_eq!(in_order(&packed, 2, 3, StorageOrder::RowMajor), packed);
        assert_eq!(
            in_order(&packed, 2, 3, StorageOrder::ColMajor),
            [1, 4, 2, 5, 3, 6]
        );
    }

    #[test]
    fn tolerances_follow_the_input_and_output_types() {
        let of = |dtype, out| {
            Tolerance::for_kernel(KernelTypes::new(dtype, out).unwrap(), 256, 256, 1024)
                .rel_frobenius
        };
        assert_eq!(of(DType::F32, DType::F32), 1e-5);
        assert_eq!(of(DType::Tf32, DType::F32), 1e-3);
        assert_eq!(of(DType::Bf16, DType::Bf16), BF16_OUT_REL);
        assert_eq!(of(DType::Bf16, DType::F32), 2e-5);
        assert_eq!(of(DType::F16, DType::F16), 1e-3);
        assert_eq!(of(DType::F16, DType::F32), 2e-5);
    }

    /// Rounding to bf16 cannot break the bf16 bound, and the largest element's bound stayed.
    #[test]
    fn the_bf16_bound_lies_above_rounding_to_bf16() {
        assert!(BF16_OUT_REL > 2f64.powi(-8));
        let types = KernelTypes::new(DType::Bf16, DType::Bf16).unwrap();
        for k in [1, 64, 4096, 16384] {
            let tolerance = Tolerance::for_kernel(types, 256, 256, k);
            assert_eq!(tolerance.max_abs, Tolerance::scaled(1e-2, k).max_abs);
        }
    }

    /// The sizes of the fused inputs ([`verify_fused_batch`]: C-in and bias at a quarter of
    /// the product's standard deviation) against the bf16 bound, on a model of D before its
    /// activation (α = 1.5, β = -0.75, the product normal with variance k): D rounded to bf16
    /// passes with room, D without β·C-in fails by 10x at every K. With standard normal C-in
    /// it would pass from K = 4096 on (0.79e-2 against the old 1e-2 at 16x4096x4096).
    #[test]
    fn fused_inputs_make_a_dropped_c_in_break_the_bf16_bound() {
        let round = |x: f64| bf16::from_f64(x).to_f64();
        for k in [16u32, 1024, 4096, 16384] {
            let side = f64::from(k.max(16)).sqrt() / 4.0;
            let mut rng = NormalRng::new(u64::from(k));
            let (mut honest, mut dropped, mut norm) = (0.0, 0.0, 0.0);
            for _ in 0..16384 {
                let product = rng.next_normal() * f64::from(k).sqrt();
                let c_in = round(rng.next_normal() * side);
                let bias = round(rng.next_normal() * side);
                let d = 1.5 * product - 0.75 * c_in + bias;
                honest += (round(d) - d).powi(2);
                dropped += (round(1.5 * product + bias) - d).powi(2);
                norm += d * d;
            }
            let (honest, dropped) = ((honest / norm).sqrt(), (dropped / norm).sqrt());
            assert!(
                honest < BF16_OUT_REL / 2.0,
                "k = {k}: rounding alone {honest}"
            );
            assert!(
                dropped > 10.0 * BF16_OUT_REL,
                "k = {k}: without β·C-in only {dropped}"
            );
        }
    }

    #[test]
    fn random_problems_are_reproducible_and_normal() {
        let one = Problem::<f32>::random(64, 48, 32, 7);
        let again = Problem::<f32>::random(64, 48, 32, 7);
        let other = Problem::<f32>::random(64, 48, 32, 8);
        assert_eq!(one.a, again.a);
        assert_eq!(one.b, again.b);
        assert_ne!(one.a, other.a);
        assert_eq!((one.a.len(), one.b.len()), (64 * 32, 32 * 48));
        let all: Vec<f64> = one.a.iter().chain(&one.b).map(|&x| f64::from(x)).collect();
        let mean = all.iter().sum::<f64>() / all.len() as f64;
        let variance = all.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / all.len() as f64;
        assert!(mean.abs() < 0.05, "mean {mean}");
        assert!((variance - 1.0).abs() < 0.1, "variance {variance}");
    }

    #[test]
    fn normal_values_repeat_across_chunks_and_differ_between_them() {
        let len = 2 * NORMAL_CHUNK + 17;
        let one: Vec<f32> = normal_values(len, 99);
        assert_eq!(one, normal_values::<f32>(len, 99));
        assert_ne!(one[..64], one[NORMAL_CHUNK..NORMAL_CHUNK + 64]);
        let mean = one.iter().map(|&x| f64::from(x)).sum::<f64>() / len as f64;
        let variance = one
            .iter()
            .map(|&x| (f64::from(x) - mean).powi(2))
            .sum::<f64>()
            / len as f64;
        assert!(
            mean.abs() < 0.01 && (variance - 1.0).abs() < 0.01,
            "{mean} {variance}"
        );
    }

    #[test]
    fn splitmix64_matches_the_reference_sequence() {
        // The first outputs of the reference implementation (Vigna's splitmix64.c) seeded
        // with 1234567.
        let mut rng = NormalRng::new(1234567);
        let words: Vec<u64> = (0..5).map(|_| rng.next_u64()).collect();
        assert_eq!(
            words,
            [
                6457827717110365317,
                3203168211198807973,
                9817491932198370423,
                4593380528125082431,
                16408922859458223821,
            ]
        );
    }

    #[test]
    fn normal_rng_has_the_moments_of_a_standard_normal() {
        let mut rng = NormalRng::new(0x5EED);
        let count = 200_000;
        let samples: Vec<f64> = (0..count).map(|_| rng.next_normal()).collect();
        assert!(samples.iter().all(|x| x.is_finite()));
        let n = count as f64;
        let mean = samples.iter().sum::<f64>() / n;
        let moment = |p: i32| samples.iter().map(|x| (x - mean).powi(p)).sum::<f64>() / n;
        let variance = moment(2);
        // Standard errors at 200,000 samples: mean 0.0022, variance 0.0032, skewness 0.0055,
        // kurtosis 0.011; the bounds are about five of them.
        assert!(mean.abs() < 0.012, "mean {mean}");
        assert!((variance - 1.0).abs() < 0.016, "variance {variance}");
        let skewness = moment(3) / variance.powf(1.5);
        let kurtosis = moment(4) / variance.powi(2);
        assert!(skewness.abs() < 0.03, "skewness {skewness}");
        assert!((kurtosis - 3.0).abs() < 0.06, "kurtosis {kurtosis}");
        // About 68.3% within one standard deviation, 95.4% within two.
        let within = |t: f64| samples.iter().filter(|x| x.abs() < t).count() as f64 / n;
        assert!((within(1.0) - 0.6827).abs() < 0.005, "{}", within(1.0));
        assert!((within(2.0) - 0.9545).abs() < 0.003, "{}", within(2.0));
    }

    #[test]
    fn uniforms_lie_in_the_half_open_unit_interval() {
        let mut rng = NormalRng::new(3);
        let samples: Vec<f64> = (0..100_000).map(|_| rng.next_uniform()).collect();
        assert!(samples.iter().all(|&u| u > 0.0 && u <= 1.0));
        let mean = samples.iter().sum::<f64>() / samples.len() as f64;
        assert!((mean - 0.5).abs() < 0.005, "mean {mean}");
    }

    #[test]
    fn cpu_reference_matches_the_definition_across_blocks() {
        // Sizes that cut the 256-column and 128-deep blocks unevenly and split rows unevenly
        // between threads.
        for (m, n, k) in [(1, 1, 1), (3, 5, 7), (37, 300, 130), (64, 257, 129)] {
            let problem = Problem::<f32>::random(m, n, k, u64::from(m * n * k));
            let fast = cpu_reference(&problem).unwrap();
            let slow = naive(&problem);
            for (x, y) in fast.iter().zip(&slow) {
                assert!((x - y).abs() <= 1e-12 * (1.0 + y.abs()), "{x} vs {y}");
            }
        }
    }

    #[test]
    fn compare_measures_error_and_counts_unwritten() {
        let reference = vec![3.0, 4.0, 0.0, 0.0];
        let exact = [3.0f32, 4.0, 0.0, 0.0];
        let report = compare(&exact, &reference, 2, 2, 2, Reference::CpuF64).unwrap();
        assert_eq!(
            (report.max_abs, report.rel_frobenius, report.unwritten),
            (0.0, 0.0, 0)
        );

        let off = [3.0f32, 4.5, f32::poison(), 0.0];
        let report = compare(&off, &reference, 2, 2, 2, Reference::CpuF64).unwrap();
        assert_eq!(report.unwritten, 1);
        assert_eq!(report.max_abs, 0.5);
        assert!((report.rel_frobenius - 0.1).abs() < 1e-12);
        let broken = report.check(&Tolerance::f32_accumulation(128)).unwrap_err();
        assert!(broken.contains("1 elements of C never written"), "{broken}");
        assert!(
            broken.contains("relative Frobenius error 1.000e-1"),
            "{broken}"
        );
    }

    #[test]
    fn compare_skips_the_gap_between_rows_and_flags_nans() {
        // ldc = 3: the third column of each row is padding the kernel must not touch.
        let c = [1.0f32, 2.0, f32::poison(), 3.0, f32::NAN, f32::poison()];
        let report = compare(&c, &[1.0, 2.0, 3.0, 4.0], 2, 2, 3, Reference::Cublas).unwrap();
        assert_eq!(report.unwritten, 0);
        assert!(report.max_abs.is_nan());
        assert!(report.check(&Tolerance::f32_accumulation(8)).is_err());
    }

    #[test]
    fn compare_refuses_shapes_its_buffers_do_not_hold() {
        let c = [1.0f32; 6];
        let error = compare(&c, &[0.0; 5], 2, 3, 3, Reference::CpuF64).unwrap_err();
        assert_eq!(
            error.to_string(),
            "the reference holds 5 elements, but a packed 2 x 3 matrix has 6"
        );
        let error = compare(&c, &[0.0; 6], 2, 3, 2, Reference::CpuF64).unwrap_err();
        assert_eq!(
            error.to_string(),
            "ldc = 2 is shorter than a row of C (3 elements)"
        );
        let error = compare(&c, &[0.0; 6], 2, 3, 4, Reference::CpuF64).unwrap_err();
        assert!(
            error
                .to_string()
                .starts_with("C holds 6 elements, but 2 rows x 3 columns"),
            "{error}"
        );
        // Rows that overflow 32 bits are counted in 64.
        let error = compare(&c, &[], 0, u32::MAX, u32::MAX, Reference::CpuF64).unwrap();
        assert_eq!(error.unwritten, 0);
    }

    #[test]
    fn inconsistent_problems_are_errors() {
        let mut problem = Problem::<f32>::random(4, 3, 2, 1);
        problem.a.pop();
        let error = cpu_reference(&problem).unwrap_err();
        assert_eq!(
            error.to_string(),
            "the problem's A holds 7 elements, but a packed 4 x 2 matrix has 8"
        );
        let mut problem = Problem::<f32>::random(4, 3, 2, 1);
        problem.k = 3;
        let error = problem.check_packed().unwrap_err();
        assert_eq!(
            error.to_string(),
            "the problem's A holds 8 elements, but a packed 4 x 3 matrix has 12"
        );
        let huge = Problem::<f32> {
            m: u32::MAX,
            n: u32::MAX,
            k: u32::MAX,
            a: Vec::new(),
            b: Vec::new(),
        };
        assert!(cpu_reference(&huge).is_err());
    }

    #[test]
    fn exact_matches_read_as_identical() {
        let c = [3.0f32, 4.0];
        let report = compare(&c, &[3.0, 4.0], 1, 2, 2, Reference::Cublas).unwrap();
        assert!(report.is_exact());
        assert_eq!(report.brief(), "identical to cuBLAS");
        assert_eq!(report.to_string(), "identical to cuBLAS (f32 accumulation)");
        let report = compare(&c, &[3.0, 4.0], 1, 2, 2, Reference::CpuF64).unwrap();
        assert_eq!(report.brief(), "identical to float64");
        // Close is not identical, and neither is an unwritten element.
        let report = compare(&[3.0f32, 4.5], &[3.0, 4.0], 1, 2, 2, Reference::Cublas).unwrap();
        assert!(!report.is_exact());
        assert_eq!(report.brief(), "rel 1.0e-1, max abs 5.0e-1");
        assert!(report.to_string().starts_with("rel Frobenius 1.000e-1"));
        let unwritten = [3.0f32, f32::poison()];
        let report = compare(&unwritten, &[3.0, 0.0], 1, 2, 2, Reference::Cublas).unwrap();
        assert!(!report.is_exact());
    }

    #[test]
    fn compare_reads_narrow_outputs() {
        let c = [bf16::from_f32(1.0), bf16::from_f32(-2.0)];
        let report = compare(&c, &[1.0, -2.0], 1, 2, 2, Reference::CpuF64).unwrap();
        assert_eq!((report.max_abs, report.unwritten), (0.0, 0));
    }

    #[test]
    fn tolerance_grows_past_k_2048_only() {
        assert_eq!(Tolerance::f32_accumulation(128).rel_frobenius, 1e-5);
        assert_eq!(Tolerance::f32_accumulation(2048).rel_frobenius, 1e-5);
        let deep = Tolerance::f32_accumulation(8192);
        assert!((deep.rel_frobenius - 2e-5).abs() < 1e-15);
        assert_eq!(deep.max_abs, 8192e-6);
    }

    #[test]
    fn tolerance_bounds_per_type_pair() {
        let outputs = 1 << 20;
        assert_eq!(
            Tolerance::for_types(DType::F32, DType::F32, outputs, 4096),
            Tolerance::f32_accumulation(4096)
        );
        let bf16 = Tolerance::for_types(DType::Bf16, DType::Bf16, outputs, 1024);
        assert!((bf16.max_abs - 8.0 * 1e-2 * 32.0).abs() < 1e-12);
        let deep = Tolerance::for_types(DType::F16, DType::F32, outputs, 8192);
        assert!((deep.rel_frobenius - 8e-5).abs() < 1e-15);
        let tf32 = Tolerance::for_types(DType::Tf32, DType::F32, outputs, 4096);
        assert!((tf32.max_abs - 8.0 * 1e-3 * 64.0).abs() < 1e-12);
        // Below k = 32 the absolute bound stops shrinking: products of normals have tails.
        let shallow = Tolerance::for_types(DType::Tf32, DType::F32, outputs, 1);
        assert!((shallow.max_abs - 8.0 * 1e-3 * 32f64.sqrt()).abs() < 1e-12);
        // One element of C: its relative error is a ratio of a few normals, so the relative
        // bound loosens to 1e-2 while the absolute one stays.
        let single = Tolerance::for_types(DType::F16, DType::F32, 1, 895);
        assert_eq!(single.rel_frobenius, 1e-2);
        assert_eq!(
            single.max_abs,
            Tolerance::for_types(DType::F16, DType::F32, outputs, 895).max_abs
        );
    }

    /// `A·B` summed in f32 product by product, each partial sum `add(sum, product)` (the
    /// product exact in f64).
    fn f32_sums_by<In: Element>(problem: &Problem<In>, add: impl Fn(f32, f64) -> f32) -> Vec<f32> {
        let (m, n, k) = (problem.m as usize, problem.n as usize, problem.k as usize);
        let mut c = vec![0f32; m * n];
        for row in 0..m {
            for col in 0..n {
                c[row * n + col] = (0..k).fold(0f32, |sum, i| {
                    add(
                        sum,
                        problem.a[row * k + i].to_f64() * problem.b[i * n + col].to_f64(),
                    )
                });
            }
        }
        c
    }

    /// Rounded to nearest after every product, as an FFMA chain does.
    fn f32_sums<In: Element>(problem: &Problem<In>) -> Vec<f32> {
        f32_sums_by(problem, |sum, product| (f64::from(sum) + product) as f32)
    }

    /// Truncated towards zero after every product, as tensor cores' adders do (worse than
    /// they do: they truncate once per group of 4 to 16 products).
    fn f32_sums_truncating<In: Element>(problem: &Problem<In>) -> Vec<f32> {
        f32_sums_by(problem, |sum, product| {
            let exact = f64::from(sum) + product;
            let nearest = exact as f32;
            if f64::from(nearest).abs() > exact.abs() {
                f32::from_bits(nearest.to_bits() - 1)
            } else {
                nearest
            }
        })
    }

    /// f32 inputs with their mantissas cut to `bits` explicit bits, rounded to nearest (ties
    /// away, as `cvt.rna.tf32.f32`) or truncated.
    fn with_mantissa(problem: &Problem<f32>, bits: u32, nearest: bool) -> Problem<f32> {
        let dropped = 23 - bits;
        let half = if nearest { 1u32 << (dropped - 1) } else { 0 };
        let round = |x: &f32| f32::from_bits((x.to_bits() + half) & !((1u32 << dropped) - 1));
        Problem {
            a: problem.a.iter().map(round).collect(),
            b: problem.b.iter().map(round).collect(),
            ..problem.clone()
        }
    }

    #[test]
    fn tolerances_accept_honest_rounding_and_reject_one_step_more() {
        let (m, n, k) = (96, 160, 512);
        let types =
            |dtype, out| Tolerance::for_kernel(KernelTypes::new(dtype, out).unwrap(), m, n, k);

        // bf16 in, f32 out: f32 sums pass; the same sums rounded to bf16 do not.
        let problem = Problem::<bf16>::random(m, n, k, 5);
        let exact = cpu_reference(&problem).unwrap();
        let sums = f32_sums(&problem);
        let honest = compare(&sums, &exact, m, n, n, Reference::CpuF64).unwrap();
        honest.check(&types(DType::Bf16, DType::F32)).unwrap();
        let truncating = f32_sums_truncating(&problem);
        let honest = compare(&truncating, &exact, m, n, n, Reference::CpuF64).unwrap();
        honest.check(&types(DType::Bf16, DType::F32)).unwrap();
        let rounded: Vec<f32> = sums.iter().map(|&v| bf16::from_f32(v).to_f32()).collect();
        let too_far = compare(&rounded, &exact, m, n, n, Reference::CpuF64).unwrap();
        assert!(
            too_far.check(&types(DType::Bf16, DType::F32)).is_err(),
            "{too_far}"
        );

        // bf16 out: rounding C passes.
        let as_bf16: Vec<bf16> = exact.iter().map(|&v| bf16::from_f64(v)).collect();
        let report = compare(&as_bf16, &exact, m, n, n, Reference::CpuF64).unwrap();
        assert!(report.rel_frobenius > 5e-4, "{report}");
        report.check(&types(DType::Bf16, DType::Bf16)).unwrap();

        // f16 out: rounding C to f16 passes, to bf16's precision does not.
        let problem = Problem::<half::f16>::random(m, n, k, 7);
        let exact = cpu_reference(&problem).unwrap();
        let as_f16: Vec<half::f16> = exact.iter().map(|&v| half::f16::from_f64(v)).collect();
        let report = compare(&as_f16, &exact, m, n, n, Reference::CpuF64).unwrap();
        report.check(&types(DType::F16, DType::F16)).unwrap();
        let coarse: Vec<half::f16> = exact
            .iter()
            .map(|&v| half::f16::from_f64(bf16::from_f64(v).to_f64()))
            .collect();
        let too_far = compare(&coarse, &exact, m, n, n, Reference::CpuF64).unwrap();
        assert!(
            too_far.check(&types(DType::F16, DType::F16)).is_err(),
            "{too_far}"
        );

        // tf32: inputs rounded to 10 mantissa bits (to nearest, or cut: the worst a tensor
        // core does) pass against the f32 inputs; inputs rounded to bf16's 7 bits do not.
        let problem = Problem::<f32>::random(m, n, k, 6);
        let exact = cpu_reference(&problem).unwrap();
        let tf32 = types(DType::Tf32, DType::F32);
        // At k = 1 too, where C is a product of two normals with its heavy tails.
        let single = Problem::<f32>::random(1024, 1024, 1, 8);
        let c = f32_sums(&with_mantissa(&single, 10, true));
        let reference = cpu_reference(&single).unwrap();
        let report = compare(&c, &reference, 1024, 1024, 1024, Reference::CpuF64).unwrap();
        report
            .check(&Tolerance::for_kernel(
                KernelTypes::new(DType::Tf32, DType::F32).unwrap(),
                1024,
                1024,
                1,
            ))
            .unwrap();
        for (bits, nearest, passes) in [(10, true, true), (10, false, true), (7, true, false)] {
            let c = f32_sums(&with_mantissa(&problem, bits, nearest));
            let report = compare(&c, &exact, m, n, n, Reference::CpuF64).unwrap();
            assert!(report.rel_frobenius > 1e-4, "{report}");
            assert_eq!(
                report.check(&tf32).is_ok(),
                passes,
                "{bits} mantissa bits, nearest {nearest}: {report}"
            );
        }
    }

    #[test]
    fn small_problems_use_the_cpu_reference() {
        assert_eq!(reference_for(1024, 1024, 1024), Reference::CpuF64);
        assert_eq!(reference_for(2048, 2048, 2048), Reference::Cublas);
    }
}
