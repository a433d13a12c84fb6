"""Timing and reporting shared by the benchmarks: CUDA events around batches of calls, eager
or replayed from one CUDA graph, and the tables' summary lines."""

import math
import statistics
import time

import torch


def time_eager(fn, calls=20, repeats=15):
    """Median microseconds per call over `repeats` batches of `calls` launched from Python
    (each call's host time included), after a warm-up."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    return _median_us(lambda: [fn() for _ in range(calls)], calls, repeats)


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
    median = _median_us(graph.replay, calls, repeats)
    del graph
    return median


def host_us(rows, calls=2000, rounds=5):
    """Host microseconds per call of each `(name, fn)` row: the best of `rounds` loops of
    `calls`, nothing waited on inside a loop (a small problem's GPU work is shorter than the
    call, so the loop runs at the host's pace), the rows taking turns each round (the host's
    speed drifts within a run)."""
    best = [math.inf] * len(rows)
    for _, fn in rows:
        for _ in range(50):
            fn()
    torch.cuda.synchronize()
    for _ in range(rounds):
        for index, (_, fn) in enumerate(rows):
            started = time.perf_counter()
            for _ in range(calls):
                fn()
            best[index] = min(best[index], (time.perf_counter() - started) * 1e6 / calls)
            torch.cuda.synchronize()
    return best


def _median_us(batch, calls, repeats):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    samples = []
    for _ in range(repeats):
        start.record()
        batch()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) * 1e3 / calls)
    return statistics.median(samples)


def geomean(values):
    return math.exp(sum(map(math.log, values)) / len(values))


def summary(what, eager_ratios, graph_ratios):
    """The two lines under a table of eager and graph ratios against `what`."""
    return [
        "",
        f"eager: geomean {geomean(eager_ratios):.3f}x {what} over {len(eager_ratios)} problems; "
        f"worst {min(eager_ratios):.3f}",
        f"graph: geomean {geomean(graph_ratios):.3f}x; worst {min(graph_ratios):.3f}",
    ]


def publish(lines, out):
    """Prints the report and writes it to `out` (a path) if given."""
    text = "\n".join(lines) + "\n"
    print(text)
    if out:
        with open(out, "w") as file:
            file.write(text)
