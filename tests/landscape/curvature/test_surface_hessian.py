"""The plane's own 2D Hessian (finite differences on the grid) and its non-convexity score,
against the exact Hessian of known surfaces diagonalised by numpy."""

from __future__ import annotations

import numpy as np
import pytest

from collector.common import InvalidParameterError
from landscape.curvature import surface_hessian, surface_nonconvexity
from landscape.result import Landscape


def _plane(x: np.ndarray, y: np.ndarray, z: np.ndarray, **surfaces: np.ndarray) -> Landscape:
    return Landscape(x=x, y=y, z=z, convergence_point=(0.0, 0.0, float(z[len(y) // 2, len(x) // 2])),
                     surfaces=dict(surfaces))


def _cubic(X: np.ndarray, Y: np.ndarray) -> np.ndarray:
    # a monkey saddle plus a tilted bowl: convex on one side, saddle-shaped on the other
    return 0.3 * (X**3 - 3 * X * Y**2) + X**2 + Y**2 + 0.4 * X * Y


def _exact_eigenvalues(X: np.ndarray, Y: np.ndarray) -> np.ndarray:
    """numpy's eigenvalues of the cubic's analytic Hessian, ascending, shape (..., 2)."""
    fxx, fyy, fxy = 1.8 * X + 2.0, -1.8 * X + 2.0, -1.8 * Y + 0.4
    h = np.stack([np.stack([fxx, fxy], -1), np.stack([fxy, fyy], -1)], -2)
    return np.linalg.eigvalsh(h)


# unequal spacings and extents: the central differences are exact for a cubic on any grid
X_AXIS, Y_AXIS = np.linspace(-1.0, 1.0, 11), np.linspace(-2.0, 1.0, 8)


def test_eigenvalues_and_fraction_match_numpy_on_a_cubic_surface():
    X, Y = np.meshgrid(X_AXIS, Y_AXIS)
    ls = _plane(X_AXIS, Y_AXIS, _cubic(X, Y))
    lo, hi = surface_hessian(ls)
    ref = _exact_eigenvalues(X[1:-1, 1:-1], Y[1:-1, 1:-1])
    assert lo.shape == hi.shape == (len(Y_AXIS) - 2, len(X_AXIS) - 2)
    np.testing.assert_allclose(lo, ref[..., 0], rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(hi, ref[..., 1], rtol=1e-9, atol=1e-9)
    expected = float((ref[..., 0] < 0).mean())
    assert 0.3 < expected < 0.5  # both convex and non-convex points: the score can be wrong
    score = surface_nonconvexity(ls)
    assert score["fraction_negative"] == pytest.approx(expected, abs=1e-15)
    assert score["negative"] == int((ref[..., 0] < 0).sum())
    assert score["points"] == score["interior"] == lo.size and score["undefined"] == score["nonfinite"] == 0
    assert score["max"] == pytest.approx(_cubic(X, Y).max())


def test_a_bowl_is_convex_everywhere_and_a_saddle_nowhere():
    X, Y = np.meshgrid(X_AXIS, Y_AXIS)
    assert surface_nonconvexity(_plane(X_AXIS, Y_AXIS, X**2 + 2 * Y**2))["fraction_negative"] == 0.0
    assert surface_nonconvexity(_plane(X_AXIS, Y_AXIS, X**2 - Y**2))["fraction_negative"] == 1.0


def test_nan_and_inf_are_counted_and_their_stencils_left_out():
    X, Y = np.meshgrid(X_AXIS, Y_AXIS)
    z = _cubic(X, Y)
    z[3, 4], z[0, 0] = np.nan, np.inf
    score = surface_nonconvexity(_plane(X_AXIS, Y_AXIS, z))
    lo, _ = surface_hessian(_plane(X_AXIS, Y_AXIS, z))
    ref = _exact_eigenvalues(X[1:-1, 1:-1], Y[1:-1, 1:-1])[..., 0]
    # interior point (i, j) of lo is grid point (i + 1, j + 1); its stencil rows i..i+2, columns j..j+2
    bad = np.array([[not np.isfinite(z[i:i + 3, j:j + 3]).all() for j in range(lo.shape[1])]
                    for i in range(lo.shape[0])])
    assert bad.sum() == 9 + 1  # around the NaN, and the corner's one interior neighbour
    assert np.isnan(lo[bad]).all() and np.isfinite(lo[~bad]).all()
    assert score["nonfinite"] == 2 and score["undefined"] == 10 and score["points"] == lo.size - 10
    assert score["fraction_negative"] == pytest.approx(float((ref[~bad] < 0).mean()), abs=1e-15)


def test_a_named_surface_is_scored_instead_of_the_loss():
    X, Y = np.meshgrid(X_AXIS, Y_AXIS)
    ls = _plane(X_AXIS, Y_AXIS, X**2 + Y**2, accuracy=X**2 - Y**2)
    assert surface_nonconvexity(ls)["fraction_negative"] == 0.0
    assert surface_nonconvexity(ls, surface="accuracy")["fraction_negative"] == 1.0


def test_bad_landscapes_are_refused_naming_the_parameter():
    X, Y = np.meshgrid(X_AXIS, Y_AXIS)
    line = Landscape(x=X_AXIS, y=np.zeros(0), z=X_AXIS**2, convergence_point=(0.0, 0.0, 0.0))
    with pytest.raises(InvalidParameterError, match="'landscape'.*plane"):
        surface_nonconvexity(line)
    two = np.linspace(-1, 1, 2)
    with pytest.raises(InvalidParameterError, match="at least 3 points"):
        surface_nonconvexity(_plane(two, two, np.zeros((2, 2))))
    uneven = np.array([0.0, 0.1, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.1])
    with pytest.raises(InvalidParameterError, match="evenly spaced"):
        surface_nonconvexity(_plane(uneven, Y_AXIS, X**2))
    with pytest.raises(InvalidParameterError, match="'surface'.*'accuracy'"):
        surface_hessian(_plane(X_AXIS, Y_AXIS, X**2), surface="accuracy")
