"""gemm_dsl on torch tensors, on a GPU machine (torch with CUDA): results against a float64
reference, the registered operator (opcheck, torch.compile), CUDA graphs, and refusals.

Outputs are poisoned (NaN) before each run and inputs are fresh random normal values. Run
with ``python -m pytest python/gpu_tests`` where torch and a GPU are present.
"""

import math

import pytest
import torch
import torch.nn.functional as F

import gemm_dsl
import gemm_dsl.torch_ops  # noqa: F401  (registers torch.ops.gemm_dsl)

DEVICE = "cuda"
# Relative error of a result against float64, scaled by sqrt(k): bf16 and f16 round each
# output once (2^-8, 2^-11), and the f32 accumulation of k products adds ~sqrt(k)·2^-24.
TOLERANCE = {torch.bfloat16: 2e-2, torch.float16: 4e-3, torch.float32: 1e-5}


def reference(a, b, bias=None, activation=None, alpha=1.0, beta=0.0, c=None):
    result = alpha * torch.matmul(a.double(), b.double())
    if c is not None and beta != 0:
        result = result + beta * c.double()
    if bias is not None:
        result = result + bias.double()
    if activation == "relu":
        result = F.relu(result)
    elif activation == "gelu":
        result = F.gelu(result)
    elif activation == "gelu_tanh":
        result = F.gelu(result, approximate="tanh")
    elif activation == "silu":
        result = F.silu(result)
    return result


def assert_close(got, want, dtype):
    assert got.shape == want.shape, (got.shape, want.shape)
    assert torch.isfinite(got).all(), "non-finite values: a poisoned element was not written"
    scale = want.abs().max().item() + 1e-30
    error = (got.double() - want).abs().max().item() / scale
    assert error <= TOLERANCE[dtype], f"max error {error:.3g} of the largest |value| {scale:.3g}"


def randn(*shape, dtype):
    return torch.randn(*shape, dtype=dtype, device=DEVICE)


def poisoned(*shape, dtype):
    return torch.full(shape, math.nan, dtype=dtype, device=DEVICE)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize(
    "a_shape,b_shape",
    [
        ((128, 256), (256, 64)),
        ((77, 4099), (4099, 129)),  # odd lines: narrow-access kernels
        ((1, 4096), (4096, 512)),
        ((3, 40, 96), (96, 72)),  # folded batch
        ((2, 3, 40, 96), (3, 96, 72)),  # broadcast batch
        ((4096,), (4096, 256)),  # vector @ matrix
        ((64, 300), (300,)),  # matrix @ vector
    ],
)
def test_matmul_matches_float64(dtype, a_shape, b_shape):
    a, b = randn(*a_shape, dtype=dtype), randn(*b_shape, dtype=dtype)
    got = gemm_dsl.matmul(a, b)
    assert got.dtype == dtype
    assert_close(got, reference(a, b), dtype)


@pytest.mark.parametrize("transpose_a", [False, True])
@pytest.mark.parametrize("transpose_b", [False, True])
def test_every_layout_and_a_column_major_out(transpose_a, transpose_b):
    dtype = torch.bfloat16
    a = randn(200, 96, dtype=dtype)
    b = randn(96, 136, dtype=dtype)
    a_in = a.t().contiguous().t() if transpose_a else a
    b_in = b.t().contiguous().t() if transpose_b else b
    out = poisoned(136, 200, dtype=dtype).t()  # column-major
    got = gemm_dsl.matmul(a_in, b_in, out=out)
    assert got is out
    assert_close(out, reference(a, b), dtype)


def test_views_at_odd_elements_and_strided_rows():
    dtype = torch.float16
    storage = randn(300 * 513 + 7, dtype=dtype)
    a = storage[3 : 3 + 300 * 513].view(300, 513)[:, :500]  # starts at an odd element
    b = randn(500, 260, dtype=dtype)[:, 1:251]
    out = poisoned(300, 251, dtype=dtype)[:, :250]
    gemm_dsl.matmul(a, b, out=out)
    assert_close(out, reference(a, b), dtype)


