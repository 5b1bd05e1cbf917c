"""Axes through given models: planes through three models, target directions (private).

Vectors are lists of float32 CPU tensors aligned with the moved parameters; dot products
and norms are taken in float64.

* The plane through models A, B, C (Garipov et al. 2018, "Loss surfaces, mode
  connectivity and fast ensembling", section 5): origin A, ``u = (B - A) / ||B - A||``,
  ``v = (C - A - <C - A, u> u) / ||C - A - <C - A, u> u||`` (Gram-Schmidt), so the
  coordinates are distances in parameter space and the picture is not sheared:
  A = (0, 0), B = (||B - A||, 0), C = (<C - A, u>, ||C - A - <C - A, u> u||).
  (``loss-landscapes``' ``planar_interpolation`` uses ``B - A`` and ``C - A`` as they are,
  not orthogonalised; a plane along those axes is ``directions=(B - A, C - A)`` given.)
* The target direction ``B - A`` (Li et al.'s ``--model_file2``): A at 0, B at 1. Its
  second axis is random, or the trajectory's top principal direction orthogonal to it
  (:func:`deviation_axis`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import torch

__all__ = ["difference", "plane_axes", "deviation_axis"]


def _dot(a: Sequence[torch.Tensor], b: Sequence[torch.Tensor]) -> float:
    return float(sum(torch.dot(x.reshape(-1).double(), y.reshape(-1).double()) for x, y in zip(a, b)))


def difference(b: Sequence[torch.Tensor], a: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """``b - a`` tensor by tensor (computed in float64, stored as float32)."""
    return [(y.double() - x.double()).to(torch.float32) for x, y in zip(a, b)]


def plane_axes(a: Sequence[torch.Tensor], b: Sequence[torch.Tensor],
               c: Sequence[torch.Tensor]) -> tuple[list[torch.Tensor], list[torch.Tensor], np.ndarray]:
    """Orthonormal axes ``(u, v)`` of the plane through ``a``, ``b``, ``c`` and the three models'
    coordinates (array of shape (3, 2)); see the module docstring.

    Raises
    ------
    ValueError
        When B equals A, or C lies on the line through A and B (no plane).
    """
    ba = [y.double() - x.double() for x, y in zip(a, b)]
    ca = [y.double() - x.double() for x, y in zip(a, c)]
    nb = np.sqrt(_dot(ba, ba))
    if not nb > 0:
        raise ValueError("Models A and B of the plane are equal: B - A is zero, so there is no first axis.")
    u = [t / nb for t in ba]
    cu = _dot(ca, u)
    perp = [t - cu * s for t, s in zip(ca, u)]
    nc = np.sqrt(_dot(perp, perp))
    # float32 models: C within float32 rounding of the line spans no plane (the axis would be noise)
    if not nc > 1e-6 * np.sqrt(_dot(ca, ca)):
        raise ValueError("Model C lies on the line through A and B: the three models span no plane. "
                         "HINT: an interpolation between two models is between=(A, B).")
    v = [t / nc for t in perp]
    coords = np.array([[0.0, 0.0], [nb, 0.0], [cu, nc]])
    return [t.to(torch.float32) for t in u], [t.to(torch.float32) for t in v], coords


def deviation_axis(a: Sequence[torch.Tensor], u: Sequence[torch.Tensor],
                   load: Callable[[int], Sequence[torch.Tensor]], n: int) -> list[torch.Tensor]:
    """The trajectory's top principal direction orthogonal to ``u``, scaled to ``||u||``.

    Each checkpoint ``k`` (``load(k)``) is taken relative to ``a`` and its component
    along ``u`` removed; the direction is the top right singular vector of those
    deviations (not centred: the line through A along ``u`` is the reference), its
    largest-magnitude entry made positive. Computed from the (n, n) Gram matrix of the
    deviations in float64.

    Raises
    ------
    ValueError
        When every checkpoint lies on the line (no deviation to take a direction from).
    """
    uu = _dot(u, u)
    devs: list[list[torch.Tensor]] = []
    for k in range(n):
        d = [y.double() - x.double() for x, y in zip(a, load(k))]
        s = _dot(d, u) / uu
        devs.append([(t - s * w.double()).to(torch.float32) for t, w in zip(d, u)])
    gram = np.array([[_dot(p, q) for q in devs] for p in devs])
    lam, vec = np.linalg.eigh(gram)
    if not lam[-1] > 1e-24 * max(1.0, float(np.trace(gram))):
        raise ValueError("Every checkpoint lies on the line through A and B: the trajectory has no direction "
                         "besides B - A. HINT: use directions=('target', 'random').")
    coef = vec[:, -1]
    direction = [torch.stack([float(cf) * dv[i].double() for cf, dv in zip(coef, devs)]).sum(0)
                 for i in range(len(u))]
    flat = torch.cat([t.reshape(-1) for t in direction]) if direction else torch.zeros(0, dtype=torch.float64)
    sign = -1.0 if flat.numel() and float(flat[int(torch.argmax(flat.abs()))]) < 0 else 1.0
    scale = sign * np.sqrt(uu) / float(torch.linalg.vector_norm(flat))
    return [(t * scale).to(torch.float32) for t in direction]
