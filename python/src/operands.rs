//! Tensors as Python describes them, checked and turned into the entry point's problem.
//!
//! Nothing here touches Python or the GPU: a call is planned from each tensor's address,
//! sizes, strides (in elements), element type and device, and every refusal names the tensor
//! and the numbers. torch.matmul's rules: the last two dimensions multiply, the ones before
//! broadcast as a batch.

use gemm_dsl::pick::{self, Problem};
use gemm_dsl::{Activation, BiasAlong, DType, Layout, Quant};
use gemm_runtime::check::MAX_BATCH;
use gemm_runtime::{Batch, KernelTypes};

/// Why a call was refused, as the Python exception it becomes.
#[derive(Debug, PartialEq)]
pub enum ArgError {
    /// An element type no kernel takes (Python's `TypeError`).
    Type(String),
    /// Shapes, strides, devices or addresses no launch can take (`ValueError`).
    Value(String),
}

/// Where a tensor lives, as torch names devices.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Device {
    Cuda(u32),
    /// Any other device, by its name (`cpu`, `meta`, ...).
    Other(String),
}

impl std::fmt::Display for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Device::Cuda(index) => write!(f, "cuda:{index}"),
            Device::Other(name) => f.write_str(name),
        }
    }
}

/// One tensor argument: what `gemm_dsl` reads off a torch tensor (or an array interface).
#[derive(Clone, Debug)]
pub struct Tensor {
    /// The argument's name in messages: `a`, `b`, `out`, `bias`, `c`.
    pub name: &'static str,
    pub address: u64,
    pub shape: Vec<i64>,
    /// In elements, one per dimension.
    pub strides: Vec<i64>,
    /// The element type as torch spells it (`bfloat16`, `float16`, `float32`, `int32`, ...).
    pub dtype: String,
    pub device: Device,
}

/// The element types `gemm_dsl.matmul` multiplies, by torch's names.
pub fn dtype_of(name: &str) -> Option<DType> {
    match name {
        "bfloat16" => Some(DType::Bf16),
        "float16" => Some(DType::F16),
        "float32" => Some(DType::F32),
        _ => None,
    }
}

/// torch's name for an element type.
pub fn torch_name(dtype: DType) -> &'static str {
    match dtype {
        DType::Bf16 => "bfloat16",
        DType::F16 => "float16",
        DType::F32 | DType::Tf32 => "float32",
        DType::E4m3 => "float8_e4m3fn",
        DType::E5m2 => "float8_e5m2",
    }
}

/// The epilogue a call asks for, beside `out = a @ b`.
#[derive(Clone, Debug)]
pub struct EpilogueArgs {
    pub activation: Activation,
    pub alpha: f32,
    pub beta: f32,
    pub bias: Option<Tensor>,
    pub c: Option<Tensor>,
    /// fp8 a's and b's dequantization scales (torch._scaled_mm's `scale_a`, `scale_b`): the
    /// operands are then float8.
    pub scales: Option<(Tensor, Tensor)>,
    /// The scales are a's per 1x128 block and b's per 128x128 block (torch's `BlockWise1x128`
    /// and `BlockWise128x128`), not one value each.
    pub block_scales: bool,
}

/// A checked call: the problem the entry point picks for, where each operand lies, and the
/// batch's strides, all in the frame the kernels compute in (`C = A·B`, C row-major).
#[derive(Clone, Debug, PartialEq)]
pub struct Call {
    pub device: u32,
    pub types: KernelTypes,
    pub problem: Problem,
    /// The batch one launch runs.
    pub batch: Batch,
    /// One launch each, where the batch's leading dimensions cannot be walked with one
    /// stride per operand (a batch broadcast across another).
    pub launches: Vec<Offsets>,
    /// The first launch's operands.
    pub a: Span,
    pub b: Span,
    pub c: Span,
    /// `out` was column-major: the kernels compute `outᵀ = bᵀ·aᵀ`, so A here is the caller's
    /// `b` transposed, B the caller's `a`, and a bias along `out`'s columns runs along rows.
    pub transposed: bool,
    pub bias: Option<BiasSpan>,
    /// C-in for `beta·c` (laid out as `out`).
    pub c_in: Option<Span>,
    /// The fp8 operands' scales (A's, B's in the kernels' frame): one f32 each
    /// (`Quant::Tensor`), or the block-scaled kernels' two arrays (`Quant::Block`).
    pub quant_scales: Option<(Span, Span)>,
    /// Which scales `quant_scales` holds (`Quant::None` for none).
    pub quant: Quant,
    pub activation: Activation,
    pub alpha: f32,
    pub beta: f32,
}

