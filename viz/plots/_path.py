"""The training path and the centre, on 2-D and 3-D axes (private)."""

from __future__ import annotations

from typing import Any, cast

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.transforms import offset_copy

from collector.common import check_param
from landscape.result import Landscape
from viz.io import centre, centre_label, check_landscape
from viz.plots import _marks, _scale, _style

__all__ = ["plot_path", "draw_markers"]

MAX_LABELS = 10


def _label_indices(n: int) -> list[int]:
    if n <= MAX_LABELS:
        return list(range(n))
    return sorted({round(i) for i in np.linspace(0, n - 1, MAX_LABELS)})


def _is_3d(ax: Any) -> bool:
    return getattr(ax, "name", "") == "3d"


def include_in_view(ax: Axes, xs: np.ndarray, ys: np.ndarray, margin: float = 0.04) -> None:
    """Widen the x/y limits (never narrow them) so that every (xs, ys) point is inside."""
    xs, ys = np.asarray(xs, dtype=float), np.asarray(ys, dtype=float)
    ok = np.isfinite(xs) & np.isfinite(ys)
    if not ok.any():
        return
    for get, set_, vals in ((ax.get_xlim, ax.set_xlim, xs[ok]), (ax.get_ylim, ax.set_ylim, ys[ok])):
        lo, hi = get()
        flipped = lo > hi
        lo, hi = min(lo, hi), max(lo, hi)
        span = (hi - lo) or 1.0
        new_lo = min(lo, float(vals.min()) - margin * span) if vals.min() < lo + 0.5 * margin * span else lo
        new_hi = max(hi, float(vals.max()) + margin * span) if vals.max() > hi - 0.5 * margin * span else hi
        if (new_lo, new_hi) != (lo, hi):
            set_((new_hi, new_lo) if flipped else (new_lo, new_hi))


#: Colours of several runs' paths on one plane (matplotlib's tab10, without the path's own red).
RUN_COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f")


def draw_path(ax: Axes, ls: Landscape, *, labels: bool = True, scale: _scale.ColorScale | None = None) -> list:
    """Draw ``ls.path`` (line, markers, step/epoch numbers) on a 2-D or 3-D axes; several runs'
    paths (``ls.paths``) each in its own colour, its end marked, its distance from the plane in
    the legend."""
    if ls.paths:
        far = ls.metadata.get("path_distance") or {}
        lines = []
        for k, (name, run) in enumerate(ls.paths.items()):
            off = max(far.get(name) or [0.0])
            legend = f"{name}" + (f" (up to {off:.0%} off the plane)" if off >= 0.005 else "")
            lines += _draw_one(ax, run, RUN_COLORS[k % len(RUN_COLORS)], legend, labels=False, scale=scale,
                               gid=f"path-{name}", end=True)
        return lines
    if ls.path is None:
        return []
    iv = [int(i) for i in ls.path.intervals]
    legend = "training path" + (f" ({_style.path_range_text(ls)})" if iv else "")
    return _draw_one(ax, ls.path, _style.PATH_COLOR, legend, labels=labels, scale=scale, gid="path")


def _draw_one(ax: Axes, path: Any, color: str, legend: str, *, labels: bool, scale: _scale.ColorScale | None,
              gid: str, end: bool = False) -> list:
    if len(np.ravel(path.x)) == 0:
        return []
    px, py = np.ravel(path.x).astype(float), np.ravel(path.y).astype(float)
    pz = np.ravel(path.z).astype(float)
    iv = [int(i) for i in path.intervals]
    style: dict[str, Any] = dict(color=color, lw=2.0, marker="o", ms=5.5, mfc="white",
                                 mec=color, mew=1.5, label=legend, gid=gid, zorder=6)
    if _is_3d(ax):
        zz = _surface_z(pz, scale)
        (line,) = ax.plot(px, py, zz, **style)
        if end:
            ax.plot(px[-1:], py[-1:], zz[-1:], marker="s", ms=8, color=color, ls="none", zorder=8, gid=f"{gid}-end")
    else:
        (line,) = ax.plot(px, py, path_effects=_style.halo(4.0), **style)
        if end:  # the run's trained weights, projected
            ax.plot(px[-1:], py[-1:], marker="s", ms=8, color=color, mec="black", ls="none", zorder=8,
                    gid=f"{gid}-end")
        include_in_view(ax, px, py)
    # a checkpoint whose loss is NaN/inf is marked where it is (at the top of a 3-D box)
    _marks.mark_points(ax, px, py, pz, what="path loss", gid="nonfinite-path",
                       heights=_heights(scale) if _is_3d(ax) else None)
    if labels and iv and len(iv) == px.size:
        for k in _label_indices(px.size):
            text = str(iv[k])
            if _is_3d(ax):
                cast(Any, ax).text(px[k], py[k], _surface_z(pz, scale)[k], " " + text, fontsize=8, color="black",
                                   zorder=7)  # a 3-D axes: text(x, y, z, s)
            else:
                ax.annotate(text, (px[k], py[k]), xytext=(4, 4), textcoords="offset points", fontsize=8,
                            color="black", path_effects=_style.halo(2.5), zorder=7, gid="path-label",
                            annotation_clip=False)
    return [line]


