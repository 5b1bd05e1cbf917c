"""Side by side with the field's tools: loss-landscapes 3.0.6 and Li et al.'s per-point loop.

In one process, alternating, for each model and sample count (the same trained weights and
the same samples for all three):

* ``loss_landscapes.random_plane(model, Loss(loss_fn, x, y), steps=G, normalization="filter")``
  (the pip package; a benchmark-only dependency: ``pip install loss-landscapes==3.0.6``);
* a faithful port of Li et al.'s loop (github.com/tomgoldstein/loss-landscape,
  ``net_plotter.set_weights`` + ``evaluation.eval_loss`` over a DataLoader of batch 128, as
  their ``plot_surface.py`` does per point);
* ``landscape.compute_landscape(..., size=G, normalization="filter")``, end to end.

Values are compared too: every point loss-landscapes evaluated is evaluated again by our
engine at the same parameters. Their grid is built by moving in place along the second
direction up and down alternate columns ("zig-zag"): even columns hold positions 1..G and
odd ones 0..G-1 along it, so the rows are reconstructed, not assumed. Their directions
are uniform (``rand_u_like``), filter-normalised, and rescaled by the model's norm; ours
differ (normal, per-filter ``||θ||``), so speed is compared on each tool's own grid and
values on theirs. Li et al.'s values are checked the same way on their directions.

    python benchmarks/bench_peers.py --repeats 3
    python benchmarks/bench_peers.py --models mlp --samples 512,64
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import sys
import time
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _models import workload  # noqa: E402

from landscape import compute_landscape  # noqa: E402
from landscape.engine import Engine, EngineSpec, Samples, Supervised  # noqa: E402


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="mlp,resnet20")
    parser.add_argument("--samples", default=None, help="default: 512,64 for mlp, 256,32 for resnet20")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--steps", type=int, default=None, help="grid side (default: 20 for mlp, 8 for resnet20)")
    args = parser.parse_args()
    criterion = nn.CrossEntropyLoss()
    for name in args.models.split(","):
        sample_list = args.samples or ("512,64" if name == "mlp" else "256,32")
        steps = args.steps or (20 if name == "mlp" else 8)
        for n in (int(s) for s in sample_list.split(",")):
            net, (x, y), _, _ = workload(name, n)
            net.eval()
            loader = DataLoader(TensorDataset(x, y), batch_size=128)
            grid = np.stack(np.meshgrid(np.linspace(-1, 1, steps), np.linspace(-1, 1, steps)), -1).reshape(-1, 2)
            li_points = min(len(grid), max(8, steps))
            ll_v = check_ll_values(net, criterion, x, y, min(steps, 8), seed=1)
            li_v = check_li_values(net, criterion, x, y)
            ours, theirs, li = [], [], []
            for r in range(args.repeats):
                _, dt, _ = ll_plane(net, criterion, x, y, steps, seed=r)
                theirs.append(steps * steps / dt)
                _, dt, _ = li_plane(net, criterion, loader, grid, seed=r, points=li_points)
                li.append(li_points / dt)
                t0 = time.perf_counter()
                compute_landscape(net, criterion, (x, y), size=steps, num_samples=n, normalization="filter",
                                  seed=r)
                ours.append(steps * steps / (time.perf_counter() - t0))
            print(json.dumps({
                "model": name, "samples": n, "grid": f"{steps}x{steps}",
                "ours_pts_s": _stats(ours), "loss_landscapes_pts_s": _stats(theirs), "li_et_al_pts_s": _stats(li),
                "ours_over_loss_landscapes": _stats([a / b for a, b in zip(ours, theirs)]),
                "ours_over_li_et_al": _stats([a / b for a, b in zip(ours, li)]),
                "max_rel_diff_vs_loss_landscapes": ll_v, "max_rel_diff_vs_li_et_al": li_v,
                "threads": torch.get_num_threads(),
            }), flush=True)


if __name__ == "__main__":
    main()