/// Where one launch's matrices start, in elements past each operand's first (C-in's as C's).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Offsets {
    pub a: u64,
    pub b: u64,
    pub c: u64,
}

/// The elements an operand's view reaches, from its first: what the launch checks its
/// buffer's length against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span {
    pub address: u64,
    pub len: usize,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BiasSpan {
    pub span: Span,
    pub along: BiasAlong,
    pub dtype: DType,
}

/// A matrix operand's last two dimensions: its rows and columns in the caller's frame, and
/// how they lie.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Matrix {
    rows: u32,
    cols: u32,
    row_major: bool,
    /// Elements between rows (row-major) or columns (column-major).
    ld: u32,
}

impl Matrix {
    /// The matrix transposed: the same memory, rows and columns exchanged.
    fn transposed(self) -> Matrix {
        Matrix {
            rows: self.cols,
            cols: self.rows,
            row_major: !self.row_major,
            ld: self.ld,
        }
    }

    /// Elements from one row (column-major: column) to the next, walking the whole matrix.
    fn extent(self) -> u64 {
        let (lines, line) = if self.row_major {
            (self.rows, self.cols)
        } else {
            (self.cols, self.rows)
        };
        u64::from(lines - 1) * u64::from(self.ld) + u64::from(line)
    }
}

pub(crate) fn value(message: String) -> ArgError {
    ArgError::Value(message)
}

