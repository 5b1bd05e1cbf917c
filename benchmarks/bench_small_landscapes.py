"""Where several points per call start to pay: the planner's ``SMALL_LANDSCAPE_POINTS``.

A landscape of at most ``SMALL_LANDSCAPE_POINTS`` points runs one point per call; above it,
``plan="auto"`` batches the points when a call's working set allows it, and pays for checking
the way (on the landscape's first group, two one-point evaluations, in this process) and
building it. For two MLP shapes (the digits MLP 64-128-128-10, trained as ``bench_peers.py``
trains it, and a random 784-512-512-10), at 64 and 512 samples, small planes (3x3, 4x4, 5x5)
and lines (15 and 31 points) are computed end to end by ``compute_landscape`` with the bound
set to 0 (batched wherever the working set allows) and to 1000 (one point per call),
alternating ``--repeats`` times in this one plain process. One JSON line per case: the medians
and ``batched_over_one`` (below 1: batching is faster).

The values differ by float rounding between the two plans; only time is compared. The machine
may be shared: run it alone and read the ranges.

Run: ``python benchmarks/bench_small_landscapes.py [--repeats 15]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable

import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import bench_peers  # noqa: E402

from landscape import compute_landscape  # noqa: E402
from landscape.engine import _planner  # noqa: E402
from landscape.examples import digits_tensors  # noqa: E402


def _networks() -> dict[str, tuple[nn.Module, torch.Tensor, torch.Tensor]]:
    _, (xs, ys), _, _ = bench_peers.workload("mlp", 512)
    x, y = digits_tensors()
    torch.manual_seed(0)
    wide = nn.Sequential(nn.Flatten(), nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                         nn.Linear(512, 10)).eval()
    return {"digits_mlp": (bench_peers.trained_mlp(0, x, y), xs, ys),
            "mlp_784_512": (wide, torch.rand(512, 784), torch.randint(0, 10, (512,)))}


def _cases() -> list[tuple[str, Callable[[], object]]]:
    loss = nn.CrossEntropyLoss()
    cases: list[tuple[str, Callable[[], object]]] = []
    for name, (net, xs, ys) in _networks().items():
        for n in (64, 512):
            xy = (xs[:n], ys[:n])
            for size in (3, 4, 5):
                cases.append((f"{name} {size}x{size} @{n}", lambda net=net, xy=xy, n=n, size=size: compute_landscape(
                    net, loss, xy, size=size, num_samples=n)))
            for steps in (15, 31):
                cases.append((f"{name} line {steps} @{n}", lambda net=net, xy=xy, n=n, steps=steps: compute_landscape(
                    net, loss, xy, dims=1, x=(-1.0, 1.0, steps), num_samples=n)))
    return cases


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=15)
    args = ap.parse_args()
    cases = _cases()
    bound = _planner.SMALL_LANDSCAPE_POINTS
    times: dict[tuple[str, str], list[float]] = {}
    try:
        for _, f in cases:  # first calls: imports, allocations
            f()
        for _ in range(args.repeats):
            for mode, value in (("batched", 0), ("one_point", 1000)):
                _planner.SMALL_LANDSCAPE_POINTS = value
                for label, f in cases:
                    t0 = time.perf_counter()
                    f()
                    times.setdefault((label, mode), []).append(time.perf_counter() - t0)
    finally:
        _planner.SMALL_LANDSCAPE_POINTS = bound
    for label, _ in cases:
        b, o = (statistics.median(times[(label, m)]) for m in ("batched", "one_point"))
        print(json.dumps({"case": label, "batched_ms": round(b * 1e3, 2), "one_point_ms": round(o * 1e3, 2),
                          "batched_over_one": round(b / o, 3), "threads": torch.get_num_threads()}))


if __name__ == "__main__":
    main()
