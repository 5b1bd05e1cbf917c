"""Extreme eigenpairs of a symmetric operator by Lanczos with full reorthogonalisation (private).

Each iteration takes one product ``A q`` and orthogonalises it against every Lanczos
vector so far, twice (classical Gram-Schmidt repeated, "twice is enough"), so the basis
stays orthonormal to working precision and no spurious copies of converged eigenvalues
appear. The Ritz values of the tridiagonal matrix ``T`` approximate ``A``'s extreme
eigenvalues; the residual of a Ritz pair is ``|beta_m s_m|`` (``s`` its eigenvector of
``T``), exact with a fully reorthogonalised basis, and by the Bauer-Fike/Kahan bound some
eigenvalue of ``A`` lies within that residual of the Ritz value (in practice within
residual squared over the gap). The iteration stops when every wanted pair's residual is
at most ``tol * max|theta|``: each eigenvalue is then accurate to ``tol * ||A||_2``.

A breakdown (``beta`` ~ 0: the Krylov space is invariant, e.g. a model with fewer
parameters than iterations) continues from a fresh random vector orthogonal to the basis,
so repeated eigenvalues are found too and a small operator is diagonalised exactly.

Memory: the vectors made so far, ``iterations x dim`` values of ``dtype`` (not
``max_iter x dim``: they are allocated ``CHUNK`` at a time as the iteration goes). On a
GPU a chunk goes to the device while it takes at most half of the device's free memory
(the products need the rest), else to the host, where the reorthogonalisation against
it runs (two ``dim``-long transfers per chunk and iteration instead of device memory).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from landscape.engine import ProgressMeter

__all__ = ["LanczosResult", "lanczos", "CHUNK"]

#: Lanczos vectors allocated at a time.
CHUNK = 16


def _fits(device: torch.device, nbytes: int) -> bool:
    """Whether ``nbytes`` more fit on ``device``: at most half of a GPU's free memory; always on the host."""
    if device.type != "cuda":
        return True
    free, _ = torch.cuda.mem_get_info(device)
    return nbytes <= free // 2