/// Plans `out = alpha·(a @ b) + beta·c + bias` over torch.matmul's batch rules.
pub fn plan_matmul(
    a: &Tensor,
    b: &Tensor,
    out: &Tensor,
    epilogue: &EpilogueArgs,
) -> Result<Call, ArgError> {
    let dtype = match epilogue.scales {
        Some(_) => fp8_input_dtype(a)?,
        None => input_dtype(a)?,
    };
    if b.dtype != a.dtype {
        return Err(ArgError::Type(format!(
            "a is {} but b is {}: both operands must have one element type",
            a.dtype, b.dtype
        )));
    }
    let out_dtype = dtype_of(&out.dtype)
        .and_then(|out_dtype| KernelTypes::new(dtype, out_dtype))
        .ok_or_else(|| {
            let allowed = if dtype == DType::F32 {
                "float32".to_string()
            } else if dtype.is_fp8() {
                "bfloat16, float16 or float32".to_string()
            } else {
                format!("{} or float32", torch_name(dtype))
            };
            ArgError::Type(format!(
                "out is {} for {} operands: it may be {allowed}",
                out.dtype, a.dtype
            ))
        })?;
    for tensor in [a, b, out] {
        if tensor.shape.len() < 2 {
            return Err(value(format!(
                "{} has {} dimension(s) (shape {:?}); gemm_dsl multiplies matrices: at least 2",
                tensor.name,
                tensor.shape.len(),
                tensor.shape
            )));
        }
        check_sizes(tensor)?;
    }
    let (m, k) = last_two(a);
    let (kb, n) = last_two(b);
    if k != kb {
        return Err(value(format!(
            "a {:?} and b {:?} cannot be multiplied: a's columns ({k}) differ from b's rows ({kb})",
            a.shape, b.shape
        )));
    }
    let batch_shape = broadcast(a, b)?;
    let mut out_expected = batch_shape.clone();
    out_expected.extend([m, n]);
    if !out
        .shape
        .iter()
        .map(|&s| s as u64)
        .eq(out_expected.iter().copied())
    {
        return Err(value(format!(
            "out has shape {:?}; a {:?} @ b {:?} is {:?}",
            out.shape, a.shape, b.shape, out_expected
        )));
    }
    if m == 0 || n == 0 || k == 0 {
        return Err(value(format!(
            "a {:?} @ b {:?} is empty (m = {m}, n = {n}, k = {k}); no kernel runs on it",
            a.shape, b.shape
        )));
    }
    let device = cuda_device(&[a, b, out])?;
    let element_bytes = dtype.size_bytes() as u64;
    let out_bytes = out_dtype.out().size_bytes() as u64;
    for (tensor, bytes) in [(a, element_bytes), (b, element_bytes), (out, out_bytes)] {
        check_address(tensor, bytes)?;
    }
    check_no_alias(out, out_bytes, [(a, element_bytes), (b, element_bytes)])?;

    let mut mat_a = matrix(a)?;
    let mut mat_b = matrix(b)?;
    let mut mat_c = matrix(out)?;
    let mut strides_a = batch_dim_strides(a, &batch_shape);
    let mut strides_b = batch_dim_strides(b, &batch_shape);
    let strides_c = batch_dim_strides(out, &batch_shape);
    let (mut address_a, mut address_b) = (a.address, b.address);
    // A column-major out is a row-major outᵀ = bᵀ·aᵀ.
    let transposed = !mat_c.row_major;
    if transposed {
        (mat_a, mat_b) = (mat_b.transposed(), mat_a.transposed());
        mat_c = mat_c.transposed();
        (strides_a, strides_b) = (strides_b, strides_a);
        (address_a, address_b) = (address_b, address_a);
    }
    let total = batch_shape.iter().product::<u64>();
    if total == 0 {
        return Err(value(format!(
            "a {:?} @ b {:?} is an empty batch (batch shape {batch_shape:?}); no kernel runs on it",
            a.shape, b.shape
        )));
    }
    if total > 1 && walk(&batch_shape, &strides_c).is_none_or(|stride| stride < mat_c.extent()) {
        return Err(value(format!(
            "out's matrices overlap or cannot be walked with one stride (strides {:?} for shape \
             {:?}): give each product's output its own place, as a contiguous tensor does",
            out.strides, out.shape
        )));
    }
    let fuses = epilogue.alpha != 1.0
        || epilogue.scales.is_some()
        || epilogue.beta != 0.0
        || epilogue.bias.is_some()
        || epilogue.activation != Activation::None;
    // A fused epilogue's launch takes a batch of matrices back to back only.
    let packed = |mat: Matrix, stride: u64| {
        let lines = if mat.row_major { mat.rows } else { mat.cols };
        stride == u64::from(lines) * u64::from(mat.ld)
    };
    let walks = |split: usize| -> Option<(u64, u64, u64)> {
        let dims = &batch_shape[split..];
        Some((
            walk(dims, &strides_a[split..])?,
            walk(dims, &strides_b[split..])?,
            walk(dims, &strides_c[split..])?,
        ))
    };
    // One product over every batch's rows, where B is shared and A's and C's batches follow
    // on from their last rows (nn.Linear's [batch, tokens, features] input): a taller
    // problem instead of a batch of short ones. (Not with a bias along out's columns seen
    // transposed: it would run along the taller problem's rows.)
    let rows_follow = |mat: Matrix, stride: u64| {
        mat.row_major && stride == u64::from(mat.rows) * u64::from(mat.ld)
    };
    let (mut m_rows, n_cols, k_depth) = (mat_a.rows, mat_b.cols, mat_a.cols);
    let folds = total > 1
        && !(transposed && epilogue.bias.is_some())
        && u64::from(m_rows) * total <= u64::from(u32::MAX)
        && walks(0).is_some_and(|(sa, sb, sc)| {
            sb == 0 && rows_follow(mat_a, sa) && rows_follow(mat_c, sc)
        });
    // Otherwise the batch dimensions from `split` on run in one launch, each operand walking
    // them with one stride; the ones before it (a batch broadcast across, say) are a launch
    // each, as is every product of a fused epilogue over a batch not back to back.
    let inner = |split: usize| -> Option<(u64, u64, u64, u64)> {
        let (sa, sb, sc) = walks(split)?;
        let count = batch_shape[split..].iter().product::<u64>();
        let fits = count <= u64::from(MAX_BATCH)
            && (!fuses
                || count == 1
                || (packed(mat_a, sa) && packed(mat_b, sb) && packed(mat_c, sc)));
        fits.then_some((count, sa, sb, sc))
    };
    let (split, count, batch_a, batch_b, batch_c) = if folds {
        m_rows = (u64::from(m_rows) * total) as u32;
        mat_a.rows = m_rows;
        mat_c.rows = m_rows;
        (0, 1, 0, 0, 0)
    } else {
        let split = (0..=batch_shape.len())
            .find(|&split| inner(split).is_some())
            .expect("an empty batch runs in one launch");
        let (count, sa, sb, sc) = inner(split).expect("found above");
        (split, count, sa, sb, sc)
    };
    let batch = if count > 1 {
        Batch {
            count: count as u32,
            stride_a: batch_a,
            stride_b: batch_b,
            stride_c: batch_c,
        }
    } else {
        Batch::ONE
    };
    let launches = outer_offsets(
        &batch_shape[..split],
        [
            &strides_a[..split],
            &strides_b[..split],
            &strides_c[..split],
        ],
    );
    let layout = match (mat_a.row_major, mat_b.row_major) {
        (true, true) => Layout::RowRow,
        (true, false) => Layout::RowCol,
        (false, true) => Layout::ColRow,
        (false, false) => Layout::ColCol,
    };

    let c_in = match &epilogue.c {
        Some(c) if epilogue.beta != 0.0 => Some(plan_c_in(c, out)?),
        None if epilogue.beta != 0.0 => {
            return Err(value(format!(
                "beta = {} adds beta·c, but no c was given",
                epilogue.beta
            )))
        }
        _ => None,
    };
    let bias = match &epilogue.bias {
        Some(bias) => Some(plan_bias(bias, out, n, out_dtype.out(), transposed)?),
        None => None,
    };
    let quant_scales = match &epilogue.scales {
        Some((scale_a, scale_b)) => {
            if layout != Layout::RowCol {
                return Err(value(format!(
                    "fp8 operands are read K-major: a row-major and b column-major (b = w.t() of \
                     a row-major [N, K] w), as torch._scaled_mm takes them; a has strides {:?} \
                     and b {:?}",
                    a.strides, b.strides
                )));
            }
            if epilogue.block_scales {
                // Swapped, b's 128x128 blocks would have to scale A's 1x128 rows.
                if transposed {
                    return Err(value(format!(
                        "block scales need a row-major out (a column-major out is computed as \
                         outᵀ = bᵀ·aᵀ, which the blocks do not follow); out has strides {:?}",
                        out.strides
                    )));
                }
                if total > 1 {
                    return Err(value(format!(
                        "block scales cover one product; a and b make a batch of {total}"
                    )));
                }
                Some(plan_block_scales(
                    scale_a, scale_b, m_rows, n_cols, k_depth, out,
                )?)
            } else {
                let (scale_a, scale_b) = (plan_scale(scale_a, out)?, plan_scale(scale_b, out)?);
                // outᵀ = bᵀ·aᵀ scales bᵀ by b's scale.
                Some(if transposed {
                    (scale_b, scale_a)
                } else {
                    (scale_a, scale_b)
                })
            }
        }
        None => None,
    };

    // Every address a launch starts an operand's matrix at, in bytes from an allocation.
    let mut starts = vec![address_a, address_b, out.address];
    starts.extend(c_in.map(|c| c.address));
    starts.extend([
        batch_a * element_bytes,
        batch_b * element_bytes,
        batch_c * out_bytes,
    ]);
    for (dim, &size) in batch_shape[..split].iter().enumerate() {
        if size > 1 {
            starts.extend([
                strides_a[dim] * element_bytes,
                strides_b[dim] * element_bytes,
                strides_c[dim] * out_bytes,
            ]);
        }
    }
    let address_align = starts
        .iter()
        .map(|&bytes| alignment(bytes))
        .min()
        .unwrap_or(pick::ALLOCATION_ALIGN);
    let problem = Problem::new(m_rows, n_cols, k_depth, layout)
        .with_batch(count as u32)
        .with_leading_dims(mat_a.ld, mat_b.ld, mat_c.ld)
        .with_address_align(address_align);
    let matrix_span = |mat: Matrix, stride: u64, address: u64| Span {
        address,
        len: (mat.extent() + stride * (count - 1)) as usize,
    };
    let c = matrix_span(mat_c, batch.stride_c, out.address);
    Ok(Call {
        device,
        types: out_dtype,
        problem,
        batch,
        launches,
        a: matrix_span(mat_a, batch.stride_a, address_a),
        b: matrix_span(mat_b, batch.stride_b, address_b),
        c,
        transposed,
        bias,
        c_in: c_in.map(|c_in| Span { len: c.len, ..c_in }),
        quant_scales,
        quant: match (&quant_scales, epilogue.block_scales) {
            (None, _) => Quant::None,
            (Some(_), false) => Quant::Tensor,
            (Some(_), true) => Quant::Block,
        },
        activation: epilogue.activation,
        alpha: epilogue.alpha,
        beta: epilogue.beta,
    })
}

