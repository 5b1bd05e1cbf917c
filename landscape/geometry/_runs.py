"""Several training runs on one plane (private): their centre, and their paths projected.

``runs`` maps a run's name to its checkpoints (state dicts or files), in order. The
plane's centre is chosen by a rule (:data:`CENTRES`): the runs' common start, their mean,
or one run's end. A checkpoint ``θ`` is drawn at the least-squares coordinates ``(a, b)``
of ``θ - centre`` on the plane's directions ``v, w`` (the moved tensors only), and its
distance from the plane, ``‖θ - centre - a v - b w‖``, is reported relative to
``‖θ - centre‖``: a path far off the plane misleads, so the figure and the metadata say so.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import torch

__all__ = ["CENTRES", "run_items", "mean_state", "project"]

#: Where the plane of several runs is centred, besides a run's name (that run's end).
CENTRES = ("start", "mean")

Item = tuple[str, int, Any]


def run_items(runs: Mapping[str, Sequence[Any]]) -> list[Item]:
    """``(run, k, checkpoint)`` of every checkpoint, run by run, in order."""
    return [(name, k, ckpt) for name, ckpts in runs.items() for k, ckpt in enumerate(ckpts)]


def mean_state(states: Sequence[Callable[[], Mapping[str, torch.Tensor]]]) -> dict[str, torch.Tensor]:
    """The element-wise mean of the floating-point tensors of several states (others: the first's),
    accumulated in float64 one state at a time."""
    total: dict[str, torch.Tensor] = {}
    first: Mapping[str, torch.Tensor] = {}
    for i, load in enumerate(states):
        sd = load()
        if i == 0:
            first = sd
        for k, t in sd.items():
            if t.is_floating_point():
                total[k] = total[k] + t.double() if k in total else t.double().clone()
    n = len(states)
    return {k: (total[k] / n).to(t.dtype) if k in total else t for k, t in first.items()}


def _dot(a: Sequence[torch.Tensor], b: Sequence[torch.Tensor]) -> float:
    return float(sum(torch.dot(x.reshape(-1).double(), y.reshape(-1).double()) for x, y in zip(a, b)))


def project(v: Sequence[torch.Tensor], w: Sequence[torch.Tensor], centre: Sequence[torch.Tensor],
            flats: Sequence[Callable[[], Sequence[torch.Tensor]]]) -> tuple[np.ndarray, np.ndarray]:
    """Least-squares coordinates (array (n, 2)) of each ``flats[i]() - centre`` on ``v, w`` (a
    line: ``w`` empty, ``b = 0``) and its relative distance from the plane (0 at the centre)."""
    line = len(w) == 0
    vv = _dot(v, v)
    g = np.array([[vv, 0.0], [0.0, 1.0]]) if line else np.array([[vv, _dot(v, w)], [_dot(w, v), _dot(w, w)]])
    coords = np.zeros((len(flats), 2))
    distance = np.zeros(len(flats))
    for i, load in enumerate(flats):
        d = [(t.double() - c.double()) for t, c in zip(load(), centre)]
        rhs = np.array([_dot(v, d), 0.0 if line else _dot(w, d)])
        a, b = np.linalg.lstsq(g, rhs, rcond=None)[0]
        coords[i] = (a, 0.0 if line else b)
        # |d - a v - b w|^2 = |d|^2 - 2 (a v.d + b w.d) + (a, b) G (a, b)
        dd = _dot(d, d)
        ab = np.array([a, 0.0 if line else b])
        rest = max(dd - 2.0 * float(ab @ rhs) + float(ab @ g @ ab), 0.0)
        distance[i] = float(np.sqrt(rest / dd)) if dd > 0 else 0.0
    return coords, distance
