//! `gemm_dsl._native`: the entry point of gemm-dsl's runtime for Python.
//!
//! The Python package (`python/gemm_dsl`) reads each tensor's address, sizes, strides,
//! element type and device, and passes them here as a tuple; this module checks the call
//! (`operands`), picks the kernel and launches it on the caller's stream (`launch`).
//! Nothing is copied and nothing is allocated: the output is the caller's tensor.

mod grouped;
mod launch;
mod operands;

use gemm_dsl::Activation;
use operands::{ArgError, Call, Device, EpilogueArgs, Tensor};
use pyo3::exceptions::{PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// A tensor as the Python side describes it: (address, shape, strides in elements, torch's
/// dtype name, device type, device index).
type TensorArg = (u64, Vec<i64>, Vec<i64>, String, String, i64);

/// fp8 operands' scales, `scale_a` and `scale_b` (both or neither), and whether they are
/// block scales (`block_scales`) rather than one value each.
struct Scales {
    a: Option<TensorArg>,
    b: Option<TensorArg>,
    block: bool,
}

impl Scales {
    const NONE: Scales = Scales {
        a: None,
        b: None,
        block: false,
    };
}

fn tensor(name: &'static str, arg: TensorArg) -> Tensor {
    let (address, shape, strides, dtype, device_type, index) = arg;
    let device = match (device_type.as_str(), u32::try_from(index)) {
        ("cuda", Ok(index)) => Device::Cuda(index),
        _ => Device::Other(device_type),
    };
    Tensor {
        name,
        address,
        shape,
        strides,
        dtype,
        device,
    }
}

fn arg_error(error: ArgError) -> PyErr {
    match error {
        ArgError::Type(message) => PyTypeError::new_err(message),
        ArgError::Value(message) => PyValueError::new_err(message),
    }
}

fn runtime_error(error: gemm_runtime::Error) -> PyErr {
    PyRuntimeError::new_err(error.to_string())
}

fn activation(name: Option<&str>) -> PyResult<Activation> {
    Ok(match name {
        None | Some("none") => Activation::None,
        Some("relu") => Activation::Relu,
        // torch's GELU is the exact one unless asked for the tanh approximation.
        Some("gelu") => Activation::GeluErf,
        Some("gelu_tanh") => Activation::Gelu,
        Some("silu") => Activation::Silu,
        Some(other) => {
            return Err(PyValueError::new_err(format!(
                "activation '{other}': gemm_dsl fuses None, 'relu', 'gelu' (exact, torch's \
                 default), 'gelu_tanh' or 'silu'"
            )))
        }
    })
}

/// The arguments every entry takes, planned.
#[allow(clippy::too_many_arguments)]
fn plan_call(
    a: TensorArg,
    b: TensorArg,
    out: TensorArg,
    alpha: f32,
    beta: f32,
    bias: Option<TensorArg>,
    c: Option<TensorArg>,
    activation: Option<&str>,
    scales: Scales,
) -> PyResult<Call> {
    let block_scales = scales.block;
    let scales = match (scales.a, scales.b) {
        (Some(scale_a), Some(scale_b)) => {
            Some((tensor("scale_a", scale_a), tensor("scale_b", scale_b)))
        }
        (None, None) if block_scales => {
            return Err(PyValueError::new_err(
                "block_scales=True describes scale_a and scale_b, but none were given",
            ))
        }
        (None, None) => None,
        _ => {
            return Err(PyValueError::new_err(
                "scale_a and scale_b come together: fp8 operands each have a scale",
            ))
        }
    };
    let epilogue = EpilogueArgs {
        scales,
        block_scales,
        activation: self::activation(activation)?,
        alpha,
        beta,
        bias: bias.map(|arg| tensor("bias", arg)),
        c: c.map(|arg| tensor("c", arg)),
    };
    operands::plan_matmul(
        &tensor("a", a),
        &tensor("b", b),
        &tensor("out", out),
        &epilogue,
    )
    .map_err(arg_error)
}

/// `out = activation(alpha·(a @ b) + beta·c + bias)` on `stream` (a `CUstream` handle of the
/// tensors' device; torch's `torch.cuda.current_stream().cuda_stream`). Returns once the
/// kernel is queued.
#[pyfunction]
#[pyo3(signature = (a, b, out, *, stream, alpha=1.0, beta=0.0, bias=None, c=None, activation=None))]
#[allow(clippy::too_many_arguments)]
fn matmul(
    py: Python<'_>,
    a: TensorArg,
    b: TensorArg,
    out: TensorArg,
    stream: u64,
    alpha: f32,
    beta: f32,
    bias: Option<TensorArg>,
    c: Option<TensorArg>,
    activation: Option<&str>,
) -> PyResult<()> {
    let call = plan_call(a, b, out, alpha, beta, bias, c, activation, Scales::NONE)?;
    // The first call of a problem may compile its kernel: other Python threads go on.
    py.detach(|| launch::keeping_current_context(|| launch::run(&call, stream)))
        .map_err(runtime_error)
}

/// `out = scale_a·scale_b·(a @ b) + bias` for float8 a and b, as torch._scaled_mm: a
/// row-major, b column-major; per-tensor scales (one float32 each), or with `block_scales`
/// a's per 1x128 block and b's per 128x128 block (float32, read on the device).
#[pyfunction]
#[pyo3(signature = (a, b, scale_a, scale_b, out, *, stream, bias=None, block_scales=false))]
#[allow(clippy::too_many_arguments)]
fn scaled_mm(
    py: Python<'_>,
    a: TensorArg,
    b: TensorArg,
    scale_a: TensorArg,
    scale_b: TensorArg,
    out: TensorArg,
    stream: u64,
    bias: Option<TensorArg>,
    block_scales: bool,
) -> PyResult<()> {
    let scales = Scales {
        a: Some(scale_a),
        b: Some(scale_b),
        block: block_scales,
    };
    let call = plan_call(a, b, out, 1.0, 0.0, bias, None, None, scales)?;
    py.detach(|| launch::keeping_current_context(|| launch::run(&call, stream)))
        .map_err(runtime_error)
}

/// The problem a call computes, as the kernels see it (no GPU needed): its sizes, layout,
/// leading dimensions, batch and operands' alignment.
#[pyfunction]
#[pyo3(signature = (a, b, out, *, alpha=1.0, beta=0.0, bias=None, c=None, activation=None, scale_a=None, scale_b=None, block_scales=false))]
#[allow(clippy::too_many_arguments)]
fn plan<'py>(
    py: Python<'py>,
    a: TensorArg,
    b: TensorArg,
    out: TensorArg,
    alpha: f32,
    beta: f32,
    bias: Option<TensorArg>,
    c: Option<TensorArg>,
    activation: Option<&str>,
    scale_a: Option<TensorArg>,
    scale_b: Option<TensorArg>,
    block_scales: bool,
) -> PyResult<Bound<'py, PyDict>> {
    let call = plan_call(
        a,
        b,
        out,
        alpha,
        beta,
        bias,
        c,
        activation,
        Scales {
            a: scale_a,
            b: scale_b,
            block: block_scales,
        },
    )?;
    let problem = &call.problem;
    let dict = PyDict::new(py);
    dict.set_item("problem", problem.to_string())?;
    dict.set_item("m", problem.m)?;
    dict.set_item("n", problem.n)?;
    dict.set_item("k", problem.k)?;
    dict.set_item("batch", problem.batch)?;
    dict.set_item("layout", problem.layout.name())?;
    dict.set_item("lda", problem.lda)?;
    dict.set_item("ldb", problem.ldb)?;
    dict.set_item("ldc", problem.ldc)?;
    dict.set_item("address_align", problem.address_align)?;
    dict.set_item(
        "batch_strides",
        (
            call.batch.stride_a,
            call.batch.stride_b,
            call.batch.stride_c,
        ),
    )?;
    dict.set_item("launches", call.launches.len())?;
    dict.set_item("transposed", call.transposed)?;
    dict.set_item("types", call.types.to_string())?;
    Ok(dict)
}