fn input_dtype(a: &Tensor) -> Result<DType, ArgError> {
    dtype_of(&a.dtype).ok_or_else(|| {
        ArgError::Type(format!(
            "a is {}: gemm_dsl.matmul multiplies bfloat16, float16 or float32 tensors",
            a.dtype
        ))
    })
}

fn fp8_input_dtype(a: &Tensor) -> Result<DType, ArgError> {
    match a.dtype.as_str() {
        "float8_e4m3fn" => Ok(DType::E4m3),
        "float8_e5m2" => Ok(DType::E5m2),
        other => Err(ArgError::Type(format!(
            "a is {other}: gemm_dsl.scaled_mm multiplies float8_e4m3fn or float8_e5m2 tensors"
        ))),
    }
}

/// A per-tensor dequantization scale: one float32 on the output's device.
fn plan_scale(scale: &Tensor, out: &Tensor) -> Result<Span, ArgError> {
    if scale.dtype != "float32" {
        return Err(ArgError::Type(format!(
            "{} is {}: a per-tensor scale is one float32",
            scale.name, scale.dtype
        )));
    }
    if scale.shape.iter().any(|&size| size != 1) {
        return Err(value(format!(
            "{} has shape {:?}: a per-tensor scale is one value (block scales: \
             block_scales=True; row-wise scales are not taken)",
            scale.name, scale.shape
        )));
    }
    check_on_out_device(scale, out)?;
    check_address(scale, 4)?;
    Ok(Span {
        address: scale.address,
        len: 1,
    })
}

