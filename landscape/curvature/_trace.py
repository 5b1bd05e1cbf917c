"""The Hessian's trace by Hutchinson's estimator, with a confidence interval (private).

For Rademacher probes ``z`` (independent ±1 entries) ``E[z^T H z] = tr(H)``, with variance
``2 * sum_{i != j} H_ij^2``. After ``m`` probes the estimate is the sample mean and the
interval ``mean ± t_{(1+c)/2, m-1} * sd / sqrt(m)`` (``sd`` the probes' sample standard
deviation, ``t`` Student's quantile: the probes are i.i.d. and, being quadratic forms of
many independent signs, close to normal). Probes are drawn from a seeded generator on
the CPU, so the estimate is reproducible and independent of the device.

Stopping early when the interval is narrow enough is a sequential rule, and a rule that
stops on a small sample ``sd`` covers a little less often than stated; ``min_probes``
(default 20) keeps that effect small (measured in the tests: the stated 95 % interval
covered the dense trace in about 95 % of seeds).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Any

import numpy as np
import torch

from landscape.engine import ProgressMeter

__all__ = ["Trace", "hutchinson", "t_quantile"]


def t_quantile(p: float, df: int) -> float:
    """Student's t quantile (Cornish-Fisher expansion in 1/df around the normal quantile;
    absolute error below 1e-3 for df >= 5 and p <= 0.999, which is all an interval needs)."""
    z = NormalDist().inv_cdf(p)
    if df <= 0:
        return float("inf")
    v = float(df)
    g1 = (z ** 3 + z) / 4
    g2 = (5 * z ** 5 + 16 * z ** 3 + 3 * z) / 96
    g3 = (3 * z ** 7 + 19 * z ** 5 + 17 * z ** 3 - 15 * z) / 384
    g4 = (79 * z ** 9 + 776 * z ** 7 + 1482 * z ** 5 - 1920 * z ** 3 - 945 * z) / 92160
    return z + g1 / v + g2 / v ** 2 + g3 / v ** 3 + g4 / v ** 4


@dataclass
class Trace:
    """Hutchinson's estimate of ``tr(H)`` and its confidence interval.

    Attributes
    ----------
    estimate : float
        The mean of the probes' ``z^T H z``.
    interval : (float, float)
        ``estimate ± half_width``: the stated ``confidence`` interval for ``tr(H)``.
    half_width : float
        ``t_{(1+confidence)/2, probes-1} * sd / sqrt(probes)``.
    sd : float
        The probes' sample standard deviation.
    probes : int
        Probes (Hessian-vector products) used.
    confidence : float
    converged : bool
        The interval reached the requested relative width before ``max_probes``.
    values : ndarray
        Every probe's ``z^T H z``.
    """

    estimate: float
    interval: tuple[float, float]
    half_width: float
    sd: float
    probes: int
    confidence: float
    converged: bool
    values: np.ndarray = field(repr=False)

    def __str__(self) -> str:
        return (f"tr(H) = {self.estimate:.6g} ± {self.half_width:.3g} ({100 * self.confidence:g} % interval, "
                f"{self.probes} Rademacher probes)")


def hutchinson(matvec: Callable[[torch.Tensor], torch.Tensor], dim: int, *, rel_tol: float, min_probes: int,
               max_probes: int, confidence: float, seed: int, dtype: torch.dtype = torch.float64,
               device: Any = "cpu", progress: bool | None = None) -> Trace:
    """Probe until the interval's half-width is at most ``rel_tol * |estimate|`` (after at
    least ``min_probes``) or ``max_probes`` are used."""
    gen = torch.Generator(device="cpu").manual_seed(int(seed))
    p = 0.5 + confidence / 2
    values: list[float] = []
    half, converged = float("inf"), False
    bar = ProgressMeter("Hutchinson", max_probes, unit="probes", enabled=progress is not False,
                        bar=progress or None, capped=True, leave=False)
    try:
        for m in range(1, max_probes + 1):
            z = (torch.randint(0, 2, (dim,), generator=gen, dtype=torch.int8) * 2 - 1).to(device, dtype)
            values.append(float(torch.dot(z, matvec(z).to(device, dtype))))
            bar.update(1)
            if m >= max(2, min_probes):
                arr = np.asarray(values)
                half = t_quantile(p, m - 1) * float(arr.std(ddof=1)) / math.sqrt(m)
                if half <= rel_tol * abs(float(arr.mean())):
                    converged = True
                    break
    finally:
        bar.close()
    arr = np.asarray(values)
    est = float(arr.mean())
    sd = float(arr.std(ddof=1)) if len(arr) > 1 else float("inf")
    if len(arr) > 1:
        half = t_quantile(p, len(arr) - 1) * sd / math.sqrt(len(arr))
    return Trace(estimate=est, interval=(est - half, est + half), half_width=half, sd=sd, probes=len(arr),
                 confidence=confidence, converged=converged, values=arr)
