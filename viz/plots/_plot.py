"""``plot``: one entry point for every kind of picture, and the Jupyter PNG (private)."""

from __future__ import annotations

import io
from collections.abc import Mapping
from typing import Any, Literal, cast, overload

from matplotlib.axes import Axes
from matplotlib.figure import Figure

from collector.common import Interval, InvalidParameterError, Options, check_param
from landscape.curvature import SpectralDensity
from landscape.result import Landscape
from viz.io import check_landscape
from viz.plots import _style
from viz.plots._contour import plot_contour, plot_filled_contour, plot_heatmap
from viz.plots._curvature import plot_eigen_ratio
from viz.plots._line import plot_line
from viz.plots._slices import plot_slices
from viz.plots._spectrum import is_spectrum, plot_spectrum
from viz.plots._surface import plot_surface
from viz.plots._topology import plot_topology

__all__ = ["plot", "repr_png", "KINDS"]

KINDS = ("contour", "filled", "surface", "heatmap", "line", "eigen-ratio", "all", "topology")
Kind = Literal["contour", "filled", "surface", "heatmap", "line", "eigen-ratio"]
_PLANE_KINDS = ("contour", "filled", "surface", "heatmap", "eigen-ratio")


@overload
def plot(landscape: Landscape, kind: Kind | None = ..., *, ax: Axes | None = ..., fig: Figure | None = ...,
         **kwargs: Any) -> Axes: ...


@overload
def plot(landscape: Landscape, kind: Literal["all"], *, ax: None = ..., fig: Figure | None = ...,
         **kwargs: Any) -> Figure: ...


@overload
def plot(landscape: Landscape, kind: str, *, ax: Axes | None = ..., fig: Figure | None = ...,
         **kwargs: Any) -> Axes | Figure: ...


@overload
def plot(landscape: SpectralDensity, kind: None = ..., *, ax: Axes | None = ..., fig: Figure | None = ...,
         **kwargs: Any) -> Axes: ...


@overload
def plot(landscape: Mapping[str, SpectralDensity], kind: None = ..., *, ax: None = ..., fig: Figure | None = ...,
         **kwargs: Any) -> Figure: ...


def plot(landscape: Landscape | SpectralDensity | Mapping[str, SpectralDensity], kind: str | None = None, *,
         ax: Axes | None = None, fig: Figure | None = None, **kwargs: Any) -> Axes | Figure:
    """Draw a landscape as contour lines, filled contours, a 3-D surface, a heatmap, all of them,
    or, for a line, the loss along it.

    Read more in the user guide: [Pictures](../pictures.md).

    Parameters
    ----------
    landscape : Landscape
        The landscape to draw; or :func:`landscape.curvature.spectral_density`'s result, a
        ``SpectralDensity`` or a dict of them (``kind`` None: :func:`plot_spectrum`, the log
        density over the eigenvalues, the top ones marked; the blocks as small multiples).
    kind : {"contour", "filled", "surface", "heatmap", "line", "eigen-ratio", "all", "topology"}, optional
        By default "filled" for a plane, "line" for a line (:func:`plot_line`: loss and
        accuracy on two y axes, the models marked) and "topology" for an n-D grid. "all"
        draws a 2x3 Figure for a plane: contour, filled contour, heatmap, surface and the
        two 1-D slices through the convergence point (for a line, the line).
        "eigen-ratio" draws the Hessian's ``|lambda_min/lambda_max|`` map
        (:func:`plot_eigen_ratio`). "topology" draws a Figure of the landscape with its
        minima and saddles, its persistence diagram and its merge tree
        (:func:`plot_topology`; ``connectivity`` and ``threshold`` passed on).
    ax : Axes, optional
        Axes to draw on (not with kind="all"; a 3-D axes for "surface").
    fig : Figure, optional
        Figure to draw into when ``ax`` is None.
    **kwargs
        Passed on: ``levels``, ``log``, ``path``, ``surface``, ``cmap``, ``title``,
        ``colorbar``, ``aspect`` (and ``elev``/``azim`` for surfaces); see
        :func:`plot_contour`. NaN/inf points are marked and counted on every kind.

    Returns
    -------
    Axes or Figure
        The Axes drawn on (save it with ``ax.figure.savefig(...)``), or the Figure for
        kind="all" on a plane and kind="topology" (``fig.savefig(...)``). Nothing goes through pyplot: the
        figure is not among ``plt.get_fignums()`` and the backend is left alone.

    Examples
    --------
    >>> ax = viz.plot(landscape, "contour", log=True)       # doctest: +SKIP
    >>> ax.figure.savefig("landscape.png", dpi=150)          # doctest: +SKIP
    """
    if is_spectrum(landscape):  # an eigenvalue density has one picture of its own
        check_param("kind", kind, [None], caller="plot", hint="an eigenvalue density is drawn one way.")
        return plot_spectrum(cast(Any, landscape), ax, fig=fig, **kwargs)
    check_param("kind", kind, [Options(KINDS), None], caller="plot")
    landscape = check_landscape(landscape, "plot")
    if kind == "topology" or (landscape.dims > 2 and kind is None):  # an n-D grid's one picture
        if ax is not None:
            raise ValueError("The 'ax' parameter of plot must be None with kind='topology' (it draws a whole "
                             "Figure). HINT: pass fig=... instead.")
        return plot_topology(landscape, fig=fig, **kwargs)
    if landscape.dims > 2:
        raise InvalidParameterError(
            f"The 'kind' parameter of plot must be None or 'topology' for a grid of {landscape.dims} directions "
            f"(no picture shows it whole). Got {kind!r} instead.")
    line = landscape.dims == 1
    if kind is None or (line and kind == "all"):
        kind = "line" if line else "filled"
    if line != (kind == "line"):
        raise InvalidParameterError(
            f"The 'kind' parameter of plot must be {'line' if line else 'one of ' + repr(_PLANE_KINDS) + ' or all'} "
            f"for {'a line' if line else 'a plane'}. Got {kind!r} instead. HINT: "
            + ("a line has one axis; leave kind None." if line else "viz.plot_slices cuts 1-D slices out of a plane."))
    if kind == "line":
        return plot_line(landscape, ax, fig=fig, **kwargs)
    if kind == "all":
        if ax is not None:
            raise ValueError("The 'ax' parameter of plot must be None with kind='all' (it draws a whole "
                             "Figure). HINT: pass fig=... instead.")
        return _plot_all(landscape, fig, **kwargs)
    if kind == "eigen-ratio":
        drop = ("levels", "log", "surface", "vmin")  # the map's own: a linear scale from 0, its own surface
        return plot_eigen_ratio(landscape, ax, fig=fig, **{k: v for k, v in kwargs.items() if k not in drop})
    funcs = {"contour": plot_contour, "filled": plot_filled_contour, "heatmap": plot_heatmap,
             "surface": plot_surface}
    if kind in ("heatmap", "surface") and "levels" in kwargs:
        kwargs = {k: v for k, v in kwargs.items() if k != "levels"}
    return funcs[kind](landscape, ax, fig=fig, **kwargs)


