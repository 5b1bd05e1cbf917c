"""Random directions, normalization and path coordinates (private).

Directions are lists of float32 CPU tensors aligned with a list of parameter names.

Normalizations, for a direction tensor ``d`` and the centre's tensor ``p`` (Li et al.,
``net_plotter.normalize_direction``, and MindSpore's layer normalization), computed in
float64 and stored as float32:

=========  ==========================================================================
layer      ``d <- d * ||p|| / ||d||`` per tensor (MindSpore's; Li et al.'s ``layer``)
filter     the same for every slice ``d[i]`` along the first dimension (a filter of
           a convolution, a neuron of a linear layer)
dfilter    ``d[i] <- d[i] / ||d[i]||``: every filter a unit vector
dlayer     ``d <- d / ||d||``: every tensor a unit vector
weight     ``d <- d * p`` element by element
none       ``d`` as it is
=========  ==========================================================================

A zero tensor (or slice) stays zero; Li et al. divide by ``||d|| + 1e-10`` instead,
which differs from the exact quotient by less than float32 rounding unless a slice's
norm is below about 1e-3.

Tensors with at most one dimension (biases, norm-layer scales and shifts) follow the
normalization like the others by default (``biasbn="normalize"``: under ``filter`` each
element of a bias is its own filter, so its direction is ``sign(d_i) |p_i|``). Li et
al.'s convention is ``biasbn="li"``: such a tensor's direction is the tensor itself,
``d <- p``, whatever the normalization (``normalize_directions_for_weights`` with
``ignore != 'biasbn'``); their ``ignore='biasbn'`` (a zero direction) is our
``ignore="biasbn"``, which leaves those tensors out of the moved parameters.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

__all__ = ["NORMALIZATIONS", "BIASBN", "normalize_directions", "random_directions", "random_direction",
           "path_coordinates", "grid_axes", "axis_values"]

NORMALIZATIONS = ("layer", "filter", "dfilter", "dlayer", "weight", "none")
BIASBN = ("normalize", "li")


def _scaled(d: torch.Tensor, num: torch.Tensor | None, *, per_filter: bool) -> torch.Tensor:
    """``d * num / ||d||`` (``num`` None: ``d / ||d||``) per tensor or per first-dimension slice, in float64."""
    d64 = d.double()
    if per_filter and d.dim() >= 1:
        d2 = d64.reshape(d.shape[0], -1)
        dn = torch.linalg.vector_norm(d2, dim=1, keepdim=True)
        top = torch.ones_like(dn) if num is None else num
        scale = torch.where(dn > 0, top / torch.where(dn > 0, dn, 1.0), 0.0)
        return (d2 * scale).reshape(d.shape)
    dn = torch.linalg.vector_norm(d64)
    top1 = torch.ones((), dtype=torch.float64) if num is None else num
    scale = (top1 / dn) if dn > 0 else torch.zeros((), dtype=torch.float64)
    return d64 * scale


def normalize_directions(direction: Sequence[torch.Tensor], reference: Sequence[torch.Tensor],
                         normalization: str, biasbn: str = "normalize") -> list[torch.Tensor]:
    """Normalize ``direction`` tensor by tensor against ``reference`` (see the module docstring).

    Parameters
    ----------
    direction, reference : sequence of Tensor
        Aligned lists (the moved parameters, in order).
    normalization : {"layer", "filter", "dfilter", "dlayer", "weight", "none"}
    biasbn : {"normalize", "li"}, default="normalize"
        How tensors with at most one dimension are treated: normalized like the others,
        or, as Li et al. do, replaced by the reference tensor itself.

    Returns
    -------
    list of Tensor
        float32 tensors shaped like ``direction``.
    """
    out = []
    for d, p in zip(direction, reference):
        d = d.to(torch.float32)
        if biasbn == "li" and d.dim() <= 1:
            out.append(p.detach().to(torch.float32).clone().reshape(d.shape))
            continue
        if normalization == "none" or d.numel() == 0:
            out.append(d.clone())
            continue
        p64 = p.detach().double()
        if normalization == "weight":
            res = d.double() * p64
        elif normalization in ("layer", "dlayer") or d.dim() == 0:
            num = None if normalization in ("dlayer", "dfilter") else torch.linalg.vector_norm(p64)
            res = _scaled(d, num, per_filter=False)
        elif normalization in ("filter", "dfilter"):
            num = None if normalization == "dfilter" else \
                torch.linalg.vector_norm(p64.reshape(p.shape[0], -1), dim=1, keepdim=True)
            res = _scaled(d, num, per_filter=True)
        else:
            raise ValueError(f"unknown normalization {normalization!r}")
        out.append(res.to(torch.float32))
    return out


def random_direction(reference: Sequence[torch.Tensor], gen: torch.Generator) -> list[torch.Tensor]:
    """One standard-normal direction shaped like ``reference`` (float32), drawn from ``gen``."""
    return [torch.randn(tuple(p.shape), generator=gen, dtype=torch.float32) for p in reference]


def random_directions(reference: Sequence[torch.Tensor], seed: int, normalization: str, biasbn: str = "normalize",
                      count: int = 2) -> list[list[torch.Tensor]]:
    """``count`` seeded standard-normal directions (all of v, then all of w), normalized.

    The first direction does not depend on ``count``: a random line (``count=1``) runs
    along the first axis of the random plane of the same seed.
    """
    gen = torch.Generator(device="cpu").manual_seed(int(seed))
    return [normalize_directions(random_direction(reference, gen), reference, normalization, biasbn)
            for _ in range(count)]


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


def axis_values(spec: tuple[float, float, int]) -> np.ndarray:
    """``np.linspace(min, max, num)`` of an axis given as ``(min, max, num)``."""
    lo, hi, num = spec
    return np.linspace(float(lo), float(hi), int(num))


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
