"""grid_topology against independent references: Landscaper's numbers, gudhi's cubical persistence,
analytic surfaces, the stability theorem and scipy's labelling of sublevel sets."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import ndimage

from collector.common import InvalidParameterError
from landscape.topology import barriers, grid_topology

gudhi = pytest.importorskip("gudhi")


def rosenbrock(n: int = 10) -> np.ndarray:
    """Landscaper's test grid: a = 1, b = 100, n x n on [-1, 1]^2 (its tests/test_landscape.py)."""
    x = np.linspace(-1, 1, n)
    gx, gy = np.meshgrid(x, x, indexing="ij")
    return (1 - gx) ** 2 + 100 * (gy - gx ** 2) ** 2


def two_wells(n: int = 41) -> np.ndarray:
    x = np.linspace(-2, 2, n)
    gx, gy = np.meshgrid(x, x, indexing="xy")
    return -(np.exp(-((gx - 1) ** 2 + gy ** 2) / 0.3) + 0.5 * np.exp(-((gx + 1) ** 2 + gy ** 2) / 0.3)) \
        + 0.05 * (gx ** 2 + gy ** 2)


def gudhi_pairs(values: np.ndarray, connectivity: str) -> tuple[np.ndarray, int]:
    """Finite H0 pairs (sorted) and the number of essential H0 classes, by gudhi."""
    kw = {"vertices": values} if connectivity == "axis" else {"top_dimensional_cells": values}
    diagram = [p for dim, p in gudhi.CubicalComplex(**kw).persistence() if dim == 0]
    finite = np.asarray([p for p in diagram if np.isfinite(p[1])], dtype=np.float64).reshape(-1, 2)
    return finite[np.lexsort((finite[:, 1], finite[:, 0]))], len(diagram) - len(finite)


def ours_sorted(pairs: np.ndarray) -> np.ndarray:
    return pairs[np.lexsort((pairs[:, 1], pairs[:, 0]))]


def test_landscaper_rosenbrock():
    """Landscaper 1.3.1's SMAD of its Rosenbrock fixture (topopy merge tree over nglpy's graph)."""
    topo = grid_topology(rosenbrock(), connectivity="axis")
    assert len(topo.minima) == 8
    assert topo.smad() == pytest.approx(3.68915, rel=1e-6)
    assert topo.smad(normalize=True) == pytest.approx(0.00913155, rel=1e-6)
    assert topo.smad(normalize=True, weighted=True) == pytest.approx(0.000778988, rel=1e-6)
    assert len(topo.merge_tree) == 16  # 8 minima, 7 saddles, the maximum
    assert len(grid_topology(rosenbrock(), connectivity="full").minima) == 4


@pytest.mark.parametrize("connectivity", ["axis", "full"])
@pytest.mark.parametrize("shape", [(41, 41), (11, 11, 11)])
def test_pairs_equal_gudhi_on_random_grids(shape, connectivity):
    values = np.random.default_rng(0).random(shape)
    topo = grid_topology(values, connectivity=connectivity)
    want, essential = gudhi_pairs(values, connectivity)
    np.testing.assert_array_equal(ours_sorted(topo.pairs), want)
    assert len(topo.essential) == essential == 1
    assert len(topo.minima) == len(want) + 1


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 3).flatmap(lambda nd: st.tuples(st.just(nd), st.lists(st.integers(2, 6), min_size=nd,
                                                                            max_size=nd))),
       st.integers(0, 2**32 - 1), st.sampled_from(["axis", "full"]), st.integers(2, 50))
def test_pairs_equal_gudhi_with_ties(dims_shape, seed, connectivity, levels):
    """Small grids of a few distinct values (many ties): the diagram does not depend on how ties break."""
    _, shape = dims_shape
    values = np.random.default_rng(seed).integers(0, levels, size=shape).astype(np.float64)
    topo = grid_topology(values, connectivity=connectivity)
    want, essential = gudhi_pairs(values, connectivity)
    np.testing.assert_array_equal(ours_sorted(topo.pairs), want)
    assert len(topo.essential) == essential


