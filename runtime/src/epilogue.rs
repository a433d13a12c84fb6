//! The fused epilogue's launch arguments: `D = s[row]·act(α·A·B + β·C + bias)`, for kernels
//! whose spec sets `scale`, `bias`, `activation` or `row_scale` (see
//! [`GemmKernel::launch_fused`]).
//!
//! The arguments are checked against the kernel's spec before anything reaches the GPU: a
//! factor the kernel does not apply, a C-in or bias it does not read (or one it reads and was
//! not given), a bias of another element type, and buffers too short for the problem are
//! errors that name the numbers. [`FusedSpec::apply`] is the same math in float64, what
//! the harness (`gemm-harness`) measures kernels against.
//!
//! [`GemmKernel::launch_fused`]: crate::GemmKernel::launch_fused

use crate::element::Element;
use crate::error::Error;
use cudarc::driver::{DevicePtr, DevicePtrMut};
use gemm_dsl::abi::KernelInfo;
use gemm_dsl::{Activation, Aux, Bias, BiasAlong, DType, Quant, RowScale, Scale};

/// What a kernel's spec fuses: its `scale`, `bias`, `activation`, `aux` and `row_scale`
/// keys, and the fp8 operands' scales (`quant`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FusedSpec {
    pub scale: Scale,
    pub bias: Bias,
    pub activation: Activation,
    pub aux: Aux,
    pub quant: Quant,
    pub row_scale: RowScale,
}

impl FusedSpec {
    /// A plain `C = A·B` kernel's.
    pub const NONE: FusedSpec = FusedSpec {
        scale: Scale::None,
        bias: Bias::None,
        activation: Activation::None,
        aux: Aux::None,
        quant: Quant::None,
        row_scale: RowScale::None,
    };

    /// The fused epilogue of a kernel, read from its spec with the spec parser.
    pub fn of_info(info: &KernelInfo<'_>) -> Result<FusedSpec, Error> {
        match gemm_dsl::parse_str(info.spec()) {
            Ok(parsed) => Ok(FusedSpec::of_spec(&parsed.spec)),
            Err(errors) => Err(Error::SpecText {
                kernel: info.name().to_string(),
                errors: errors.to_string(),
            }),
        }
    }

    /// A spec's.
    pub fn of_spec(spec: &gemm_dsl::GemmSpec) -> FusedSpec {
        FusedSpec {
            scale: spec.scale,
            bias: spec.bias,
            activation: spec.activation,
            aux: spec.aux,
            quant: spec.quant,
            row_scale: spec.row_scale,
        }
    }

    pub fn is_none(&self) -> bool {
        *self == FusedSpec::NONE
    }

    /// The epilogue that computes this one's D on the swapped product `Cᵀ = Bᵀ·Aᵀ` (a kernel
    /// that stores C column-major, fed A and B exchanged): a bias along C's columns runs
    /// along `Cᵀ`'s rows and the other way round, reading the same vector; α, the per-tensor
    /// fp8 scales (a product) and the activation (element by element) stay. `None` where
    /// there is no such epilogue: C-in and aux (laid out as a row-major C), the rows'
    /// factors (they would scale `Cᵀ`'s columns) and block scales (A's per row, B's per block).
    pub fn on_swapped_product(&self) -> Option<FusedSpec> {
        if self.aux != Aux::None
            || self.row_scale != RowScale::None
            || self.scale == Scale::AlphaBeta
            || self.quant == Quant::Block
        {
            return None;
        }
        let bias = match self.bias {
            Bias::None => Bias::None,
            Bias::Vector { along, dtype } => Bias::Vector {
                along: match along {
                    BiasAlong::Row => BiasAlong::Col,
                    BiasAlong::Col => BiasAlong::Row,
                },
                dtype,
            },
        };
        Some(FusedSpec { bias, ..*self })
    }

