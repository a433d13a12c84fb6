"""What gemm_dsl does without a GPU: import, version, planning, and every refusal.

No test here launches anything. Arrays described as CUDA memory (``CudaArray``) are never
touched: each either is refused before any launch, or only planned (``gemm_dsl.plan``,
``gemm_dsl.explain`` with ``arch``), which reads no memory. numpy arrays are host memory,
which ``matmul`` refuses. torch is not needed (and not imported).
"""

import re
import sys
import types
from importlib import metadata

import numpy as np
import pytest

import gemm_dsl

# A CUDA address as an allocation returns it; nothing ever reads it.
BASE = 1 << 32


class CudaArray:
    """An array in (pretend) device memory, described by __cuda_array_interface__ only."""

    # Each array its own (pretend) allocation, 16 MiB apart, unless placed.
    next_address = BASE

    def __init__(self, shape, typestr="<f2", strides=None, data=None, device=0):
        if data is None:
            data = CudaArray.next_address
            CudaArray.next_address += 1 << 24
        itemsize = int(typestr[2:])
        self.shape = tuple(shape)
        self.__cuda_array_interface__ = {
            "shape": self.shape,
            "typestr": typestr,
            "strides": None if strides is None else tuple(s * itemsize for s in strides),
            "data": (data, False),
            "version": 3,
        }
        self.device = types.SimpleNamespace(id=device)


def test_imports_without_torch_and_names_its_version():
    assert "torch" not in sys.modules
    assert gemm_dsl.__version__ == metadata.version("gemm-dsl")
    assert re.fullmatch(r"\d+\.\d+\.\d+", gemm_dsl.__version__)


def test_host_memory_is_refused_by_device():
    a = np.ones((4, 8), np.float32)
    b = np.ones((8, 16), np.float32)
    out = np.empty((4, 16), np.float32)
    with pytest.raises(ValueError, match=r"a is on the cpu device: gemm_dsl runs on CUDA tensors"):
        gemm_dsl.matmul(a, b, out=out)


def test_element_types_no_kernel_takes_are_type_errors():
    a = np.ones((4, 8), np.int32)
    b = np.ones((8, 16), np.int32)
    out = np.empty((4, 16), np.int32)
    with pytest.raises(TypeError, match=r"a is int32: gemm_dsl.matmul multiplies bfloat16, float16 or float32"):
        gemm_dsl.matmul(a, b, out=out)
    with pytest.raises(TypeError, match=r"a is float16 but b is float32"):
        gemm_dsl.matmul(CudaArray((4, 8)), CudaArray((8, 16), "<f4"), out=CudaArray((4, 16)))
    with pytest.raises(TypeError, match=r"out is float64 for float16 operands: it may be float16 or float32"):
        gemm_dsl.matmul(CudaArray((4, 8)), CudaArray((8, 16)), out=CudaArray((4, 16), "<f8"))
    with pytest.raises(TypeError, match=r"out is float16 for float32 operands: it may be float32"):
        gemm_dsl.matmul(CudaArray((4, 8), "<f4"), CudaArray((8, 16), "<f4"), out=CudaArray((4, 16)))


def test_shapes_that_do_not_multiply_name_the_numbers():
    a = np.ones((4, 3), np.float32)
    b = np.ones((4, 16), np.float32)
    out = np.empty((4, 16), np.float32)
    with pytest.raises(ValueError, match=r"a's columns \(3\) differ from b's rows \(4\)"):
        gemm_dsl.matmul(a, b, out=out)
    with pytest.raises(ValueError, match=r"batch dimensions \[2\] \(a\) and \[3\] \(b\) do not broadcast"):
        gemm_dsl.matmul(CudaArray((2, 4, 8)), CudaArray((3, 8, 16)), out=CudaArray((2, 4, 16)))
    with pytest.raises(ValueError, match=r"out has shape \[4, 15\]; a \[4, 8\] @ b \[8, 16\] is \[4, 16\]"):
        gemm_dsl.matmul(CudaArray((4, 8)), CudaArray((8, 16)), out=CudaArray((4, 15)))
    with pytest.raises(ValueError, match=r"a is a scalar"):
        gemm_dsl.matmul(CudaArray(()), CudaArray((8, 16)), out=CudaArray((4, 16)))