@pytest.mark.parametrize("activation", [None, "relu", "gelu", "gelu_tanh", "silu"])
def test_fused_bias_and_activation_match_torch(activation):
    dtype = torch.bfloat16
    x = randn(512, 1024, dtype=dtype)
    w = randn(768, 1024, dtype=dtype) / 32  # nn.Linear's [out, in]
    bias = randn(768, dtype=dtype)
    got = gemm_dsl.matmul(x, w.t(), bias=bias, activation=activation)
    assert_close(got, reference(x, w.t(), bias=bias, activation=activation), dtype)


def test_a_fused_linear_over_a_batch_and_c_for_a_vector():
    dtype = torch.bfloat16
    x = randn(4, 64, 1024, dtype=dtype)
    w = randn(768, 1024, dtype=dtype) / 32
    bias = randn(768, dtype=dtype)
    assert gemm_dsl.plan(x, w.t(), bias=bias, activation="silu")["m"] == 256  # folded
    got = gemm_dsl.matmul(x, w.t(), bias=bias, activation="silu")
    assert_close(got, reference(x, w.t(), bias=bias, activation="silu"), dtype)
    v, c = randn(1024, dtype=dtype), randn(768, dtype=dtype)
    got = gemm_dsl.matmul(v, w.t(), beta=1.0, c=c)
    assert got.shape == (768,)
    assert_close(got, reference(v, w.t(), beta=1.0, c=c), dtype)
    with pytest.raises(ValueError, match="out overlaps a in memory"):
        gemm_dsl.matmul(x[0], w.t(), out=x[0, :, :768])
    assert torch.cuda.current_device() == 0


def test_alpha_beta_and_c():
    dtype = torch.float16
    a, b, c = randn(256, 128, dtype=dtype), randn(128, 192, dtype=dtype), randn(256, 192, dtype=dtype)
    got = gemm_dsl.matmul(a, b, alpha=0.5, beta=2.0, c=c)
    assert_close(got, reference(a, b, alpha=0.5, beta=2.0, c=c), dtype)


def test_float32_output_from_bfloat16():
    a, b = randn(64, 256, dtype=torch.bfloat16), randn(256, 128, dtype=torch.bfloat16)
    got = gemm_dsl.matmul(a, b, out_dtype=torch.float32)
    assert got.dtype == torch.float32
    assert_close(got, reference(a, b), torch.float32)


def test_empty_products_follow_torch():
    a, b = randn(0, 64, dtype=torch.bfloat16), randn(64, 32, dtype=torch.bfloat16)
    assert gemm_dsl.matmul(a, b).shape == (0, 32)
    a, b = randn(8, 0, dtype=torch.bfloat16), randn(0, 32, dtype=torch.bfloat16)
    bias = randn(32, dtype=torch.bfloat16)
    assert torch.equal(gemm_dsl.matmul(a, b, bias=bias), bias.expand(8, 32))


def test_runs_on_torchs_current_stream():
    dtype = torch.bfloat16
    a, b = randn(2048, 2048, dtype=dtype), randn(2048, 2048, dtype=dtype)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        out = poisoned(2048, 2048, dtype=dtype)
        gemm_dsl.matmul(a, b, out=out)
        # Read on `side` with no synchronization: only a kernel queued on `side` (torch's
        # current stream here) has written every element by now.
        seen = out.double()
    torch.cuda.current_stream().wait_stream(side)
    assert_close(seen, reference(a, b), dtype)


def test_inputs_freed_right_after_the_call_are_safe():
    # torch's allocator hands freed blocks to later work on the same stream only, after
    # the kernel that reads them: dropping the inputs at once is safe.
    dtype = torch.bfloat16
    a, b = randn(2048, 2048, dtype=dtype), randn(2048, 2048, dtype=dtype)
    want = reference(a, b)
    got = gemm_dsl.matmul(a.clone(), b.clone())
    scribble = [torch.full((2048, 2048), 7.0, dtype=dtype, device=DEVICE) for _ in range(4)]
    assert_close(got, want, dtype)
    del scribble