    /// One element of D in float64 from its product `ab` (`A·B`, the fp8 operands' scales
    /// applied), C-in's value `c`, the bias value `bias` and its row's factor `row` (each
    /// ignored where the spec has none): the exact functions, where the kernel may
    /// approximate (`gelu` through `tanh.approx` for 16-bit outputs).
    pub fn apply(&self, ab: f64, alpha: f64, beta: f64, c: f64, bias: f64, row: f64) -> f64 {
        self.scale_row(
            activate(
                self.activation,
                self.pre_activation(ab, alpha, beta, c, bias),
            ),
            row,
        )
    }

    /// An activated value times its row's factor (`row_scale`), the epilogue's last step.
    pub fn scale_row(&self, activated: f64, row: f64) -> f64 {
        match self.row_scale {
            RowScale::None => activated,
            RowScale::F32 => activated * row,
        }
    }

    /// [`FusedSpec::apply`] before the activation: what `aux: pre_activation` stores.
    pub fn pre_activation(&self, ab: f64, alpha: f64, beta: f64, c: f64, bias: f64) -> f64 {
        let mut x = match self.scale {
            Scale::None => ab,
            Scale::Alpha => alpha * ab,
            Scale::AlphaBeta => alpha * ab + beta * c,
        };
        if self.bias.vector().is_some() {
            x += bias;
        }
        x
    }
}

/// An activation in float64.
pub fn activate(activation: Activation, x: f64) -> f64 {
    match activation {
        Activation::None => x,
        Activation::Relu => x.max(0.0),
        Activation::Gelu => {
            let sqrt_2_over_pi = (2.0 / std::f64::consts::PI).sqrt();
            0.5 * x * (1.0 + (sqrt_2_over_pi * (x + 0.044715 * x * x * x)).tanh())
        }
        Activation::GeluErf => 0.5 * x * (1.0 + libm::erf(x * std::f64::consts::FRAC_1_SQRT_2)),
        Activation::Silu => x / (1.0 + (-x).exp()),
    }
}

/// Where the kernel reads C from (`scale: alpha_beta`).
pub enum CIn<'a, Out> {
    /// A buffer shaped as C: C's leading dimension and batch stride.
    Buffer(&'a dyn DevicePtr<Out>),
    /// C's own values, overwritten with D (`C = act(α·A·B + β·C + bias)` in place).
    Output,
}

/// A bias vector of the output type or f32, one per product at `batch_stride` elements
/// apart (0: one vector for the whole batch).
pub struct BiasArg<'a, Out> {
    pub(crate) values: BiasValues<'a, Out>,
    pub(crate) batch_stride: u64,
}

pub(crate) enum BiasValues<'a, Out> {
    Output(&'a dyn DevicePtr<Out>),
    F32(&'a dyn DevicePtr<f32>),
}

impl<'a, Out: Element> BiasArg<'a, Out> {
    /// A bias of the output type (`bias: col` or `bias: row` with the output's type).
    pub fn output(values: &'a dyn DevicePtr<Out>) -> Self {
        BiasArg {
            values: BiasValues::Output(values),
            batch_stride: 0,
        }
    }

    /// An f32 bias (`bias: col(f32)`, `bias: row(f32)`).
    pub fn f32(values: &'a dyn DevicePtr<f32>) -> Self {
        BiasArg {
            values: BiasValues::F32(values),
            batch_stride: 0,
        }
    }

    /// Product `i` of a batch (a grouped launch's expert `i`) reads the vector `i · stride`
    /// elements into the buffer.
    pub fn strided(self, stride: u64) -> Self {
        BiasArg {
            batch_stride: stride,
            ..self
        }
    }

    /// The element type and its bytes.
    pub(crate) fn dtype(&self) -> (&'static str, u32) {
        match self.values {
            BiasValues::Output(_) => (Out::NAME, Out::BYTES),
            BiasValues::F32(_) => (f32::NAME, f32::BYTES),
        }
    }

    pub(crate) fn len(&self) -> usize {
        match self.values {
            BiasValues::Output(v) => v.len(),
            BiasValues::F32(v) => v.len(),
        }
    }
}

/// The arguments of a fused epilogue, `D = act(α·A·B + β·C + bias)`. Start from
/// [`Epilogue::none`] (α = 1, β = 0, no C-in, no bias) and add what the kernel's spec
/// reads.
pub struct Epilogue<'a, Out> {
    pub(crate) alpha: f32,
    pub(crate) beta: f32,
    pub(crate) c_in: Option<CIn<'a, Out>>,
    pub(crate) bias: Option<BiasArg<'a, Out>>,
    pub(crate) aux: Option<&'a mut dyn DevicePtrMut<Out>>,
    pub(crate) quant_scales: Option<QuantScales<'a>>,
    pub(crate) row_scale: Option<&'a dyn DevicePtr<f32>>,
}

