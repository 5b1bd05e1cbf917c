"""Where a landscape's points lie: one builder per view, in a registry (private).

The engine evaluates ``centre + a*v + b*w`` at points ``(a, b)``. Every view is put in
that form here by its own builder (:data:`VIEWS`, by :attr:`Geometry.kind`), and the rest
(chunks, workers, the resumable store) is the same for all of them:

* a plane of random, PCA, Hessian or given directions: the centre and two directions;
* a line (``dims=1``, random or one given direction): ``w = 0`` and points ``(a, 0)``.
  The engine's cost per point does not depend on ``w``, and the zero direction is not
  stored: ``landscapes.h5`` keeps an empty ``w``;
* the interpolation between models A and B: the centre's moved parameters are zero,
  ``v = A``, ``w = B`` and the point of ``alpha`` is ``(1 - alpha, alpha)``, so the
  parameters at ``alpha = 0`` and ``1`` are A's and B's exactly (``0 + 1*A + 0*B``),
  where ``A + 1*(B - A)`` would differ from B by a rounding. Buffers (batch-norm
  statistics) move the same way; parameters left still are A's;
* the plane through A, B, C (:func:`landscape.geometry._models.plane_axes`): centre A,
  orthonormal ``v``, ``w``; the models' points are exact up to float32 rounding of
  ``A + a*v + b*w``;
* the target direction: centre A, ``v = B - A`` and a random or principal second axis.

Markers (the models a view passes through) and the centre (``(0, 0)``: the trained
weights, or model A) are evaluated at exactly their coordinates: a grid or path point
when one sits there, else an extra point after the grid (and after a path). ``layout``
in the metadata says where each is, so an interrupted run resumes with the same points.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np
import torch
from torch import nn

from collector.common import strip_wrapper_prefixes
from collector.trajectory import load_checkpoint
from landscape.geometry._directions import (
    SeededDirections,
    axis_values,
    grid_axes,
    normalize_directions,
    path_coordinates,
    random_directions,
)
from landscape.geometry._models import deviation_axis, difference, plane_axes
from landscape.geometry._runs import centre_description, mean_state, project, run_items
from landscape.geometry._spec import Geometry
from landscape.geometry._state import fit_state, flat_float
from landscape.geometry._streamed_pca import trajectory_pca

__all__ = ["ViewGeometry", "ViewInputs", "VIEWS", "view_geometry", "centre_state", "model_state", "DECOMPOSITION",
           "HessianFn"]

DECOMPOSITION = {"pca": "PCA", "random": "Random", "given": "Given", "hessian": "Hessian",
                 "interpolation": "Interpolation", "plane": "Plane", "target": "Target"}
_LABELS = "ABC"
_T = TypeVar("_T")
#: ``hessian(k) -> (directions, metadata)``: the top ``k`` eigenvectors at the centre (unit length).
HessianFn = Callable[[int], tuple[list[list[torch.Tensor]], dict[str, Any]]]


@dataclass
class ViewGeometry:
    """A view in the engine's form; see the module docstring.

    Attributes
    ----------
    v, w : list of Tensor
        The directions (``w`` empty for a line: zero); both empty when ``recipe`` gives them.
    x, y : ndarray
        The axes as shown (``y`` empty for a line).
    points : ndarray of shape (m, 2)
        The engine's ``(a, b)``: the grid (row-major over y, then x), the path, extra points.
    n_path : int
    intervals : list of int or None
        The path's step or epoch numbers.
    md : dict
        What the view adds to the metadata, ``layout`` included.
    recipe : SeededDirections, optional
        Random directions as their recipe (random views): drawn by the engine, not held here.
    more : list of list of Tensor
        The third and later directions of an n-D grid (empty for a line or a plane); its points
        then have one coordinate per direction.
    """

    v: list[torch.Tensor]
    w: list[torch.Tensor]
    x: np.ndarray
    y: np.ndarray
    points: np.ndarray
    n_path: int = 0
    intervals: list[int] | None = None
    md: dict[str, Any] = field(default_factory=dict)
    recipe: SeededDirections | None = None
    more: list[list[torch.Tensor]] = field(default_factory=list)


@dataclass
class ViewInputs:
    """What every view builder gets (inputs validated by the entry points)."""

    network: nn.Module
    geo: Geometry
    names: Sequence[str]
    centre: Mapping[str, torch.Tensor]
    label: str
    intervals: list[int] | None
    hessian: HessianFn | None = None

    @property
    def ref(self) -> list[torch.Tensor]:
        """The centre's moved tensors (float32)."""
        return flat_float(self.centre, self.names)

    def model(self, k: int) -> dict[str, torch.Tensor]:
        assert self.geo.models is not None
        return model_state(self.network, self.geo.models[k], f"model {_LABELS[k]} of {self.label}")

    def checkpoint(self, k: int) -> dict[str, torch.Tensor]:
        assert self.geo.trajectory is not None
        return load_checkpoint(self.geo.trajectory[k], what=f"checkpoint {k} of {self.label}", network=self.network)

    def run_checkpoint(self, run: str, k: int, item: Any) -> dict[str, torch.Tensor]:
        return load_checkpoint(item, what=f"checkpoint {k} of run {run!r} of {self.label}", network=self.network)


