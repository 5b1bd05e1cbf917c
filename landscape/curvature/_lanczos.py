"""Extreme eigenpairs of a symmetric operator by thick-restart Lanczos (private).

Lanczos with full reorthogonalisation inside a window of at most ``m`` vectors
(:func:`basis_size`; ARPACK's ``max(2k + 1, 20)``), thick-restarted when the window is full
(Wu & Simon 2000): the best Ritz vectors (:func:`_kept`, the wanted ones first) replace the
window, the residual goes on as the next Lanczos vector, and the projected matrix becomes
their Ritz values bordered by their residual coefficients. Memory is the window, ``O(n k)``,
whatever the iterations; a two-pass scheme would have to give up full reorthogonalisation
(and grow spurious copies of converged eigenvalues) and double the products.

Precision: the vectors are stored in the products' dtype; every coefficient, the working
vector, the reorthogonalisation (classical Gram-Schmidt, a second pass where the first
cancelled most of the vector: the DGKS test) and the projected matrix are float64, the
window read in blocks (``BLOCK`` columns). One product ``A q`` per iteration.

Convergence: a Ritz pair's residual ``||A x - theta x||`` is ``|beta s_last|``, and an
eigenvalue of ``A`` lies within it of the Ritz value (in practice within residual squared
over the gap). The iteration stops when every wanted pair's residual is at most
``tol * max|theta|``, a tolerance above the products' rounding (:data:`DEFAULT_TOL`). A
breakdown (an invariant Krylov space) continues from a fresh orthogonal random vector, so
repeated eigenvalues are found and a small operator is diagonalised exactly. On a GPU the
window stays on the device while it takes at most half of its free memory, else on the host
(allocated through numpy, so that ``tracemalloc`` accounts for it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from landscape.engine import ProgressMeter

__all__ = ["LanczosResult", "lanczos", "basis_size", "DEFAULT_TOL", "BLOCK"]

#: Residual tolerance of the iteration by the products' dtype, relative to the largest
#: ``|theta|``. float32: 1e-4, a thousand times the rounding floor of a float32 product
#: (``~1e-7 ||A||``, below which the residuals stall), and still eigenvalues to about
#: ``tol^2 ||A|| / gap`` (1e-7 relative on a ResNet-20's top three, tests and README).
#: float64: 1e-6, eigenvalues to better than 1e-8 relative on the digits MLP.
DEFAULT_TOL = {torch.float32: 1e-4, torch.float64: 1e-6}

#: Columns of the window read (converted to float64) at a time.
BLOCK = 1 << 16

_NP_DTYPES = {torch.float32: np.float32, torch.float64: np.float64}
#: A second Gram-Schmidt pass when the first left less than this of the vector's norm
#: (Daniel, Gragg, Kaufman & Stewart 1976; ARPACK's 0.717): a larger drop means cancellation.
_DGKS = 0.717
_NONE = torch.empty(0)


def basis_size(k: int, which: str, dim: int) -> int:
    """The window: at most this many Lanczos vectors are held, ``min(dim, max(2 w + 1, 20))`` for
    ``w`` wanted pairs (``k``, or ``2 k`` with ``which="both"``), ARPACK's ``ncv`` default."""
    wanted = 2 * k if which == "both" else k
    return int(min(dim, max(2 * wanted + 1, 20)))


def _fits(device: torch.device, nbytes: int) -> bool:
    """Whether ``nbytes`` more fit on ``device``: at most half of a GPU's free memory; always on the host."""
    if device.type != "cuda":
        return True
    free, _ = torch.cuda.mem_get_info(device)
    return nbytes <= free // 2