/// fp8 A's and B's dequantization scales in device memory (`quant: tensor`): one f32 each,
/// as cuBLASLt's scale pointers; `D = s_A·s_B·(A·B)` before the rest of the epilogue.
#[derive(Clone, Copy)]
pub struct QuantScales<'a> {
    pub a: &'a dyn DevicePtr<f32>,
    pub b: &'a dyn DevicePtr<f32>,
}

impl<'a, Out: Element> Epilogue<'a, Out> {
    /// α = 1, β = 0, nothing read: a plain kernel's arguments.
    pub fn none() -> Self {
        Epilogue {
            alpha: 1.0,
            beta: 0.0,
            c_in: None,
            bias: None,
            aux: None,
            quant_scales: None,
            row_scale: None,
        }
    }

    /// fp8 A's and B's dequantization scales (`quant: tensor`): one f32 each, in device
    /// memory, read by the kernel when it runs.
    pub fn quant_scales(self, a: &'a dyn DevicePtr<f32>, b: &'a dyn DevicePtr<f32>) -> Self {
        Epilogue {
            quant_scales: Some(QuantScales { a, b }),
            ..self
        }
    }

    /// The product's factor (`scale: alpha` or `alpha_beta`).
    pub fn alpha(self, alpha: f32) -> Self {
        Epilogue { alpha, ..self }
    }

    /// C-in and its factor (`scale: alpha_beta`).
    pub fn beta(self, beta: f32, c_in: CIn<'a, Out>) -> Self {
        Epilogue {
            beta,
            c_in: Some(c_in),
            ..self
        }
    }

    /// The bias vector (`bias: row` or `col`).
    pub fn bias(self, bias: BiasArg<'a, Out>) -> Self {
        Epilogue {
            bias: Some(bias),
            ..self
        }
    }

    /// Where the values before the activation go (`aux: pre_activation`): a buffer laid out
    /// as C, written by the launch.
    pub fn aux(self, aux: &'a mut dyn DevicePtrMut<Out>) -> Self {
        Epilogue {
            aux: Some(aux),
            ..self
        }
    }

    /// The rows' factors (`row_scale: f32`), applied last: one f32 per row of D, M per
    /// product, product after product; a grouped launch's one per row of A (a routed row's
    /// router weight).
    pub fn row_scale(self, factors: &'a dyn DevicePtr<f32>) -> Self {
        Epilogue {
            row_scale: Some(factors),
            ..self
        }
    }
}

/// What a launch passed to the fused epilogue, as [`check_arguments`] reads it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct GivenArguments {
    pub(crate) alpha: f32,
    pub(crate) beta: f32,
    /// A C-in buffer or `CIn::Output`.
    pub(crate) c_in: bool,
    /// The bias's element type (name, bytes), length and batch stride.
    pub(crate) bias: Option<((&'static str, u32), usize, u64)>,
    pub(crate) aux: bool,
    /// The lengths of the A and B scale buffers.
    pub(crate) quant_scales: Option<(usize, usize)>,
    /// The length of the rows' factors.
    pub(crate) row_scale: Option<usize>,
}

impl<Out: Element> Epilogue<'_, Out> {
    pub(crate) fn given(&self) -> GivenArguments {
        GivenArguments {
            alpha: self.alpha,
            beta: self.beta,
            c_in: self.c_in.is_some(),
            bias: self
                .bias
                .as_ref()
                .map(|bias| (bias.dtype(), bias.len(), bias.batch_stride)),
            aux: self.aux.is_some(),
            quant_scales: self
                .quant_scales
                .map(|scales| (scales.a.len(), scales.b.len())),
            row_scale: self.row_scale.map(|factors| factors.len()),
        }
    }
}

