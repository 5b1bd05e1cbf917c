"""Side by side with ``loss-landscapes`` 3.0.6 on the same trained digits MLP and data.

``loss-landscapes`` is a benchmark-only peer, never a project dependency:

    pip install loss-landscapes==3.0.6
    python benchmarks/bench_peers.py [--repeats 5] [--only views]

One process; every case alternates ours and theirs ``--repeats`` times and prints one JSON
line with the medians and ranges (min, max) of points per second, the ratio of the
medians, and how the values compare. The model is the demo's 64-128-128-10 MLP
(``landscape.examples.MLP``) trained three epochs on scikit-learn's digits; the loss is
the mean cross-entropy over the first 512 digits (theirs: ``Loss(CrossEntropyLoss(),
x[:512], y[:512])`` on the model in eval mode, ours: ``num_samples=512``). Their functions
move the model they are given in place, so each of their calls gets a copy made before its
timer starts.

Sections:

* 2D ``random_plane`` (the engine on a 40x40 grid against theirs): the lead's section,
  :func:`plane_cases` (a placeholder until it lands); our 2D 40x40 random landscape's
  points/s is also measured in :func:`view_cases` as the reference the views are held to.
* views (:func:`view_cases`):

  - ``random_line``: our 51-point random line (``dims=1``) against their
    ``random_line(steps=51)``. Their directions are uniform on [0, 1) (``rand_u_like``),
    not Gaussian, so the lines differ by construction; the values are compared on their
    own points instead: their direction, rebuilt with their code from the same seed, given
    to us (``directions=d, normalization="none"``, ``x=(1, 51, 51)``: their point k is
    ``start + k*d``).
  - ``linear_interpolation``: our 101-point interpolation ``x=(0, 1, 101)`` against their
    ``steps=100`` (their points are alpha = 1/100 .. 1: they never evaluate alpha = 0);
    values compared at their 100 points.
  - ``planar_interpolation``: our 40x40 plane through three models (orthonormal axes) against
    their ``steps=40``. Their axes are ``B - A`` and ``C - A`` as they are (not
    orthogonalised) and their rows zig-zag (even rows at ``j = 1..40``, odd rows at
    ``j = 0..39``); the values are compared on their points through our given directions
    ``(B - A, C - A)`` with ``x=(0, 39/40, 40)``, ``y=(0, 1, 41)``, row ``i`` against our
    ``y`` index ``j + 1`` (even) or ``j`` (odd).

The machine is shared: run it alone and read the ranges.
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch import nn

from landscape import compute_landscape
from landscape.examples import MLP, digits_tensors

SAMPLES = 512


# -- shared set-up ----------------------------------------------------------------------
def data() -> tuple[torch.Tensor, torch.Tensor]:
    x, y = digits_tensors()
    return x, y


def trained_mlp(seed: int, x: torch.Tensor, y: torch.Tensor, epochs: int = 3) -> nn.Module:
    """The demo's MLP, trained ``epochs`` epochs of SGD with momentum from seed ``seed``."""
    torch.manual_seed(seed)
    net = MLP()
    opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
    g = torch.Generator().manual_seed(seed)
    for _ in range(epochs):
        order = torch.randperm(len(x), generator=g)
        for i in range(0, len(x), 64):
            idx = order[i:i + 64]
            opt.zero_grad()
            nn.functional.cross_entropy(net(x[idx]), y[idx]).backward()
            opt.step()
    return net.eval()


def their_metric(x: torch.Tensor, y: torch.Tensor) -> Any:
    from loss_landscapes.metrics import Loss

    return Loss(nn.CrossEntropyLoss(), x[:SAMPLES], y[:SAMPLES])


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def summary(points: int, ours: list[float], theirs: list[float]) -> dict[str, Any]:
    """Medians and ranges of points/s, and the ratio of the medians."""
    po, pt = [points / t for t in ours], [points / t for t in theirs]
    return {"ours_points_per_s": round(statistics.median(po), 1),
            "ours_range": [round(min(po), 1), round(max(po), 1)],
            "ours_seconds_median": round(statistics.median(ours), 4),
            "theirs_points_per_s": round(statistics.median(pt), 1),
            "theirs_range": [round(min(pt), 1), round(max(pt), 1)],
            "ours_over_theirs": round(statistics.median(po) / statistics.median(pt), 2)}


