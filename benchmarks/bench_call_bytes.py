"""How many points per call the batched ("folded") way should take: the planner's ``CALL_BYTES``.

For eight MLP shapes (input 32-784, hidden 64-512, two hidden layers, 10 classes; random weights
and inputs, eval mode) at 64 and 512 samples, a ``size x size`` random plane is computed with
``plan={"points_per_call": p, "batching": "folded"}`` for p in 2, 4, 8, 16, 32, alternating
``--repeats`` times in this one plain process (medians), and with ``plan="auto"`` under each
candidate ``CALL_BYTES``, which gives the points per call the heuristic would choose. One JSON line
per shape and sample count: the medians by p, auto's p by candidate, and how much slower auto's p
is than the best p (``slow_vs_best``); then one summary line per candidate (the worst and the mean
of ``slow_vs_best``, and how many are above 1.1).

The values do not depend on p for the folded way (its products are the same per point), so only
time is compared. The machine may be shared: run it alone and read the ranges.

Run: ``python benchmarks/bench_call_bytes.py [--size 20] [--repeats 9] [--candidates 16,32,64]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch
from torch import nn

from landscape import compute_landscape
from landscape.engine import _planner

#: (inputs, hidden) of the MLPs timed.
SHAPES = ((32, 64), (64, 128), (64, 512), (128, 256), (256, 256), (784, 128), (784, 256), (784, 512))
POINTS_PER_CALL = (2, 4, 8, 16, 32)


def mlp(inputs: int, hidden: int, classes: int = 10) -> nn.Module:
    return nn.Sequential(nn.Linear(inputs, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                         nn.Linear(hidden, classes)).eval()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--candidates", default="16,32,64", help="CALL_BYTES candidates in MiB")
    args = parser.parse_args()
    candidates = [int(c) for c in args.candidates.split(",")]
    original = _planner.CALL_BYTES
    loss = nn.CrossEntropyLoss()
    torch.manual_seed(0)
    slow: dict[int, list[float]] = {c: [] for c in candidates}
    for inputs, hidden in SHAPES:
        for n in (64, 512):
            net = mlp(inputs, hidden)
            gen = torch.Generator().manual_seed(1)
            data = (torch.randn(n, inputs, generator=gen), torch.randint(0, 10, (n,), generator=gen))

            def run(plan, net=net, data=data, n=n):
                return compute_landscape(net, loss, data, size=args.size, num_samples=n, plan=plan)

            auto = {}
            try:
                for c in candidates:
                    _planner.CALL_BYTES = c << 20
                    auto[c] = int(run("auto").metadata["points_per_call"])
            finally:
                _planner.CALL_BYTES = original
            plans = {p: {"points_per_call": p, "batching": "folded"} for p in POINTS_PER_CALL}
            for plan in plans.values():  # warm-up
                run(plan)
            times: dict[int, list[float]] = {p: [] for p in plans}
            for _ in range(args.repeats):
                for p, plan in plans.items():
                    t0 = time.perf_counter()
                    run(plan)
                    times[p].append(time.perf_counter() - t0)
            median = {p: statistics.median(v) for p, v in times.items()}
            best = min(median.values())
            row = {c: round(median[p] / best, 3) for c, p in auto.items() if p in median}
            for c, r in row.items():
                slow[c].append(r)
            print(json.dumps({"shape": [inputs, hidden, hidden, 10], "samples": n, "grid": args.size,
                              "ms": {p: round(m * 1e3, 1) for p, m in median.items()},
                              "range_ms": {p: [round(min(v) * 1e3, 1), round(max(v) * 1e3, 1)] for p, v in times.items()},
                              "auto_points_per_call": auto, "slow_vs_best": row}), flush=True)
    for c in candidates:
        s = slow[c]
        print(json.dumps({"call_bytes_MiB": c, "worst_slow_vs_best": max(s), "mean": round(statistics.mean(s), 3),
                          "above_1.1": sum(x > 1.1 for x in s), "configurations": len(s)}))


if __name__ == "__main__":
    main()
