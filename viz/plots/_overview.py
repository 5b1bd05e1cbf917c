"""Many landscapes in one figure: a run's overview, and runs compared on one scale (private)."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from matplotlib.cm import ScalarMappable
from matplotlib.figure import Figure

from collector.common import InstanceOf, Interval, Options, Predicate, check_param
from landscape.result import Landscape
from viz.io import load_landscapes, n_d_refusal
from viz.plots import _scale, _style
from viz.plots._plot import plot

__all__ = ["plot_overview", "compare", "PANEL_KINDS"]

PANEL_KINDS = ("contour", "filled", "surface", "heatmap")


def _as_landscapes(value: Any, name: str, caller: str) -> list[Landscape]:
    """A Landscape, a list of them, or a path to load."""
    check_param(name, value, [InstanceOf(Landscape, description="a landscape.Landscape"), "path", Predicate(
        lambda v: isinstance(v, Sequence) and not isinstance(v, str) and len(v) > 0
        and all(isinstance(i, Landscape) for i in v), "a non-empty list of Landscape")], caller=caller)
    if isinstance(value, Landscape):
        found = [value]
    elif isinstance(value, (str, os.PathLike)):
        found = load_landscapes(value)
    else:
        found = list(value)
    drawn = [ls for ls in found if ls.dims <= 2]  # an n-D grid has no panel: plot_topology draws it
    if not drawn:
        raise ValueError(n_d_refusal(found[0], caller))
    return drawn


def _draw_panel(ls: Landscape, ax: Any, kind: str, **kw: Any) -> Any:
    if ls.dims == 1:  # a line (an interpolation, a random line) is drawn as one, whatever kind says
        return plot(ls, "line", ax=ax, log=kw.get("log", "auto"))
    return plot(ls, kind, ax=ax, **kw)


def _grid_figure(items: list[Landscape], kind: str, aspect: _style.AspectOption, ncols: int, width: float,
                 extra_width: float = 0.0) -> Figure:
    """A figure for ``ncols`` panels a row, rows as tall as their tallest panel (true aspect
    makes PCA planes wide and low)."""
    if kind == "surface":
        rows = [4.5] * math.ceil(len(items) / ncols)
        return Figure(figsize=(width * ncols + extra_width, sum(rows)), layout="constrained")
    heights = [_style.panel_height(ls, aspect, width) if ls.dims == 2 else 3.6 for ls in items]
    rows = [max(heights[k:k + ncols]) for k in range(0, len(items), ncols)]
    return Figure(figsize=(width * ncols + extra_width, sum(rows) + 0.4), layout="constrained")


def plot_overview(landscapes: Any, kind: str = "filled", *, fig: Figure | None = None, ncols: int | None = None,
                  levels: int | Any = 20, log: _style.LogOption = "auto", path: bool = True,
                  title: str | None = None, aspect: _style.AspectOption = None) -> Figure:
    """Every landscape of a run, one panel each, with its own colour scale and its path (a line
    is drawn as a line).

    Parameters
    ----------
    landscapes : list of Landscape, Landscape, or path
        The landscapes, or a summary directory / events file / HDF5 file to load.
    kind : {"contour", "filled", "surface", "heatmap"}, default="filled"
    fig : Figure, optional
        Figure to draw into; a new one sized for the grid by default.
    ncols : int, optional
        Panels per row (default: up to 3).
    levels, log, path, aspect
        As in :func:`plot_contour` (PCA and random planes with equal units on both axes
        by default; NaN/inf points marked and counted in each panel's title).
    title : str, optional
        Figure title (default: the run directory's name when loaded from a path).

    Returns
    -------
    Figure
    """
    caller = "plot_overview"
    items = _as_landscapes(landscapes, "landscapes", caller)
    check_param("kind", kind, [Options(PANEL_KINDS)], caller=caller)
    check_param("ncols", ncols, [None, Interval(int, 1, None)], caller=caller)
    check_param("path", path, ["boolean"], caller=caller)
    _style.check_aspect(aspect, caller)
    _style.check_common(caller, log=log, levels=levels, fig=fig, title=title)
    n = len(items)
    ncols = ncols or min(n, 3)
    nrows = math.ceil(n / ncols)
    if fig is None:
        fig = _grid_figure(items, kind, aspect, ncols, width=5.4)
    kw: dict[str, Any] = {"log": log, "path": path, "aspect": aspect}
    if kind in ("contour", "filled"):
        kw["levels"] = levels
    for k, ls in enumerate(items):
        projection = "3d" if kind == "surface" and ls.dims == 2 else None
        ax = fig.add_subplot(nrows, ncols, k + 1, projection=projection)
        _draw_panel(ls, ax, kind, **kw)
    if title is None and isinstance(landscapes, (str, os.PathLike)):
        title = os.path.basename(os.path.normpath(os.fspath(landscapes)))
    if title:
        fig.suptitle(title, fontsize="x-large")
    return fig


def compare(runs: Any, kind: str = "filled", *, tag: str | None = None, labels: Sequence[str] | None = None,
            fig: Figure | None = None, levels: int | Any = 20, log: _style.LogOption = "auto",
            path: bool = True, title: str | None = None, aspect: _style.AspectOption = None) -> Figure:
    """Runs side by side on ONE shared colour scale (and one colourbar).

    Parameters
    ----------
    runs : mapping of str to (Landscape, list or path), or sequence of them
        One entry per run: a Landscape, a run's landscapes, or a path to load.
    kind : {"contour", "filled", "surface", "heatmap"}, default="filled"
    tag : str, optional
        The landscape to take from each run. Default: the run's "Random" (result)
        landscape if it has one, else its last landscape.
    labels : sequence of str, optional
        Panel names (default: the mapping's keys, or the paths' names, or "run k").
    fig : Figure, optional
    levels, log, path, aspect
        As in :func:`plot_contour`; the colour range covers every run (outliers clipped).
    title : str, optional
        Figure title.

    Returns
    -------
    Figure
    """
    caller = "compare"
    check_param("runs", runs, [Predicate(lambda v: isinstance(v, (Mapping, Sequence)) and not isinstance(v, str)
                                         and len(v) > 0, "a non-empty mapping or sequence of runs")],
                caller=caller, hint="e.g. compare({'plain': 'runs/plain', 'residual': 'runs/res'}).")
    check_param("kind", kind, [Options(PANEL_KINDS)], caller=caller)
    check_param("tag", tag, [None, str], caller=caller)
    check_param("path", path, ["boolean"], caller=caller)
    _style.check_aspect(aspect, caller)
    _style.check_common(caller, log=log, levels=levels, fig=fig, title=title)
    names = list(runs.keys()) if isinstance(runs, Mapping) else None
    values = list(runs.values()) if isinstance(runs, Mapping) else list(runs)
    if labels is not None:
        check_param("labels", labels, [Predicate(lambda v: len(v) == len(values), f"a sequence of {len(values)} "
                                                 "names (one per run)")], caller=caller)
        names = [str(s) for s in labels]
    if names is None:
        names = [os.path.basename(os.path.normpath(os.fspath(v))) if isinstance(v, (str, os.PathLike))
                 else f"run {k + 1}" for k, v in enumerate(values)]
    chosen = [_pick(_as_landscapes(v, "runs", caller), tag, str(nm)) for v, nm in zip(values, names)]
    lines = [nm for ls, nm in zip(chosen, names) if ls.dims == 1]
    if lines:
        raise ValueError(f"compare draws planes on one colour scale; the landscape of {lines} is a line. HINT: "
                         "pass tag= to pick a plane, or draw lines with viz.plot_line(ls, ax=...) side by side.")
    grids = [np.asarray(ls.z, dtype=float) for ls in chosen]
    scale = _scale.color_scale(grids, log=log)
    n = len(chosen)
    if fig is None:
        fig = _grid_figure(chosen, kind, aspect, n, width=4.8, extra_width=1.2)
    projection = "3d" if kind == "surface" else None
    axes = [fig.add_subplot(1, n, k + 1, projection=projection) for k in range(n)]
    kw: dict[str, Any] = {"log": scale.log, "path": path, "colorbar": False, "vmin": scale.vmin,
                          "vmax": scale.vmax, "aspect": aspect}
    if kind in ("contour", "filled"):
        kw["levels"] = scale.levels(levels) if isinstance(levels, int) else levels
    for ax, ls, nm in zip(axes, chosen, names):
        _draw_panel(ls, ax, kind, title=f"{nm}\n{ls.tag or ''}".rstrip(), **kw)
    sm = ScalarMappable(norm=scale.norm, cmap=_scale.colormap(None))
    _scale.add_colorbar(fig, sm, axes, _style.value_label("loss", scale.log), scale.extend, scale=scale,
                        shrink=0.85, pad=0.02)
    if title:
        fig.suptitle(title, fontsize="x-large")
    return fig


def _pick(items: list[Landscape], tag: str | None, run: str) -> Landscape:
    if tag is not None:
        for ls in items:
            if ls.tag == tag:
                return ls
        raise ValueError(f"The 'tag' parameter of compare names no landscape of run {run!r}: got {tag!r}, "
                         f"available: {[ls.tag for ls in items]}.")
    for ls in reversed(items):
        if str(ls.metadata.get("decomposition", "")).lower() == "random":
            return ls
    return items[-1]
