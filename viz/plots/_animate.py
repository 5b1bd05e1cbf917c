"""An animation of the training intervals (one frame per PCA landscape) as a GIF (private)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from matplotlib.animation import PillowWriter
from matplotlib.figure import Figure

from collector.common import Interval, Options, check_param
from viz.plots import _style
from viz.plots._overview import PANEL_KINDS, _as_landscapes
from viz.plots._plot import plot

__all__ = ["animate"]


def animate(landscapes: Any, path: str | os.PathLike, *, kind: str = "filled", fps: float = 1.0,
            dpi: int = 100, levels: int | Any = 20, log: _style.LogOption = "auto") -> Path:
    """Write a GIF with one frame per PCA (training-interval) landscape, in interval order.

    Each frame is the interval's landscape with its own colour scale, its path and its
    convergence point. Written with matplotlib's ``PillowWriter``.

    Parameters
    ----------
    landscapes : list of Landscape, or path
        The landscapes (Random ones are skipped), or a summary directory / file to load.
    path : str or os.PathLike
        The GIF to write.
    kind : {"contour", "filled", "heatmap", "surface"}, default="filled"
    fps : float, default=1.0
        Frames per second.
    dpi : int, default=100
    levels, log
        As in :func:`plot_contour`.

    Returns
    -------
    Path
        The GIF written.

    Raises
    ------
    ValueError
        No PCA landscape to animate.
    """
    caller = "animate"
    items = _as_landscapes(landscapes, "landscapes", caller)
    check_param("path", path, ["path"], caller=caller)
    check_param("kind", kind, [Options(PANEL_KINDS)], caller=caller)
    check_param("fps", fps, [Interval(float, 0, 100, closed="right")], caller=caller)
    check_param("dpi", dpi, [Interval(int, 10, 1000)], caller=caller)
    _style.check_common(caller, log=log, levels=levels)
    frames = [ls for ls in items if ls.path is not None and _style.decomposition(ls).lower() == "pca"]
    if not frames:
        raise ValueError("The 'landscapes' parameter of animate holds no PCA (training-interval) landscape "
                         f"to animate; got tags {[ls.tag for ls in items]}. HINT: collect with "
                         "collect_landscape create_landscape={'train': True}.")
    frames.sort(key=lambda ls: min(ls.path.intervals) if ls.path is not None and len(ls.path.intervals) else 0)
    out = Path(path)
    if kind == "surface":
        fig = Figure(figsize=(6.4, 5.2), layout="constrained")
    else:  # one size for every frame: the tallest frame's
        height = max(_style.panel_height(ls, None) for ls in frames)
        fig = Figure(figsize=(_style.PANEL_SIZE[0], height), layout="constrained")
    kw: dict[str, Any] = {"log": log}
    if kind in ("contour", "filled"):
        kw["levels"] = levels
    writer = PillowWriter(fps=fps)  # type: ignore[arg-type]  # a float rate works; the stub says int
    with writer.saving(fig, os.fspath(out), dpi):
        for k, ls in enumerate(frames):
            fig.clear()
            ax = fig.add_subplot(projection="3d" if kind == "surface" else None)
            plot(ls, kind, ax=ax, title=f"{_style.title(ls)}  [{k + 1}/{len(frames)}]", **kw)
            writer.grab_frame()
    return out
