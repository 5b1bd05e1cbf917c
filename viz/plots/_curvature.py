"""The Hessian's eigen-ratio map, with Li et al.'s colour convention (private).

Li et al. (2018, Figure 7) colour ``|lambda_min / lambda_max|`` blue where the surface is
convex (negligible negative curvature beside the positive) and yellow where negative
curvature is significant; here the scale is matplotlib's ``RdYlBu_r`` (blue, through
yellow, to red for the most non-convex points) from 0, with the loss's level lines on top
so the basin is visible, and the convergence point starred.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.cm import ScalarMappable
from matplotlib.colors import Normalize
from matplotlib.figure import Figure

from collector.common import Interval, Predicate, check_param
from landscape.curvature import EIGEN_RATIO, nonconvexity
from landscape.result import Landscape
from viz.io import check_landscape, surface_values
from viz.plots import _marks, _path, _scale, _style

__all__ = ["plot_eigen_ratio", "compare_eigen_ratio", "EIGEN_CMAP"]

#: Blue = convex, yellow to red = non-convex (Li et al.'s Figure 7 convention).
EIGEN_CMAP = "RdYlBu_r"
LABEL = "|λmin/λmax|"


def _upper(grids: list[np.ndarray]) -> float:
    """The top of the colour range: the largest value that is not an outlier (see _style)."""
    finite = [g[np.isfinite(g)] for g in grids]
    if not any(f.size for f in finite):
        raise ValueError("The eigen-ratio map has no finite value to draw (every cell is NaN or inf).")
    scale = _scale.color_scale(grids, log=False)
    return max(float(scale.vmax), 1e-12)


def plot_eigen_ratio(landscape: Landscape, ax: Axes | None = None, *, fig: Figure | None = None,
                     surface: str = EIGEN_RATIO, vmax: float | None = None, levels: int = 12,
                     loss_lines: bool = True, path: bool = True, cmap: Any = None, title: str | None = None,
                     colorbar: bool = True, aspect: _style.AspectOption = None) -> Axes:
    """The map of ``|lambda_min / lambda_max|`` over a landscape (Li et al., section 6).

    Parameters
    ----------
    landscape : Landscape
        With the surface ``surface`` (``compute_landscape(metrics={"eigen_ratio":
        EigenRatio()})`` or ``landscape gen --eigen-ratio``).
    ax : Axes, optional
    fig : Figure, optional
    surface : str, default="eigen_ratio"
    vmax : float, optional
        Top of the colour range (the bottom is 0); default: the largest value that is not
        an outlier. Give one value to compare maps.
    levels : int, default=12
        Loss level lines drawn on top (``loss_lines``).
    loss_lines : bool, default=True
    path : bool, default=True
        The training path (PCA landscapes) and the convergence point.
    cmap : str or Colormap, optional
        Default ``RdYlBu_r``: blue convex, yellow to red non-convex.
    title : str, optional
    colorbar : bool, default=True
    aspect : {"equal", "auto"}, optional
        As in :func:`plot_contour`. Points where the ratio is NaN/inf, and points whose
        batch-norm variances were clamped at zero, are marked and counted in the title.

    Returns
    -------
    Axes
    """
    caller = "plot_eigen_ratio"
    ls = check_landscape(landscape, caller)
    check_param("vmax", vmax, [None, Interval(float, 0, None, closed="neither")], caller=caller)
    check_param("levels", levels, [Interval(int, 2, None)], caller=caller)
    for name, value in (("loss_lines", loss_lines), ("path", path), ("colorbar", colorbar)):
        check_param(name, value, ["boolean"], caller=caller)
    _style.check_aspect(aspect, caller)
    _style.check_common(caller, ax=ax, fig=fig, cmap=cmap, title=title)
    if surface not in ls.surfaces:
        check_param("surface", surface, [Predicate(lambda v: v in ls.surfaces, "the name of one of the "
                                                   f"landscape's surfaces {sorted(ls.surfaces)}")],
                    caller=caller, hint="compute the map with landscape gen --eigen-ratio or "
                    "metrics={'eigen_ratio': EigenRatio()}.")
    ratio = surface_values(ls, surface, caller)
    top = float(vmax) if vmax is not None else _upper([ratio])
    norm = Normalize(0.0, top)
    fig, ax = _style.new_axes(ax, fig, ls=ls, aspect=aspect)
    x, y = np.asarray(ls.x, dtype=float), np.asarray(ls.y, dtype=float)
    cm = _scale.colormap(cmap or EIGEN_CMAP)
    mesh = ax.pcolormesh(x, y, np.ma.masked_invalid(ratio), norm=norm, cmap=cm, shading="gouraud")
    mesh.set_gid("eigen_ratio")
    if loss_lines:
        z = np.ma.masked_invalid(np.asarray(ls.z, dtype=float))
        scale = _scale.color_scale([np.asarray(ls.z, dtype=float)], log="auto")
        lines = ax.contour(x, y, z, levels=scale.levels(levels), colors="black", linewidths=0.6, alpha=0.6)
        lines.set_gid("loss_lines")
    ax.set_xlim(x.min(), x.max())
    ax.set_ylim(y.min(), y.max())
    xlabel, ylabel = _style.axis_labels(ls)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(_marks.with_count(title if title is not None else _style.title(ls, LABEL), ratio, ls),
                 fontsize="medium")
    if _style.true_aspect(ls, aspect):
        ax.set_aspect("equal", adjustable="box")
    marks = _marks.mark_grid(ax, x, y, ratio, what=LABEL) + _marks.mark_clamped(ax, ls)
    if colorbar:
        _scale.add_colorbar(fig, mesh, ax, f"{LABEL}  (blue: convex, red: non-convex)",
                            "max" if np.nanmax(ratio) > top else "neither")
    if path:
        _path.draw_path(ax, ls)
        _path.draw_convergence(ax, ls)
    if path or marks:
        _path.add_legend(ax)
    return ax


def compare_eigen_ratio(runs: Mapping[str, Landscape], *, fig: Figure | None = None, quantile: float = 0.1,
                        threshold: float = 0.1, title: str | None = None) -> Figure:
    """Runs side by side: loss (top row, one colour scale) and eigen-ratio maps (bottom row,
    one colour scale), each map titled with its non-convexity score.

    Parameters
    ----------
    runs : mapping of str to Landscape
        Each with an ``eigen_ratio`` surface.
    fig : Figure, optional
    quantile, threshold : float
        Of :func:`landscape.curvature.nonconvexity`: the score is the mean ratio over the
        points whose loss is in the lowest ``quantile``, and the fraction of points above
        ``threshold``.
    title : str, optional

    Returns
    -------
    Figure
    """
    caller = "compare_eigen_ratio"
    check_param("runs", runs, [Predicate(lambda v: isinstance(v, Mapping) and len(v) > 0 and all(
        isinstance(ls, Landscape) and EIGEN_RATIO in ls.surfaces for ls in v.values()),
        "a non-empty mapping of names to Landscapes with an 'eigen_ratio' surface")], caller=caller)
    _style.check_common(caller, fig=fig, title=title)
    names, items = list(runs), list(runs.values())
    n = len(items)
    if fig is None:
        fig = Figure(figsize=(4.9 * n + 1.4, 9.0), layout="constrained")
    loss_scale = _scale.color_scale([np.asarray(ls.z, dtype=float) for ls in items], log="auto")
    top = _upper([np.asarray(ls.surfaces[EIGEN_RATIO], dtype=float) for ls in items])
    axes = fig.subplots(2, n, squeeze=False)
    for k, (nm, ls) in enumerate(zip(names, items)):
        note = ls.metadata.get("note")
        head = f"{nm}: loss" + (f"\n{note}" if note else "")
        _loss_panel(ls, axes[0][k], loss_scale, head)
        score = nonconvexity(ls, quantile=quantile, threshold=threshold)
        plot_eigen_ratio(ls, axes[1][k], vmax=top, colorbar=False, path=False,
                         title=f"{nm}: {LABEL}\nmean {score['mean_ratio_low_loss']:.3f} in the lowest "
                               f"{100 * quantile:g} % of loss; {100 * score['fraction_above']:.0f} % of points "
                               f"> {threshold:g}")
        _path.draw_convergence(axes[1][k], ls)
    sm = ScalarMappable(norm=loss_scale.norm, cmap=_scale.colormap(None))
    cb = fig.colorbar(sm, ax=list(axes[0]), shrink=0.85, pad=0.02, extend=loss_scale.extend)
    cb.set_label(_style.value_label("loss", loss_scale.log))
    _scale.set_nice_ticks(cb, loss_scale)
    sm2 = ScalarMappable(norm=Normalize(0.0, top), cmap=_scale.colormap(EIGEN_CMAP))
    cb2 = fig.colorbar(sm2, ax=list(axes[1]), shrink=0.85, pad=0.02)
    cb2.set_label(f"{LABEL}  (blue: convex, red: non-convex)")
    if title:
        fig.suptitle(title, fontsize="x-large")
    return fig


def _loss_panel(ls: Landscape, ax: Axes, scale: _scale.ColorScale, title: str) -> None:
    x, y = np.asarray(ls.x, dtype=float), np.asarray(ls.y, dtype=float)
    z = _scale.masked(np.asarray(ls.z, dtype=float), scale)
    lv = scale.levels(20)
    cs = ax.contourf(x, y, z, levels=lv, norm=scale.norm, cmap=_scale.colormap(None), extend=scale.extend)
    ax.contour(x, y, z, levels=lv, colors="black", linewidths=0.35, alpha=0.35)
    xlabel, ylabel = _style.axis_labels(ls)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(_marks.with_count(title, ls.z, ls), fontsize="medium")
    cs.set_gid("landscape")
    _marks.mark_grid(ax, x, y, np.asarray(ls.z, dtype=float), log=scale.log)
    _marks.mark_clamped(ax, ls)
    _path.draw_convergence(ax, ls)
