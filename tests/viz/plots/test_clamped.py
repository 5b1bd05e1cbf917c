"""Points whose batch-norm variances were clamped at zero are marked on every picture and counted in
its title; a metric that is NaN where the loss is stays a gap on lines."""

from __future__ import annotations

import numpy as np
import pytest

import viz
from tests.viz.html._pages import clamped_line, clamped_plane


def clamped_marks(ax) -> list:
    return [ln for ln in ax.lines if ln.get_gid() == "clamped"]


def expected_points(ls) -> set[tuple[float, float]]:
    return {(float(ls.x[j]), float(ls.y[i])) for i, j in np.argwhere(ls.clamped > 0)}


def count_line(ls) -> str:
    return f"{int(np.count_nonzero(ls.clamped))} of {ls.clamped.size} points with batch-norm variances clamped at zero"


@pytest.mark.parametrize("kind", ["contour", "filled", "heatmap"])
@pytest.mark.parametrize("surface", ["loss", "accuracy"])
def test_plane_kinds_mark_each_clamped_point_and_count_them(kind, surface):
    ls = clamped_plane()
    ax = viz.plot(ls, kind, surface=surface)
    (marks,) = clamped_marks(ax)
    assert set(zip(marks.get_xdata().tolist(), marks.get_ydata().tolist())) == expected_points(ls)
    n = len(expected_points(ls))
    assert marks.get_label() == f"batch-norm variances clamped at zero ({n} of 42 points, up to 3 channels)"
    assert count_line(ls) in ax.get_title().splitlines()
    assert marks.get_label() in [t.get_text() for t in ax.get_legend().get_texts()]


def test_surface_marks_them_at_their_height_and_a_nan_one_at_the_top():
    ls = clamped_plane()
    ax = viz.plot_surface(ls, log=False)
    (marks,) = clamped_marks(ax)
    xs, ys, zs = (np.asarray(v, dtype=float) for v in marks.get_data_3d())
    top = ax.get_zlim()[1]
    expected = {(float(ls.x[j]), float(ls.y[i]), float(ls.z[i, j]) if np.isfinite(ls.z[i, j]) else top)
                for i, j in np.argwhere(ls.clamped > 0)}
    assert set(zip(xs.tolist(), ys.tolist(), zs.tolist())) == expected
    assert count_line(ls) in ax.get_title()


def test_all_overview_slices_and_eigen_ratio_carry_them():
    ls = clamped_plane()
    fig = viz.plot(ls, "all")
    panels = [a for a in fig.subfigs[0].axes if a.get_title()]
    assert len(panels) == 3 and all(clamped_marks(a) for a in panels)
    ax3d = next(a for a in fig.axes if getattr(a, "name", "") == "3d")
    assert clamped_marks(ax3d)
    fig = viz.plot_overview([ls, ls])
    assert sum(bool(clamped_marks(a)) for a in fig.axes) == 2
    # the slice along x runs at model A's y = 0, between rows 1 and 2 (y -0.2 and 0.1): a point is
    # clamped when either row's is; the slice along y at x = 0 crosses no clamped column
    along_x, along_y = viz.plot_slices(ls).axes
    (rug,) = clamped_marks(along_x)
    assert rug.get_xdata().tolist() == [ls.x[5], ls.x[6]] and "2 of 7 points, up to 3 channels" in rug.get_label()
    assert not clamped_marks(along_y)
    ls.surfaces["eigen_ratio"] = np.full(ls.z.shape, 0.1)
    ax = viz.plot(ls, "eigen-ratio")
    assert set(zip(clamped_marks(ax)[0].get_xdata().tolist(), clamped_marks(ax)[0].get_ydata().tolist())) == \
        expected_points(ls)


def test_line_marks_clamped_points_and_draws_nan_metric_as_a_gap():
    ls = clamped_line()
    ax = viz.plot(ls)
    (rug,) = clamped_marks(ax)
    assert rug.get_xdata().tolist() == ls.x[ls.clamped > 0].tolist()
    assert rug.get_label() == "batch-norm variances clamped at zero (2 of 9 points, up to 4 channels)"
    assert ax.get_title().endswith("1 of 9 points non-finite\n2 of 9 points with batch-norm variances clamped at zero")
    (loss,) = [ln for ln in ax.lines if ln.get_gid() == "line"]
    (metric,) = [ln for ln in ax.right_ax.lines if ln.get_gid() == "metric"]
    for curve, values in ((loss, ls.z), (metric, ls.surfaces["accuracy"])):
        y = np.asarray(curve.get_ydata(), dtype=float)
        assert np.isnan(y[8]) and np.array_equal(y[:8], values[:8])  # NaN: a gap matplotlib does not bridge


def test_a_count_array_of_the_wrong_shape_is_refused():
    ls = clamped_plane()
    ls.clamped = ls.clamped[:, :3]
    with pytest.raises(ValueError, match=r"'clamped' counts have shape \(6, 3\); they must be shaped like z"):
        viz.plot(ls)
