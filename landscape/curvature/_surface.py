"""The curvature of a computed surface itself: its 2D Hessian by finite differences (private).

Li et al. (2018, section 5) judge convexity by eye from contour plots and, in section 6,
by the full Hessian's eigen-ratio (:class:`landscape.curvature.EigenRatio`, one Lanczos run
per point). This reads the plane's own curvature off the grid instead, at no cost: at
every interior point the central second differences

    f_xx = (z[i, j+1] - 2 z[i, j] + z[i, j-1]) / dx^2
    f_yy = (z[i+1, j] - 2 z[i, j] + z[i-1, j]) / dy^2
    f_xy = (z[i+1, j+1] - z[i+1, j-1] - z[i-1, j+1] + z[i-1, j-1]) / (4 dx dy)

form the 2x2 Hessian of the surface restricted to the plane, whose eigenvalues are
``(f_xx + f_yy) / 2 -+ sqrt(((f_xx - f_yy) / 2)^2 + f_xy^2)``. The surface is locally
non-convex where the smaller one is negative. The sign pattern does not depend on how the
axes are scaled (Sylvester's law of inertia), so unequal spacings or direction norms do not
change the score; the differences are exact for polynomials up to degree three.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from collector.common import InvalidParameterError, check_param
from landscape.result import Landscape

__all__ = ["surface_hessian", "surface_nonconvexity"]

_CALLER = "surface_nonconvexity"


def _grid(landscape: Landscape, surface: str, caller: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    check_param("landscape", landscape, [Landscape], caller=caller)
    if landscape.dims != 2:
        raise InvalidParameterError(f"The 'landscape' parameter of {caller} must be a plane (dims=2). Got a "
                                    "line instead. HINT: the 2D Hessian needs two axes.")
    if surface != "loss" and surface not in landscape.surfaces:
        raise InvalidParameterError(f"The 'surface' parameter of {caller} names no surface of the landscape: got "
                                    f"{surface!r}, available: {['loss', *sorted(landscape.surfaces)]}.")
    z = np.asarray(landscape.z if surface == "loss" else landscape.surfaces[surface], dtype=np.float64)
    x, y = np.asarray(landscape.x, dtype=np.float64), np.asarray(landscape.y, dtype=np.float64)
    if len(x) < 3 or len(y) < 3:
        raise InvalidParameterError(f"The 'landscape' parameter of {caller} must have at least 3 points per axis; "
                                    f"got {len(y)}x{len(x)}. HINT: compute it with size >= 3.")
    dx, dy = np.diff(x), np.diff(y)
    if not (np.allclose(dx, dx[0], rtol=1e-6) and np.allclose(dy, dy[0], rtol=1e-6)) or dx[0] == 0 or dy[0] == 0:
        raise InvalidParameterError(f"The 'landscape' parameter of {caller} must lie on an evenly spaced grid "
                                    "(np.linspace axes, as compute_landscape makes them).")
    return z, np.array([dx[0], dy[0]]), np.array([len(y), len(x)])


def surface_hessian(landscape: Landscape, *, surface: str = "loss") -> tuple[np.ndarray, np.ndarray]:
    """The eigenvalues of the surface's 2D Hessian at every interior grid point.

    Parameters
    ----------
    landscape : Landscape
        A plane on an evenly spaced grid, at least 3x3.
    surface : str, default="loss"
        "loss" or the name of one of ``landscape.surfaces``.

    Returns
    -------
    (lambda_min, lambda_max) : two arrays of shape ``(len(y) - 2, len(x) - 2)``
        Row ``i`` and column ``j`` belong to the grid point ``(x[j + 1], y[i + 1])``. NaN
        where the 3x3 stencil holds a NaN or inf value (the differences are undefined there).
    """
    z, (dx, dy), _ = _grid(landscape, surface, "surface_hessian")
    c = z[1:-1, 1:-1]
    with np.errstate(invalid="ignore", over="ignore"):
        fxx = (z[1:-1, 2:] - 2 * c + z[1:-1, :-2]) / dx**2
        fyy = (z[2:, 1:-1] - 2 * c + z[:-2, 1:-1]) / dy**2
        fxy = (z[2:, 2:] - z[2:, :-2] - z[:-2, 2:] + z[:-2, :-2]) / (4 * dx * dy)
        mean, radius = (fxx + fyy) / 2, np.hypot((fxx - fyy) / 2, fxy)
        lo, hi = mean - radius, mean + radius
    window = np.lib.stride_tricks.sliding_window_view(np.isfinite(z), (3, 3)).all(axis=(-1, -2))
    lo[~window], hi[~window] = np.nan, np.nan
    return lo, hi


def surface_nonconvexity(landscape: Landscape, *, surface: str = "loss") -> dict[str, Any]:
    """How much of a plane is locally non-convex: where its 2D Hessian has a negative eigenvalue.

    Parameters
    ----------
    landscape : Landscape
        A plane on an evenly spaced grid, at least 3x3.
    surface : str, default="loss"

    Returns
    -------
    dict
        ``fraction_negative``: the fraction of the interior points with a defined Hessian
        whose smaller eigenvalue is negative (the score; NaN when none is defined);
        ``negative``: how many; ``points``: the interior points with a defined Hessian;
        ``interior``: all interior points, ``(len(y) - 2) * (len(x) - 2)``; ``nonfinite``:
        the grid's NaN/inf values; ``undefined``: the interior points left out because
        their stencil holds one; ``max``: the largest finite value of the surface.
    """
    lo, _ = surface_hessian(landscape, surface=surface)
    z, _, _ = _grid(landscape, surface, _CALLER)
    defined = np.isfinite(lo)
    negative = int((lo[defined] < 0).sum())
    points = int(defined.sum())
    finite = z[np.isfinite(z)]
    return {"fraction_negative": negative / points if points else float("nan"), "negative": negative,
            "points": points, "interior": int(lo.size), "undefined": int(lo.size - points),
            "nonfinite": int(z.size - finite.size), "max": float(finite.max()) if finite.size else float("nan")}
