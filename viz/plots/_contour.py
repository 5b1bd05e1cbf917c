"""Contour lines, filled contours and heatmaps of one landscape (private)."""

from __future__ import annotations

from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from collector.common import check_param
from landscape.result import Landscape
from viz.io import check_landscape, surface_values
from viz.plots import _marks, _path, _scale, _style

__all__ = ["plot_contour", "plot_filled_contour", "plot_heatmap"]


def _check(caller: str, landscape: Any, path: Any, colorbar: Any, aspect: Any, **common: Any) -> Landscape:
    ls = check_landscape(landscape, caller)
    check_param("path", path, ["boolean"], caller=caller)
    check_param("colorbar", colorbar, ["boolean"], caller=caller)
    _style.check_aspect(aspect, caller)
    _style.check_common(caller, **common)
    return ls


def _finish(fig: Figure, ax: Axes, ls: Landscape, z: np.ndarray, mappable: Any, scale: _scale.ColorScale, *,
            surface: str, path: bool, colorbar: bool, title: str | None, aspect: _style.AspectOption) -> None:
    """Labels, title (with the counts of NaN/inf and clamped points), colour bar, their marks, path and star."""
    xlabel, ylabel = _style.axis_labels(ls)
    ax.xaxis.set_major_locator(MaxNLocator(nbins=6))
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(_marks.with_count(title if title is not None else _style.title(ls, surface), z, ls),
                 fontsize="medium")
    if _style.true_aspect(ls, aspect):  # equal units: the path's angles and lengths as they are
        ax.set_aspect("equal", adjustable="box")
    if colorbar:
        _scale.add_colorbar(fig, mappable, ax, _style.value_label(surface, scale.log), scale.extend,
                            scale=scale)
    marks = _marks.mark_grid(ax, ls.x, ls.y, z, what=surface, log=scale.log) + _marks.mark_clamped(ax, ls)
    if path:
        _path.draw_path(ax, ls)
        _path.draw_markers(ax, ls)
        _path.draw_convergence(ax, ls)
    if path or marks:
        _path.add_legend(ax)


def _contour(caller: str, landscape: Landscape, ax: Axes | None, fig: Figure | None, filled: bool, *,
             levels: Any, log: Any, path: bool, surface: str, cmap: Any, title: str | None,
             colorbar: bool, vmin: float | None, vmax: float | None, aspect: _style.AspectOption) -> Axes:
    ls = _check(caller, landscape, path, colorbar, aspect, log=log, levels=levels, ax=ax, fig=fig, cmap=cmap,
                title=title, vmin=vmin, vmax=vmax)
    z = surface_values(ls, surface, caller)
    scale = _scale.color_scale([z], log=log, vmin=vmin, vmax=vmax)
    fig, ax = _style.new_axes(ax, fig, ls=ls, aspect=aspect)
    lv = scale.levels(levels)
    zm = _scale.masked(z, scale)
    cm = _scale.colormap(cmap)
    x, y = np.asarray(ls.x, dtype=float), np.asarray(ls.y, dtype=float)
    if filled:
        cs = ax.contourf(x, y, zm, levels=lv, norm=scale.norm, cmap=cm, extend=scale.extend)
        ax.contour(x, y, zm, levels=lv, colors="black", linewidths=0.35, alpha=0.35)
    else:
        cs = ax.contour(x, y, zm, levels=lv, norm=scale.norm, cmap=cm, linewidths=1.1, extend=scale.extend)
        levels = np.asarray(cs.levels)
        shown = levels[1::4] if len(levels) > 8 else levels
        ax.clabel(cs, shown, inline=True, fontsize=7, fmt="%.3g")
    cs.set_gid("landscape")
    ax.set_xlim(x.min(), x.max())
    ax.set_ylim(y.min(), y.max())
    _finish(fig, ax, ls, z, cs, scale, surface=surface, path=path, colorbar=colorbar, title=title, aspect=aspect)
    return ax


