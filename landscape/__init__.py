"""Loss landscapes for PyTorch: MindSpore-compatible, exact and fast.

Public names are re-exported here from the layer subpackages (bottom to top):
``result`` (the ``Landscape`` type), ``geometry`` (directions, PCA, which parameters
move), ``engine`` (loss evaluation at many points), ``io`` (``landscapes.h5``),
``execution`` (worker processes, joblib, torch.distributed), ``curvature`` (Hessian
eigenvalues, trace and the eigen-ratio map), ``topology`` (minima, saddles, persistence and
SMAD of any grid of values), ``generate``
(``compute_landscape``, ``SummaryLandscape``), ``connect`` (between models: ``align``,
``barrier``, ``fit_curve``) and ``cli`` (the ``landscape`` command).

They are imported on first use (PEP 562) so that worker processes, which only need the
engine, do not pay for the collector package (about a second of imports per worker on a
2-core machine).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__all__ = ["compute_landscape", "compare_runs", "Landscape", "LossPath", "SummaryLandscape", "read_h5", "write_h5",
           "hessian_eigs", "hessian_trace", "EigenRatio", "align", "barrier", "fit_curve",
           "grid_topology"]

_WHERE = {"compute_landscape": "landscape.generate", "SummaryLandscape": "landscape.generate",
          "compare_runs": "landscape.generate",
          "read_h5": "landscape.io", "write_h5": "landscape.io",
          "Landscape": "landscape.result", "LossPath": "landscape.result",
          "hessian_eigs": "landscape.curvature", "hessian_trace": "landscape.curvature",
          "EigenRatio": "landscape.curvature", "align": "landscape.connect",
          "barrier": "landscape.connect", "fit_curve": "landscape.connect",
          "grid_topology": "landscape.topology"}


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        value = getattr(importlib.import_module(_WHERE[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'landscape' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


if TYPE_CHECKING:  # for type checkers and IDEs; at run time the names load on first use
    from landscape.connect import align, barrier, fit_curve
    from landscape.curvature import EigenRatio, hessian_eigs, hessian_trace
    from landscape.generate import SummaryLandscape, compare_runs, compute_landscape
    from landscape.io import read_h5, write_h5
    from landscape.result import Landscape, LossPath
    from landscape.topology import grid_topology
