"""Shared look of every plot: labels, titles, the colour scale, figure set-up (private).

The colour scale is the part a reader notices first. One diverging grid point (a loss of
1e6 among losses near 1) must not flatten the rest of the picture into one colour, so
:func:`color_scale` treats values beyond ``p98 + (p98 - min) / 2`` (p98 the 98th
percentile of the finite values) as outliers and ends the range at the largest value
that is not one (outliers saturate; the colourbar gets an arrow), and switches to a
logarithmic scale when the finite values still span more than three decades. NaN/inf
cells are masked.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import Any, Literal, cast

import matplotlib
import numpy as np
from matplotlib import patheffects, rcsetup
from matplotlib.axes import Axes
from matplotlib.colors import LogNorm, Normalize
from matplotlib.figure import Figure, FigureBase
from matplotlib.ticker import FuncFormatter, MaxNLocator, NullLocator

from collector.common import InstanceOf, Interval, InvalidParameterError, Options, Predicate, check_param
from landscape.result import Landscape

__all__: list[str] = []

CMAP = "viridis"
PATH_COLOR = "#e8112d"
CONVERGENCE_COLOR = "#ffffff"
LOG_RANGE = 1e3  # "auto" turns log on above this max/min ratio of the (clipped) finite values
CLIP_PERCENTILE = 98.0
PANEL_SIZE = (5.6, 4.6)
LogOption = bool | Literal["auto"]


def ensure_headless() -> None:
    """Select the Agg backend when nothing chose a backend and there is no display."""
    if os.environ.get("MPLBACKEND") or sys.platform in ("darwin", "win32"):
        return
    if os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"):
        return
    if "matplotlib.pyplot" in sys.modules:
        return
    if dict.__getitem__(matplotlib.rcParams, "backend") is getattr(rcsetup, "_auto_backend_sentinel", None):
        matplotlib.use("Agg")


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
    """``("direction 1 (PC1)", "direction 2 (PC2)")`` for PCA, "random direction k" for Random,
    and what the axes of the views through models are."""
    d = decomposition(ls).lower()
    if d == "pca":
        return "direction 1 (PC1)", "direction 2 (PC2)"
    if d == "random":
        return ("random direction", "") if ls.dims == 1 else ("random direction 1", "random direction 2")
    if d == "hessian":
        return "Hessian eigenvector 1", "Hessian eigenvector 2"
    if d == "interpolation":
        return "\u03b1: (1 \u2212 \u03b1) A + \u03b1 B", ""
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


# ---------------------------------------------------------------- colour scale
@dataclass
class ColorScale:
    """Range and normalization of one or several grids."""

    vmin: float
    vmax: float
    log: bool
    clipped: bool

    @property
    def norm(self) -> Normalize:
        return LogNorm(self.vmin, self.vmax) if self.log else Normalize(self.vmin, self.vmax)

    def levels(self, levels: int | Any) -> np.ndarray:
        if not isinstance(levels, (int, np.integer)):
            return np.asarray(levels, dtype=np.float64)
        if self.log:
            return np.geomspace(self.vmin, self.vmax, int(levels))
        return np.linspace(self.vmin, self.vmax, int(levels))

    @property
    def extend(self) -> str:
        return "max" if self.clipped else "neither"


def color_scale(grids: list[np.ndarray], log: LogOption = "auto", clip: bool = True,
                percentile: float = CLIP_PERCENTILE, vmin: float | None = None,
                vmax: float | None = None) -> ColorScale:
    """One colour range for ``grids``: outliers clipped, log when asked or when the range is huge.

    ``vmin``/``vmax`` fix an end of the range (values beyond it saturate).
    """
    finite = np.concatenate([np.asarray(g, dtype=np.float64)[np.isfinite(g)].ravel() for g in grids])
    if finite.size == 0:
        raise ValueError("The landscape has no finite value to draw (every cell is NaN or inf).")
    lo, hi_all = float(finite.min()), float(finite.max())
    hi, clipped = hi_all, False
    if vmin is not None:
        lo = float(vmin)
    if vmax is not None:
        hi, clipped = float(vmax), hi_all > float(vmax)
    elif clip and finite.size >= 4:
        p = float(np.percentile(finite, percentile))
        # values far above the bulk (beyond p + half the bulk's span) are outliers: the range
        # ends at the largest value that is not one
        limit = p + 0.5 * (p - lo) + 1e-12 * max(abs(p), 1.0)
        if hi_all > limit:
            hi, clipped = float(finite[finite <= limit].max()), True
    positive = lo > 0
    if log == "auto":
        use_log = positive and hi / lo > LOG_RANGE
    else:
        use_log = bool(log)
        if use_log and not positive:
            pos = finite[finite > 0]
            if pos.size == 0:
                raise ValueError("log=True needs positive values; every finite value is <= 0.")
            lo = float(pos.min()) if vmin is None or vmin <= 0 else lo
    if hi <= lo:  # a flat grid
        pad = abs(lo) * 0.05 or 1.0
        lo, hi = (lo / 2, lo * 2) if use_log else (lo - pad, hi + pad)
    return ColorScale(lo, hi, use_log, clipped)


def masked(z: np.ndarray, scale: ColorScale | None = None) -> np.ma.MaskedArray:
    """NaN/inf (and non-positive values on a log scale) masked."""
    bad = ~np.isfinite(z)
    if scale is not None and scale.log:
        bad |= ~(z > 0)
    return np.ma.masked_array(z, mask=bad)


def colormap(cmap: Any = None) -> Any:
    """The colormap with NaN/inf cells shown light grey."""
    cm = matplotlib.colormaps[cmap] if isinstance(cmap, str) else (cmap or matplotlib.colormaps[CMAP])
    return cm.with_extremes(bad="#d9d9d9")


# ---------------------------------------------------------------- figures
def new_axes(ax: Axes | None, fig: Figure | None, projection: str | None = None,
             figsize: tuple[float, float] = PANEL_SIZE) -> tuple[Figure, Axes]:
    """Use ``ax``, or add one axes to ``fig``, or make a new Figure (never pyplot state)."""
    if ax is not None:
        if projection == "3d" and getattr(ax, "name", "") != "3d":
            raise ValueError("The 'ax' parameter must be a 3D Axes (projection='3d') for a surface plot. "
                             f"Got a {getattr(ax, 'name', type(ax).__name__)!r} Axes instead.")
        return cast(Figure, ax.figure), ax
    if fig is None:
        fig = Figure(figsize=figsize, layout="constrained")
    return fig, fig.add_subplot(projection=projection)


def add_colorbar(fig: Figure, mappable: Any, ax: Any, label: str, extend: str | None = None,
                 scale: ColorScale | None = None) -> Any:
    """A colourbar with round tick values and ``label``."""
    kw: dict[str, Any] = {"extend": extend} if extend else {}
    three_d = getattr(ax, "name", "") == "3d"
    cb = fig.colorbar(mappable, ax=ax, shrink=0.75 if three_d else 0.9, pad=0.1 if three_d else 0.02, **kw)
    cb.set_label(label)
    if scale is not None:
        set_nice_ticks(cb, scale)
    return cb


def nice_ticks(scale: ColorScale) -> np.ndarray:
    """Round tick values inside the colour range (1-2-5 per decade on a log scale)."""
    lo, hi = scale.vmin, scale.vmax
    if scale.log:
        for mults in ((1,), (1, 2, 5), (1, 1.5, 2, 3, 4, 5, 6, 8)):
            dec = np.arange(np.floor(np.log10(lo)), np.ceil(np.log10(hi)) + 1)
            cand = np.array(sorted(m * 10.0 ** d for d in dec for m in mults))
            ticks = cand[(cand >= lo * (1 - 1e-9)) & (cand <= hi * (1 + 1e-9))]
            if ticks.size >= 4:
                return ticks
        return np.geomspace(lo, hi, 4)
    ticks = np.asarray(MaxNLocator(nbins=7, steps=[1, 2, 2.5, 5, 10]).tick_values(lo, hi))
    return ticks[(ticks >= lo - 1e-12 * abs(hi - lo)) & (ticks <= hi + 1e-12 * abs(hi - lo))]


def set_nice_ticks(cb: Any, scale: ColorScale) -> None:

    cb.set_ticks(nice_ticks(scale))
    cb.ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:.3g}"))
    if scale.log:
        cb.ax.yaxis.set_minor_locator(NullLocator())


def halo(width: float = 2.5, color: str = "white") -> list:

    return [patheffects.withStroke(linewidth=width, foreground=color)]