def test_opcheck_passes():
    a, b = randn(64, 128, dtype=torch.bfloat16), randn(128, 96, dtype=torch.bfloat16)
    bias = randn(96, dtype=torch.bfloat16)
    op = torch.ops.gemm_dsl.matmul.default
    torch.library.opcheck(op, (a, b, None, None, None, 1.0, 0.0, None))
    torch.library.opcheck(op, (a, b, bias, None, "gelu", 1.0, 0.0, None))


class Mlp(torch.nn.Module):
    def __init__(self, dtype):
        super().__init__()
        self.up = torch.nn.Linear(512, 2048, dtype=dtype, device=DEVICE)
        self.down = torch.nn.Linear(2048, 512, dtype=dtype, device=DEVICE)

    def forward(self, x):
        hidden = gemm_dsl.matmul(x, self.up.weight.t(), bias=self.up.bias, activation="gelu")
        return gemm_dsl.matmul(hidden, self.down.weight.t(), bias=self.down.bias)


def test_torch_compile_traces_the_operator_in_one_graph():
    torch.manual_seed(0)
    mlp = Mlp(torch.bfloat16)
    x = randn(4, 64, 512, dtype=torch.bfloat16)
    with torch.no_grad():
        eager = mlp(x)
        compiled = torch.compile(mlp, fullgraph=True)(x)
        graphs = torch.compile(mlp, mode="reduce-overhead", fullgraph=True)
        for _ in range(3):  # warm up, record, replay
            replayed = graphs(x).clone()
    assert torch.equal(compiled, eager)
    assert torch.equal(replayed, eager)


def test_cuda_graph_capture_replays_equal_to_eager():
    dtype = torch.bfloat16
    shapes = [(16, 4096, 4096), (128, 6144, 4096), (512, 1024, 4096), (4096, 4096, 4096)]
    inputs = [(randn(m, k, dtype=dtype), randn(n, k, dtype=dtype)) for m, n, k in shapes]
    bias = [randn(n, dtype=dtype) for _, n, _ in shapes]
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm up: load every kernel before capturing
        eager = [gemm_dsl.matmul(x, w.t(), bias=b_, activation="silu") for (x, w), b_ in zip(inputs, bias)]
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = [gemm_dsl.matmul(x, w.t(), bias=b_, activation="silu") for (x, w), b_ in zip(inputs, bias)]
    for out in captured:
        out.fill_(math.nan)
    graph.replay()
    torch.cuda.synchronize()
    for got, want in zip(captured, eager):
        assert torch.equal(got, want)


def test_pick_and_explain_name_the_kernel():
    a, b = randn(4096, 4096, dtype=torch.bfloat16), randn(4096, 4096, dtype=torch.bfloat16)
    kernel, source = gemm_dsl.pick(a, b)
    assert kernel and source in ("cost model", "tuning cache")
    text = gemm_dsl.explain(a, b)
    assert text.splitlines()[0].endswith(f"{kernel} (from the {source})")


@pytest.mark.parametrize("m", [1, 77, 512])
def test_scaled_mm_matches_float64_and_torch(m):
    n, k = 1024, 768
    fp8 = torch.float8_e4m3fn
    a = torch.randn(m, k, device=DEVICE).to(fp8)
    w = torch.randn(n, k, device=DEVICE).to(fp8)  # [N, K]: b = w.t() is column-major
    scale_a = torch.tensor(0.25, device=DEVICE)
    scale_b = torch.tensor(1.5, device=DEVICE)
    bias = randn(n, dtype=torch.bfloat16)
    got = gemm_dsl.scaled_mm(a, w.t(), scale_a, scale_b, bias=bias)
    assert got.dtype == torch.bfloat16
    want = (a.double() @ w.t().double()) * 0.375 + bias.double()
    assert_close(got, want, torch.bfloat16)
    if m % 16 == 0:  # cuBLASLt's fp8 GEMM takes rows in sixteens
        theirs = torch._scaled_mm(a, w.t(), scale_a, scale_b, bias=bias, out_dtype=torch.bfloat16)
        assert_close(got, theirs.double(), torch.bfloat16)
    # opcheck's schema test compares inputs with allclose, which torch has no float8 kernel
    # for; the fake tensor and autograd-registration tests run.
    torch.library.opcheck(
        torch.ops.gemm_dsl.scaled_mm.default,
        (a, w.t(), scale_a, scale_b, bias, torch.bfloat16, False),
        test_utils=("test_faketensor", "test_autograd_registration"),
    )


