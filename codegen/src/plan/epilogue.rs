//! The fused epilogue, shared by every family: `D = s[row]·act(α·acc + β·C + bias)` on a thread's
//! f32 accumulators, in place, after the main loop (and a stream-K fixup) and before the
//! family's own stores convert and write them. Each family hands over where its thread's
//! accumulators lie (row and column offsets from the thread's first row and column, `%row`
//! and `%col` in its kernel), in segments: the groups it stores one after another (a TMA
//! store's box), so that each segment is transformed just before its store and no more
//! values wait in registers than one segment's. This plan splits each segment into chunks of
//! columns, so that each bias value is loaded once per chunk, and
//! `templates/common/epilogue.ptx.tera` writes the instructions.
//!
//! Loads are guarded element by element: rows past M and columns past N read nothing (their
//! accumulators are never stored), so a buffer need hold no more than the problem's elements.

use super::flags::flags;
use gemm_dsl::{Activation, Aux, BiasAlong, DType, GemmSpec, Quant, RowScale, Scale};
use serde::Serialize;

/// Columns whose bias values one group of the transform holds in registers at once.
pub const CHUNK_COLUMNS: usize = 16;
/// The same in a grouped kernel, whose walk keeps more registers live through the epilogue:
/// with 16, a 128x256 tile's bias, row factors and SiLU spill 188 bytes (ptxas 13.0), with 8
/// none.
pub const GROUPED_CHUNK_COLUMNS: usize = 8;

/// One accumulator of a thread: its register index and its offsets from the thread's first
/// row and column.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AccElement {
    pub acc: u32,
    pub row: u32,
    pub col: u32,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FusedEpilogue {
    /// Multiply by a factor: α, fp8 operands' scales, or both.
    pub alpha: bool,
    /// The factor holds the α parameter.
    pub alpha_param: bool,
    /// The factor holds A's and B's dequantization scales, loaded from device memory.
    pub quant_scales: bool,
    /// Read C-in (C's element type, C's row stride and batch stride) and add β·C.
    pub c_in: Option<ElementLoad>,
    /// C-in reaches the threads through the family's own buffers (the Hopper TMA-store
    /// epilogue loads it by TMA and reads it back with `ldmatrix`): the family applies
    /// α·acc + β·C itself, and the shared macros load no C-in.
    pub c_in_staged: bool,
    pub bias: Option<BiasPlan>,
    /// `aux: pre_activation`: each value is stored before the activation, to aux laid out as
    /// C, with this conversion (`cvt.rn.bf16.f32`; empty for f32).
    pub aux: Option<AuxStore>,
    #[serde(serialize_with = "flags")]
    pub activation: Activation,
    /// `row_scale: f32`: each value times its row's f32 factor, after the activation.
    pub row_scale: Option<RowScalePlan>,
    /// The tanh approximation of GELU through `tanh.approx` (about 11 bits: below a 16-bit
    /// output's rounding), or through `ex2` and `rcp` for f32 output.
    pub fast_tanh: bool,
    /// Named f32 constants of the activation, as PTX hex literals.
    pub constants: Constants,
    /// The thread's distinct rows; elements name them by index.
    pub rows: Vec<Line>,
    pub segments: Vec<Segment>,
    /// Columns in the widest chunk: the registers of their bias values and guards.
    pub chunk_columns: usize,
    /// Bytes of one C element (C-in's addresses).
    pub out_bytes: u32,
}

/// How one element of a vector or matrix is loaded and widened to f32.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ElementLoad {
    /// bf16, f16 or f32.
    #[serde(serialize_with = "flags")]
    pub dtype: DType,
    pub bytes: u32,
    /// `ld.global.nc` for inputs no thread writes during the kernel (the bias), `ld.global`
    /// for C-in, which may be C itself.
    pub load: &'static str,
}

/// How a value is stored to the aux output.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct AuxStore {
    /// `cvt.rn.bf16.f32` or `cvt.rn.f16.f32` into a 16-bit register; empty for f32.
    pub convert: &'static str,
    /// `st.global.b16` or `st.global.f32`.
    pub store: &'static str,
    /// `st.global.b32` for a pair of adjacent 16-bit values (where C's alignment pairs the
    /// columns, see [`ChunkElement::pair_first`]); none for f32.
    pub pair_store: Option<&'static str>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct BiasPlan {
    #[serde(serialize_with = "flags")]
    pub along: BiasAlong,
    pub element: ElementLoad,
}

