#!/usr/bin/env python3
"""Times torch's grouped GEMM on the grouped problems of a list (shapes/moe.txt format), on a
GPU machine with torch: `torch._grouped_mm` (torch's CUTLASS grouped kernel) and a loop of
`torch.mm` per expert (cuBLAS), bf16, each result checked against the other first.

The rows each expert gets are drawn exactly as gemm-dsl draws them (`gemm_dsl::grouped`:
SplitMix64 and the same distributions), so the numbers compare with `gemm-bench` on the same
problems. `--self-test` checks the draws against values the Rust tests pin (no GPU needed).

Usage: scripts/torch-grouped-baseline.py [--list shapes/moe.txt] [--iters 20] [--markdown OUT]
"""

import argparse
import bisect
import statistics
import sys

MASK64 = (1 << 64) - 1


class SplitMix64:
    def __init__(self, seed):
        self.state = seed & MASK64

    def next_u64(self):
        self.state = (self.state + 0x9E3779B97F4A7C15) & MASK64
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
        return z ^ (z >> 31)

    def below(self, bound):
        return (self.next_u64() * bound) >> 64

    def unit(self):
        return (self.next_u64() >> 11) / float(1 << 53)


def parse_line(line):
    text = line.split("#", 1)[0].strip()
    if not text:
        return None
    groups, rows, n, k, dist = text.split()
    return int(groups), int(rows), int(n), int(k), dist


def group_rows(groups, rows, dist):
    """The rows per expert, as `GroupedProblem::group_rows` draws them."""
    parts = dist.split(":")
    if parts[0] == "balanced":
        each, extra = divmod(rows, groups)
        return [each + (1 if g < extra else 0) for g in range(groups)]
    if parts[0] == "random":
        rng = SplitMix64(int(parts[1]))
        counts = [0] * groups
        for _ in range(rows):
            counts[rng.below(groups)] += 1
        return counts
    if parts[0] == "zipf":
        s, rng = float(parts[1]), SplitMix64(int(parts[2]))
        order = list(range(groups))
        for i in range(groups - 1, 0, -1):
            j = rng.below(i + 1)
            order[i], order[j] = order[j], order[i]
        cumulative, total = [], 0.0
        for i in range(groups):
            total += (i + 1.0) ** (-s)
            cumulative.append(total)
        counts = [0] * groups
        for _ in range(rows):
            draw = rng.unit() * total
            rank = min(bisect.bisect_right(cumulative, draw), groups - 1)
            counts[order[rank]] += 1
        return counts
    if parts[0] == "masked":
        cap, rng = int(parts[1]), SplitMix64(int(parts[2]))
        return [rng.below(cap + 1) for _ in range(groups)]
    raise ValueError(f"unknown distribution {dist}")


# The same draws as gemm-dsl's test `grouped::tests::draws_are_pinned_for_other_languages`.
ZIPF_8 = [642, 2570, 833, 539, 1410, 458, 976, 764]
RANDOM_FIRST_12 = [3, 2, 1, 1, 1, 2, 1, 3, 2, 3, 0, 2]
MASKED_4 = [145, 191, 249, 114]


def self_test():
    rng = SplitMix64(0)
    assert rng.next_u64() == 0xE220A8397B1DCDAF
    assert rng.next_u64() == 0x6E789E6AA1B965F4
    zipf = group_rows(8, 8192, "zipf:0.8:6")
    random = group_rows(256, 512, "random:1")
    masked = group_rows(4, 1024, "masked:256:1")
    print("zipf:0.8:6 over 8:", zipf)
    print("random:1 over 256, first 12:", random[:12], "sum", sum(random))
    print("masked:256:1 over 4:", masked)
    assert zipf == ZIPF_8, f"zipf draws differ from the Rust ones: {zipf} != {ZIPF_8}"
    assert random[:12] == RANDOM_FIRST_12, random[:12]
    assert masked == MASKED_4, masked
    print("self-test: the draws match gemm-dsl's")



def time_ms(torch, fn, iters):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--list", default="shapes/moe.txt")
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--markdown")
    parser.add_argument("--self-test", action="store_true")
    args = parser.parse_args()
    if args.self_test:
        self_test()
        return 0

    import torch

    torch.manual_seed(0)
    device = torch.cuda.get_device_name()
    lines = [
        "| problem (G ROWS N K DIST) | rows per expert (min / max) | `torch._grouped_mm` TF/s | loop of `torch.mm` TF/s | rel. diff |",
        "|---|---|---:|---:|---:|",
    ]
    with open(args.list) as listing:
        problems = [p for p in (parse_line(line) for line in listing) if p]
    for groups, rows, n, k, dist in problems:
        sizes = group_rows(groups, rows, dist)
        masked = dist.startswith("masked")
        real_rows = sum(sizes)
        flops = 2.0 * real_rows * n * k
        b = torch.randn(groups, n, k, device="cuda", dtype=torch.bfloat16)  # nn.Linear's [N, K]
        if masked:
            # Masked: every expert's whole buffer of CAP rows; torch has no per-expert count.
            cap = rows // groups
            a = torch.randn(groups, cap, k, device="cuda", dtype=torch.bfloat16)
            grouped = lambda: torch._grouped_mm(a, b.transpose(-2, -1))
            loop = lambda: [torch.mm(a[g, : sizes[g]], b[g].t()) for g in range(groups)]
            ours = grouped()
            ref = torch.cat([torch.mm(a[g, : sizes[g]], b[g].t()) for g in range(groups)])
            got = torch.cat([ours[g, : sizes[g]] for g in range(groups)])
        else:
            a = torch.randn(rows, k, device="cuda", dtype=torch.bfloat16)
            ends = torch.tensor(sizes, device="cuda", dtype=torch.int32).cumsum(0, dtype=torch.int32)
            starts = [0]
            for size in sizes:
                starts.append(starts[-1] + size)
            grouped = lambda: torch._grouped_mm(a, b.transpose(-2, -1), offs=ends)
            loop = lambda: [
                torch.mm(a[starts[g] : starts[g + 1]], b[g].t()) for g in range(groups) if sizes[g]
            ]
            got = grouped()
            ref = torch.cat([torch.mm(a[starts[g] : starts[g + 1]], b[g].t()) for g in range(groups)])
        diff = ((got.float() - ref.float()).norm() / ref.float().norm().clamp_min(1e-30)).item()
        if diff > 2e-2:
            print(f"error: {groups} {rows} {n} {k} {dist}: grouped and loop differ by {diff:.2e}", file=sys.stderr)
            return 1
        grouped_ms = time_ms(torch, grouped, args.iters)
        loop_ms = time_ms(torch, loop, args.iters)
        line = (
            f"| {groups} {rows} {n} {k} {dist} | {min(sizes)} / {max(sizes)} | "
            f"{flops / grouped_ms / 1e9:.0f} | {flops / loop_ms / 1e9:.0f} | {diff:.1e} |"
        )
        print(line, flush=True)
        lines.append(line)
    header = (
        f"{device}, torch {torch.__version__}, bf16, random normal data, median of {args.iters} "
        "launches by CUDA events; TF/s over the rows experts actually have (masked: "
        "`torch._grouped_mm` computes every expert's whole buffer, having no counts)\n\n"
    )
    text = header + "\n".join(lines) + "\n"
    if args.markdown:
        with open(args.markdown, "w") as out:
            out.write(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