def test_strides_without_a_contiguous_dimension_are_refused():
    a = CudaArray((4, 8), strides=(16, 2))
    with pytest.raises(ValueError, match=r"a has strides \[16, 2\] for shape \[4, 8\]: one of its last two dimensions must be contiguous"):
        gemm_dsl.matmul(a, CudaArray((8, 16)), out=CudaArray((4, 16)))
    overlapping = CudaArray((4, 16), strides=(8, 1))
    with pytest.raises(ValueError, match=r"out has strides \[8, 1\] for shape \[4, 16\]"):
        gemm_dsl.matmul(CudaArray((4, 8)), CudaArray((8, 16)), out=overlapping)
    with pytest.raises(ValueError, match=r"out's matrices overlap or cannot be walked with one stride"):
        gemm_dsl.matmul(CudaArray((2, 4, 8)), CudaArray((2, 8, 16)), out=CudaArray((2, 4, 16), strides=(0, 16, 1)))


def test_devices_and_addresses_are_checked():
    with pytest.raises(ValueError, match=r"a is on cuda:0 but b is on cuda:1"):
        gemm_dsl.matmul(CudaArray((4, 8)), CudaArray((8, 16), device=1), out=CudaArray((4, 16)))
    with pytest.raises(ValueError, match=r"b's data pointer is null"):
        gemm_dsl.matmul(CudaArray((4, 8)), CudaArray((8, 16), data=0), out=CudaArray((4, 16)))
    with pytest.raises(ValueError, match=r"out starts at 0x100000001, not a multiple of its 2-byte elements"):
        gemm_dsl.matmul(CudaArray((4, 8)), CudaArray((8, 16)), out=CudaArray((4, 16), data=BASE + 1))


def test_an_output_over_an_operand_is_refused():
    a = CudaArray((4, 8))
    with pytest.raises(ValueError, match=r"out overlaps a in memory"):
        gemm_dsl.matmul(a, CudaArray((8, 8)), out=CudaArray((4, 8), data=a.__cuda_array_interface__["data"][0] + 16))


def test_epilogue_arguments_are_checked():
    a, b, out = CudaArray((4, 8)), CudaArray((8, 16)), CudaArray((4, 16))
    with pytest.raises(ValueError, match=r"activation 'tanh'"):
        gemm_dsl.matmul(a, b, out=out, activation="tanh")
    with pytest.raises(ValueError, match=r"beta = 0.5 adds beta·c, but no c was given"):
        gemm_dsl.matmul(a, b, out=out, beta=0.5)
    with pytest.raises(ValueError, match=r"bias has shape \[4\]; it adds one value per column of out: shape \[16\]"):
        gemm_dsl.matmul(a, b, out=out, bias=CudaArray((4,)))
    with pytest.raises(TypeError, match=r"bias is float64: it may be float16 \(out's type\) or float32"):
        gemm_dsl.matmul(a, b, out=out, bias=CudaArray((16,), "<f8"))
    with pytest.raises(ValueError, match=r"c has shape \[4, 16\] and strides \[1, 4\]"):
        gemm_dsl.matmul(a, b, out=out, beta=1.0, c=CudaArray((4, 16), strides=(1, 4)))


def test_arrays_outside_torch_need_an_output_and_matrices():
    with pytest.raises(ValueError, match=r"out= is needed"):
        gemm_dsl.matmul(CudaArray((4, 8)), CudaArray((8, 16)))
    with pytest.raises(ValueError, match=r"a is a vector"):
        gemm_dsl.matmul(CudaArray((8,)), CudaArray((8, 16)), out=CudaArray((16,)))
    with pytest.raises(TypeError, match=r"torch tensors or arrays with __cuda_array_interface__; a is a list"):
        gemm_dsl.matmul([[1.0]], [[1.0]], out=CudaArray((1, 1)))


def test_a_linear_layers_tokens_fold_into_one_product():
    # [batch, tokens, features] @ [features, out]: one problem of batch·tokens rows.
    plan = gemm_dsl.plan(CudaArray((4, 8, 64)), CudaArray((64, 32)))
    assert (plan["m"], plan["n"], plan["k"], plan["batch"]) == (32, 32, 64, 1)
    assert plan["layout"] == "rr" and plan["transposed"] is False
    # nn.Linear keeps its weight as [out, in]: x @ w.T is B column-major.
    plan = gemm_dsl.plan(CudaArray((4, 8, 64)), CudaArray((64, 32), strides=(1, 64)))
    assert (plan["m"], plan["layout"], plan["ldb"]) == (32, "rc", 64)


