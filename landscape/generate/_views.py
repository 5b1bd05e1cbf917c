"""Where a landscape's points lie: directions, axes, markers for every view (private).

The engine evaluates ``centre + a*v + b*w`` at points ``(a, b)``. Every view is put in
that form here, once, and the rest (chunks, workers, the resumable store) is the same
for all of them:

* a plane of random, PCA or given directions: the centre and two directions;
* a line (``dims=1``, random or one given direction): ``w = 0`` and points ``(a, 0)``.
  The engine's cost per point does not depend on ``w`` (the parameters of a group of
  points are one ``(p, 3) @ (3, P)`` product either way), and the zero direction is not
  stored: ``landscapes.h5`` keeps an empty ``w``;
* the line between models A and B (an interpolation): the centre's moved parameters are
  zero, ``v = A``, ``w = B`` and the point of ``alpha`` is ``(1 - alpha, alpha)``, so the
  parameters at ``alpha = 0`` and ``1`` are A's and B's exactly (``0 + 1*A + 0*B``),
  where ``A + 1*(B - A)`` would differ from B by a rounding. Buffers (batch-norm
  statistics) and parameters left still are A's;
* the plane through A, B, C (:func:`landscape.geometry._models.plane_axes`): centre A,
  orthonormal ``v``, ``w``; the models' points are exact up to float32 rounding of
  ``A + a*v + b*w``;
* the target direction: centre A, ``v = B - A`` and a random or principal second axis.

Markers (the models a view passes through) and the exact centre of a view with custom
ranges are evaluated at exactly their coordinates: a grid point when one sits there,
else an extra point after the grid (and after a path). ``layout`` in the metadata says
where each is, so an interrupted run resumes with the same points.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn

from collector.common import strip_wrapper_prefixes
from collector.trajectory import load_checkpoint
from landscape.generate._plan import Geometry
from landscape.geometry._directions import (
    axis_values,
    grid_axes,
    normalize_directions,
    path_coordinates,
    random_directions,
)
from landscape.geometry._models import deviation_axis, difference, plane_axes
from landscape.geometry._state import fit_state, flat_float
from landscape.geometry._streamed_pca import trajectory_pca

__all__ = ["ViewGeometry", "view_geometry", "centre_state", "model_state", "DECOMPOSITION"]

DECOMPOSITION = {"pca": "PCA", "random": "Random", "given": "Given", "hessian": "Hessian", "line": "Interpolation",
                 "plane": "Plane", "target": "Target"}
_LABELS = "ABC"


@dataclass
class ViewGeometry:
    """A view in the engine's form; see the module docstring.

    Attributes
    ----------
    v, w : list of Tensor
        The directions (``w`` empty for a line: zero).
    x, y : ndarray
        The axes as shown (``y`` empty for a line).
    points : ndarray of shape (m, 2)
        The engine's ``(a, b)``: the grid (row-major over y, then x), the path, extra points.
    n_path : int
    intervals : list of int or None
        The path's step or epoch numbers.
    md : dict
        What the view adds to the metadata, ``layout`` included.
    """

    v: list[torch.Tensor]
    w: list[torch.Tensor]
    x: np.ndarray
    y: np.ndarray
    points: np.ndarray
    n_path: int = 0
    intervals: list[int] | None = None
    md: dict[str, Any] = field(default_factory=dict)


def model_state(network: nn.Module, item: Any, what: str) -> dict[str, torch.Tensor]:
    """A model of ``between`` as a state dict fitting ``network`` (a module, a state dict or a path)."""
    if isinstance(item, nn.Module):
        item = {k: t.detach().cpu() for k, t in item.state_dict().items()}
    return load_checkpoint(item, what=what, network=network)


def centre_state(network: nn.Module, geo: Geometry, names: Sequence[str], label: str) -> Mapping[str, torch.Tensor]:
    """The state the engine loads: the trajectory's last checkpoint, model A, or the network's
    own state; for an interpolation, model A with its moved parameters zero."""
    if geo.models is not None:
        centre = model_state(network, geo.models[0], f"model A of {label}")
        if geo.kind == "line":
            moved = set(names)
            centre = {k: (torch.zeros_like(t) if k in moved else t) for k, t in centre.items()}
        return centre
    if geo.trajectory is not None:
        return load_checkpoint(geo.trajectory[-1], what=f"checkpoint {len(geo.trajectory) - 1} of {label}",
                               network=network)
    if geo.centre is not None:
        return fit_state(network, geo.centre)
    return {k: t.detach().cpu() for k, t in network.state_dict().items()}


def _given(direction: Mapping[str, Any], names: Sequence[str], ref: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    d = strip_wrapper_prefixes(dict(direction))
    missing = [k for k in names if k not in d]
    if missing:
        raise ValueError(f"The 'directions' dicts lack the parameters {missing}.")
    return [torch.as_tensor(d[k]).detach().to("cpu", torch.float32).reshape(r.shape) for k, r in zip(names, ref)]


def _axis(spec: tuple[float, float, int] | None, default: tuple[float, float, int]) -> np.ndarray:
    return axis_values(spec if spec is not None else default)


def _margins(lo: float, hi: float, size: int) -> tuple[float, float, int]:
    m = 0.2 * (hi - lo)
    return (lo - m, hi + m, size)


class _Split:
    """Parameters and buffers of a list aligned with ``names`` (buffers move only on views
    through models, after the parameters)."""

    def __init__(self, network: nn.Module, names: Sequence[str]) -> None:
        buffers = {n for n, _ in network.named_buffers()}
        self.is_param = [n not in buffers for n in names]

    def params(self, ts: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        return [t for t, p in zip(ts, self.is_param) if p]

    def buffers(self, ts: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        return [t for t, p in zip(ts, self.is_param) if not p]

    def merge(self, params: Sequence[torch.Tensor], buffers: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        it_p, it_b = iter(params), iter(buffers)
        return [(next(it_p) if p else next(it_b)).to(torch.float32) for p in self.is_param]


def view_geometry(network: nn.Module, geo: Geometry, names: Sequence[str], centre: Mapping[str, torch.Tensor],
                  label: str, intervals: list[int] | None,
                  hessian: Callable[[], tuple[list[torch.Tensor], list[torch.Tensor], dict[str, Any]]] | None = None,
                  ) -> ViewGeometry:
    """Directions, axes, points and markers of the view ``geo`` (inputs validated).

    ``hessian`` (for ``geo.kind == "hessian"``) returns the top two eigenvectors at the
    centre, unit length, and the metadata of the eigen-solve."""
    size, kind = geo.size, geo.kind
    split = _Split(network, names)
    md: dict[str, Any] = {"decomposition": DECOMPOSITION[kind], "dims": int(geo.dims)}
    path_xy: np.ndarray | None = None  # display coordinates of the path
    markers: list[tuple[str, float, float]] = []
    default_x = default_y = (-1.0, 1.0, size)
    if kind == "line":
        a_sd = model_state(network, geo.models[0], f"model A of {label}")  # type: ignore[index]
        b_sd = model_state(network, geo.models[1], f"model B of {label}")  # type: ignore[index]
        v, w = flat_float(a_sd, names), flat_float(b_sd, names)
        x = _axis(geo.x, (-0.5, 1.5, size))
        view = ViewGeometry(v, w, x, np.zeros(0), np.stack([1.0 - x, x], axis=1))
        md.update(normalization="none")
        return _finish(view, md, [("A", 0.0, 0.0), ("B", 1.0, 0.0)], engine=lambda px, py: (1.0 - px, px),
                       convergence="A")
    ref = flat_float(centre, names)
    if kind == "pca":
        assert geo.trajectory is not None
        res = trajectory_pca(geo.trajectory, names, ref, network=network, label=label, method=geo.pca_method,
                             solver=geo.pca_solver, normalization=geo.normalization)
        v, w, path_xy = res["v"], res["w"], res["coords"]
        path_xy[-1] = 0.0
        md.update(pca_method=geo.pca_method, explained_variance_ratio=res["explained_variance_ratio"][:2],
                  singular_values=res["singular_values"][:2], normalization=geo.normalization)
        dx, dy = grid_axes(path_xy, size)
        default_x, default_y = (dx[0], dx[-1], size), (dy[0], dy[-1], size)
    elif kind == "random":
        dirs = random_directions(ref, geo.seed, geo.normalization, geo.biasbn, count=geo.dims)
        v, w = dirs[0], (dirs[1] if geo.dims == 2 else [])
        md.update(seed=int(geo.seed), normalization=geo.normalization)
    elif kind == "hessian":  # the top eigenvectors at the centre, rescaled like random directions
        assert hessian is not None
        ev, ew, extra = hessian()
        v = normalize_directions(ev, ref, geo.normalization, geo.biasbn)
        w = normalize_directions(ew, ref, geo.normalization, geo.biasbn) if geo.dims == 2 else []
        md.update(seed=int(geo.seed), normalization=geo.normalization, **extra)
    elif kind == "given":
        assert geo.given is not None
        v = normalize_directions(_given(geo.given[0], names, ref), ref, geo.normalization, geo.biasbn)
        w = [] if geo.given[1] is None else \
            normalize_directions(_given(geo.given[1], names, ref), ref, geo.normalization, geo.biasbn)
        md.update(normalization=geo.normalization)
    elif kind == "plane":
        assert geo.models is not None
        sds = [centre] + [model_state(network, geo.models[k], f"model {_LABELS[k]} of {label}") for k in (1, 2)]
        flats = [flat_float(sd, names) for sd in sds]
        # the plane's geometry is the parameters'; buffers ride along affinely (below)
        pu, pv, coords = plane_axes(*(split.params(f) for f in flats))
        nb, cu, nc = coords[1, 0], coords[2, 0], coords[2, 1]
        db, dc = split.buffers(difference(flats[1], flats[0])), split.buffers(difference(flats[2], flats[0]))
        # a*u + b*v of the parameters is A + s (B - A) + t (C - A) with s = a/nb - b cu/(nb nc),
        # t = b/nc: the buffers' directions give them the same s and t, so each model's
        # point has that model's buffers
        v = split.merge(pu, [t / nb for t in db])
        w = split.merge(pv, [tc / nc - tb * (cu / (nb * nc)) for tb, tc in zip(db, dc)])
        markers = [(_LABELS[k], float(coords[k, 0]), float(coords[k, 1])) for k in range(3)]
        default_x = _margins(min(0.0, cu), max(nb, cu), size)
        default_y = _margins(0.0, nc, size)
        md.update(normalization="none", axis_norms=[float(nb), float(nc)])
    else:  # target
        assert geo.models is not None
        b = flat_float(model_state(network, geo.models[1], f"model B of {label}"), names)
        v = difference(b, ref)  # buffers too: B's at alpha = 1
        markers = [("A", 0.0, 0.0), ("B", 1.0, 0.0)]
        default_x = (-0.5, 1.5, size)
        pref, pv_ = split.params(ref), split.params(v)
        if geo.second == "pca":
            assert geo.trajectory is not None
            trajectory = geo.trajectory

            def load_k(k: int) -> list[torch.Tensor]:
                sd = load_checkpoint(trajectory[k], what=f"checkpoint {k} of {label}", network=network)
                return split.params(flat_float(sd, names))

            pw = deviation_axis(pref, pv_, load_k, len(trajectory))
            path_xy = path_coordinates(pv_, pw, [difference(load_k(k), pref) for k in range(len(trajectory))])
            dx, dy = grid_axes(np.vstack([path_xy, [[0.0, 0.0], [1.0, 0.0]]]), size)
            default_x, default_y = (dx[0], dx[-1], size), (dy[0], dy[-1], size)
            md.update(normalization="none", second="pca")
        else:
            pw = random_directions(pref, geo.seed, geo.normalization, geo.biasbn, count=1)[0]
            md.update(seed=int(geo.seed), normalization=geo.normalization, second="random")
        w = split.merge(pw, [torch.zeros_like(t) for t in split.buffers(ref)])
    x = _axis(geo.x, default_x)
    y = _axis(geo.y, default_y) if geo.dims == 2 else np.zeros(0)
    if geo.dims == 2:
        gy, gx = np.meshgrid(y, x, indexing="ij")
        grid = np.stack([gx.reshape(-1), gy.reshape(-1)], axis=1)
    else:
        grid = np.stack([x, np.zeros_like(x)], axis=1)
    view = ViewGeometry(v, w, x, y, grid)
    if path_xy is not None:
        view.points = np.concatenate([grid, path_xy])
        view.n_path = len(path_xy)
        view.intervals = list(intervals) if intervals is not None else list(range(1, len(path_xy) + 1))
    if kind == "pca":
        convergence = "path"
    elif markers:
        convergence = "A"
    elif geo.dims == 2 and geo.x is None and geo.y is None:
        convergence = "mindspore"  # MindSpore's: the grid point at index size // 2 on both axes
    else:
        convergence = "origin"
    return _finish(view, md, markers, engine=lambda px, py: (px, py), convergence=convergence)


def _finish(view: ViewGeometry, md: dict[str, Any], markers: list[tuple[str, float, float]], *,
            engine: Any, convergence: str) -> ViewGeometry:
    """Place the markers (and the exact origin when it is the convergence point) on grid
    points or extra points, and record where in ``md["layout"]``."""
    x, y = view.x, view.y
    line = y.size == 0
    extra: list[tuple[float, float]] = []

    def index_of(px: float, py: float) -> int:
        cols = np.flatnonzero(x == px)
        rows = np.flatnonzero(y == py) if not line else np.array([0] if py == 0.0 else [], dtype=int)
        if cols.size and rows.size:
            return int(rows[0]) * x.size + int(cols[0]) if not line else int(cols[0])
        extra.append(engine(px, py))
        return len(view.points) + len(extra) - 1

    layout: dict[str, Any] = {"markers": {lab: [px, py, index_of(px, py)] for lab, px, py in markers}}
    if convergence == "origin":
        layout["convergence"] = [0.0, 0.0, index_of(0.0, 0.0)]
    elif convergence == "A":
        layout["convergence"] = layout["markers"]["A"]
    else:
        layout["convergence"] = convergence
    if extra:
        view.points = np.concatenate([view.points, np.asarray(extra, dtype=np.float64).reshape(-1, 2)])
    md["layout"] = layout
    md["x_range"] = [float(x[0]), float(x[-1]), int(x.size)]
    if not line:
        md["y_range"] = [float(y[0]), float(y[-1]), int(y.size)]
    view.md = md
    return view
