"""``hessian_eigs`` and ``hessian_trace``: validation, set-up, results (private)."""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import torch
from torch import nn

from collector.common import InstanceOf, Interval, InvalidParameterError, Options, check_param, unwrap_module
from landscape.curvature._dense import dense_matrix, exact_limit, use_exact
from landscape.curvature._hvp import PointOperator
from landscape.curvature._lanczos import DEFAULT_TOL, lanczos
from landscape.curvature._operators import check_curvature, make_operator
from landscape.curvature._trace import TRACE_METHODS, Trace, hutch_plus_plus, hutchinson
from landscape.engine import ProgressMeter, Samples, check_loss, collect
from landscape.geometry import moved_names
from landscape.tasks import as_task

__all__ = ["HessianEigen", "hessian_eigs", "hessian_trace", "top_eigenpairs", "check_inputs", "DEFAULT_TOL",
           "DEFAULT_MAX_ITER", "exact_eigs", "EIG_METHODS"]

DEFAULT_MAX_ITER = 300
#: How ``hessian_eigs`` finds the eigenpairs ("auto": exact for a few moved values, ``exact_limit``).
EIG_METHODS = ("auto", "lanczos", "exact")
_DTYPES = (torch.float32, torch.float64)


@dataclass
class HessianEigen:
    """Extreme eigenpairs of a curvature matrix of the loss (the Hessian by default), moved parameters only.

    Attributes
    ----------
    eigenvalues : ndarray of shape (k,)
        Sorted by value, largest first.
    eigenvectors : list of dict
        One unit-norm eigenvector per eigenvalue, as ``{parameter name: tensor}`` (the
        moved parameters only; the shape of a state dict's entries), so it can be used as
        a direction. Sign: the entry of largest magnitude is positive.
    residuals : ndarray of shape (k,)
        ``||H x - lambda x||`` of each pair (each eigenvalue is within this of a true one).
    iterations : int
        Lanczos iterations (= matrix-vector products).
    converged : bool
        Every residual reached ``tol * max|lambda|`` within ``max_iter``.
    names : list of str
        The moved parameters (the matrix's blocks, in order).
    dtype : torch.dtype
        Of the products.
    seconds : float
        Wall time of the iteration.
    curvature : {"hessian", "ggn", "fisher"}
        Which matrix (:func:`landscape.curvature.make_operator`).
    product : str
        How its products were taken ("reverse", "forward" or "finite_difference").
    tol : float
        The residual tolerance the iteration ran to.
    restarts : int
        Thick restarts of the Lanczos window.
    basis : int
        The window: Lanczos vectors held at most.
    method : {"lanczos", "exact"}
        Lanczos, or the eigendecomposition of the whole matrix (``dim`` products; residuals of
        float64 rounding).
    samples_digest : str
        SHA-256 of the samples the loss averaged over (``landscape.engine.Samples.digest``).
    """

    eigenvalues: np.ndarray
    eigenvectors: list[dict[str, torch.Tensor]] = field(repr=False)
    residuals: np.ndarray
    iterations: int
    converged: bool
    names: list[str] = field(repr=False)
    dtype: torch.dtype = torch.float32
    seconds: float = 0.0
    curvature: str = "hessian"
    product: str = "reverse"
    tol: float = 0.0
    restarts: int = 0
    basis: int = 0
    method: str = "lanczos"
    samples_digest: str = ""

    def flat(self) -> torch.Tensor:
        """The eigenvectors as rows of one ``(k, dim)`` tensor (parameters in ``names`` order)."""
        return torch.stack([torch.cat([v[k].reshape(-1) for k in self.names]) for v in self.eigenvectors])

    def __str__(self) -> str:
        vals = ", ".join(f"{v:.6g}" for v in self.eigenvalues)
        if self.method == "exact":
            return (f"{_TITLES.get(self.curvature, self.curvature)} eigenvalues [{vals}] (exact: the whole matrix, "
                    f"{self.iterations} products, {self.dtype})")
        return (f"{_TITLES.get(self.curvature, self.curvature)} eigenvalues [{vals}] ({self.iterations} Lanczos "
                f"iterations, {'converged' if self.converged else 'NOT converged'}, {self.dtype})")


_TITLES = {"hessian": "Hessian", "ggn": "GGN", "fisher": "Empirical Fisher"}