/// Where a row's factor lies (`row_scale: f32`): from the vector's start at the row's index,
/// past `index · M` factors for a product of a batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct RowScalePlan {
    /// The rows are the product's (a batch: M factors per product); a grouped kernel's rows
    /// already count every expert's, so its factors are one vector over A's rows.
    pub per_product: bool,
}

/// One of the thread's rows or columns.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Line {
    /// Rows below (columns right of) the thread's first.
    pub offset: u32,
    /// Bytes into the bias vector from the thread's first element of it, where the bias runs
    /// this way (0 otherwise).
    pub bias_offset: u32,
}

/// Accumulators the family stores together, transformed together just before.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Segment {
    pub chunks: Vec<ColumnChunk>,
}

/// Up to [`CHUNK_COLUMNS`] (grouped: [`GROUPED_CHUNK_COLUMNS`]) of a segment's columns and
/// every accumulator of the segment in
/// them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ColumnChunk {
    pub cols: Vec<Line>,
    pub elements: Vec<ChunkElement>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ChunkElement {
    pub acc: u32,
    /// Index into [`FusedEpilogue::rows`].
    pub row: usize,
    /// Index into the chunk's `cols`.
    pub col: usize,
    /// Bytes right of the thread's first column in a C-in row.
    pub c_offset: u32,
    /// The chunk's first element in its row (a row bias is loaded there).
    pub starts_row: bool,
    /// The row's [`Line::bias_offset`].
    pub row_bias_offset: u32,
    /// Where C-in is read, the element that loads it: the first of a pair of columns
    /// `2j, 2j + 1` loads both with one access (the second's value is then in
    /// `%fe_c_hi`), an element without its pair loads itself.
    pub c_load: Option<CLoad>,
    /// `%fe_c_lo` or `%fe_c_hi`: the register its C-in value is in.
    pub c_value: &'static str,
    /// The second of a pair of columns `2j, 2j + 1`: the first's column (an index into the
    /// chunk's `cols`) and C offset. The pair's aux values go out in one store, here.
    pub pair_first: Option<PairFirst>,
}

/// The first element of a pair, as its second sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct PairFirst {
    pub col: usize,
    pub c_offset: u32,
}

/// One load of C-in: an element, or a pair of adjacent elements in one access (an edge
/// block loads the first alone where the second lies past N).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct CLoad {
    /// The pair's second column, as an index into the chunk's columns.
    pub pair_col: Option<usize>,
}

/// The activations' constants, as `0f` hex literals.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Constants {
    /// √(2/π) and √(2/π)·0.044715: `tanh(x·(a + b·x²))`.
    pub gelu_a: String,
    pub gelu_b: String,
    /// The same scaled by −2·log2(e): `1 / (1 + 2^(x·(a + b·x²)))` is `(1 + tanh)/2`.
    pub gelu_exp_a: String,
    pub gelu_exp_b: String,
    /// −log2(e): `2^(−x·log2 e) = e^(−x)`.
    pub minus_log2e: String,
    pub log2e: String,
    /// 1/√2.
    pub rsqrt2: String,
    /// The erfc approximation's polynomial in `t = 1/(1 + z/2)`, highest power first
    /// (Numerical Recipes' `erfcc`, fractional error below 1.2e-7).
    pub erfc: Vec<String>,
}

/// The coefficients of `erfc(z) ≈ t·exp(−z² + P(t))`, `P` from the constant term up.
const ERFC_POLYNOMIAL: [f64; 10] = [
    -1.265_512_23,
    1.000_023_68,
    0.374_091_96,
    0.096_784_18,
    -0.186_288_06,
    0.278_868_07,
    -1.135_203_98,
    1.488_515_87,
    -0.822_152_23,
    0.170_872_77,
];

fn hex(value: f32) -> String {
    format!("0f{:08X}", value.to_bits())
}