/// Block scales as torch._scaled_mm takes them for 1x128 blocks of a and 128x128 blocks of b,
/// float32 on out's device, laid out as the block-scaled kernels read them: a's
/// `(M, ceil(K/128))` M-major, each K block's line of M rounded up to 4 values (strides
/// `(1, M4)`: cuBLAS's layout, a view of a `[ceil(K/128), M4]` buffer), and b's
/// `(ceil(K/128), ceil(N/128))` K-major (strides `(1, ceil(K/128))`: the transpose of a packed
/// `[ceil(N/128), ceil(K/128)]`). The kernels copy a's lines in 16-byte units.
fn plan_block_scales(
    scale_a: &Tensor,
    scale_b: &Tensor,
    m: u32,
    n: u32,
    k: u32,
    out: &Tensor,
) -> Result<(Span, Span), ArgError> {
    let block = Quant::BLOCK;
    let k_blocks = i64::from(k.div_ceil(block));
    let n_blocks = i64::from(n.div_ceil(block));
    let m_line = i64::from(m.next_multiple_of(Quant::A_LINE_MULTIPLE));
    let plan = |scale: &Tensor, shape: [i64; 2], strides: [i64; 2], what: &str, align: u64| {
        if scale.dtype != "float32" {
            return Err(ArgError::Type(format!(
                "{} is {}: block scales are float32",
                scale.name, scale.dtype
            )));
        }
        if scale.shape != shape {
            return Err(value(format!(
                "{} has shape {:?}, where {what} have shape {shape:?} (M = {m}, N = {n}, K = {k})",
                scale.name, scale.shape
            )));
        }
        // A dimension of one element has no stride to walk.
        let walked = |dim: usize| shape[dim] == 1 || scale.strides[dim] == strides[dim];
        if scale.strides.len() != 2 || !walked(0) || !walked(1) {
            return Err(value(format!(
                "{} has strides {:?}, where {what} are read with strides {strides:?}",
                scale.name, scale.strides
            )));
        }
        check_on_out_device(scale, out)?;
        check_address(scale, 4)?;
        if !scale.address.is_multiple_of(align) {
            return Err(value(format!(
                "{} starts at {:#x}, where {what} start on a {align}-byte boundary",
                scale.name, scale.address
            )));
        }
        Ok(Span {
            address: scale.address,
            len: (strides[1] * shape[1]) as usize,
        })
    };
    let a = plan(
        scale_a,
        [i64::from(m), k_blocks],
        [1, m_line],
        "a's 1x128 block scales (M-major, lines of M rounded up to 4)",
        16,
    )?;
    let b = plan(
        scale_b,
        [k_blocks, n_blocks],
        [1, k_blocks],
        "b's 128x128 block scales (K-major)",
        4,
    )?;
    Ok((a, b))
}

