//! `torch._grouped_mm`'s mixture-of-experts product: each expert's rows of A times the
//! expert's own matrix of B, the experts' last rows in an int32 table on the device (`offs`),
//! through the runtime's `GroupedMatmul` (the Hopper grouped set).

use crate::launch::{device_context, Borrowed};
use crate::operands::{check_address, cuda_device, dtype_of, value, ArgError, Span, Tensor};
use gemm_dsl::{DType, Groups, Layout};
use gemm_runtime::cudarc::driver::sys::CUstream;
use gemm_runtime::{Error, GroupedDims, GroupedMatmul};
use half::{bf16, f16};
use std::sync::{Arc, Mutex};

/// A checked grouped call: A `[rows, K]`, B `[experts, K, N]` (each expert's K x N matrix
/// row-major, or the transpose of nn.Linear's `[experts, N, K]`), D `[rows, N]`.
#[derive(Clone, Debug, PartialEq)]
pub struct GroupedCall {
    pub device: u32,
    pub dtype: DType,
    /// `rc` where B is the transpose of a packed `[experts, N, K]`, `rr` where it is packed
    /// itself.
    pub layout: Layout,
    pub dims: GroupedDims,
    pub a: Span,
    pub b: Span,
    pub out: Span,
    pub offsets: Span,
}

/// Plans `out[rows of expert e] = a[rows of expert e] @ b[e]`, the rows of expert `e` ending
/// at `offs[e]` (torch._grouped_mm's 2-D x 3-D form).
pub fn plan_grouped(
    a: &Tensor,
    b: &Tensor,
    offs: &Tensor,
    out: &Tensor,
) -> Result<GroupedCall, ArgError> {
    let dtype = dtype_of(&a.dtype)
        .filter(|dtype| matches!(dtype, DType::Bf16 | DType::F16))
        .ok_or_else(|| {
            ArgError::Type(format!(
                "a is {}: gemm_dsl.grouped_mm multiplies bfloat16 or float16 experts",
                a.dtype
            ))
        })?;
    for tensor in [b, out] {
        if tensor.dtype != a.dtype {
            return Err(ArgError::Type(format!(
                "a is {} but {} is {}: the experts' operands and output have one type",
                a.dtype, tensor.name, tensor.dtype
            )));
        }
    }
    if offs.dtype != "int32" {
        return Err(ArgError::Type(format!(
            "offs is {}: the experts' row ends are int32",
            offs.dtype
        )));
    }
    for (tensor, rank, form) in [
        (a, 2, "[rows, K]"),
        (b, 3, "[experts, K, N]"),
        (offs, 1, "[experts]"),
        (out, 2, "[rows, N]"),
    ] {
        if tensor.shape.len() != rank || tensor.strides.len() != rank {
            return Err(value(format!(
                "{} has shape {:?}; gemm_dsl.grouped_mm takes it as {form}",
                tensor.name, tensor.shape
            )));
        }
        if tensor
            .shape
            .iter()
            .any(|&size| size < 0 || size > i64::from(u32::MAX))
            || tensor.strides.iter().any(|&stride| stride < 0)
        {
            return Err(value(format!(
                "{} has shape {:?} and strides {:?}: sizes from 0 to {} and strides of 0 or more",
                tensor.name,
                tensor.shape,
                tensor.strides,
                u32::MAX
            )));
        }
    }
    let (rows, k) = (a.shape[0], a.shape[1]);
    let (experts, kb, n) = (b.shape[0], b.shape[1], b.shape[2]);
    if k != kb {
        return Err(value(format!(
            "a {:?} and b {:?} cannot be multiplied: a's columns ({k}) differ from each expert's rows ({kb})",
            a.shape, b.shape
        )));
    }
    if offs.shape[0] != experts {
        return Err(value(format!(
            "offs has {} entries for {experts} experts: one row end per expert",
            offs.shape[0]
        )));
    }
    if out.shape != [rows, n] {
        return Err(value(format!(
            "out has shape {:?}; a {:?} by experts {:?} is [{rows}, {n}]",
            out.shape, a.shape, b.shape
        )));
    }
    if rows == 0 || n == 0 || k == 0 || experts == 0 {
        return Err(value(format!(
            "the grouped product is empty (rows {rows}, experts {experts}, N {n}, K {k}); no kernel runs on it"
        )));
    }
    let device = cuda_device(&[a, b, offs, out])?;
    let bytes = dtype.size_bytes() as u64;
    for (tensor, element_bytes) in [(a, bytes), (b, bytes), (offs, 4), (out, bytes)] {
        check_address(tensor, element_bytes)?;
    }
    let packed_rows = |tensor: &Tensor, line: i64| {
        (tensor.shape[0] == 1 || tensor.strides[0] == line) && (line == 1 || tensor.strides[1] == 1)
    };
    for (tensor, line) in [(a, k), (out, n)] {
        if !packed_rows(tensor, line) {
            return Err(value(format!(
                "{} has strides {:?} for shape {:?}: the grouped kernels take it packed \
                 (.contiguous())",
                tensor.name, tensor.strides, tensor.shape
            )));
        }
    }
    if experts > 1 && offs.strides[0] != 1 {
        return Err(value(format!(
            "offs has stride {}; it must be contiguous",
            offs.strides[0]
        )));
    }
    let expert_stride = |stride: i64| experts == 1 || b.strides[0] == stride;
    let layout = if expert_stride(k * n) && b.strides[1] == 1 && (n == 1 || b.strides[2] == k) {
        Layout::RowCol
    } else if expert_stride(k * n) && b.strides[2] == 1 && (k == 1 || b.strides[1] == n) {
        Layout::RowRow
    } else {
        return Err(value(format!(
            "b has strides {:?} for shape {:?}: the grouped kernels take a packed [experts, K, N] \
             or the transpose of a packed [experts, N, K] (nn.Linear's weights, w.transpose(-2, -1))",
            b.strides, b.shape
        )));
    };
    // The grouped kernels copy by TMA: every line and start on 16 bytes.
    let line_bytes = [
        ("a's rows", k as u64 * bytes),
        ("out's rows", n as u64 * bytes),
    ];
    let b_line = if layout == Layout::RowCol { k } else { n } as u64 * bytes;
    for (what, line) in line_bytes.into_iter().chain([("b's lines", b_line)]) {
        if line % 16 != 0 {
            return Err(value(format!(
                "{what} are {line} bytes, not a multiple of 16: the grouped kernels copy \
                 whole 16-byte lines (pad K and N to multiples of 8)"
            )));
        }
    }
    for tensor in [a, b, out] {
        if tensor.address % 16 != 0 {
            return Err(value(format!(
                "{} starts at {:#x}, not on 16 bytes: the grouped kernels copy by TMA",
                tensor.name, tensor.address
            )));
        }
    }
    let span = |tensor: &Tensor, len: i64| Span {
        address: tensor.address,
        len: len as usize,
    };
    Ok(GroupedCall {
        device,
        dtype,
        layout,
        dims: GroupedDims {
            groups: experts as u32,
            rows: rows as u32,
            n: n as u32,
            k: k as u32,
        },
        a: span(a, rows * k),
        b: span(b, experts * k * n),
        out: span(out, rows * n),
        offsets: span(offs, experts),
    })
}

