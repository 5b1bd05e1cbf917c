"""Side by side with the field's tools: loss-landscapes 3.0.6 and Li et al.'s per-point loop.

In one process, alternating, for each model and sample count (the same trained weights and
the same samples for all three):

* ``loss_landscapes.random_plane(model, Loss(loss_fn, x, y), steps=G, normalization="filter")``
  (the pip package; a benchmark-only dependency: ``pip install loss-landscapes==3.0.6``);
* a faithful port of Li et al.'s loop (github.com/tomgoldstein/loss-landscape,
  ``net_plotter.set_weights`` + ``evaluation.eval_loss`` over a DataLoader of batch 128, as
  their ``plot_surface.py`` does per point);
* ``landscape.compute_landscape(..., size=G, normalization="filter")``, end to end;
* the machine's limit: plain batched inference of the same model over the same samples at its
  fastest batch size (``bench_models.best_batch``: one forward pass and loss over the samples
  per "point", the model as the user built it), timed in each repeat beside the others, and
  ``ours_over_limit``.

Values are compared too: every point loss-landscapes evaluated is evaluated again by our
engine at the same parameters. Their grid is built by moving in place along the second
direction up and down alternate columns ("zig-zag"): even columns hold positions 1..G and
odd ones 0..G-1 along it, so the rows are reconstructed, not assumed. Their directions
are uniform (``rand_u_like``), filter-normalised, and rescaled by the model's norm; ours
differ (normal, per-filter ``||θ||``), so speed is compared on each tool's own grid and
values on theirs. Li et al.'s values are checked the same way on their directions.

    python benchmarks/bench_peers.py --repeats 3
    python benchmarks/bench_peers.py --models mlp --samples 512,64

Views (``--section views``; issue 18), on the digits MLP of the 2D section (``workload("mlp",
512)``) trained three epochs, and two more trained from seeds 1 and 2 (an untrained one from
seed 10 starts the interpolation, Goodfellow et al.), each alternating ours and theirs
``--repeats`` times, medians and ranges of points/s, our 2D engine's 40x40 random grid
measured alongside as the reference the views are held to:

* ``random_line``: our 51-point random line (``dims=1``) against their
  ``random_line(steps=51)``. Their directions are uniform on [0, 1) (``rand_u_like``), so
  the lines differ by construction; values are compared on their own points: their
  direction, rebuilt with their code from the same seed, given to us
  (``directions=d, normalization="none"``, ``x=(1, 51, 51)``: their point k is ``start + k*d``).
* ``linear_interpolation``: our 101-point interpolation ``between=(init, A), x=(0, 1, 101)``
  against their ``steps=100`` (their points are alpha = 1/100 .. 1: they never evaluate
  alpha = 0); values compared at their 100 points.
* ``planar_interpolation``: our 40x40 plane through three models (orthonormal axes) against
  their ``steps=40``. Their axes are ``B - A`` and ``C - A`` as they are (not orthogonalised)
  and their rows zig-zag; values are compared on their points through our given directions
  ``(B - A, C - A)``, ``x=(0, 39/40, 40)``, ``y=(0, 1, 41)``, their row ``i`` against our
  ``y`` index ``j + 1`` (even ``i``) or ``j`` (odd).

    python benchmarks/bench_peers.py --section views --repeats 7

``--results`` writes ``benchmarks/results/loss_landscapes.json`` and ``li_et_al.json`` (the
Benchmarks page's tables: ``python benchmarks/make_page.py``); the page's command::

    python benchmarks/bench_peers.py --models mlp --samples 512,64 --steps 40 --repeats 3 --results
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _models import workload  # noqa: E402
from bench_models import best_batch  # noqa: E402

from landscape import compute_landscape  # noqa: E402
from landscape.engine import Engine, EngineSpec, Samples  # noqa: E402
from landscape.examples import MLP, digits_tensors, train_epoch  # noqa: E402
from landscape.tasks import Supervised  # noqa: E402


# -- Li et al.'s per-point loop (a port of net_plotter.py and evaluation.py) -----------------
def li_directions(net: nn.Module, seed: int) -> list[torch.Tensor]:
    """``net_plotter.create_random_direction(net, 'weights', ignore='biasbn', norm='filter')``."""
    g = torch.Generator().manual_seed(seed)
    weights = [p.data for p in net.parameters()]
    direction = [torch.randn(w.size(), generator=g) for w in weights]
    for d, w in zip(direction, weights):  # normalize_directions_for_weights(..., 'filter', 'biasbn')
        if d.dim() <= 1:
            d.fill_(0)  # ignore='biasbn'
        else:
            for df, wf in zip(d, w):
                df.mul_(wf.norm() / (df.norm() + 1e-10))
    return direction


def li_set_weights(net: nn.Module, weights: list[torch.Tensor], directions: list[list[torch.Tensor]],
                   step: tuple[float, float]) -> None:
    """``net_plotter.set_weights`` for two directions."""
    dx, dy = directions
    changes = [d0 * step[0] + d1 * step[1] for d0, d1 in zip(dx, dy)]
    for p, w, d in zip(net.parameters(), weights, changes):
        p.data = w + d.type(type(w))


def li_eval_loss(net: nn.Module, criterion: nn.Module, loader: DataLoader) -> float:
    """``evaluation.eval_loss`` (loss part; the accuracy count costs the same argmax)."""
    correct, total_loss, total = 0, 0.0, 0
    net.eval()
    with torch.no_grad():
        for inputs, targets in loader:
            batch_size = inputs.size(0)
            total += batch_size
            outputs = net(inputs)
            loss = criterion(outputs, targets)
            total_loss += loss.item() * batch_size
            _, predicted = torch.max(outputs.data, 1)
            correct += predicted.eq(targets).sum().item()
    return total_loss / total


def li_plane(net: nn.Module, criterion: nn.Module, loader: DataLoader, coords: np.ndarray, seed: int = 0,
             points: int | None = None) -> tuple[np.ndarray, float, list]:
    """Li et al.'s surface at ``coords`` (x, y); returns values, seconds, directions."""
    net = copy.deepcopy(net)
    weights = [p.data.clone() for p in net.parameters()]
    directions = [li_directions(net, seed), li_directions(net, seed + 1)]
    todo = coords if points is None else coords[:points]
    out = np.empty(len(todo))
    t0 = time.perf_counter()
    for k, (a, b) in enumerate(todo):
        li_set_weights(net, weights, directions, (float(a), float(b)))
        out[k] = li_eval_loss(net, criterion, loader)
    return out, time.perf_counter() - t0, directions


