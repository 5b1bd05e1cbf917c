"""What a landscape needs, as typed plans (private): the problem, the geometry, the execution.

``compute_landscape`` and ``SummaryLandscape`` validate their arguments and fill these;
``build_landscape`` takes them. Every field here is already validated.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import torch
from torch import nn

from landscape.engine import Samples
from landscape.execution._distributed import Dist
from landscape.execution._pool import Pool
from landscape.io._store import Store

__all__ = ["Problem", "Geometry", "LandscapePlan", "Execution"]

Kind = Literal["pca", "random", "given", "hessian", "line", "plane", "target"]
AxisRange = tuple[float, float, int]


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
    plan : {"auto", "heuristic"} or dict
        How the evaluation plan is chosen (:func:`landscape.engine._planner.choose_plan`).
    """

    network: nn.Module
    task: Any
    samples: Samples
    metrics: Mapping[str, Any] = field(default_factory=dict)
    eval_mode: bool = True
    plan: Any = "auto"
    #: what the planner learned of this problem (probes), kept for its next landscapes
    plan_cache: dict[Any, Any] = field(default_factory=dict, compare=False, repr=False)


@dataclass(frozen=True)
class Geometry:
    """Where the points lie: the directions and the grid.

    Attributes
    ----------
    kind : {"pca", "random", "given", "hessian", "line", "plane", "target"}
        PCA of ``trajectory``, seeded random directions, the ``given`` directions, the
        Hessian's top two eigenvectors at the centre, the line between two ``models`` (an
        interpolation), the plane through three ``models``, or the target direction
        ``models[1] - models[0]`` with a ``second`` axis.
    size : int
        Grid points per side (of each axis not given by ``x`` / ``y``).
    normalization : {"layer", "filter", "dfilter", "dlayer", "weight", "none"}
    ignore : str, sequence of str or None
        Glob patterns of parameters that do not move; ``"biasbn"``: every tensor with at
        most one dimension.
    seed : int
        Seed of random directions.
    trajectory : sequence of state dicts or paths, optional
        The checkpoints (the last one is the centre).
    given : (dict, dict) or (dict, None), optional
        Direction dicts for ``kind="given"`` (one for a line).
    centre : dict, optional
        The centre when there is no trajectory (default: the network's own state).
    pca_method : {"mindspore", "li"}
    pca_solver : {"auto", "full", "gram", "lowrank"}
    dims : {1, 2}
        A line (``x`` only) or a plane.
    x, y : (float, float, int), optional
        The axes as ``(min, max, num)`` (``np.linspace``); None: the view's default.
    models : sequence of state dicts or paths, optional
        The models of ``kind`` "line" (A, B), "plane" (A, B, C) and "target" (A, B).
    second : {"random", "pca"}
        The second axis of ``kind="target"``: random, or the trajectory's top principal
        direction orthogonal to B - A.
    biasbn : {"normalize", "li"}
        Directions of tensors with at most one dimension: normalized like the others, or
        (Li et al.) the tensor itself.
    include : sequence of str, optional
        Glob patterns: only the parameters matching one of them move.
    """

    kind: Kind
    size: int = 40
    normalization: str = "layer"
    ignore: str | Sequence[str] | None = None
    seed: int = 0
    trajectory: Sequence[Any] | None = None
    given: tuple[Mapping[str, torch.Tensor], Mapping[str, torch.Tensor] | None] | None = None
    centre: Mapping[str, torch.Tensor] | None = None
    pca_method: str = "mindspore"
    pca_solver: str = "auto"
    dims: int = 2
    x: AxisRange | None = None
    y: AxisRange | None = None
    models: Sequence[Any] | None = None
    second: str = "random"
    biasbn: str = "normalize"
    include: Sequence[str] | None = None


@dataclass(frozen=True)
class LandscapePlan:
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
    fingerprint : dict, optional
        Everything that defines the landscape (digests included), checked against the
        store on a rerun.
    """

    geometry: Geometry
    tag: str | None = None
    intervals: list[int] | None = None
    unit: str | None = None
    step_per_epoch: int | None = None
    fingerprint: Mapping[str, Any] | None = None

    @property
    def label(self) -> str:
        """How messages name the landscape."""
        return self.tag or f"{self.geometry.kind} landscape"


@dataclass
class Execution:
    """Where and how the points are evaluated, and where finished chunks go.

    Attributes
    ----------
    devices : list of str
        One worker per entry (``"cpu"`` or ``"cuda:k"``).
    threads : int
        CPU threads per worker process (0: torch's default).
    pool : Pool, optional
        Worker processes started by the caller (kept up between landscapes).
    dist : Dist, optional
        The torch.distributed group (rank 0 decides and writes).
    store : Store, optional
        ``landscapes.h5``: finished chunks are flushed there and a rerun resumes.
    """

    devices: list[str] = field(default_factory=lambda: ["cpu"])
    threads: int = 0
    pool: Pool | None = None
    dist: Dist | None = None
    store: Store | None = None
