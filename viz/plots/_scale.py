"""The colour scale of every plot: its range, log or linear, its colour bar (private).

The range and the choice of a log scale are :func:`viz.io.value_scale`'s rule, which the
interactive report follows too (one picture of a landscape, whatever draws it): outliers
(values beyond ``p98 + (p98 - min) / 2``) saturate and the colour bar gets an arrow;
``log="auto"`` switches to a logarithmic scale when the finite values span more than a
decade, value axes of lines only above three decades. Here that range becomes matplotlib's
norm and colour bar. A range narrower than :data:`NARROW` of its magnitude is printed on
the colour bar (0.640 to 0.644 looks like a steep slope otherwise). NaN/inf cells are
masked here and marked by ``_marks``.
"""

from __future__ import annotations

from typing import Any

import matplotlib
import numpy as np
from matplotlib.axes import Axes
from matplotlib.colors import LogNorm, Normalize
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator, NullLocator

from viz.io import AXIS_LOG_RANGE, CLIP_PERCENTILE, LOG_RANGE, NARROW, ValueScale, log_ticks, tick_labels, value_scale

__all__ = ["ColorScale", "color_scale", "masked", "colormap", "add_colorbar", "nice_ticks", "set_nice_ticks",
           "tick_labels", "range_note", "LOG_RANGE", "AXIS_LOG_RANGE", "NARROW"]

CMAP = "viridis"


class ColorScale(ValueScale):
    """:class:`viz.io.ValueScale` (range, log or linear, clipped) with its matplotlib norm."""

    @property
    def norm(self) -> Normalize:
        return LogNorm(self.vmin, self.vmax) if self.log else Normalize(self.vmin, self.vmax)


def color_scale(grids: list[np.ndarray], log: bool | str = "auto", clip: bool = True,
                percentile: float = CLIP_PERCENTILE, vmin: float | None = None,
                vmax: float | None = None, log_range: float = LOG_RANGE) -> ColorScale:
    """One colour range for ``grids`` by :func:`viz.io.value_scale`'s rule (outliers clipped, log
    when asked or when the range is wide), as a :class:`ColorScale`."""
    s = value_scale(grids, log=log, clip=clip, percentile=percentile, vmin=vmin, vmax=vmax, log_range=log_range)
    return ColorScale(s.vmin, s.vmax, s.log, s.clipped)


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


def range_note(scale: ColorScale) -> str:
    """``"narrow range 0.6402 to 0.6441 (0.61 %)"`` when the range is narrow, else ""."""
    if not scale.narrow:
        return ""
    lo, hi = scale.vmin, scale.vmax
    size = max(abs(lo), abs(hi))
    digits = max(3, int(np.ceil(np.log10(size / (hi - lo)))) + 1)  # the span's first two digits show
    pct = 100 * (hi - lo) / size
    return f"narrow range {lo:.{digits}g} to {hi:.{digits}g} ({pct:.2g} %)"


def add_colorbar(fig: Figure, mappable: Any, ax: Any, label: str, extend: str | None = None,
                 scale: ColorScale | None = None, **kw: Any) -> Any:
    """A colour bar with round tick values and ``label`` (and the range when it is narrow)."""
    if extend:
        kw["extend"] = extend
    three_d = getattr(ax, "name", "") == "3d"
    if not three_d and isinstance(ax, Axes) and ax.get_aspect() != "auto":
        # a fixed-aspect axes shrinks inside its slot: a bar in its own coordinates keeps its height
        cb = fig.colorbar(mappable, cax=ax.inset_axes((1.03, 0.0, 0.045, 1.0)), **kw)
    else:
        kw.setdefault("shrink", 0.75 if three_d else 0.9)
        kw.setdefault("pad", 0.1 if three_d else 0.02)
        cb = fig.colorbar(mappable, ax=ax, **kw)
    note = range_note(scale) if scale is not None else ""
    cb.set_label(label + (f"\n{note}" if note else ""))
    if scale is not None:
        set_nice_ticks(cb, scale)
    return cb


def nice_ticks(scale: ColorScale) -> np.ndarray:
    """Round tick values inside the colour range (1-2-5 per decade on a log scale)."""
    lo, hi = scale.vmin, scale.vmax
    if scale.log:
        return log_ticks(lo, hi)
    ticks = np.asarray(MaxNLocator(nbins=7, steps=[1, 2, 2.5, 5, 10]).tick_values(lo, hi))
    return ticks[(ticks >= lo - 1e-12 * abs(hi - lo)) & (ticks <= hi + 1e-12 * abs(hi - lo))]


def set_nice_ticks(cb: Any, scale: ColorScale) -> None:
    ticks = nice_ticks(scale)
    cb.set_ticks(ticks, labels=tick_labels(ticks))
    if scale.log:
        cb.ax.yaxis.set_minor_locator(NullLocator())