def test_two_wells_and_a_convex_bowl():
    for connectivity in ("axis", "full"):
        topo = grid_topology(two_wells(), connectivity=connectivity)
        assert len(topo.minima) == 2 and len(topo.pairs) == 1 and len(topo.saddles) == 1
        assert topo.smad() == pytest.approx(0.649183, rel=1e-6)
        assert topo.smad(normalize=True) == pytest.approx(0.480876, rel=1e-5)
        assert topo.smad(normalize=True, weighted=True) == pytest.approx(0.242696, rel=1e-5)
    fine = grid_topology(two_wells(81))
    np.testing.assert_allclose(fine.pairs, [[-0.450729, -0.049911]], atol=1e-6)
    x = np.linspace(-1, 1, 21)
    bowl = grid_topology(x[:, None] ** 2 + 3 * x[None, :] ** 2)
    assert len(bowl.minima) == 1 and len(bowl.saddles) == 0 and bowl.pairs.shape == (0, 2)
    assert bowl.smad() == bowl.smad(normalize=True, weighted=True) == 0.0
    assert bowl.minima.positions.tolist() == [[10, 10]]


@pytest.mark.parametrize("eps", [0.001, 0.01, 0.05])
def test_stability_under_noise(eps):
    clean = two_wells()
    noisy = clean + np.random.default_rng(1).uniform(-eps, eps, clean.shape)
    a, b = grid_topology(clean), grid_topology(noisy)
    assert gudhi.bottleneck_distance(a.pairs, b.pairs) <= eps
    persistence = b.pairs[:, 1] - b.pairs[:, 0]
    assert int(np.sum(persistence > 2 * eps)) == 1
    above = grid_topology(noisy, threshold=2 * eps)
    assert len(above.pairs) == 1 and len(above.minima) == 2 and len(above.saddles) == 1
    assert above.merge_tree.kinds.tolist().count("minimum") == 2


def test_invariance_shift_scale_and_monotone_maps():
    for values in (two_wells(), rosenbrock(), np.random.default_rng(2).random((15, 17))):
        base = grid_topology(values)
        shifted = grid_topology(values + 3.0)
        np.testing.assert_allclose(shifted.pairs, base.pairs + 3.0, rtol=0, atol=1e-12)
        assert shifted.minima.positions.tolist() == base.minima.positions.tolist()
        assert shifted.smad() == pytest.approx(base.smad(), rel=1e-9, abs=1e-12)
        doubled = grid_topology(values * 2.0)  # exact in floating point
        np.testing.assert_array_equal(doubled.pairs, base.pairs * 2.0)
        assert doubled.smad() == pytest.approx(2 * base.smad(), rel=1e-12)
        assert grid_topology(values * 3.7).smad(normalize=True) == pytest.approx(base.smad(normalize=True), rel=1e-9)
        logged = grid_topology(np.log(values - values.min() + 1.0))  # increasing: same order, same tree
        assert logged.minima.positions.tolist() == base.minima.positions.tolist()
        assert logged.merge_tree.positions.tolist() == base.merge_tree.positions.tolist()
        assert logged.merge_tree.parent.tolist() == base.merge_tree.parent.tolist()


def test_same_grid_same_result_and_ties_by_flat_index():
    values = np.zeros((4, 5))
    values[1, 1] = values[2, 3] = -1.0  # two equal minima: the one first in C order is the older
    topo = grid_topology(values)
    assert topo.essential.positions.tolist() == [[1, 1]]
    assert topo.minima.positions.tolist() == [[1, 1], [2, 3]]
    # the younger dies where the plateau, filled in C order, first touches both: (1, 3)
    assert topo.pair_positions.tolist() == [[[2, 3], [1, 3]]]
    again = grid_topology(values.copy())
    assert np.array_equal(again.pairs, topo.pairs) and again.merge_tree.parent.tolist() == \
        topo.merge_tree.parent.tolist()
    flat = grid_topology(np.ones((3, 3)))
    assert flat.minima.positions.tolist() == [[0, 0]] and len(flat.pairs) == 0


def test_non_finite_points_left_out_and_counted():
    values = np.random.default_rng(3).random((9, 8))
    walled = values.copy()
    walled[4, :] = np.nan
    walled[0, 0] = np.inf
    topo = grid_topology(walled)
    assert topo.non_finite == 9 and topo.points == 63
    assert len(topo.essential) == 2  # the wall cuts the grid in two
    with_inf = values.copy()
    with_inf[4, :] = np.inf
    with_inf[0, 0] = np.inf
    want, essential = gudhi_pairs(with_inf, "axis")  # gudhi: cells at +inf never enter
    np.testing.assert_array_equal(ours_sorted(topo.pairs), want)
    assert essential == 2
    assert "9 of 72 points non-finite" in topo.summary() and "2 separate components" in topo.summary()
    empty = grid_topology(np.full((3, 3), np.nan))
    assert len(empty.minima) == 0 and empty.smad() == 0.0 and empty.non_finite == 9


