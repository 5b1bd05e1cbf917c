"""The 3-D surface: faces in a correct depth order, a camera that keeps the minimum and the
centre in sight, true aspect for PCA planes (private)."""

from __future__ import annotations

from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.cm import ScalarMappable
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from collector.common import Interval, check_param
from landscape.result import Landscape
from viz.io import centre, check_landscape, surface_values
from viz.plots import _depth, _marks, _path, _scale, _style
from viz.plots._depth import view_angle

__all__ = ["plot_surface"]



def plot_surface(landscape: Landscape, ax: Axes | None = None, *, fig: Figure | None = None,
                 log: _style.LogOption = "auto", path: bool = True, surface: str = "loss", cmap: Any = None,
                 title: str | None = None, colorbar: bool = True, elev: float | None = None,
                 azim: float | None = None, vmin: float | None = None, vmax: float | None = None,
                 aspect: _style.AspectOption = None) -> Axes:
    """The landscape as a 3-D surface coloured by its value.

    The height is clipped at the top of the colour range (an outlier does not turn the
    surface into one spike), log10 of the value on a log scale. The faces are painted far
    to near by the depth of their footprints in an orthographic view, which is exact for
    a height field (matplotlib's own order, by the faces' mean depth, paints tall faces at
    the back over the basin in front). The camera is chosen by :func:`view_angle` so the
    minimum and the centre stay visible unless ``elev``/``azim`` are given; a centre that
    those angles put behind the surface is drawn faded and says so in the legend. A quad
    with a NaN/inf corner is left out and the point is marked at the top of the box (the
    bottom for -inf) and counted in the title and the legend; a point whose batch-norm
    variances were clamped at zero (``landscape.clamped``) is marked on the surface and
    counted too.

    Parameters
    ----------
    landscape : Landscape
    ax : Axes, optional
        A 3-D axes (``projection="3d"``); by default a new Figure with one. Its projection
        is set to orthographic (the depth order is exact there).
    fig : Figure, optional
        Figure to add the axes to when ``ax`` is None.
    log : bool or "auto", default="auto"
        As in :func:`plot_contour`.
    path : bool, default=True
        Draw the training path on the surface and the centre.
    surface : str, default="loss"
        "loss" or the name of one of ``landscape.surfaces``.
    cmap : str or Colormap, optional
    title : str, optional
    colorbar : bool, default=True
    elev, azim : float, optional
        Camera angles in degrees; chosen automatically when None.
    vmin, vmax : float, optional
        Fix the ends of the colour and height range.
    aspect : {"equal", "auto"}, optional
        "equal": the box's x and y sides in proportion to the axes' spans; "auto": a
        square base. By default "equal" for PCA planes and planes through three models.

    Returns
    -------
    Axes
        The 3-D axes.
    """
    caller = "plot_surface"
    ls = check_landscape(landscape, caller)
    check_param("path", path, ["boolean"], caller=caller)
    check_param("colorbar", colorbar, ["boolean"], caller=caller)
    check_param("elev", elev, [None, Interval(float, -90, 90)], caller=caller)
    check_param("azim", azim, [None, Interval(float, -360, 360)], caller=caller)
    _style.check_aspect(aspect, caller)
    _style.check_common(caller, log=log, ax=ax, fig=fig, cmap=cmap, title=title, vmin=vmin, vmax=vmax)
    z = surface_values(ls, surface, caller)
    # the exactly evaluated centre (or a model of the view) can lie below every grid point (an
    # even grid misses it): its height is in the box, not clipped to the grid's minimum
    exact = [m[2] for m in ls.markers.values()] or [centre(ls)[2]]
    scale = _scale.color_scale([z, np.array(exact if path and surface == "loss" else [])], log=log, vmin=vmin,
                               vmax=vmax)
    fig, ax2 = _style.new_axes(ax, fig, projection="3d", figsize=(6.4, 5.2))
    ax3: Any = ax2  # an Axes3D: view_init, set_z*, set_box_aspect
    x, y = np.asarray(ls.x, dtype=float), np.asarray(ls.y, dtype=float)
    heights = _draw_mesh(ax3, x, y, z, scale, cmap)
    box = _box(x, y, _style.true_aspect(ls, aspect))
    ax3.set_proj_type("ortho")
    ax3.set_box_aspect(box, zoom=0.88)  # zoom: room for the tick and axis labels whichever side they land on
    cell = _centre_cell(ls, x, y)
    if elev is None or azim is None:
        e, a = view_angle(heights, also=[cell] if cell else [], box=box)
        elev, azim = (e if elev is None else elev), (a if azim is None else azim)
    ax3.view_init(elev=elev, azim=azim)
    _label(ax3, ls, z, scale, surface, title, box, float(elev))
    if colorbar:
        sm = ScalarMappable(norm=scale.norm, cmap=_scale.colormap(cmap))
        _scale.add_colorbar(fig, sm, ax2, _style.value_label(surface, scale.log), scale.extend, scale=scale)
    marks = _marks.mark_grid(ax2, x, y, z, what=surface, heights=_path._heights(scale), log=scale.log)
    marks += _marks.mark_clamped(ax2, ls, heights=_path._surface_z(z, scale))  # a NaN/inf point at the box's top
    if path:
        _path.draw_path(ax2, ls, scale=scale)
        _path.draw_markers(ax2, ls, scale=scale)
        star = _path.draw_convergence(ax2, ls, scale=scale)
        if star is not None and cell and _depth.hidden(heights, cell, float(elev), float(azim), box):
            star.set_alpha(0.4)
            star.set_label(star.get_label() + ", behind the surface")
    if path or marks:
        _path.add_legend(ax2)
    return ax2


