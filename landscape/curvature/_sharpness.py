"""Sharpness scalars: the top eigenvalue, the trace and adaptive sharpness (private).

The adaptive forms follow Andriushchenko et al. 2023 ("A modern look at the relationship
between sharpness and generalization", section 3), with ``T = diag(|w|)`` (elementwise
scaling by the weights' magnitudes):

* worst case: ``max_{||T^-1 delta||_p <= rho} L(w + delta) - L(w)``, found by APGD
  (auto-PGD, Croce & Hein 2020, algorithm 1) in the scaled coordinates
  ``gamma = T^-1 delta``: there the constraint is the plain p-ball of radius ``rho``, whose
  projection is exact (a clamp for p = inf, a rescaling for p = 2), and the gradient is
  ``T grad L(w + T gamma)``. A weight that is exactly zero has ``delta_i = 0`` (the scaled
  norm of anything else is infinite): its ``gamma_i`` is held at 0, so it takes none of the
  budget. With ``m`` (m-sharpness) the samples are cut into groups of ``m`` and the maximum
  is taken per group, the reported value being their mean;
* average case: ``E_{delta ~ N(0, rho^2 diag(|w|^2))} L(w + delta) - L(w)`` by Monte Carlo
  over ``draws`` seeded draws, with its standard error.

Every loss is the task's mean over the samples (batches weighted by their sizes), as the
Hessian of :func:`hessian_eigs` is the one of that loss; the network is a copy (the
caller's module is never modified).
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import torch
from torch import nn

from collector.common import Interval, InvalidParameterError, Options, check_param, unwrap_module
from landscape.curvature._api import check_inputs, hessian_eigs, hessian_trace
from landscape.engine import AUTO_SAMPLES, Samples, check_loss, collect
from landscape.geometry import moved_names
from landscape.tasks import map_tensors

__all__ = ["Sharpness", "sharpness", "SHARPNESS_KINDS", "apgd_checkpoints"]

SHARPNESS_KINDS = ("lambda_max", "trace", "adaptive_worst", "adaptive_average")
_ADAPTIVE = ("adaptive_worst", "adaptive_average")
#: APGD's constants (Croce & Hein 2020, section 3.2): the momentum weight alpha and the
#: fraction of improving steps below which a checkpoint halves the step size.
_ALPHA = 0.75
_RHO_CHECK = 0.75


@dataclass
class Sharpness:
    """A sharpness scalar and how it was obtained.

    Attributes
    ----------
    value : float
        The sharpness (NaN or inf when a loss the definition needs was; ``details`` counts them).
    kind : {"lambda_max", "trace", "adaptive_worst", "adaptive_average"}
    rho : float or None
        The radius of the adaptive forms (None for the others).
    details : dict
        How it was computed: for ``lambda_max`` the Lanczos ``iterations``, ``residual`` and
        ``converged``; for ``trace`` the ``probes``, ``std_error``, ``interval`` and
        ``converged``; for ``adaptive_worst`` ``p``, ``iterations`` (APGD's per group and
        restart), ``restarts``, ``groups`` and ``m``, ``step_halvings``, ``loss`` (``L(w)``,
        the groups' mean), ``worst_loss``, ``per_group`` (each group's sharpness),
        ``nonfinite`` (loss evaluations that were NaN or inf); for ``adaptive_average``
        ``draws``, ``std_error`` (the draws' standard deviation over ``sqrt(draws)``),
        ``loss`` and ``nonfinite``. Always ``num_samples`` and ``seconds``.
    """

    value: float
    kind: str
    rho: float | None
    details: dict[str, Any] = field(default_factory=dict)

    def __str__(self) -> str:
        extra = ""
        if "std_error" in self.details:
            extra = f" ± {self.details['std_error']:.3g} (standard error)"
        radius = "" if self.rho is None else f", rho={self.rho:g}"
        if self.kind == "adaptive_worst":
            radius += f", p={self.details.get('p')}"
        bad = self.details.get("nonfinite")
        return f"{self.kind} = {self.value:.6g}{extra}{radius}" + (f" ({bad} non-finite losses)" if bad else "")


def apgd_checkpoints(iterations: int) -> list[int]:
    """APGD's checkpoints ``w_j = ceil(p_j * iterations)``, ``p_0 = 0``, ``p_1 = 0.22`` and
    ``p_{j+1} = p_j + max(p_j - p_{j-1} - 0.03, 0.06)`` (Croce & Hein 2020, section 3.2), up to
    ``iterations``, ``w_0 = 0`` left out (nothing is checked before the first window).

    The ``p_j`` are whole hundredths, so they are kept as integers: in floating point
    ``0.70 * 20`` is 14.000000000000002, whose ceiling would be 15.
    """
    p = [0, 22]  # hundredths
    while p[-1] < 100:
        p.append(p[-1] + max(p[-1] - p[-2] - 3, 6))
    out = sorted({-(-q * iterations // 100) for q in p[1:]})
    return [w for w in out if 0 < w < iterations]


class _ScaledLoss:
    """``f(gamma) = L(w + |w| * gamma)`` and its gradient ``|w| * grad L``, over batches, on a copy.

    ``w`` is given (the flat moved parameters at the point): every evaluation writes its own
    point into the copy's parameters, so what they hold afterwards is no longer ``w``.
    """

    def __init__(self, net: nn.Module, task: Any, samples: Samples, names: Sequence[str], w: torch.Tensor, *,
                 dtype: torch.dtype, device: torch.device, seed: int) -> None:
        params = dict(net.named_parameters())
        self.net, self.task, self.seed = net, task, int(seed)
        self.params = [params[k] for k in names]
        self.sizes = [p.numel() for p in self.params]
        self.w = w
        self.scale = self.w.abs()  # T = diag(|w|)
        self.dim = int(self.w.numel())
        self.dtype, self.device = dtype, device

        def cast(t: torch.Tensor) -> torch.Tensor:
            return t.to(device, dtype) if t.is_floating_point() else t.to(device)

        self.batches = [map_tensors(b, cast) for b in samples.batches]
        self.weights = [k / samples.n for k in samples.sizes]
        self.offsets = [int(sum(samples.sizes[:i])) for i in range(len(samples.sizes))]
        self.evaluations = 0
        self.nonfinite = 0

    def __call__(self, gamma: torch.Tensor | None, grad: bool) -> tuple[float, torch.Tensor | None]:
        point = self.w if gamma is None else self.w + self.scale * gamma
        with torch.no_grad():
            for p, chunk in zip(self.params, torch.split(point, self.sizes)):
                p.copy_(chunk.view_as(p))
        total = 0.0
        g = torch.zeros(self.dim, dtype=self.dtype, device=self.device) if grad else None
        for batch, wt, off in zip(self.batches, self.weights, self.offsets):
            if self.net.training:  # the same dropout masks at every point
                torch.manual_seed(self.seed + off)
            with torch.set_grad_enabled(grad):
                loss = self.task(self.net, batch)
            if g is not None:
                parts = torch.autograd.grad(loss, self.params)
                g.add_(torch.cat([t.reshape(-1) for t in parts]), alpha=wt)
            total += wt * float(loss.detach())
        self.evaluations += 1
        if not math.isfinite(total):
            self.nonfinite += 1
        return total, None if g is None else self.scale * g


def _ascent(g: torch.Tensor, p: float) -> torch.Tensor:
    """The steepest-ascent direction of unit p-norm's dual: sign(g) (p = inf), g / ||g||_2 (p = 2)."""
    if p == math.inf:
        return torch.sign(g)
    norm = torch.linalg.vector_norm(g)
    return g / norm if norm > 0 else torch.zeros_like(g)


def _project(x: torch.Tensor, rho: float, p: float) -> torch.Tensor:
    """The Euclidean projection onto the p-ball of radius rho (exact for p = inf and p = 2)."""
    if p == math.inf:
        return x.clamp(-rho, rho)
    norm = float(torch.linalg.vector_norm(x))
    return x * (rho / norm) if norm > rho else x


def _start(f: _ScaledLoss, rho: float, p: float, gen: torch.Generator) -> torch.Tensor:
    """A seeded start in the ball (AutoAttack's: uniform in the box for p = inf, on the sphere for p = 2),
    zero where the weight is (those coordinates cannot move)."""
    if p == math.inf:
        x = (torch.rand(f.dim, generator=gen, dtype=torch.float64) * 2 - 1) * rho
    else:
        x = torch.randn(f.dim, generator=gen, dtype=torch.float64)
        x[f.scale.cpu() == 0] = 0
        norm = float(torch.linalg.vector_norm(x))
        x = x * (rho / norm) if norm > 0 else x
    x = x.to(f.device, f.dtype)
    x[f.scale == 0] = 0
    return x


def _apgd(f: _ScaledLoss, rho: float, p: float, iterations: int, gen: torch.Generator) -> tuple[float, int]:
    """APGD (Croce & Hein 2020, algorithm 1) maximising ``f`` over the p-ball of radius rho: the best loss
    found and the number of step-size halvings."""
    checks = set(apgd_checkpoints(iterations))
    eta = 2 * rho
    x0 = _start(f, rho, p, gen)
    f0, g0 = f(x0, True)
    assert g0 is not None  # every evaluation but the last takes the gradient
    x1 = _project(x0 + eta * _ascent(g0, p), rho, p)
    f1, g1 = f(x1, iterations > 1)
    values = [f0, f1]  # f(x^(i)) for the condition on improving steps
    best, x_best, g_best = (f1, x1, g1) if f1 > f0 else (f0, x0, g0)
    x_prev, x, gx = x0, x1, g1
    last_check, eta_at_check, best_at_check = 0, eta, best
    halvings = 0
    for k in range(1, iterations):
        assert gx is not None  # every evaluation but the last takes the gradient
        z = _project(x + eta * _ascent(gx, p), rho, p)
        x_new = _project(x + _ALPHA * (z - x) + (1 - _ALPHA) * (x - x_prev), rho, p)
        f_new, g_new = f(x_new, k < iterations - 1)
        values.append(f_new)
        if f_new > best:
            best, x_best, g_best = f_new, x_new, g_new
        x_prev, x, gx = x, x_new, g_new
        if k in checks:
            improving = sum(values[i + 1] > values[i] for i in range(last_check, k))
            oscillating = improving < _RHO_CHECK * (k - last_check)  # condition 1
            stalled = eta_at_check == eta and best_at_check == best  # condition 2
            last_check, eta_at_check, best_at_check = k, eta, best
            if oscillating or stalled:
                eta /= 2
                halvings += 1
                x, gx = x_best, g_best  # restart from the best point (x^(k+1) <- x_max)
    return best, halvings


def _groups(samples: Samples, m: int | None, caller: str) -> list[Samples]:
    """The samples in groups of ``m`` (m-sharpness), or all of them as one group."""
    if m is None or m == samples.n:
        return [samples]
    if m > samples.n or samples.n % m:
        raise InvalidParameterError(f"The 'm' parameter of {caller} must divide the number of samples "
                                    f"({samples.n}). Got {m} instead. HINT: choose num_samples as a multiple of m.")
    if samples.rebatchable:
        cut = samples.rebatch(m)
    elif all(k == m for k in samples.sizes):
        cut = samples
    else:
        raise InvalidParameterError(f"The 'm' parameter of {caller} needs samples that can be cut into groups of "
                                    f"{m}; the data's batches ({samples.sizes[:5]}...) are of another size and hold "
                                    "more than tensors. HINT: pass data in batches of m samples.")
    return [Samples([b], [k]) for b, k in zip(cut.batches, cut.sizes)]


def _adaptive_setup(caller: str, network: Any, loss_fn: Any, data: Any, task: Any, num_samples: Any, ignore: Any,
                    eval_mode: Any, dtype: Any, device: Any) -> tuple[nn.Module, Any, Samples, list[str],
                                                                      torch.dtype, torch.device]:
    """Validate the shared arguments and make the copy the adaptive forms perturb."""
    task_ = check_inputs(caller, network, loss_fn, data, task, num_samples, ignore, eval_mode, device)
    net = copy.deepcopy(unwrap_module(network))  # the caller's module is never modified
    first = next(net.parameters(), None)
    dt = _dtype(dtype, first.dtype if first is not None else torch.float32, caller)
    names, _ = moved_names(net, ignore)
    dev = torch.device(device) if device is not None else (first.device if first is not None
                                                           else torch.device("cpu"))
    net.to(dev, dt)
    net.train(not eval_mode)
    for prm in net.parameters():  # gradients are taken with autograd.grad, for the moved ones only
        prm.requires_grad_(False)
    for k in names:
        net.get_parameter(k).requires_grad_(True)
    samples = collect(data, num_samples, task_, caller=caller)
    check_loss(net, task_, samples, caller=caller, eval_mode=eval_mode, loss_fn_given=task is None)
    return net, task_, samples, names, dt, dev


def _dtype(dtype: Any, default: torch.dtype, caller: str) -> torch.dtype:
    if dtype is None:
        return default if default in (torch.float32, torch.float64) else torch.float32
    if dtype in ("float32", "float64"):
        dtype = getattr(torch, dtype)
    if dtype not in (torch.float32, torch.float64):
        raise InvalidParameterError(f"The 'dtype' parameter of {caller} must be torch.float32, torch.float64, "
                                    f"'float32', 'float64' or None. Got {dtype!r} instead. HINT: None evaluates the "
                                    "adaptive forms in the network's own dtype.")
    return dtype


def _worst(f_of: Any, groups: list[Samples], rho: float, p: float, iterations: int, restarts: int,
           seed: int) -> tuple[float, dict[str, Any]]:
    gen = torch.Generator().manual_seed(int(seed))
    per_group, losses, worst_losses, halvings, bad = [], [], [], 0, 0
    for group in groups:
        f = f_of(group)
        base, _ = f(None, False)
        best = base  # delta = 0 is in the ball: the maximum is never below L(w)
        for _ in range(restarts):
            found, h = _apgd(f, rho, p, iterations, gen)
            best, halvings = max(best, found), halvings + h
        bad += f.nonfinite
        per_group.append(best - base)
        losses.append(base)
        worst_losses.append(best)
    value = float(np.mean(per_group))
    if bad and not math.isinf(value):
        value = math.nan  # a NaN loss somewhere in the ball: the maximum is not defined
    return value, {"p": "inf" if p == math.inf else 2, "iterations": iterations, "restarts": restarts,
                   "groups": len(groups), "step_halvings": halvings, "loss": float(np.mean(losses)),
                   "worst_loss": float(np.mean(worst_losses)), "per_group": per_group, "nonfinite": bad}


def _average(f: _ScaledLoss, rho: float, draws: int, seed: int) -> tuple[float, dict[str, Any]]:
    gen = torch.Generator().manual_seed(int(seed))
    base, _ = f(None, False)
    vals = []
    for _ in range(draws):
        z = torch.randn(f.dim, generator=gen, dtype=torch.float32).to(f.device, f.dtype)
        vals.append(f(rho * z, False)[0])  # delta = rho |w| z ~ N(0, rho^2 diag(|w|^2))
    arr = np.asarray(vals)
    sd = float(arr.std(ddof=1)) if draws > 1 else math.inf
    return float(arr.mean()) - base, {"draws": draws, "std_error": sd / math.sqrt(draws), "loss": base,
                                      "nonfinite": f.nonfinite}


def sharpness(
    network: nn.Module,
    loss_fn: Any = None,
    data: Any = None,
    *,
    task: Any = None,
    kind: Literal["lambda_max", "trace", "adaptive_worst", "adaptive_average"] = "lambda_max",
    rho: float | None = None,
    p: float | str = 2,
    m: int | None = None,
    iterations: int = 20,
    restarts: int = 1,
    draws: int = 100,
    num_samples: int | Literal["auto"] | None = "auto",
    seed: int = 0,
    curvature: Literal["hessian", "ggn", "fisher"] = "hessian",
    dtype: torch.dtype | str | None = None,
    ignore: Literal["biasbn"] | None = None,
    eval_mode: bool = True,
    device: str | torch.device | None = None,
    progress: bool | None = None,
) -> Sharpness:
    """A sharpness scalar of the loss at the network's weights.

    Definitions (``L`` the mean loss over the samples, ``w`` the moved parameters, ``H`` the
    curvature matrix of ``curvature``, ``T = diag(|w|)``):

    * ``"lambda_max"``: the top eigenvalue of ``H`` (:func:`hessian_eigs`, ``k=1``; Keskar
      et al. 2017's and Cohen et al. 2021's sharpness);
    * ``"trace"``: ``tr(H)`` (:func:`hessian_trace`, Hutchinson's estimator);
    * ``"adaptive_worst"``: ``max_{||T^-1 delta||_p <= rho} L(w + delta) - L(w)``, adaptive
      worst-case m-sharpness (Andriushchenko et al. 2023, eq. 2), found by APGD (Croce &
      Hein 2020: momentum 0.75, step ``2 rho`` halved at the checkpoints ``0.22, 0.41, ...``
      of the iterations where fewer than 75 % of the steps improved or nothing did, then
      restarted from the best point) in the coordinates ``gamma = T^-1 delta``, where the
      ball is the plain p-ball; with ``m``, the mean over groups of ``m`` samples of each
      group's maximum;
    * ``"adaptive_average"``: ``E_{delta ~ N(0, rho^2 diag(|w|^2))} L(w + delta) - L(w)``,
      adaptive average-case sharpness (Andriushchenko et al. 2023, eq. 1), by Monte Carlo
      over ``draws`` seeded draws, with its standard error.

    Parameters
    ----------
    network, loss_fn, data, task, num_samples, ignore, eval_mode, device, progress
        As in :func:`hessian_eigs` (``progress`` for ``lambda_max`` and ``trace``).
    kind : {"lambda_max", "trace", "adaptive_worst", "adaptive_average"}, default="lambda_max"
    rho : float, optional
        The radius of the adaptive forms (required for them, refused for the others):
        Andriushchenko et al. use about 0.0005 to 0.002 for p = inf and 0.05 to 0.5 for p = 2.
    p : {2, "inf"}, default=2
        The norm of the worst case's ball.
    m : int, optional
        m-sharpness (worst case): the samples in groups of ``m`` (a divisor of their
        number); None takes them all as one group.
    iterations : int, default=20
        APGD's iterations per group and restart (one forward and backward pass over the
        group's samples each, and one more for the start).
    restarts : int, default=1
        APGD runs from different seeded starts; the best counts.
    draws : int, default=100
        Monte Carlo draws of the average case (one forward pass over the samples each).
    seed : int, default=0
        Seeds the start vector, the probes, APGD's starts and the draws: the result is
        deterministic.
    curvature : {"hessian", "ggn", "fisher"}, default="hessian"
        The matrix of ``lambda_max`` and ``trace``.
    dtype : torch.float32, torch.float64, "float32", "float64" or None
        Of the products (``lambda_max``, ``trace``; None their default) or of the adaptive
        forms' network copy and losses (None: the network's own dtype).

    Returns
    -------
    Sharpness
        ``value``, ``kind``, ``rho`` and ``details`` (see :class:`Sharpness`).

    Notes
    -----
    The worst case is a maximum found by a local search: a lower bound of the true maximum
    (APGD reaches it on small problems: the tests compare with a dense search of the ball;
    where the loss has several maxima in a large ball, more ``restarts`` find the others).
    A loss that is NaN or inf anywhere the search or the draws looked is counted
    (``details["nonfinite"]``) and makes the value NaN (inf where it was +inf).

    Examples
    --------
    >>> import torch
    >>> from landscape.curvature import sharpness
    >>> net = torch.nn.Linear(3, 1)
    >>> x, y = torch.eye(3), torch.zeros(3, 1)
    >>> s = sharpness(net, torch.nn.MSELoss(), (x, y), kind="adaptive_average", rho=0.1, num_samples=None)
    >>> s.kind, s.details["draws"]
    ('adaptive_average', 100)
    """
    caller = "sharpness"
    check_param("kind", kind, [Options(SHARPNESS_KINDS)], caller=caller)
    check_param("curvature", curvature, [Options(("hessian", "ggn", "fisher"))], caller=caller)
    check_param("seed", seed, [Interval(int, 0, None)], caller=caller)
    started = time.perf_counter()
    if kind not in _ADAPTIVE:
        if rho is not None:
            raise InvalidParameterError(f"The 'rho' parameter of {caller} applies to the adaptive kinds; kind "
                                        f"{kind!r} has no radius. Got rho={rho!r}. HINT: leave rho None.")
        return _spectral(kind, network, loss_fn, data, task=task, num_samples=num_samples, seed=seed,
                         curvature=curvature, dtype=dtype, ignore=ignore, eval_mode=eval_mode, device=device,
                         progress=progress, started=started)
    check_param("rho", rho, [Interval(float, 0, None, closed="neither")], caller=caller,
                hint="the radius of the scaled ball (worst case) or the noise's scale (average case), e.g. 0.05.")
    if curvature != "hessian":
        raise InvalidParameterError(f"The 'curvature' parameter of {caller} applies to lambda_max and trace; the "
                                    f"adaptive kinds use the loss itself. Got curvature={curvature!r} with "
                                    f"kind={kind!r}. HINT: leave curvature='hessian'.")
    p_ = _norm_p(p, caller)
    check_param("m", m, [None, Interval(int, 1, None)], caller=caller)
    check_param("iterations", iterations, [Interval(int, 1, None)], caller=caller)
    check_param("restarts", restarts, [Interval(int, 1, None)], caller=caller)
    check_param("draws", draws, [Interval(int, 2, None)], caller=caller)
    net, task_, samples, names, dt, dev = _adaptive_setup(caller, network, loss_fn, data, task, num_samples, ignore,
                                                          eval_mode, dtype, device)
    assert rho is not None  # checked above
    w = torch.cat([net.get_parameter(k).detach().reshape(-1) for k in names]).clone()  # the point, once

    def f_of(group: Samples) -> _ScaledLoss:
        return _ScaledLoss(net, task_, group, names, w, dtype=dt, device=dev, seed=seed)

    if kind == "adaptive_worst":
        groups = _groups(samples, m, caller)
        value, details = _worst(f_of, groups, float(rho), p_, iterations, restarts, seed)
        details["m"] = samples.n if m is None else m
    else:
        value, details = _average(f_of(samples), float(rho), draws, seed)
    details.update(num_samples=samples.n, seconds=time.perf_counter() - started)
    return Sharpness(value=value, kind=kind, rho=float(rho), details=details)


def _norm_p(p: Any, caller: str) -> float:
    if p in (2, "2"):
        return 2.0
    if p in ("inf", math.inf):
        return math.inf
    raise InvalidParameterError(f"The 'p' parameter of {caller} must be 2 or 'inf' (the worst case's ball). "
                                f"Got {p!r} instead.")


def _spectral(kind: str, network: Any, loss_fn: Any, data: Any, *, task: Any, num_samples: Any, seed: int,
              curvature: str, dtype: Any, ignore: Any, eval_mode: Any, device: Any, progress: Any,
              started: float) -> Sharpness:
    """``lambda_max`` and ``trace``, through :func:`hessian_eigs` and :func:`hessian_trace`."""
    kwargs: dict[str, Any] = dict(task=task, num_samples=num_samples, seed=seed, ignore=ignore, eval_mode=eval_mode,
                                  device=device, progress=progress, curvature=curvature)
    if dtype is not None:
        kwargs["dtype"] = dtype
    if kind == "lambda_max":
        eig = hessian_eigs(network, loss_fn, data, k=1, **kwargs)
        details: dict[str, Any] = {"iterations": eig.iterations, "residual": float(eig.residuals[0]),
                                   "converged": eig.converged}
        value = float(eig.eigenvalues[0])
    else:
        tr = hessian_trace(network, loss_fn, data, **kwargs)
        details = {"probes": tr.probes, "std_error": tr.sd / math.sqrt(tr.probes), "interval": list(tr.interval),
                   "converged": tr.converged}
        value = tr.estimate
    details.update(num_samples=_count(data, num_samples), seconds=time.perf_counter() - started)
    return Sharpness(value=value, kind=kind, rho=None, details=details)


def _count(data: Any, num_samples: int | str | None) -> int | None:
    """The number of samples used (None: the whole dataset, counted when it says its length; "auto": at
    most ``AUTO_SAMPLES`` of it)."""
    if num_samples == "auto":
        whole = _count(data, None)
        return None if whole is None else min(whole, AUTO_SAMPLES)
    if num_samples is not None:
        return int(num_samples)
    if isinstance(data, (tuple, list)) and len(data) == 2 and isinstance(data[0], torch.Tensor):
        return int(data[0].shape[0])
    dataset = getattr(data, "dataset", data)
    try:
        return len(dataset)
    except TypeError:
        return None