# -- loss-landscapes -----------------------------------------------------------------------
def ll_plane(net: nn.Module, criterion: nn.Module, x: torch.Tensor, y: torch.Tensor, steps: int,
             seed: int) -> tuple[np.ndarray, float, Any]:
    import loss_landscapes
    from loss_landscapes.metrics import Loss

    torch.manual_seed(seed)  # rand_u_like draws from torch's global generator
    model = copy.deepcopy(net).eval()
    captured: dict[str, Any] = {}
    original = loss_landscapes.main.orthogonal_to

    def capture(vector: Any) -> Any:  # record their first direction and the start point they move
        captured["one"] = vector
        return original(vector)

    loss_landscapes.main.orthogonal_to = capture
    try:
        t0 = time.perf_counter()
        with torch.no_grad():
            values = loss_landscapes.random_plane(model, Loss(criterion, x, y), distance=1, steps=steps,
                                                  normalization="filter", deepcopy_model=False)
        dt = time.perf_counter() - t0
    finally:
        loss_landscapes.main.orthogonal_to = original
    return np.asarray(values), dt, captured


def ll_points(steps: int) -> np.ndarray:
    """Where loss-landscapes evaluated value (i, j): (i, position along the second direction)."""
    pos = np.empty((steps, steps, 2))
    for i in range(steps):
        for j in range(steps):
            pos[i, j] = (i, j + 1 if i % 2 == 0 else j)  # even columns 1..steps, odd 0..steps-1
    return pos