def compare(ours: np.ndarray, theirs: np.ndarray) -> dict[str, Any]:
    ours, theirs = np.asarray(ours, dtype=np.float64), np.asarray(theirs, dtype=np.float64)
    rel = np.abs(ours - theirs) / np.maximum(np.abs(theirs), 1e-12)
    return {"values_compared": int(theirs.size), "max_rel_diff": float(rel.max()),
            "max_abs_diff": float(np.abs(ours - theirs).max())}


# -- 2D: the lead's section ---------------------------------------------------------------
def plane_cases(args: argparse.Namespace) -> list[dict[str, Any]]:
    """2D ``random_plane`` against ours on a 40x40 grid: written by the lead (issue 16)."""
    return []


# -- views ------------------------------------------------------------------------------------
def _their_random_line_direction(model: nn.Module, seed: int, distance: float, steps: int) -> dict[str, torch.Tensor]:
    """The direction ``random_line`` steps along, rebuilt with their own code from the same seed."""
    from loss_landscapes.model_interface.model_parameters import ModelParameters, rand_u_like

    start = ModelParameters([p.detach().clone() for p in model.parameters()])
    torch.manual_seed(seed)
    direction = rand_u_like(start)
    direction.filter_normalize_(start)
    direction.mul_(((start.model_norm() / distance) / steps) / direction.model_norm())
    return {name: t.clone() for (name, _), t in zip(model.named_parameters(), direction.parameters)}