@dataclass
class _Layout:
    """A view's directions and where its grid, path and markers are, before the points are placed."""

    v: list[torch.Tensor]
    w: list[torch.Tensor]
    md: dict[str, Any]
    default_x: tuple[float, float, int]
    default_y: tuple[float, float, int]
    path_xy: np.ndarray | None = None
    markers: list[tuple[str, float, float]] = field(default_factory=list)
    recipe: SeededDirections | None = None
    more: list[list[torch.Tensor]] = field(default_factory=list)
    #: The later axes' defaults (an n-D grid's): ``(-1, 1, size)`` each unless given.
    more_axes: list[tuple[float, float, int]] = field(default_factory=list)


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
        if geo.kind == "interpolation":
            moved = set(names)
            centre = {k: (torch.zeros_like(t) if k in moved else t) for k, t in centre.items()}
        return centre
    if geo.runs is not None:
        return _runs_centre(network, geo, label)
    if geo.trajectory is not None:
        return load_checkpoint(geo.trajectory[-1], what=f"checkpoint {len(geo.trajectory) - 1} of {label}",
                               network=network)
    if geo.centre is not None:
        return fit_state(network, geo.centre)
    # the network's own tensors where they are: no copy (a CUDA network's centre copied to the host and
    # back to the device by the engine cost one model size on each)
    return {k: t.detach() for k, t in network.state_dict().items()}


def _runs_centre(network: nn.Module, geo: Geometry, label: str) -> Mapping[str, torch.Tensor]:
    """The centre of a plane of several runs: their start (their saved initial weights when given),
    their mean or one run's end."""
    assert geo.runs is not None
    runs = geo.runs

    def load(run: str, k: int) -> dict[str, torch.Tensor]:
        return load_checkpoint(runs[run][k], what=f"checkpoint {k} of run {run!r} of {label}", network=network)

    first = next(iter(runs))
    if geo.centre_on == "start" and geo.run_start is not None:
        return load_checkpoint(geo.run_start.checkpoint, what=f"the start of {label} ({geo.run_start.description})",
                               network=network)
    if geo.centre_on == "start":
        return load(first, 0)
    if geo.centre_on == "mean":
        return mean_state([functools.partial(load, r, k) for r, k, _ in run_items(runs)])
    run = geo.centre_on or first
    return load(run, len(runs[run]) - 1)


