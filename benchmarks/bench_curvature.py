"""Benchmark of the curvature module against PyHessian, on the digits MLP at 512 samples.

What it measures, in one process (one JSON line per case, then a summary):

- ``eigs``: ``landscape.curvature.hessian_eigs(k=3)`` at its defaults (float64, tol 1e-6,
  Lanczos with full reorthogonalisation) and PyHessian 0.1's
  ``hessian(model, criterion, data=(x, y), cuda=False).eigenvalues(top_n=3)`` at its
  defaults (power iteration with deflation, maxIter=100, tol=1e-3): wall time (median and
  range over ``--repeats`` alternating runs), the speed ratio, and each one's relative
  error against a converged reference, and whether the values come sorted;
- ``trace``: ``hessian_trace`` at its defaults (Rademacher probes until the 95 % interval's
  half-width is 5 % of the estimate) and PyHessian's ``trace()`` (its mean), against the
  exact trace; whether our interval contains it, and how many probes each used;
- ``density``: whether PyHessian's ``density()`` runs on this torch;
- ``pyhessian_defaults``: PyHessian's defaults over ``--seeds`` start seeds (no timing): how
  often its top-3 come unsorted, the spread of each eigenvalue's error, and how many probes
  its ``trace()`` takes before its stopping rule (relative change of the running mean
  below 1e-3) fires.

References, independent of both codes: the eigenvalues from scipy's ARPACK (``eigsh``,
``which="LA"``, tol 1e-12) on Hessian-vector products written here with plain
``torch.autograd`` double backward in float64; the trace as the sum of the Hessian's
diagonal, every entry ``e_i^T H e_i`` computed exactly (26,122 products: about three
minutes on a quiet 2-core machine, 12 on a busy one; ``--no-exact-trace`` skips it).

The model is the demo's 64-128-128-10 MLP trained as ``landscape demo`` trains it
(Momentum(0.05, 0.9), batch 64, 10 epochs, seed 0); the samples are the first 512 digits.
The machine may be shared: run it when quiet and read the ranges.

PyHessian is NOT a dependency of this project; install it for this benchmark only, without
letting pip touch torch (it declares none of its imports as requirements anyway)::

    pip install --no-deps pyhessian==0.1

Run: ``python benchmarks/bench_curvature.py [--repeats 5] [--seeds 20] [--threads N] [--no-exact-trace]
[--only-pyhessian]``.
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
from torch.func import functional_call, grad, vjp

from landscape.curvature import hessian_eigs, hessian_trace
from landscape.examples import MLP, digits_loader, digits_tensors

N = 512


def trained_mlp() -> nn.Module:
    torch.manual_seed(0)
    net = MLP()
    opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
    for _ in range(10):
        for x, y in digits_loader(64):
            opt.zero_grad()
            nn.functional.cross_entropy(net(x), y).backward()
            opt.step()
    return net.eval()


def reference_eigs(net: nn.Module, x: torch.Tensor, y: torch.Tensor, k: int = 3) -> np.ndarray:
    """ARPACK on plain double-backward products in float64 (independent of the code benchmarked)."""
    from scipy.sparse.linalg import LinearOperator, eigsh

    n64 = copy.deepcopy(net).double()
    params = list(n64.parameters())
    loss = nn.functional.cross_entropy(n64(x.double()), y)
    g = torch.autograd.grad(loss, params, create_graph=True)
    sizes = [p.numel() for p in params]

    def mv(v: np.ndarray) -> np.ndarray:
        vs = torch.split(torch.from_numpy(np.ascontiguousarray(v).reshape(-1)), sizes)
        dot = sum((a * b.view_as(a)).sum() for a, b in zip(g, vs))
        hv = torch.autograd.grad(dot, params, retain_graph=True)
        return torch.cat([t.reshape(-1) for t in hv]).numpy()

    dim = sum(sizes)
    vals = eigsh(LinearOperator((dim, dim), matvec=mv, dtype=np.float64), k=k, which="LA", tol=1e-12,
                 v0=np.ones(dim), return_eigenvectors=False)
    return np.sort(vals)[::-1]


def exact_trace(net: nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
    """sum_i e_i^T H e_i: every diagonal entry by double backward in float64, one unit vector
    at a time through the gradient's graph built once (26,122 products)."""
    n64 = copy.deepcopy(net).double()
    names = [k for k, _ in n64.named_parameters()]
    point = {k: p.detach() for k, p in n64.named_parameters()}
    xd = x.double()

    def loss(p):
        return nn.functional.cross_entropy(functional_call(n64, p, (xd,)), y)

    _, hvp = vjp(grad(loss), point)
    total = 0.0
    e = {n: torch.zeros_like(point[n]) for n in names}
    for k in names:
        flat = e[k].view(-1)
        for i in range(flat.numel()):
            flat[i] = 1.0
            total += float(hvp(e)[0][k].reshape(-1)[i])
            flat[i] = 0.0
    return total


