"""gemm_dsl.grouped_mm against a float64 loop over the experts and torch._grouped_mm, on a
GPU machine (a Hopper GPU: the grouped kernels are wgmma + TMA)."""

import math

import pytest
import torch

import gemm_dsl
import gemm_dsl.torch_ops  # noqa: F401

DEVICE = "cuda"


def experts_problem(sizes, n, k, layout, dtype=torch.bfloat16):
    rows = sum(sizes)
    a = torch.randn(rows, k, dtype=dtype, device=DEVICE)
    if layout == "rc":  # nn.Linear's weights, [experts, N, K], seen as [experts, K, N]
        b = (torch.randn(len(sizes), n, k, dtype=dtype, device=DEVICE) / math.sqrt(k)).transpose(-2, -1)
    else:
        b = torch.randn(len(sizes), k, n, dtype=dtype, device=DEVICE) / math.sqrt(k)
    offs = torch.tensor(sizes, dtype=torch.int32, device=DEVICE).cumsum(0, dtype=torch.int32)
    return a, b, offs


def reference(a, b, sizes):
    parts, start = [], 0
    for expert, size in enumerate(sizes):
        parts.append(a[start : start + size].double() @ b[expert].double())
        start += size
    return torch.cat(parts)


def assert_close(got, want, tolerance=2e-2):
    assert got.shape == want.shape
    assert torch.isfinite(got).all()
    error = (got.double() - want).abs().max().item() / (want.abs().max().item() + 1e-30)
    assert error <= tolerance, f"max error {error:.3g}"


@pytest.mark.parametrize("layout", ["rc", "rr"])
@pytest.mark.parametrize(
    "sizes,n,k",
    [
        ([64, 0, 200, 1, 77, 128, 0, 300], 512, 256),  # empty experts, odd counts
        ([4] * 8, 14336, 4096),  # decode: a few rows each
        ([1000, 24, 2048, 100], 768, 2048),
    ],
)
def test_grouped_mm_matches_float64_and_torch(layout, sizes, n, k):
    a, b, offs = experts_problem(sizes, n, k, layout)
    got = gemm_dsl.grouped_mm(a, b, offs)
    assert_close(got, reference(a, b, sizes))
    if layout == "rc":  # torch's grouped kernel takes B as the transpose of [G, N, K]
        theirs = torch._grouped_mm(a, b, offs=offs)
        assert_close(got, theirs.double())


def test_grouped_mm_into_out_and_f16():
    a, b, offs = experts_problem([30, 50, 20], 256, 128, "rc", torch.float16)
    out = torch.full((100, 256), math.nan, dtype=torch.float16, device=DEVICE)
    assert gemm_dsl.grouped_mm(a, b, offs, out=out) is out
    assert_close(out, reference(a, b, [30, 50, 20]), 4e-3)


def test_grouped_opcheck_compile_and_graph():
    sizes = [16, 48, 0, 64]
    a, b, offs = experts_problem(sizes, 1024, 512, "rc")
    torch.library.opcheck(torch.ops.gemm_dsl.grouped_mm.default, (a, b, offs))
    eager = gemm_dsl.grouped_mm(a, b, offs)
    compiled = torch.compile(lambda a, b, offs: gemm_dsl.grouped_mm(a, b, offs), fullgraph=True)(a, b, offs)
    assert torch.equal(compiled, eager)
    graph = torch.cuda.CUDAGraph()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        gemm_dsl.grouped_mm(a, b, offs)
    torch.cuda.current_stream().wait_stream(side)
    with torch.cuda.graph(graph):
        captured = gemm_dsl.grouped_mm(a, b, offs)
    captured.fill_(math.nan)
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(captured, eager)


def test_grouped_bad_arguments_raise():
    a, b, offs = experts_problem([8, 8], 256, 128, "rc")
    with pytest.raises(TypeError, match="offs is int64: the experts' row ends are int32"):
        gemm_dsl.grouped_mm(a, b, offs.long())
    with pytest.raises(TypeError, match="gemm_dsl.grouped_mm multiplies bfloat16 or float16 experts"):
        gemm_dsl.grouped_mm(a.float(), b.float(), offs)
    with pytest.raises(ValueError, match=r"offs has 3 entries for 2 experts"):
        gemm_dsl.grouped_mm(a, b, torch.cat([offs, offs[-1:]]))
    with pytest.raises(ValueError, match=r"a's columns \(100\) differ from each expert's rows \(128\)"):
        gemm_dsl.grouped_mm(a[:, :100], b, offs)
    with pytest.raises(ValueError, match=r"b has strides"):
        gemm_dsl.grouped_mm(a, b[:, :, ::2], offs)
