"""1-D slices of a plane through its centre (private)."""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from landscape.result import Landscape
from viz.io import centre, centre_label, check_landscape, clamped_grid, surface_values
from viz.plots import _marks, _scale, _style

__all__ = ["plot_slices"]


def _bracket(coords: np.ndarray, at: float) -> tuple[np.ndarray, int, float]:
    """The order sorting ``coords``, the index ``k`` (in that order) of the pair around ``at``, and
    where ``at`` lies between them (0 at the first, 1 at the second)."""
    order = np.argsort(coords)
    c = coords[order]
    k = int(np.clip(np.searchsorted(c, at) - 1, 0, c.size - 2))
    return order, k, float(np.clip((at - c[k]) / ((c[k + 1] - c[k]) or 1.0), 0.0, 1.0))


def _interp_line(coords: np.ndarray, grid: np.ndarray, at: float) -> np.ndarray:
    """Row of ``grid`` at ``coords == at``, linearly interpolated between the two nearest rows
    (a NaN or infinite neighbour stays NaN or infinite: it is marked, not smoothed away)."""
    grid = np.asarray(grid, dtype=float)
    if coords.size == 1:
        return grid[0]
    order, k, t = _bracket(coords, at)
    g = grid[order]
    if t == 0.0:
        return g[k]
    if t == 1.0:
        return g[k + 1]
    return (1 - t) * g[k] + t * g[k + 1]


def _nearest_lines(coords: np.ndarray, grid: np.ndarray, at: float) -> np.ndarray:
    """The larger of the two rows of ``grid`` around ``coords == at`` (the one row when ``at`` is on it)."""
    if coords.size == 1:
        return grid[0]
    order, k, t = _bracket(coords, at)
    g = grid[order]
    return g[k] if t == 0.0 else g[k + 1] if t == 1.0 else np.maximum(g[k], g[k + 1])


def plot_slices(landscape: Landscape, fig: Figure | None = None, *, log: _style.LogOption = "auto",
                surface: str = "loss", title: str | None = None) -> Figure:
    """1-D slices of the grid through the centre, along each direction.

    The slice along direction 1 runs at the centre's y, the slice along direction 2 at its
    x; when that falls between grid lines the two neighbouring lines are interpolated
    linearly. The centre is starred at its own loss (``metadata["centre"]`` when the
    generation evaluated it exactly, see :func:`plot_contour`). Points whose value is
    NaN/inf are marked above their x and counted in the legend, points whose batch-norm
    variances were clamped at zero by a tick at the bottom (a slice between two grid lines
    counts a point as clamped when either line's is). Path points are not shown (they lie
    off the slices).

    Parameters
    ----------
    landscape : Landscape
    fig : Figure, optional
        Two axes are added to it; a new Figure if None.
    log : bool or "auto", default="auto"
        Logarithmic value axis ("auto": when the values span more than three decades).
    surface : str, default="loss"
        "loss" or the name of one of ``landscape.surfaces``.
    title : str, optional
        Figure title; the landscape's tag by default.

    Returns
    -------
    Figure
    """
    ls = check_landscape(landscape, "plot_slices")
    _style.check_common("plot_slices", log=log, fig=fig, title=title)
    z = surface_values(ls, surface, "plot_slices")
    scale = _scale.color_scale([z], log=log, log_range=_scale.AXIS_LOG_RANGE)
    if fig is None:
        fig = Figure(figsize=(9.5, 3.8), layout="constrained")
    axes = fig.subplots(1, 2)
    x, y = np.asarray(ls.x, dtype=float), np.asarray(ls.y, dtype=float)
    cx, cy, cz = centre(ls)
    cx = cx if np.isfinite(cx) else float(x[x.size // 2])
    cy = cy if np.isfinite(cy) else float(y[y.size // 2])
    xlabel, ylabel = _style.axis_labels(ls)
    short = [lab.split(" (")[0].split(":")[0] for lab in (xlabel, ylabel)]  # "PC1", "random direction 1"
    along_x = _interp_line(y, z, cy)        # z at (x[:], cy)
    along_y = _interp_line(x, z.T, cx)      # z at (cx, y[:])
    clamped = clamped_grid(ls)
    # a point between two grid lines is counted as clamped when either line's is (the larger count)
    cuts = (None, None) if clamped is None else (_nearest_lines(y, clamped, cy), _nearest_lines(x, clamped.T, cx))
    for ax, axis, values, name, at, pos, cut in ((axes[0], x, along_x, xlabel, f"{short[1]} = {cy:.3g}", cx, cuts[0]),
                                                 (axes[1], y, along_y, ylabel, f"{short[0]} = {cx:.3g}", cy, cuts[1])):
        ax.plot(axis, np.where(np.isfinite(values), values, np.nan), color="#1f4e99", lw=2, marker=".", gid="slice",
                label=f"slice at {at}")
        _marks.mark_line(ax, axis, values, what=surface, log=scale.log)
        if cut is not None:
            _marks.mark_clamped(ax, ls, x=axis, counts=cut)
        if np.isfinite(cz) and surface == "loss":
            ax.plot([pos], [cz], **dict(marker="*", ms=14, color="#ffd700", mec="black", ls="none",
                                        gid="convergence", label=centre_label(ls)))
        if scale.log:
            ax.set_yscale("log")
        if scale.clipped and np.any(np.isfinite(values) & (values > scale.vmax)):  # keep the rest readable
            shown = values[np.isfinite(values) & (values <= scale.vmax)]
            lo, hi = (float(shown.min()), float(shown.max())) if shown.size else (scale.vmin, scale.vmax)
            span = (hi - lo) or 1.0
            ax.set_ylim(lo / 1.2 if scale.log else lo - 0.05 * span, hi * 1.2 if scale.log else hi + 0.05 * span)
        ax.set_xlabel(name)
        ax.set_ylabel(_style.value_label(surface, scale.log))
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small", loc="best")
    fig.suptitle(title if title is not None else _style.title(ls, surface) + " \u2014 1-D slices")
    return fig