def timed(fn):
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def summary(ts):
    return {"median_s": round(statistics.median(ts), 4), "min_s": round(min(ts), 4), "max_s": round(max(ts), 4)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--no-exact-trace", action="store_true", help="skip the exact trace (minutes)")
    ap.add_argument("--seeds", type=int, default=20, help="seeds of the pyhessian_defaults case")
    ap.add_argument("--only-pyhessian", action="store_true", help="only the pyhessian_defaults case")
    ap.add_argument("--threads", type=int, default=0,
                    help="torch threads (0: torch's default). On a shared machine 1 thread is far steadier: two "
                         "threads that wait for each other while other processes hold the cores can be 10-30x slower")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    try:
        from pyhessian import hessian as pyhessian_hessian
    except ImportError:
        pyhessian_hessian = None
        print("PyHessian not installed (pip install --no-deps pyhessian==0.1): our side only")
    net = trained_mlp()
    x, y = digits_tensors()
    x, y = x[:N], y[:N]
    lf = nn.CrossEntropyLoss()
    t_ref, ref = timed(lambda: reference_eigs(net, x, y))
    if args.only_pyhessian:
        pyhessian_defaults(pyhessian_hessian, net, lf, x, y, ref, args.seeds)
        return
    print(json.dumps({"case": "reference", "what": "ARPACK eigsh LA tol 1e-12, float64", "eigenvalues": ref.tolist(),
                      "seconds": round(t_ref, 2), "torch_threads": torch.get_num_threads()}))
    ours_t, theirs_t, ours_vals, theirs_vals = [], [], [], []
    for r in range(args.repeats):  # alternate, so that load on the machine hits both alike
        t, e = timed(lambda: hessian_eigs(net, lf, (x, y), k=3, num_samples=N, progress=False))
        ours_t.append(t)
        ours_vals.append(e.eigenvalues)
        if pyhessian_hessian is not None:
            model = copy.deepcopy(net)
            torch.manual_seed(r)  # PyHessian draws its start vectors from the global generator
            t, (vals, _) = timed(lambda: pyhessian_hessian(model, lf, data=(x, y), cuda=False).eigenvalues(top_n=3))
            theirs_t.append(t)
            theirs_vals.append(np.asarray(vals))
    ours_err = [float(np.max(np.abs(v - ref) / np.abs(ref))) for v in ours_vals]
    row = {"case": "eigs", "ours": {**summary(ours_t), "eigenvalues": ours_vals[0].tolist(),
                                    "max_rel_error": max(ours_err), "sorted": all(
                                        list(v) == sorted(v, reverse=True) for v in ours_vals),
                                    "deterministic": all(np.array_equal(v, ours_vals[0]) for v in ours_vals)}}
    if theirs_t:
        rel = [np.abs(v - ref) / np.abs(ref) for v in theirs_vals]
        srt = [np.abs(np.sort(v)[::-1] - ref) / np.abs(ref) for v in theirs_vals]
        row["pyhessian"] = {**summary(theirs_t), "eigenvalues_per_run": [v.tolist() for v in theirs_vals],
                            "rel_error_per_eigenvalue_median": np.median(rel, axis=0).tolist(),
                            "rel_error_after_sorting_median": np.median(srt, axis=0).tolist(),
                            "runs_unsorted": int(sum(list(v) != sorted(v, reverse=True) for v in theirs_vals))}
        row["speedup"] = round(statistics.median(theirs_t) / statistics.median(ours_t), 2)
    print(json.dumps(row))
    exact = None
    if not args.no_exact_trace:
        t, exact = timed(lambda: exact_trace(net, x, y))
        print(json.dumps({"case": "exact_trace", "trace": exact, "seconds": round(t, 1)}))
    ours_t, theirs_t, ours_tr, theirs_tr = [], [], [], []
    for r in range(args.repeats):
        t, tr = timed(lambda: hessian_trace(net, lf, (x, y), num_samples=N, seed=r, progress=False))
        ours_t.append(t)
        ours_tr.append(tr)
        if pyhessian_hessian is not None:
            model = copy.deepcopy(net)
            torch.manual_seed(r)
            t, vhv = timed(lambda: pyhessian_hessian(model, lf, data=(x, y), cuda=False).trace())
            theirs_t.append(t)
            theirs_tr.append(vhv)
    row = {"case": "trace", "exact": exact,
           "ours": {**summary(ours_t), "estimates": [round(tr.estimate, 4) for tr in ours_tr],
                    "half_widths": [round(tr.half_width, 4) for tr in ours_tr],
                    "probes": [tr.probes for tr in ours_tr],
                    "intervals_containing_exact": None if exact is None else
                    sum(tr.interval[0] <= exact <= tr.interval[1] for tr in ours_tr)}}
    if theirs_t:
        row["pyhessian"] = {**summary(theirs_t), "estimates": [round(float(np.mean(v)), 4) for v in theirs_tr],
                            "probes": [len(v) for v in theirs_tr]}
        if exact is not None:
            row["pyhessian"]["rel_errors"] = [round(abs(float(np.mean(v)) - exact) / abs(exact), 4) for v in theirs_tr]
        row["speed_ratio_ours_over_theirs"] = round(statistics.median(ours_t) / statistics.median(theirs_t), 2)
    print(json.dumps(row))
    if pyhessian_hessian is not None:
        try:
            pyhessian_hessian(copy.deepcopy(net), lf, data=(x, y), cuda=False).density(iter=10, n_v=1)
            status = "ran"
        except Exception as exc:  # torch.eig was removed in torch 2.0
            status = f"{type(exc).__name__}: {exc}"
        print(json.dumps({"case": "density", "pyhessian": status, "torch": torch.__version__}))
        pyhessian_defaults(pyhessian_hessian, net, lf, x, y, ref, args.seeds)


def pyhessian_defaults(pyhessian_hessian, net, lf, x, y, ref, seeds):
    """PyHessian's eigenvalues(top_n=3) and trace() at their defaults over many start seeds."""
    if pyhessian_hessian is None:
        return
    vals, probes = [], []
    for seed in range(seeds):
        torch.manual_seed(seed)
        vals.append(np.asarray(pyhessian_hessian(copy.deepcopy(net), lf, data=(x, y), cuda=False)
                               .eigenvalues(top_n=3)[0]))
        torch.manual_seed(seed)
        probes.append(len(pyhessian_hessian(copy.deepcopy(net), lf, data=(x, y), cuda=False).trace()))
    rel = np.abs(np.asarray(vals) - ref) / np.abs(ref)
    print(json.dumps({"case": "pyhessian_defaults", "seeds": seeds,
                      "runs_unsorted": int(sum(list(v) != sorted(v, reverse=True) for v in vals)),
                      "rel_error_median": np.median(rel, axis=0).tolist(), "rel_error_max": rel.max(axis=0).tolist(),
                      "trace_probes_min_median_max": [int(min(probes)), int(np.median(probes)), int(max(probes))]}))


if __name__ == "__main__":
    main()
