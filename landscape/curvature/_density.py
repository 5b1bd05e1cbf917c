"""The eigenvalue density of the loss's Hessian by stochastic Lanczos quadrature (private).

The density of the ``n`` eigenvalues, ``phi(t) = (1/n) sum_i delta(t - lambda_i)``, is
estimated from ``runs`` Lanczos runs of ``steps`` products each (Ubaru, Chen & Saad 2017;
Ghorbani, Krishnan & Xiao 2019). A run from a Rademacher start ``q`` gives a tridiagonal
``T`` whose eigenvalues ``theta_k`` (the nodes) and squared first eigenvector components
``tau_k^2`` (the weights) make ``sum_k tau_k^2 f(theta_k)`` the Gauss quadrature of
``q^T f(H) q``; averaged over the runs it estimates ``(1/n) sum_i f(lambda_i)``.

The mean ``tr(H) / n``: each run's ``q^T H q`` is one Hutchinson probe (``quadrature_mean``,
PyHessian's). ``mean`` deflates it by another run's Krylov space ``V`` (its tridiagonal and
last remainder), ``tr(T) / n + q^T P H P q`` with ``P = I - V^T V``, which needs no product
beyond the run's own, stays unbiased (the other run does not depend on ``q``) and leaves out
the variance of the converged outliers. Its standard error is the runs' standard deviation
over ``sqrt(runs)``.

Smoothing, as PyHessian draws it: a unit-mass Gaussian of standard deviation ``sigma`` at
every node, weighted by ``tau^2``, on a grid padded by ``5 sigma`` and resolving ``sigma``,
divided by its integral on the grid (kept as ``mass``: about 1 unless a grid the caller gave
cuts nodes off). Lanczos keeps every vector of a run and orthogonalises each new one against
all of them twice, in float64; a breakdown goes on from a fresh orthogonal vector, so the
quadrature of an invariant subspace stays exact.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, overload

import numpy as np
import torch
from torch import nn

from collector.common import Interval, InvalidParameterError, Options, Predicate, check_param, unwrap_module
from landscape.curvature._api import _operator, check_inputs
from landscape.curvature._dense import dense_matrix, exact_limit, use_exact
from landscape.curvature._hvp import PointOperator
from landscape.curvature._operators import check_curvature, make_operator
from landscape.engine import ProgressMeter, Samples
from landscape.geometry import moved_names

__all__ = ["SpectralDensity", "spectral_density", "slq", "slq_density", "smooth", "STARTS", "exact_density",
           "DENSITY_METHODS"]

STARTS = ("rademacher", "normal")
#: The eigenvalues ``SpectralDensity.top`` holds (and the plot marks).
TOP = 3
#: Columns of the stored vectors read (converted to float64) at a time.
_BLOCK = 1 << 15
_MIN_POINTS, _MAX_POINTS = 10_000, 100_000

Include = str | Sequence[str] | None
Blocks = Mapping[str, str | Sequence[str]] | Sequence[list[str]] | Sequence[tuple[str, ...]]
Curvature = Literal["hessian", "ggn", "fisher"]
Product = Literal["reverse", "forward", "finite_difference"] | None
Method = Literal["auto", "slq", "exact"]
#: How ``spectral_density`` finds a block's eigenvalues ("auto": exact up to ``runs * steps`` values).
DENSITY_METHODS = ("auto", "slq", "exact")


@dataclass
class SpectralDensity:
    """The eigenvalue density of a curvature matrix (one block of parameters, or all), by SLQ.

    Attributes
    ----------
    nodes : ndarray of shape (runs, steps)
        Each run's nodes: the eigenvalues of its Lanczos tridiagonal (Ritz values), ascending.
    weights : ndarray of shape (runs, steps)
        Their weights: the squared first components of the tridiagonal's eigenvectors
        (each row sums to 1).
    grid : ndarray of shape (points,)
        Where the density is evaluated (increasing).
    density : ndarray of shape (points,)
        The nodes' weights smoothed by Gaussians of standard deviation ``sigma``, averaged
        over the runs and divided by their integral on ``grid``: it integrates to 1.
    sigma : float
        The Gaussians' standard deviation.
    mass : float
        The smoothed quadrature's integral on ``grid`` before the division (about 1 when
        the grid covers every node and resolves ``sigma``).
    n : int
        The matrix's size: the block's number of parameter values.
    mean : float
        ``tr / n``, unbiased: each run's ``sum(weights * nodes)`` (one Hutchinson probe
        ``z^T H z / n``) with the part of ``H`` in another run's Krylov space counted
        exactly instead of sampled (the module's docstring), averaged over the runs: the
        converged outliers no longer add to its variance.
    stderr : float
        The standard error of ``mean``: the runs' standard deviation over ``sqrt(runs)``
        (NaN for one run).
    deflated : ndarray of shape (runs,)
        The dimension of the Krylov space each run's mean deflated (``steps``; 0 for a
        single run, which has no other run's).
    block : str or None
        The block's name (``include``'s key or glob); None for every moved parameter.
    names : list of str
        The block's parameters, in order.
    curvature : {"hessian", "ggn", "fisher"}
        The matrix (:func:`landscape.curvature.make_operator`).
    start : {"rademacher", "normal"}
        The runs' start vectors.
    seed : int
    dtype : torch.dtype
        Of the products (the Lanczos arithmetic is float64).
    seconds : float
        Wall time of the runs and the smoothing.
    method : {"slq", "exact"}
        SLQ, or the eigenvalues of the whole matrix (one "run" whose ``n`` nodes are every
        eigenvalue, each of weight ``1/n``: ``mean`` is ``tr / n`` exactly, ``stderr`` 0).
    samples_digest : str
        SHA-256 of the samples the loss averaged over (``landscape.engine.Samples.digest``).
    """

    nodes: np.ndarray = field(repr=False)
    weights: np.ndarray = field(repr=False)
    grid: np.ndarray = field(repr=False)
    density: np.ndarray = field(repr=False)
    sigma: float
    mass: float
    n: int
    mean: float
    stderr: float
    deflated: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=int), repr=False)
    block: str | None = None
    names: list[str] = field(default_factory=list, repr=False)
    curvature: str = "hessian"
    start: str = "rademacher"
    seed: int = 0
    dtype: torch.dtype = torch.float64
    seconds: float = 0.0
    method: str = "slq"
    samples_digest: str = ""

    @property
    def runs(self) -> int:
        return int(self.nodes.shape[0])

    @property
    def steps(self) -> int:
        return int(self.nodes.shape[1])

    @property
    def quadrature_mean(self) -> float:
        """The runs' average of ``sum(weights * nodes)``: the density's own mean, ``tr / n`` by
        Hutchinson's ``runs`` probes without the deflation (PyHessian's and
        hessian-eigenthings' estimate; unbiased, with a larger variance than ``mean``'s)."""
        return float((self.nodes * self.weights).sum(axis=1).mean())

    @property
    def trace(self) -> float:
        """``n * mean``: the trace estimated by the quadrature (Hutchinson with ``runs`` probes)."""
        return self.n * self.mean

    @property
    def top(self) -> np.ndarray:
        """The ``TOP`` (3) largest eigenvalues as the runs find them, largest first: :meth:`largest`."""
        return self.largest(TOP)

    def largest(self, k: int) -> np.ndarray:
        """The ``k`` largest eigenvalues' estimates, largest first: the ``i``-th is the largest
        over the runs of each run's ``i``-th largest node. A Ritz value is at most the
        eigenvalue of its rank (Cauchy interlacing), so each is a lower bound, the best
        the runs give; a run of ``steps`` products finds well-separated top eigenvalues to
        many digits."""
        check_param("k", k, [Interval(int, 1, self.steps)], caller="SpectralDensity.largest")
        ranked = -np.sort(-self.nodes, axis=1)[:, :k]
        return np.asarray(ranked.max(axis=0))

    def __str__(self) -> str:
        what = f"{self.curvature} of {self.block}" if self.block is not None else self.curvature
        tops = ", ".join(f"{v:.4g}" for v in self.top)
        if self.method == "exact":
            return (f"eigenvalue density of the {what} (n = {self.n:,}): mean {self.mean:.6g} (trace "
                    f"{self.trace:.6g}), top [{tops}] (exact: every eigenvalue of the whole matrix, sigma "
                    f"{self.sigma:.3g})")
        return (f"eigenvalue density of the {what} (n = {self.n:,}): mean {self.mean:.6g} ± {self.stderr:.2g} "
                f"(trace {self.trace:.6g}), top [{tops}] ({self.runs} runs x {self.steps} Lanczos steps, "
                f"sigma {self.sigma:.3g})")


def _start(dim: int, gen: torch.Generator, start: str) -> torch.Tensor:
    # drawn on the CPU from the seeded generator, so a run does not depend on the device
    if start == "normal":
        return torch.randn(dim, generator=gen, dtype=torch.float64)
    return (torch.randint(0, 2, (dim,), generator=gen, dtype=torch.int8) * 2 - 1).to(torch.float64)


def _coefficients(basis: torch.Tensor, size: int, w: torch.Tensor, work: torch.Tensor | None = None) -> torch.Tensor:
    """``V w`` (float64) for the first ``size`` rows ``V`` of ``basis``, read in blocks of columns."""
    n = w.numel()
    c = torch.zeros(size, dtype=torch.float64, device=w.device)
    for a in range(0, n, _BLOCK):
        c.addmv_(_block(basis, size, a, n, work), w[a:a + _BLOCK])
    return c


def _project_out(basis: torch.Tensor, size: int, w: torch.Tensor, work: torch.Tensor | None = None,
                 twice: bool = False) -> torch.Tensor:
    """``w -= V^T (V w)`` for the first ``size`` rows ``V`` of ``basis`` (float64, in blocks of
    columns), ``twice`` the second time ("twice is enough"); returns the coefficients taken out
    (``V w``, summed over both). The second projection's coefficients are accumulated in the
    first's subtraction pass (a block of ``w`` is final once its part is subtracted): three
    passes over ``V`` instead of four. ``work``: a float64 ``(rows, _BLOCK)`` buffer the blocks
    of a float32 ``basis`` are converted into, allocated once per :func:`slq` (a conversion per
    block and step would allocate and fault in megabytes each time)."""
    n = w.numel()
    c = _coefficients(basis, size, w, work)
    c2 = torch.zeros_like(c)
    for a in range(0, n, _BLOCK):
        block = _block(basis, size, a, n, work)
        w[a:a + _BLOCK].addmv_(block.T, c, alpha=-1)
        if twice:
            c2.addmv_(block, w[a:a + _BLOCK])
    if twice:
        for a in range(0, n, _BLOCK):
            w[a:a + _BLOCK].addmv_(_block(basis, size, a, n, work).T, c2, alpha=-1)
    return c + c2


def _block(basis: torch.Tensor, size: int, a: int, dim: int, work: torch.Tensor | None) -> torch.Tensor:
    """Columns ``a : a + _BLOCK`` of the first ``size`` rows of ``basis``, in float64."""
    cols = basis[:size, a:a + _BLOCK]
    if cols.dtype == torch.float64:
        return cols
    if work is None:
        return cols.double()
    out = work[:size, :min(_BLOCK, dim - a)]
    out.copy_(cols)
    return out


def _fresh(basis: torch.Tensor, size: int, gen: torch.Generator, work: torch.Tensor | None) -> torch.Tensor:
    """A unit vector orthogonal to the first ``size`` rows of ``basis`` (``size < dim``), after a
    breakdown. Gaussian, whatever the start vectors: a Rademacher draw can lie in the span of
    the vectors so far (a 4-parameter model's, after 3 steps), and its remainder is then zero."""
    dim = basis.shape[1]
    for _ in range(8):
        q = torch.randn(dim, generator=gen, dtype=torch.float64).to(basis.device)
        norm = float(torch.linalg.vector_norm(q))
        _project_out(basis, size, q, work, twice=True)
        left = float(torch.linalg.vector_norm(q))
        if left > 1e-6 * norm:
            return q / left
    raise FloatingPointError(f"SLQ: no direction orthogonal to the {size} Lanczos vectors so far in 8 Gaussian "
                             f"draws (n = {dim}): the stored vectors are not independent.")


def _run(matvec: Callable[[torch.Tensor], torch.Tensor], dim: int, steps: int, gen: torch.Generator,
         q: torch.Tensor, basis: torch.Tensor, bar: ProgressMeter, run: int,
         work: torch.Tensor | None = None) -> tuple[np.ndarray, np.ndarray, float, torch.Tensor]:
    """One Lanczos run of ``steps`` products with full reorthogonalisation from the unit vector
    ``q`` (float64): the eigenvalues and eigenvectors of its tridiagonal ``T``, and the last
    product's remainder, as ``beta`` and the unit vector ``v`` (float64): ``H V^T = V^T T +
    beta v e_m^T`` for the stored vectors ``V``."""
    alpha, beta = np.zeros(steps), np.zeros(max(steps - 1, 0))
    scale, last = 0.0, 0.0
    for j in range(steps):
        basis[j] = q.to(basis.dtype)
        w = matvec(basis[j]).to(basis.device, torch.float64)
        bar.update(1)
        if not bool(torch.isfinite(w).all()):
            raise FloatingPointError(f"SLQ: the product of run {run}, step {j} is not finite (NaN or inf): the loss "
                                     "or its second derivatives are not finite at these weights. HINT: check the "
                                     "loss at this point (hessian_trace fails the same way).")
        c = _project_out(basis, j + 1, w, work, twice=True)  # twice is enough
        alpha[j] = float(c[j])
        b = float(torch.linalg.vector_norm(w))
        if j == steps - 1:
            last = b
            break
        scale = max(scale, abs(alpha[j]), b)
        if b <= 1e-12 * scale:  # an invariant subspace: go on from a fresh direction, uncoupled
            q = _fresh(basis, j + 1, gen, work)
        else:
            beta[j] = b
            q = w / b
    t = np.diag(alpha) + np.diag(beta, 1) + np.diag(beta, -1)
    theta, y = np.linalg.eigh(t)
    return theta, y, last, w / last if last > 0 else w


def slq(matvec: Callable[[torch.Tensor], torch.Tensor], dim: int, *, runs: int, steps: int, seed: int,
        start: str = "rademacher", dtype: torch.dtype = torch.float64, device: Any = "cpu",
        bar: ProgressMeter | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(nodes, weights, means, deflated)`` of ``runs`` Lanczos runs of the symmetric operator
    ``matvec`` (flat vectors of ``dim`` values; given in ``dtype``, on ``device``): nodes and
    weights of shape ``(runs, steps)``; each run's estimate of ``tr / n``, deflated by another
    run's Krylov space, and that space's dimension (the module's docstring). The runs' start
    vectors come, in order, from one generator seeded with ``seed``. Memory: ``steps`` vectors
    of ``dim`` values in ``dtype``, the first run's start (``dtype``) and a run's last remainder
    (float64), and, for float32, a float64 buffer of ``steps`` blocks of 32,768 values."""
    gen = torch.Generator(device="cpu").manual_seed(int(seed))
    basis = torch.empty((steps, dim), dtype=dtype, device=torch.device(device))
    work = (None if dtype == torch.float64
            else torch.empty((steps, min(_BLOCK, dim)), dtype=torch.float64, device=basis.device))
    meter = bar or ProgressMeter("SLQ", runs * steps, unit="products", enabled=False)
    nodes, weights = np.zeros((runs, steps)), np.zeros((runs, steps))
    means, deflated = np.zeros(runs), np.zeros(runs, dtype=int)
    lender: tuple[np.ndarray, np.ndarray, float, torch.Tensor] | None = None  # the previous run's T and remainder
    first = None
    for r in range(runs):
        q = _start(dim, gen, start).to(basis.device)
        q /= torch.linalg.vector_norm(q)
        q = q.to(dtype).to(torch.float64)  # as stored: the vector the products and the deflation see
        if lender is not None:  # the previous run's Krylov basis is still in ``basis``
            means[r], deflated[r] = _deflated_part(basis, q, lender, work)
        theta, y, last, v = _run(matvec, dim, steps, gen, q, basis, meter, r, work)
        nodes[r], weights[r] = theta, y[0] ** 2
        means[r] += float(weights[r] @ theta)
        lender = (theta, y, last, v)
        if r == 0 and runs > 1:
            first = q.to(dtype)  # deflated by the second run's space
        elif r == 1 and first is not None:
            means[0], deflated[0] = _deflated_part(basis, first.to(torch.float64), lender, work)
            means[0] += float(weights[0] @ nodes[0])
            first = None
    return nodes, weights, means, deflated


def _deflated_part(basis: torch.Tensor, q: torch.Tensor, lender: tuple[np.ndarray, np.ndarray, float, torch.Tensor],
                work: torch.Tensor | None) -> tuple[float, int]:
    """The deflation's part of a run's mean (start ``q``) from another run's Krylov space (its vectors
    ``V``, still in ``basis``; its tridiagonal ``T = y diag(theta) y^T``; its remainder ``beta v``):
    ``tr(T) / n - c^T T c - 2 beta c_m (v^T q)`` with ``c = V q`` (the module's docstring); and
    the space's dimension."""
    theta, y, beta, v = lender
    c = _coefficients(basis, len(theta), q, work).cpu().numpy()
    s = y.T @ c
    part = float(theta.sum()) / q.numel() - float(theta @ (s * s)) - 2.0 * beta * float(c[-1]) * float(v @ q)
    return part, int(theta.size)


def _default_grid(nodes: np.ndarray, sigma: float, points: int | None) -> np.ndarray:
    lo, hi = float(nodes.min()) - 5 * sigma, float(nodes.max()) + 5 * sigma
    if points is None:  # at least four points per sigma, so that the trapezoid integrates the Gaussians
        points = int(min(_MAX_POINTS, max(_MIN_POINTS, math.ceil(4 * (hi - lo) / sigma) + 1)))
    return np.linspace(lo, hi, points)


def smooth(nodes: np.ndarray, weights: np.ndarray, grid: np.ndarray | int | None = None,
           sigma: float | None = None) -> tuple[np.ndarray, np.ndarray, float, float]:
    """``(grid, density, sigma, mass)``: the quadrature's weights smoothed by unit-mass Gaussians
    (see the module docstring), averaged over the runs and divided by their integral on the grid."""
    if sigma is None:  # PyHessian's: variance 1e-5 times the spread of the nodes (at least 1)
        sigma = math.sqrt(1e-5 * max(1.0, float(nodes.max() - nodes.min())))
    t = _default_grid(nodes, sigma, None if grid is None else int(grid)) if grid is None or np.ndim(grid) == 0 \
        else np.asarray(grid, dtype=float)
    flat_nodes, flat_weights = nodes.reshape(-1), weights.reshape(-1) / nodes.shape[0]
    density = np.zeros_like(t)
    norm = 1.0 / (sigma * math.sqrt(2 * math.pi))
    for a in range(0, len(t), 2048):  # (2048, runs * steps) kernel values at a time
        d = (t[a:a + 2048, None] - flat_nodes[None, :]) / sigma
        density[a:a + 2048] = (np.exp(-0.5 * d * d) * norm) @ flat_weights
    mass = float(np.trapezoid(density, t))
    return t, density / mass, float(sigma), mass


def slq_density(matvec: Callable[[torch.Tensor], torch.Tensor], dim: int, *, runs: int, steps: int, seed: int,
                start: str = "rademacher", dtype: torch.dtype = torch.float64, device: Any = "cpu",
                grid: np.ndarray | int | None = None, sigma: float | None = None, block: str | None = None,
                names: Sequence[str] = (), curvature: str = "hessian",
                bar: ProgressMeter | None = None) -> SpectralDensity:
    """:func:`slq`, smoothed (:func:`smooth`), as a :class:`SpectralDensity` of an operator already set up."""
    t0 = time.perf_counter()
    nodes, weights, means, deflated = slq(matvec, dim, runs=runs, steps=steps, seed=seed, start=start, dtype=dtype,
                                          device=device, bar=bar)
    t, density, sig, mass = smooth(nodes, weights, grid, sigma)
    stderr = float(means.std(ddof=1) / math.sqrt(runs)) if runs > 1 else float("nan")
    return SpectralDensity(nodes=nodes, weights=weights, grid=t, density=density, sigma=sig, mass=mass, n=dim,
                           mean=float(means.mean()), stderr=stderr, deflated=deflated, block=block, names=list(names),
                           curvature=curvature, start=start, seed=seed, dtype=dtype,
                           seconds=time.perf_counter() - t0)


def exact_density(op: PointOperator, *, grid: np.ndarray | int | None = None, sigma: float | None = None,
                  block: str | None = None, names: Sequence[str] = (), bar: ProgressMeter | None = None
                  ) -> SpectralDensity:
    """The density of the whole matrix's eigenvalues (:func:`landscape.curvature._dense.dense_matrix`, ``eigh``),
    smoothed as SLQ's nodes are: one run whose nodes are the ``n`` eigenvalues, each of weight ``1/n``."""
    t0 = time.perf_counter()
    values = np.linalg.eigvalsh(dense_matrix(op, progress=bar))  # ascending, as a run's nodes
    nodes, weights = values[None, :], np.full((1, values.size), 1.0 / values.size)
    t, density, sig, mass = smooth(nodes, weights, grid, sigma)
    return SpectralDensity(nodes=nodes, weights=weights, grid=t, density=density, sigma=sig, mass=mass, n=op.dim,
                           mean=float(values.mean()), stderr=0.0, deflated=np.zeros(1, dtype=int), block=block,
                           names=list(names), curvature=op.curvature, start="exact", seed=0, dtype=op.dtype,
                           seconds=time.perf_counter() - t0, method="exact")


# ---------------------------------------------------------------- the public function
def _is_globs(v: Any) -> bool:
    return isinstance(v, str) or (isinstance(v, (list, tuple)) and len(v) > 0 and all(isinstance(g, str) for g in v))


_INCLUDE = Predicate(
    lambda v: v is None or _is_globs(v)
    or (isinstance(v, Mapping) and len(v) > 0 and all(isinstance(k, str) and _is_globs(g) for k, g in v.items()))
    or (isinstance(v, (list, tuple)) and len(v) > 0 and all(_is_globs(g) and not isinstance(g, str) for g in v)
        and len({", ".join(g) for g in v}) == len(v)),
    "None (every moved parameter), a glob or a list of globs (one block), or a dict of block name -> glob(s) "
    "or a list of distinct lists of globs (one density per block)")


def _blocks(include: Any) -> tuple[bool, list[tuple[str | None, list[str] | None]]]:
    """``(one density per block?, [(block name, its globs)])`` of a checked ``include``."""
    if include is None:
        return False, [(None, None)]
    if _is_globs(include):
        globs = [include] if isinstance(include, str) else list(include)
        return False, [(", ".join(globs), globs)]
    if isinstance(include, Mapping):
        return True, [(k, [g] if isinstance(g, str) else list(g)) for k, g in include.items()]
    return True, [(", ".join(g), list(g)) for g in include]


def _check_grid(grid: Any, caller: str) -> None:
    check_param("grid", grid, [None, Interval(int, 2, None), Predicate(
        lambda v: not isinstance(v, (str, bytes)) and np.ndim(v) == 1 and len(v) >= 2
        and bool(np.all(np.isfinite(np.asarray(v, dtype=float))))
        and bool(np.all(np.diff(np.asarray(v, dtype=float)) > 0)),
        "an increasing sequence of at least 2 finite numbers")], caller=caller,
        hint="None spans the nodes, padded by 5 sigma, with at least four points per sigma.")


@overload
def spectral_density(network: nn.Module, loss_fn: Any = ..., data: Any = ..., *, task: Any = ...,
                     num_samples: int | Literal["auto"] | None = ..., runs: int = ..., steps: int = ...,
                     seed: int = ...,
                     curvature: Curvature = ..., product: Product = ..., include: Include = ...,
                     ignore: Literal["biasbn"] | None = ...,
                     eval_mode: bool = ..., dtype: torch.dtype | str = ..., device: str | torch.device | None = ...,
                     grid: Any = ..., sigma: float | None = ..., start: Literal["rademacher", "normal"] = ...,
                     progress: bool | None = ..., method: Method = ...) -> SpectralDensity: ...


@overload
def spectral_density(network: nn.Module, loss_fn: Any = ..., data: Any = ..., *, task: Any = ...,
                     num_samples: int | Literal["auto"] | None = ..., runs: int = ..., steps: int = ...,
                     seed: int = ...,
                     curvature: Curvature = ..., product: Product = ..., include: Blocks,
                     ignore: Literal["biasbn"] | None = ...,
                     eval_mode: bool = ..., dtype: torch.dtype | str = ..., device: str | torch.device | None = ...,
                     grid: Any = ..., sigma: float | None = ..., start: Literal["rademacher", "normal"] = ...,
                     progress: bool | None = ..., method: Method = ...) -> dict[str, SpectralDensity]: ...


def spectral_density(
    network: nn.Module,
    loss_fn: Any = None,
    data: Any = None,
    *,
    task: Any = None,
    num_samples: int | Literal["auto"] | None = "auto",
    runs: int = 10,
    steps: int = 80,
    seed: int = 0,
    curvature: Curvature = "hessian",
    product: Product = None,
    include: Include | Blocks = None,
    ignore: Literal["biasbn"] | None = None,
    eval_mode: bool = True,
    dtype: torch.dtype | str = torch.float32,
    device: str | torch.device | None = None,
    grid: Any = None,
    sigma: float | None = None,
    start: Literal["rademacher", "normal"] = "rademacher",
    progress: bool | None = None,
    method: Method = "auto",
) -> SpectralDensity | dict[str, SpectralDensity]:
    """The eigenvalue density of the loss's Hessian (or GGN, or Fisher) by stochastic Lanczos quadrature (SLQ).

    Ghorbani et al.'s (2019) PyHessian density: ``runs`` Lanczos runs of ``steps``
    Hessian-vector products each, from random start vectors, with full
    reorthogonalisation in float64; each run's tridiagonal gives nodes (its eigenvalues)
    and weights (the squared first components of its eigenvectors), and the density is
    their weights smoothed by Gaussians, averaged over the runs (module
    :mod:`landscape.curvature._density`'s docstring has the details). The Hessian is
    :func:`hessian_eigs`'s: the mean loss over the first ``num_samples`` samples, with
    respect to the moved parameters (or a block of them: ``include``); ``curvature`` takes
    the generalised Gauss-Newton or the empirical Fisher instead.

    Parameters
    ----------
    network, loss_fn, data, task, num_samples, ignore, eval_mode, device
        As in :func:`hessian_eigs`.
    runs : int, default=10
        Lanczos runs (start vectors): the density's and the mean's Monte Carlo samples.
    steps : int, default=80
        Products per run (at most the number of parameter values): the quadrature's nodes.
    seed : int, default=0
        Seeds the start vectors: the result is deterministic.
    curvature : {"hessian", "ggn", "fisher"}, default="hessian"
        The matrix, as in :func:`hessian_eigs` (:func:`make_operator`'s definitions).
    product : {"reverse", "forward", "finite_difference"} or None, default=None
        How its products are taken, as in :func:`hessian_eigs` (None: the curvature's first).
    include : glob, list of globs, dict or list of lists of globs, optional
        Blocks of parameters (globs as ``compute_landscape``'s ``include``: on parameter or
        module names, ``"fc1"`` or ``"blocks.0.*"``). A glob or a list of globs: the
        density of that one block (the principal sub-block of the Hessian for those
        parameters). A dict ``{name: glob(s)}`` or a list of lists of globs: one density
        per block (Zhang et al. 2024's blockwise spectra), keyed by the dict's names or by
        each list's globs joined with ``", "``. A glob that matches no parameter is refused.
    dtype : torch.float32 or torch.float64, default=torch.float32
        Of the products and the stored Lanczos vectors (the arithmetic, the
        reorthogonalisation and the tridiagonal are float64). float32 products carry
        rounding of about ``1e-7 ||H||``, far below what a smoothed density shows.
    grid : int or increasing sequence of floats, optional
        Where the density is evaluated: default, from the smallest node to the largest,
        padded by ``5 sigma``, with at least four points per ``sigma`` (10,000 to
        100,000); an int, that many points over the same range; or the points themselves.
    sigma : float, optional
        The Gaussians' standard deviation; default PyHessian's, ``sqrt(1e-5 * max(1,
        spread))`` for the spread of the nodes.
    start : {"rademacher", "normal"}, default="rademacher"
        The start vectors' entries (Rademacher: each run's mean is a Hutchinson probe).
    progress : bool or None, default=None
        As in :func:`hessian_eigs`, over every product.
    method : {"auto", "slq", "exact"}, default="auto"
        "exact": every eigenvalue of the block's whole matrix (``n`` products, taken together
        where they can be; :mod:`landscape.curvature._dense`), smoothed as SLQ's nodes, each
        of weight ``1/n`` (``runs``, ``steps`` and ``start`` unused). "auto": exact for a block
        of at most ``runs * steps`` values (no more products than SLQ's, and no sampling
        error), else SLQ.

    Returns
    -------
    SpectralDensity or dict of str to SpectralDensity
        One :class:`SpectralDensity` (``include`` None, a glob or a list of globs), or one
        per block in the order given (a dict or a list of lists): ``nodes`` and
        ``weights`` per run, ``grid`` and ``density``, ``mean`` (``tr / n``) and its
        ``stderr``, ``trace``, ``n``, ``top``, ``method`` and ``samples_digest``. The blocks'
        ``n`` add up to the whole when they partition the parameters.

    Notes
    -----
    Cost: ``runs * steps`` Hessian-vector products per block (800 at the defaults), plus
    the reorthogonalisation, ``O(steps^2 n)`` flops per run. Memory: the products' (as
    :func:`hessian_eigs`) and ``steps`` vectors of ``n`` values in ``dtype``.

    Examples
    --------
    >>> import torch
    >>> from landscape.curvature import spectral_density
    >>> net = torch.nn.Linear(3, 1)
    >>> x, y = torch.eye(3), torch.zeros(3, 1)
    >>> d = spectral_density(net, torch.nn.MSELoss(), (x, y), runs=2, steps=4, num_samples=None,
    ...                      dtype=torch.float64, progress=False, method="slq")
    >>> round(d.trace, 6), round(float(d.top[0]), 6)  # H = 2/3 [x 1]^T [x 1]: trace 4, top 8/3
    (4.0, 2.666667)
    """
    caller = "spectral_density"
    check_param("runs", runs, [Interval(int, 1, None)], caller=caller)
    check_param("steps", steps, [Interval(int, 1, None)], caller=caller, hint="80, as PyHessian and "
                "hessian-eigenthings: enough nodes to resolve the top eigenvalues and the bulk.")
    check_param("seed", seed, [Interval(int, 0, None)], caller=caller)
    check_curvature(caller, curvature, product)
    check_param("include", include, [_INCLUDE], caller=caller)
    _check_grid(grid, caller)
    check_param("sigma", sigma, [None, Interval(float, 0, None, closed="neither")], caller=caller,
                hint="None takes PyHessian's, sqrt(1e-5 * max(1, spread of the eigenvalues)).")
    check_param("start", start, [Options(STARTS)], caller=caller)
    check_param("progress", progress, [None, "boolean"], caller=caller)
    check_param("method", method, [Options(DENSITY_METHODS)], caller=caller,
                hint="'auto' is exact for blocks of at most runs * steps values (SLQ's products), else SLQ.")
    keyed, blocks = _blocks(include)
    # each block's parameters and size: a glob that matches nothing, or more steps than a block's values, is
    # refused here, before the data is read
    check_inputs(caller, network, loss_fn, data, task, num_samples, ignore, eval_mode, device)
    _blocks_of(unwrap_module(network), blocks, ignore, method, runs, steps, caller)
    op, samples = _operator(caller, network, loss_fn, data, task, num_samples, ignore, eval_mode, dtype, device, seed,
                            curvature, product)
    chosen, sizes = _blocks_of(op.net, blocks, ignore, method, runs, steps, caller)
    exact = {key: use_exact(method, sizes[key], exact_limit("density", runs=runs, steps=steps)) for key, _ in chosen}
    total = sum(sizes[key] if exact[key] else runs * steps for key, _ in chosen)
    bar = ProgressMeter("SLQ", total, unit="products", enabled=progress is not False, bar=progress or None,
                        leave=False)
    out: dict[str, SpectralDensity] = {}
    try:
        for key, names in chosen:
            block_op = op if key is None else _block_operator(op, samples, names, caller)
            if exact[key]:
                found = exact_density(block_op, grid=grid, sigma=sigma, block=key, names=names, bar=bar)
            else:
                found = slq_density(block_op.matvec, block_op.dim, runs=runs, steps=steps, seed=seed, start=start,
                                    dtype=block_op.dtype, device=block_op.device, grid=grid, sigma=sigma, block=key,
                                    names=names, curvature=curvature, bar=bar)
            found.samples_digest = samples.digest()
            out[str(key)] = found
            del block_op  # one block's cached graphs at a time
    finally:
        bar.close()
    return out if keyed else next(iter(out.values()))


def _blocks_of(net: nn.Module, blocks: list[tuple[str | None, list[str] | None]], ignore: Any, method: str,
               runs: int, steps: int, caller: str) -> tuple[list[tuple[str | None, list[str]]], dict[Any, int]]:
    """Each block's parameters and number of values; a block SLQ would take more steps than it has values
    refused."""
    every = moved_names(net, ignore)[0]
    chosen = [(key, every if globs is None else moved_names(net, ignore, globs)[0]) for key, globs in blocks]
    params = dict(net.named_parameters())
    sizes = {key: sum(params[k].numel() for k in names) for key, names in chosen}
    for key, _ in chosen:
        size = sizes[key]
        if not use_exact(method, size, exact_limit("density", runs=runs, steps=steps)) and steps > size:
            raise InvalidParameterError(
                f"The 'steps' parameter of {caller} must be at most the number of values in the block "
                f"({size}{'' if key is None else f' in {key!r}'}). Got {steps} instead. HINT: a run of that many "
                "steps already gives the block's exact eigenvalues.")
    return chosen, sizes


def _block_operator(op: PointOperator, samples: Samples, names: list[str], caller: str) -> PointOperator:
    """The operator of the principal sub-block ``names`` (the other parameters held where they are)."""
    return make_operator(op.net, op.task, samples, names, curvature=op.curvature, product=op.product,
                         dtype=op.dtype, device=op.device, seed=op.seed, caller=caller)
