"""``torch.ops.gemm_dsl``: gemm_dsl's entries as torch operators.

Registered with ``torch.library.custom_op`` and a fake (meta) implementation, so
``torch.compile`` traces through them (``gemm_dsl.matmul`` calls them while compiling) and
CUDA graphs, manual or ``mode="reduce-overhead"``, capture their launches. Importing this
module imports torch; ``import gemm_dsl`` does so by itself where torch is already loaded.
"""

from typing import Optional

import torch

import gemm_dsl
from gemm_dsl import grouped_mm as _grouped_mm
from gemm_dsl import matmul as _matmul
from gemm_dsl import scaled_mm as _scaled_mm


def _result_shape(a_shape, b_shape):
    """torch.matmul's result shape, vectors included."""
    a_matrix = list(a_shape) if len(a_shape) > 1 else [1] + list(a_shape)
    b_matrix = list(b_shape) if len(b_shape) > 1 else list(b_shape) + [1]
    batch = torch.broadcast_shapes(tuple(a_matrix[:-2]), tuple(b_matrix[:-2]))
    shape = list(batch)
    if len(a_shape) > 1:
        shape.append(a_matrix[-2])
    if len(b_shape) > 1:
        shape.append(b_matrix[-1])
    return shape


@torch.library.custom_op("gemm_dsl::matmul", mutates_args=(), device_types="cuda")
def matmul_op(
    a: torch.Tensor,
    b: torch.Tensor,
    bias: Optional[torch.Tensor],
    c: Optional[torch.Tensor],
    activation: Optional[str],
    alpha: float,
    beta: float,
    out_dtype: Optional[torch.dtype],
) -> torch.Tensor:
    """``gemm_dsl.matmul(a, b, bias=..., activation=..., alpha=..., beta=..., c=...,
    out_dtype=...)`` as an operator."""
    return _matmul(
        a, b, bias=bias, activation=activation, alpha=alpha, beta=beta, c=c, out_dtype=out_dtype
    )


@matmul_op.register_fake
def _matmul_fake(a, b, bias, c, activation, alpha, beta, out_dtype):
    return a.new_empty(_result_shape(a.shape, b.shape), dtype=out_dtype or a.dtype)


@torch.library.custom_op("gemm_dsl::scaled_mm", mutates_args=(), device_types="cuda")
def scaled_mm_op(
    a: torch.Tensor,
    b: torch.Tensor,
    scale_a: torch.Tensor,
    scale_b: torch.Tensor,
    bias: Optional[torch.Tensor],
    out_dtype: Optional[torch.dtype],
    block_scales: bool = False,
) -> torch.Tensor:
    """``gemm_dsl.scaled_mm(a, b, scale_a, scale_b, bias=..., out_dtype=...,
    block_scales=...)`` as an operator."""
    return _scaled_mm(a, b, scale_a, scale_b, bias=bias, out_dtype=out_dtype, block_scales=block_scales)


@scaled_mm_op.register_fake
def _scaled_mm_fake(a, b, scale_a, scale_b, bias, out_dtype, block_scales=False):
    return a.new_empty((a.shape[0], b.shape[1]), dtype=out_dtype or torch.bfloat16)


@torch.library.custom_op("gemm_dsl::grouped_mm", mutates_args=(), device_types="cuda")
def grouped_mm_op(a: torch.Tensor, b: torch.Tensor, offs: torch.Tensor) -> torch.Tensor:
    """``gemm_dsl.grouped_mm(a, b, offs)`` as an operator."""
    return _grouped_mm(a, b, offs)


@grouped_mm_op.register_fake
def _grouped_mm_fake(a, b, offs):
    return a.new_empty((a.shape[0], b.shape[-1]))


def _current_stream(device_index):
    return torch.cuda.current_stream(device_index).cuda_stream


# gemm_dsl.matmul hands itself to the operator while torch.compile traces it, and reads
# tensors and streams through torch's own calls.
gemm_dsl._is_compiling = torch.compiler.is_compiling
gemm_dsl._torch_op = matmul_op
gemm_dsl._torch_scaled_op = scaled_mm_op
gemm_dsl._torch_grouped_op = grouped_mm_op
gemm_dsl._Tensor = torch.Tensor
# torch's private accessor skips building a Stream object (a few microseconds a call).
gemm_dsl._current_stream = getattr(torch._C, "_cuda_getCurrentRawStream", _current_stream)
