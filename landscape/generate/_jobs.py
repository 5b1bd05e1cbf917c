"""What a generation computes, as values (private): the problem and the landscapes' jobs.

``compute_landscape`` and ``SummaryLandscape`` validate their arguments and fill these;
:func:`landscape.generate._build.run_jobs` takes them. :func:`jobs_from_metadata` is the
pure function from a run's training metadata (and the call's options) to its jobs: which
landscapes, of which checkpoints, under which tags.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from torch import nn

from landscape.engine import Samples
from landscape.geometry import Geometry

__all__ = ["Problem", "LandscapeJob", "RunOptions", "jobs_from_metadata", "view_checkpoints"]


@dataclass(frozen=True)
class Problem:
    """What is evaluated at every point: the network, the task, the samples, the mode.

    Attributes
    ----------
    network : nn.Module
        The architecture; checkpoints load into a copy of it.
    task : callable
        ``task(model, batch) -> loss`` (``Supervised(loss_fn)`` for a loss function).
    samples : Samples
        Exactly the samples every point's loss is the mean over (host memory).
    metrics : dict of str to metric
        Extra surfaces.
    eval_mode : bool
    plan : {"auto", "tune"} or dict
        How the evaluation plan is chosen (:func:`landscape.engine.choose_plan`).
    memory : {"auto", "fast", "lean"}
        How random directions are kept (:func:`landscape.engine.choose_memory`).
    bn_samples : Samples, optional
        The samples batch-norm statistics are estimated again on (``bn_statistics="recompute"``);
        None: ``samples``.
    """

    network: nn.Module
    task: Any
    samples: Samples
    metrics: Mapping[str, Any] = field(default_factory=dict)
    eval_mode: bool = True
    plan: Any = "auto"
    memory: str = "auto"
    bn_samples: Samples | None = None


@dataclass(frozen=True)
class LandscapeJob:
    """One landscape to build: its geometry and how it is named and recorded.

    Attributes
    ----------
    geometry : Geometry
    tag : str, optional
        The summary tag (``"landscape_[1, 5]"``) and the group in ``landscapes.h5``.
    intervals : list of int, optional
        The step or epoch numbers of the trajectory's checkpoints.
    unit : {"step", "epoch"}, optional
    step_per_epoch : int, optional
    """

    geometry: Geometry
    tag: str | None = None
    intervals: list[Any] | None = None
    unit: str | None = None
    step_per_epoch: int | None = None

    @property
    def label(self) -> str:
        """How messages name the landscape."""
        return self.tag or f"{self.geometry.kind} landscape"


@dataclass(frozen=True)
class RunOptions:
    """The options of ``gen_landscapes_with_multi_process`` that choose a run's landscapes
    (validated by the caller)."""

    view: str | None = None
    between: Sequence[Any] | None = None
    second: str = "random"
    normalization: str | None = None
    directions: str = "random"
    dims: int = 3


def _numbers(intervals: Sequence[Sequence[int]]) -> list[int]:
    return sorted({n for iv in intervals for n in iv})


def view_checkpoints(view: str, between: Sequence[Any] | None, second: str,
                     intervals: Sequence[Sequence[int]], directions: str = "random", dims: int = 3) -> list[Any]:
    """The checkpoints of a view (numbers or paths): ``between``, or the default ones from the
    intervals (first and last; for a plane the middle one too; for a line or a grid the last; for a
    PCA grid every collected one, the last last); for ``("target", "pca")`` every collected number
    between the two as well. Raises ``ValueError`` when the run holds too few."""
    union = _numbers(intervals)
    want = {"line": 1, "grid": 1, "interpolation": 2, "plane": 3, "target": 2}[view]
    if view == "grid" and directions == "pca":
        if len(union) < max(3, dims + 1):
            raise ValueError(f"view='grid' with directions='pca' and dims={dims} needs at least {max(3, dims + 1)} "
                             f"checkpoints; the intervals hold {union}.")
        return union
    if view in ("line", "grid"):
        if not union:
            raise ValueError("No interval to take the last checkpoint from.")
        return [union[-1]]
    if between is None:
        if len(union) < want:
            raise ValueError(f"view={view!r} needs {want} checkpoints; the intervals hold {union}.")
        between = [union[0], union[len(union) // 2], union[-1]] if want == 3 else [union[0], union[-1]]
    numbers = list(between)
    if view == "target" and second == "pca":
        lo, hi = sorted(b for b in numbers if isinstance(b, int))
        numbers += [n for n in union if lo <= n <= hi and n not in numbers]
    return numbers


def _name(item: Any) -> Any:
    return item if isinstance(item, int) else os.path.splitext(os.path.basename(os.fspath(item)))[0]


def jobs_from_metadata(cfg: Mapping[str, Any], opts: RunOptions, base: Geometry, where: Mapping[Any, Any],
                       paths: Mapping[Any, str]) -> list[LandscapeJob]:
    """The landscapes a run's metadata ``cfg`` (``train_metadata.json`` with the call's overrides)
    asks for: one PCA landscape per interval (``create_landscape['train']``) and a Random one
    around the last checkpoint (``['result']``), as MindSpore does; or the one view ``opts``
    names. ``base`` holds the geometry options every landscape shares; ``where[n]`` is the
    checkpoint of step or epoch ``n`` for PCA and Random landscapes (a path, or its state kept in
    memory), ``paths[n]`` its file (views read their two or three models from it). Pure: nothing
    is read."""
    unit, spe = cfg["unit"], cfg["step_per_epoch"]
    intervals = [list(iv) for iv in cfg["intervals"]]

    def job(tag: str, numbers: list[Any], **geo: Any) -> LandscapeJob:
        return LandscapeJob(replace(base, **geo), tag=tag, intervals=numbers, unit=unit, step_per_epoch=spe)

    def at(item: Any) -> Any:
        return where[item] if isinstance(item, int) else os.fspath(item)

    def file(item: Any) -> Any:
        return paths[item] if isinstance(item, int) else os.fspath(item)

    normalization = opts.normalization
    if opts.view is None:
        jobs = []
        norm = normalization or "layer"
        if cfg["create_landscape"]["train"]:
            jobs += [job(f"landscape_{[iv[0], iv[-1]]}", iv, kind="pca", normalization=norm,
                         trajectory=[at(n) for n in iv]) for iv in intervals]
        if cfg["create_landscape"]["result"]:
            last = intervals[-1][-1]
            jobs.append(job(f"landscape_{[last]}", [last], kind="random", normalization=norm, trajectory=[at(last)]))
        return jobs
    numbers = view_checkpoints(opts.view, opts.between, opts.second, intervals, opts.directions, opts.dims)
    if opts.view == "line":
        return [job(f"line_{[numbers[0]]}", [numbers[0]], kind="random", dims=1, normalization=normalization or "layer",
                    trajectory=[file(numbers[0])])]
    if opts.view == "grid":  # a plane or an n-D grid of random, Hessian or PCA directions around the last checkpoint
        last = numbers[-1]
        return [job(f"{opts.directions}_{opts.dims}d_{[last]}", list(numbers), kind=opts.directions,
                    dims=opts.dims, normalization=normalization or "layer", trajectory=[at(n) for n in numbers])]
    k = 3 if opts.view == "plane" else 2
    models = [file(b) for b in numbers[:k]]
    tag = f"{opts.view}_{[_name(b) for b in numbers[:k]]}"
    if opts.view == "target":
        if opts.second == "pca":
            lo, hi = sorted(b for b in numbers[:2])
            traj = sorted(numbers)
            return [job(tag, [n for n in traj if lo <= n <= hi], kind="target", second="pca", normalization="none",
                        models=models, trajectory=[paths[n] for n in traj])]
        return [job(tag, [_name(b) for b in numbers[:2]], kind="target", normalization=normalization or "layer",
                    models=models)]
    return [job(tag, [_name(b) for b in numbers[:k]], kind=opts.view, dims=1 if k == 2 else 2,
                normalization="none", models=models)]