/// The kernel the entry point runs for a call on the tensors' device, and whether the tuning
/// cache or the cost model chose it: `(kernel name, source)`.
#[pyfunction]
#[pyo3(signature = (a, b, out, *, alpha=1.0, beta=0.0, bias=None, c=None, activation=None, scale_a=None, scale_b=None, block_scales=false))]
#[allow(clippy::too_many_arguments)]
fn pick(
    py: Python<'_>,
    a: TensorArg,
    b: TensorArg,
    out: TensorArg,
    alpha: f32,
    beta: f32,
    bias: Option<TensorArg>,
    c: Option<TensorArg>,
    activation: Option<&str>,
    scale_a: Option<TensorArg>,
    scale_b: Option<TensorArg>,
    block_scales: bool,
) -> PyResult<(String, &'static str)> {
    let call = plan_call(
        a,
        b,
        out,
        alpha,
        beta,
        bias,
        c,
        activation,
        Scales {
            a: scale_a,
            b: scale_b,
            block: block_scales,
        },
    )?;
    py.detach(|| launch::keeping_current_context(|| launch::pick_on_device(&call)))
        .map_err(runtime_error)
}

/// Why: the pick, then every candidate the cost model ranks (fastest first) and the refused
/// ones with the reason. With `arch` (`"sm_90a"`, `"sm_80"`, ...) no GPU is needed: the
/// architecture's built-in set on its modelled board.
#[pyfunction]
#[pyo3(signature = (a, b, out, *, alpha=1.0, beta=0.0, bias=None, c=None, activation=None, scale_a=None, scale_b=None, block_scales=false, arch=None))]
#[allow(clippy::too_many_arguments)]
fn explain(
    py: Python<'_>,
    a: TensorArg,
    b: TensorArg,
    out: TensorArg,
    alpha: f32,
    beta: f32,
    bias: Option<TensorArg>,
    c: Option<TensorArg>,
    activation: Option<&str>,
    scale_a: Option<TensorArg>,
    scale_b: Option<TensorArg>,
    block_scales: bool,
    arch: Option<&str>,
) -> PyResult<String> {
    let call = plan_call(
        a,
        b,
        out,
        alpha,
        beta,
        bias,
        c,
        activation,
        Scales {
            a: scale_a,
            b: scale_b,
            block: block_scales,
        },
    )?;
    let lines = match arch {
        Some(arch) => {
            let arch = parse_arch(arch)?;
            launch::explain_for_arch(&call, arch).map_err(PyValueError::new_err)?
        }
        None => py
            .detach(|| launch::keeping_current_context(|| launch::explain_on_device(&call)))
            .map_err(runtime_error)?,
    };
    Ok(lines.join("\n"))
}