def _heights(scale: _scale.ColorScale | None) -> tuple[float, float] | None:
    """(top, bottom) of a 3-D box drawn with ``scale``."""
    if scale is None:
        return None
    lo, hi = (np.log10(scale.vmin), np.log10(scale.vmax)) if scale.log else (scale.vmin, scale.vmax)
    return float(hi), float(lo)


def _surface_z(z: np.ndarray, scale: _scale.ColorScale | None) -> np.ndarray:
    """Heights as the 3-D surface draws them (log10 on a log scale, clipped to the box; a
    point without a finite value at the top of the box, -inf at its bottom)."""
    z = np.asarray(z, dtype=float)
    if scale is None:
        return z
    z = np.where(np.isnan(z), np.inf, z)
    if scale.log:
        return np.log10(np.clip(z, scale.vmin, scale.vmax))
    return np.clip(z, scale.vmin, scale.vmax)


def draw_markers(ax: Axes, ls: Landscape, *, scale: _scale.ColorScale | None = None) -> list:
    """Mark ``ls.markers`` (the models a plane passes through) with labelled dots, 2-D or 3-D."""
    out = []
    for label, (mx, my, mz) in ls.markers.items():
        style: dict[str, Any] = dict(marker="o", ms=9, color="white", mec="black", mew=1.6, ls="none", zorder=9,
                                     gid="marker", label=f"model {label} (loss {mz:.4g})")
        if _is_3d(ax):
            h = _surface_z(np.array([mz]), scale)
            (mark,) = ax.plot([mx], [my], h, **style)
            cast(Any, ax).text(mx, my, float(h[0]), "  " + label, fontsize=10, fontweight="bold", zorder=10)
        else:
            (mark,) = ax.plot([mx], [my], path_effects=_style.halo(3.0), **style)
            ax.annotate(label, (mx, my), xytext=(6, 6), textcoords="offset points", fontsize=11, fontweight="bold",
                        path_effects=_style.halo(2.5), zorder=10, gid="marker-label", annotation_clip=False)
            include_in_view(ax, np.array([mx]), np.array([my]))
        out.append(mark)
    return out


def draw_convergence(ax: Axes, ls: Landscape, *, scale: _scale.ColorScale | None = None) -> Any:
    """Star the centre (:func:`viz.io.centre`: the exactly evaluated one when known), named by
    :func:`viz.io.centre_label` ("trained weights", "shared centre: run sgd's end", ...); not on
    views through models: the markers show them."""
    if ls.markers:
        return None
    cx, cy, cz = centre(ls)
    if not (np.isfinite(cx) and np.isfinite(cy)):
        return None
    style: dict[str, Any] = dict(marker="*", ms=16, color="#ffd700", mec="black", mew=1.0, ls="none",
                                 label=centre_label(ls), gid="convergence", zorder=8)
    if _is_3d(ax):
        (mark,) = ax.plot([cx], [cy], _surface_z(np.array([cz]), scale), **style)
    else:
        (mark,) = ax.plot([cx], [cy], **style)
        include_in_view(ax, np.array([cx]), np.array([cy]))
    return mark


def plot_path(landscape: Landscape, ax: Axes | None = None, *, labels: bool = True,
              convergence: bool = True, legend: bool = True) -> Axes:
    """Draw the training path and the convergence point over an existing plot (a checkpoint
    whose loss is NaN/inf is marked).

    Parameters
    ----------
    landscape : Landscape
        Its ``path`` (if any) and ``convergence_point`` are drawn.
    ax : Axes, optional
        A 2-D axes (or a 3-D one from :func:`plot_surface`); a new one if None.
    labels : bool, default=True
        Write the step/epoch number next to each checkpoint.
    convergence : bool, default=True
        Mark the convergence point with a star.
    legend : bool, default=True
        Add a legend.

    Returns
    -------
    Axes
    """
    ls = check_landscape(landscape, "plot_path")
    for name, v in (("labels", labels), ("convergence", convergence), ("legend", legend)):
        check_param(name, v, ["boolean"], caller="plot_path")
    _style.check_common("plot_path", ax=ax)
    _fig, ax = _style.new_axes(ax, None)
    if not ax.get_xlabel():
        ax.set_xlabel(_style.axis_labels(ls)[0])
        ax.set_ylabel(_style.axis_labels(ls)[1])
    draw_path(ax, ls, labels=labels)
    draw_markers(ax, ls)
    if convergence:
        draw_convergence(ax, ls)
    if legend:
        add_legend(ax)
    return ax


def add_legend(ax: Axes) -> None:
    handles, names = ax.get_legend_handles_labels()
    if not handles:
        return
    if _is_3d(ax):  # "best" is meaningless in 3-D: keep it above the box, clear of the axis labels
        ax.legend(handles, names, loc="upper left", bbox_to_anchor=(0.0, 0.98), fontsize="x-small",
                  framealpha=0.85)
    elif ax.get_aspect() != "auto" and ax.get_data_ratio() < 0.6:
        # a low panel drawn to true aspect has no room for a legend inside: below its x label
        below = offset_copy(ax.transAxes, fig=cast(Figure, ax.figure), y=-36, units="points")
        ax.legend(handles, names, loc="upper center", bbox_to_anchor=(0.5, 0.0), bbox_transform=below, ncols=2,
                  fontsize="small", framealpha=0.85)
    else:
        ax.legend(handles, names, loc="best", fontsize="small", framealpha=0.85)
