"""Geometry of a landscape: which parameters move, directions (random, PCA, through models),
grid axes, and the views that put them together.

What the other subpackages use: the :class:`Geometry` of a landscape and the view builders
(:func:`view_geometry`, :data:`VIEWS`), the moved parameters (:func:`moved_names`,
:func:`flat_float`, :func:`check_keys`), and the option values the entry points validate.
"""

from landscape.geometry._directions import (
    BIASBN,
    DRAW,
    DRAWS,
    NORMALIZATIONS,
    SHARED_ELEMENTS,
    SeededDirections,
    random_directions,
    shared_draws,
)
from landscape.geometry._pca import PCA_METHODS
from landscape.geometry._runs import RunStart, run_start
from landscape.geometry._spec import (
    BN_STATISTICS,
    GRID_KINDS,
    GRID_SIZES,
    KINDS,
    MAX_DIMS,
    AxisRange,
    Geometry,
    Kind,
)
from landscape.geometry._state import check_keys, flat_float, keeps_placement, moved_names
from landscape.geometry._views import (
    DECOMPOSITION,
    VIEWS,
    HessianFn,
    ViewGeometry,
    ViewInputs,
    centre_state,
    model_state,
    view_geometry,
)

__all__ = ["Geometry", "Kind", "KINDS", "AxisRange", "BN_STATISTICS", "NORMALIZATIONS", "BIASBN", "VIEWS",
           "ViewGeometry", "ViewInputs", "HessianFn", "view_geometry", "centre_state", "model_state", "DECOMPOSITION",
           "moved_names", "flat_float", "check_keys", "random_directions", "SeededDirections", "DRAW", "DRAWS",
           "keeps_placement", "RunStart", "run_start", "shared_draws",
           "SHARED_ELEMENTS", "MAX_DIMS", "GRID_KINDS", "GRID_SIZES", "PCA_METHODS"]
