"""Random directions, normalization and path coordinates (private).

Directions are lists of float32 CPU tensors aligned with a list of parameter names.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

__all__: list[str] = []


def normalize_directions(direction: Sequence[torch.Tensor], reference: Sequence[torch.Tensor],
                         normalization: str) -> list[torch.Tensor]:
    """Rescale ``direction`` tensor by tensor to the norm of ``reference``.

    ``"layer"`` (MindSpore): ``d_p <- d_p * ||p_f|| / ||d_p||`` per tensor;
    ``"filter"`` (Li et al.): the same for every slice along the first dimension;
    ``"none"``: unchanged. A zero tensor (or slice) stays zero.
    """
    out = []
    for d, p in zip(direction, reference):
        d = d.to(torch.float32)
        if normalization == "none" or d.numel() == 0:
            out.append(d.clone())
            continue
        if normalization == "layer" or d.dim() == 0:
            dn = torch.linalg.vector_norm(d.double())
            pn = torch.linalg.vector_norm(p.double())
            scale = (pn / dn) if dn > 0 else torch.zeros((), dtype=torch.float64)
            out.append((d.double() * scale).to(torch.float32))
        else:  # filter
            d2, p2 = d.double().reshape(d.shape[0], -1), p.double().reshape(p.shape[0], -1)
            dn = torch.linalg.vector_norm(d2, dim=1, keepdim=True)
            pn = torch.linalg.vector_norm(p2, dim=1, keepdim=True)
            scale = torch.where(dn > 0, pn / torch.where(dn > 0, dn, 1.0), 0.0)
            out.append((d2 * scale).reshape(d.shape).to(torch.float32))
    return out


def random_directions(reference: Sequence[torch.Tensor], seed: int,
                      normalization: str) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """Two seeded standard-normal directions (all of v, then all of w), normalized."""
    gen = torch.Generator(device="cpu").manual_seed(int(seed))
    v = [torch.randn(tuple(p.shape), generator=gen, dtype=torch.float32) for p in reference]
    w = [torch.randn(tuple(p.shape), generator=gen, dtype=torch.float32) for p in reference]
    return normalize_directions(v, reference, normalization), normalize_directions(w, reference, normalization)


def _dot(a: Sequence[torch.Tensor], b: Sequence[torch.Tensor]) -> float:
    return float(sum(torch.dot(x.reshape(-1).double(), y.reshape(-1).double()) for x, y in zip(a, b)))


def path_coordinates(v: Sequence[torch.Tensor], w: Sequence[torch.Tensor],
                     differences: Sequence[Sequence[torch.Tensor]]) -> np.ndarray:
    """Least-squares ``(alpha, beta)`` with ``[v w] (alpha, beta) = diff`` for each difference.

    Solved through the 2x2 normal equations in float64 (``v`` and ``w`` need not be
    orthogonal). Returns an array of shape (n, 2).
    """
    g = np.array([[_dot(v, v), _dot(v, w)], [_dot(w, v), _dot(w, w)]])
    out = np.zeros((len(differences), 2))
    for k, diff in enumerate(differences):
        b = np.array([_dot(v, diff), _dot(w, diff)])
        out[k] = np.linalg.lstsq(g, b, rcond=None)[0]
    return out


def grid_axes(coords: np.ndarray | None, size: int) -> tuple[np.ndarray, np.ndarray]:
    """Axes of the grid: PCA extents with 0.2 margins, or ``linspace(-1, 1, size)``."""
    if coords is None:
        ax = np.linspace(-1.0, 1.0, size)
        return ax, ax.copy()
    axes = []
    for col in (coords[:, 0], coords[:, 1]):
        lo, hi = float(col.min()), float(col.max())
        m = 0.2 * (hi - lo)
        axes.append(np.linspace(lo - m, hi + m, size))
    return axes[0], axes[1]
