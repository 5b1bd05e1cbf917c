"""Lines: the loss along a random line or an interpolation, a metric on a second axis,
the models marked (private)."""

from __future__ import annotations

from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from collector.common import check_param
from landscape.result import Landscape
from viz.io import centre, centre_label, centre_name, check_landscape, line_values
from viz.plots import _marks, _path, _scale, _style

__all__ = ["plot_line", "default_metric"]

LOSS_COLOR = "#1f4e99"
METRIC_COLOR = "#c0392b"


def default_metric(ls: Landscape) -> str | None:
    """The surface drawn on the second axis by default: the first whose name says accuracy."""
    for name in ls.surfaces:
        if "acc" in str(name).lower():
            return str(name)
    return None


def plot_line(landscape: Landscape, ax: Axes | None = None, *, fig: Figure | None = None,
              metric: str | None = "auto", log: _style.LogOption = "auto", markers: bool = True,
              title: str | None = None) -> Axes:
    """The loss along a line (Li et al.'s 1-D plot): loss on the left axis, a metric such as
    accuracy on the right one, the models (markers) and the centre marked.

    Parameters
    ----------
    landscape : Landscape
        A line (``landscape.dims == 1``): a random line or an interpolation between models.
    ax : Axes, optional
        Axes for the loss (the metric gets a twin axes); a new Figure by default.
    fig : Figure, optional
        Figure to add the axes to when ``ax`` is None.
    metric : str or None, default="auto"
        The surface drawn on the second y axis; "auto" takes the first whose name holds
        "acc" (if any), None draws none.
    log : bool or "auto", default="auto"
        Logarithmic loss axis ("auto": when the loss spans more than three decades).
        A point whose loss (or metric) is NaN/inf is marked above its x (X for NaN,
        triangles for +-inf), left as a gap in the curve (never bridged) and counted in
        the title and the legend; a point whose batch-norm variances were clamped at zero
        (``landscape.clamped``) by a tick at the bottom, counted likewise.
    markers : bool, default=True
        Mark ``landscape.markers`` (the models, at their exact coordinates and losses) and,
        without markers, the convergence point.
    title : str, optional
        Axes title; built from the tag by default.

    Returns
    -------
    Axes
        The loss axes (the metric's twin is ``ax.right_ax``).
    """
    caller = "plot_line"
    ls = check_landscape(landscape, caller)
    check_param("markers", markers, ["boolean"], caller=caller)
    if metric == "auto":
        metric = default_metric(ls)
    elif metric is not None:
        check_param("metric", metric, [str], caller=caller)
    _style.check_common(caller, log=log, ax=ax, fig=fig, title=title)
    z = line_values(ls, "loss", caller)
    m = line_values(ls, metric, caller) if metric is not None else None
    scale = _scale.color_scale([z], log=log, log_range=_scale.AXIS_LOG_RANGE)
    fig, ax = _style.new_axes(ax, fig, figsize=(6.4, 4.2))
    x = np.asarray(ls.x, dtype=float)
    ax.plot(x, np.where(np.isfinite(z), z, np.nan), color=LOSS_COLOR, lw=2, label="loss", gid="line")
    if scale.log:
        ax.set_yscale("log")
    if scale.clipped:  # one diverging point must not flatten the rest of the curve
        pad = 0.05 * (scale.vmax - scale.vmin)
        ax.set_ylim(top=scale.vmax * 1.2 if scale.log else scale.vmax + pad)
    ax.set_xlim(float(x.min()), float(x.max()))
    ax.set_xlabel(_style.axis_labels(ls)[0])
    ax.set_ylabel("loss" + (" (log scale)" if scale.log else ""), color=LOSS_COLOR)
    ax.tick_params(axis="y", colors=LOSS_COLOR)
    ax.grid(alpha=0.3)
    handles = list(ax.get_lines()) + _marks.mark_line(ax, x, z, log=scale.log) + _marks.mark_clamped(ax, ls)
    if m is not None:
        right = ax.twinx()
        (mline,) = right.plot(x, np.where(np.isfinite(m), m, np.nan), color=METRIC_COLOR, lw=1.6, ls="--",
                              label=str(metric), gid="metric")
        right.set_ylabel(str(metric), color=METRIC_COLOR)
        right.tick_params(axis="y", colors=METRIC_COLOR)
        handles.append(mline)
        handles += _marks.mark_line(right, x, m, what=str(metric))
        ax.right_ax = right  # type: ignore[attr-defined]  # for callers that want the twin
    if markers:
        handles += _draw_line_markers(ax, ls)
    ax.legend(handles=handles, labels=[h.get_label() for h in handles], loc="best", fontsize="small",
              framealpha=0.85)
    ax.set_title(_marks.with_count(title if title is not None else _style.title(ls), z, ls), fontsize="medium")
    return ax


def _draw_line_markers(ax: Axes, ls: Landscape) -> list:
    out: list[Any] = []
    if ls.markers:
        for label, (mx, _my, mz) in ls.markers.items():
            ax.axvline(mx, color="0.35", lw=0.8, ls=":", zorder=1)
            if not np.isfinite(mz):  # a model whose loss is NaN/inf: at the top of the axes, marked
                out += _marks.mark_points(ax, np.array([mx]), None, np.array([mz]), what=f"model {label} loss",
                                          total=1)
                continue
            (pt,) = ax.plot([mx], [mz], marker="o", ms=8, color="white", mec="black", mew=1.5, ls="none",
                            zorder=7, gid="marker", label=f"model {label} (loss {mz:.4g})")
            ax.annotate(label, (mx, mz), xytext=(5, 6), textcoords="offset points", fontsize=10,
                        fontweight="bold", path_effects=_style.halo(2.5), zorder=8, annotation_clip=False)
            out.append(pt)
        return out
    cx, _cy, cz = centre(ls)
    if np.isfinite(cx) and np.isfinite(cz):
        (star,) = ax.plot([cx], [cz], marker="*", ms=15, color="#ffd700", mec="black", ls="none", zorder=7,
                          gid="convergence", label=centre_label(ls))
        out.append(star)
    elif np.isfinite(cx):
        out += _marks.mark_points(ax, np.array([cx]), None, np.array([cz]), what=f"{centre_name(ls)} loss", total=1)
    _path.include_in_view(ax, np.array([cx]), np.array([cz]))
    return out
