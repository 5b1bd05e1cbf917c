"""Pictures and files of loss landscapes: load, plot (matplotlib), animate, export.

Public names are re-exported here; the code lives in private modules. matplotlib is
imported only when something is drawn; when no backend was chosen and there is no
display, the headless Agg backend is selected at import.

Examples
--------
>>> import viz                                                     # doctest: +SKIP
>>> landscapes = viz.load_landscapes("runs/run1")                  # doctest: +SKIP
>>> ax = viz.plot(landscapes[0], "contour")                        # doctest: +SKIP
>>> ax.figure.savefig("contour.png", dpi=150)                      # doctest: +SKIP
>>> viz.export(landscapes[-1], "result.vtp")                       # doctest: +SKIP
"""

from viz.plots._style import ensure_headless as _ensure_headless

_ensure_headless()

from viz.io import export, find_runs, load_landscapes  # noqa: E402
from viz.plots import (  # noqa: E402
    animate,
    compare,
    plot,
    plot_contour,
    plot_filled_contour,
    plot_heatmap,
    plot_overview,
    plot_path,
    plot_slices,
    plot_surface,
    repr_png,
    view_angle,
)

__all__ = [
    "load_landscapes",
    "find_runs",
    "plot",
    "plot_contour",
    "plot_filled_contour",
    "plot_heatmap",
    "plot_surface",
    "plot_path",
    "plot_slices",
    "plot_overview",
    "compare",
    "animate",
    "export",
    "repr_png",
    "view_angle",
]