def plot_contour(landscape: Landscape, ax: Axes | None = None, *, fig: Figure | None = None,
                 levels: int | Any = 20, log: _style.LogOption = "auto", path: bool = True,
                 surface: str = "loss", cmap: Any = None, title: str | None = None,
                 colorbar: bool = True, vmin: float | None = None, vmax: float | None = None,
                 aspect: _style.AspectOption = None) -> Axes:
    """Contour lines of a landscape, with the training path and convergence point.

    Parameters
    ----------
    landscape : Landscape
        The landscape; ``z[i, j]`` is drawn at ``(x[j], y[i])``.
    ax : Axes, optional
        Axes to draw on; by default a new Figure with one axes (no pyplot state).
    fig : Figure, optional
        Figure to add the axes to when ``ax`` is None.
    levels : int or sequence of float, default=20
        Number of contour levels (spread over the colour range) or the levels themselves.
    log : bool or "auto", default="auto"
        Logarithmic colour scale; "auto" turns it on when the finite values are positive
        and span more than a decade after clipping outliers. The colour bar says
        "(log scale)"; a narrow range (below 10 % of its values) is printed under it.
    path : bool, default=True
        Draw the training path (PCA landscapes), the models of a view through models, and
        the centre: ``metadata["centre"]`` when the generation evaluated it, else the end
        of the path, else ``convergence_point``.
    surface : str, default="loss"
        "loss" or the name of one of ``landscape.surfaces``.
    cmap : str or Colormap, optional
        Colormap (default viridis). NaN/inf points are never a silent gap: each is marked
        (X for NaN, triangles for +-inf) and counted in the title and the legend; so are
        the points whose batch-norm variances were clamped at zero (``landscape.clamped``:
        hollow orange squares).
    title : str, optional
        Axes title; built from the tag by default.
    colorbar : bool, default=True
        Add a colourbar labelled with the surface name.
    vmin, vmax : float, optional
        Fix the ends of the colour range (by default the finite range, its top clipped
        at the 98th percentile when the maximum is an outlier).
    aspect : {"equal", "auto"}, optional
        "equal": the same data units on both axes (the path's angles and lengths true);
        "auto": the axes fill the panel. By default "equal" for PCA planes and planes
        through three models (both axes are distances in parameter space), else "auto".

    Returns
    -------
    Axes
    """
    return _contour("plot_contour", landscape, ax, fig, False, levels=levels, log=log, path=path,
                    surface=surface, cmap=cmap, title=title, colorbar=colorbar, vmin=vmin, vmax=vmax,
                    aspect=aspect)


def plot_filled_contour(landscape: Landscape, ax: Axes | None = None, *, fig: Figure | None = None,
                        levels: int | Any = 20, log: _style.LogOption = "auto", path: bool = True,
                        surface: str = "loss", cmap: Any = None, title: str | None = None,
                        colorbar: bool = True, vmin: float | None = None, vmax: float | None = None,
                        aspect: _style.AspectOption = None) -> Axes:
    """Filled contours of a landscape (thin level lines on top).

    Parameters
    ----------
    landscape, ax, fig, levels, log, path, surface, cmap, title, colorbar, vmin, vmax, aspect
        As for :func:`plot_contour`.

    Returns
    -------
    Axes
    """
    return _contour("plot_filled_contour", landscape, ax, fig, True, levels=levels, log=log, path=path,
                    surface=surface, cmap=cmap, title=title, colorbar=colorbar, vmin=vmin, vmax=vmax,
                    aspect=aspect)


def plot_heatmap(landscape: Landscape, ax: Axes | None = None, *, fig: Figure | None = None,
                 log: _style.LogOption = "auto", path: bool = True, surface: str = "loss", cmap: Any = None,
                 title: str | None = None, colorbar: bool = True, vmin: float | None = None,
                 vmax: float | None = None, aspect: _style.AspectOption = None) -> Axes:
    """One coloured cell per grid point (NaN/inf cells grey and marked).

    Parameters
    ----------
    landscape, ax, fig, log, path, surface, cmap, title, colorbar, vmin, vmax, aspect
        As for :func:`plot_contour`.

    Returns
    -------
    Axes
    """
    ls = _check("plot_heatmap", landscape, path, colorbar, aspect, log=log, ax=ax, fig=fig, cmap=cmap,
                title=title, vmin=vmin, vmax=vmax)
    z = surface_values(ls, surface, "plot_heatmap")
    scale = _scale.color_scale([z], log=log, vmin=vmin, vmax=vmax)
    fig, ax = _style.new_axes(ax, fig, ls=ls, aspect=aspect)
    x, y = np.asarray(ls.x, dtype=float), np.asarray(ls.y, dtype=float)
    mesh = ax.pcolormesh(x, y, _scale.masked(z, scale), norm=scale.norm, cmap=_scale.colormap(cmap),
                         shading="nearest")
    mesh.set_gid("landscape")
    _finish(fig, ax, ls, z, mesh, scale, surface=surface, path=path, colorbar=colorbar, title=title,
            aspect=aspect)
    return ax