fn check_sizes(tensor: &Tensor) -> Result<(), ArgError> {
    if tensor.strides.len() != tensor.shape.len() {
        return Err(value(format!(
            "{} has {} strides for {} dimensions",
            tensor.name,
            tensor.strides.len(),
            tensor.shape.len()
        )));
    }
    if let Some(size) = tensor.shape.iter().find(|&&size| size < 0) {
        return Err(value(format!(
            "{} has a negative size {size} (shape {:?})",
            tensor.name, tensor.shape
        )));
    }
    if let Some(&size) = tensor
        .shape
        .iter()
        .find(|&&size| size > i64::from(u32::MAX))
    {
        return Err(value(format!(
            "{} has a dimension of {size}; a kernel indexes at most {} per dimension",
            tensor.name,
            u32::MAX
        )));
    }
    if tensor.strides.iter().any(|&stride| stride < 0) {
        return Err(value(format!(
            "{} has a negative stride (strides {:?}); flip it first (.contiguous())",
            tensor.name, tensor.strides
        )));
    }
    Ok(())
}

fn last_two(tensor: &Tensor) -> (u64, u64) {
    let rank = tensor.shape.len();
    (tensor.shape[rank - 2] as u64, tensor.shape[rank - 1] as u64)
}

/// The batch shape of `a @ b`: their leading dimensions broadcast as torch.matmul does.
fn broadcast(a: &Tensor, b: &Tensor) -> Result<Vec<u64>, ArgError> {
    let lead = |t: &Tensor| {
        t.shape[..t.shape.len() - 2]
            .iter()
            .map(|&s| s as u64)
            .collect::<Vec<u64>>()
    };
    let (lead_a, lead_b) = (lead(a), lead(b));
    let rank = lead_a.len().max(lead_b.len());
    let padded = |dims: &[u64]| {
        let mut padded = vec![1; rank - dims.len()];
        padded.extend_from_slice(dims);
        padded
    };
    let (pa, pb) = (padded(&lead_a), padded(&lead_b));
    pa.iter()
        .zip(&pb)
        .map(|(&x, &y)| match (x, y) {
            (x, y) if x == y => Ok(x),
            (1, y) => Ok(y),
            (x, 1) => Ok(x),
            _ => Err(value(format!(
                "batch dimensions {lead_a:?} (a) and {lead_b:?} (b) do not broadcast"
            ))),
        })
        .collect()
}

pub(crate) fn cuda_device(tensors: &[&Tensor]) -> Result<u32, ArgError> {
    let mut device = None;
    for tensor in tensors {
        match (&tensor.device, device) {
            (Device::Other(name), _) => {
                return Err(value(format!(
                    "{} is on the {name} device: gemm_dsl runs on CUDA tensors (move it with .cuda())",
                    tensor.name
                )))
            }
            (Device::Cuda(index), None) => device = Some((*index, tensor.name)),
            (Device::Cuda(index), Some((first, first_name))) if *index != first => {
                return Err(value(format!(
                    "{first_name} is on cuda:{first} but {} is on cuda:{index}: one call runs on one device",
                    tensor.name
                )))
            }
            _ => {}
        }
    }
    Ok(device.map_or(0, |(index, _)| index))
}

