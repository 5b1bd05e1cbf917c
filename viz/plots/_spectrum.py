"""The eigenvalue density of a curvature matrix, as PyHessian draws it (private).

Ghorbani et al.'s (2019) figure: the smoothed density (stochastic Lanczos quadrature,
:func:`landscape.curvature.spectral_density`) on a log scale over the eigenvalues, so that
the bulk near zero and the few large outliers are seen together. Here the top eigenvalues
(``SpectralDensity.top``) are marked on the curve and named, and the title's second line
says how the density was made: runs, Lanczos steps, the matrix, the mean eigenvalue
(``tr / n``) with its standard error, and ``n``. The log axis starts at ``FLOOR`` times the
peak: PyHessian adds 1e-7 to every value to draw it; here nothing is added, and the grid
points whose density is below that (far from every node, where the Gaussians underflow)
lie under the axis. A dict of blocks draws one such panel per block (small multiples,
each with its own axes: the blocks' eigenvalues differ in scale).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from collector.common import InstanceOf, Predicate, check_param
from landscape.curvature import SpectralDensity
from viz.plots import _style

__all__ = ["plot_spectrum", "is_spectrum", "FLOOR", "COLUMNS"]

#: The log axis' bottom, relative to the density's peak (PyHessian's offset is 1e-7).
FLOOR = 1e-7
#: Panels per row of the small multiples.
COLUMNS = 3
_LINE = "#1f4e9c"


def is_spectrum(value: Any) -> bool:
    """Whether ``value`` is a :class:`SpectralDensity` or a non-empty dict of them (``viz.plot``'s dispatch)."""
    if isinstance(value, SpectralDensity):
        return True
    return isinstance(value, Mapping) and len(value) > 0 and all(
        isinstance(d, SpectralDensity) for d in value.values())


def _caption(d: SpectralDensity) -> str:
    err = "" if math.isnan(d.stderr) else f" \u00b1 {d.stderr:.2g}"
    text = (f"{d.runs} runs \u00d7 {d.steps} Lanczos steps, {_name(d)}, mean \u03bb = {d.mean:.4g}{err}, "
            f"n = {d.n:,}")
    if d.mass < 0.99:  # a grid the caller gave that cuts off part of the nodes' mass
        text += f"\nthe grid holds {100 * d.mass:.1f} % of the quadrature's mass"
    return text


def _draw(d: SpectralDensity, ax: Axes, title: str, fontsize: str) -> None:
    peak = float(np.max(d.density))
    line, = ax.plot(d.grid, d.density, color=_LINE, lw=1.3)
    line.set_gid("density")
    ax.set_yscale("log")
    ax.set_ylim(peak * FLOOR, peak * 10)
    margin = 0.04 * float(d.grid[-1] - d.grid[0])  # the outermost marks clear of the frame
    ax.set_xlim(float(d.grid[0]) - margin, float(d.grid[-1]) + margin)
    top = np.asarray(d.top, dtype=float)
    at = np.interp(top, d.grid, d.density)
    marks, = ax.plot(top, at * 2.5, "v", color=_style.PATH_COLOR, ms=7, mec="black", mew=0.6, ls="none",
                     label="top eigenvalues")
    marks.set_gid("top_eigenvalues")
    for i, (x, y) in enumerate(zip(top, at)):
        ax.annotate(f"\u03bb{chr(0x2081 + i)} = {x:.4g}", (x, y * 2.5), xytext=(0, 6 + 11 * (i % 2)),
                    textcoords="offset points", ha="center", fontsize="x-small", path_effects=_style.halo())
    ax.set_xlabel("eigenvalue")
    ax.set_ylabel("density (log scale)")
    ax.set_title(f"{title}\n{_caption(d)}", fontsize=fontsize)
    ax.grid(True, which="major", alpha=0.25)


def _name(d: SpectralDensity) -> str:
    return {"hessian": "Hessian", "ggn": "Gauss-Newton", "fisher": "empirical Fisher"}.get(d.curvature, d.curvature)


def _what(d: SpectralDensity) -> str:
    return f"{_name(d)} eigenvalue density" + (f": {d.block}" if d.block is not None else "")


def plot_spectrum(density: SpectralDensity | Mapping[str, SpectralDensity], ax: Axes | None = None, *,
                  fig: Figure | None = None, title: str | None = None) -> Axes | Figure:
    """The eigenvalue density as PyHessian draws it: log density over the eigenvalues, the top ones marked.

    Parameters
    ----------
    density : SpectralDensity or dict of str to SpectralDensity
        :func:`landscape.curvature.spectral_density`'s result: one density, or one per block.
    ax : Axes, optional
        One density only: the axes to draw on.
    fig : Figure, optional
        Figure to draw into when ``ax`` is None.
    title : str, optional
        The first line of the title (one density) or the figure's title (blocks). Default:
        the matrix and the block.

    Returns
    -------
    Axes or Figure
        The Axes (one density; the curve has gid ``"density"``, the top eigenvalues'
        markers ``"top_eigenvalues"``), or a Figure of one panel per block, in the dict's
        order, ``COLUMNS`` to a row.
    """
    caller = "plot_spectrum"
    check_param("density", density, [InstanceOf(SpectralDensity), Predicate(
        is_spectrum, "a non-empty dict of block names to SpectralDensity")], caller=caller,
        hint="landscape.curvature.spectral_density returns one (a dict with blocks in include=).")
    _style.check_common(caller, ax=ax, fig=fig, title=title)
    if isinstance(density, SpectralDensity):
        fig, ax = _style.new_axes(ax, fig, figsize=(7.0, 4.6))
        _draw(density, ax, title if title is not None else _what(density), "medium")
        return ax
    if ax is not None:
        raise ValueError(f"The 'ax' parameter of {caller} must be None for a dict of blocks (one panel each). "
                         "HINT: pass fig=... instead, or one block's density with ax.")
    rows = -(-len(density) // COLUMNS)
    cols = min(COLUMNS, len(density))
    if fig is None:
        fig = Figure(figsize=(5.4 * cols, 4.2 * rows), layout="constrained")
    axes = fig.subplots(rows, cols, squeeze=False)
    for i, (key, d) in enumerate(density.items()):
        _draw(d, axes[i // cols][i % cols], key, "small")
    for extra in list(axes.flat)[len(density):]:
        extra.set_visible(False)
    first = next(iter(density.values()))
    fig.suptitle(title if title is not None else f"{_what(first).split(':')[0]} by block", fontsize="large")
    return fig
