"""The 3-D surface, with a view angle that keeps the minimum in sight (private)."""

from __future__ import annotations

from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.cm import ScalarMappable
from matplotlib.figure import Figure

from collector.common import Interval, check_param
from landscape.result import Landscape
from viz.io._arrays import check_landscape, surface_values
from viz.plots import _path, _style

__all__ = ["plot_surface", "view_angle"]

# candidate cameras, best first: matplotlib's default, then the other corners, then steeper
_CANDIDATES = [(elev, azim) for elev in (30, 45, 60) for azim in (-60, -120, 120, 60, -30, 30, 150, -150)]
_Z_ASPECT = 0.75  # mplot3d's default box aspect is (4, 4, 3)


def view_angle(z: np.ndarray, *, target: tuple[int, int] | None = None) -> tuple[float, float]:
    """``(elev, azim)`` from which the grid cell ``target`` (the minimum by default) is not hidden.

    The grid is scaled to mplot3d's box (x and y to [0, 1], z to [0, 0.75]); for each
    candidate camera a ray is marched from the target cell towards the camera, and the
    first camera whose ray stays above the surface wins. When every candidate is
    blocked, the one with the smallest overshoot wins.

    Parameters
    ----------
    z : ndarray of shape (len(y), len(x))
        Heights as drawn (NaN/inf count as the top of the box).
    target : tuple of int, optional
        Grid index ``(i, j)`` to keep in sight; the minimum by default.

    Returns
    -------
    tuple of float
        ``(elev, azim)`` in degrees, for ``Axes3D.view_init``.
    """
    z = np.asarray(z, dtype=float)
    finite = np.isfinite(z)
    if not finite.any():
        return 30.0, -60.0
    lo, hi = float(z[finite].min()), float(z[finite].max())
    h = np.where(finite, (z - lo) / ((hi - lo) or 1.0), 1.0) * _Z_ASPECT
    ny, nx = h.shape
    if target is None:
        ti, tj = (int(k) for k in np.unravel_index(int(np.argmin(np.where(finite, z, np.inf))), z.shape))
    else:
        ti, tj = target
    px, py, pz = tj / max(nx - 1, 1), ti / max(ny - 1, 1), h[ti, tj]
    steps = np.linspace(0, 1.5, 301)[1:]
    best, best_over = (30.0, -60.0), np.inf
    for elev, azim in _CANDIDATES:
        e, a = np.radians(elev), np.radians(azim)
        dx, dy, dz = np.cos(e) * np.cos(a), np.cos(e) * np.sin(a), np.sin(e)
        xs, ys, zs = px + steps * dx, py + steps * dy, pz + steps * dz + 0.01
        inside = (xs >= 0) & (xs <= 1) & (ys >= 0) & (ys <= 1)
        if not inside.any():
            return float(elev), float(azim)
        jj = np.clip(np.rint(xs[inside] * (nx - 1)).astype(int), 0, nx - 1)
        ii = np.clip(np.rint(ys[inside] * (ny - 1)).astype(int), 0, ny - 1)
        over = float(np.max(h[ii, jj] - zs[inside]))
        if over <= 0:
            return float(elev), float(azim)
        if over < best_over:
            best, best_over = (float(elev), float(azim)), over
    return best