/// An argument beside the operands (a scale, c, a bias) must be on out's device.
fn check_on_out_device(tensor: &Tensor, out: &Tensor) -> Result<(), ArgError> {
    if tensor.device != out.device {
        return Err(value(format!(
            "{} is on {} but out is on {}",
            tensor.name, tensor.device, out.device
        )));
    }
    Ok(())
}

pub(crate) fn check_address(tensor: &Tensor, element_bytes: u64) -> Result<(), ArgError> {
    if tensor.address == 0 {
        return Err(value(format!("{}'s data pointer is null", tensor.name)));
    }
    if !tensor.address.is_multiple_of(element_bytes) {
        return Err(value(format!(
            "{} starts at {:#x}, not a multiple of its {element_bytes}-byte elements",
            tensor.name, tensor.address
        )));
    }
    Ok(())
}

/// How a tensor's last two dimensions lie: row-major (the last dimension contiguous) or
/// column-major (the one before it), with the stride between lines.
fn matrix(tensor: &Tensor) -> Result<Matrix, ArgError> {
    let rank = tensor.shape.len();
    let (rows, cols) = (tensor.shape[rank - 2] as u32, tensor.shape[rank - 1] as u32);
    let (row_stride, col_stride) = (tensor.strides[rank - 2], tensor.strides[rank - 1]);
    let fits = |stride: i64, line: u32| stride >= i64::from(line) && stride <= i64::from(u32::MAX);
    // A lone line's stride walks nothing: keep it where it fits (a batch may follow on from
    // it), else the most aligned one.
    let lone_ld = |stride: i64, line: u32| {
        if fits(stride, line) {
            stride as u32
        } else {
            line.next_multiple_of(16)
        }
    };
    if (cols == 1 || col_stride == 1) && (rows == 1 || fits(row_stride, cols)) {
        let ld = if rows == 1 {
            lone_ld(row_stride, cols)
        } else {
            row_stride as u32
        };
        return Ok(Matrix {
            rows,
            cols,
            row_major: true,
            ld,
        });
    }
    if (rows == 1 || row_stride == 1) && (cols == 1 || fits(col_stride, rows)) {
        let ld = if cols == 1 {
            lone_ld(col_stride, rows)
        } else {
            col_stride as u32
        };
        return Ok(Matrix {
            rows,
            cols,
            row_major: false,
            ld,
        });
    }
    Err(value(format!(
        "{} has strides {:?} for shape {:?}: one of its last two dimensions must be contiguous \
         (stride 1) and the other step over it; make it so with .contiguous()",
        tensor.name, tensor.strides, tensor.shape
    )))
}

/// A tensor's stride, in elements, along each dimension of `batch_shape` (0 where it is
/// broadcast across that dimension).
fn batch_dim_strides(tensor: &Tensor, batch_shape: &[u64]) -> Vec<u64> {
    let offset = batch_shape.len() - (tensor.shape.len() - 2);
    (0..batch_shape.len())
        .map(|dim| match dim.checked_sub(offset) {
            Some(own) if tensor.shape[own] as u64 == batch_shape[dim] && batch_shape[dim] > 1 => {
                tensor.strides[own] as u64
            }
            _ => 0,
        })
        .collect()
}

/// The one stride that walks every product of `dims` in order, where the strides nest (a
/// dimension's stride is the next one's times its size); 0 for a single product.
fn walk(dims: &[u64], strides: &[u64]) -> Option<u64> {
    let walked: Vec<(u64, u64)> = dims
        .iter()
        .zip(strides)
        .filter(|(&size, _)| size > 1)
        .map(|(&size, &stride)| (size, stride))
        .collect();
    let nested = walked
        .windows(2)
        .all(|pair| pair[0].1 == pair[1].1 * pair[1].0);
    nested.then(|| walked.last().map_or(0, |&(_, stride)| stride))
}