/// The checks of a fused epilogue's arguments that need no device: each one the spec reads
/// is given, none it ignores is, the bias is its type and long enough for its `vectors`
/// (the batch's products, or a grouped launch's experts), and the rows' factors cover
/// `batch` products of M rows. C-in's and aux's buffers are checked with C's own rules by
/// the launch.
pub(crate) fn check_arguments(
    kernel: &str,
    fused: &FusedSpec,
    given: &GivenArguments,
    (m, n, batch): (u32, u32, u32),
    vectors: u32,
) -> Result<(), Error> {
    let GivenArguments {
        alpha,
        beta,
        c_in: c_in_given,
        bias,
        aux: aux_given,
        quant_scales: _,
        row_scale,
    } = *given;
    let wrong = |problem: String| {
        Err(Error::EpilogueArguments {
            kernel: kernel.to_string(),
            problem,
        })
    };
    if !fused.scale.has_alpha() && alpha != 1.0 {
        return wrong(format!(
            "α = {alpha}, but the kernel applies no α (spec `scale: none`); pass α = 1 or use a kernel with `scale: alpha`"
        ));
    }
    if fused.scale.reads_c() {
        if !c_in_given {
            return wrong(
                "the kernel reads C-in (spec `scale: alpha_beta`), but none was given: pass a buffer or `CIn::Output`"
                    .to_string(),
            );
        }
    } else if c_in_given || beta != 0.0 {
        return wrong(format!(
            "β = {beta}{}, but the kernel reads no C (spec `scale: {}`); use a kernel with `scale: alpha_beta`",
            if c_in_given { " with a C-in" } else { "" },
            fused.scale.name()
        ));
    }
    // A buffer the spec names must be given, and one it does not must not be.
    let presence = |reads: bool, given: bool, missing: &str, foreign: &str| match (reads, given) {
        (true, false) => wrong(missing.to_string()),
        (false, true) => wrong(foreign.to_string()),
        _ => Ok(()),
    };
    presence(
        fused.aux == Aux::PreActivation,
        aux_given,
        "the kernel writes the values before the activation (spec `aux: pre_activation`), but no aux buffer was given",
        "an aux buffer was given, but the kernel writes none (spec `aux: none`)",
    )?;
    presence(
        fused.row_scale == RowScale::F32,
        row_scale.is_some(),
        "the kernel scales each row (spec `row_scale: f32`), but no factors were given: pass `Epilogue::row_scale`",
        "rows' factors were given, but the kernel scales no rows (spec `row_scale: none`); use a kernel with `row_scale: f32`",
    )?;
    if let Some(len) = row_scale.filter(|_| fused.row_scale == RowScale::F32) {
        let needed = u64::from(batch) * u64::from(m);
        if (len as u64) < needed {
            return wrong(format!(
                "the rows' factors hold {len} f32, but {batch} product(s) of M = {m} rows need {needed}"
            ));
        }
    }
    match (fused.bias.vector(), bias) {
        (None, None) => Ok(()),
        (None, Some(_)) => wrong(
            "a bias was given, but the kernel adds none (spec `bias: none`); use a kernel with `bias: row` or `bias: col`"
                .to_string(),
        ),
        (Some((along, _)), None) => wrong(format!(
            "the kernel adds a {} bias (spec `bias: {}`), but none was given",
            along.name(),
            fused.bias
        )),
        (Some((along, dtype)), Some(((name, _), len, stride))) => {
            if name != dtype.name() {
                return wrong(format!(
                    "the bias holds {name}, but the kernel reads {} (spec `bias: {}`)",
                    dtype.name(),
                    fused.bias
                ));
            }
            let (vector, what) = match along {
                BiasAlong::Row => (m, "M"),
                BiasAlong::Col => (n, "N"),
            };
            let vector = u64::from(vector);
            if stride != 0 && stride < vector {
                return wrong(format!(
                    "the bias's batch stride {stride} is shorter than one vector ({what} = {vector}): products would share elements"
                ));
            }
            let needed = u64::from(vectors.max(1) - 1) * stride + vector;
            if (len as u64) < needed {
                return wrong(format!(
                    "the bias holds {len} elements, but {vectors} vector(s) of {what} = {vector} at stride {stride} need {needed}"
                ));
            }
            Ok(())
        }
    }
}

