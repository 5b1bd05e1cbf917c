"""The colour scale of every plot: its range, log or linear, its colour bar (private).

The colour scale is the part a reader notices first. One diverging grid point (a loss of
1e6 among losses near 1) must not flatten the rest of the picture into one colour, so
:func:`color_scale` treats values beyond ``p98 + (p98 - min) / 2`` (p98 the 98th
percentile of the finite values) as outliers and ends the range at the largest value
that is not one (outliers saturate; the colour bar gets an arrow). With ``log="auto"`` it
switches to a logarithmic scale when the finite values span more than a decade (Li et
al. offer log contours for the same reason: a basin at 0.05 inside walls at 2 is one
colour on a linear scale); value axes of lines switch only above three decades. A range
narrower than :data:`NARROW` of its magnitude is printed on the colour bar (0.640 to
0.644 looks like a steep slope otherwise). NaN/inf cells are masked here and marked by
``_marks``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import matplotlib
import numpy as np
from matplotlib.axes import Axes
from matplotlib.colors import LogNorm, Normalize
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator, NullLocator

__all__ = ["ColorScale", "color_scale", "masked", "colormap", "add_colorbar", "nice_ticks", "set_nice_ticks",
           "tick_labels", "range_note", "LOG_RANGE", "AXIS_LOG_RANGE", "NARROW"]

CMAP = "viridis"
LOG_RANGE = 10.0  # "auto" gives colours a log scale above this max/min ratio of the (clipped) finite values
AXIS_LOG_RANGE = 1e3  # ... and the value axis of a line above this one
CLIP_PERCENTILE = 98.0
NARROW = 0.1  # a colour range below this fraction of its largest |value| is printed on the colour bar


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

    @property
    def narrow(self) -> bool:
        """The range is a small fraction of the values' size (colours exaggerate it)."""
        size = max(abs(self.vmin), abs(self.vmax))
        return not self.log and size > 0 and (self.vmax - self.vmin) < NARROW * size


def color_scale(grids: list[np.ndarray], log: bool | str = "auto", clip: bool = True,
                percentile: float = CLIP_PERCENTILE, vmin: float | None = None,
                vmax: float | None = None, log_range: float = LOG_RANGE) -> ColorScale:
    """One colour range for ``grids``: outliers clipped, log when asked or when the range is wide.

    ``vmin``/``vmax`` fix an end of the range (values beyond it saturate); ``log="auto"``
    turns log on when every finite value is positive and max/min exceeds ``log_range``.
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
        use_log = positive and hi / lo > log_range
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
        for mults in ((1,), (1, 2, 5), (1, 1.5, 2, 3, 4, 5, 6, 8)):
            dec = np.arange(np.floor(np.log10(lo)), np.ceil(np.log10(hi)) + 1)
            cand = np.array(sorted(m * 10.0 ** d for d in dec for m in mults))
            ticks = cand[(cand >= lo * (1 - 1e-9)) & (cand <= hi * (1 + 1e-9))]
            if ticks.size >= 4:
                return ticks
        return np.geomspace(lo, hi, 4)
    ticks = np.asarray(MaxNLocator(nbins=7, steps=[1, 2, 2.5, 5, 10]).tick_values(lo, hi))
    return ticks[(ticks >= lo - 1e-12 * abs(hi - lo)) & (ticks <= hi + 1e-12 * abs(hi - lo))]


def tick_labels(ticks: np.ndarray) -> list[str]:
    """The shortest ``%g`` labels (3 significant digits or more) that tell every tick apart."""
    values = [float(t) for t in np.ravel(ticks)]
    for digits in range(3, 16):
        labels = [f"{v:.{digits}g}" for v in values]
        if len(set(labels)) == len(labels):
            return labels
    return [repr(v) for v in values]


def set_nice_ticks(cb: Any, scale: ColorScale) -> None:
    ticks = nice_ticks(scale)
    cb.set_ticks(ticks, labels=tick_labels(ticks))
    if scale.log:
        cb.ax.yaxis.set_minor_locator(NullLocator())