/// Element offsets of A's, B's and C's first matrix in each launch, over the batch
/// dimensions `dims` that do not run in one launch (one launch at offset 0 if none).
fn outer_offsets(dims: &[u64], strides: [&[u64]; 3]) -> Vec<Offsets> {
    let mut launches = vec![Offsets::default()];
    for (dim, &size) in dims.iter().enumerate() {
        launches = launches
            .iter()
            .flat_map(|base| {
                (0..size).map(move |index| Offsets {
                    a: base.a + index * strides[0][dim],
                    b: base.b + index * strides[1][dim],
                    c: base.c + index * strides[2][dim],
                })
            })
            .collect();
    }
    launches
}

/// The elements a tensor's view reaches from its first.
fn span(tensor: &Tensor) -> Span {
    let reach: i64 = tensor
        .shape
        .iter()
        .zip(&tensor.strides)
        .map(|(&size, &stride)| (size - 1).max(0) * stride)
        .sum();
    Span {
        address: tensor.address,
        len: reach as usize + 1,
    }
}

/// The largest power of two, up to the allocator's alignment, that divides `bytes`.
fn alignment(bytes: u64) -> u32 {
    1u32 << bytes
        .trailing_zeros()
        .min(pick::ALLOCATION_ALIGN.trailing_zeros())
}

fn plan_c_in(c: &Tensor, out: &Tensor) -> Result<Span, ArgError> {
    if c.dtype != out.dtype {
        return Err(ArgError::Type(format!(
            "c is {}; it must be {}, as out",
            c.dtype, out.dtype
        )));
    }
    check_on_out_device(c, out)?;
    // Strides of dimensions of size 1 walk nothing.
    let same_walk = c.shape == out.shape
        && c.shape
            .iter()
            .zip(c.strides.iter().zip(&out.strides))
            .all(|(&size, (c_stride, out_stride))| size == 1 || c_stride == out_stride);
    if !same_walk {
        return Err(value(format!(
            "c has shape {:?} and strides {:?}; it is read as out is written, so it must have \
             out's shape {:?} and strides {:?} (pass c.contiguous(), or use c as out)",
            c.shape, c.strides, out.shape, out.strides
        )));
    }
    check_address(c, dtype_of(&c.dtype).map_or(1, |d| d.size_bytes() as u64))?;
    Ok(span(c))
}

/// Refuses an `out` whose memory overlaps an operand's: the kernels read A and B while
/// they write C, tile by tile.
fn check_no_alias(
    out: &Tensor,
    out_bytes: u64,
    operands: [(&Tensor, u64); 2],
) -> Result<(), ArgError> {
    let range = |tensor: &Tensor, bytes: u64| {
        let start = tensor.address;
        (start, start + span(tensor).len as u64 * bytes)
    };
    let (out_start, out_end) = range(out, out_bytes);
    for (operand, bytes) in operands {
        let (start, end) = range(operand, bytes);
        if start < out_end && out_start < end {
            return Err(value(format!(
                "out overlaps {} in memory ({:#x}..{:#x} and {:#x}..{:#x}): the kernels read \
                 the operands while they write out; give out memory of its own",
                operand.name, out_start, out_end, start, end
            )));
        }
    }
    Ok(())
}

/// A bias of one value per column of `out` (length n), shared by the batch.
fn plan_bias(
    bias: &Tensor,
    out: &Tensor,
    n: u64,
    out_dtype: DType,
    transposed: bool,
) -> Result<BiasSpan, ArgError> {
    let dtype = dtype_of(&bias.dtype)
        .filter(|&d| d == out_dtype || d == DType::F32)
        .ok_or_else(|| {
            ArgError::Type(format!(
                "bias is {}: it may be {} (out's type) or float32",
                bias.dtype,
                torch_name(out_dtype)
            ))
        })?;
    if bias.shape != [n as i64] {
        return Err(value(format!(
            "bias has shape {:?}; it adds one value per column of out: shape [{n}]",
            bias.shape
        )));
    }
    if n > 1 && bias.strides[0] != 1 {
        return Err(value(format!(
            "bias has stride {}; it must be contiguous (.contiguous())",
            bias.strides[0]
        )));
    }
    check_on_out_device(bias, out)?;
    check_address(bias, dtype.size_bytes() as u64)?;
    Ok(BiasSpan {
        span: span(bias),
        // outᵀ's rows are out's columns.
        along: if transposed {
            BiasAlong::Row
        } else {
            BiasAlong::Col
        },
        dtype,
    })
}
