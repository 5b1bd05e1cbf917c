"""Shared look of every plot: labels, titles, the aspect, figure set-up (private).

The colour scale is ``_scale``'s, the marks of NaN/inf values and clamped points ``_marks``',
the centre and its name :mod:`viz.io`'s (the report's too). Nothing here
touches matplotlib's global state: figures are ``Figure`` objects (no pyplot, no backend
switch), so a caller's backend and open figures are theirs.
"""

from __future__ import annotations

from typing import Any, Literal, cast

import numpy as np
from matplotlib import patheffects
from matplotlib.axes import Axes
from matplotlib.figure import Figure, FigureBase

from collector.common import InstanceOf, Interval, InvalidParameterError, Options, Predicate, check_param
from landscape.result import Landscape

__all__: list[str] = []

PATH_COLOR = "#e8112d"
PANEL_SIZE = (5.6, 4.6)
LogOption = bool | Literal["auto"]
AspectOption = Literal["equal", "auto"] | None
#: views whose two axes measure the same kind of step in parameter space (the same
#: normalization on both), drawn with equal units by default
TRUE_ASPECT = ("pca", "plane", "random", "hessian")


# ---------------------------------------------------------------- validation
def check_common(caller: str, *, log: Any = "auto", levels: Any = 20, ax: Any = None, fig: Any = None,
                 cmap: Any = None, title: Any = None, vmin: Any = None, vmax: Any = None) -> None:
    """Validate the options every plot function shares."""
    check_param("log", log, ["boolean", Options(["auto"])], caller=caller)
    check_param("levels", levels, [Interval(int, 2, None), Predicate(
        lambda v: not isinstance(v, (str, bytes)) and np.ndim(v) == 1 and len(v) >= 2
        and bool(np.all(np.diff(np.asarray(v, dtype=float)) > 0)),
        "an increasing sequence of at least 2 numbers")], caller=caller)
    check_param("ax", ax, [None, InstanceOf(Axes)], caller=caller)
    check_param("fig", fig, [None, InstanceOf(FigureBase, description="a matplotlib Figure or SubFigure")],
                caller=caller)
    check_param("cmap", cmap, [None, str, Predicate(lambda v: hasattr(v, "N") and callable(v), "a Colormap")],
                caller=caller)
    check_param("title", title, [None, str], caller=caller)
    for name, v in (("vmin", vmin), ("vmax", vmax)):
        check_param(name, v, [None, Interval(float, None, None)], caller=caller)
    if vmin is not None and vmax is not None and not vmin < vmax:
        raise InvalidParameterError(f"The 'vmin' parameter of {caller} must be below vmax. "
                                    f"Got vmin={vmin!r}, vmax={vmax!r} instead.")


# ---------------------------------------------------------------- text
def decomposition(ls: Landscape) -> str:
    d = str(ls.metadata.get("decomposition", "") or "")
    if not d and ls.path is not None:
        return "PCA"
    return d


def axis_labels(ls: Landscape) -> tuple[str, str]:
    """``("PC1: 94.0 %", "PC2: 5.6 %")`` for PCA (Li et al.'s labels, from the metadata's
    ``explained_variance_ratio``; ``"direction 1 (PC1)"`` without it), "random direction k"
    for Random, and what the axes of the views through models are."""
    d = decomposition(ls).lower()
    if d == "pca":
        ratio = np.ravel(np.asarray(ls.metadata.get("explained_variance_ratio", []), dtype=float))
        if ratio.size >= 2 and np.all(np.isfinite(ratio[:2])):
            return f"PC1: {100 * ratio[0]:.1f} %", f"PC2: {100 * ratio[1]:.1f} %"
        return "direction 1 (PC1)", "direction 2 (PC2)"
    if d == "random":
        return ("random direction", "") if ls.dims == 1 else ("random direction 1", "random direction 2")
    if d == "hessian":
        return "Hessian eigenvector 1", "Hessian eigenvector 2"
    if d == "interpolation":
        return "\u03b1: (1 \u2212 \u03b1) A + \u03b1 B", ""
    if d == "curve":
        return "t along the curve from A to B", ""
    if d == "plane":
        return "distance along B \u2212 A", "distance towards C (orthogonal)"
    if d == "target":
        second = "trajectory direction \u22a5 B \u2212 A" if ls.metadata.get("second") == "pca" else "random direction"
        return "\u03b1 along B \u2212 A", second
    return ("direction", "") if ls.dims == 1 else ("direction 1", "direction 2")


