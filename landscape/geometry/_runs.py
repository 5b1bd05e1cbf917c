"""Several training runs on one plane (private): their centre, and their paths projected.

``runs`` maps a run's name to its checkpoints (state dicts or files), in order. The
plane's centre is chosen by a rule (:data:`CENTRES`): the runs' start, their mean, or one
run's end. The start is the runs' saved initial weights when they were saved
(:func:`run_start`: SummaryCollector saves them before the first step, apart from the
intervals' checkpoints), else the first run's first checkpoint; the landscape's metadata
names which (``centre_description``, :func:`centre_description`).

A checkpoint ``θ`` is drawn at the least-squares coordinates ``(a, b)`` of ``θ - centre``
on the plane's directions ``v, w`` (the moved tensors only), and its distance from the
plane, ``‖θ - centre - a v - b w‖``, is reported relative to ``‖θ - centre‖``: a path far
off the plane misleads, so the figure and the metadata say so. The share of the runs'
movement the plane holds is ``1 - Σ‖θ - centre - a v - b w‖² / Σ‖θ - centre‖²`` over every
checkpoint of every run: what the drawn plane (after normalization) holds, whatever it is.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from landscape.geometry._pca import plane_share

__all__ = ["CENTRES", "RunStart", "run_start", "centre_description", "run_items", "mean_state", "project"]

#: Where the plane of several runs is centred, besides a run's name (that run's end).
CENTRES = ("start", "mean")

Item = tuple[str, int, Any]


@dataclass(frozen=True)
class RunStart:
    """The centre of ``centre_on="start"`` when the runs' initial weights were saved, and its words.

    Attributes
    ----------
    checkpoint : state dict or path
        The initial weights the plane is centred on.
    description : str
        What they are, as the landscape's metadata says it (``centre_description``).
    """

    checkpoint: Any
    description: str


def run_start(initial: Mapping[str, Any], load: Callable[[Any], Mapping[str, torch.Tensor]], *,
              first_saved: tuple[Any, str]) -> RunStart:
    """Where the runs start: their shared initial weights, or the first run's.

    Parameters
    ----------
    initial : dict of str to (state dict, path or None)
        Each run's initial weights, saved before its first step (None: not saved), in the runs' order.
    load : callable
        ``load(checkpoint) -> state dict`` (fitted to the network: the same keys for every run).
    first_saved : (checkpoint, str)
        The first run's first saved checkpoint and its words (``"epoch 1"``): the start when the
        first run's initial weights were not saved.

    Returns
    -------
    RunStart
        Every run's initial weights saved and equal bit for bit (one seed): the first run's, "the
        runs' shared initial weights"; else the first run's initial weights, saying that the runs'
        differ (or which were not saved); the first run's not saved: its first saved checkpoint,
        saying so.
    """
    names = list(initial)
    first = names[0]
    if initial[first] is None:
        return RunStart(first_saved[0], f"run {first}'s first saved checkpoint, {first_saved[1]}: the initial "
                                        "weights were not saved")
    unsaved = [name for name in names if initial[name] is None]
    if unsaved:
        return RunStart(initial[first], f"run {first}'s initial weights (those of run(s) {', '.join(unsaved)} were "
                                        "not saved)")
    reference = load(initial[first])
    differ = [name for name in names[1:] if not _equal(load(initial[name]), reference)]
    if differ:
        return RunStart(initial[first], f"run {first}'s initial weights (run(s) {', '.join(differ)} started from "
                                        "others)")
    return RunStart(initial[first], "the runs' shared initial weights")


def _equal(a: Mapping[str, torch.Tensor], b: Mapping[str, torch.Tensor]) -> bool:
    """The same keys, dtypes, shapes and bits (-0.0 is not 0.0, a NaN equals its own bits)."""

    def bits(t: torch.Tensor) -> torch.Tensor:
        return t.detach().cpu().contiguous().reshape(-1).view(torch.uint8)

    return a.keys() == b.keys() and all(
        a[k].dtype == b[k].dtype and a[k].shape == b[k].shape and torch.equal(bits(a[k]), bits(b[k])) for k in a)


def centre_description(centre_on: str | None, runs: Sequence[str], start: RunStart | None) -> str:
    """What the centre of a plane of several runs is (``runs``: their names, in order)."""
    if centre_on == "start":
        return start.description if start is not None else f"run {runs[0]}'s first checkpoint"
    if centre_on == "mean":
        return "the mean of the runs' checkpoints"
    return f"run {centre_on or runs[0]}'s end"


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
            flats: Sequence[Callable[[], Sequence[torch.Tensor]]]) -> tuple[np.ndarray, np.ndarray, float]:
    """Least-squares coordinates (array (n, 2)) of each ``flats[i]() - centre`` on ``v, w`` (a
    line: ``w`` empty, ``b = 0``), its relative distance from the plane (0 at the centre), and the
    share of the differences' squared lengths the plane holds
    (:func:`landscape.geometry._pca.plane_share`)."""
    line = len(w) == 0
    vv = _dot(v, v)
    g = np.array([[vv, 0.0], [0.0, 1.0]]) if line else np.array([[vv, _dot(v, w)], [_dot(w, v), _dot(w, w)]])
    coords = np.zeros((len(flats), 2))
    rhs = np.zeros((len(flats), 2))
    norms2 = np.zeros(len(flats))
    for i, load in enumerate(flats):
        d = [(t.double() - c.double()) for t, c in zip(load(), centre)]
        rhs[i] = (_dot(v, d), 0.0 if line else _dot(w, d))
        a, b = np.linalg.lstsq(g, rhs[i], rcond=None)[0]
        coords[i] = (a, 0.0 if line else b)
        norms2[i] = _dot(d, d)
    distance, share = plane_share(norms2, rhs, g, coords)
    return coords, distance, share