def test_batches_broadcast_with_one_stride_each():
    plan = gemm_dsl.plan(CudaArray((3, 16, 64)), CudaArray((3, 64, 32)))
    assert (plan["m"], plan["batch"], plan["batch_strides"]) == (16, 3, (1024, 2048, 512))
    # B shared by a batch whose A does not follow on row after row: a batch, B's stride 0.
    a = CudaArray((3, 16, 64), strides=(64, 192, 1))
    plan = gemm_dsl.plan(a, CudaArray((64, 32)))
    assert (plan["batch"], plan["batch_strides"], plan["lda"]) == (3, (64, 0, 512), 192)


def test_a_batch_broadcast_across_another_runs_a_launch_per_leading_index():
    # b's batch [3] broadcasts across a's [2, 3]: no one stride walks b over all six
    # products, so each of a's two leading indices is a launch of three.
    plan = gemm_dsl.plan(CudaArray((2, 3, 40, 96)), CudaArray((3, 96, 72)))
    assert (plan["batch"], plan["launches"], plan["batch_strides"]) == (3, 2, (3840, 6912, 2880))
    # A shared a (stride 0 across the first dimension) likewise.
    shared = CudaArray((2, 3, 4, 8), strides=(0, 32, 8, 1))
    plan = gemm_dsl.plan(shared, CudaArray((2, 3, 8, 16)))
    assert (plan["batch"], plan["launches"]) == (3, 2)
    # A fused epilogue takes only batches back to back: one launch per product otherwise.
    bias = CudaArray((72,))
    plan = gemm_dsl.plan(CudaArray((3, 40, 96), strides=(96, 288, 1)), CudaArray((3, 96, 72)), bias=bias)
    assert (plan["batch"], plan["launches"]) == (1, 3)


def test_a_fused_linear_layer_over_a_batch_still_folds():
    x, w_t, bias = CudaArray((8, 512, 64)), CudaArray((64, 32), strides=(1, 64)), CudaArray((32,))
    plan = gemm_dsl.plan(x, w_t, bias=bias, activation="silu")
    assert (plan["m"], plan["batch"], plan["launches"]) == (4096, 1, 1)


def test_empty_batches_are_refused_not_planned():
    with pytest.raises(ValueError, match=r"is an empty batch \(batch shape \[0\]\)"):
        gemm_dsl.plan(CudaArray((0, 4, 8)), CudaArray((0, 8, 16)))


def test_a_column_major_output_is_computed_transposed():
    out = CudaArray((16, 32), strides=(1, 16))
    plan = gemm_dsl.plan(CudaArray((16, 64)), CudaArray((64, 32)), out=out)
    # outᵀ = bᵀ·aᵀ: 32 x 16, A = bᵀ and B = aᵀ, both column-major.
    assert (plan["m"], plan["n"], plan["k"], plan["layout"], plan["transposed"]) == (32, 16, 64, "cc", True)


def test_views_that_start_inside_a_buffer_lower_the_alignment():
    plan = gemm_dsl.plan(CudaArray((16, 64), data=BASE + 6), CudaArray((64, 32)))
    assert plan["address_align"] == 2
    plan = gemm_dsl.plan(CudaArray((16, 63), strides=(63, 1)), CudaArray((63, 32)))
    assert (plan["lda"], plan["address_align"]) == (63, 256)


def test_explain_ranks_a_sets_kernels_without_a_gpu():
    text = gemm_dsl.explain(CudaArray((4096, 4096)), CudaArray((4096, 4096)), arch="sm_90a")
    first, *rest = text.splitlines()
    assert first.startswith("4096x4096x4096 rr") and "on H100" in first, first
    assert any(" us (1.00x)" in line for line in rest)
    with pytest.raises(ValueError, match=r"arch 'sm_99'"):
        gemm_dsl.explain(CudaArray((16, 16)), CudaArray((16, 16)), arch="sm_99")


def grouped_arrays(rows=64, experts=4, n=256, k=128, **b_args):
    a = CudaArray((rows, k))
    # nn.Linear's [experts, N, K] weights seen as [experts, K, N]
    b = CudaArray((experts, k, n), strides=(n * k, 1, k), **b_args)
    offs = CudaArray((experts,), "<i4")
    return a, b, offs, CudaArray((rows, n))