/// The fp8 scales against the spec's `quant`: given exactly when it reads them, one value each
/// (`tensor`), or (`block`) ceil(K/128) lines of M rounded up to 4 for A (each tile's rows are
/// copied in 16-byte units) and ceil(N/128) lines of ceil(K/128) for B, one product only.
pub(crate) fn check_quant_scales(
    kernel: &str,
    fused: &FusedSpec,
    given: &GivenArguments,
    (m, n, k, batch): (u32, u32, u32, u32),
    b_matrices: u32,
) -> Result<(), Error> {
    let wrong = |problem: String| {
        Err(Error::EpilogueArguments {
            kernel: kernel.to_string(),
            problem,
        })
    };
    let (a_len, b_len) = match (fused.quant, given.quant_scales) {
        (Quant::None, None) => return Ok(()),
        (Quant::None, Some(_)) => {
            return wrong(
                "fp8 scales were given, but the kernel applies none (spec `quant: none`); use a kernel with `quant: tensor` or `quant: block`"
                    .to_string(),
            )
        }
        (quant, None) => {
            return wrong(format!(
                "the kernel scales its fp8 operands (spec `quant: {}`), but no scales were given: pass `Epilogue::quant_scales`",
                quant.name()
            ))
        }
        (_, Some(lens)) => lens,
    };
    let (a_needed, b_needed, what) = match fused.quant {
        Quant::Block => {
            if batch > 1 {
                return wrong(format!(
                    "block scales (spec `quant: block`) cover one product; this launch has {batch}"
                ));
            }
            let k_blocks = u64::from(k.div_ceil(Quant::BLOCK));
            let n_blocks = u64::from(n.div_ceil(Quant::BLOCK));
            let m_lines = u64::from(m).next_multiple_of(u64::from(Quant::A_LINE_MULTIPLE));
            let experts = if b_matrices > 1 {
                format!(", for each of {b_matrices} experts")
            } else {
                String::new()
            };
            (
                k_blocks * m_lines,
                u64::from(b_matrices.max(1)) * n_blocks * k_blocks,
                format!(
                    "A: ceil(K/128) = {k_blocks} lines of M rounded up to 4 = {m_lines}; B: ceil(N/128) = {n_blocks} lines of {k_blocks}{experts}"
                ),
            )
        }
        _ => (1, 1, "one value each".to_string()),
    };
    if (a_len as u64) < a_needed || (b_len as u64) < b_needed {
        return wrong(format!(
            "the fp8 scales hold {a_len} (A) and {b_len} (B) values, but the kernel reads {a_needed} and {b_needed} ({what})"
        ));
    }
    Ok(())
}

