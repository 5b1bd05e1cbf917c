"""The sweep: 0-dimensional sublevel-set persistence of a grid of values by union-find (private).

The grid's points are the vertices of a graph whose edges join neighbours: ``"axis"``
neighbours (``2n`` in ``n`` dimensions: Landscaper's graph, gudhi's ``CubicalComplex(vertices=)``)
or ``"full"`` ones (``3**n - 1``: gudhi's ``top_dimensional_cells=``, TTK's image mode). Non-finite
points are left out of the graph. The points are added in the order of their values, ties
broken by the flat (C-order) index: a point's *rank* in that order is what "lower" means
everywhere here, so a grid gives the same pairs, saddles and tree every time.

A point with no lower neighbour starts a component (a grid minimum). A point with two or more
lower neighbours whose components differ merges them there (a saddle): the components born
later (higher rank) die at its value and join the oldest (the elder rule). Every other point
joins the component of one lower neighbour without a union: only the points with two or more
lower neighbours go through the Python loop, and the union-find's root of a component is its
minimum.

The steepest-descent flow (each point to the lower neighbour of steepest slope, the value
difference over the offset's length in index units, ties to the lowest rank) gives each grid
minimum its basin: Landscaper weighs SMAD by these basins' sizes.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

__all__ = ["Sweep", "sweep", "CONNECTIVITIES", "offsets"]

#: The graphs over a grid: axis neighbours, or all neighbours (diagonals too).
CONNECTIVITIES = ("axis", "full")


def offsets(ndim: int, connectivity: str) -> np.ndarray:
    """The neighbours' index offsets, shape (k, ndim): ``2 ndim`` for "axis", ``3**ndim - 1`` for "full"."""
    if connectivity == "axis":
        eye = np.eye(ndim, dtype=np.int64)
        return np.concatenate([-eye, eye])
    steps = [o for o in itertools.product((-1, 0, 1), repeat=ndim) if any(o)]
    return np.asarray(steps, dtype=np.int64).reshape(-1, ndim)


@dataclass(frozen=True)
class Sweep:
    """What the sweep found, by flat index into the grid.

    Attributes
    ----------
    values : ndarray of float64, shape (N,)
        The grid, flattened (C order); non-finite entries are not part of the graph.
    finite : ndarray of bool, shape (N,)
    rank : ndarray of int64, shape (N,)
        Each point's place in the order (value, flat index); non-finite points after all.
    events : ndarray of int64, shape (m, 3)
        The merges in order: ``(saddle, survivor, dying)``, the survivor and the dying component
        named by their minima (the dying one is the younger). Its pair is
        ``(values[dying], values[saddle])``.
    roots : ndarray of int64
        The minimum of every connected component left at the end (one essential class each), by rank.
    descent : ndarray of int64, shape (N,)
        The grid minimum each finite point's steepest descent ends at (-1 for non-finite points).
    top : ndarray of int64
        The highest point of every component of ``roots``, in the same order.
    """

    values: np.ndarray
    finite: np.ndarray
    rank: np.ndarray
    events: np.ndarray
    roots: np.ndarray
    descent: np.ndarray
    top: np.ndarray


def _neighbour(coords: np.ndarray, shape: tuple[int, ...], strides: np.ndarray,
               offset: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each point's neighbour at ``offset`` (flat index) and whether it exists."""
    moved = coords + offset[:, None]
    valid = np.all((moved >= 0) & (moved < np.asarray(shape)[:, None]), axis=0)
    flat = np.arange(coords.shape[1], dtype=np.int64) + int(strides @ offset)
    return np.where(valid, flat, 0), valid


def sweep(values: np.ndarray, connectivity: str) -> Sweep:
    """Run the union-find over the grid ``values`` (validated by the caller: finite or not, at
    least two points)."""
    shape = tuple(int(s) for s in values.shape)
    f = np.ascontiguousarray(values, dtype=np.float64).reshape(-1)
    n = f.size
    finite = np.isfinite(f)
    index = np.arange(n, dtype=np.int64)
    order = np.lexsort((index, np.where(finite, f, 0.0), ~finite))  # finite first, by value, then index
    rank = np.empty(n, dtype=np.int64)
    rank[order] = index
    coords = np.stack(np.unravel_index(index, shape)).astype(np.int64)
    strides = np.asarray([int(np.prod(shape[k + 1:], dtype=np.int64)) for k in range(len(shape))], dtype=np.int64)

    steps = offsets(len(shape), connectivity)
    lengths = np.sqrt((steps ** 2).sum(axis=1).astype(np.float64))
    lower_count = np.zeros(n, dtype=np.int64)
    first_lower = index.copy()
    best_slope = np.full(n, -np.inf)
    best = index.copy()
    lowers = []  # per offset: the neighbour where it is lower, else -1
    for step, length in zip(steps, lengths):
        nb, valid = _neighbour(coords, shape, strides, step)
        lower = valid & finite & (rank[nb] < rank)  # a non-finite neighbour has a rank above every finite one
        first_lower = np.where(lower & (lower_count == 0), nb, first_lower)
        lower_count += lower
        slope = np.where(lower, (f - np.where(lower, f[nb], 0.0)) / length, -np.inf)
        better = lower & ((slope > best_slope) | ((slope == best_slope) & (rank[nb] < rank[best])))
        best_slope = np.where(better, slope, best_slope)
        best = np.where(better, nb, best)
        lowers.append(np.where(lower, nb, -1))

    # the union-find: every point hangs from one lower neighbour; the minima are the roots
    parent = first_lower.tolist()
    ranks = rank.tolist()
    merging = np.flatnonzero(lower_count >= 2)
    merging = merging[np.argsort(rank[merging], kind="stable")]
    rows = np.stack(lowers, axis=1)[merging].tolist() if merging.size else []

    def find(x: int) -> int:
        root = x
        while parent[root] != root:
            root = parent[root]
        while parent[x] != root:
            parent[x], x = root, parent[x]
        return root

    events: list[tuple[int, int, int]] = []
    for u, row in zip(merging.tolist(), rows):
        found = {find(v) for v in row if v >= 0}
        if len(found) < 2:
            continue
        oldest, *younger = sorted(found, key=ranks.__getitem__)
        for r in younger:
            events.append((u, oldest, r))
            parent[r] = oldest

    # steepest descent to a minimum: pointer jumping until every point points at a minimum
    descent = np.where(finite, best, -1)
    while True:
        nxt = np.where(finite, descent[np.maximum(descent, 0)], -1)
        if np.array_equal(nxt, descent):
            break
        descent = nxt

    minima = np.flatnonzero(finite & (lower_count == 0))
    root_of = np.full(n, -1, dtype=np.int64)
    root_of[minima] = [find(int(m)) for m in minima]
    roots = np.unique(root_of[minima])
    roots = roots[np.argsort(rank[roots], kind="stable")]
    # each component's highest point (the merge tree's root): its last point by rank
    comp = np.where(finite, root_of[np.maximum(descent, 0)], -1)
    by_rank = order[::-1][finite[order[::-1]]]
    labels, first = np.unique(comp[by_rank], return_index=True)
    top_of = dict(zip(labels.tolist(), by_rank[first].tolist()))
    top = np.asarray([top_of[int(r)] for r in roots], dtype=np.int64)
    return Sweep(values=f, finite=finite, rank=rank,
                 events=np.asarray(events, dtype=np.int64).reshape(-1, 3), roots=roots,
                 descent=descent, top=top)
