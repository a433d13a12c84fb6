"""gemm_dsl.grouped_mm against torch._grouped_mm in one process, on a GPU machine.

For each contiguous problem of a grouped list (shapes/moe.txt's format; masked ones are
skipped: torch has no per-expert count), the rows per expert are drawn as gemm-dsl draws them
(scripts/torch-grouped-baseline.py), A [rows, K] and nn.Linear-style weights [G, N, K] in
bf16; both results are checked against each other, then each is timed with CUDA events
(median of 15 batches of 10 calls), eager and in one CUDA graph.

    python python/benchmarks/grouped_vs_torch.py shapes/moe.txt --out grouped.md
"""

import argparse
import importlib.util
import math
import pathlib

import torch

import gemm_dsl
import gemm_dsl.torch_ops  # noqa: F401
from timing import publish, summary, time_eager, time_graph

ROOT = pathlib.Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("baseline", ROOT / "scripts" / "torch-grouped-baseline.py")
baseline = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(baseline)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("shapes")
    parser.add_argument("--out")
    args = parser.parse_args()
    torch.manual_seed(0)
    lines = [
        f"# gemm_dsl.grouped_mm vs torch._grouped_mm, {torch.cuda.get_device_name()}, torch {torch.__version__}",
        "",
        "bf16, A [rows, K] by nn.Linear weights [G, N, K] (layout rc); TF/s over the routed rows; "
        "median of 15 x 10 calls, eager and in one CUDA graph.",
        "",
        "| problem (G ROWS N K DIST) | gemm_dsl kernel | eager TF/s | torch eager TF/s | eager ratio | graph TF/s | torch graph TF/s | graph ratio | rel diff |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    eager_ratios, graph_ratios = [], []
    for line in open(args.shapes):
        problem = baseline.parse_line(line)
        if problem is None or problem[4].startswith("masked"):
            continue
        groups, rows, n, k, dist = problem
        sizes = baseline.group_rows(groups, rows, dist)
        a = torch.randn(rows, k, dtype=torch.bfloat16, device="cuda")
        w = torch.randn(groups, n, k, dtype=torch.bfloat16, device="cuda") / math.sqrt(k)
        b = w.transpose(-2, -1)
        offs = torch.tensor(sizes, dtype=torch.int32, device="cuda").cumsum(0, dtype=torch.int32)
        ours = gemm_dsl.grouped_mm(a, b, offs)
        theirs = torch._grouped_mm(a, b, offs=offs)
        diff = ((ours.float() - theirs.float()).norm() / theirs.float().norm()).item()
        flops = 2.0 * rows * n * k
        ours_fn = lambda: gemm_dsl.grouped_mm(a, b, offs)  # noqa: E731
        torch_fn = lambda: torch._grouped_mm(a, b, offs=offs)  # noqa: E731
        times = [time_eager(ours_fn, calls=10), time_graph(ours_fn, calls=10)]
        times += [time_eager(torch_fn, calls=10), time_graph(torch_fn, calls=10)]
        eager_ratio, graph_ratio = times[2] / times[0], times[3] / times[1]
        eager_ratios.append(eager_ratio)
        graph_ratios.append(graph_ratio)
        kernel = gemm_dsl.grouped_pick(a, b, offs)
        tf = [flops / t / 1e6 for t in times]
        lines.append(
            f"| {groups} {rows} {n} {k} {dist} | {kernel} | {tf[0]:.0f} | {tf[2]:.0f} | {eager_ratio:.3f} "
            f"| {tf[1]:.0f} | {tf[3]:.0f} | {graph_ratio:.3f} | {diff:.1e} |"
        )
        del a, w, b, ours, theirs

    publish(lines + summary("torch._grouped_mm", eager_ratios, graph_ratios), args.out)


if __name__ == "__main__":
    main()