class _Basis:
    """The Lanczos vectors, in chunks of ``CHUNK`` rows on the device or, when it is short, the host."""

    def __init__(self, dim: int, dtype: torch.dtype, device: torch.device) -> None:
        self.dim, self.dtype, self.device = dim, dtype, device
        self.chunks: list[torch.Tensor] = []
        self.size = 0

    def append(self, q: torch.Tensor) -> None:
        if self.size == len(self.chunks) * CHUNK:
            nbytes = CHUNK * self.dim * torch.empty((), dtype=self.dtype).element_size()
            where = self.device if _fits(self.device, nbytes) else torch.device("cpu")
            self.chunks.append(torch.empty((CHUNK, self.dim), dtype=self.dtype, device=where))
        self.chunks[-1][self.size % CHUNK] = q
        self.size += 1

    def row(self, j: int) -> torch.Tensor:
        return self.chunks[j // CHUNK][j % CHUNK].to(self.device)

    def _rows(self, upto: int) -> list[torch.Tensor]:
        return [c[:min(CHUNK, upto - i * CHUNK)] for i, c in enumerate(self.chunks) if i * CHUNK < upto]

    def project_out(self, w: torch.Tensor, upto: int) -> torch.Tensor:
        """``w`` less its components along the first ``upto`` vectors (classical Gram-Schmidt)."""
        rows = self._rows(upto)
        coef = [b @ w.to(b.device) for b in rows]
        for b, c in zip(rows, coef):
            w -= (b.T @ c).to(w.device)
        return w

    def combine(self, coef: torch.Tensor) -> torch.Tensor:
        """``(B^T coef)^T`` for ``coef`` of shape (size, k): the Ritz vectors as rows, on the device."""
        out = torch.zeros((coef.shape[1], self.dim), dtype=self.dtype, device=self.device)
        at = 0
        for b in self._rows(self.size):
            out += (b.T @ coef[at:at + len(b)].to(b.device)).T.to(self.device)
            at += len(b)
        return out


@dataclass
class LanczosResult:
    """Ritz values (descending), their flat Ritz vectors (rows), residuals and the run's counts."""

    values: np.ndarray
    vectors: torch.Tensor
    residuals: np.ndarray
    iterations: int
    converged: bool


def _start(dim: int, gen: torch.Generator, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    # drawn on the CPU from the seeded generator, so the start does not depend on the device
    return torch.randn(dim, generator=gen, dtype=torch.float64).to(device, dtype)


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


def lanczos(matvec: Callable[[torch.Tensor], torch.Tensor], dim: int, *, k: int, which: str, tol: float,
            max_iter: int, seed: int, dtype: torch.dtype = torch.float64, device: Any = "cpu",
            progress: bool | None = None, desc: str = "Lanczos") -> LanczosResult:
    """The ``k`` largest and/or smallest eigenpairs of the symmetric operator ``matvec``.

    Parameters
    ----------
    matvec : callable
        ``matvec(q) -> A q`` for flat vectors of length ``dim``.
    dim : int
    k : int
        Eigenpairs wanted (at each end with ``which="both"``).
    which : {"largest", "smallest", "both"}
        Algebraically largest, smallest, or both ends (one Krylov space serves both).
    tol : float
        Stop when every wanted pair's residual ``||A x - theta x||`` is at most
        ``tol * max|theta|``.
    max_iter : int
        At most this many products (and Lanczos vectors held: ``iterations * dim`` values).
    seed : int
        Seeds the start vector (and restart vectors after a breakdown): deterministic.
    dtype, device
        Of the Lanczos vectors.
    progress : bool or None
        The iterations' progress (:class:`landscape.engine.ProgressMeter`): None, a bar on a
        terminal, else lines in the log; True, the bar; False, nothing.

    Returns
    -------
    LanczosResult
        The wanted Ritz values in descending order, the matching unit Ritz vectors (rows,
        in ``dtype``), their residuals, the iterations done and whether all converged.
    """
    device = torch.device(device)
    m_max = int(min(max_iter, dim))
    gen = torch.Generator(device="cpu").manual_seed(int(seed))
    basis = _Basis(dim, dtype, device)
    alpha = np.zeros(m_max)
    beta = np.zeros(m_max)  # beta[j] couples vectors j and j+1 (0 after a restart)
    q = _start(dim, gen, dtype, device)
    q /= torch.linalg.vector_norm(q)
    converged = False
    theta = np.zeros(0)
    s = np.zeros((0, 0))
    m = 0
    bar = ProgressMeter(desc, m_max, unit="iterations", enabled=progress is not False, bar=progress or None,
                        capped=True, leave=False)
    try:
        for j in range(m_max):
            basis.append(q)
            w = matvec(q).to(device, dtype)
            alpha[j] = float(torch.dot(w, q))
            w -= alpha[j] * q
            if j > 0 and beta[j - 1] != 0.0:
                w -= beta[j - 1] * basis.row(j - 1)
            for _ in range(2):  # full reorthogonalisation, twice
                w = basis.project_out(w, j + 1)
            m = j + 1
            bn = float(torch.linalg.vector_norm(w))
            beta[j] = bn
            bar.update(1)
            if m >= min(k, dim) and (m <= 64 or m % max(1, m // 16) == 0 or m == m_max):
                t = np.diag(alpha[:m]) + np.diag(beta[:m - 1], 1) + np.diag(beta[:m - 1], -1)
                theta, s = np.linalg.eigh(t)
                idx = _wanted(theta, k, which)
                scale = max(float(np.abs(theta).max()), np.finfo(float).tiny)
                res = bn * np.abs(s[m - 1, idx])
                if m >= min(2 * k, dim) and bool(np.all(res <= tol * scale)):
                    converged = True
                    break
            scale_now = max(float(np.abs(alpha[:m]).max()), float(beta[:m - 1].max()) if m > 1 else 0.0,
                            np.finfo(float).tiny)
            if bn <= 1e-12 * scale_now:  # invariant subspace: go on from a fresh direction
                beta[j] = 0.0
                if j + 1 < m_max:
                    q = _start(dim, gen, dtype, device)
                    for _ in range(2):
                        q = basis.project_out(q, j + 1)
                    q /= torch.linalg.vector_norm(q)
            elif j + 1 < m_max:
                q = w / bn
    finally:
        bar.close()
    t = np.diag(alpha[:m]) + np.diag(beta[:m - 1], 1) + np.diag(beta[:m - 1], -1)
    theta, s = np.linalg.eigh(t)
    idx = _wanted(theta, k, which)
    idx = idx[np.argsort(-theta[idx], kind="stable")]
    last = beta[m - 1] if m < dim else 0.0  # a full basis: T is A itself, no residual
    res = float(last) * np.abs(s[m - 1, idx])
    scale = max(float(np.abs(theta).max()), np.finfo(float).tiny)
    converged = converged or m == dim or bool(np.all(res <= tol * scale))
    coef = torch.from_numpy(np.ascontiguousarray(s[:, idx])).to(device, dtype)
    vectors = basis.combine(coef)
    vectors /= torch.linalg.vector_norm(vectors, dim=1, keepdim=True)
    return LanczosResult(values=theta[idx].copy(), vectors=vectors, residuals=res, iterations=m,
                         converged=converged)
