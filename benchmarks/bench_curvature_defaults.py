"""How the curvature functions' defaults were chosen: the trace's coverage, and the exact path's cost.

For three networks, trained as below, in eval mode, at their trained weights:

- ``diabetes``: scikit-learn's diabetes regression (442 samples, 10 standardized features, the
  target standardized), a 10-64-16-1 MLP with LayerNorm and Dropout(0.1) (1,889 parameters),
  Adam(1e-3), batches of 32, 10 epochs, seed 0; MSELoss on all 442 samples;
- ``digits-mlp``: the digits MLP of ``landscape.examples`` (64-128-128-10, 26,122 parameters),
  SGD(0.05, momentum 0.9), batches of 64, 10 epochs, seed 0; cross-entropy on the first 512 digits;
- ``digits-cnn``: ``landscape.examples.SmallCNN`` (two 3x3 convolutions with batch norm, 10,026
  parameters), trained the same way 3 epochs; cross-entropy on the first 512 digits (1x8x8).

What it measures, in one process, per network:

- the exact trace: the sum of ``e_i^T H e_i`` over every moved value (the reference), from
  float64 products up to ``--dense-max`` moved values, else from float32 ones summed in float64
  (within about 1e-6 of the trace: ten thousand times narrower than the intervals measured);
- ``hessian_trace``'s two estimators at its defaults (``rel_tol=0.05``, ``min_probes=20``,
  ``max_probes=1000``, ``confidence=0.95``, float32 products), Hutchinson's and Hutch++, for
  seeds ``0 .. --seeds - 1``: how often the stated 95 % interval holds the exact trace (the
  coverage), the products used (mean), the median error relative to the trace, and the
  seconds (mean); the same estimators ``hessian_trace`` runs, on one operator per network
  (``landscape.curvature.make_operator``), so that the set-up is not timed 60 times;
- the exact path of :mod:`landscape.curvature._dense` against the iterative defaults, where
  the matrix fits (``--dense-max`` moved values): seconds of the whole matrix (``P`` float32
  products) and of its ``eigvalsh``, against ``hessian_eigs``' Lanczos, Hutch++ and SLQ (10 runs x
  80 steps) at their defaults, on the same operator: the ratios are what the rule in
  ``EXACT_MAX`` rests on.

A table in Markdown goes to stdout at the end (the one in docs/curvature.md). Times on a
shared machine are slowed alike within one process: read the ratios. ``--results`` writes
``benchmarks/results/curvature_defaults.json`` (the coverage) and ``curvature_exact.json`` (the
exact path), ``--results-dir`` elsewhere.

Run (about half an hour on a quiet 2-core machine at the defaults; ``--nets`` one at a time to split it)::

    python benchmarks/bench_curvature_defaults.py [--seeds 30] [--nets diabetes,digits-mlp,digits-cnn]
        [--threads 2] [--dense-max 4096] [--results]
    python benchmarks/bench_curvature_defaults.py --seeds 2 --nets diabetes \\
        --results --results-dir /tmp/smoke                                   # a smoke run
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch import nn

from landscape.curvature import make_operator
from landscape.curvature._dense import dense_matrix
from landscape.curvature._density import slq_density
from landscape.curvature._lanczos import lanczos
from landscape.curvature._trace import hutch_plus_plus, hutchinson
from landscape.engine import collect
from landscape.examples import MLP, SmallCNN, digits_tensors, train_epoch
from landscape.geometry import moved_names
from landscape.tasks import Supervised

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _results import options, write  # noqa: E402

DEFAULTS = dict(rel_tol=0.05, min_probes=20, max_probes=1000, confidence=0.95)


def diabetes() -> tuple[nn.Module, nn.Module, tuple[torch.Tensor, torch.Tensor]]:
    from sklearn.datasets import load_diabetes

    xs, ys = load_diabetes(return_X_y=True)
    x = torch.tensor((xs - xs.mean(0)) / xs.std(0), dtype=torch.float32)
    y = torch.tensor((ys - ys.mean()) / ys.std(), dtype=torch.float32).reshape(-1, 1)
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(10, 64), nn.LayerNorm(64), nn.ReLU(), nn.Dropout(0.1), nn.Linear(64, 16),
                        nn.ReLU(), nn.Linear(16, 1))
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    gen = torch.Generator().manual_seed(0)
    for _ in range(10):
        order = torch.randperm(len(x), generator=gen)
        for i in range(0, len(x), 32):
            idx = order[i:i + 32]
            opt.zero_grad()
            nn.functional.mse_loss(net(x[idx]), y[idx]).backward()
            opt.step()
    return net.eval(), nn.MSELoss(), (x, y)


def digits(kind: str) -> tuple[nn.Module, nn.Module, tuple[torch.Tensor, torch.Tensor]]:
    image = kind == "digits-cnn"
    x, y = digits_tensors(image)
    torch.manual_seed(0)
    net: nn.Module = SmallCNN() if image else MLP()
    opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
    gen = torch.Generator().manual_seed(0)
    for _ in range(3 if image else 10):
        net.train()
        train_epoch(net, opt, x, y, gen)
    return net.eval(), nn.CrossEntropyLoss(), (x[:512], y[:512])


NETS: dict[str, Callable[[], tuple[nn.Module, nn.Module, tuple[torch.Tensor, torch.Tensor]]]] = {
    "diabetes": diabetes, "digits-mlp": lambda: digits("digits-mlp"), "digits-cnn": lambda: digits("digits-cnn")}


def operator(net: nn.Module, loss_fn: nn.Module, data: Any, dtype: torch.dtype) -> Any:
    task = Supervised(loss_fn)
    return make_operator(net, task, collect(data, None, task, caller="bench"), moved_names(net, None)[0],
                         dtype=dtype)


def exact_trace(op: Any, chunk: int = 64) -> float:
    """The sum of ``e_i^T H e_i``: the diagonal of the matrix, ``chunk`` columns at a time."""
    total = 0.0
    for a in range(0, op.dim, chunk):
        b = min(op.dim, a + chunk)
        eye = torch.zeros((b - a, op.dim), dtype=op.dtype)
        eye[torch.arange(b - a), torch.arange(a, b)] = 1
        total += float(op.matmat(eye)[torch.arange(b - a), torch.arange(a, b)].double().sum())
    return total


def coverage(op: Any, exact: float, method: str, seeds: int) -> dict[str, Any]:
    hits, products, errors, seconds = 0, [], [], []
    for seed in range(seeds):
        start, count = time.perf_counter(), op.products
        common = dict(DEFAULTS, seed=seed, dtype=op.dtype, device=op.device, progress=False)
        tr = hutch_plus_plus(op.matvec, op.dim, sketch=DEFAULTS["min_probes"] // 3, **common) \
            if method == "hutch++" else hutchinson(op.matvec, op.dim, **common)
        seconds.append(time.perf_counter() - start)
        products.append(op.products - count)
        hits += tr.interval[0] <= exact <= tr.interval[1]
        errors.append(abs(tr.estimate - exact) / abs(exact))
    return {"coverage": hits / seeds, "hits": hits, "seeds": seeds, "products": float(np.mean(products)),
            "median_rel_error": float(np.median(errors)), "seconds": float(np.mean(seconds))}


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def dense_case(op: Any) -> dict[str, Any]:
    """The exact path against the iterative defaults, on one operator (seconds and products)."""
    out: dict[str, Any] = {}
    count = op.products
    t_matrix, mat = timed(lambda: dense_matrix(op))
    t_eigh, _ = timed(lambda: np.linalg.eigvalsh(mat))
    out["exact"] = {"seconds_matrix": t_matrix, "seconds_eigh": t_eigh, "products": op.products - count}
    count = op.products
    t, _ = timed(lambda: lanczos(op.matvec, op.dim, k=3, which="largest", tol=1e-4, max_iter=300, seed=0,
                                 dtype=op.dtype, device=op.device, progress=False))
    out["lanczos"] = {"seconds": t, "products": op.products - count}
    count = op.products
    t, _ = timed(lambda: hutch_plus_plus(op.matvec, op.dim, sketch=6, seed=0, dtype=op.dtype, device=op.device,
                                         progress=False, **DEFAULTS))
    out["hutch++"] = {"seconds": t, "products": op.products - count}
    count = op.products
    t, _ = timed(lambda: slq_density(op.matvec, op.dim, runs=10, steps=80, seed=0, dtype=op.dtype,
                                     device=op.device))
    out["slq"] = {"seconds": t, "products": op.products - count}
    return out


#: the networks' names on the Benchmarks page
NAMES = {"diabetes": "diabetes MLP", "digits-mlp": "digits MLP", "digits-cnn": "digits SmallCNN"}


def write_results(args: argparse.Namespace, rows: list[dict[str, Any]]) -> None:
    """``curvature_defaults.json`` (the coverage) and, where a matrix was timed, ``curvature_exact.json``."""
    columns = ["products (mean)", "median error", "seconds (mean)"]
    table = []
    for row in rows:
        for method in ("hutchinson", "hutch++"):
            r = row[method]
            table.append({"what": f"{NAMES[row['net']]} ({row['parameters']:,} parameters, exact trace "
                                  f"{row['exact_trace']:.5g}), {method}",
                          "value": f"{r['hits']}/{r['seeds']} ({100 * r['coverage']:.0f} %)", "unit": "",
                          "cells": {columns[0]: f"{r['products']:,.0f}", columns[1]: f"{100 * r['median_rel_error']:.2f} %",
                                    columns[2]: f"{r['seconds']:.3g}"}})
    write("curvature_defaults", order=71, title="Curvature defaults",
          peer="the exact trace (the sum of `eᵢᵀHeᵢ` over every parameter)",
          ratio=f"share of the seeds 0 to {args.seeds - 1} whose stated 95 % interval held it", rows=table,
          columns=columns, records=rows, folder=args.results_dir,
          notes="`hessian_trace`'s two estimators at its defaults (`rel_tol=0.05`, `min_probes=20`, "
                "`max_probes=1000`, float32 products) on one operator per network, at its trained weights (the "
                "script's docstring says how each was trained). The exact trace from float64 products up to "
                f"{args.dense_max:,} parameters, from float32 ones summed in float64 above. Products, coverage and "
                "errors do not depend on the machine; the seconds compare within a network.")
    dense = [row for row in rows if "dense" in row]
    if not dense:
        return
    table = []
    for row in dense:
        d, name = row["dense"], NAMES[row["net"]]
        for what, key in (("the whole matrix (the exact path)", "exact"), ("Lanczos, top 3 (`hessian_eigs`)", "lanczos"),
                          ("Hutch++ (`hessian_trace`)", "hutch++"),
                          ("SLQ, 10 runs × 80 steps (`spectral_density`)", "slq")):
            seconds = f"{d[key]['seconds_matrix']:.3g}, and {d[key]['seconds_eigh']:.3g} for `eigvalsh`" \
                if key == "exact" else f"{d[key]['seconds']:.3g}"
            table.append({"what": f"{name} ({row['parameters']:,} parameters): {what}",
                          "value": f"{d[key]['products']:,}", "unit": "products", "cells": {"seconds": seconds}})
    write("curvature_exact", order=72, title="Curvature: the exact path", peer="the iterative defaults",
          ratio="Hessian-vector products each takes", rows=table, columns=["seconds"], records=dense,
          folder=args.results_dir,
          notes="The whole matrix (`P` products, then `eigvalsh` for the eigenvalues) against each iterative "
                "method at its defaults, one after the other on the same operator, where the matrix has at most "
                f"{args.dense_max:,} rows. The exact path is taken when its products are no more than the "
                "method's fewest; the seconds compare within a network.")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=30)
    parser.add_argument("--nets", default=",".join(NETS))
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--dense-max", type=int, default=4096, help="the largest P whose matrix is timed")
    options(parser, "curvature_defaults.json and curvature_exact.json")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    rows = []
    for name in args.nets.split(","):
        net, loss_fn, data = NETS[name]()
        op = operator(net, loss_fn, data, torch.float32)
        ref = torch.float64 if op.dim <= args.dense_max else torch.float32
        t_exact, exact = timed(lambda: exact_trace(operator(net, loss_fn, data, ref)))
        row: dict[str, Any] = {"net": name, "parameters": op.dim, "samples": len(data[0]), "exact_trace": exact,
                               "exact_trace_dtype": str(ref), "seconds_exact_trace": t_exact}
        for method in ("hutchinson", "hutch++"):
            row[method] = coverage(op, exact, method, args.seeds)
        if op.dim <= args.dense_max:
            row["dense"] = dense_case(op)
        print(json.dumps(row), flush=True)
        rows.append(row)
    print()
    print("| network | parameters | exact trace | method | coverage of the 95 % interval | products (mean) "
          "| median error | seconds (mean) |")
    print("|---|---|---|---|---|---|---|---|")
    for row in rows:
        for method in ("hutchinson", "hutch++"):
            r = row[method]
            print(f"| {row['net']} | {row['parameters']:,} | {row['exact_trace']:.5g} | {method} | "
                  f"{r['hits']}/{r['seeds']} ({100 * r['coverage']:.0f} %) | {r['products']:.0f} | "
                  f"{100 * r['median_rel_error']:.2f} % | {r['seconds']:.3g} |")
    dense = [row for row in rows if "dense" in row]
    if dense:
        print()
        print("| network | parameters | exact: matrix + eigvalsh (s) | Lanczos top 3 (s) | Hutch++ (s) | SLQ 10x80 (s) |")
        print("|---|---|---|---|---|---|")
        for row in dense:
            d = row["dense"]
            print(f"| {row['net']} | {row['parameters']:,} | {d['exact']['seconds_matrix']:.3g} + "
                  f"{d['exact']['seconds_eigh']:.3g} | {d['lanczos']['seconds']:.3g} ({d['lanczos']['products']}) | "
                  f"{d['hutch++']['seconds']:.3g} ({d['hutch++']['products']}) | {d['slq']['seconds']:.3g} "
                  f"({d['slq']['products']}) |")
    if any(math.isnan(r[m]["coverage"]) for r in rows for m in ("hutchinson", "hutch++")):
        raise SystemExit("a coverage is NaN")
    if args.results:
        write_results(args, rows)


if __name__ == "__main__":
    main()