def _sign_fixed(vectors: torch.Tensor) -> torch.Tensor:
    """Each row with its largest-magnitude entry positive (a deterministic sign)."""
    idx = vectors.abs().argmax(dim=1)
    signs = torch.sign(vectors.gather(1, idx[:, None]))
    signs[signs == 0] = 1
    return vectors * signs


def top_eigenpairs(op: PointOperator, *, k: int, which: str, tol: float | None, max_iter: int, seed: int,
                   progress: bool | None = None, basis: int | None = None) -> HessianEigen:
    """Lanczos on an operator already set up (the engine's per-point metric, Hessian directions);
    ``tol=None`` is the products' dtype's :data:`DEFAULT_TOL`."""
    t0 = time.perf_counter()
    tol_ = DEFAULT_TOL[op.dtype] if tol is None else float(tol)
    res = lanczos(op.matvec, op.dim, k=k, which=which, tol=tol_, max_iter=max_iter, seed=seed, dtype=op.dtype,
                  device=op.device, progress=progress, basis=basis)
    vecs = _sign_fixed(res.vectors).cpu()
    dicts = [{name: t.clone() for name, t in op.unflatten(row).items()} for row in vecs]
    return HessianEigen(eigenvalues=res.values, eigenvectors=dicts, residuals=res.residuals,
                        iterations=res.iterations, converged=res.converged, names=list(op.names), dtype=op.dtype,
                        seconds=time.perf_counter() - t0, curvature=op.curvature, product=op.product, tol=tol_,
                        restarts=res.restarts, basis=res.basis)


def _dtype(dtype: Any, caller: str) -> torch.dtype:
    if dtype in ("float32", "float64"):
        dtype = getattr(torch, dtype)
    if dtype not in _DTYPES:
        raise InvalidParameterError(f"The 'dtype' parameter of {caller} must be torch.float32 or torch.float64 "
                                    f"(or 'float32', 'float64'). Got {dtype!r} instead. HINT: float32 (the "
                                    "default) for networks, float64 for eigenvalues finer than float32's products.")
    return dtype


def check_inputs(caller: str, network: Any, loss_fn: Any, data: Any, task: Any, num_samples: Any, ignore: Any,
                 eval_mode: Any, device: Any) -> Any:
    """The arguments every curvature function shares, checked one way; returns the task."""
    check_param("network", network, [InstanceOf(nn.Module)], caller=caller)
    task_ = as_task(loss_fn, task, caller=caller)
    if data is None:
        raise InvalidParameterError(f"The 'data' parameter of {caller} is required: a DataLoader, an iterable of "
                                    "batches, a Dataset or an (inputs, labels) pair of tensors.")
    check_param("num_samples", num_samples, [Interval(int, 1, None), Options(("auto",)), None], caller=caller,
                hint='"auto" takes at most 2048, None the whole dataset.')
    check_param("ignore", ignore, [None, Options(("biasbn",))], caller=caller)
    check_param("eval_mode", eval_mode, ["boolean"], caller=caller)
    check_param("device", device, [None, str, InstanceOf(torch.device)], caller=caller)
    return task_


def _operator(caller: str, network: Any, loss_fn: Any, data: Any, task: Any, num_samples: Any, ignore: Any,
              eval_mode: Any, dtype: Any, device: Any, seed: int, curvature: Any = "hessian",
              product: Any = None) -> tuple[PointOperator, Samples]:
    """Validate the shared arguments, collect the samples, set up the operator on a copy of the network."""
    task_ = check_inputs(caller, network, loss_fn, data, task, num_samples, ignore, eval_mode, device)
    check_curvature(caller, curvature, product, task_)
    dt = _dtype(dtype, caller)
    net = copy.deepcopy(unwrap_module(network))  # the caller's module is never modified
    names, _ = moved_names(net, ignore)
    if not names:
        raise InvalidParameterError(f"{caller}: the network has no floating-point parameter that moves "
                                    f"(ignore={ignore!r}); the Hessian would be empty.")
    if device is not None:
        net.to(device)
    net.train(not eval_mode)
    samples = collect(data, num_samples, task_, caller=caller)
    check_loss(net, task_, samples, caller=caller, eval_mode=eval_mode, loss_fn_given=task is None)
    op = make_operator(net, task_, samples, names, curvature=curvature, product=product, dtype=dt, device=device,
                       seed=seed, caller=caller)
    return op, samples