/// A `GroupedMatmul` for one element type.
enum TypedGrouped {
    Bf16(GroupedMatmul<bf16, bf16>),
    F16(GroupedMatmul<f16, f16>),
}

struct GroupedEntry {
    device: u32,
    dtype: DType,
    layout: Layout,
    grouped: Arc<TypedGrouped>,
}

/// Every `GroupedMatmul` made so far.
static GROUPED: Mutex<Vec<GroupedEntry>> = Mutex::new(Vec::new());

fn grouped(
    call: &GroupedCall,
) -> Result<
    (
        Arc<gemm_runtime::cudarc::driver::CudaContext>,
        Arc<TypedGrouped>,
    ),
    Error,
> {
    let ctx = device_context(call.device)?;
    let mut entries = GROUPED
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(entry) = entries
        .iter()
        .find(|e| e.device == call.device && e.dtype == call.dtype && e.layout == call.layout)
    {
        return Ok((ctx, entry.grouped.clone()));
    }
    let typed = Arc::new(match call.dtype {
        DType::Bf16 => {
            TypedGrouped::Bf16(GroupedMatmul::new(&ctx, Groups::Contiguous, call.layout)?)
        }
        _ => TypedGrouped::F16(GroupedMatmul::new(&ctx, Groups::Contiguous, call.layout)?),
    });
    entries.push(GroupedEntry {
        device: call.device,
        dtype: call.dtype,
        layout: call.layout,
        grouped: typed.clone(),
    });
    Ok((ctx, typed))
}

/// Runs a planned grouped call on `stream` (a `CUstream` of the call's device).
pub fn run_grouped(call: &GroupedCall, stream: u64) -> Result<(), Error> {
    let (ctx, typed) = grouped(call)?;
    // SAFETY: as `launch::run`: the caller's current stream on this device, alive for the call.
    let stream = unsafe { ctx.wrap_borrowed_stream(stream as CUstream) };
    let offsets = Borrowed::<i32>::new(call.offsets, &stream);
    match &*typed {
        TypedGrouped::Bf16(grouped) => {
            let (a, b) = (
                Borrowed::new(call.a, &stream),
                Borrowed::new(call.b, &stream),
            );
            let mut out = Borrowed::new(call.out, &stream);
            grouped.run(&stream, &a, &b, &mut out, &offsets, call.dims)
        }
        TypedGrouped::F16(grouped) => {
            let (a, b) = (
                Borrowed::new(call.a, &stream),
                Borrowed::new(call.b, &stream),
            );
            let mut out = Borrowed::new(call.out, &stream);
            grouped.run(&stream, &a, &b, &mut out, &offsets, call.dims)
        }
    }
}

/// The kernel a planned grouped call runs (picked from the experts, rows, N and K).
pub fn pick_grouped(call: &GroupedCall) -> Result<String, Error> {
    let (_, typed) = grouped(call)?;
    match &*typed {
        TypedGrouped::Bf16(grouped) => grouped.pick(&call.dims).map(str::to_string),
        TypedGrouped::F16(grouped) => grouped.pick(&call.dims).map(str::to_string),
    }
}
