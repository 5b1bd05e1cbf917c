"""The surface-Hessian score of a plane's centre alone: the basin around the trained weights.

:func:`landscape.curvature.surface_nonconvexity` scores the whole plane, which on Li et al.'s
[-1, 1]^2 planes is mostly the walls far from the minimum, where a surface bending over
towards a plateau is non-convex too. Whether the minimum itself sits in a convex bowl is a
question about the few grid points around the centre: :func:`centre_nonconvexity` counts the
interior points within ``radius`` of the origin (the trained weights) whose 2D Hessian has a
negative eigenvalue, from the same finite differences (:func:`landscape.curvature.surface_hessian`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from landscape.curvature import surface_hessian
from landscape.result import Landscape

__all__ = ["CENTRE_RADIUS", "centre_nonconvexity"]

#: The centre's neighbourhood, in the plane's coordinates: on the 21x21 grid over [-1, 1]^2
#: (spacing 0.1) the 21 points within two grid steps of the centre (the 5x5 block less its corners).
CENTRE_RADIUS = 0.25


def centre_nonconvexity(landscape: Landscape, radius: float = CENTRE_RADIUS) -> dict[str, Any]:
    """How much of the plane's centre is locally non-convex.

    Parameters
    ----------
    landscape : Landscape
        A plane around the trained weights (a Random landscape: the origin is the centre) on
        an evenly spaced grid, at least 3x3.
    radius : float, default=CENTRE_RADIUS
        The interior grid points ``(x, y)`` with ``hypot(x, y) <= radius`` are scored.

    Returns
    -------
    dict
        ``radius``; ``fraction_negative``: the fraction of those points with a defined Hessian
        whose smaller eigenvalue is negative (NaN when none is defined); ``negative``;
        ``points``: those with a defined Hessian; ``undefined``: those whose stencil holds a
        NaN/inf value, left out.
    """
    lo, _ = surface_hessian(landscape)
    x = np.asarray(landscape.x, dtype=np.float64)[1:-1]
    y = np.asarray(landscape.y, dtype=np.float64)[1:-1]
    gx, gy = np.meshgrid(x, y)  # shaped like lo: row i is y[i + 1], column j is x[j + 1]
    # a relative margin: linspace's rounding must not drop a point lying on the circle
    near = np.hypot(gx, gy) <= radius * (1 + 1e-9)
    defined = near & np.isfinite(lo)
    negative, points = int((lo[defined] < 0).sum()), int(defined.sum())
    return {"radius": radius, "fraction_negative": negative / points if points else float("nan"),
            "negative": negative, "points": points, "undefined": int((near & ~defined).sum())}