impl Constants {
    fn new() -> Constants {
        let sqrt_2_over_pi = (2.0f64 / std::f64::consts::PI).sqrt();
        let cubic = 0.044715f64;
        let log2e = std::f64::consts::LOG2_E;
        Constants {
            gelu_a: hex(sqrt_2_over_pi as f32),
            gelu_b: hex((sqrt_2_over_pi * cubic) as f32),
            gelu_exp_a: hex((-2.0 * log2e * sqrt_2_over_pi) as f32),
            gelu_exp_b: hex((-2.0 * log2e * sqrt_2_over_pi * cubic) as f32),
            minus_log2e: hex(-log2e as f32),
            log2e: hex(log2e as f32),
            rsqrt2: hex(std::f64::consts::FRAC_1_SQRT_2 as f32),
            erfc: ERFC_POLYNOMIAL
                .iter()
                .rev()
                .map(|&c| hex(c as f32))
                .collect(),
        }
    }
}

impl ElementLoad {
    fn of(dtype: DType, load: &'static str) -> ElementLoad {
        ElementLoad {
            dtype: match dtype {
                DType::Bf16 | DType::F16 | DType::F32 => dtype,
                DType::Tf32 => DType::F32,
                DType::E4m3 | DType::E5m2 => unreachable!("fp8 is an input type only (validated)"),
            },
            bytes: dtype.size_bytes(),
            load,
        }
    }
}

impl FusedEpilogue {
    /// The epilogue with C-in staged by the family ([`FusedEpilogue::c_in_staged`]).
    pub fn with_c_in_staged(self) -> Self {
        FusedEpilogue {
            c_in_staged: self.c_in.is_some(),
            ..self
        }
    }

    /// The spec's fused epilogue over a thread's accumulators, segment by segment, or none if
    /// the spec has none. `c_align_bytes` is the alignment the launch guarantees C's rows
    /// (and so C-in's): pairs of C-in elements load as one access where it covers a pair.
    pub fn of(
        spec: &GemmSpec,
        segments: &[Vec<AccElement>],
        c_align_bytes: u32,
    ) -> Option<FusedEpilogue> {
        if !has_fused_epilogue(spec) {
            return None;
        }
        let mut rows: Vec<u32> = segments.iter().flatten().map(|e| e.row).collect();
        rows.sort_unstable();
        rows.dedup();
        let out_bytes = spec.out.size_bytes();
        let chunk_width = if spec.groups.is_grouped() {
            GROUPED_CHUNK_COLUMNS
        } else {
            CHUNK_COLUMNS
        };
        let bias_bytes = |along: BiasAlong| match spec.bias.vector() {
            Some((a, dtype)) if a == along => dtype.size_bytes(),
            _ => 0,
        };
        let line = |offset: u32, along| Line {
            offset,
            bias_offset: offset * bias_bytes(along),
        };
        let segment = |elements: &[AccElement]| {
            let mut cols: Vec<u32> = elements.iter().map(|e| e.col).collect();
            cols.sort_unstable();
            cols.dedup();
            let chunks = cols
                .chunks(chunk_width)
                .map(|chunk_cols| {
                    let mut chunk_elements: Vec<ChunkElement> = elements
                        .iter()
                        .filter_map(|e| {
                            let col = chunk_cols.iter().position(|&c| c == e.col)?;
                            let row = rows.binary_search(&e.row).expect("every row is listed");
                            Some(ChunkElement {
                                acc: e.acc,
                                row,
                                col,
                                c_offset: e.col * out_bytes,
                                starts_row: false,
                                row_bias_offset: e.row * bias_bytes(BiasAlong::Row),
                                c_load: None,
                                c_value: "%fe_c_lo",
                                pair_first: None,
                            })
                        })
                        .collect();
                    chunk_elements.sort_by_key(|e| (e.row, e.col));
                    let mut previous_row = None;
                    for element in &mut chunk_elements {
                        element.starts_row = previous_row != Some(element.row);
                        previous_row = Some(element.row);
                    }
                    if c_align_bytes >= 2 * out_bytes {
                        pair_c_loads(&mut chunk_elements, chunk_cols);
                    } else {
                        for element in &mut chunk_elements {
                            element.c_load = Some(CLoad { pair_col: None });
                        }
                    }
                    ColumnChunk {
                        cols: chunk_cols
                            .iter()
                            .map(|&c| line(c, BiasAlong::Col))
                            .collect(),
                        elements: chunk_elements,
                    }
                })
                .collect();
            Segment { chunks }
        };
        let segments: Vec<Segment> = segments.iter().map(|s| segment(s)).collect();
        let chunk_columns = segments
            .iter()
            .flat_map(|s| s.chunks.iter().map(|c| c.cols.len()))
            .max()
            .unwrap_or(1);
        Some(FusedEpilogue {
            alpha: spec.scale.has_alpha() || spec.quant == Quant::Tensor,
            alpha_param: spec.scale.has_alpha(),
            quant_scales: spec.quant == Quant::Tensor,
            c_in: spec
                .scale
                .reads_c()
                .then(|| ElementLoad::of(spec.out, "ld.global")),
            c_in_staged: false,
            bias: spec.bias.vector().map(|(along, dtype)| BiasPlan {
                along,
                element: ElementLoad::of(dtype, "ld.global.nc"),
            }),
            aux: (spec.aux == Aux::PreActivation).then_some(match spec.out {
                DType::Bf16 => AuxStore {
                    convert: "cvt.rn.bf16.f32",
                    store: "st.global.b16",
                    pair_store: Some("st.global.b32"),
                },
                DType::F16 => AuxStore {
                    convert: "cvt.rn.f16.f32",
                    store: "st.global.b16",
                    pair_store: Some("st.global.b32"),
                },
                DType::F32 | DType::Tf32 => AuxStore {
                    convert: "",
                    store: "st.global.f32",
                    pair_store: None,
                },
                DType::E4m3 | DType::E5m2 => unreachable!("fp8 is an input type only (validated)"),
            }),
            activation: spec.activation,
            row_scale: (spec.row_scale == RowScale::F32).then_some(RowScalePlan {
                per_product: !spec.groups.is_grouped(),
            }),
            fast_tanh: out_bytes == 2,
            constants: Constants::new(),
            rows: rows.iter().map(|&r| line(r, BiasAlong::Row)).collect(),
            chunk_columns,
            segments,
            out_bytes,
        })
    }

