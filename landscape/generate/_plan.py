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

Kind = Literal["pca", "random", "given"]


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
    """

    network: nn.Module
    task: Any
    samples: Samples
    metrics: Mapping[str, Any] = field(default_factory=dict)
    eval_mode: bool = True


@dataclass(frozen=True)
class Geometry:
    """Where the points lie: the directions and the grid.

    Attributes
    ----------
    kind : {"pca", "random", "given"}
        PCA of ``trajectory``, seeded random directions, or the ``given`` pair.
    size : int
        Grid points per side.
    normalization : {"layer", "filter", "none"}
    ignore : {"biasbn"} or None
    seed : int
        Seed of random directions.
    trajectory : sequence of state dicts or paths, optional
        The checkpoints (the last one is the centre).
    given : (dict, dict), optional
        Direction dicts for ``kind="given"``.
    centre : dict, optional
        The centre when there is no trajectory (default: the network's own state).
    pca_method : {"mindspore", "li"}
    pca_solver : {"auto", "full", "gram", "lowrank"}
    """

    kind: Kind
    size: int = 40
    normalization: str = "layer"
    ignore: str | None = None
    seed: int = 0
    trajectory: Sequence[Any] | None = None
    given: tuple[Mapping[str, torch.Tensor], Mapping[str, torch.Tensor]] | None = None
    centre: Mapping[str, torch.Tensor] | None = None
    pca_method: str = "mindspore"
    pca_solver: str = "auto"


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
