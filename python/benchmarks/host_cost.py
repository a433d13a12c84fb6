"""Where the host time of one ``gemm_dsl.matmul`` call goes, against ``torch.matmul``'s.

Each row times one piece of the call on its own: a loop of calls with nothing waited on, on a
problem small enough (16x256x256 bf16) that the GPU keeps up with the host; the rows take
turns over five rounds (the host's speed drifts within a run), each row's best round kept. The
pieces of ``gemm_dsl.matmul`` (the Python side: torch's allocation of the output, the three
tensor descriptions, torch's current stream; the native call: planning, then picking and
launching) add up to about the whole call; the torch rows are the floor a caller compares
against. On a GPU machine with torch:

    python python/benchmarks/host_cost.py --out host.md
"""

import argparse

import torch

import gemm_dsl
import gemm_dsl.torch_ops  # noqa: F401
from gemm_dsl import _native
from timing import host_us, publish


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--shape", default="16x256x256", help="MxNxK, bf16, x [M, K] @ w [N, K].T")
    parser.add_argument("--out")
    args = parser.parse_args()
    m, n, k = (int(part) for part in args.shape.split("x"))
    x = torch.randn(m, k, dtype=torch.bfloat16, device="cuda")
    w = torch.randn(n, k, dtype=torch.bfloat16, device="cuda")
    wt = w.t()
    out = gemm_dsl.matmul(x, wt)
    described = [gemm_dsl._describe_tensor(t) for t in (x, wt, out)]
    stream = gemm_dsl._current_stream(0)
    native_matmul, native_plan = _native.matmul, _native.plan
    describe, current_stream = gemm_dsl._describe_tensor, gemm_dsl._current_stream
    shape = (m, n)
    rows = [
        ("torch.matmul(x, w.T)", lambda: torch.matmul(x, w.t())),
        ("torch.mm(x, w.T, out=out)", lambda: torch.mm(x, wt, out=out)),
        ("torch.cuda._sleep(0) (a bare launch through torch)", lambda: torch.cuda._sleep(0)),
        ("gemm_dsl.matmul(x, w.T)", lambda: gemm_dsl.matmul(x, w.t())),
        ("gemm_dsl.matmul(x, wt, out=out)", lambda: gemm_dsl.matmul(x, wt, out=out)),
        ("  w.t()", lambda: w.t()),
        ("  torch.compiler.is_compiling()", torch.compiler.is_compiling),
        ("  x.new_empty(shape)", lambda: x.new_empty(shape)),
        ("  _describe_tensor(x)", lambda: describe(x)),
        ("  _current_stream(0)", lambda: current_stream(0)),
        ("  _native.plan (planning, a dict back)", lambda: native_plan(*described)),
        ("  _native.matmul (plan, pick, launch)", lambda: native_matmul(*described, stream=stream)),
        ("  x.new_empty(shape) and its description", lambda: describe(x.new_empty(shape))),
        (
            "  _native.matmul into a fresh output",
            lambda: native_matmul(described[0], described[1], describe(x.new_empty(shape)), stream=stream),
        ),
    ]
    lines = [
        f"# Host time of one call, {torch.cuda.get_device_name()}, torch {torch.__version__}, "
        f"gemm_dsl {gemm_dsl.__version__}",
        "",
        f"{args.shape} bf16, x [M, K] @ w [N, K].T; best of 5 rounds of 2000 calls, none waited on. "
        f"The kernel: {gemm_dsl.pick(x, wt)[0]}.",
        "",
        "| call | host us |",
        "|---|---:|",
    ]
    for (name, _), us in zip(rows, host_us(rows)):
        lines.append(f"| {name} | {us:.2f} |")
    publish(lines, args.out)


if __name__ == "__main__":
    main()
