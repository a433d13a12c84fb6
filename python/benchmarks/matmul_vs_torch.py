"""gemm_dsl.matmul against torch.matmul (cuBLAS) in one process, on a GPU machine.

For each problem of a shapes file (MxNxK, or BxMxNxK; `#` comments), as a linear layer
computes it, ``x @ w.T`` with x [M, K] and w [N, K] bf16 (layout rc): both results checked
against each other first, then each timed with CUDA events (warm-up, median of repeats of a
batch of calls). Then host time per call on a small problem, where the GPU waits on the host:
gemm_dsl.matmul, the registered operator, and torch.matmul.

    python python/benchmarks/matmul_vs_torch.py shapes/models.txt --out results.md

With ``--fp8``: gemm_dsl.scaled_mm against torch._scaled_mm (cuBLASLt) instead, e4m3 x and w
with per-tensor scales, bf16 out (problems of one product with N and K multiples of 16 only,
which cuBLASLt needs; it takes rows in sixteens too, so M = 1 is compared at M = 16 for both).
With ``--block-scales`` too: torch's block scales (x's per 1x128 block, w's per 128x128
block), against cuBLASLt's block-scaled GEMM where it takes the problem (a row says where it
refuses one, and times gemm_dsl alone).
"""

import argparse
import math

import torch

import gemm_dsl
import gemm_dsl.torch_ops  # noqa: F401
from timing import host_us, publish, summary, time_eager, time_graph


