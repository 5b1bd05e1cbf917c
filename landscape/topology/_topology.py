"""``grid_topology``: minima, saddles, persistence pairs, the merge tree and SMAD of a grid (private).

Everything here is read off one sweep (:mod:`landscape.topology._sweep`) and the persistence
threshold: a pair counts when its persistence (death - birth) is strictly above it, and a pair
at or below it is *simplified away* -- its minimum joins the component it merged into, with its
basin, and its saddle is no saddle. Counts therefore always come with the threshold and the
connectivity they used (:meth:`Topology.summary` prints both).

SMAD is Landscaper's (``LossLandscape.smad`` as its source defines it, over the sublevel merge
tree; its PyPI release 1.3.1 takes the contour tree instead, which differs where maxima split
branches): over the merge tree's edges from each minimum to the first saddle its branch meets, the
mean of ``value(saddle) - value(minimum)``; the deepest minimum of a component counts too (its
first merge is the first branch that joins it). A tree without a saddle has SMAD 0. ``normalize``
divides by the grid's range of finite values, ``weighted`` multiplies each gap by the share of the
points whose steepest descent ends in that minimum's basin.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from collector.common import InstanceOf, Interval, InvalidParameterError, Options, check_param
from landscape.topology._sweep import CONNECTIVITIES, Sweep, sweep

__all__ = ["grid_topology", "barriers", "Topology", "CriticalPoints", "MergeTree", "Barrier", "Basin"]

_CALLER = "grid_topology"
#: Barriers a line's summary names (the rest are counted).
_SHOWN = 5


@dataclass(frozen=True)
class CriticalPoints:
    """Grid points of one kind (minima or saddles), ordered by value, then flat index.

    Attributes
    ----------
    positions : ndarray of int, shape (k, ndim)
        Their indices into the grid (``values[tuple(positions[i])]``).
    values : ndarray of float, shape (k,)
    coordinates : ndarray of float, shape (k, ndim), or None
        Their coordinates along the grid's axes, in the same (array) order, when the axes are known.
    """

    positions: np.ndarray
    values: np.ndarray
    coordinates: np.ndarray | None = None

    def __len__(self) -> int:
        return int(self.values.size)


@dataclass(frozen=True)
class MergeTree:
    """The merge (join) tree of the sublevel sets, simplified at the threshold.

    Leaves are the minima, inner nodes the saddles where branches join, and the root of each
    connected component its highest point.

    Attributes
    ----------
    positions : ndarray of int, shape (k, ndim)
        Each node's grid index.
    values : ndarray of float, shape (k,)
    kinds : ndarray of str, shape (k,)
        ``"minimum"``, ``"saddle"`` or ``"maximum"`` (a component's highest point, its root).
    parent : ndarray of int, shape (k,)
        Each node's parent node (-1 at a root). Every edge joins a node to a higher one.
    """

    positions: np.ndarray
    values: np.ndarray
    kinds: np.ndarray
    parent: np.ndarray

    def __len__(self) -> int:
        return int(self.values.size)

    @property
    def edges(self) -> np.ndarray:
        """``(child, parent)`` node pairs, shape (k - roots, 2)."""
        child = np.flatnonzero(self.parent >= 0)
        return np.stack([child, self.parent[child]], axis=1)

    def layout(self) -> np.ndarray:
        """Each node's horizontal place in a drawing of the tree (a dendrogram, value upwards): the leaves
        at 0, 1, 2, ... in the order of a walk from the roots that visits the deeper branch first, an
        inner node above the middle of its children. The same tree, the same places.

        Examples
        --------
        >>> import numpy as np
        >>> from landscape.topology import grid_topology
        >>> tree = grid_topology(np.array([0.0, 2.0, 1.0, 3.0])).merge_tree
        >>> tree.kinds.tolist(), tree.layout().tolist()
        (['minimum', 'minimum', 'saddle', 'maximum'], [0.0, 1.0, 0.5, 0.5])
        """
        n = len(self)
        children: list[list[int]] = [[] for _ in range(n)]
        for c, p in self.edges.tolist():
            children[p].append(c)
        depth = self.values.astype(np.float64).copy()  # the lowest value of each node's subtree
        for node in np.argsort(self.values, kind="stable"):  # a child is never above its parent
            for c in children[node]:
                depth[node] = min(depth[node], depth[c])
        xs = np.zeros(n)
        leaf = 0
        roots = sorted(np.flatnonzero(self.parent < 0).tolist(), key=lambda r: (depth[r], r))
        stack = [(r, False) for r in reversed(roots)]
        while stack:
            node, done = stack.pop()
            kids = sorted(children[node], key=lambda c: (depth[c], c))
            if not kids:
                xs[node] = leaf
                leaf += 1
            elif done:
                xs[node] = float(np.mean([xs[c] for c in kids]))
            else:
                stack.append((node, True))
                stack.extend((c, False) for c in reversed(kids))
        return xs


@dataclass(frozen=True)
class Barrier:
    """One saddle between two basins: where a branch of the merge tree joins another.

    Attributes
    ----------
    saddle : tuple of int
        The saddle's grid index.
    value : float
        The value there.
    minimum : tuple of int
        The deepest point of the shallower side: the branch of the merge tree that ends here.
    other : tuple of int
        The deepest point of the other side (the branch it joins).
    height : float
        ``value - values[minimum]``: the barrier seen from ``minimum``, its persistence.
    saddle_at, minimum_at, other_at : tuple of float, or None
        The three points' coordinates along the axes (array order), when the axes are known.
    """

    saddle: tuple[int, ...]
    value: float
    minimum: tuple[int, ...]
    other: tuple[int, ...]
    height: float
    saddle_at: tuple[float, ...] | None = None
    minimum_at: tuple[float, ...] | None = None
    other_at: tuple[float, ...] | None = None


@dataclass(frozen=True)
class Basin:
    """The connected part of the sublevel set ``{values <= level}`` that holds a minimum.

    Attributes
    ----------
    minimum : tuple of int
        The minimum (its grid index): the one whose basin holds the point asked about.
    value : float
        Its value.
    level : float
        ``value + height``.
    points : int
        Grid points in the basin at that level.
    share : float
        ``points`` over the grid's finite points.
    extent : ndarray of int, shape (ndim, 2)
        The first and last index the basin reaches along each axis.
    coordinates : ndarray of float, shape (ndim, 2), or None
        The same in the axes' coordinates, when known.
    at_edge : bool
        The basin reaches the grid's edge: its extent is cut there (a lower bound).
    contains : bool
        The point asked about lies in it (its value is at most ``level``).
    """

    minimum: tuple[int, ...]
    value: float
    level: float
    points: int
    share: float
    extent: np.ndarray
    coordinates: np.ndarray | None
    at_edge: bool
    contains: bool


@dataclass(frozen=True, eq=False)
class Topology:
    """The topology of a grid's sublevel sets: persistence pairs, minima, saddles, merge tree, SMAD.

    Made by :func:`grid_topology` (or ``Landscape.topology``); see there for the rules.

    Attributes
    ----------
    shape : tuple of int
        The grid's shape.
    connectivity : {"axis", "full"}
    threshold : float
        Pairs with persistence at most this are simplified away.
    non_finite : int
        Grid points left out (NaN or infinite).
    pairs : ndarray of float, shape (k, 2)
        The finite persistence pairs ``(birth, death)`` above the threshold, the most persistent
        first (ties: by the birth's rank).
    pair_positions : ndarray of int, shape (k, 2, ndim)
        Where each pair is born (a minimum) and dies (a saddle).
    essential : CriticalPoints
        The minimum of each connected component: the births of the classes that never die.
    minima, saddles : CriticalPoints
        The minima (``essential`` and the births of ``pairs``) and the saddles (the distinct
        points where ``pairs`` die).
    merge_tree : MergeTree
    axes : tuple of ndarray, or None
        The coordinates along each array axis, when given.
    centre : tuple of int
        The point :meth:`basin` is about by default (the grid's middle, or the landscape's centre).
    """

    shape: tuple[int, ...]
    connectivity: str
    threshold: float
    non_finite: int
    pairs: np.ndarray
    pair_positions: np.ndarray
    essential: CriticalPoints
    minima: CriticalPoints
    saddles: CriticalPoints
    merge_tree: MergeTree
    axes: tuple[np.ndarray, ...] | None
    centre: tuple[int, ...]
    _sweep: Sweep = field(repr=False)
    _kept: np.ndarray = field(repr=False)  # the kept merges: (saddle, survivor, dying) flat indices
    _owner: np.ndarray = field(repr=False)  # each grid minimum's kept minimum (itself, or the one it joined)

    @property
    def points(self) -> int:
        """Grid points in the graph (finite values)."""
        return int(self._sweep.finite.sum())

    @property
    def total_persistence(self) -> float:
        """The sum of ``death - birth`` over ``pairs``."""
        return float(np.sum(self.pairs[:, 1] - self.pairs[:, 0]))

    def smad(self, normalize: bool = False, weighted: bool = False) -> float:
        """Landscaper's saddle-minimum average distance (SMAD) of the simplified merge tree.

        Parameters
        ----------
        normalize : bool, default=False
            Divide by the range of the grid's finite values (a scale-free number).
        weighted : bool, default=False
            Weigh each minimum's gap by the share of grid points whose steepest descent ends in
            its basin (Landscaper divides by all points; here, all finite points).

        Returns
        -------
        float
            0.0 when the tree has no saddle.

        Examples
        --------
        >>> import numpy as np
        >>> from landscape.topology import grid_topology
        >>> grid_topology(np.array([0.0, 2.0, 1.0, 3.0])).smad()
        1.5
        """
        check_param("normalize", normalize, ["boolean"], caller="Topology.smad")
        check_param("weighted", weighted, ["boolean"], caller="Topology.smad")
        f = self._sweep.values
        first: dict[int, int] = {}
        for s, a, b in self._kept.tolist():
            first.setdefault(a, s)
            first.setdefault(b, s)
        if not first:
            return 0.0
        minima = sorted(first, key=self._sweep.rank.__getitem__)
        gaps = np.asarray([f[first[m]] - f[m] for m in minima])
        if weighted:
            finite_descent = self._sweep.descent[self._sweep.finite]
            sizes = np.bincount(self._owner[finite_descent], minlength=f.size)
            gaps = gaps * sizes[minima] / max(1, self.points)
        out = float(np.mean(gaps))
        if normalize:
            span = float(np.ptp(f[self._sweep.finite]))
            out = out / span if span > 0 else 0.0
        return out

    def barriers(self) -> list[Barrier]:
        """Every saddle between two basins (one per pair), in the order of the saddles' flat index
        (along a line: left to right), then of the minima's ranks.

        Examples
        --------
        >>> import numpy as np
        >>> from landscape.topology import grid_topology
        >>> [(b.saddle, b.height) for b in grid_topology(np.array([0.0, 2.0, 1.0, 3.0])).barriers()]
        [((1,), 1.0)]
        """
        f, rank = self._sweep.values, self._sweep.rank
        kept = sorted(self._kept.tolist(), key=lambda e: (e[0], rank[e[2]]))
        return [Barrier(saddle=self._position(s), value=float(f[s]), minimum=self._position(b),
                        other=self._position(a), height=float(f[s] - f[b]), saddle_at=self._at(s),
                        minimum_at=self._at(b), other_at=self._at(a)) for s, a, b in kept]

    def basin(self, height: float, at: Sequence[int] | None = None) -> Basin:
        """The basin of the minimum below ``at`` (default :attr:`centre`) filled to ``height`` above it.

        The minimum is the one ``at``'s steepest descent ends in (a minimum simplified away: the
        one it joined); the basin is the connected part of ``{values <= minimum + height}`` holding
        it, with the grid's connectivity.

        Parameters
        ----------
        height : float
            How far above the minimum (>= 0, finite).
        at : sequence of int, optional
            A grid index with a finite value.

        Returns
        -------
        Basin

        Examples
        --------
        >>> import numpy as np
        >>> from landscape.topology import grid_topology
        >>> grid_topology(np.array([3.0, 1.0, 0.0, 2.0, 5.0])).basin(1.5).points
        2
        """
        caller = "Topology.basin"
        check_param("height", height, [Interval(float, 0, None)], caller=caller,
                    hint="a loss difference above the minimum, e.g. 0.1.")
        if not math.isfinite(height):
            raise InvalidParameterError(f"The 'height' parameter of {caller} must be finite. Got {height!r} instead.")
        where = tuple(self.centre) if at is None else _check_index("at", at, self.shape, caller)
        sw = self._sweep
        p = int(np.ravel_multi_index(where, self.shape))
        if not sw.finite[p]:
            raise InvalidParameterError(f"The 'at' parameter of {caller}: the grid's value at {where} is not "
                                        "finite, so it lies in no basin. HINT: pass another index.")
        m = int(self._owner[sw.descent[p]])
        f = sw.values
        level = float(f[m] + height)
        # the minima joined at this level: every merge (simplified or not) at or below it
        group = {int(x): int(x) for x in np.unique(sw.descent[sw.finite])}

        def find(x: int) -> int:
            while group[x] != x:
                group[x] = group[group[x]]
                x = group[x]
            return x

        for s, a, b in sw.events.tolist():
            if f[s] <= level:
                group[find(b)] = find(a)
        labels = np.full(f.size, -1, dtype=np.int64)
        labels[sw.finite] = [find(int(x)) for x in sw.descent[sw.finite]]
        inside = sw.finite & (f <= level) & (labels == find(m))
        idx = np.stack(np.unravel_index(np.flatnonzero(inside), self.shape), axis=1)
        extent = np.stack([idx.min(axis=0), idx.max(axis=0)], axis=1)
        coords = None
        if self.axes is not None:
            coords = np.asarray([[ax[lo], ax[hi]] for ax, (lo, hi) in zip(self.axes, extent)], dtype=np.float64)
        at_edge = bool(np.any(extent[:, 0] == 0) or np.any(extent[:, 1] == np.asarray(self.shape) - 1))
        return Basin(minimum=self._position(m), value=float(f[m]), level=level, points=int(inside.sum()),
                     share=float(inside.sum() / max(1, self.points)), extent=extent, coordinates=coords,
                     at_edge=at_edge, contains=bool(inside[p]))

    def summary(self) -> str:
        """One line: the grid, the connectivity and threshold, and what they give.

        Examples
        --------
        >>> import numpy as np
        >>> from landscape.topology import grid_topology
        >>> print(grid_topology(np.array([0.0, 2.0, 1.0, 3.0])).summary())
        4 points, axis connectivity, threshold 0: 2 minima, 1 saddle, 1 finite pair (largest persistence 1), \
SMAD 1.5 (normalised 0.5); barriers 1 at index 1
        """
        shape = "x".join(str(n) for n in self.shape[::-1]) if len(self.shape) > 1 else f"{self.shape[0]} points"
        n_min, n_sad, n_pairs = len(self.minima), len(self.saddles), len(self.pairs)
        top = f" (largest persistence {self.pairs[0, 1] - self.pairs[0, 0]:.4g})" if n_pairs else ""
        text = (f"{shape}, {self.connectivity} connectivity, threshold {self.threshold:g}: "
                f"{n_min} {'minimum' if n_min == 1 else 'minima'}, {n_sad} saddle{'' if n_sad == 1 else 's'}, "
                f"{n_pairs} finite pair{'' if n_pairs == 1 else 's'}{top}, "
                f"SMAD {self.smad():.6g} (normalised {self.smad(normalize=True):.4g})")
        if len(self.essential) > 1:
            text += f", {len(self.essential)} separate components"
        if self.non_finite:
            text += f"; {self.non_finite} of {int(np.prod(self.shape))} points non-finite, left out"
        if len(self.shape) == 1 and n_pairs:  # a line: its barriers, along it
            found = self.barriers()
            shown = [f"{b.height:.4g} at " + (f"x={b.saddle_at[0]:.4g}" if b.saddle_at else f"index {b.saddle[0]}")
                     for b in found[:_SHOWN]]
            more = f" and {len(found) - _SHOWN} more" if len(found) > _SHOWN else ""
            text += "; barriers " + ", ".join(shown) + more
        return text

    def _position(self, flat: int) -> tuple[int, ...]:
        return tuple(int(i) for i in np.unravel_index(int(flat), self.shape))

    def _at(self, flat: int) -> tuple[float, ...] | None:
        if self.axes is None:
            return None
        return tuple(float(ax[i]) for ax, i in zip(self.axes, self._position(flat)))


def _critical(flat: np.ndarray, sw: Sweep, shape: tuple[int, ...],
              axes: tuple[np.ndarray, ...] | None) -> CriticalPoints:
    flat = np.asarray(flat, dtype=np.int64)
    flat = flat[np.argsort(sw.rank[flat], kind="stable")]
    pos = np.stack(np.unravel_index(flat, shape), axis=1).astype(np.int64).reshape(-1, len(shape))
    coords = None if axes is None else np.stack([ax[pos[:, k]] for k, ax in enumerate(axes)], axis=1) \
        .reshape(-1, len(shape)).astype(np.float64)
    return CriticalPoints(pos, sw.values[flat], coords)


def _merge_tree(sw: Sweep, kept: np.ndarray, minima: np.ndarray, shape: tuple[int, ...]) -> MergeTree:
    """Leaves, saddles and roots of the simplified tree (a saddle joining three branches is one node)."""
    nodes: list[int] = []
    kinds: list[str] = []
    parent: list[int] = []

    def node(flat: int, kind: str) -> int:
        nodes.append(int(flat))
        kinds.append(kind)
        parent.append(-1)
        return len(nodes) - 1

    top = {int(m): node(int(m), "minimum") for m in minima}
    for s, a, b in kept.tolist():
        ta, tb = top[a], top.pop(b)
        if kinds[ta] == "saddle" and nodes[ta] == s:
            joint = ta
        else:
            joint = node(s, "saddle")
            parent[ta] = joint
        if tb != joint:
            parent[tb] = joint
        top[a] = joint
    for r, high in zip(sw.roots.tolist(), sw.top.tolist()):
        t = top[r]
        if nodes[t] != high:
            parent[t] = node(high, "maximum")
    flat = np.asarray(nodes, dtype=np.int64)
    pos = np.stack(np.unravel_index(flat, shape), axis=1).astype(np.int64).reshape(-1, len(shape))
    return MergeTree(pos, sw.values[flat], np.asarray(kinds, dtype=str), np.asarray(parent, dtype=np.int64))


def _check_index(name: str, value: Any, shape: tuple[int, ...], caller: str) -> tuple[int, ...]:
    """A grid index: one int per axis, each within the grid."""
    where = tuple(value) if isinstance(value, (list, tuple, np.ndarray)) else ()
    if not (len(where) == len(shape) and all(isinstance(i, (int, np.integer)) and not isinstance(i, bool)
                                             and 0 <= i < n for i, n in zip(where, shape))):
        raise InvalidParameterError(f"The '{name}' parameter of {caller} must be a grid index of {len(shape)} ints "
                                    f"within {shape}. Got {value!r} instead. HINT: array order, e.g. "
                                    f"{tuple(n // 2 for n in shape)} for the middle.")
    return tuple(int(i) for i in where)


def _check_axes(axes: Any, shape: tuple[int, ...], caller: str) -> tuple[np.ndarray, ...] | None:
    if axes is None:
        return None
    arrays = [np.asarray(a, dtype=np.float64) for a in axes] if isinstance(axes, (list, tuple)) else None
    if arrays is None or len(arrays) != len(shape) or any(a.shape != (n,) for a, n in zip(arrays, shape)):
        raise InvalidParameterError(
            f"The 'axes' parameter of {caller} must be None or one 1-D array of coordinates per axis of the grid, "
            f"of lengths {list(shape)}. Got {axes!r:.200} instead.")
    return tuple(arrays)


def grid_topology(values: Any, *, connectivity: str = "axis", threshold: float = 0.0,
                  axes: Sequence[Any] | None = None, centre: Sequence[int] | None = None) -> Topology:
    """The sublevel-set topology of a grid of values (a line, a plane or an n-D grid).

    A union-find over the grid's points in the order of their values (ties: the flat index)
    gives the 0-dimensional persistence pairs -- the same as gudhi's ``CubicalComplex``
    (``vertices=`` for axis connectivity, ``top_dimensional_cells=`` for full) -- and from them
    the minima, the saddles, the merge tree, SMAD (Landscaper's), the barriers and basins.
    Non-finite values are left out of the graph and counted (:attr:`Topology.non_finite`).

    Parameters
    ----------
    values : array-like of float, 1 to n dimensions
        The grid; every axis at least 2 points.
    connectivity : {"axis", "full"}, default="axis"
        Neighbours along the axes (``2n``: Landscaper's graph) or all around (``3**n - 1``:
        diagonals too, as gudhi's top-dimensional cells and TTK's images).
    threshold : float, default=0.0
        Pairs with persistence (death - birth) at most this are simplified away: their minimum
        is no minimum and their saddle no saddle. Noise of amplitude ``e`` moves the diagram by
        at most ``e`` (the stability theorem), so ``2e`` keeps only what noise cannot make.
    axes : sequence of array-like, optional
        The coordinates along each array axis (``values.shape[k]`` each), for the positions'
        coordinates.
    centre : sequence of int, optional
        The grid index :meth:`Topology.basin` is about by default (default: the middle).

    Returns
    -------
    Topology

    Examples
    --------
    >>> import numpy as np
    >>> from landscape.topology import grid_topology
    >>> x = np.linspace(-2, 2, 41)
    >>> wells = -np.exp(-((x - 1) ** 2) / 0.3) - 0.5 * np.exp(-((x + 1) ** 2) / 0.3)
    >>> topo = grid_topology(wells)
    >>> len(topo.minima), topo.pairs.round(3).tolist()
    (2, [[-0.5, -0.051]])
    """
    check_param("connectivity", connectivity, [Options(CONNECTIVITIES)], caller=_CALLER,
                hint="'axis' joins the 2n neighbours along the axes (Landscaper), 'full' all 3**n - 1 around "
                     "(gudhi's top-dimensional cells, TTK).")
    check_param("threshold", threshold, [Interval(float, 0, None)], caller=_CALLER,
                hint="a persistence (loss difference) >= 0; 0 keeps every pair.")
    if not math.isfinite(threshold):
        raise InvalidParameterError(f"The 'threshold' parameter of {_CALLER} must be finite. Got {threshold!r} "
                                    "instead. HINT: a persistence (loss difference) >= 0.")
    check_param("values", values, [InstanceOf(np.ndarray, list, tuple, description="an array of numbers")],
                caller=_CALLER)
    try:
        grid = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        raise InvalidParameterError(f"The 'values' parameter of {_CALLER} must be an array of real numbers. Got "
                                    f"{values!r:.100} instead.") from None
    if grid.ndim < 1 or min(grid.shape) < 2:
        raise InvalidParameterError(
            f"The 'values' parameter of {_CALLER} must be a grid of 1 or more dimensions with at least 2 points "
            f"along every axis. Got shape {grid.shape} instead. HINT: a grid of one point (or an axis of one) "
            "has no neighbours; squeeze axes of length 1.")
    shape = tuple(int(s) for s in grid.shape)
    coords = _check_axes(axes, shape, _CALLER)
    middle = tuple(n // 2 for n in shape) if centre is None else _check_index("centre", centre, shape, _CALLER)
    sw = sweep(grid, connectivity)
    f, rank = sw.values, sw.rank
    ev = sw.events
    persistence = f[ev[:, 0]] - f[ev[:, 2]] if len(ev) else np.zeros(0)
    keep = persistence > threshold
    kept = ev[keep]
    # a simplified-away minimum joins the component it merged into, with its basin (transitively)
    owner = np.arange(f.size, dtype=np.int64)
    owner[ev[~keep, 2]] = ev[~keep, 1]  # each minimum dies once
    while True:
        nxt = owner[owner]
        if np.array_equal(nxt, owner):
            break
        owner = nxt
    order = np.lexsort((rank[kept[:, 2]], -(f[kept[:, 0]] - f[kept[:, 2]]))) if len(kept) else np.zeros(0, int)
    kept_sorted = kept[order]
    pairs = np.stack([f[kept_sorted[:, 2]], f[kept_sorted[:, 0]]], axis=1).reshape(-1, 2)
    pair_pos = np.stack([np.stack(np.unravel_index(kept_sorted[:, k], shape), axis=1) for k in (2, 0)], axis=1) \
        .astype(np.int64).reshape(-1, 2, len(shape))
    minima = np.concatenate([sw.roots, kept[:, 2]])
    essential = _critical(sw.roots, sw, shape, coords)
    return Topology(shape=shape, connectivity=connectivity, threshold=float(threshold),
                    non_finite=int((~sw.finite).sum()), pairs=pairs, pair_positions=pair_pos,
                    essential=essential, minima=_critical(minima, sw, shape, coords),
                    saddles=_critical(np.unique(kept[:, 0]), sw, shape, coords),
                    merge_tree=_merge_tree(sw, kept, minima[np.argsort(rank[minima], kind="stable")], shape),
                    axes=coords, centre=middle, _sweep=sw, _kept=kept, _owner=owner)


def barriers(values: Any, *, threshold: float = 0.0) -> list[Barrier]:
    """The barriers along a line of values (a path, an interpolation): its 1-D merge tree.

    Each barrier is a local maximum between two basins, with the deepest point of the shallower
    side and its height above it; ordered along the line.

    Parameters
    ----------
    values : array-like of float, shape (n,)
        The values along the line (n >= 2); non-finite ones are left out (the line is cut there).
    threshold : float, default=0.0
        Barriers of height at most this are left out (noise).

    Returns
    -------
    list of Barrier

    Examples
    --------
    >>> from landscape.topology import barriers
    >>> [(b.saddle[0], round(b.height, 3)) for b in barriers([0.0, 1.0, 0.2, 0.5, 0.1])]
    [(1, 0.9), (3, 0.3)]
    """
    check_param("threshold", threshold, [Interval(float, 0, None)], caller="barriers",
                hint="a barrier's height (a loss difference) >= 0; 0 keeps every barrier.")
    arr = np.asarray(values, dtype=np.float64) if isinstance(values, (np.ndarray, list, tuple)) else values
    if not isinstance(arr, np.ndarray) or arr.ndim != 1:
        raise InvalidParameterError(f"The 'values' parameter of barriers must be a 1-D array of numbers (a line). "
                                    f"Got {values!r:.100} instead. HINT: grid_topology(values) takes any grid.")
    return grid_topology(arr, threshold=threshold).barriers()