def _stats(values: list[float]) -> dict[str, float]:
    return {"median": round(statistics.median(values), 3), "min": round(min(values), 3),
            "max": round(max(values), 3)}


def check_ll_values(net: nn.Module, criterion: nn.Module, x: torch.Tensor, y: torch.Tensor, steps: int,
                    seed: int) -> float:
    """Largest relative difference between loss-landscapes' values and our engine at their points."""
    torch.manual_seed(seed)
    from loss_landscapes.model_interface.model_parameters import orthogonal_to, rand_u_like
    from loss_landscapes.model_interface.model_wrapper import wrap_model

    model = copy.deepcopy(net).eval()
    start = wrap_model(model).get_module_parameters()
    one = rand_u_like(start)
    two = orthogonal_to(one)
    one.filter_normalize_(start)
    two.filter_normalize_(start)
    one.mul_(((start.model_norm() / 1) / steps) / one.model_norm())
    two.mul_(((start.model_norm() / 1) / steps) / two.model_norm())
    values, _, _ = ll_plane(net, criterion, x, y, steps, seed)
    names = [k for k, _ in net.named_parameters()]
    centre = {k: v.detach().clone() for k, v in net.state_dict().items()}
    v = [t.detach().clone() for t in one.parameters]
    w = [t.detach().clone() for t in two.parameters]
    samples = Samples([(x, y)], [x.shape[0]], merged=True, _whole=(x, y))
    eng = Engine(EngineSpec(net, Supervised(criterion), {}, samples, names, centre, v, w))
    pos = ll_points(steps).reshape(-1, 2) - steps / 2  # relative to the original weights
    ours = eng.evaluate(pos)["loss"].reshape(steps, steps)
    return float(np.max(np.abs(ours - values) / np.maximum(np.abs(values), 1e-12)))


