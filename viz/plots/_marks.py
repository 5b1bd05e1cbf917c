"""Marks of NaN and infinite values: a point that has no value is never a silent gap (private).

Every plot puts a marker at each point whose value is not finite (an X for NaN, a
triangle up for +inf, down for -inf; gid ``"nonfinite"``), with one legend entry per
kind that counts them (``"loss NaN (3 of 21 points)"``), and writes the count in its
title (``"3 of 21 points non-finite"``). On a plane the marker sits at the grid point; on
a 3-D surface at the top of the box (the bottom for -inf); on a line at the top of the
axes (the bottom for -inf) above the point's x. Values a log scale cannot show (<= 0)
are marked too (a hollow circle).

Points whose batch-norm running variances were clamped at zero (``Landscape.clamped``:
their values are the clamped network's, not the models') are marked the same way: a hollow
orange square at each such grid point (at its height on a 3-D surface; on a line a tick at
the bottom of the axes above its x; gid ``"clamped"``), one legend entry that counts them,
and the count in the title (``"22 of 101 points with batch-norm variances clamped at zero"``,
:func:`viz.io.clamped_text`, the report's words too).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from matplotlib import patheffects
from matplotlib.axes import Axes

from landscape.result import Landscape
from viz.io import clamped_grid, clamped_text

__all__ = ["count_text", "with_count", "mark_points", "mark_grid", "mark_line", "mark_clamped", "GID",
           "CLAMPED_GID"]

GID = "nonfinite"
COLOR = "#ff2bd6"  # magenta: apart from viridis, the red path and the gold star
CLAMPED_GID = "clamped"
CLAMPED_COLOR = "#ff7f0e"  # orange, outlined in black: seen on viridis' purple and its yellow alike


def _kinds(values: np.ndarray, log: bool) -> list[tuple[str, np.ndarray, str, bool]]:
    """(name, mask, marker, at the bottom) of each kind of value that cannot be drawn."""
    out = [("NaN", np.isnan(values), "X", False), ("+inf", np.isposinf(values), "^", False),
           ("\u2212inf", np.isneginf(values), "v", True)]
    if log:
        with np.errstate(invalid="ignore"):
            out.append(("\u2264 0 (off the log scale)", np.isfinite(values) & (values <= 0), "o", True))
    return out


def count_text(values: Any) -> str:
    """``"3 of 21 points non-finite"``, or "" when every value is finite."""
    z = np.asarray(values, dtype=np.float64)
    bad = int(np.count_nonzero(~np.isfinite(z)))
    return f"{bad} of {z.size} points non-finite" if bad else ""


def with_count(title: str, values: Any, ls: Landscape | None = None) -> str:
    """``title`` with the count of non-finite values, and of ``ls``'s clamped points, each on a line of
    its own (if any)."""
    notes = [n for n in (count_text(values), clamped_text(ls) if ls is not None else "") if n]
    return "\n".join([title, *notes] if title else notes)


def mark_points(ax: Axes, xs: np.ndarray, ys: np.ndarray | None, values: np.ndarray, *, what: str = "loss",
                total: int | None = None, heights: tuple[float, float] | None = None, log: bool = False,
                ms: float = 7.0, gid: str = GID) -> list:
    """Mark the points ``(xs[k], ys[k])`` whose ``values[k]`` cannot be drawn.

    ``ys`` None: a line (the marker at the top or bottom of the axes above ``xs[k]``);
    ``heights`` ``(top, bottom)``: a 3-D axes.
    """
    values = np.ravel(np.asarray(values, dtype=np.float64))
    xs = np.ravel(np.asarray(xs, dtype=np.float64))
    total = values.size if total is None else total
    out = []
    for name, mask, marker, bottom in _kinds(values, log):
        k = np.flatnonzero(mask)
        if k.size == 0:
            continue
        style: dict[str, Any] = dict(marker=marker, ms=ms, ls="none", mfc="none" if marker == "o" else COLOR,
                                     mec="black" if marker != "o" else COLOR, mew=1.0 if marker != "o" else 1.6,
                                     zorder=9.5, gid=gid, label=f"{what} {name} ({k.size} of {total} points)",
                                     clip_on=heights is not None)  # 2-D: a point on the grid's edge marked whole
        if ys is None:
            at = np.full(k.size, 0.03 if bottom else 0.97)
            (line,) = ax.plot(xs[k], at, transform=ax.get_xaxis_transform(), **style)
        elif heights is not None:
            at = np.full(k.size, heights[1] if bottom else heights[0])
            (line,) = ax.plot(xs[k], np.ravel(ys)[k], at, **style)  # Axes3D.plot(x, y, z)
        else:
            (line,) = ax.plot(xs[k], np.ravel(np.asarray(ys, dtype=np.float64))[k], **style)
        out.append(line)
    return out


def mark_grid(ax: Axes, x: np.ndarray, y: np.ndarray, z: np.ndarray, *, what: str = "loss",
              heights: tuple[float, float] | None = None, log: bool = False) -> list:
    """Mark the grid points ``(x[j], y[i])`` whose ``z[i, j]`` cannot be drawn."""
    X, Y = np.meshgrid(np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64))
    ms = float(np.clip(220.0 / max(np.shape(z)), 3.0, 8.0))  # small enough not to hide a dense grid
    return mark_points(ax, X, Y, z, what=what, heights=heights, log=log, ms=ms)


def mark_line(ax: Axes, x: np.ndarray, values: np.ndarray, *, what: str = "loss", log: bool = False) -> list:
    """Mark the points of a line whose value cannot be drawn, above their x."""
    return mark_points(ax, x, None, values, what=what, log=log)


def mark_clamped(ax: Axes, ls: Landscape, *, x: np.ndarray | None = None, y: np.ndarray | None = None,
                 counts: np.ndarray | None = None, heights: np.ndarray | None = None) -> list:
    """Mark the points where ``ls.clamped`` counts batch-norm variances clamped at zero (nothing when none).

    By default the landscape's own grid (or line); ``x``, ``y`` and ``counts`` give other
    points (a slice), ``heights`` their heights on a 3-D axes (shaped like ``counts``). On a
    line (``y`` None and a 1-D landscape, or a slice with ``y`` None) the marks are ticks at
    the bottom of the axes above each point's x.
    """
    if counts is None:
        c = clamped_grid(ls)
        if c is None:
            return []
        counts = c
        x = np.asarray(ls.x, dtype=np.float64)
        if ls.dims == 2:
            x, y = np.meshgrid(x, np.asarray(ls.y, dtype=np.float64))
    c = np.ravel(np.asarray(counts))
    k = np.flatnonzero(c > 0)
    if k.size == 0:
        return []
    xs = np.ravel(np.asarray(x, dtype=np.float64))[k]
    label = (f"batch-norm variances clamped at zero ({k.size} of {c.size} points, "
             f"up to {int(c.max())} channels)")
    if y is None:  # a line: a tick above each point's x, clear of the curve
        (line,) = ax.plot(xs, np.full(k.size, 0.0), transform=ax.get_xaxis_transform(), marker="|", ms=11,
                          mew=2.0, ls="none", color=CLAMPED_COLOR, zorder=9.4, gid=CLAMPED_GID, label=label,
                          clip_on=False)
        return [line]
    ms = float(np.clip(200.0 / max(np.shape(counts)), 3.0, 8.0))  # as the non-finite marks: a dense grid shows
    style: dict[str, Any] = dict(marker="s", ms=ms, ls="none", mfc="none", mec=CLAMPED_COLOR, mew=1.2, zorder=9.4,
                                 gid=CLAMPED_GID, label=label,
                                 path_effects=[patheffects.withStroke(linewidth=2.6, foreground="black")])
    ys = np.ravel(np.asarray(y, dtype=np.float64))[k]
    if heights is not None:
        (line,) = ax.plot(xs, ys, np.ravel(np.asarray(heights, dtype=np.float64))[k], **style)  # Axes3D.plot(x, y, z)
    else:
        (line,) = ax.plot(xs, ys, clip_on=False, **style)
    return [line]