def read_shapes(path):
    shapes = []
    for line in open(path):
        text = line.split("#")[0].strip()
        if not text:
            continue
        dims = [int(part) for part in text.split("x")]
        shapes.append(tuple(dims) if len(dims) == 4 else (1, *dims))
    return shapes


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("shapes")
    parser.add_argument("--out", help="also write the tables to this file")
    parser.add_argument("--fp8", action="store_true", help="scaled_mm against torch._scaled_mm")
    parser.add_argument("--block-scales", action="store_true", help="with --fp8: 1x128 / 128x128 block scales")
    args = parser.parse_args()
    if args.block_scales and not args.fp8:
        parser.error("--block-scales times scaled_mm: give --fp8 too")
    if args.fp8:
        return main_fp8(args)
    torch.manual_seed(0)
    device = torch.cuda.get_device_name()
    lines = [
        f"# gemm_dsl.matmul vs torch.matmul, {device}, torch {torch.__version__}, gemm_dsl {gemm_dsl.__version__}",
        "",
        "bf16, x [M, K] @ w [N, K].T (layout rc), bf16 out; CUDA events, median of 15 x 20 calls: "
        "eager (each call's host time included, as a Python loop runs them) and in one CUDA graph "
        "(the GPU's time alone).",
        "",
        "| problem | gemm_dsl kernel | eager TF/s | torch eager TF/s | eager ratio | graph TF/s | torch graph TF/s | graph ratio | max rel diff |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    ratios, graph_ratios = [], []
    for batch, m, n, k in read_shapes(args.shapes):
        x = torch.randn(batch, m, k, dtype=torch.bfloat16, device="cuda").squeeze(0)
        w = torch.randn(n, k, dtype=torch.bfloat16, device="cuda") / math.sqrt(k)
        if batch > 1:
            w = torch.randn(batch, n, k, dtype=torch.bfloat16, device="cuda") / math.sqrt(k)
        wt = w.transpose(-1, -2)
        ours = gemm_dsl.matmul(x, wt)
        theirs = torch.matmul(x, wt)
        diff = ((ours.float() - theirs.float()).abs().max() / theirs.float().abs().max()).item()
        flops = 2.0 * batch * m * n * k
        ours_us = time_eager(lambda: gemm_dsl.matmul(x, wt))
        torch_us = time_eager(lambda: torch.matmul(x, wt))
        ratio = torch_us / ours_us
        ratios.append(ratio)
        ours_graph_us = time_graph(lambda: gemm_dsl.matmul(x, wt))
        torch_graph_us = time_graph(lambda: torch.matmul(x, wt))
        graph_ratio = torch_graph_us / ours_graph_us
        graph_ratios.append(graph_ratio)
        kernel = gemm_dsl.pick(x, wt)[0] if batch == 1 else "(batch)"
        shape = f"{m}x{n}x{k}" if batch == 1 else f"{batch}x{m}x{n}x{k}"
        lines.append(
            f"| {shape} | {kernel} | {flops / ours_us / 1e6:.1f} | {flops / torch_us / 1e6:.1f} | {ratio:.3f} "
            f"| {flops / ours_graph_us / 1e6:.1f} | {flops / torch_graph_us / 1e6:.1f} | {graph_ratio:.3f} | {diff:.1e} |"
        )
        del x, w, wt, ours, theirs
    lines += summary("torch.matmul", ratios, graph_ratios) + [""]

    x = torch.randn(16, 256, dtype=torch.bfloat16, device="cuda")
    w = torch.randn(256, 256, dtype=torch.bfloat16, device="cuda")
    op = torch.ops.gemm_dsl.matmul
    rows = [
        ("gemm_dsl.matmul(x, w.T)", lambda: gemm_dsl.matmul(x, w.t())),
        ("torch.ops.gemm_dsl.matmul", lambda: op(x, w.t(), None, None, None, 1.0, 0.0, None)),
        ("torch.matmul(x, w.T)", lambda: torch.matmul(x, w.t())),
    ]
    lines += ["Host time per call, 16x256x256 bf16 (best of 5 rounds of 2000 calls, none waited on):", ""]
    lines += ["| call | host us |", "|---|---:|"]
    for (name, _), us in zip(rows, host_us(rows)):
        lines.append(f"| {name} | {us:.2f} |")
    publish(lines, args.out)


def fp8_scales(m, n, k, block):
    """(scale_a, scale_b) for x [M, K] @ w [N, K].T: one value each, or torch's block scales
    (x's 1x128 blocks M-major in lines of M rounded up to 4, w's 128x128 blocks, transposed
    as b = w.t() takes them), drawn around the per-tensor values."""
    if not block:
        return torch.tensor(1.0 / 16, device="cuda"), torch.tensor(1.0 / math.sqrt(k), device="cuda")
    k_blocks, n_blocks, m_line = -(-k // 128), -(-n // 128), -(-m // 4) * 4
    scale_a = ((torch.rand(k_blocks, m_line, device="cuda") + 0.5) / 16).t()[:m]
    scale_w = (torch.rand(n_blocks, k_blocks, device="cuda") + 0.5) / math.sqrt(k)
    return scale_a, scale_w.t()


def dequantized(x, scale, block):
    """An fp8 [rows, K] operand times its scales, in float64: one value, or one per 1x128
    block (`scale` [rows, ceil(K/128)]) or per 128x128 block ([ceil(rows/128), ceil(K/128)])."""
    if not block:
        return x.double() * scale.double()
    rows, k = x.shape
    k_blocks = torch.arange(k, device=x.device) // 128
    row_blocks = torch.arange(rows, device=x.device)
    if scale.shape[0] != rows:
        row_blocks = row_blocks // 128
    return x.double() * scale.double()[row_blocks][:, k_blocks]


def main_fp8(args):
    torch.manual_seed(0)
    fp8 = torch.float8_e4m3fn
    block = args.block_scales
    scales = "block scales (x 1x128, w 128x128)" if block else "per-tensor scales"
    lines = [
        f"# gemm_dsl.scaled_mm vs torch._scaled_mm, {torch.cuda.get_device_name()}, torch {torch.__version__}",
        "",
        f"e4m3 x [M, K] @ w [N, K].T, {scales}, bf16 out; eager and in one CUDA graph, "
        "median of 15 x 20 calls.",
        "",
        "| problem | gemm_dsl kernel | eager TF/s | torch eager TF/s | eager ratio | graph TF/s | torch graph TF/s | graph ratio | max rel diff |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    ratios, graph_ratios = [], []
    for batch, m, n, k in read_shapes(args.shapes):
        if batch > 1 or n % 16 or k % 16:  # cuBLASLt's fp8 GEMM refuses N or K off sixteens
            continue
        m = max(m, 16)
        x = torch.randn(m, k, device="cuda").to(fp8)
        w = torch.randn(n, k, device="cuda").to(fp8)
        wt = w.t()
        scale_a, scale_b = fp8_scales(m, n, k, block)
        ours_fn = lambda: gemm_dsl.scaled_mm(x, wt, scale_a, scale_b, block_scales=block)  # noqa: E731
        torch_fn = lambda: torch._scaled_mm(x, wt, scale_a, scale_b, out_dtype=torch.bfloat16)  # noqa: E731
        kernel = gemm_dsl.pick(x, wt, scale_a=scale_a, scale_b=scale_b, block_scales=block, out_dtype=torch.bfloat16)[0]
        flops = 2.0 * m * n * k
        ours = ours_fn()
        torch.cuda.synchronize()  # a fault of ours surfaces here, not as torch's refusal
        try:
            theirs = torch_fn()
        except RuntimeError as refusal:  # cuBLASLt's block scales take fewer shapes
            want = dequantized(x, scale_a, block) @ dequantized(w, scale_b.t(), block).t()
            diff = ((ours.double() - want).abs().max() / want.abs().max()).item()
            times = [time_eager(ours_fn), time_graph(ours_fn)]
            reason = str(refusal).splitlines()[0][:60]
            lines.append(
                f"| {m}x{n}x{k} | {kernel} | {flops / times[0] / 1e6:.1f} | refused: {reason} | "
                f"| {flops / times[1] / 1e6:.1f} | | | {diff:.1e} (float64) |"
            )
            del x, w, wt, ours
            continue
        diff = ((ours.float() - theirs.float()).abs().max() / theirs.float().abs().max()).item()
        times = [time_eager(ours_fn), time_eager(torch_fn), time_graph(ours_fn), time_graph(torch_fn)]
        ratios.append(times[1] / times[0])
        graph_ratios.append(times[3] / times[2])
        tf = [flops / t / 1e6 for t in times]
        lines.append(
            f"| {m}x{n}x{k} | {kernel} | {tf[0]:.1f} | {tf[1]:.1f} | {ratios[-1]:.3f} "
            f"| {tf[2]:.1f} | {tf[3]:.1f} | {graph_ratios[-1]:.3f} | {diff:.1e} |"
        )
        del x, w, wt, ours, theirs

    publish(lines + summary("torch._scaled_mm", ratios, graph_ratios), args.out)


if __name__ == "__main__":
    main()