def test_grouped_mm_refuses_what_its_kernels_cannot_take():
    a, b, offs, out = grouped_arrays()
    with pytest.raises(TypeError, match=r"offs is int64: the experts' row ends are int32"):
        gemm_dsl.grouped_mm(a, b, CudaArray((4,), "<i8"), out=out)
    with pytest.raises(TypeError, match=r"a is float32: gemm_dsl.grouped_mm multiplies bfloat16 or float16 experts"):
        gemm_dsl.grouped_mm(CudaArray((64, 128), "<f4"), b, offs, out=out)
    with pytest.raises(ValueError, match=r"offs has 3 entries for 4 experts"):
        gemm_dsl.grouped_mm(a, b, CudaArray((3,), "<i4"), out=out)
    with pytest.raises(ValueError, match=r"a's columns \(120\) differ from each expert's rows \(128\)"):
        gemm_dsl.grouped_mm(CudaArray((64, 120)), b, offs, out=out)
    with pytest.raises(ValueError, match=r"b has strides \[32768, 128, 1\] for shape \[4, 128, 256\]"):
        gemm_dsl.grouped_mm(a, CudaArray((4, 128, 256), strides=(128 * 256, 128, 1)), offs, out=out)
    odd_a, odd_b, odd_offs, odd_out = grouped_arrays(k=100)
    with pytest.raises(ValueError, match=r"a's rows are 200 bytes, not a multiple of 16"):
        gemm_dsl.grouped_mm(odd_a, odd_b, odd_offs, out=odd_out)
    with pytest.raises(ValueError, match=r"a is on the cpu device"):
        host = np.ones((64, 128), np.float16)
        gemm_dsl.grouped_mm(host, b, offs, out=out)
    with pytest.raises(ValueError, match=r"out= is needed"):
        gemm_dsl.grouped_mm(a, b, offs)


def described(shape, dtype, strides=None, data=None):
    """A tensor as the native module reads it, for element types numpy cannot describe (at an
    address of its own, as CudaArray)."""
    if data is None:
        data = CudaArray.next_address
        CudaArray.next_address += 1 << 24
    if strides is None:
        strides, step = [], 1
        for size in reversed(shape):
            strides.append(step)
            step *= size
        strides = tuple(reversed(strides))
    return (data, tuple(shape), tuple(strides), dtype, "cuda", 0)


def test_fp8_plans_in_layout_rc_with_per_tensor_scales():
    a = described((300, 512), "float8_e4m3fn")
    b = described((512, 1024), "float8_e4m3fn", strides=(1, 512))  # w.t() of a [1024, 512] w
    out = described((300, 1024), "bfloat16")
    scale_a, scale_b = described((), "float32"), described((1,), "float32")
    plan = gemm_dsl._native.plan(a, b, out, scale_a=scale_a, scale_b=scale_b)
    assert (plan["layout"], plan["types"], plan["m"], plan["n"]) == ("rc", "e4m3->bf16", 300, 1024)
    text = gemm_dsl._native.explain(a, b, out, scale_a=scale_a, scale_b=scale_b, arch="sm_90a")
    assert "set `sm90_fp8`" in text.splitlines()[0]
    with pytest.raises(ValueError, match=r"fp8 operands are read K-major"):
        gemm_dsl._native.plan(a, described((512, 1024), "float8_e4m3fn"), out, scale_a=scale_a, scale_b=scale_b)
    with pytest.raises(TypeError, match=r"scale_a is float64: a per-tensor scale is one float32"):
        gemm_dsl._native.plan(a, b, out, scale_a=described((), "float64"), scale_b=scale_b)
    with pytest.raises(ValueError, match=r"scale_b has shape \[1, 1024\]: a per-tensor scale is one value \(block scales: block_scales=True"):
        gemm_dsl._native.plan(a, b, out, scale_a=scale_a, scale_b=described((1, 1024), "float32"))
    with pytest.raises(TypeError, match=r"a is bfloat16: gemm_dsl.scaled_mm multiplies float8_e4m3fn or float8_e5m2"):
        gemm_dsl._native.plan(described((300, 512), "bfloat16"), b, out, scale_a=scale_a, scale_b=scale_b)
    with pytest.raises(TypeError, match=r"out is float8_e4m3fn for float8_e4m3fn operands: it may be bfloat16, float16 or float32"):
        gemm_dsl._native.plan(a, b, described((300, 1024), "float8_e4m3fn"), scale_a=scale_a, scale_b=scale_b)
    with pytest.raises(ValueError, match=r"scale_a and scale_b come together"):
        gemm_dsl._native.plan(a, b, out, scale_a=scale_a)
    # Without scales, fp8 operands are not matmul's.
    with pytest.raises(TypeError, match=r"a is float8_e4m3fn: gemm_dsl.matmul multiplies"):
        gemm_dsl._native.plan(a, b, out)