def exact_eigs(op: PointOperator, *, k: int, which: str, progress: bool | None = None) -> HessianEigen:
    """The wanted eigenpairs of the whole matrix (:func:`landscape.curvature._dense.dense_matrix`, ``eigh``)."""
    t0 = time.perf_counter()
    bar = ProgressMeter("curvature matrix", op.dim, unit="products", enabled=progress is not False,
                        bar=progress or None, leave=False)
    try:
        mat = dense_matrix(op, progress=bar)
    finally:
        bar.close()
    values, vectors = np.linalg.eigh(mat)
    picks = {"largest": list(range(op.dim - k, op.dim)), "smallest": list(range(k)),
             "both": sorted(set(range(k)) | set(range(op.dim - k, op.dim)))}[which]
    order = sorted(picks, key=lambda i: -values[i])
    vals, vecs = values[order], vectors[:, order].T
    residuals = np.linalg.norm(mat @ vecs.T - vecs.T * vals, axis=0)
    rows = _sign_fixed(torch.from_numpy(np.ascontiguousarray(vecs)))
    dicts = [{name: t.to(op.dtype).clone() for name, t in op.unflatten(row).items()} for row in rows]
    return HessianEigen(eigenvalues=vals, eigenvectors=dicts, residuals=residuals, iterations=op.dim, converged=True,
                        names=list(op.names), dtype=op.dtype, seconds=time.perf_counter() - t0,
                        curvature=op.curvature, product=op.product, tol=0.0, method="exact")