@pytest.mark.parametrize("m, n, k", [(1, 1024, 768), (77, 1000, 720), (512, 1024, 1024)])
def test_block_scaled_mm_matches_float64_and_torch(m, n, k):
    """torch's block scales (BlockWise1x128 for a, BlockWise128x128 for b), each block its own
    scale, K and N not always whole blocks."""
    fp8 = torch.float8_e4m3fn
    k_blocks, n_blocks, m_line = -(-k // 128), -(-n // 128), -(-m // 4) * 4
    a = torch.randn(m, k, device=DEVICE).to(fp8)
    w = torch.randn(n, k, device=DEVICE).to(fp8)  # [N, K]: b = w.t() is column-major
    scale_a = (torch.rand(k_blocks, m_line, device=DEVICE) + 0.5).t()[:m]  # (M, K/128), M-major
    scale_w = torch.rand(n_blocks, k_blocks, device=DEVICE) + 0.5  # one per 128x128 block of w
    bias = randn(n, dtype=torch.bfloat16)
    got = gemm_dsl.scaled_mm(a, w.t(), scale_a, scale_w.t(), bias=bias, block_scales=True)
    assert got.dtype == torch.bfloat16
    blocks = torch.arange(k, device=DEVICE) // 128
    a_scaled = a.double() * scale_a.double()[:, blocks]
    w_scaled = w.double() * scale_w.double()[torch.arange(n, device=DEVICE) // 128][:, blocks]
    want = a_scaled @ w_scaled.t() + bias.double()
    assert_close(got, want, torch.bfloat16)
    if m % 16 == 0 and n % 128 == 0 and k % 512 == 0:  # shapes cuBLASLt's block scales take
        theirs = torch._scaled_mm(a, w.t(), scale_a, scale_w.t(), bias=bias, out_dtype=torch.bfloat16)
        assert_close(got, theirs.double(), torch.bfloat16)
    if m % 4:  # lines of M rounded up to 4: the last one's tail must be in the buffer too
        short = torch.rand(k_blocks * m_line - 1, device=DEVICE).as_strided((m, k_blocks), (1, m_line))
        with pytest.raises(ValueError, match=r"scale_a's buffer holds \d+ float32 values past its start"):
            gemm_dsl.scaled_mm(a, w.t(), short, scale_w.t(), block_scales=True)
    # A packed (M, K/128) scale_a is K-major: refused, nothing launched.
    with pytest.raises(ValueError, match=r"scale_a has strides .* are read with strides"):
        gemm_dsl.scaled_mm(a, w.t(), scale_a.contiguous(), scale_w.t(), block_scales=True)
    torch.library.opcheck(
        torch.ops.gemm_dsl.scaled_mm.default,
        (a, w.t(), scale_a, scale_w.t(), bias, torch.bfloat16, True),
        test_utils=("test_faketensor", "test_autograd_registration"),
    )


def test_bad_tensors_raise_and_launch_nothing():
    a = randn(64, 64, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="a is on the cpu device"):
        gemm_dsl.matmul(a.cpu(), a)
    with pytest.raises(TypeError, match="a is int32"):
        gemm_dsl.matmul(a.int(), a.int())
    with pytest.raises(ValueError, match=r"a's columns \(64\) differ from b's rows \(32\)"):
        gemm_dsl.matmul(a, a[:32])
    with pytest.raises(ValueError, match="must be contiguous"):
        gemm_dsl.matmul(a[:, ::2], a[:32])
    # The stream is still usable.
    assert_close(gemm_dsl.matmul(a, a), reference(a, a), torch.bfloat16)