def view_cases(args: argparse.Namespace) -> list[dict[str, Any]]:
    import loss_landscapes as ll

    x, y = data()
    a, b, c = (trained_mlp(s, x, y) for s in (0, 1, 2))
    torch.manual_seed(10)
    init = MLP().eval()  # an untrained network: the interpolation runs from it to A (Goodfellow et al.)
    metric = their_metric(x, y)
    loss = nn.CrossEntropyLoss()
    xy = (x, y)
    out: list[dict[str, Any]] = []
    # warm-up of both (imports, first-call allocations)
    compute_landscape(a, loss, xy, dims=1, x=(-1.0, 1.0, 5), num_samples=SAMPLES)
    ll.random_line(copy.deepcopy(a), metric, steps=3)

    # reference: our 2D engine, 40x40 random
    two_d = [timed(lambda: compute_landscape(a, loss, xy, size=40, num_samples=SAMPLES))[0]
             for _ in range(args.repeats)]
    ref_pps = 1600 / statistics.median(two_d)
    out.append({"case": "ours_2d_reference", "points": 1600, "points_per_s": round(ref_pps, 1),
                "range": [round(1600 / max(two_d), 1), round(1600 / min(two_d), 1)]})

    # random line: 51 points
    ours_t, theirs_t = [], []
    for _ in range(args.repeats):
        ours_t.append(timed(lambda: compute_landscape(a, loss, xy, dims=1, x=(-1.0, 1.0, 51),
                                                      normalization="filter", num_samples=SAMPLES))[0])
        m = copy.deepcopy(a)
        torch.manual_seed(0)
        theirs_t.append(timed(lambda: ll.random_line(m, metric, distance=10.0, steps=51,
                                                     normalization="filter"))[0])
    m = copy.deepcopy(a)
    torch.manual_seed(5)
    theirs_vals = ll.random_line(m, metric, distance=10.0, steps=51, normalization="filter")
    d = _their_random_line_direction(a, 5, 10.0, 51)
    flat = torch.cat([t.reshape(-1) for t in d.values()])
    ours_on_theirs = compute_landscape(a, loss, xy, directions=d, x=(1.0, 51.0, 51), normalization="none",
                                       num_samples=SAMPLES)
    res = {"case": "random_line", "points": 51, **summary(51, ours_t, theirs_t),
           "ours_over_2d_engine": round(51 / statistics.median(ours_t) / ref_pps, 2),
           "their_direction_all_positive": bool((flat > 0).all()),
           "their_direction_cosine_with_ones": round(float(flat.sum() / (flat.norm() * flat.numel() ** 0.5)), 3),
           **compare(ours_on_theirs.z, theirs_vals)}
    out.append(res)

    # linear interpolation: 101 points (theirs: 100, alpha = 1/100 .. 1)
    ours_t, theirs_t = [], []
    for _ in range(args.repeats):
        ours_t.append(timed(lambda: compute_landscape(a, loss, xy, between=(init, a), x=(0.0, 1.0, 101),
                                                      num_samples=SAMPLES))[0])
        m = copy.deepcopy(init)
        theirs_t.append(timed(lambda: ll.linear_interpolation(m, a, metric, steps=100))[0])
    ours_ls = compute_landscape(a, loss, xy, between=(init, a), x=(0.0, 1.0, 101), num_samples=SAMPLES)
    theirs_vals = ll.linear_interpolation(copy.deepcopy(init), a, metric, steps=100)
    res = {"case": "linear_interpolation", "points": 101, "theirs_points": 100,
           **summary(101, ours_t, [t * 101 / 100 for t in theirs_t]),
           "ours_over_2d_engine": round(101 / statistics.median(ours_t) / ref_pps, 2),
           **compare(ours_ls.z[1:], theirs_vals),
           "ours_at_alpha_0_equals_A": bool(ours_ls.z[0] == ours_ls.markers["A"][2])}
    out.append(res)

    # plane through three models: 40 x 40
    ours_t, theirs_t = [], []
    for _ in range(args.repeats):
        ours_t.append(timed(lambda: compute_landscape(a, loss, xy, between=(a, b, c), size=40,
                                                      num_samples=SAMPLES))[0])
        m = copy.deepcopy(a)
        theirs_t.append(timed(lambda: ll.planar_interpolation(m, b, c, metric, steps=40))[0])
    theirs_vals = np.asarray(ll.planar_interpolation(copy.deepcopy(a), b, c, metric, steps=40))
    sa, sb, sc = (dict(m.state_dict()) for m in (a, b, c))
    ba = {k: sb[k] - sa[k] for k in sa}
    ca = {k: sc[k] - sa[k] for k in sa}
    given = compute_landscape(a, loss, xy, directions=(ba, ca), checkpoints=[sa], x=(0.0, 39 / 40, 40),
                              y=(0.0, 1.0, 41), normalization="none", num_samples=SAMPLES)
    unzig = np.array([[given.z[j + (1 if i % 2 == 0 else 0), i] for j in range(40)] for i in range(40)])
    straight = np.array([[given.z[j, i] for j in range(40)] for i in range(40)])  # what their docstring says
    res = {"case": "planar_interpolation", "points": 1600, **summary(1600, ours_t, theirs_t),
           "ours_over_2d_engine": round(1600 / statistics.median(ours_t) / ref_pps, 2),
           **compare(unzig, theirs_vals),
           "zigzag_max_rel_diff_if_read_as_documented": float(
               np.max(np.abs(straight - theirs_vals) / np.abs(theirs_vals)))}
    out.append(res)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--only", choices=("plane", "views"), help="one section")
    args = ap.parse_args()
    print(json.dumps({"torch_threads": torch.get_num_threads(), "loss_landscapes": _their_version()}), flush=True)
    if args.only in (None, "plane"):
        for line in plane_cases(args):
            print(json.dumps(line), flush=True)
    if args.only in (None, "views"):
        for line in view_cases(args):
            print(json.dumps(line), flush=True)


def _their_version() -> str:
    from importlib.metadata import version

    return version("loss-landscapes")


if __name__ == "__main__":
    main()