class _Window:
    """The Lanczos vectors: ``size`` rows of an ``(m, dim)`` buffer in the storage dtype, read in float64."""

    def __init__(self, m: int, dim: int, dtype: torch.dtype, device: torch.device) -> None:
        self.dim, self.device, self.size = dim, device, 0
        nbytes = m * dim * torch.empty((), dtype=dtype).element_size()
        if _fits(device, nbytes):
            where = device
        else:
            where = torch.device("cpu")
        if where.type == "cpu":  # numpy's allocation: visible to tracemalloc, shared with torch
            self.rows = torch.from_numpy(np.empty((m, dim), dtype=_NP_DTYPES[dtype]))
        else:
            self.rows = torch.empty((m, dim), dtype=dtype, device=where)

    def _blocks(self) -> range:
        return range(0, self.dim, BLOCK)

    def set(self, j: int, v: torch.Tensor) -> None:
        self.rows[j] = v.to(self.rows.device, self.rows.dtype)

    def row(self, j: int) -> torch.Tensor:
        """Row ``j`` in float64, on the device."""
        return self.rows[j].to(self.device, torch.float64)

    def coefficients(self, w: torch.Tensor) -> torch.Tensor:
        """``V w`` over the first ``size`` rows, in float64 (on the host)."""
        c = torch.zeros(self.size, dtype=torch.float64, device=self.rows.device)
        for a in self._blocks():
            c += self.rows[:self.size, a:a + BLOCK].double() @ w[a:a + BLOCK].to(c.device)
        return c

    def project_out(self, w: torch.Tensor) -> torch.Tensor:
        """``w`` less its components along the rows (classical Gram-Schmidt) and the coefficients."""
        c = self.coefficients(w)
        for a in self._blocks():
            w[a:a + BLOCK] -= (self.rows[:self.size, a:a + BLOCK].double().T @ c).to(w.device)
        return c

    def rotate(self, s: torch.Tensor) -> None:
        """Rows ``0..l-1`` become ``S^T V`` for ``s`` of shape ``(size, l)``, in place block by block."""
        s = s.to(self.rows.device)
        for a in self._blocks():
            block = s.T @ self.rows[:self.size, a:a + BLOCK].double()
            self.rows[:s.shape[1], a:a + BLOCK] = block.to(self.rows.dtype)

    def combine(self, s: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        """``S^T V`` for ``s`` of shape ``(size, k)``: the Ritz vectors as rows, in ``dtype``, on the device."""
        out = torch.empty((s.shape[1], self.dim), dtype=dtype, device=self.device)
        s = s.to(self.rows.device)
        for a in self._blocks():
            out[:, a:a + BLOCK] = (s.T @ self.rows[:self.size, a:a + BLOCK].double()).to(self.device, dtype)
        return out


@dataclass
class LanczosResult:
    """Ritz values (descending), their flat Ritz vectors (rows), residuals and the run's counts."""

    values: np.ndarray
    vectors: torch.Tensor
    residuals: np.ndarray
    iterations: int
    converged: bool
    restarts: int = 0
    basis: int = 0


def _start(dim: int, gen: torch.Generator, device: torch.device) -> torch.Tensor:
    # drawn on the CPU from the seeded generator, so the start does not depend on the device
    return torch.randn(dim, generator=gen, dtype=torch.float64).to(device)


def _wanted(theta: np.ndarray, k: int, which: str) -> np.ndarray:
    """Indices (into ascending ``theta``) of the wanted Ritz values."""
    m = len(theta)
    k = min(k, m)
    top = np.arange(m - 1, m - 1 - k, -1)
    bottom = np.arange(0, k)
    if which == "largest":
        return top
    if which == "smallest":
        return bottom
    return np.unique(np.concatenate([top, bottom]))


def _kept(m: int, k: int, which: str) -> np.ndarray:
    """Indices (into ascending Ritz values of a full window of ``m``) kept at a restart: the wanted
    end(s), ``(m + w) // 2`` in all (``w`` wanted), so that each restart adds about ``(m - w) / 2``
    fresh directions while the kept ones carry the converging pairs on."""
    wanted = 2 * k if which == "both" else k
    keep = min(m - 1, max(wanted + 1, (m + wanted) // 2))
    if which == "largest":
        return np.arange(m - keep, m)
    if which == "smallest":
        return np.arange(0, keep)
    low = keep // 2
    return np.concatenate([np.arange(0, low), np.arange(m - (keep - low), m)])


def _ritz(h: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return np.linalg.eigh((h + h.T) / 2)  # symmetric up to the reorthogonalisation's rounding


def lanczos(matvec: Callable[[torch.Tensor], torch.Tensor], dim: int, *, k: int, which: str, tol: float,
            max_iter: int, seed: int, dtype: torch.dtype = torch.float64, device: Any = "cpu",
            progress: bool | None = None, desc: str = "Lanczos", basis: int | None = None) -> LanczosResult:
    """The ``k`` largest and/or smallest eigenpairs of the symmetric operator ``matvec``.

    Parameters
    ----------
    matvec : callable
        ``matvec(q) -> A q`` for flat vectors of length ``dim`` (``q`` in ``dtype``).
    dim : int
    k : int
        Eigenpairs wanted (at each end with ``which="both"``).
    which : {"largest", "smallest", "both"}
        Algebraically largest, smallest, or both ends (one Krylov space serves both).
    tol : float
        Stop when every wanted pair's residual ``||A x - theta x||`` is at most
        ``tol * max|theta|`` (see :data:`DEFAULT_TOL` for the floor a dtype sets).
    max_iter : int
        At most this many products.
    seed : int
        Seeds the start vector (and fresh vectors after a breakdown): deterministic.
    dtype, device
        Of the stored vectors and the returned Ritz vectors (the arithmetic is float64).
    progress : bool or None
        The iterations' progress (:class:`landscape.engine.ProgressMeter`): None, a bar on a
        terminal, else lines in the log; True, the bar; False, nothing.
    basis : int, optional
        The window (vectors held); default :func:`basis_size`. At least ``2 k + 1`` (``4 k +
        1`` for both ends) or ``dim``.

    Returns
    -------
    LanczosResult
        The wanted Ritz values in descending order, the matching unit Ritz vectors (rows,
        in ``dtype``), their residuals, the products done, whether all converged, the
        restarts and the window size.
    """
    device = torch.device(device)
    m = int(min(dim, basis if basis is not None else basis_size(k, which, dim)))
    gen = torch.Generator(device="cpu").manual_seed(int(seed))
    win = _Window(m, dim, dtype, device)
    h = np.zeros((m, m))  # the projected matrix V^T A V of the window (float64)
    beta = 0.0  # norm of the residual vector (the next Lanczos vector before scaling)
    q = _start(dim, gen, device)
    q /= torch.linalg.vector_norm(q)
    converged, restarts, products = False, 0, 0
    bar = ProgressMeter(desc, max_iter, unit="iterations", enabled=progress is not False, bar=progress or None,
                        capped=True, leave=False)
    try:
        while True:
            j = win.size
            win.set(j, q)
            win.size += 1
            q = w = _NONE  # the float64 vectors released before the product: peak = window + product + w
            w = matvec(win.rows[j].to(device)).to(device, torch.float64)
            products += 1
            bar.update(1)
            before = float(torch.linalg.vector_norm(w))
            coef = win.project_out(w)  # full reorthogonalisation against the window
            beta = float(torch.linalg.vector_norm(w))
            if beta < _DGKS * before:  # cancellation: the rounding left components along the window, again
                coef += win.project_out(w)
                beta = float(torch.linalg.vector_norm(w))
            h[:j + 1, j] = coef.cpu().numpy()
            h[j, :j] = h[:j, j]
            size = win.size
            theta, s = _ritz(h[:size, :size])
            idx = _wanted(theta, k, which)
            scale = max(float(np.abs(theta).max()), np.finfo(float).tiny)
            res = beta * np.abs(s[size - 1, idx])
            if size == dim or (size >= min(2 * k, dim) and bool(np.all(res <= tol * scale))):
                converged = True  # (a window spanning the whole space holds A itself)
                break
            if products >= max_iter:
                break
            if beta <= 1e-12 * scale:  # invariant subspace: go on from a fresh direction
                beta = 0.0
                q = _start(dim, gen, device)
                for _ in range(2):
                    win.project_out(q)
                q /= torch.linalg.vector_norm(q)
            else:
                q = w.div_(beta)
            if win.size == m:  # the window is full: thick restart
                keep = _kept(m, k, which)
                win.rotate(torch.from_numpy(np.ascontiguousarray(s[:, keep])))
                win.size = len(keep)
                h[:] = 0.0
                h[np.arange(len(keep)), np.arange(len(keep))] = theta[keep]
                # A V_l = V_l diag(theta) + q (beta s_last)^T: the kept pairs' coupling to q, the next
                # column's coefficients along them (computed there with the reorthogonalisation)
                restarts += 1
    finally:
        bar.close()
    del q, w  # before the Ritz vectors are formed
    size = win.size
    theta, s = _ritz(h[:size, :size])
    idx = _wanted(theta, k, which)
    idx = idx[np.argsort(-theta[idx], kind="stable")]
    last = beta if size < dim else 0.0  # a window spanning the space: the projection is A itself
    res = float(last) * np.abs(s[size - 1, idx])
    scale = max(float(np.abs(theta).max()), np.finfo(float).tiny)
    converged = converged or bool(np.all(res <= tol * scale))
    vectors = win.combine(torch.from_numpy(np.ascontiguousarray(s[:, idx])), dtype)
    vectors /= torch.linalg.vector_norm(vectors, dim=1, keepdim=True)
    return LanczosResult(values=theta[idx].copy(), vectors=vectors, residuals=res, iterations=products,
                         converged=converged, restarts=restarts, basis=m)