/// An `arch` as the spec language reads it (`sm_90a`, `sm_80`, ...).
fn parse_arch(arch: &str) -> PyResult<gemm_dsl::Arch> {
    let text = format!("name: explain, arch: {arch}");
    gemm_dsl::parse_str(&text)
        .map(|parsed| parsed.spec.arch)
        .map_err(|_| {
            PyValueError::new_err(format!(
                "arch '{arch}': an architecture as a spec names it (sm_80, sm_86, sm_89, sm_90, sm_90a)"
            ))
        })
}

/// `out = a @ b[e]` for each expert `e`'s rows of `a` (those before `offs[e]`, after the
/// last expert's), as torch._grouped_mm's 2-D x 3-D form: a `[rows, K]`, b `[experts, K, N]`,
/// offs int32 `[experts]`, out `[rows, N]`, on `stream`.
#[pyfunction]
#[pyo3(signature = (a, b, offs, out, *, stream))]
fn grouped_mm(
    py: Python<'_>,
    a: TensorArg,
    b: TensorArg,
    offs: TensorArg,
    out: TensorArg,
    stream: u64,
) -> PyResult<()> {
    let call = plan_grouped_call(a, b, offs, out)?;
    py.detach(|| launch::keeping_current_context(|| grouped::run_grouped(&call, stream)))
        .map_err(runtime_error)
}

/// The kernel `grouped_mm` runs for these tensors on their device.
#[pyfunction]
fn grouped_pick(
    py: Python<'_>,
    a: TensorArg,
    b: TensorArg,
    offs: TensorArg,
    out: TensorArg,
) -> PyResult<String> {
    let call = plan_grouped_call(a, b, offs, out)?;
    py.detach(|| launch::keeping_current_context(|| grouped::pick_grouped(&call)))
        .map_err(runtime_error)
}

fn plan_grouped_call(
    a: TensorArg,
    b: TensorArg,
    offs: TensorArg,
    out: TensorArg,
) -> PyResult<grouped::GroupedCall> {
    grouped::plan_grouped(
        &tensor("a", a),
        &tensor("b", b),
        &tensor("offs", offs),
        &tensor("out", out),
    )
    .map_err(arg_error)
}

/// gemm-dsl's runtime for Python: kernels picked per problem, launched on torch's stream.
#[pymodule]
fn _native(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add("__version__", env!("CARGO_PKG_VERSION"))?;
    module.add_function(wrap_pyfunction!(matmul, module)?)?;
    module.add_function(wrap_pyfunction!(scaled_mm, module)?)?;
    module.add_function(wrap_pyfunction!(plan, module)?)?;
    module.add_function(wrap_pyfunction!(pick, module)?)?;
    module.add_function(wrap_pyfunction!(explain, module)?)?;
    module.add_function(wrap_pyfunction!(grouped_mm, module)?)?;
    module.add_function(wrap_pyfunction!(grouped_pick, module)?)?;
    Ok(())
}