    /// Whether the transform reads a bias value per column (so each chunk loads its own).
    pub fn column_bias(&self) -> bool {
        self.bias
            .as_ref()
            .is_some_and(|b| b.along == BiasAlong::Col)
    }
}

/// Pairs each element in an even column with the next column's element of its row: one
/// access loads both C-in values, one stores both aux values (elements are in row, then
/// column order).
fn pair_c_loads(elements: &mut [ChunkElement], cols: &[u32]) {
    let mut i = 0;
    while i < elements.len() {
        let (first, rest) = elements[i..].split_at_mut(1);
        let element = &mut first[0];
        let partner = rest.first_mut().filter(|next| {
            next.row == element.row
                && cols[element.col].is_multiple_of(2)
                && cols[next.col] == cols[element.col] + 1
        });
        element.c_value = "%fe_c_lo";
        match partner {
            Some(next) => {
                element.c_load = Some(CLoad {
                    pair_col: Some(next.col),
                });
                next.c_load = None;
                next.c_value = "%fe_c_hi";
                next.pair_first = Some(PairFirst {
                    col: element.col,
                    c_offset: element.c_offset,
                });
                i += 2;
            }
            None => {
                element.c_load = Some(CLoad { pair_col: None });
                i += 1;
            }
        }
    }
}

/// Whether the fused epilogue loads from global memory (C-in, a bias or the rows' factors).
pub fn reads_memory(spec: &GemmSpec) -> bool {
    spec.scale.reads_c() || spec.bias.vector().is_some() || spec.row_scale != RowScale::None
}