def test_merge_tree_shape():
    topo = grid_topology(rosenbrock())
    tree = topo.merge_tree
    kinds = tree.kinds.tolist()
    assert kinds.count("minimum") == len(topo.minima) and kinds.count("saddle") == len(topo.saddles)
    assert kinds.count("maximum") == 1
    root = int(np.flatnonzero(tree.parent < 0)[0])
    assert tree.values[root] == rosenbrock().max()
    for child, parent in tree.edges:
        assert tree.values[parent] >= tree.values[child]
    # the leaves are exactly the minima
    leaves = set(range(len(tree))) - set(tree.parent.tolist())
    assert sorted(map(tuple, tree.positions[sorted(leaves)].tolist())) == \
        sorted(map(tuple, topo.minima.positions.tolist()))


def _leaves_below(tree) -> list[set[tuple[int, ...]]]:
    """For each node of a merge tree, the positions of the leaves (minima) of its subtree."""
    below: list[set[tuple[int, ...]]] = [set() for _ in range(len(tree))]
    for node in np.argsort(tree.values, kind="stable"):  # children before parents (edges go upwards)
        if tree.kinds[node] == "minimum":
            below[node].add(tuple(tree.positions[node].tolist()))
        if tree.parent[node] >= 0:
            below[tree.parent[node]] |= below[node]
    return below


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 3).flatmap(lambda nd: st.lists(st.integers(2, 6), min_size=nd, max_size=nd)),
       st.integers(0, 2**32 - 1), st.sampled_from(["axis", "full"]), st.sampled_from([None, 3, 20]),
       st.sampled_from([0.0, 0.1, 2.0]))
def test_merge_tree_against_scipy_labelling(shape, seed, connectivity, levels, threshold):
    """Every node's subtree holds exactly the minima (above the threshold) of the component of the
    sublevel set at its value that holds it, by scipy's labelling (ties: the flat index comes first)."""
    rng = np.random.default_rng(seed)
    values = rng.random(shape) if levels is None else rng.integers(0, levels, size=shape).astype(np.float64)
    values = values * (10.0 if levels is None else 1.0)
    topo = grid_topology(values, connectivity=connectivity, threshold=threshold)
    tree = topo.merge_tree
    flat = values.reshape(-1)
    rank = np.empty(flat.size, dtype=np.int64)
    rank[np.lexsort((np.arange(flat.size), flat))] = np.arange(flat.size)
    rank = rank.reshape(values.shape)
    structure = ndimage.generate_binary_structure(values.ndim, 1 if connectivity == "axis" else values.ndim)
    minima = {tuple(p) for p in topo.minima.positions.tolist()}
    below = _leaves_below(tree)
    children = np.bincount(tree.parent[tree.parent >= 0], minlength=len(tree))
    for node in range(len(tree)):
        at = tuple(tree.positions[node].tolist())
        labels, _ = ndimage.label(rank <= rank[at], structure=structure)
        assert below[node] == {m for m in minima if labels[m] == labels[at]}, (node, tree.kinds[node])
        assert children[node] >= {"minimum": 0, "saddle": 2, "maximum": 1}[tree.kinds[node]]
    assert int(np.sum(tree.parent < 0)) == len(topo.essential) == 1


@pytest.mark.parametrize("connectivity", ["axis", "full"])
def test_basin_equals_scipy_labelling(connectivity):
    values = two_wells()
    topo = grid_topology(values, connectivity=connectivity)
    structure = ndimage.generate_binary_structure(2, 1 if connectivity == "axis" else 2)
    for height in (0.01, 0.2, 0.5, 2.0):
        for at in ((20, 30), (20, 10), (0, 0)):
            basin = topo.basin(height, at=at)
            labels, _ = ndimage.label(values <= basin.level, structure=structure)
            want = labels == labels[basin.minimum]
            assert basin.points == int(want.sum())
            rows, cols = np.nonzero(want)
            assert basin.extent.tolist() == [[rows.min(), rows.max()], [cols.min(), cols.max()]]
            assert basin.contains == bool(want[at])
    deep = topo.basin(0.1, at=(20, 30))
    assert deep.minimum == (20, 30) and deep.value == values.min() and not deep.at_edge


