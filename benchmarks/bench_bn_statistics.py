"""What the batch-norm settings of a view through models give, and what the default costs.

A BatchNorm MLP (30-64-64-2, batch norm after each hidden layer) trained 20 epochs on
scikit-learn's breast-cancer data (569 samples, standardised; SGD, batch 64), then the
interpolation from its epoch-1 to its epoch-20 weights over alpha in [-0.5, 1.5] (101
points, the loss on all 569 samples) with each ``bn_statistics`` setting:

- the loss at alpha = -0.5 and the largest loss on the line, the points clamped (with the
  most channels clamped at one point) and the non-finite points;
- the time of each setting (median of ``--repeats`` calls, in this process), and
  ``recompute``'s time against ``clamped``'s: the cost of the default.

Run: ``python benchmarks/bench_bn_statistics.py [--repeats 3]`` (alone on the machine).
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import time

import numpy as np
import torch
from torch import nn

import landscape


def data() -> tuple[torch.Tensor, torch.Tensor]:
    from sklearn.datasets import load_breast_cancer

    d = load_breast_cancer()
    x = (d.data - d.data.mean(0)) / d.data.std(0)
    return torch.tensor(x, dtype=torch.float32), torch.tensor(d.target, dtype=torch.long)


def train(x: torch.Tensor, y: torch.Tensor, epochs: int = 20) -> tuple[nn.Module, dict, dict]:
    """The network and its state dicts after epoch 1 and after the last epoch."""
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(30, 64), nn.BatchNorm1d(64), nn.ReLU(), nn.Linear(64, 64), nn.BatchNorm1d(64),
                        nn.ReLU(), nn.Linear(64, 2))
    opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    g = torch.Generator().manual_seed(0)
    first = None
    for epoch in range(epochs):
        net.train()
        for idx in torch.randperm(len(x), generator=g).split(64):
            opt.zero_grad()
            nn.functional.cross_entropy(net(x[idx]), y[idx]).backward()
            opt.step()
        if epoch == 0:
            first = copy.deepcopy(net.state_dict())
    assert first is not None
    return net, first, copy.deepcopy(net.state_dict())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    x, y = data()
    net, a, b = train(x, y)
    for rule in ("recompute", "clamped", "affine", "a"):
        times, ls = [], None
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            ls = landscape.compute_landscape(net, nn.CrossEntropyLoss(), (x, y), between=(a, b),
                                             x=(-0.5, 1.5, 101), num_samples=len(x), bn_statistics=rule,
                                             metrics=["accuracy"])
            times.append(time.perf_counter() - t0)
        assert ls is not None
        finite = ls.z[np.isfinite(ls.z)]
        clamped, channels = ls.clamped_points
        print(json.dumps({"bn_statistics": rule, "loss_at_-0.5": float(ls.z[0]),
                          "max_loss": float(finite.max()) if finite.size else None,
                          "loss_at_A": ls.markers["A"][2], "loss_at_B": ls.markers["B"][2],
                          "clamped_points": clamped, "clamped_channels_max": channels,
                          "non_finite": ls.non_finite[0],
                          "accuracy_nan_where_loss_is": bool(np.isnan(ls.surfaces["accuracy"][~np.isfinite(ls.z)]).all()),
                          "points_per_call": ls.metadata.get("points_per_call"),
                          "seconds_median": statistics.median(times), "seconds_range": [min(times), max(times)]}))


if __name__ == "__main__":
    main()