def unit(ls: Landscape) -> str:
    return str(ls.metadata.get("unit") or "step")


def path_range_text(ls: Landscape) -> str:
    """``"epochs 1-5"`` for a path over intervals 1..5."""
    if ls.path is None or not len(ls.path.intervals):
        return ""
    iv = [int(i) for i in ls.path.intervals]
    u = unit(ls)
    return f"{u} {iv[0]}" if len(iv) == 1 else f"{u}s {iv[0]}\u2013{iv[-1]}"


def title(ls: Landscape, surface: str = "loss") -> str:
    """Tag, decomposition and the interval, e.g. ``"landscape_[1, 5] \u2014 PCA, epochs 1\u20135"``."""
    head = ls.tag or "loss landscape"
    d = decomposition(ls)
    parts = []
    if d.lower() == "pca":
        parts.append("PCA")
        if ls.path is not None:
            parts.append(path_range_text(ls))
    elif d.lower() == "random":
        parts.append("random direction" if ls.dims == 1 else "random directions")
    elif d.lower() == "interpolation":
        parts.append("interpolation A \u2192 B")
    elif d.lower() == "plane":
        parts.append("plane through A, B, C")
    elif d.lower() == "target":
        parts.append("target direction B \u2212 A")
    elif d:
        parts.append(d)
    if surface != "loss":
        parts.append(surface)
    note = ls.metadata.get("note")  # e.g. the pipeline's "centre at chance level" warning
    return head + (" \u2014 " + ", ".join(parts) if parts else "") + (f"\n{note}" if note else "")


def value_label(surface: str, log: bool) -> str:
    return f"{surface} (log scale)" if log else surface


def check_aspect(aspect: Any, caller: str) -> None:
    check_param("aspect", aspect, [None, Options(["equal", "auto"])], caller=caller,
                hint="None draws PCA, random, Hessian planes and planes through models with equal units "
                "on both axes.")


def true_aspect(ls: Landscape, aspect: AspectOption) -> bool:
    """Equal data units on both axes: asked for, or by default for the views whose two axes
    are the same kind of step (PCA, random and Hessian planes, a plane through three models)."""
    if aspect is not None:
        return aspect == "equal"
    return ls.dims == 2 and decomposition(ls).lower() in TRUE_ASPECT


# ---------------------------------------------------------------- figures
def panel_height(ls: Landscape, aspect: AspectOption, width: float = PANEL_SIZE[0]) -> float:
    """A panel's height for ``width``: the plot's own proportions when it has true aspect."""
    if not true_aspect(ls, aspect):
        return PANEL_SIZE[1]
    ratio = float(np.ptp(ls.y)) / (float(np.ptp(ls.x)) or 1.0)
    return float(np.clip((width - 1.6) * ratio + 1.4, 2.6, PANEL_SIZE[1] + 1.0))


def new_axes(ax: Axes | None, fig: Figure | None, projection: str | None = None,
             figsize: tuple[float, float] = PANEL_SIZE, ls: Landscape | None = None,
             aspect: AspectOption = None) -> tuple[Figure, Axes]:
    """Use ``ax``, or add one axes to ``fig``, or make a new Figure (never pyplot state), as
    high as ``ls``'s proportions need when it is drawn with true aspect."""
    if ax is not None:
        if projection == "3d" and getattr(ax, "name", "") != "3d":
            raise ValueError("The 'ax' parameter must be a 3D Axes (projection='3d') for a surface plot. "
                             f"Got a {getattr(ax, 'name', type(ax).__name__)!r} Axes instead.")
        return cast(Figure, ax.figure), ax
    if fig is None:
        if ls is None or projection == "3d":
            fig = Figure(figsize=figsize, layout="constrained")
        else:
            fig = Figure(figsize=(figsize[0], panel_height(ls, aspect, figsize[0])), layout="constrained")
    return fig, fig.add_subplot(projection=projection)


def halo(width: float = 2.5, color: str = "white") -> list:

    return [patheffects.withStroke(linewidth=width, foreground=color)]