def test_barriers_along_a_line():
    line = np.array([0.0, 1.0, 0.2, 0.5, 0.1, 0.9, 0.3])
    got = barriers(line)
    # each saddle with the deepest minimum of the side that dies there (the shallower) and of the other side
    assert [(b.saddle, b.minimum, b.other) for b in got] == [((1,), (4,), (0,)), ((3,), (2,), (4,)),
                                                            ((5,), (6,), (4,))]
    np.testing.assert_allclose([b.height for b in got], [0.9, 0.3, 0.6])
    want, _ = gudhi_pairs(line, "axis")
    np.testing.assert_allclose(sorted(b.height for b in got), sorted(want[:, 1] - want[:, 0]))
    assert [b.saddle for b in barriers(line, threshold=0.5)] == [(1,), (5,)]


@pytest.mark.parametrize("kwargs, name", [
    ({"connectivity": "diagonal"}, "connectivity"),
    ({"threshold": -0.1}, "threshold"),
    ({"threshold": float("nan")}, "threshold"),
    ({"threshold": float("inf")}, "threshold"),
    ({"threshold": "0.1"}, "threshold"),
    ({"axes": [np.arange(3)]}, "axes"),
    ({"centre": (9, 9)}, "centre"),
    ({"centre": (1.5, 2)}, "centre"),
    ({"centre": "ab"}, "centre"),
    ({"centre": 1}, "centre"),
])
def test_bad_parameters_refused(kwargs, name):
    with pytest.raises(InvalidParameterError, match=f"'{name}'"):
        grid_topology(np.zeros((4, 4)), **kwargs)


@pytest.mark.parametrize("values", [np.array([1.0]), np.zeros((1, 1)), np.zeros((5, 1)), np.float64(2.0), [["a"]],
                                    "grid"])
def test_grids_that_are_no_grids_refused(values):
    with pytest.raises(InvalidParameterError, match="'values'"):
        grid_topology(values)


def test_basin_and_barrier_inputs_refused():
    topo = grid_topology(np.array([[0.0, np.nan], [1.0, 2.0]]))
    with pytest.raises(InvalidParameterError, match="'height'"):
        topo.basin(-1.0)
    with pytest.raises(InvalidParameterError, match="'at'"):
        topo.basin(1.0, at=(0, 1))  # non-finite there
    with pytest.raises(InvalidParameterError, match="'at'"):
        topo.basin(1.0, at=(2, 0))
    with pytest.raises(InvalidParameterError, match="'values'"):
        barriers(np.zeros((3, 3)))
    with pytest.raises(InvalidParameterError, match="'threshold' parameter of barriers"):
        barriers([1.0, 0.0, 1.0], threshold=-1.0)


def test_landscape_topology_of_a_plane_and_a_line():
    from landscape import Landscape

    x = np.linspace(-2, 2, 41)
    plane = Landscape(x=x, y=x, z=two_wells(), metadata={"centre": [0.0, 0.0, 0.0]})
    topo = plane.topology()
    assert topo.centre == (20, 20) and len(topo.minima) == 2
    assert topo.smad() == pytest.approx(0.649183, rel=1e-6)
    # array order (y, x): the deeper well at x = 1, y = 0
    assert topo.minima.coordinates[0].tolist() == pytest.approx([0.0, 1.0])
    assert grid_topology(plane.z, threshold=0.5).summary() == plane.topology(threshold=0.5).summary()
    alpha = np.linspace(-0.5, 1.5, 21)
    line = Landscape(x=alpha, y=np.zeros(0), z=np.array(np.sin(3 * np.pi * alpha) + alpha))
    found = line.topology().barriers()
    want = grid_topology(line.z).barriers()
    assert [b.saddle for b in found] == [b.saddle for b in want] and found
    assert [b.saddle_at for b in found] == [(float(alpha[b.saddle[0]]),) for b in want]
    assert "barriers " in line.topology().summary() and "at x=" in line.topology().summary()