def check_li_values(net: nn.Module, criterion: nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
    coords = np.random.default_rng(0).uniform(-1, 1, (6, 2))
    loader = DataLoader(TensorDataset(x, y), batch_size=128)
    li, _, (dx, dy) = li_plane(net, criterion, loader, coords)
    names = [k for k, _ in net.named_parameters()]
    centre = {k: v.detach().clone() for k, v in net.state_dict().items()}
    samples = Samples([(x, y)], [x.shape[0]], merged=True, _whole=(x, y))
    eng = Engine(EngineSpec(net, Supervised(criterion), {}, samples, names, centre, dx, dy))
    ours = eng.evaluate(coords)["loss"]
    return float(np.max(np.abs(ours - li) / np.maximum(np.abs(li), 1e-12)))


# -- views (issue 18) ------------------------------------------------------------------------
VIEW_SAMPLES = 512


def trained_mlp(seed: int, x: torch.Tensor, y: torch.Tensor, epochs: int = 3) -> nn.Module:
    """The workload's MLP (``landscape.examples.MLP``) trained ``epochs`` epochs of SGD with momentum
    from ``seed`` (seed 0: the very weights ``workload("mlp", n)`` starts from)."""
    torch.manual_seed(seed)
    net = MLP()
    opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
    g = torch.Generator().manual_seed(seed)
    for _ in range(epochs):
        train_epoch(net, opt, x, y, g)
    return net.eval()


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def summary(points: int, ours: list[float], theirs: list[float]) -> dict[str, Any]:
    """Medians and ranges of points/s, and the ratio of the medians."""
    po, pt = [points / t for t in ours], [points / t for t in theirs]
    return {"ours_pts_s": _stats(po), "loss_landscapes_pts_s": _stats(pt),
            "ours_seconds": _stats(ours), "ours_over_loss_landscapes": round(statistics.median(po)
                                                                             / statistics.median(pt), 2),
            "ours_over_loss_landscapes_per_repeat": [round(t / o, 3) for o, t in zip(ours, theirs)]}


def compare(ours: np.ndarray, theirs: np.ndarray) -> dict[str, Any]:
    ours, theirs = np.asarray(ours, dtype=np.float64), np.asarray(theirs, dtype=np.float64)
    rel = np.abs(ours - theirs) / np.maximum(np.abs(theirs), 1e-12)
    return {"values_compared": int(theirs.size), "max_rel_diff_vs_loss_landscapes": float(rel.max())}


def _their_random_line_direction(model: nn.Module, seed: int, distance: float, steps: int) -> dict[str, torch.Tensor]:
    """The direction ``random_line`` steps along, rebuilt with their own code from the same seed."""
    from loss_landscapes.model_interface.model_parameters import ModelParameters, rand_u_like

    start = ModelParameters([p.detach().clone() for p in model.parameters()])
    torch.manual_seed(seed)
    direction = rand_u_like(start)
    direction.filter_normalize_(start)
    direction.mul_(((start.model_norm() / distance) / steps) / direction.model_norm())
    return {name: t.clone() for (name, _), t in zip(model.named_parameters(), direction.parameters)}


def view_cases(repeats: int) -> list[dict[str, Any]]:
    import loss_landscapes as ll
    from loss_landscapes.metrics import Loss

    _, (xs, ys), _, _ = workload("mlp", VIEW_SAMPLES)
    x, y = digits_tensors()
    a, b, c = (trained_mlp(s, x, y) for s in (0, 1, 2))
    torch.manual_seed(10)
    init = MLP().eval()  # an untrained network: the interpolation runs from it to A (Goodfellow et al.)
    metric = Loss(nn.CrossEntropyLoss(), xs, ys)
    loss = nn.CrossEntropyLoss()
    xy = (xs, ys)
    out: list[dict[str, Any]] = []
    # warm-up of both (imports, first-call allocations)
    compute_landscape(a, loss, xy, dims=1, x=(-1.0, 1.0, 5), num_samples=VIEW_SAMPLES)
    ll.random_line(copy.deepcopy(a), metric, steps=3)

    # reference: our 2D engine, 40x40 random
    two_d = [timed(lambda: compute_landscape(a, loss, xy, size=40, num_samples=VIEW_SAMPLES))[0]
             for _ in range(repeats)]
    ref_pps = 1600 / statistics.median(two_d)
    out.append({"case": "ours_2d_reference", "grid": "40x40", "samples": VIEW_SAMPLES,
                "ours_pts_s": _stats([1600 / t for t in two_d]), "threads": torch.get_num_threads()})

    # random line: 51 points
    ours_t, theirs_t = [], []
    for _ in range(repeats):
        ours_t.append(timed(lambda: compute_landscape(a, loss, xy, dims=1, x=(-1.0, 1.0, 51),
                                                      normalization="filter", num_samples=VIEW_SAMPLES))[0])
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
                                       num_samples=VIEW_SAMPLES)
    res = {"case": "random_line", "points": 51, **summary(51, ours_t, theirs_t),
           "ours_over_2d_engine": round(51 / statistics.median(ours_t) / ref_pps, 2),
           "their_direction_all_positive": bool((flat > 0).all()),
           "their_direction_cosine_with_ones": round(float(flat.sum() / (flat.norm() * flat.numel() ** 0.5)), 3),
           **compare(ours_on_theirs.z, theirs_vals)}
    out.append(res)

    # linear interpolation: 101 points (theirs: 100, alpha = 1/100 .. 1)
    ours_t, theirs_t = [], []
    for _ in range(repeats):
        ours_t.append(timed(lambda: compute_landscape(a, loss, xy, between=(init, a), x=(0.0, 1.0, 101),
                                                      num_samples=VIEW_SAMPLES))[0])
        m = copy.deepcopy(init)
        theirs_t.append(timed(lambda: ll.linear_interpolation(m, a, metric, steps=100))[0])
    ours_ls = compute_landscape(a, loss, xy, between=(init, a), x=(0.0, 1.0, 101), num_samples=VIEW_SAMPLES)
    theirs_vals = ll.linear_interpolation(copy.deepcopy(init), a, metric, steps=100)
    res = {"case": "linear_interpolation", "points": 101, "theirs_points": 100,
           **summary(101, ours_t, [t * 101 / 100 for t in theirs_t]),
           "ours_over_2d_engine": round(101 / statistics.median(ours_t) / ref_pps, 2),
           **compare(ours_ls.z[1:], theirs_vals),
           "ours_at_alpha_0_equals_A": bool(ours_ls.z[0] == ours_ls.markers["A"][2])}
    out.append(res)

    # plane through three models: 40 x 40
    ours_t, theirs_t = [], []
    for _ in range(repeats):
        ours_t.append(timed(lambda: compute_landscape(a, loss, xy, between=(a, b, c), size=40,
                                                      num_samples=VIEW_SAMPLES))[0])
        m = copy.deepcopy(a)
        theirs_t.append(timed(lambda: ll.planar_interpolation(m, b, c, metric, steps=40))[0])
    theirs_vals = np.asarray(ll.planar_interpolation(copy.deepcopy(a), b, c, metric, steps=40))
    sa, sb, sc = (dict(m.state_dict()) for m in (a, b, c))
    ba = {k: sb[k] - sa[k] for k in sa}
    ca = {k: sc[k] - sa[k] for k in sa}
    given = compute_landscape(a, loss, xy, directions=(ba, ca), checkpoints=[sa], x=(0.0, 39 / 40, 40),
                              y=(0.0, 1.0, 41), normalization="none", num_samples=VIEW_SAMPLES)
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
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="mlp,resnet20")
    parser.add_argument("--samples", default=None, help="default: 512,64 for mlp, 256,32 for resnet20")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--steps", type=int, default=None, help="grid side (default: 20 for mlp, 8 for resnet20)")
    parser.add_argument("--section", choices=("plane", "views", "all"), default="all",
                        help="the 2D random_plane comparison, the views (lines, interpolation, planes through "
                             "models), or both")
    parser.add_argument("--results", action="store_true",
                        help="write benchmarks/results/loss_landscapes.json and li_et_al.json")
    args = parser.parse_args()
    records: list[dict[str, Any]] = []
    if args.section in ("views", "all"):
        for line in view_cases(args.repeats):
            records.append(line)
            print(json.dumps(line), flush=True)
    if args.section == "views":
        _write_results(args, records)
        return
    criterion = nn.CrossEntropyLoss()
    for name in args.models.split(","):
        sample_list = args.samples or ("512,64" if name == "mlp" else "256,32")
        steps = args.steps or (20 if name == "mlp" else 8)
        for n in (int(s) for s in sample_list.split(",")):
            net, (x, y), _, plain_forward = workload(name, n)
            net.eval()
            # As trained weights would be: loss-landscapes' filter normalisation divides by the norm of
            # every entry of a 1-D tensor, and fails (ZeroDivisionError) on the zero BatchNorm biases
            # of a freshly initialised network.
            g = torch.Generator().manual_seed(0)
            with torch.no_grad():
                for m in net.modules():
                    if isinstance(m, nn.BatchNorm2d):
                        m.bias.copy_(0.1 * torch.randn(m.bias.shape, generator=g))
            loader = DataLoader(TensorDataset(x, y), batch_size=128)
            grid = np.stack(np.meshgrid(np.linspace(-1, 1, steps), np.linspace(-1, 1, steps)), -1).reshape(-1, 2)
            li_points = min(len(grid), max(8, steps))
            ll_v = check_ll_values(net, criterion, x, y, min(steps, 8), seed=1)
            li_v = check_li_values(net, criterion, x, y)
            ours, theirs, li, limit = [], [], [], []
            for r in range(args.repeats):
                _, t_pass = best_batch(net, plain_forward, [(x, y)], n, torch.device("cpu"))
                limit.append(1.0 / t_pass)
                _, dt, _ = ll_plane(net, criterion, x, y, steps, seed=r)
                theirs.append(steps * steps / dt)
                _, dt, _ = li_plane(net, criterion, loader, grid, seed=r, points=li_points)
                li.append(li_points / dt)
                t0 = time.perf_counter()
                compute_landscape(net, criterion, (x, y), size=steps, num_samples=n, normalization="filter",
                                  seed=r)
                ours.append(steps * steps / (time.perf_counter() - t0))
            records.append({
                "model": name, "samples": n, "grid": f"{steps}x{steps}",
                "ours_pts_s": _stats(ours), "loss_landscapes_pts_s": _stats(theirs), "li_et_al_pts_s": _stats(li),
                "limit_pts_s": _stats(limit), "ours_over_limit": _stats([a / b for a, b in zip(ours, limit)]),
                "ours_over_loss_landscapes": _stats([a / b for a, b in zip(ours, theirs)]),
                "ours_over_li_et_al": _stats([a / b for a, b in zip(ours, li)]),
                "max_rel_diff_vs_loss_landscapes": ll_v, "max_rel_diff_vs_li_et_al": li_v,
                "threads": torch.get_num_threads(), "repeats": args.repeats,
            })
            print(json.dumps(records[-1]), flush=True)
    _write_results(args, records)


