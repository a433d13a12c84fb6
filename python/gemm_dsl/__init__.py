"""gemm-dsl from Python: GEMM kernels written from a tile spec, picked per problem.

``gemm_dsl.matmul(a, b)`` computes ``a @ b`` for bfloat16, float16 and float32 CUDA tensors,
batched and broadcast as ``torch.matmul``, with an optional fused epilogue
(``activation(alpha * (a @ b) + beta * c + bias)``). The kernel is picked for the problem by
gemm-dsl's entry point, its PTX written and compiled the first time the problem is seen, and
queued on torch's current stream: nothing is copied, and the output is a torch tensor from
torch's allocator (or ``out``). ``gemm_dsl.pick`` and ``gemm_dsl.explain`` say which kernel
runs and why; ``gemm_dsl.plan`` shows the problem the kernels see.

Importing this package needs no torch and no GPU; arrays that are not torch tensors are read
through ``__cuda_array_interface__`` (or ``__array_interface__``, which only ever gets a
clear refusal: host memory). With torch, ``torch.ops.gemm_dsl.matmul`` is registered for
``torch.compile``, which ``gemm_dsl.matmul`` calls while compiling.
"""

import sys

from . import _native

__version__ = _native.__version__

__all__ = ["matmul", "scaled_mm", "grouped_mm", "plan", "pick", "explain", "grouped_pick", "__version__"]


def _is_compiling():
    """Whether torch.compile is tracing; ``torch_ops`` puts torch's own answer here (kept a
    plain function call, which the tracer follows, rather than a lookup of torch). Until
    then: torch imported after gemm_dsl registers the ops here, then answers."""
    if "torch" in sys.modules:
        from . import torch_ops  # noqa: F401

        return torch_ops.torch.compiler.is_compiling()
    return False


# ``torch.ops.gemm_dsl.matmul`` and ``grouped_mm``, once ``torch_ops`` registers them.
_torch_op = None
_torch_scaled_op = None
_torch_grouped_op = None

# torch.Tensor and torch's current raw stream of a device index, once torch is loaded.
_Tensor = None
_current_stream = None

# The element types torch names, read off a dtype's text ("torch.bfloat16") once each.
_TORCH_DTYPE_NAMES = {}

# numpy-style type strings (array interfaces) as torch names the types.
_TYPESTR_NAMES = {
    "f2": "float16",
    "f4": "float32",
    "f8": "float64",
    "i1": "int8",
    "i2": "int16",
    "i4": "int32",
    "i8": "int64",
    "u1": "uint8",
    "b1": "bool",
}


def _torch_module(x):
    """The torch module if ``x`` is a torch tensor, else None (torch is never imported here)."""
    module = type(x).__module__
    if module.startswith("torch"):
        import torch

        if isinstance(x, torch.Tensor):
            if _Tensor is None:
                from . import torch_ops  # noqa: F401  (torch was loaded after gemm_dsl)
            return torch
    return None


def _dtype_name(dtype):
    name = _TORCH_DTYPE_NAMES.get(dtype)
    if name is None:
        name = str(dtype).rpartition(".")[2]
        _TORCH_DTYPE_NAMES[dtype] = name
    return name


def _describe_tensor(x):
    """``_describe`` for a torch tensor."""
    dtype = _TORCH_DTYPE_NAMES.get(x.dtype) or _dtype_name(x.dtype)
    return (x.data_ptr(), x.shape, x.stride(), dtype, "cuda" if x.is_cuda else x.device.type, x.get_device())


def _describe(x):
    """A tensor as the native module reads it: (address, shape, strides in elements, dtype
    name, device type, device index)."""
    if _torch_module(x) is not None:
        return _describe_tensor(x)
    for attribute, device_type in (("__cuda_array_interface__", "cuda"), ("__array_interface__", "cpu")):
        interface = getattr(x, attribute, None)
        if interface is not None:
            return _describe_interface(x, interface, device_type)
    raise TypeError(
        f"gemm_dsl takes torch tensors or arrays with __cuda_array_interface__; got {type(x).__name__}"
    )


