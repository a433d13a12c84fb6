"""gemm_dsl.matmul against torch.matmul (cuBLAS) in one process, on a GPU machine.

For each problem of a shapes file (MxNxK, or BxMxNxK; `#` comments), as a linear layer
computes it, ``x @ w.T`` with x [M, K] and w [N, K] bf16 (layout rc): both results checked
against each other first, then each timed with CUDA events (warm-up, median of repeats of a
batch of calls). Then host time per call on a small problem, where the GPU waits on the host:
gemm_dsl.matmul, the registered operator, and torch.matmul.

    python python/benchmarks/matmul_vs_torch.py shapes/models.txt --out results.md
"""

import argparse
import math
import statistics
import time

import torch

import gemm_dsl
import gemm_dsl.torch_ops  # noqa: F401


def read_shapes(path):
    shapes = []
    for line in open(path):
        text = line.split("#")[0].strip()
        if not text:
            continue
        dims = [int(part) for part in text.split("x")]
        shapes.append(tuple(dims) if len(dims) == 4 else (1, *dims))
    return shapes


def time_gpu(fn, calls=20, repeats=15):
    """Median microseconds per call over `repeats` batches of `calls`, after a warm-up."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    samples = []
    for _ in range(repeats):
        start.record()
        for _ in range(calls):
            fn()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) * 1e3 / calls)
    return statistics.median(samples)


def time_graph(fn, calls=20, repeats=15):
    """Median microseconds per call of `calls` calls captured in one CUDA graph and
    replayed: the GPU's time alone, with no host time between launches."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn()  # loads the kernel outside the capture
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            fn()
    for _ in range(3):
        graph.replay()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    samples = []
    for _ in range(repeats):
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) * 1e3 / calls)
    del graph
    return statistics.median(samples)


def host_us(fn, calls=2000):
    """Host microseconds per call with nothing waited on: the GPU work of a small problem
    is shorter than the call, so the loop runs at the host's pace."""
    for _ in range(50):
        fn()
    torch.cuda.synchronize()
    best = math.inf
    for _ in range(5):
        started = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, (time.perf_counter() - started) * 1e6 / calls)
        torch.cuda.synchronize()
    return best


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("shapes")
    parser.add_argument("--out", help="also write the tables to this file")
    args = parser.parse_args()
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
        ours_us = time_gpu(lambda: gemm_dsl.matmul(x, wt))
        torch_us = time_gpu(lambda: torch.matmul(x, wt))
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
    def geomean(values):
        return math.exp(sum(map(math.log, values)) / len(values))

    lines += [
        "",
        f"eager: geomean {geomean(ratios):.3f}x torch.matmul over {len(ratios)} problems; worst {min(ratios):.3f}",
        f"graph: geomean {geomean(graph_ratios):.3f}x; worst {min(graph_ratios):.3f}",
        "",
    ]

    x = torch.randn(16, 256, dtype=torch.bfloat16, device="cuda")
    w = torch.randn(256, 256, dtype=torch.bfloat16, device="cuda")
    op = torch.ops.gemm_dsl.matmul
    rows = [
        ("gemm_dsl.matmul(x, w.T)", lambda: gemm_dsl.matmul(x, w.t())),
        ("torch.ops.gemm_dsl.matmul", lambda: op(x, w.t(), None, None, None, 1.0, 0.0, None)),
        ("torch.matmul(x, w.T)", lambda: torch.matmul(x, w.t())),
    ]
    lines += ["Host time per call, 16x256x256 bf16 (best of 5 x 2000 calls, none waited on):", ""]
    lines += ["| call | host us |", "|---|---:|"]
    for name, fn in rows:
        lines.append(f"| {name} | {host_us(fn):.2f} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        with open(args.out, "w") as file:
            file.write(text)


if __name__ == "__main__":
    main()