def _plot_all(ls: Landscape, fig: Figure | None, **kwargs: Any) -> Figure:
    _style.check_common("plot", fig=fig, **{k: v for k, v in kwargs.items() if k in ("log", "levels", "cmap")})
    top_height = _style.panel_height(ls, kwargs.get("aspect"), 17 / 3)  # low when PCA's true aspect is
    if fig is None:
        fig = Figure(figsize=(17, top_height + 4.8), layout="constrained")
    top, bottom = fig.subfigures(2, 1, height_ratios=[top_height, 4.8])  # type: ignore[misc]  # an array of two
    axes = top.subplots(1, 3)
    no_levels = {k: v for k, v in kwargs.items() if k not in ("levels", "title", "elev", "azim")}
    two_d = {k: v for k, v in kwargs.items() if k not in ("title", "elev", "azim")}
    plot_contour(ls, axes[0], title="contour lines", **two_d)
    plot_filled_contour(ls, axes[1], title="filled contour", **two_d)
    plot_heatmap(ls, axes[2], title="heatmap", **no_levels)
    left, right = bottom.subfigures(1, 2, width_ratios=[1.0, 1.6])
    ax3d = left.add_subplot(projection="3d")
    plot_surface(ls, ax3d, title="surface", **{k: v for k, v in kwargs.items() if k not in ("levels", "title")})
    slice_kw = {k: v for k, v in kwargs.items() if k in ("log", "surface")}
    plot_slices(ls, right, title="1-D slices through the centre", **slice_kw)
    fig.suptitle(kwargs.get("title") or _style.title(ls, kwargs.get("surface", "loss")), fontsize="x-large")
    return fig


def repr_png(landscape: Landscape, *, kind: str | None = None, dpi: int = 100) -> bytes:
    """A PNG of the landscape (for ``Landscape._repr_png_``, Jupyter's inline display).

    Parameters
    ----------
    landscape : Landscape
    kind : {"contour", "filled", "surface", "heatmap", "line", "all", "topology"}, optional
        By default "filled" for a plane, "line" for a line, "topology" for an n-D grid.
    dpi : int, default=100

    Returns
    -------
    bytes
        The PNG file's bytes.
    """
    check_param("kind", kind, [Options(KINDS), None], caller="repr_png")
    check_param("dpi", dpi, [Interval(int, 10, 1000)], caller="repr_png")
    result = plot(landscape, kind)
    fig = cast(Figure, result if isinstance(result, Figure) else result.figure)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    return buf.getvalue()