def hessian_eigs(
    network: nn.Module,
    loss_fn: Any = None,
    data: Any = None,
    *,
    task: Any = None,
    k: int = 3,
    which: Literal["largest", "smallest", "both"] = "largest",
    num_samples: int | Literal["auto"] | None = "auto",
    tol: float | None = None,
    max_iter: int = DEFAULT_MAX_ITER,
    seed: int = 0,
    dtype: torch.dtype | str = torch.float32,
    ignore: Literal["biasbn"] | None = None,
    eval_mode: bool = True,
    device: str | torch.device | None = None,
    progress: bool | None = None,
    curvature: Literal["hessian", "ggn", "fisher"] = "hessian",
    product: Literal["reverse", "forward", "finite_difference"] | None = None,
    basis: int | None = None,
    method: Literal["auto", "lanczos", "exact"] = "auto",
) -> HessianEigen:
    """The top (or bottom) eigenvalues and eigenvectors of the loss's Hessian (or GGN, or Fisher), by Lanczos
    (or, for a few moved values, exactly).

    The Hessian is the exact second derivative of the mean loss over the first
    ``num_samples`` samples (batches weighted by their sizes, as every landscape point's
    loss) with respect to the moved parameters (every floating-point parameter, less
    biases and norm parameters with ``ignore="biasbn"``), at the network's weights.
    Products use ``torch.func`` (reverse-over-reverse through ``functional_call`` by
    default); ``curvature="ggn"`` or ``"fisher"`` takes the generalised Gauss-Newton or the
    empirical Fisher of the same loss instead (:func:`make_operator` defines them). Lanczos
    reorthogonalises fully inside a window of ``basis`` vectors, thick-restarted when it
    is full (memory ``O(dim * k)``), its arithmetic in float64.

    Read more in the user guide: [Curvature](../curvature.md).

    Parameters
    ----------
    network : nn.Module
        Its current weights are the point (never modified: a copy is used).
    loss_fn : callable, optional
        ``loss_fn(outputs, labels)``; give this or ``task``.
    data : DataLoader, iterable of batches, map-style Dataset or (inputs, labels) tensors
    task : callable, optional
        ``task(model, batch) -> loss`` (:mod:`landscape.tasks`).
    k : int, default=3
        Eigenpairs wanted (at each end with ``which="both"``).
    which : {"largest", "smallest", "both"}, default="largest"
        Algebraically largest, smallest (most negative), or both ends.
    num_samples : int, "auto" or None, default="auto"
        Samples the loss is averaged over: the first ``num_samples``; "auto" the first 2048, or
        the whole dataset when it holds fewer (as ``compute_landscape``); None the whole dataset.
        The samples are checked before any product (``landscape.engine.check_loss``: a loss
        that is not finite, not one number per batch, or of broadcast targets is refused), and
        a DataLoader whose order changes from pass to pass is refused.
    tol : float, optional
        Stop when every wanted pair's residual ``||H x - lambda x||`` is at most
        ``tol * max|lambda|``; each eigenvalue is then within ``tol * ||H||`` of a true
        one, and in practice within about the residual squared over the gap. Default by
        the products' dtype (:data:`DEFAULT_TOL`): 1e-4 for float32, whose products'
        rounding (about ``1e-7 ||H||`` and more) no residual goes below, 1e-6 for float64.
        The default gives eigenvalues as exact as the products allow; a looser ``tol`` saves
        products where fewer digits do: on a ResNet-20's top three, ``tol=1e-2`` took 8
        products instead of 10-11 and gave them to 5.6e-4 relative or better (docs/curvature.md).
    max_iter : int, default=300
        At most this many products.
    seed : int, default=0
        Seed of the start vector (the result is deterministic).
    dtype : torch.float32 or torch.float64, default=torch.float32
        Of the products and the stored Lanczos vectors (the Lanczos arithmetic is float64
        either way). float32: PyTorch's CPU convolutions have no fast float64 path (a
        ResNet-20's product took 100 times as long in float64), and float32's rounding
        bounds the eigenvalues' accuracy whatever ``tol`` says (the residuals are then
        those of the rounded operator): measured against float64 products, the top
        eigenvalue of a ResNet-20 on 128 CIFAR-shaped samples was off by 3.3e-5 relative,
        of a 2-layer GPT-2 by 1.9e-6. float64 for anything finer, and for eigenvalues much
        smaller in magnitude than the largest (``which="smallest"`` or ``"both"``: the
        error is relative to ``|lambda_max|``).
    ignore : {"biasbn"} or None, default=None
    eval_mode : bool, default=True
        Batch-norm running statistics and no dropout (train mode: dropout masks seeded
        per batch, the same in every product).
    device : str or torch.device, optional
        Default: where the network is.
    progress : bool or None, default=None
        The iterations' progress with the time left (at most: the iteration may converge
        sooner): None, a bar on a terminal or in a notebook, else a line on the logger
        ``landscape.progress`` every tenth of ``max_iter`` or minute (none for work of under
        2 s); True, the bar anywhere; False, nothing.
    curvature : {"hessian", "ggn", "fisher"}, default="hessian"
        The matrix (:func:`make_operator`): the Hessian, the generalised Gauss-Newton
        ``J^T H_out J`` (a ``loss_fn`` or a :class:`landscape.tasks.Supervised` task), or
        the empirical Fisher ``mean_i g_i g_i^T``.
    product : {"reverse", "forward", "finite_difference"} or None, default=None
        How its products are taken (None: the curvature's fastest exact one;
        ``"finite_difference"`` for models with no double backward).
    basis : int, optional
        The Lanczos window (vectors held); default ``max(2 k + 1, 20)`` (``4 k + 1`` for
        both ends), ARPACK's. A larger one restarts less (fewer products when the wanted
        eigenvalues are clustered) and holds more.
    method : {"auto", "lanczos", "exact"}, default="auto"
        "exact": the whole matrix from ``dim`` products (taken together where they can be),
        symmetrized in float64 and decomposed by LAPACK's ``eigh``
        (:mod:`landscape.curvature._dense`): the eigenvalues to the products' rounding (float32:
        within about ``1e-6 * max|lambda|``); memory ``dim^2`` float64 values. "auto": exact
        when the moved values are at most Lanczos' window (``basis``: 20 for ``k=3``), whose
        products it would take anyway, else Lanczos.

    Returns
    -------
    HessianEigen
        Eigenvalues sorted largest first, eigenvectors as parameter dicts, residuals, which
        matrix, products and method gave them, and the samples' digest.

    Notes
    -----
    Networks with attention: the products run ``scaled_dot_product_attention``'s math
    kernel (the fused kernels have no double backward; a log line says so). Memory: the
    network's copy, one forward-backward graph per batch (the products' cache), and the
    Lanczos window, ``basis`` vectors of ``dim`` values of ``dtype``, plus the ``k``
    eigenvectors and a few working vectors (on a GPU the window goes to the host once it
    would take more than half of the device's free memory).

    Examples
    --------
    >>> import torch
    >>> from landscape.curvature import hessian_eigs
    >>> net = torch.nn.Linear(3, 1)
    >>> x, y = torch.eye(3), torch.zeros(3, 1)
    >>> eig = hessian_eigs(net, torch.nn.MSELoss(), (x, y), k=1, num_samples=None, progress=False)
    >>> round(float(eig.eigenvalues[0]), 6)  # H = 2/3 [x 1]^T [x 1], whose top eigenvalue is 4
    2.666667
    """
    caller = "hessian_eigs"
    check_param("k", k, [Interval(int, 1, None)], caller=caller)
    check_param("which", which, [Options(("largest", "smallest", "both"))], caller=caller)
    check_param("tol", tol, [Interval(float, 0, 1, closed="neither"), None], caller=caller,
                hint="e.g. 1e-4 (relative to the largest |eigenvalue|); None: by the dtype.")
    check_param("max_iter", max_iter, [Interval(int, 1, None)], caller=caller)
    check_param("seed", seed, [Interval(int, 0, None)], caller=caller)
    check_param("progress", progress, [None, "boolean"], caller=caller)
    wanted = 2 * k if which == "both" else k
    check_param("basis", basis, [None, Interval(int, 2 * wanted + 1, None)], caller=caller,
                hint="at least 2 * (pairs wanted) + 1, so that a restart keeps them and adds as many.")
    check_param("method", method, [Options(EIG_METHODS)], caller=caller,
                hint="'auto' is exact when the moved values are at most Lanczos' window (basis), else Lanczos.")
    op, samples = _operator(caller, network, loss_fn, data, task, num_samples, ignore, eval_mode, dtype, device,
                            seed, curvature, product)
    if k > op.dim:
        raise InvalidParameterError(f"The 'k' parameter of {caller} must be at most the number of moved values "
                                    f"({op.dim}). Got {k} instead.")
    if use_exact(method, op.dim, exact_limit("eigs", k=k, which=which, basis=basis)):
        if which == "both" and 2 * k > op.dim:
            raise InvalidParameterError(f"The 'k' parameter of {caller} must be at most half the number of moved "
                                        f"values ({op.dim}) with which='both'. Got {k} instead.")
        eig = exact_eigs(op, k=k, which=which, progress=progress)
    else:
        if max_iter < min(op.dim, 2 * k):
            raise InvalidParameterError(f"The 'max_iter' parameter of {caller} must be at least 2*k = {2 * k} (or "
                                        f"the number of moved values, {op.dim}). Got {max_iter} instead.")
        eig = top_eigenpairs(op, k=k, which=which, tol=tol, max_iter=max_iter, seed=seed, progress=progress,
                             basis=basis)
    eig.samples_digest = samples.digest()
    return eig