class _Split:
    """Parameters and buffers of a list aligned with ``names`` (buffers move only on views
    through models, after the parameters)."""

    def __init__(self, network: nn.Module, names: Sequence[str]) -> None:
        buffers = {n for n, _ in network.named_buffers()}
        self.is_param = [n not in buffers for n in names]

    def params(self, ts: Sequence[_T]) -> list[_T]:
        return [t for t, p in zip(ts, self.is_param) if p]

    def buffers(self, ts: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        return [t for t, p in zip(ts, self.is_param) if not p]

    def merge(self, params: Sequence[torch.Tensor], buffers: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        it_p, it_b = iter(params), iter(buffers)
        return [(next(it_p) if p else next(it_b)).to(torch.float32) for p in self.is_param]


def _given(direction: Mapping[str, Any], names: Sequence[str], ref: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    d = strip_wrapper_prefixes(dict(direction))
    missing = [k for k in names if k not in d]
    if missing:
        raise ValueError(f"The 'directions' dicts lack the parameters {missing}.")
    return [torch.as_tensor(d[k]).detach().to("cpu", torch.float32).reshape(r.shape) for k, r in zip(names, ref)]


def _margins(lo: float, hi: float, size: int) -> tuple[float, float, int]:
    m = 0.2 * (hi - lo)
    return (lo - m, hi + m, size)


def _square(size: int) -> tuple[float, float, int]:
    return (-1.0, 1.0, size)


# -- the views ------------------------------------------------------------------------------
def _pca(vi: ViewInputs) -> _Layout:
    geo, ref = vi.geo, vi.ref
    if geo.runs is not None:
        return _shared_pca(vi)
    assert geo.trajectory is not None
    # streamed from the files a block of tensors at a time (solver "auto"/"gram"): memory O(block + n²)
    k = max(2, int(geo.dims))
    res = trajectory_pca(geo.trajectory, vi.names, ref, network=vi.network, label=vi.label, method=geo.pca_method,
                         solver=geo.pca_solver, normalization=geo.normalization, components=k)
    path_xy = res["coords"]
    path_xy[-1] = 0.0
    extents = [grid_axes(path_xy[:, [j, j]], geo.size)[0] for j in range(k)]  # each component's, 0.2 margins
    md = dict(pca_method=geo.pca_method, explained_variance_ratio=res["explained_variance_ratio"][:k],
              singular_values=res["singular_values"][:k], normalization=geo.normalization,
              movement_in_plane=float(res["share"]),
              path_distance=[round(float(d), 6) for d in res["distance"]])
    lay = _Layout(res["v"], res["w"], md, (extents[0][0], extents[0][-1], geo.size),
                  (extents[1][0], extents[1][-1], geo.size), path_xy=path_xy)
    if k > 2:  # an n-D grid: the path is not evaluated (a plane's points), its coordinates are recorded
        lay.more, lay.path_xy = list(res["more"]), None
        lay.more_axes = [(e[0], e[-1], geo.size) for e in extents[2:]]
        md["path_coordinates"] = [[float(c) for c in row] for row in path_xy]
    return lay


def _shared_pca(vi: ViewInputs) -> _Layout:
    """The PCA of every checkpoint of several runs around the chosen centre (a shared plane);
    checkpoints equal to the centre (a common start, the centre run's end) add nothing and are
    left out. Their paths are placed by :func:`_with_runs`."""
    geo, ref = vi.geo, vi.ref
    assert geo.runs is not None
    items = run_items(geo.runs)
    kept = [it for it in items
            if not all(torch.equal(a, b) for a, b in zip(flat_float(vi.run_checkpoint(*it), vi.names), ref))]
    if len(kept) < 2:
        raise ValueError(f"{vi.label}: the runs' checkpoints differ from the centre in {len(kept)} place(s); a "
                         "shared PCA plane needs at least 2.")
    # the centre is last (never read: ``ref``), as for one trajectory
    res = trajectory_pca([it[2] for it in kept] + [None], vi.names, ref, network=vi.network, label=vi.label,
                         method=geo.pca_method, solver=geo.pca_solver, normalization=geo.normalization,
                         what=[f"checkpoint {k} of run {run!r} of {vi.label}" for run, k, _ in kept] + [vi.label])
    md = dict(pca_method=geo.pca_method, explained_variance_ratio=res["explained_variance_ratio"][:2],
              singular_values=res["singular_values"][:2], normalization=geo.normalization,
              centre_on=geo.centre_on or next(iter(geo.runs)))
    return _Layout(res["v"], res["w"], md, _square(geo.size), _square(geo.size))


def _with_runs(vi: ViewInputs, lay: _Layout) -> _Layout:
    """Every run's checkpoints projected on the view's plane (or line), with their distances from it;
    a PCA plane's default axes cover the paths."""
    geo, ref = vi.geo, vi.ref
    assert geo.runs is not None
    items = run_items(geo.runs)
    # random directions are a recipe: drawn whole here, only while the runs are projected
    v, w = lay.recipe.drawn(ref) if lay.recipe is not None else (lay.v, lay.w)
    coords, distance, share = project(v, w, ref, [functools.partial(_run_flat, vi, it) for it in items])
    del v, w
    lay.path_xy = coords
    counts = {name: len(ckpts) for name, ckpts in geo.runs.items()}
    lay.md["runs"] = counts
    lay.md["movement_in_plane"] = float(share)  # of every checkpoint's squared distance from the centre
    lay.md["centre_description"] = centre_description(geo.centre_on, list(geo.runs), geo.run_start)
    lay.md["path_distance"], o = {}, 0
    for name, c in counts.items():  # relative distance of each checkpoint from the plane
        lay.md["path_distance"][name] = [round(float(d), 6) for d in distance[o:o + c]]
        o += c
    if geo.kind == "pca":
        dx, dy = grid_axes(np.vstack([coords, [[0.0, 0.0]]]), geo.size)
        lay.default_x, lay.default_y = (dx[0], dx[-1], geo.size), (dy[0], dy[-1], geo.size)
    return lay


def _run_flat(vi: ViewInputs, item: tuple[str, int, Any]) -> list[torch.Tensor]:
    return flat_float(vi.run_checkpoint(*item), vi.names)


def _random(vi: ViewInputs) -> _Layout:
    """Seeded directions, as their recipe: the engine draws each tensor (once, or at every read). An n-D
    grid's are drawn here and held (axis k's draw is the recipe's: its first two are the plane's)."""
    geo = vi.geo
    recipe = SeededDirections(int(geo.seed), geo.normalization, geo.biasbn, tuple(vi.names), int(geo.dims))
    if geo.dims > 2:
        v, w, *more = recipe.draw_axes(vi.ref)
        return _Layout(v, w, dict(recipe.metadata()), _square(geo.size), _square(geo.size), more=more)
    return _Layout([], [], dict(recipe.metadata()), _square(geo.size), _square(geo.size), recipe=recipe)


def _hessian(vi: ViewInputs) -> _Layout:
    """The top eigenvectors at the centre (one per axis), rescaled like random directions."""
    geo, ref = vi.geo, vi.ref
    assert vi.hessian is not None
    vectors, extra = vi.hessian(max(2, int(geo.dims)))
    dirs = [normalize_directions(e, ref, geo.normalization, geo.biasbn) for e in vectors[:max(1, int(geo.dims))]]
    v, w, more = dirs[0], (dirs[1] if geo.dims >= 2 else []), dirs[2:]
    return _Layout(v, w, dict(seed=int(geo.seed), normalization=geo.normalization, **extra), _square(geo.size),
                   _square(geo.size), more=more)


def _given_view(vi: ViewInputs) -> _Layout:
    geo, ref = vi.geo, vi.ref
    assert geo.given is not None
    v = normalize_directions(_given(geo.given[0], vi.names, ref), ref, geo.normalization, geo.biasbn)
    w = [] if geo.given[1] is None else \
        normalize_directions(_given(geo.given[1], vi.names, ref), ref, geo.normalization, geo.biasbn)
    return _Layout(v, w, dict(normalization=geo.normalization), _square(geo.size), _square(geo.size))


def _plane(vi: ViewInputs) -> _Layout:
    geo, split = vi.geo, _Split(vi.network, vi.names)
    flats = [vi.ref] + [flat_float(vi.model(k), vi.names) for k in (1, 2)]
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
    return _Layout(v, w, dict(normalization="none", axis_norms=[float(nb), float(nc)]),
                   _margins(min(0.0, cu), max(nb, cu), geo.size), _margins(0.0, nc, geo.size), markers=markers)


def _target(vi: ViewInputs) -> _Layout:
    geo, ref, split = vi.geo, vi.ref, _Split(vi.network, vi.names)
    v = difference(flat_float(vi.model(1), vi.names), ref)  # buffers too: B's at alpha = 1
    pref, pv_ = split.params(ref), split.params(v)
    default_x, default_y = (-0.5, 1.5, geo.size), _square(geo.size)
    path_xy = None
    if geo.second == "pca":
        assert geo.trajectory is not None

        def load_k(k: int) -> list[torch.Tensor]:
            return split.params(flat_float(vi.checkpoint(k), vi.names))

        n = len(geo.trajectory)
        pw = deviation_axis(pref, pv_, load_k, n)
        path_xy = path_coordinates(pv_, pw, [difference(load_k(k), pref) for k in range(n)])
        dx, dy = grid_axes(np.vstack([path_xy, [[0.0, 0.0], [1.0, 0.0]]]), geo.size)
        default_x, default_y = (dx[0], dx[-1], geo.size), (dy[0], dy[-1], geo.size)
        md: dict[str, Any] = dict(normalization="none", second="pca")
    else:
        pw = random_directions(pref, geo.seed, geo.normalization, geo.biasbn, count=1,
                               names=split.params(list(vi.names)))[0]
        md = dict(seed=int(geo.seed), normalization=geo.normalization, second="random")
    w = split.merge(pw, [torch.zeros_like(t) for t in split.buffers(ref)])
    return _Layout(v, w, md, default_x, default_y, path_xy=path_xy, markers=[("A", 0.0, 0.0), ("B", 1.0, 0.0)])


def _interpolation(vi: ViewInputs) -> ViewGeometry:
    """The line from A to B: engine point ``(1 - alpha, alpha)`` of ``v = A``, ``w = B``, centre 0."""
    geo = vi.geo
    v, w = flat_float(vi.model(0), vi.names), flat_float(vi.model(1), vi.names)
    x = axis_values(geo.x if geo.x is not None else (-0.5, 1.5, geo.size))
    view = ViewGeometry(v, w, x, np.zeros(0), np.stack([1.0 - x, x], axis=1))
    md = {"decomposition": DECOMPOSITION["interpolation"], "dims": 1, "normalization": "none"}
    return _finish(view, md, [("A", 0.0, 0.0), ("B", 1.0, 0.0)], engine=lambda px, py: (1.0 - px, px),
                   convergence="A")


def _built(build: Callable[[ViewInputs], _Layout], vi: ViewInputs) -> ViewGeometry:
    lay = build(vi)
    return _placed(vi, _with_runs(vi, lay) if vi.geo.runs is not None else lay)


def _placed(vi: ViewInputs, lay: _Layout) -> ViewGeometry:
    """The grid (and path) of a view whose engine coordinates are its display coordinates."""
    geo = vi.geo
    x = axis_values(geo.x if geo.x is not None else lay.default_x)
    y = axis_values(geo.y if geo.y is not None else lay.default_y) if geo.dims >= 2 else np.zeros(0)
    if geo.dims > 2:
        return _grid(vi, lay, x, y)
    if geo.dims == 2:
        gy, gx = np.meshgrid(y, x, indexing="ij")
        grid = np.stack([gx.reshape(-1), gy.reshape(-1)], axis=1)
    else:
        grid = np.stack([x, np.zeros_like(x)], axis=1)
    view = ViewGeometry(lay.v, lay.w, x, y, grid, recipe=lay.recipe)
    if lay.path_xy is not None:
        view.points = np.concatenate([grid, lay.path_xy])
        view.n_path = len(lay.path_xy)
        if vi.intervals is not None:
            view.intervals = list(vi.intervals)
        elif geo.runs is not None:  # each run's checkpoints numbered from 1
            view.intervals = [k + 1 for _, k, _ in run_items(geo.runs)]
        else:
            view.intervals = list(range(1, len(lay.path_xy) + 1))
    if geo.kind == "pca" and geo.runs is None:
        convergence = "path"
    elif lay.markers:
        convergence = "A"
    elif geo.dims == 2 and geo.x is None and geo.y is None and geo.kind != "pca":
        convergence = "mindspore"  # MindSpore's: the grid point at index size // 2 on both axes
    else:
        convergence = "origin"
    md = {"decomposition": DECOMPOSITION[geo.kind], "dims": int(geo.dims), **lay.md}
    return _finish(view, md, lay.markers, engine=lambda px, py: (px, py), convergence=convergence)


def _grid(vi: ViewInputs, lay: _Layout, x: np.ndarray, y: np.ndarray) -> ViewGeometry:
    """An n-D grid: ``x``, ``y`` and ``linspace(-1, 1, size)`` along each later direction (a PCA grid: the
    path's extent along it with 0.2 margins); its points
    ``(a_1, ..., a_n)`` in C order over ``(a_n, ..., a_2, a_1)`` (``x`` fastest), so each value of the
    later axes is one plane of points after another. The centre is a grid point when every axis holds 0,
    else an extra point after the grid."""
    geo = vi.geo
    later = [axis_values(a) for a in lay.more_axes] if lay.more_axes else \
        [axis_values(_square(geo.size)) for _ in lay.more]
    axes = [x, y, *later]
    mesh = np.meshgrid(*axes[::-1], indexing="ij")
    points = np.stack([m.reshape(-1) for m in mesh[::-1]], axis=1)
    view = ViewGeometry(lay.v, lay.w, x, y, points, more=lay.more)
    hit = np.flatnonzero(np.all(points == 0.0, axis=1))
    if hit.size:
        centre = int(hit[0])
    else:
        centre = len(points)
        view.points = np.concatenate([points, np.zeros((1, points.shape[1]))])
    md = {"decomposition": DECOMPOSITION[geo.kind], "dims": int(geo.dims), **lay.md}
    md["layout"] = {"markers": {}, "centre": [0.0, 0.0, centre], "convergence": [0.0, 0.0, centre]}
    md["x_range"] = [float(x[0]), float(x[-1]), int(x.size)]
    md["y_range"] = [float(y[0]), float(y[-1]), int(y.size)]
    md["axis_ranges"] = [[float(a[0]), float(a[-1]), int(a.size)] for a in later]
    view.md = md
    return view


#: The views by :attr:`Geometry.kind`: each builds its directions, axes, points and markers.
VIEWS: dict[str, Callable[[ViewInputs], ViewGeometry]] = {
    "interpolation": _interpolation,
    **{kind: functools.partial(_built, build) for kind, build in (
        ("pca", _pca), ("random", _random), ("hessian", _hessian), ("given", _given_view), ("plane", _plane),
        ("target", _target))},
}


def view_geometry(vi: ViewInputs) -> ViewGeometry:
    """Directions, axes, points and markers of the view ``vi.geo`` (see :data:`VIEWS`)."""
    return VIEWS[vi.geo.kind](vi)


def _finish(view: ViewGeometry, md: dict[str, Any], markers: list[tuple[str, float, float]], *,
            engine: Any, convergence: str) -> ViewGeometry:
    """Place the markers and the centre on existing points or extra points, and record where in
    ``md["layout"]`` (the centre: ``(0, 0)``, the trained weights or model A)."""
    x, y = view.x, view.y
    extra: list[tuple[float, float]] = []

    def index_of(px: float, py: float) -> int:
        ex, ey = engine(px, py)
        pts = view.points
        hit = np.flatnonzero((pts[:, 0] == ex) & (pts[:, 1] == ey))
        if hit.size:
            return int(hit[0])
        if (ex, ey) in extra:
            return len(pts) + extra.index((ex, ey))
        extra.append((ex, ey))
        return len(pts) + len(extra) - 1

    layout: dict[str, Any] = {"markers": {lab: [px, py, index_of(px, py)] for lab, px, py in markers}}
    layout["centre"] = [0.0, 0.0, index_of(0.0, 0.0)]
    if convergence == "origin":
        layout["convergence"] = layout["centre"]
    elif convergence == "A":
        layout["convergence"] = layout["markers"]["A"]
    else:
        layout["convergence"] = convergence
    if extra:
        view.points = np.concatenate([view.points, np.asarray(extra, dtype=np.float64).reshape(-1, 2)])
    md["layout"] = layout
    md["x_range"] = [float(x[0]), float(x[-1]), int(x.size)]
    if y.size:
        md["y_range"] = [float(y[0]), float(y[-1]), int(y.size)]
    view.md = md
    return view