_NAMES = {"mlp": "digits MLP", "resnet20": "CIFAR ResNet-20", "resnet18": "ResNet-18", "transformer": "transformer",
          "gpt2": "tiny GPT-2"}
_VIEWS = {"random_line": "`random_line`, 51 points", "linear_interpolation": "`linear_interpolation`, 101 points",
          "planar_interpolation": "`planar_interpolation`, 40×40"}


def _write_results(args: argparse.Namespace, records: list[dict[str, Any]]) -> None:
    """The Benchmarks page's result files (benchmarks/_results.py) from this run's records."""
    if not args.results:
        return
    from _results import ratio_row, stats_row, write

    planes = [r for r in records if "model" in r]
    ll_rows, li_rows = [], []
    for r in planes:
        what = f"{_NAMES.get(r['model'], r['model'])}, {r['grid'].replace('x', '×')}, {r['samples']} samples"
        headline = f"`random_plane`, {what}" if r["model"] == "mlp" and r["samples"] == 512 else None
        ll_rows.append(stats_row(f"`random_plane`, {what}", r["ours_over_loss_landscapes"], r["repeats"],
                                 headline=headline))
        li_rows.append(stats_row(what, r["ours_over_li_et_al"], r["repeats"]))
    for r in records:
        if "case" in r:
            ll_rows.append(ratio_row(f"{_VIEWS[r['case']]}, {VIEW_SAMPLES} samples",
                                     r["ours_over_loss_landscapes_per_repeat"]))
    diffs = [r["max_rel_diff_vs_loss_landscapes"] for r in planes]
    write("loss_landscapes", order=20, title="loss-landscapes", peer="loss-landscapes 3.0.6",
          ratio="speed-up: their time / ours, each on its own grid (values checked at their points)",
          rows=ll_rows, records=records,
          notes="In a plain Python process, filter-normalised random planes, alternating in one process"
                + (f"; their values equal ours within {max(diffs):.1e} relative at their own points." if diffs
                   else "."))
    if li_rows:
        write("li_et_al", order=30, title="Li et al.'s loop", peer="Li et al.'s `plot_surface.py` loop (a port)",
              ratio="speed-up: their time / ours", rows=li_rows, records=planes,
              notes="Their `net_plotter.set_weights` and `evaluation.eval_loss` per point over a DataLoader of "
                    "batch 128, as their `plot_surface.py` does, in a plain Python process.")


if __name__ == "__main__":
    main()
