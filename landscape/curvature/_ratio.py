"""Curvature over a landscape: the eigen-ratio metric, its score, Hessian directions (private).

Li et al. (2018, section 6) map ``|lambda_min / lambda_max|`` of the Hessian over a
landscape's plane: near zero where the surface is convex along every direction (the most
negative curvature is negligible beside the most positive one), large where negative
curvature is as strong as the positive. :class:`EigenRatio` computes it at each point as
an extra surface: the engine calls it once per point, outside inference mode, with the
network's parameters set to that point (``metric_inputs = "point"``, see
:mod:`landscape.engine._engine`), and the value is stored, flushed and resumed like the
loss.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch
from torch import nn

from collector.common import Interval, InvalidParameterError, check_param
from landscape.curvature._api import DEFAULT_MAX_ITER, HessianEigen, _dtype, top_eigenpairs
from landscape.curvature._operators import check_curvature, make_operator
from landscape.engine import Samples
from landscape.result import Landscape

__all__ = ["EigenRatio", "nonconvexity", "hessian_directions", "hessian_axes", "EIGEN_RATIO"]

#: The surface name ``landscape gen --eigen-ratio`` and the pipeline give the map.
EIGEN_RATIO = "eigen_ratio"


class EigenRatio:
    """``|lambda_min / lambda_max|`` of the Hessian at each point of a landscape (a point metric).

    Give it as a metric: ``compute_landscape(..., metrics={"eigen_ratio": EigenRatio()})``
    (any task; the Hessian is the task's loss over the landscape's samples, with respect
    to the moved parameters). Both extreme eigenvalues come from one Lanczos run at each
    point (``which="both"``). ``curvature="ggn"`` or ``"fisher"`` maps the same ratio of
    the generalised Gauss-Newton or the empirical Fisher (:func:`make_operator`; both are
    positive semi-definite for a convex loss, so their ratio says how ill-conditioned, not
    how non-convex, the point is).

    Parameters
    ----------
    tol : float, default=1e-4
        Lanczos residual tolerance relative to ``|lambda_max|``: ``lambda_min`` is then
        within ``tol * |lambda_max|`` of the true one, so the ratio within about ``tol``.
    max_iter : int, default=300
    seed : int, default=0
        Seed of each point's start vector.
    dtype : torch.float32 or torch.float64, default=torch.float32
        Of the products. float32's rounding (about ``1e-7 |lambda_max|``) is far inside
        ``tol``.
    curvature : {"hessian", "ggn", "fisher"}, default="hessian"
    product : {"reverse", "forward", "finite_difference"} or None, default=None
        As in :func:`hessian_eigs`.

    Notes
    -----
    ``lambda_max`` and ``lambda_min`` are the algebraically largest and smallest
    eigenvalues. Where ``lambda_max`` is 0 the ratio is NaN. Li et al. exclude biases and
    batch-norm parameters: ``ignore="biasbn"`` does the same here.
    """

    metric_inputs = "point"

    def __init__(self, tol: float = 1e-4, max_iter: int = DEFAULT_MAX_ITER, seed: int = 0,
                 dtype: torch.dtype | str = torch.float32, curvature: str = "hessian",
                 product: str | None = None) -> None:
        check_param("tol", tol, [Interval(float, 0, 1, closed="neither")], caller="EigenRatio")
        check_param("max_iter", max_iter, [Interval(int, 2, None)], caller="EigenRatio")
        check_param("seed", seed, [Interval(int, 0, None)], caller="EigenRatio")
        check_curvature("EigenRatio", curvature, product)  # the task comes with each point
        self.tol, self.max_iter, self.seed = float(tol), int(max_iter), int(seed)
        self.dtype = _dtype(dtype, "EigenRatio")
        self.curvature, self.product = curvature, product

    def extremes(self, model: nn.Module, task: Any, samples: Samples, names: Sequence[str]) -> HessianEigen:
        """``lambda_max`` and ``lambda_min`` (and their vectors) at the model's current weights."""
        op = make_operator(model, task, samples, names, curvature=self.curvature, product=self.product,
                           dtype=self.dtype, seed=self.seed, caller="EigenRatio")
        return top_eigenpairs(op, k=1, which="both", tol=self.tol, max_iter=self.max_iter, seed=self.seed,
                              progress=False)

    def __call__(self, model: nn.Module, task: Any, samples: Samples, names: Sequence[str]) -> float:
        vals = self.extremes(model, task, samples, names).eigenvalues
        lmax, lmin = float(vals[0]), float(vals[-1])
        return abs(lmin / lmax) if lmax != 0 else float("nan")

    def __repr__(self) -> str:
        # part of a landscape's fingerprint: the operator is said only where it is not the Hessian's default
        extra = "" if self.curvature == "hessian" else f", curvature={self.curvature!r}"
        extra += "" if self.product is None else f", product={self.product!r}"
        return (f"EigenRatio(tol={self.tol!r}, max_iter={self.max_iter}, seed={self.seed}, "
                f"dtype={str(self.dtype).replace('torch.', '')}{extra})")