def test_fp8_block_scales_plan_on_the_block_scaled_set_and_name_their_layout():
    m, n, k = 77, 1000, 720  # K blocks: 6 (the last part-filled), N blocks: 8, M lines: 80
    a = described((m, k), "float8_e4m3fn")
    b = described((k, n), "float8_e4m3fn", strides=(1, k))  # w.t() of a [N, K] w
    out = described((m, n), "bfloat16")
    scale_a = described((m, 6), "float32", strides=(1, 80))  # a [6, 80] buffer, transposed
    scale_b = described((6, 8), "float32", strides=(1, 6))  # a packed [8, 6], transposed
    plan = gemm_dsl._native.plan(a, b, out, scale_a=scale_a, scale_b=scale_b, block_scales=True)
    assert (plan["layout"], plan["types"], plan["m"], plan["n"], plan["k"]) == ("rc", "e4m3->bf16", m, n, k)
    text = gemm_dsl._native.explain(a, b, out, scale_a=scale_a, scale_b=scale_b, block_scales=True, arch="sm_90a")
    assert "set `sm90_fp8_block`" in text.splitlines()[0]

    def refused(error, pattern, **changed):
        arguments = {"scale_a": scale_a, "scale_b": scale_b, "out": out}
        arguments.update(changed)
        out_arg = arguments.pop("out")
        with pytest.raises(error, match=pattern):
            gemm_dsl._native.plan(a, b, out_arg, block_scales=True, **arguments)

    # torch's packed (M, K/128) tensor is K-major: the kernels read lines of M.
    refused(ValueError, r"scale_a has strides \[6, 1\], where a's 1x128 block scales \(M-major, lines of M rounded up to 4\) are read with strides \[1, 80\]", scale_a=described((m, 6), "float32"))
    refused(ValueError, r"scale_a has strides \[1, 77\]", scale_a=described((m, 6), "float32", strides=(1, 77)))
    refused(ValueError, r"scale_a has shape \[77, 5\], where a's 1x128 block scales .* have shape \[77, 6\] \(M = 77, N = 1000, K = 720\)", scale_a=described((m, 5), "float32", strides=(1, 80)))
    refused(ValueError, r"scale_b has shape \[8, 6\], where b's 128x128 block scales \(K-major\) have shape \[6, 8\]", scale_b=described((8, 6), "float32"))
    refused(ValueError, r"scale_b has strides \[1, 8\]", scale_b=described((6, 8), "float32", strides=(1, 8)))
    refused(TypeError, r"scale_b is bfloat16: block scales are float32", scale_b=described((6, 8), "bfloat16", strides=(1, 6)))
    refused(ValueError, r"scale_a starts at 0x[0-9a-f]+, where a's 1x128 block scales .* start on a 16-byte boundary", scale_a=described((m, 6), "float32", strides=(1, 80), data=BASE + 4))
    # One value each is the per-tensor call, not block scales.
    refused(ValueError, r"scale_a has shape \[\], where a's 1x128 block scales", scale_a=described((), "float32"))
    # A column-major out would swap a and b, and their blocks with them.
    refused(ValueError, r"block scales need a row-major out", out=described((m, n), "bfloat16", strides=(1, m)))
    with pytest.raises(ValueError, match=r"block_scales=True describes scale_a and scale_b, but none were given"):
        gemm_dsl._native.plan(a, b, out, block_scales=True)
    # Per-tensor scales of block shapes are refused with the way to say block scales.
    with pytest.raises(ValueError, match=r"scale_a has shape \[77, 6\]: a per-tensor scale is one value \(block scales: block_scales=True"):
        gemm_dsl._native.plan(a, b, out, scale_a=scale_a, scale_b=scale_b)
