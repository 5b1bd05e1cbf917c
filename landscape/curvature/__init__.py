"""Curvature of the loss: the Hessian's extreme eigenpairs, its trace, and curvature maps.

Products of a curvature matrix (``torch.func``) of the same loss a landscape evaluates
(the task over ``num_samples`` samples, the moved parameters only): the Hessian, the
generalised Gauss-Newton or the empirical Fisher (``curvature=``), by reverse, forward or
finite-difference products (``product=``), all behind :func:`make_operator`; then:

* :func:`hessian_eigs`: the top (or bottom, or both) eigenvalues and eigenvectors by
  Lanczos with full reorthogonalisation;
* :func:`hessian_trace`: the trace by Hutchinson's estimator or Hutch++, with a confidence
  interval;
* :func:`spectral_density`: the eigenvalue density by stochastic Lanczos quadrature
  (:class:`SpectralDensity`; per block of parameters with ``include=``);
* :class:`EigenRatio`: a per-point metric, ``|lambda_min / lambda_max|`` (Li et al. 2018,
  section 6), for ``compute_landscape(metrics={"eigen_ratio": EigenRatio()})``: an extra
  surface, stored and resumed like the loss;
* :func:`nonconvexity`: a score of a landscape's eigen-ratio map;
* :func:`surface_nonconvexity` / :func:`surface_hessian`: the computed plane's own 2D
  Hessian by finite differences on its grid (free), and the fraction of the plane where
  it has a negative eigenvalue;
* :func:`sharpness`: one sharpness scalar, ``lambda_max``, ``trace`` or Andriushchenko et
  al.'s adaptive worst- and average-case sharpness;
* :class:`SharpnessCallback` (:class:`LightningSharpness`, :class:`HFSharpness`): ``lambda_max``
  (and Adam's preconditioned one) every k training steps as summary scalars.

``compute_landscape(directions="hessian")`` uses the top two eigenvectors as directions.
"""

import importlib
from typing import TYPE_CHECKING, Any

from landscape.curvature._api import DEFAULT_MAX_ITER, DEFAULT_TOL, HessianEigen, hessian_eigs, hessian_trace
from landscape.curvature._density import SpectralDensity, spectral_density
from landscape.curvature._hvp import HessianOperator
from landscape.curvature._operators import (
    CURVATURES,
    PRODUCTS,
    CurvatureOperator,
    FisherOperator,
    GGNOperator,
    make_operator,
)
from landscape.curvature._ratio import EIGEN_RATIO, EigenRatio, hessian_axes, hessian_directions, nonconvexity
from landscape.curvature._sharpness import SHARPNESS_KINDS, Sharpness, sharpness
from landscape.curvature._surface import surface_hessian, surface_nonconvexity
from landscape.curvature._trace import Trace

__all__ = ["hessian_eigs", "hessian_trace", "HessianEigen", "Trace", "EigenRatio", "nonconvexity",
           "surface_nonconvexity", "surface_hessian", "hessian_directions", "hessian_axes", "HessianOperator",
           "EIGEN_RATIO", "DEFAULT_TOL", "DEFAULT_MAX_ITER", "make_operator", "CurvatureOperator", "GGNOperator",
           "FisherOperator",
           "CURVATURES", "PRODUCTS", "sharpness", "Sharpness", "SHARPNESS_KINDS", "SharpnessCallback",
           "LightningSharpness", "HFSharpness", "spectral_density", "SpectralDensity"]

# training-time callbacks, loaded on first use (PEP 562): they bring the collector's Callback and
# SummaryRecord, and the adapters their framework, which the rest of the package does not need
_LAZY = {"SharpnessCallback": "landscape.curvature._callback",
         "LightningSharpness": "landscape.curvature._sharpness_lightning",
         "HFSharpness": "landscape.curvature._sharpness_hf"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'landscape.curvature' has no attribute {name!r}")


if TYPE_CHECKING:
    from landscape.curvature._callback import SharpnessCallback
    from landscape.curvature._sharpness_hf import HFSharpness
    from landscape.curvature._sharpness_lightning import LightningSharpness
