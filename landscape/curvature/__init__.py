"""Curvature of the loss: the Hessian's extreme eigenpairs, its trace, and curvature maps.

Exact Hessian-vector products (``torch.func``) of the same loss a landscape evaluates
(the task over ``num_samples`` samples, the moved parameters only), then:

* :func:`hessian_eigs`: the top (or bottom, or both) eigenvalues and eigenvectors by
  Lanczos with full reorthogonalisation;
* :func:`hessian_trace`: the trace by Hutchinson's estimator with a confidence interval;
* :class:`EigenRatio`: a per-point metric, ``|lambda_min / lambda_max|`` (Li et al. 2018,
  section 6), for ``compute_landscape(metrics={"eigen_ratio": EigenRatio()})``: an extra
  surface, stored and resumed like the loss;
* :func:`nonconvexity`: a score of a landscape's eigen-ratio map;
* :func:`surface_nonconvexity` / :func:`surface_hessian`: the computed plane's own 2D
  Hessian by finite differences on its grid (free), and the fraction of the plane where
  it has a negative eigenvalue.

``compute_landscape(directions="hessian")`` uses the top two eigenvectors as directions.
"""

from landscape.curvature._api import DEFAULT_MAX_ITER, DEFAULT_TOL, HessianEigen, hessian_eigs, hessian_trace
from landscape.curvature._hvp import HessianOperator
from landscape.curvature._ratio import EIGEN_RATIO, EigenRatio, hessian_directions, nonconvexity
from landscape.curvature._surface import surface_hessian, surface_nonconvexity
from landscape.curvature._trace import Trace

__all__ = ["hessian_eigs", "hessian_trace", "HessianEigen", "Trace", "EigenRatio", "nonconvexity",
           "surface_nonconvexity", "surface_hessian", "hessian_directions", "HessianOperator", "EIGEN_RATIO",
           "DEFAULT_TOL", "DEFAULT_MAX_ITER"]