/// Whether the spec asks for any epilogue math at all.
pub fn has_fused_epilogue(spec: &GemmSpec) -> bool {
    spec.scale != Scale::None
        || spec.bias.vector().is_some()
        || spec.activation != Activation::None
        || spec.row_scale != RowScale::None
        || spec.quant == Quant::Tensor
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(text: &str) -> GemmSpec {
        gemm_dsl::check_str(text).unwrap().spec
    }

    #[test]
    fn no_keys_no_epilogue() {
        let plain = spec("name: k, mma: wgmma, arch: sm_90a");
        assert!(FusedEpilogue::of(&plain, &[Vec::new()], 16).is_none());
    }

    #[test]
    fn elements_group_by_column_chunks_and_every_one_is_transformed_once() {
        let s = spec(
            "name: k, mma: wgmma, arch: sm_90a, scale: alpha_beta, bias: col, activation: gelu",
        );
        // Two rows of 40 columns, in the register order of a wgmma fragment.
        let elements: Vec<AccElement> = (0..80)
            .map(|i| AccElement {
                acc: i,
                row: 8 * ((i / 2) % 2),
                col: 8 * (i / 4) + i % 2,
            })
            .collect();
        let fused = FusedEpilogue::of(&s, std::slice::from_ref(&elements), 16).unwrap();
        assert_eq!(fused.segments.len(), 1);
        let chunks = &fused.segments[0].chunks;
        let offsets = |lines: &[Line]| lines.iter().map(|l| l.offset).collect::<Vec<_>>();
        assert_eq!(offsets(&fused.rows), [0, 8]);
        assert_eq!(chunks.len(), 3);
        assert_eq!(chunks[0].cols.len(), CHUNK_COLUMNS);
        let mut seen: Vec<u32> = chunks
            .iter()
            .flat_map(|c| c.elements.iter().map(|e| e.acc))
            .collect();
        seen.sort_unstable();
        assert_eq!(seen, (0..80).collect::<Vec<_>>());
        for chunk in chunks {
            for e in &chunk.elements {
                let original = elements[e.acc as usize];
                assert_eq!(fused.rows[e.row].offset, original.row);
                assert_eq!(chunk.cols[e.col].offset, original.col);
                assert_eq!(chunk.cols[e.col].bias_offset, original.col * 2);
                assert_eq!(e.c_offset, original.col * 2);
            }
        }
        assert!(fused.alpha && fused.column_bias() && fused.fast_tanh);
        // Every element's C-in value is loaded once: pairs (8j, 8j + 1) by their first.
        for chunk in chunks {
            for (i, e) in chunk.elements.iter().enumerate() {
                match e.c_load {
                    Some(CLoad {
                        pair_col: Some(col),
                    }) => {
                        let next = &chunk.elements[i + 1];
                        assert_eq!(
                            (next.col, next.c_load, next.c_value),
                            (col, None, "%fe_c_hi")
                        );
                        assert_eq!(chunk.cols[col].offset, chunk.cols[e.col].offset + 1);
                    }
                    Some(CLoad { pair_col: None }) => panic!("every column has its pair here"),
                    None => assert_eq!(e.c_value, "%fe_c_hi"),
                }
            }
        }
        // Rows aligned to one element only: each element loads itself.
        let unpaired = FusedEpilogue::of(&s, &[elements], 2).unwrap();
        assert!(unpaired.segments[0].chunks.iter().all(|c| c
            .elements
            .iter()
            .all(|e| e.c_load == Some(CLoad { pair_col: None }) && e.c_value == "%fe_c_lo")));
        assert!(chunks.iter().all(|c| c.elements[0].starts_row));
        assert_eq!(
            chunks[0].elements.iter().filter(|e| e.starts_row).count(),
            2
        );
        assert_eq!(fused.c_in.as_ref().unwrap().load, "ld.global");
        assert_eq!(fused.bias.as_ref().unwrap().element.dtype, DType::Bf16);
    }

    #[test]
    fn constants_are_the_formulas() {
        let c = Constants::new();
        let value = |h: &str| f32::from_bits(u32::from_str_radix(&h[2..], 16).unwrap());
        assert!((value(&c.gelu_a) - 0.797_884_6).abs() < 1e-7);
        assert!((value(&c.gelu_b) - 0.035_677_41).abs() < 1e-8);
        // (1 + tanh(y)) / 2 = 1 / (1 + e^(−2y)) = 1 / (1 + 2^(−2y·log2 e)).
        for x in [-3.0f32, -0.5, 0.1, 2.0] {
            let y = x * (value(&c.gelu_a) + value(&c.gelu_b) * x * x);
            let through_exp =
                1.0 / (1.0 + (x * (value(&c.gelu_exp_a) + value(&c.gelu_exp_b) * x * x)).exp2());
            assert!(((1.0 + y.tanh()) / 2.0 - through_exp).abs() < 1e-6, "{x}");
        }
        // The erfc polynomial against erfc(0) = 1 and erfc(1) = 0.157299207.
        let erfc = |z: f32| {
            let t = 1.0 / (1.0 + z / 2.0);
            let p = c.erfc.iter().fold(0.0f32, |p, h| p * t + value(h));
            t * ((-z * z + p) * value(&c.log2e)).exp2()
        };
        assert!((erfc(0.0) - 1.0).abs() < 1e-6);
        assert!((erfc(1.0) - 0.157_299_2).abs() < 1e-6);
    }

    /// Runs the f32 instructions of an activation as printed, exactly rounded (the hardware's
    /// `.approx` forms are within a few ulps of these).
    fn run_activation(text: &str, x: f32) -> f32 {
        use std::collections::HashMap;
        let mut f: HashMap<String, f32> = HashMap::from([("%x".to_string(), x)]);
        let mut p: HashMap<String, bool> = HashMap::new();
        for line in text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with("//"))
        {
            let (op, operands) = line.trim_end_matches(';').split_once('\t').unwrap();
            let args: Vec<&str> = operands.split(", ").collect();
            let value = |a: &str| match a.strip_prefix("0f") {
                Some(hex) => f32::from_bits(u32::from_str_radix(hex, 16).unwrap()),
                None => f[a],
            };
            let v: Vec<f32> = args[1..]
                .iter()
                .map(|a| {
                    if a.starts_with("%fe_q") {
                        0.0
                    } else {
                        value(a)
                    }
                })
                .collect();
            let result = match op {
                "mul.f32" => v[0] * v[1],
                "add.f32" => v[0] + v[1],
                "sub.f32" => v[0] - v[1],
                "fma.rn.f32" => v[0].mul_add(v[1], v[2]),
                "max.f32" => v[0].max(v[1]),
                "abs.f32" => v[0].abs(),
                "mov.f32" => v[0],
                "tanh.approx.f32" => v[0].tanh(),
                "ex2.approx.ftz.f32" => v[0].exp2(),
                "rcp.approx.ftz.f32" => 1.0 / v[0],
                "setp.ge.f32" => {
                    p.insert(args[0].to_string(), v[0] >= v[1]);
                    continue;
                }
                "selp.f32" => {
                    if p[args[3]] {
                        v[0]
                    } else {
                        v[1]
                    }
                }
                other => panic!("the test runs no `{other}`"),
            };
            f.insert(args[0].to_string(), result);
        }
        f["%x"]
    }

    #[test]
    fn the_printed_activations_compute_their_functions() {
        // GELU(x) = x·Φ(x): exact values of the normal CDF at these points.
        let gelu_erf = [
            (-3.0, -0.004_049_59),
            (-1.0, -0.158_655_25),
            (-0.5, -0.154_268_62),
            (0.5, 0.345_731_38),
            (1.0, 0.841_344_75),
            (2.0, 1.954_499_74),
            (3.0, 2.995_950_41),
        ];
        let tanh_gelu = |x: f64| {
            0.5 * x
                * (1.0 + ((2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x * x * x)).tanh())
        };
        for out in ["bf16", "f32"] {
            for activation in ["relu", "gelu", "gelu_erf", "silu"] {
                let s = spec(&format!(
                    "mma: wgmma, arch: sm_90a, out: {out}, activation: {activation}"
                ));
                let e = FusedEpilogue::of(&s, &[Vec::new()], 16).unwrap();
                let text = crate::ptx::activation_text(&e, "%x");
                for (x, erf_value) in gelu_erf {
                    let want = match activation {
                        "relu" => f64::max(x, 0.0),
                        "gelu" => tanh_gelu(x),
                        "gelu_erf" => erf_value,
                        _ => x / (1.0 + (-x).exp()),
                    };
                    let got = f64::from(run_activation(&text, x as f32));
                    assert!(
                        (got - want).abs() <= 1e-6 * want.abs().max(1.0),
                        "{activation} ({out} out) of {x}: {got}, want {want}"
                    );
                }
            }
        }
    }
}
