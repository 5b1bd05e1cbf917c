"""The exact path of the curvature functions: the whole matrix from ``dim`` products (private).

For a network of few moved parameters the matrix itself is cheaper than an iterative
estimate: its ``P`` columns ``A e_j`` (``P = dim`` products, taken ``DENSE_CHUNK`` at a time:
the reverse-mode Hessian vectorizes them over its kept graphs), symmetrized in float64
(``(A + A^T) / 2``: the products' rounding is the only asymmetry), then LAPACK's ``eigh``.
Its eigenvalues, trace and density are the matrix's own, exact up to the products'
rounding (float32 products: about ``1e-7 ||A||`` per entry), where Lanczos, Hutchinson and
SLQ estimate them.

The rule (:func:`use_exact`), on the number of moved values ``P`` and the call's own
settings, so that the same call always takes the same path and gives the same bits: the
exact path when its ``P`` products are no more than the iterative method takes at least
(:func:`exact_limit`): for the top eigenvalues, Lanczos' window (``basis``, 20 for ``k=3``:
with ``P`` at most that its Krylov space is the whole space anyway); for the trace, the
fewest products of Hutch++ (its sketch's ``2 * (min_probes // 3)`` and ``min_probes``
probes: 32 at the defaults); for the density, SLQ's ``runs * steps`` (800). The matrix's
``eigh`` (``O(P^3)``, under a second at 800) comes on top.
``benchmarks/bench_curvature_defaults.py`` times both paths on the docs' networks. Memory:
the ``P x P`` matrix in float64, and ``DENSE_CHUNK`` products' temporaries at a time.
"""

from __future__ import annotations

import numpy as np
import torch

from landscape.curvature._hvp import PointOperator

__all__ = ["DENSE_CHUNK", "exact_limit", "use_exact", "dense_matrix"]

#: Columns of the matrix computed per call of the operator's ``matmat``.
DENSE_CHUNK = 64


def exact_limit(what: str, *, k: int = 3, which: str = "largest", basis: int | None = None, min_probes: int = 20,
                runs: int = 10, steps: int = 80) -> int:
    """The most moved values for which ``method="auto"`` takes the exact path: the products the
    iterative method takes at least (the module's docstring), from the call's settings."""
    if what == "eigs":
        wanted = 2 * k if which == "both" else k
        return int(basis) if basis is not None else max(2 * wanted + 1, 20)
    if what == "trace":
        return 2 * max(1, min_probes // 3) + min_probes
    return runs * steps


def use_exact(method: str, dim: int, limit: int) -> bool:
    """Whether ``method`` ("auto", "exact" or an iterative one) takes the exact path for a matrix of
    ``dim`` rows (at most ``limit`` for "auto": :func:`exact_limit`)."""
    if method == "auto":
        return dim <= limit
    return method == "exact"


def dense_matrix(op: PointOperator, *, progress: object = None) -> np.ndarray:
    """The operator's matrix, ``(dim, dim)`` float64, symmetrized: ``dim`` products, ``DENSE_CHUNK``
    at a time (``progress``: a :class:`landscape.engine.ProgressMeter` counting them)."""
    dim = op.dim
    out = np.empty((dim, dim), dtype=np.float64)
    for a in range(0, dim, DENSE_CHUNK):
        b = min(dim, a + DENSE_CHUNK)
        eye = torch.zeros((b - a, dim), dtype=op.dtype)
        eye[torch.arange(b - a), torch.arange(a, b)] = 1
        out[a:b] = op.matmat(eye).to("cpu", torch.float64).numpy()
        if progress is not None:
            progress.update(b - a)  # type: ignore[attr-defined]
    if not np.isfinite(out).all():
        raise FloatingPointError("The curvature matrix is not finite (NaN or inf) at these weights: the loss or its "
                                 "second derivatives are not finite there.")
    return (out + out.T) / 2