def _describe_interface(x, interface, device_type):
    typestr = interface["typestr"]
    dtype = _TYPESTR_NAMES.get(typestr[1:], typestr)
    itemsize = int(typestr[2:]) if typestr[2:].isdigit() else 1
    shape = tuple(interface["shape"])
    strides = interface.get("strides")
    if strides is None:
        strides = _packed_strides(shape)
    else:
        if any(stride % itemsize for stride in strides):
            raise ValueError(f"strides {strides} (bytes) are not whole {itemsize}-byte elements")
        strides = tuple(stride // itemsize for stride in strides)
    index = 0
    if device_type == "cuda":
        device = getattr(x, "device", None)
        index = getattr(device, "id", None)
        if index is None and hasattr(x, "__dlpack_device__"):
            index = x.__dlpack_device__()[1]
        index = index or 0
    return (interface["data"][0], shape, strides, dtype, device_type, index)


def _packed_strides(shape):
    """Row-major strides, in elements, of a packed tensor of `shape`."""
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= max(size, 1)
    return tuple(reversed(strides))


def _stream(torch, device):
    """torch's current stream on ``device``, as a CUstream handle. Arrays outside torch run
    on the legacy default stream (0), which orders them with every blocking stream; so do
    tensors off the GPU, which the native module refuses before any stream is used."""
    if torch is None or device.type != "cuda":
        return 0
    return _current_stream(device.index if device.index is not None else torch.cuda.current_device())


def _output_shape(a_shape, b_shape):
    """torch.matmul's output shape for two operands of two or more dimensions, or a
    ValueError naming why they do not multiply."""
    if a_shape[-1] != b_shape[-2]:
        raise ValueError(
            f"a {list(a_shape)} and b {list(b_shape)} cannot be multiplied: a's columns "
            f"({a_shape[-1]}) differ from b's rows ({b_shape[-2]})"
        )
    lead_a, lead_b = list(a_shape[:-2]), list(b_shape[:-2])
    rank = max(len(lead_a), len(lead_b))
    lead_a = [1] * (rank - len(lead_a)) + lead_a
    lead_b = [1] * (rank - len(lead_b)) + lead_b
    batch = []
    for x, y in zip(lead_a, lead_b):
        if x != y and 1 not in (x, y):
            raise ValueError(
                f"batch dimensions {list(a_shape[:-2])} (a) and {list(b_shape[:-2])} (b) do not broadcast"
            )
        batch.append(y if x == 1 else x)
    return tuple(batch) + (a_shape[-2], b_shape[-1])


def _check_args(a, b, activation):
    if activation not in (None, "none", "relu", "gelu", "gelu_tanh", "silu"):
        raise ValueError(
            f"activation {activation!r}: gemm_dsl fuses None, 'relu', 'gelu' (exact, torch's "
            "default), 'gelu_tanh' or 'silu'"
        )
    for name, x in (("a", a), ("b", b)):
        if getattr(x, "shape", None) is None:
            raise TypeError(
                f"gemm_dsl takes torch tensors or arrays with __cuda_array_interface__; {name} is a {type(x).__name__}"
            )
        if len(x.shape) == 0:
            raise ValueError(f"{name} is a scalar (shape []); gemm_dsl multiplies vectors and matrices")


def matmul(a, b, *, bias=None, activation=None, alpha=1.0, beta=0.0, c=None, out=None, out_dtype=None):
    """``activation(alpha * (a @ b) + beta * c + bias)``, as ``torch.matmul`` batches and
    broadcasts ``a @ b``.

    a, b: bfloat16, float16 or float32 CUDA tensors of one type, one or more dimensions (a
    vector is a single row of a, a single column of b, dropped from the result as torch
    drops it). Each matrix's last or second-last dimension must be contiguous; any other
    strides a BLAS takes are taken (views, transposes, slices at any element).
    bias: one value per output column (shape ``[n]``), of the output type or float32.
    activation: None, 'relu', 'gelu' (exact), 'gelu_tanh' or 'silu'.
    c, beta: ``beta * c`` is added where ``beta != 0``; c has out's shape and strides.
    out: the result's tensor (any strides with a contiguous row or column), else one is
    allocated by torch. out_dtype: the result's type when out is not given: the inputs' (the
    default), or float32.

    Returns the result. Raises TypeError for element types no kernel takes, ValueError for
    shapes, strides and devices it cannot take, RuntimeError where the driver refuses;
    nothing is launched then.
    """
    if out is None and _is_compiling():
        # torch.compile traces the operator (registered with a fake implementation).
        return _torch_op(a, b, bias, c, activation, float(alpha), float(beta), out_dtype)
    tensor = _Tensor
    if type(a) is tensor and type(b) is tensor and out is None and a.ndim > 1 and b.ndim > 1:
        # The common call, with nothing to reshape: host time is what a small problem waits on.
        a_shape, b_shape = a.shape, b.shape
        if b.ndim == 2 and a_shape[-1] == b_shape[0]:
            shape = (*a_shape[:-1], b_shape[1])
        else:
            shape = _output_shape(a_shape, b_shape)
        if 0 not in shape and a_shape[-1] != 0:
            out = a.new_empty(shape) if out_dtype is None else a.new_empty(shape, dtype=out_dtype)
            device = a.get_device()
            _native.matmul(
                _describe_tensor(a),
                _describe_tensor(b),
                _describe_tensor(out),
                stream=_current_stream(device) if device >= 0 else 0,
                alpha=alpha,
                beta=beta,
                bias=None if bias is None else _describe(bias),
                c=None if c is None else _describe(c),
                activation=activation,
            )
            return out
    _check_args(a, b, activation)
    torch = _torch_module(a)
    squeeze = []
    if len(a.shape) == 1:
        if torch is None:
            raise ValueError("a is a vector: give it as a [1, k] matrix (only torch tensors are reshaped here)")
        a = a.unsqueeze(0)
        squeeze.append(-2)
    if len(b.shape) == 1:
        if torch is None:
            raise ValueError("b is a vector: give it as a [k, 1] matrix (only torch tensors are reshaped here)")
        b = b.unsqueeze(-1)
        squeeze.append(-1)
    shape = _output_shape(tuple(a.shape), tuple(b.shape))
    given = out
    if out is None:
        if torch is None:
            raise ValueError("out= is needed for arrays that are not torch tensors: gemm_dsl allocates through torch")
        out = torch.empty(shape, dtype=out_dtype or a.dtype, device=a.device)
    else:
        for dim in reversed(squeeze):
            out = out.unsqueeze(dim)
    if c is not None and len(c.shape) == len(shape) - len(squeeze):
        # c has the result's shape: the dimensions a vector dropped come back, as out's.
        for dim in reversed(squeeze):
            c = c.unsqueeze(dim)
    if any(size == 0 for size in shape) or a.shape[-1] == 0:
        _empty_product(torch, out, shape, bias, activation, beta, c)
    else:
        _native.matmul(
            _describe(a),
            _describe(b),
            _describe(out),
            stream=_stream(torch, a.device),
            alpha=alpha,
            beta=beta,
            bias=None if bias is None else _describe(bias),
            c=None if c is None else _describe(c),
            activation=activation,
        )
    if given is not None:
        return given
    for dim in squeeze:
        out = out.squeeze(dim)
    return out


def _empty_product(torch, out, shape, bias, activation, beta, c):
    """An empty ``a @ b``: nothing to compute where the output is empty; a sum of nothing
    (k = 0) is zero, to which the epilogue still applies."""
    if torch is None:
        raise ValueError(f"the product is empty (output shape {list(shape)}); torch tensors only")
    if out.numel() == 0:
        return
    out.zero_()
    if c is not None and beta != 0:
        out.add_(c, alpha=beta)
    if bias is not None:
        out.add_(bias)
    functional = torch.nn.functional
    if activation == "relu":
        out.copy_(functional.relu(out))
    elif activation == "gelu":
        out.copy_(functional.gelu(out))
    elif activation == "gelu_tanh":
        out.copy_(functional.gelu(out, approximate="tanh"))
    elif activation == "silu":
        out.copy_(functional.silu(out))


def _ask_native(entry, a, b, bias, activation, alpha, beta, c, out, out_dtype, scale_a, scale_b, **extra):
    """Calls the native planning entry ``entry`` (plan, pick or explain) on the described
    operands of a call: an output is described by shape alone where none is given, so
    planning touches no memory."""
    _check_args(a, b, None)
    if len(a.shape) < 2 or len(b.shape) < 2:
        raise ValueError("plan, pick and explain take matrices (two or more dimensions)")
    if out is None:
        shape = _output_shape(tuple(a.shape), tuple(b.shape))
        described = _describe(a)
        if out_dtype is not None:
            dtype = _dtype_name(out_dtype)
        else:
            dtype = "bfloat16" if scale_a is not None else described[3]
        # Planned as a fresh allocation: 256-byte aligned, row-major.
        out_description = (256, shape, _packed_strides(shape), dtype, described[4], described[5])
    else:
        out_description = _describe(out)
    return entry(
        _describe(a),
        _describe(b),
        out_description,
        alpha=alpha,
        beta=beta,
        bias=None if bias is None else _describe(bias),
        c=None if c is None else _describe(c),
        activation=activation,
        **_scales(scale_a, scale_b),
        **extra,
    )


def plan(
    a,
    b,
    *,
    bias=None,
    activation=None,
    alpha=1.0,
    beta=0.0,
    c=None,
    out=None,
    out_dtype=None,
    scale_a=None,
    scale_b=None,
    block_scales=False,
):
    """The problem ``matmul`` with these arguments hands the kernels, as a dict: m, n, k,
    batch (products per launch) and launches, layout ('rr', 'rc', 'cr' or 'cc': A and B row-
    or column-major), the leading dimensions, the batch strides, the alignment its operands
    start at, whether out was computed transposed, and the types (with ``scale_a`` and
    ``scale_b``: the fp8 ``scaled_mm`` call, ``block_scales`` as it takes them). Needs no
    GPU."""
    return _ask_native(
        _native.plan, a, b, bias, activation, alpha, beta, c, out, out_dtype, scale_a, scale_b, block_scales=block_scales
    )


def pick(
    a,
    b,
    *,
    bias=None,
    activation=None,
    alpha=1.0,
    beta=0.0,
    c=None,
    out=None,
    out_dtype=None,
    scale_a=None,
    scale_b=None,
    block_scales=False,
):
    """``(kernel name, source)``: the kernel ``matmul`` (``scaled_mm`` with the scales) runs
    for these arguments on their device, and whether the tuning cache or the cost model chose
    it."""
    return _ask_native(
        _native.pick, a, b, bias, activation, alpha, beta, c, out, out_dtype, scale_a, scale_b, block_scales=block_scales
    )


def explain(
    a,
    b,
    *,
    bias=None,
    activation=None,
    alpha=1.0,
    beta=0.0,
    c=None,
    out=None,
    out_dtype=None,
    scale_a=None,
    scale_b=None,
    block_scales=False,
    arch=None,
):
    """Why ``matmul`` runs what it runs: the pick, then every candidate of the set as the
    cost model ranks them (fastest first) and those refused, with the reason. With ``arch``
    ('sm_90a', 'sm_80', ...) no GPU is needed: that architecture's set on its modelled
    board."""
    return _ask_native(
        _native.explain,
        a,
        b,
        bias,
        activation,
        alpha,
        beta,
        c,
        out,
        out_dtype,
        scale_a,
        scale_b,
        block_scales=block_scales,
        arch=arch,
    )


def _scales(scale_a, scale_b):
    """The scales' keyword arguments of the native entries (none for a 16-bit call)."""
    if scale_a is None and scale_b is None:
        return {}
    return {
        "scale_a": None if scale_a is None else _describe(scale_a),
        "scale_b": None if scale_b is None else _describe(scale_b),
    }


def scaled_mm(a, b, scale_a, scale_b, *, bias=None, out_dtype=None, out=None, block_scales=False):
    """``scale_a * scale_b * (a @ b) + bias`` for float8 tensors, as ``torch._scaled_mm(a, b,
    scale_a, scale_b, bias=bias, out_dtype=out_dtype)``.

    a: ``[M, K]`` float8_e4m3fn or float8_e5m2, row-major; b: ``[K, N]`` of a's type,
    column-major (``w.t()`` of a row-major ``[N, K]`` w): the fp8 tensor cores read both
    K-major. scale_a, scale_b: float32 on the device, read when the kernel runs (a graph
    replays with the scales of the moment): one value each, or with ``block_scales`` torch's
    block scales, a's per 1x128 block and b's per 128x128 block (``BlockWise1x128``,
    ``BlockWise128x128``): scale_a ``[M, ceil(K/128)]`` M-major with lines of M rounded up
    to 4 (strides ``(1, M4)``, a view of a ``[ceil(K/128), M4]`` buffer), scale_b
    ``[ceil(K/128), ceil(N/128)]``, the transpose of a packed ``[ceil(N/128),
    ceil(K/128)]``. bias: ``[n]``, the output type or float32. out_dtype: bfloat16 (the
    default), float16 or float32. The kernel is picked from the Hopper fp8 set
    (``sm90_fp8``, block scales ``sm90_fp8_block``). Returns the result (``out`` if given).
    """
    if out is None and _is_compiling():
        return _torch_scaled_op(a, b, scale_a, scale_b, bias, out_dtype, bool(block_scales))
    _check_args(a, b, None)
    if block_scales:
        _check_block_scale_storage(a, scale_a)
    torch = _torch_module(a)
    if out is None:
        if torch is None:
            raise ValueError("out= is needed for arrays that are not torch tensors: gemm_dsl allocates through torch")
        shape = _output_shape(tuple(a.shape), tuple(b.shape)) if len(a.shape) > 1 and len(b.shape) > 1 else None
        if shape is None:
            raise ValueError(f"a {list(a.shape)} and b {list(b.shape)}: gemm_dsl.scaled_mm multiplies matrices")
        out = a.new_empty(shape, dtype=out_dtype or torch.bfloat16)
    _native.scaled_mm(
        _describe(a),
        _describe(b),
        _describe(scale_a),
        _describe(scale_b),
        _describe(out),
        stream=_stream(torch, a.device),
        bias=None if bias is None else _describe(bias),
        block_scales=bool(block_scales),
    )
    return out


def _check_block_scale_storage(a, scale_a):
    """The block-scaled kernels copy a's scales in lines of M rounded up to 4 values, the last
    line whole: where M is not a multiple of 4, a torch tensor's storage must hold that line's
    tail past the view (an array interface says nothing of its buffer, so only its shape and
    strides are checked). Other layouts and types are the native check's to name."""
    storage = getattr(scale_a, "untyped_storage", None)
    if storage is None or len(a.shape) != 2 or len(scale_a.shape) != 2:
        return
    m, k = a.shape
    if m % 4 == 0 or str(scale_a.dtype) != "torch.float32":
        return  # lines of M: the view itself reaches every value read
    k_blocks, m_line = -(-k // 128), -(-m // 4) * 4
    if tuple(scale_a.shape) != (m, k_blocks) or (k_blocks > 1 and scale_a.stride(1) != m_line):
        return
    if m > 1 and scale_a.stride(0) != 1:
        return
    needed = k_blocks * m_line
    held = storage().nbytes() // scale_a.element_size() - scale_a.storage_offset()
    if held < needed:
        raise ValueError(
            f"scale_a's buffer holds {held} float32 values past its start, but the block-scaled kernels "
            f"read {needed} (ceil(K/128) = {k_blocks} lines of M = {m} rounded up to 4): make it a view of "
            f"a [{k_blocks}, {m_line}] buffer"
        )


def grouped_mm(a, b, offs, *, out=None):
    """A mixture-of-experts layer's product, as ``torch._grouped_mm(a, b, offs=offs)``: the
    rows of ``a`` that expert ``e`` owns (from the previous expert's end to ``offs[e]``) times
    ``b[e]``, every expert in one launch, with no host read of the counts.

    a: ``[rows, K]`` bfloat16 or float16, packed. b: ``[experts, K, N]`` of a's type, packed,
    or the transpose of a packed ``[experts, N, K]`` (nn.Linear's weights:
    ``w.transpose(-2, -1)``). offs: int32 ``[experts]``, the running sum of each expert's rows
    (rows past the last end are not written). Lines of K and N elements must be 16-byte
    multiples (the grouped kernels copy by TMA). Hopper GPUs only.

    Returns ``out`` (``[rows, N]``, allocated by torch if not given).
    """
    if out is None and _is_compiling():
        return _torch_grouped_op(a, b, offs)
    for name, x in (("a", a), ("b", b), ("offs", offs)):
        if getattr(x, "shape", None) is None:
            raise TypeError(f"gemm_dsl takes torch tensors or arrays with __cuda_array_interface__; {name} is a {type(x).__name__}")
    torch = _torch_module(a)
    if out is None:
        if torch is None:
            raise ValueError("out= is needed for arrays that are not torch tensors: gemm_dsl allocates through torch")
        if len(a.shape) != 2 or len(b.shape) != 3:
            raise ValueError(
                f"a has shape {list(a.shape)} and b {list(b.shape)}; gemm_dsl.grouped_mm takes a as [rows, K] and b as [experts, K, N]"
            )
        out = a.new_empty((a.shape[0], b.shape[-1]))
    if len(a.shape) == 2 and a.shape[0] == 0:
        return out
    _native.grouped_mm(
        _describe(a), _describe(b), _describe(offs), _describe(out), stream=_stream(torch, a.device) if torch else 0
    )
    return out


def grouped_pick(a, b, offs):
    """The kernel ``grouped_mm`` runs for these tensors on their device (picked from the
    experts, the rows, N and K)."""
    if len(a.shape) != 2 or len(b.shape) != 3:
        raise ValueError("grouped_pick takes a as [rows, K] and b as [experts, K, N]")
    described = _describe(a)
    out = (256, (a.shape[0], b.shape[-1]), (b.shape[-1], 1), described[3], described[4], described[5])
    return _native.grouped_pick(described, _describe(b), _describe(offs), out)


def _register_torch_ops():
    """Registers ``torch.ops.gemm_dsl.*`` where torch is already imported (importing torch
    here would make ``import gemm_dsl`` cost seconds for users without it)."""
    import sys

    if "torch" in sys.modules:
        from . import torch_ops  # noqa: F401


_register_torch_ops()
