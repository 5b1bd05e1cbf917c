"""Pictures and files of loss landscapes: load, plot (matplotlib), animate, export.

Layers: :mod:`viz.io` (load landscapes from summaries and HDF5 files, find runs,
export VTP/CSV/HDF5), :mod:`viz.plots` above it (matplotlib), :mod:`viz.html` beside
the plots (``report``: one self-contained interactive HTML file; needs ``plotly``) and
:mod:`viz.tensorboard` above them (summary runs as TensorBoard runs, landscapes drawn;
needs ``tensorboard``). Names are imported on
first use (PEP 562), so ``viz.find_runs`` or ``viz.export(ls, "x.csv")`` do not load
matplotlib. The plots draw on ``matplotlib.figure.Figure`` objects: no pyplot, no backend
chosen or switched (``fig.savefig`` works without a display). Importing viz also makes it
the picture Jupyter shows for a ``landscape.Landscape``.

Examples
--------
>>> import viz                                                     # doctest: +SKIP
>>> landscapes = viz.load_landscapes("runs/run1")                  # doctest: +SKIP
>>> ax = viz.plot(landscapes[0], "contour")                        # doctest: +SKIP
>>> ax.figure.savefig("contour.png", dpi=150)                      # doctest: +SKIP
>>> viz.export(landscapes[-1], "result.vtp")                       # doctest: +SKIP
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from landscape.result import register_png_renderer

__all__ = [
    "load_landscapes",
    "find_runs",
    "plot",
    "plot_contour",
    "plot_filled_contour",
    "plot_heatmap",
    "plot_surface",
    "plot_line",
    "plot_path",
    "plot_slices",
    "plot_overview",
    "compare",
    "plot_eigen_ratio",
    "compare_eigen_ratio",
    "plot_topology",
    "animate",
    "export",
    "repr_png",
    "view_angle",
    "export_tensorboard",
    "report",
]

_IO = ("load_landscapes", "find_runs", "export")
_SUBPACKAGES = ("io", "plots", "tensorboard", "html")
#: Names of the subpackages above the plots (each needs an optional package, imported on first use).
_OPTIONAL = {"export_tensorboard": "viz.tensorboard", "report": "viz.html"}


def __getattr__(name: str) -> Any:
    if name in __all__ or name in _SUBPACKAGES:
        module = "viz.io" if name in _IO else _OPTIONAL.get(name, "viz.plots")
        value = importlib.import_module(f"viz.{name}") if name in _SUBPACKAGES else \
            getattr(importlib.import_module(module), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'viz' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


def _render_png(landscape: Any) -> bytes:
    """Jupyter's picture of a Landscape (the plots, and matplotlib, load on the first one)."""
    return __getattr__("repr_png")(landscape)


register_png_renderer(_render_png)

if TYPE_CHECKING:  # for type checkers and IDEs; at run time the names load on first use
    from viz.html import report
    from viz.io import export, find_runs, load_landscapes
    from viz.plots import (
        animate,
        compare,
        compare_eigen_ratio,
        plot,
        plot_contour,
        plot_eigen_ratio,
        plot_filled_contour,
        plot_heatmap,
        plot_line,
        plot_overview,
        plot_path,
        plot_slices,
        plot_surface,
        plot_topology,
        repr_png,
        view_angle,
    )
    from viz.tensorboard import export_tensorboard