def nonconvexity(landscape: Landscape, *, surface: str = EIGEN_RATIO, quantile: float = 0.1,
                 threshold: float = 0.1) -> dict[str, float]:
    """A landscape's non-convexity, read from its eigen-ratio map.

    Parameters
    ----------
    landscape : Landscape
        With the surface ``surface`` (``|lambda_min / lambda_max|`` per point).
    surface : str, default="eigen_ratio"
    quantile : float, default=0.1
        The low-loss region: the grid points whose loss is at most this quantile of the
        landscape's finite losses (the basin around the minimum).
    threshold : float, default=0.1
        A point counts as non-convex when its ratio exceeds this.

    Returns
    -------
    dict
        ``mean_ratio_low_loss``: the mean ratio over the low-loss region (the score the
        README quotes); ``fraction_above``: the fraction of all grid points whose ratio
        exceeds ``threshold``; ``fraction_above_low_loss``: the same within the low-loss
        region; ``mean_ratio``: the mean over the whole grid; ``points_low_loss``: the
        region's size.
    """
    check_param("quantile", quantile, [Interval(float, 0, 1, closed="right")], caller="nonconvexity")
    check_param("threshold", threshold, [Interval(float, 0, None)], caller="nonconvexity")
    if surface not in landscape.surfaces:
        raise InvalidParameterError(
            f"The 'surface' parameter of nonconvexity names no surface of the landscape: got {surface!r}, "
            f"available: {sorted(landscape.surfaces)}. HINT: compute it with metrics={{'{EIGEN_RATIO}': "
            "EigenRatio()}} (landscape gen --eigen-ratio).")
    ratio = np.asarray(landscape.surfaces[surface], dtype=np.float64)
    loss = np.asarray(landscape.z, dtype=np.float64)
    ok = np.isfinite(ratio) & np.isfinite(loss)
    if not ok.any():
        raise ValueError("nonconvexity: the landscape has no point with a finite loss and ratio.")
    cut = float(np.quantile(loss[ok], quantile))
    low = ok & (loss <= cut)
    return {"mean_ratio_low_loss": float(ratio[low].mean()),
            "fraction_above": float((ratio[ok] > threshold).mean()),
            "fraction_above_low_loss": float((ratio[low] > threshold).mean()),
            "mean_ratio": float(ratio[ok].mean()),
            "points_low_loss": int(low.sum()), "quantile": float(quantile), "threshold": float(threshold)}


def hessian_directions(network: nn.Module, task: Any, samples: Samples, names: Sequence[str], *, seed: int = 0,
                       tol: float | None = None, max_iter: int = DEFAULT_MAX_ITER,
                       dtype: torch.dtype = torch.float32, curvature: str = "hessian",
                       product: str | None = None) -> tuple[list[torch.Tensor], list[torch.Tensor], HessianEigen]:
    """The top two unit eigenvectors at ``network``'s weights (in its mode), as the directions of a plane.

    ``compute_landscape(directions="hessian")`` calls it; the eigenvectors are those of the
    Hessian, or of the GGN or empirical Fisher with ``curvature`` (:func:`make_operator`).

    Parameters
    ----------
    network : nn.Module
    task : callable
        ``task(model, batch) -> loss`` (:mod:`landscape.tasks`).
    samples : Samples
        The evaluation samples (``landscape.engine.collect``).
    names : sequence of str
        The moved parameters, in the directions' order.
    seed : int, default=0
        Seeds Lanczos's start vector.
    tol : float, optional
        Relative residual to stop at; None is the dtype's :data:`DEFAULT_TOL`.
    max_iter : int, default=300
        Most products.
    dtype : torch.dtype, default=torch.float32
        The products' dtype.
    curvature : {"hessian", "ggn", "fisher"}, default="hessian"
    product : str, optional
        How the products are computed (:func:`make_operator`).

    Returns
    -------
    v, w : list of tensor
        The first and second eigenvectors, float32 unit vectors aligned with ``names``.
    eigen : HessianEigen
        The eigen-decomposition they come from (eigenvalues, iterations, convergence).
    """
    (v, w), eig = hessian_axes(network, task, samples, names, k=2, seed=seed, tol=tol, max_iter=max_iter,
                               dtype=dtype, curvature=curvature, product=product)
    return v, w, eig


def hessian_axes(network: nn.Module, task: Any, samples: Samples, names: Sequence[str], *, k: int, seed: int = 0,
                 tol: float | None = None, max_iter: int = DEFAULT_MAX_ITER, dtype: torch.dtype = torch.float32,
                 curvature: str = "hessian", product: str | None = None
                 ) -> tuple[list[list[torch.Tensor]], HessianEigen]:
    """The top ``k`` unit eigenvectors (largest first) from one Lanczos run: the axes of an n-D grid.

    Parameters
    ----------
    network, task, samples, names, seed, tol, max_iter, dtype, curvature, product
        As for :func:`hessian_directions`.
    k : int
        How many eigenvectors (at most the number of moved values).

    Returns
    -------
    vectors : list of list of tensor
        ``k`` eigenvectors, each as float32 unit tensors aligned with ``names``.
    eigen : HessianEigen
        The eigen-decomposition they come from.
    """
    op = make_operator(network, task, samples, names, curvature=curvature, product=product, dtype=dtype,
                       seed=seed, caller="hessian_directions")
    if op.dim < k:
        raise InvalidParameterError(f"directions='hessian' needs at least {k} moved values (one per axis); the "
                                    f"network has {op.dim}.")
    eig = top_eigenpairs(op, k=k, which="largest", tol=tol, max_iter=max(max_iter, 2 * k), seed=seed)
    return [[t.to(torch.float32).contiguous() for t in _aligned(vec, names)] for vec in eig.eigenvectors], eig


def _aligned(vec: Mapping[str, torch.Tensor], names: Sequence[str]) -> list[torch.Tensor]:
    return [vec[k].detach().cpu() for k in names]