def _draw_mesh(ax3: Any, x: np.ndarray, y: np.ndarray, z: np.ndarray, scale: _scale.ColorScale,
               cmap: Any) -> np.ndarray:
    """The surface as a :class:`_depth.SortedSurface`; returns the heights drawn (NaN: no value)."""
    ok = np.isfinite(z) & ((z > 0) if scale.log else True)
    zc = np.where(ok, z, np.nan)
    heights = np.where(ok, _path._surface_z(zc, scale), np.nan)
    # face (i, j) is coloured by the mean of its 4 corners
    corners = np.stack([zc[:-1, :-1], zc[1:, :-1], zc[:-1, 1:], zc[1:, 1:]])
    face = np.full_like(zc, scale.vmax)
    good = np.isfinite(corners)
    total = np.where(good, np.clip(corners, scale.vmin, scale.vmax), 0.0).sum(axis=0)
    face[:-1, :-1] = np.where(good.any(axis=0), total / np.maximum(good.sum(axis=0), 1), scale.vmax)
    colors = _scale.colormap(cmap)(scale.norm(np.clip(face, scale.vmin, scale.vmax)))
    X, Y = np.meshgrid(x, y)
    surf = _depth.SortedSurface(X, Y, heights, colors, linewidths=0.15, edgecolors=(0, 0, 0, 0.15),
                                antialiaseds=True)
    surf.set_gid("landscape")
    ax3.add_collection(surf)
    ax3.set_xlim(float(x.min()), float(x.max()))
    ax3.set_ylim(float(y.min()), float(y.max()))
    return heights


def _box(x: np.ndarray, y: np.ndarray, true_aspect: bool) -> tuple[float, float, float]:
    """The box aspect: x and y sides in proportion to the spans (true aspect) or square."""
    if not true_aspect:
        return _depth.DEFAULT_BOX
    sx, sy = float(np.ptp(x)) or 1.0, float(np.ptp(y)) or 1.0
    m = max(sx, sy)
    return sx / m, sy / m, _depth.DEFAULT_BOX[2]


def _centre_cell(ls: Landscape, x: np.ndarray, y: np.ndarray) -> tuple[int, int] | None:
    """The grid cell nearest the centre, when the centre lies on the grid."""
    cx, cy, _ = centre(ls)
    if ls.markers or not (x.min() <= cx <= x.max() and y.min() <= cy <= y.max()):
        return None
    return int(np.argmin(np.abs(y - cy))), int(np.argmin(np.abs(x - cx)))


def _label(ax3: Any, ls: Landscape, z: np.ndarray, scale: _scale.ColorScale, surface: str,
           title: str | None, box: tuple[float, float, float], elev: float) -> None:
    xlabel, ylabel = _style.axis_labels(ls)
    ax3.set_xlabel(xlabel, labelpad=6)
    ax3.set_ylabel(ylabel, labelpad=6)
    ax3.set_zlabel(_style.value_label(surface, scale.log), labelpad=6)
    ax3.set_zlim(*(np.log10([scale.vmin, scale.vmax]) if scale.log else (scale.vmin, scale.vmax)))
    room = max(2, round(7 * np.cos(np.radians(elev))))  # seen from high up, the z axis is short
    if scale.log:  # heights are log10(value): label the ticks with the values themselves
        ticks = _scale.nice_ticks(scale)
        ticks = ticks[::int(np.ceil(ticks.size / room))]
        ax3.set_zticks(np.log10(ticks), _scale.tick_labels(ticks))
    else:
        ax3.zaxis.set_major_locator(MaxNLocator(nbins=room))
    ax3.tick_params(labelsize=7)
    for axis, side in ((ax3.xaxis, box[0]), (ax3.yaxis, box[1])):  # a short side of a true-aspect box
        axis.set_major_locator(MaxNLocator(nbins=max(2, round(6 * side))))  # gets fewer ticks
    ax3.set_title(_marks.with_count(title if title is not None else _style.title(ls, surface), z, ls),
                  fontsize="medium")
