"""What a landscape's geometry is: the view, its directions' inputs and the grid (private).

A :class:`Geometry` is a value, validated by the public entry points, that the view
builders (:mod:`landscape.geometry._views`) turn into directions and points, and that the
store fingerprints (:mod:`landscape.io`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import torch

from landscape.geometry._runs import RunStart

__all__ = ["Geometry", "Kind", "KINDS", "AxisRange", "BN_STATISTICS", "MAX_DIMS", "GRID_KINDS", "GRID_SIZES"]

Kind = Literal["pca", "random", "given", "hessian", "interpolation", "plane", "target"]
#: The views, by the name of their geometry's kind.
KINDS: tuple[str, ...] = ("pca", "random", "given", "hessian", "interpolation", "plane", "target")
AxisRange = tuple[float, float, int]
#: The most directions of a grid (Landscaper warns above 5; 6 axes of 5 points are 15,625 points).
MAX_DIMS = 6
#: Points per axis of an n-D grid by default, by its number of directions: about 10,000 points (21**3 =
#: 9,261, the digits MLP's in minutes on two CPU cores; 41**3, Landscaper's default, is 7.4 times that).
GRID_SIZES = {3: 21, 4: 11, 5: 7, 6: 5}
#: The views that make grids of more than two directions.
GRID_KINDS = ("random", "hessian", "pca")
#: How batch-norm statistics follow a view through models (see :attr:`Geometry.bn_statistics`).
BN_STATISTICS = ("clamped", "affine", "a", "recompute")


@dataclass(frozen=True)
class Geometry:
    """Where the points lie: the directions and the grid.

    Attributes
    ----------
    kind : {"pca", "random", "given", "hessian", "interpolation", "plane", "target"}
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
    pca_method : {"mindspore", "li", "uncentred"}
        See :mod:`landscape.geometry._pca`.
    pca_solver : {"auto", "full", "gram", "lowrank"}
    dims : int
        A line (``x`` only), a plane, or an n-D grid (3 to :data:`MAX_DIMS` directions of
        :data:`GRID_KINDS`: ``x``, ``y`` and ``size`` points on ``[-1, 1]`` along each later one, or
        for PCA directions along the path's extent with 0.2 margins).
    x, y : (float, float, int), optional
        The axes as ``(min, max, num)`` (``np.linspace``); None: the view's default.
    models : sequence of state dicts or paths, optional
        The models of ``kind`` "interpolation" (A, B), "plane" (A, B, C) and "target" (A, B).
    second : {"random", "pca"}
        The second axis of ``kind="target"``: random, or the trajectory's top principal
        direction orthogonal to B - A.
    biasbn : {"normalize", "li"}
        Directions of tensors with at most one dimension: normalized like the others, or
        (Li et al.) the tensor itself.
    include : sequence of str, optional
        Glob patterns: only the parameters matching one of them move.
    bn_statistics : {"clamped", "affine", "a", "recompute"}
        On views through models (interpolation, plane, target), how batch-norm running
        statistics follow the point: estimated again at every point from the evaluation
        samples (the default, Garipov et al.'s ``bn_update``), carried affinely like the
        parameters with the variances clamped at zero (a variance carried past its models
        can turn negative; the clamped channels are counted per point), carried affinely as
        they are (the loss NaN where a variance turns negative), or kept at model A's.
    runs : dict of str to sequence of state dicts or paths, optional
        Several training runs drawn on one plane, each as its path (projected on the plane,
        with its distance from it). With ``kind="pca"`` the plane is the PCA of all their
        checkpoints together (a shared plane); with the other 2-D views they are projected.
    centre_on : str, optional
        Where a plane of several runs is centred (without ``models``): "start" (``run_start``,
        else the first run's first checkpoint), "mean" (of all their checkpoints) or a run's
        name (its last checkpoint); None is the first run's end.
    run_start : RunStart, optional
        With ``centre_on="start"``: the runs' saved initial weights to centre on, and their
        words (``landscape compare``, from SummaryCollector runs).
    """

    kind: Kind
    size: int = 40
    normalization: str = "layer"
    ignore: str | Sequence[str] | None = None
    seed: int = 0
    trajectory: Sequence[object] | None = None
    given: tuple[Mapping[str, torch.Tensor], Mapping[str, torch.Tensor] | None] | None = None
    centre: Mapping[str, torch.Tensor] | None = None
    pca_method: str = "mindspore"
    pca_solver: str = "auto"
    dims: int = 2
    x: AxisRange | None = None
    y: AxisRange | None = None
    models: Sequence[object] | None = None
    second: str = "random"
    biasbn: str = "normalize"
    include: Sequence[str] | None = None
    bn_statistics: str = "recompute"
    runs: Mapping[str, Sequence[object]] | None = None
    centre_on: str | None = None
    run_start: RunStart | None = None

    @property
    def through_models(self) -> bool:
        """Views through models move buffers (batch-norm statistics) with the parameters."""
        return self.kind in ("interpolation", "plane", "target")