/// The element type a bias argument must have for a spec's bias.
pub fn bias_dtype(fused: &FusedSpec) -> Option<DType> {
    fused.bias.vector().map(|(_, dtype)| dtype)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_swapped_products_epilogue_reads_a_bias_along_the_other_side() {
        let bias = |along| Bias::Vector {
            along,
            dtype: DType::Bf16,
        };
        let gelu_col_bias = FusedSpec {
            scale: Scale::Alpha,
            bias: bias(BiasAlong::Col),
            activation: Activation::Gelu,
            quant: Quant::Tensor,
            ..FusedSpec::NONE
        };
        let swapped = gelu_col_bias.on_swapped_product().unwrap();
        assert_eq!(
            swapped,
            FusedSpec {
                bias: bias(BiasAlong::Row),
                ..gelu_col_bias
            }
        );
        // Twice swapped is the problem's own.
        assert_eq!(swapped.on_swapped_product(), Some(gelu_col_bias));
        assert_eq!(FusedSpec::NONE.on_swapped_product(), Some(FusedSpec::NONE));
        // C-in, aux, the rows' factors and block scales have no form on Cᵀ.
        for none in [
            FusedSpec {
                scale: Scale::AlphaBeta,
                ..gelu_col_bias
            },
            FusedSpec {
                aux: Aux::PreActivation,
                ..gelu_col_bias
            },
            FusedSpec {
                row_scale: RowScale::F32,
                ..gelu_col_bias
            },
            FusedSpec {
                quant: Quant::Block,
                ..gelu_col_bias
            },
        ] {
            assert_eq!(none.on_swapped_product(), None, "{none:?}");
        }
    }

    /// α = 1, β = 0 and no buffer: a plain launch's arguments.
    const NOTHING_GIVEN: GivenArguments = GivenArguments {
        alpha: 1.0,
        beta: 0.0,
        c_in: false,
        bias: None,
        aux: false,
        quant_scales: None,
        row_scale: None,
    };

    fn spec(scale: Scale, bias: Bias) -> FusedSpec {
        FusedSpec {
            scale,
            bias,
            activation: Activation::Gelu,
            aux: Aux::None,
            quant: Quant::None,
            row_scale: RowScale::None,
        }
    }

    const COL_BF16: Bias = Bias::Vector {
        along: BiasAlong::Col,
        dtype: DType::Bf16,
    };

    fn check(
        fused: &FusedSpec,
        alpha: f32,
        beta: f32,
        c_in: bool,
        bias: Option<(&'static str, usize, u64)>,
    ) -> Result<(), String> {
        let bias = bias.map(|(name, len, stride)| ((name, 2), len, stride));
        let given = GivenArguments {
            alpha,
            beta,
            c_in,
            bias,
            aux: fused.aux == Aux::PreActivation,
            quant_scales: None,
            row_scale: None,
        };
        check_arguments("k", fused, &given, (100, 30, 3), 3).map_err(|e| e.to_string())
    }

    #[test]
    fn arguments_must_match_what_the_spec_reads() {
        let plain = FusedSpec::NONE;
        assert!(check(&plain, 1.0, 0.0, false, None).is_ok());
        assert!(check(&plain, 2.0, 0.0, false, None)
            .unwrap_err()
            .contains("α = 2, but the kernel applies no α"));
        assert!(check(&plain, 1.0, 0.5, false, None)
            .unwrap_err()
            .contains("β = 0.5, but the kernel reads no C"));
        assert!(check(&plain, 1.0, 0.0, false, Some(("bf16", 30, 0)))
            .unwrap_err()
            .contains("adds none"));
        let fused = spec(Scale::AlphaBeta, COL_BF16);
        assert!(check(&fused, 2.0, 0.5, true, Some(("bf16", 30, 0))).is_ok());
        assert!(check(&fused, 2.0, 0.5, false, Some(("bf16", 30, 0)))
            .unwrap_err()
            .contains("none was given"));
        assert!(check(&fused, 2.0, 0.5, true, None)
            .unwrap_err()
            .contains("adds a col bias (spec `bias: col(bf16)`)"));
        assert!(check(&fused, 2.0, 0.5, true, Some(("f32", 30, 0)))
            .unwrap_err()
            .contains("the bias holds f32, but the kernel reads bf16"));
        // Three products: shared (30), strided (2·40 + 30 = 110), too short, overlapping.
        assert!(check(&fused, 1.0, 0.0, true, Some(("bf16", 110, 40))).is_ok());
        assert!(check(&fused, 1.0, 0.0, true, Some(("bf16", 29, 0)))
            .unwrap_err()
            .contains("the bias holds 29 elements, but 3 vector(s) of N = 30 at stride 0 need 30"));
        assert!(check(&fused, 1.0, 0.0, true, Some(("bf16", 109, 40)))
            .unwrap_err()
            .contains("need 110"));
        assert!(check(&fused, 1.0, 0.0, true, Some(("bf16", 500, 20)))
            .unwrap_err()
            .contains("stride 20 is shorter than one vector (N = 30)"));
        // A row bias runs over M.
        let row = spec(
            Scale::None,
            Bias::Vector {
                along: BiasAlong::Row,
                dtype: DType::Bf16,
            },
        );
        assert!(check(&row, 1.0, 0.0, false, Some(("bf16", 100, 0))).is_ok());
        assert!(check(&row, 1.0, 0.0, false, Some(("bf16", 99, 0)))
            .unwrap_err()
            .contains("M = 100"));
        // An aux output is given exactly when the spec writes one.
        let aux = FusedSpec {
            aux: Aux::PreActivation,
            ..FusedSpec::NONE
        };
        let nothing = NOTHING_GIVEN;
        let missing = check_arguments("k", &aux, &nothing, (1, 1, 1), 1).unwrap_err();
        assert!(
            missing.to_string().contains("no aux buffer was given"),
            "{missing}"
        );
        let with_aux = GivenArguments {
            aux: true,
            ..nothing
        };
        let extra = check_arguments("k", &FusedSpec::NONE, &with_aux, (1, 1, 1), 1).unwrap_err();
        assert!(extra.to_string().contains("writes none"), "{extra}");
    }

    #[test]
    fn rows_factors_are_given_when_the_spec_scales_rows_and_cover_every_row() {
        let rows = FusedSpec {
            row_scale: RowScale::F32,
            ..FusedSpec::NONE
        };
        let given = |row_scale| GivenArguments {
            row_scale,
            ..NOTHING_GIVEN
        };
        let check = |fused: &FusedSpec, len, batch| {
            check_arguments("k", fused, &given(len), (100, 30, batch), batch)
                .map_err(|e| e.to_string())
        };
        // Three products of 100 rows read 300 factors.
        assert!(check(&rows, Some(300), 3).is_ok());
        assert!(check(&rows, Some(299), 3)
            .unwrap_err()
            .contains("hold 299 f32, but 3 product(s) of M = 100 rows need 300"));
        assert!(check(&rows, None, 1)
            .unwrap_err()
            .contains("no factors were given"));
        assert!(check(&FusedSpec::NONE, Some(100), 1)
            .unwrap_err()
            .contains("scales no rows"));
        // A grouped launch: one product of every routed row, a column bias per expert.
        let grouped = FusedSpec {
            bias: COL_BF16,
            ..rows
        };
        let experts = |bias_len| {
            let given = GivenArguments {
                bias: Some((("bf16", 2), bias_len, 30)),
                ..given(Some(100))
            };
            check_arguments("k", &grouped, &given, (100, 30, 1), 8).map_err(|e| e.to_string())
        };
        assert!(experts(8 * 30).is_ok());
        assert!(experts(7 * 30)
            .unwrap_err()
            .contains("8 vector(s) of N = 30 at stride 30 need 240"));
    }

    #[test]
    fn fp8_scales_are_given_exactly_when_the_spec_reads_them() {
        let tensor = FusedSpec {
            quant: Quant::Tensor,
            ..FusedSpec::NONE
        };
        let block = FusedSpec {
            quant: Quant::Block,
            ..FusedSpec::NONE
        };
        let given = |quant_scales| GivenArguments {
            quant_scales,
            ..NOTHING_GIVEN
        };
        let check = |fused: &FusedSpec, lens, dims: (u32, u32, u32, u32)| {
            check_quant_scales("k", fused, &given(lens), dims, dims.3).map_err(|e| e.to_string())
        };
        let one = (100, 30, 4096, 1);
        assert!(check(&tensor, Some((1, 1)), one).is_ok());
        assert!(check(&tensor, None, one)
            .unwrap_err()
            .contains("no scales were given"));
        assert!(check(&tensor, Some((1, 0)), one)
            .unwrap_err()
            .contains("hold 1 (A) and 0 (B) values, but the kernel reads 1 and 1"));
        assert!(check(&FusedSpec::NONE, Some((1, 1)), one)
            .unwrap_err()
            .contains("the kernel applies none (spec `quant: none`)"));
        assert!(check(&FusedSpec::NONE, None, one).is_ok());
        // Block scales: K = 4100 is 33 blocks of 128, N = 300 is 3.
        let dims = (100, 300, 4100, 1);
        assert!(check(&block, Some((3300, 99)), dims).is_ok());
        let short = check(&block, Some((3299, 99)), dims).unwrap_err();
        assert!(
            short.contains(
                "A: ceil(K/128) = 33 lines of M rounded up to 4 = 100; B: ceil(N/128) = 3 lines of 33"
            ),
            "{short}"
        );
        // M = 101: A's lines hold 104 values.
        assert!(check(&block, Some((3300, 99)), (101, 300, 4100, 1))
            .unwrap_err()
            .contains("lines of M rounded up to 4 = 104"));
        assert!(check(&block, Some((3432, 99)), (101, 300, 4100, 1)).is_ok());
        assert!(check(&block, Some((3300, 99)), (100, 300, 4100, 2))
            .unwrap_err()
            .contains("cover one product; this launch has 2"));
        // A grouped launch: one product, B's scales for each of 8 experts.
        let grouped = |lens| {
            check_quant_scales("k", &block, &given(lens), (100, 300, 4100, 1), 8)
                .map_err(|e| e.to_string())
        };
        assert!(grouped(Some((3300, 8 * 99))).is_ok());
        assert!(grouped(Some((3300, 99)))
            .unwrap_err()
            .contains("the kernel reads 3300 and 792"));
    }

    #[test]
    fn the_float64_epilogue_is_the_formula() {
        let fused = FusedSpec {
            scale: Scale::AlphaBeta,
            bias: COL_BF16,
            activation: Activation::Relu,
            aux: Aux::PreActivation,
            quant: Quant::None,
            row_scale: RowScale::None,
        };
        assert_eq!(fused.pre_activation(-2.0, 1.5, 0.5, 4.0, -1.0), -2.0);
        assert_eq!(fused.apply(2.0, 1.5, 0.5, 4.0, -1.0, 9.0), 4.0);
        assert_eq!(fused.apply(-2.0, 1.5, 0.5, 4.0, -1.0, 9.0), 0.0);
        // The row's factor comes last, after the activation.
        let scaled = FusedSpec {
            row_scale: RowScale::F32,
            ..fused
        };
        assert_eq!(scaled.apply(2.0, 1.5, 0.5, 4.0, -1.0, 0.25), 1.0);
        assert_eq!(scaled.apply(-2.0, 1.5, 0.5, 4.0, -1.0, 0.25), 0.0);
        // No bias: the bias value is ignored; no scale: α and β too.
        let plain = FusedSpec::NONE;
        assert_eq!(plain.apply(3.0, 9.0, 9.0, 9.0, 9.0, 9.0), 3.0);
        // GELU's two forms agree to 1e-3 and pass 0 through 0; SiLU(x) = x·sigmoid(x).
        for x in [-3.0, -1.0, -0.1, 0.0, 0.5, 2.0] {
            let (tanh, erf) = (
                activate(Activation::Gelu, x),
                activate(Activation::GeluErf, x),
            );
            assert!((tanh - erf).abs() < 1e-3, "{x}: {tanh} {erf}");
        }
        assert!((activate(Activation::GeluErf, 1.0) - 0.841_344_746).abs() < 1e-9);
        assert!((activate(Activation::Silu, 1.0) - 0.731_058_579).abs() < 1e-9);
    }
}