def hessian_trace(
    network: nn.Module,
    loss_fn: Any = None,
    data: Any = None,
    *,
    task: Any = None,
    num_samples: int | Literal["auto"] | None = "auto",
    rel_tol: float = 0.05,
    min_probes: int = 20,
    max_probes: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
    dtype: torch.dtype | str = torch.float32,
    ignore: Literal["biasbn"] | None = None,
    eval_mode: bool = True,
    device: str | torch.device | None = None,
    progress: bool | None = None,
    method: Literal["auto", "exact", "hutch++", "hutchinson"] = "auto",
    curvature: Literal["hessian", "ggn", "fisher"] = "hessian",
    product: Literal["reverse", "forward", "finite_difference"] | None = None,
) -> Trace:
    """The trace of the loss's Hessian: exact for few parameters, else by Hutch++ or Hutchinson's estimator,
    with a confidence interval.

    Rademacher probes ``z`` give ``z^T H z`` (one Hessian-vector product each); the
    estimate is their mean and the interval ``mean ± t * sd / sqrt(m)`` (Student's
    quantile at ``confidence``, ``sd`` the probes' sample standard deviation). Probing
    stops once the interval's half-width is at most ``rel_tol * |estimate|`` (after
    ``min_probes``) or at ``max_probes``. Same Hessian as :func:`hessian_eigs`.

    Hutch++ (Meyer et al. 2021; ``method="hutch++"``) first spends ``2 * (min_probes // 3)``
    products on the top of the spectrum: ``Q``, an orthonormal basis of ``H S`` for
    ``min_probes // 3`` Rademacher vectors ``S``, and ``tr(Q^T H Q)`` exactly; then Hutchinson's
    probes of the rest ``(I - QQ^T) H (I - QQ^T)`` with the same rule (at least
    ``min_probes`` of them, then until the sum's half-width is ``rel_tol`` of it, at most
    ``max_probes`` products in all). The interval is the rest's (given ``Q`` the first term
    is exact). Where a few large eigenvalues dominate its error at a given number of
    products is far below Hutchinson's.

    Parameters
    ----------
    network, loss_fn, data, task, num_samples, seed, dtype, ignore, eval_mode, device, progress, curvature, product
        As in :func:`hessian_eigs` (``seed`` seeds the probes; ``curvature`` takes the GGN's
        or the empirical Fisher's trace instead of the Hessian's).
    rel_tol : float, default=0.05
        The interval's half-width relative to the estimate at which probing stops.
    min_probes : int, default=20
        Probes before the first check (a small sample's ``sd`` is itself uncertain).
    max_probes : int, default=1000
        At most this many products (Hutch++: the sketch's included).
    confidence : float, default=0.95
    method : {"auto", "exact", "hutch++", "hutchinson"}, default="auto"
        "exact": the diagonal of the whole matrix (``dim`` products, taken together where they
        can be; :mod:`landscape.curvature._dense`), the interval of width 0. "auto": exact
        when the moved values are at most Hutch++'s fewest products (``2 * (min_probes // 3) +
        min_probes``, 32 at the defaults), else Hutch++, whose stated interval covered the
        exact trace as often as Hutchinson's with a fraction of its products on the docs'
        networks (docs/curvature.md, "How the defaults were chosen").

    Returns
    -------
    Trace
        ``estimate``, ``interval``, ``half_width``, ``probes`` (products), ``converged``,
        ``values``, ``method`` (and Hutch++'s ``low_rank`` and ``sketch``), ``samples_digest``.
    """
    caller = "hessian_trace"
    check_param("rel_tol", rel_tol, [Interval(float, 0, None, closed="neither")], caller=caller)
    check_param("min_probes", min_probes, [Interval(int, 2, None)], caller=caller)
    check_param("max_probes", max_probes, [Interval(int, 2, None)], caller=caller)
    if max_probes < min_probes:
        raise InvalidParameterError(f"The 'max_probes' parameter of {caller} must be at least min_probes "
                                    f"({min_probes}). Got {max_probes} instead.")
    check_param("confidence", confidence, [Interval(float, 0, 1, closed="neither")], caller=caller)
    check_param("seed", seed, [Interval(int, 0, None)], caller=caller)
    check_param("progress", progress, [None, "boolean"], caller=caller)
    check_param("method", method, [Options(TRACE_METHODS)], caller=caller)
    sketch = max(1, min_probes // 3)
    if method in ("auto", "hutch++") and max_probes < 2 * sketch + 2:
        raise InvalidParameterError(f"The 'max_probes' parameter of {caller} must be at least 2 * (min_probes // 3) "
                                    f"+ 2 = {2 * sketch + 2} with method={method!r} (Hutch++'s sketch, and two probes "
                                    f"of the rest). Got {max_probes} instead.")
    op, samples = _operator(caller, network, loss_fn, data, task, num_samples, ignore, eval_mode, dtype, device,
                            seed, curvature, product)
    common: dict[str, Any] = dict(rel_tol=rel_tol, min_probes=min_probes, max_probes=max_probes,
                                  confidence=confidence, seed=seed, dtype=op.dtype, device=op.device,
                                  progress=progress)
    if use_exact(method, op.dim, exact_limit("trace", min_probes=min_probes)):
        bar = ProgressMeter("curvature matrix", op.dim, unit="products", enabled=progress is not False,
                            bar=progress or None, leave=False)
        try:
            value = float(np.trace(dense_matrix(op, progress=bar)))
        finally:
            bar.close()
        tr = Trace(estimate=value, interval=(value, value), half_width=0.0, sd=0.0, probes=op.dim,
                   confidence=confidence, converged=True, values=np.zeros(0), method="exact")
    elif method in ("auto", "hutch++"):
        tr = hutch_plus_plus(op.matvec, op.dim, sketch=sketch, **common)
    else:
        tr = hutchinson(op.matvec, op.dim, **common)
    tr.samples_digest = samples.digest()
    return tr