def plot_surface(landscape: Landscape, ax: Axes | None = None, *, fig: Figure | None = None,
                 log: _style.LogOption = "auto", path: bool = True, surface: str = "loss", cmap: Any = None,
                 title: str | None = None, colorbar: bool = True, elev: float | None = None,
                 azim: float | None = None, vmin: float | None = None, vmax: float | None = None) -> Axes:
    """The landscape as a 3-D surface coloured by its value.

    The height is clipped at the top of the colour range (an outlier does not turn the
    surface into one spike), log10 of the value on a log scale; NaN/inf cells are left
    out. The camera is chosen by :func:`view_angle` so the minimum stays visible unless
    ``elev``/``azim`` are given.

    Parameters
    ----------
    landscape : Landscape
    ax : Axes, optional
        A 3-D axes (``projection="3d"``); by default a new Figure with one.
    fig : Figure, optional
        Figure to add the axes to when ``ax`` is None.
    log : bool or "auto", default="auto"
        As in :func:`plot_contour`.
    path : bool, default=True
        Draw the training path on the surface and the convergence point.
    surface : str, default="loss"
        "loss" or the name of one of ``landscape.surfaces``.
    cmap : str or Colormap, optional
    title : str, optional
    colorbar : bool, default=True
    elev, azim : float, optional
        Camera angles in degrees; chosen automatically when None.
    vmin, vmax : float, optional
        Fix the ends of the colour and height range.

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
    _style.check_common(caller, log=log, ax=ax, fig=fig, cmap=cmap, title=title, vmin=vmin, vmax=vmax)
    z = surface_values(ls, surface, caller)
    scale = _style.color_scale([z], log=log, vmin=vmin, vmax=vmax)
    fig, ax2 = _style.new_axes(ax, fig, projection="3d", figsize=(6.4, 5.2))
    ax3: Any = ax2  # an Axes3D: plot_surface, view_init, set_z*
    x, y = np.asarray(ls.x, dtype=float), np.asarray(ls.y, dtype=float)
    X, Y = np.meshgrid(x, y)
    zc = np.where(np.isfinite(z), z, np.nan)
    if scale.log:
        zc = np.where(zc > 0, zc, np.nan)
    heights = _path._surface_z(zc, scale)
    cm = _style.colormap(cmap)
    # plot_surface colours face (i, j) with facecolors[i, j]: give it the mean of its 4 corners
    corners = np.stack([zc[:-1, :-1], zc[1:, :-1], zc[:-1, 1:], zc[1:, 1:]])
    face = np.full_like(zc, np.nan)
    ok = np.isfinite(corners)
    count = ok.sum(axis=0)
    total = np.where(ok, np.clip(corners, scale.vmin, scale.vmax), 0.0).sum(axis=0)
    face[:-1, :-1] = np.where(count > 0, total / np.maximum(count, 1), np.nan)
    face = np.where(np.isfinite(face), face, scale.vmax)
    colors = cm(scale.norm(np.clip(face, scale.vmin, scale.vmax)))
    surf = ax3.plot_surface(X, Y, heights, facecolors=colors, rstride=1, cstride=1, linewidth=0.15,
                           edgecolor=(0, 0, 0, 0.15), antialiased=True, shade=False)
    surf.set_gid("landscape")
    if elev is None or azim is None:
        e, a = view_angle(heights)
        elev, azim = (e if elev is None else elev), (a if azim is None else azim)
    ax3.view_init(elev=elev, azim=azim)
    xlabel, ylabel = _style.axis_labels(ls)
    ax3.set_xlabel(xlabel, labelpad=6)
    ax3.set_ylabel(ylabel, labelpad=6)
    ax3.set_zlabel(_style.value_label(surface, scale.log), labelpad=6)
    ax3.set_zlim(*(np.log10([scale.vmin, scale.vmax]) if scale.log else (scale.vmin, scale.vmax)))
    if scale.log:  # heights are log10(value): label the ticks with the values themselves
        ticks = _style.nice_ticks(scale)
        ax3.set_zticks(np.log10(ticks), [f"{t:.3g}" for t in ticks])
    ax3.set_box_aspect(None, zoom=0.88)  # room for the tick and axis labels whichever side they land on
    ax3.tick_params(labelsize=7)
    ax3.set_title(title if title is not None else _style.title(ls, surface), fontsize="medium")
    if colorbar:
        sm = ScalarMappable(norm=scale.norm, cmap=cm)
        _style.add_colorbar(fig, sm, ax2, _style.value_label(surface, scale.log), scale.extend,
                            scale=scale)
    if path:
        _path.draw_path(ax2, ls, scale=scale)
        _path.draw_markers(ax2, ls, scale=scale)
        _path.draw_convergence(ax2, ls, scale=scale)
        _path.add_legend(ax2)
    return ax2
