"""NaN and infinite values are never a silent gap: every plot marks them where they were
planted, and counts them in its title and legend."""

from __future__ import annotations

import numpy as np
import pytest
from matplotlib.animation import PillowWriter

import viz
from landscape import Landscape, LossPath
from landscape.curvature import EIGEN_RATIO

X = np.linspace(-1.0, 1.0, 7)
Y = np.linspace(-0.5, 1.0, 6)                    # not square: catches x/y mix-ups
NAN_AT = [(0, 0), (3, 5)]                        # (i, j): z[i, j] is at (X[j], Y[i])
POSINF_AT = [(5, 2)]
NEGINF_AT = [(2, 6)]
N = X.size * Y.size


def planted(**changes) -> Landscape:
    z = 0.5 + X[None, :] ** 2 + Y[:, None] ** 2
    for cells, value in ((NAN_AT, np.nan), (POSINF_AT, np.inf), (NEGINF_AT, -np.inf)):
        for i, j in cells:
            z[i, j] = value
    kw = dict(x=X, y=Y, z=z, convergence_point=(0.0, 0.0, 0.5), metadata={"decomposition": "Random"},
              tag="landscape_[10]")
    kw.update(changes)
    return Landscape(**kw)


def at(cells):
    return {(float(X[j]), float(Y[i])) for i, j in cells}


def marks(ax, gid="nonfinite"):
    """{label: set of (x, y)} of the non-finite marks on ``ax`` (2-D)."""
    out = {}
    for line in ax.lines:
        if line.get_gid() == gid:
            out[line.get_label()] = {(float(a), float(b)) for a, b in zip(line.get_xdata(), line.get_ydata())}
    return out


def legend_texts(ax):
    return [t.get_text() for t in ax.get_legend().get_texts()]


def check_plane_marks(ax, what="loss"):
    found = marks(ax)
    assert found == {f"{what} NaN (2 of {N} points)": at(NAN_AT), f"{what} +inf (1 of {N} points)": at(POSINF_AT),
                     f"{what} \u2212inf (1 of {N} points)": at(NEGINF_AT)}
    assert f"4 of {N} points non-finite" in ax.get_title()
    assert set(found) <= set(legend_texts(ax))


@pytest.mark.parametrize("kind", ["contour", "filled", "heatmap"])
def test_plane_kinds_mark_every_nonfinite_point(kind):
    ax = viz.plot(planted(), kind, path=False)          # no path: the legend is there for the marks alone
    check_plane_marks(ax)


def test_surface_marks_at_the_top_and_bottom_of_the_box():
    ax = viz.plot_surface(planted(), log=False)
    bottom, top = ax.get_zlim()
    found = {}
    for line in ax.lines:
        if line.get_gid() == "nonfinite":
            xs, ys, zs = line.get_data_3d()
            found[line.get_label()] = {(float(a), float(b), float(c)) for a, b, c in zip(xs, ys, zs)}
    assert found == {
        f"loss NaN (2 of {N} points)": {(x, y, top) for x, y in at(NAN_AT)},
        f"loss +inf (1 of {N} points)": {(x, y, top) for x, y in at(POSINF_AT)},
        f"loss \u2212inf (1 of {N} points)": {(x, y, bottom) for x, y in at(NEGINF_AT)}}
    assert f"4 of {N} points non-finite" in ax.get_title()
    surf = next(c for c in ax.collections if c.get_gid() == "landscape")
    # a quad with a non-finite corner is left out: count them independently
    z = planted().z
    corners = np.stack([z[:-1, :-1], z[:-1, 1:], z[1:, :-1], z[1:, 1:]])
    assert len(surf.get_paths()) == int(np.isfinite(corners).all(axis=0).sum())


def test_the_all_figure_overview_and_compare_mark_each_panel():
    fig = viz.plot(planted(), "all")
    panels = [a for a in fig.subfigs[0].axes if a.get_title()]     # the top row: contour, filled, heatmap
    assert [a.get_title().splitlines()[0] for a in panels] == ["contour lines", "filled contour", "heatmap"]
    for ax in panels:
        check_plane_marks(ax)
    fig = viz.plot_overview([planted(), planted(tag="landscape_[11]")], kind="heatmap")
    for ax in [a for a in fig.axes if a.get_title()]:
        check_plane_marks(ax)
    fig = viz.compare({"a": planted(), "b": planted()}, kind="filled")
    for ax in [a for a in fig.axes if a.get_title().startswith(("a", "b"))]:
        check_plane_marks(ax)


def test_slices_mark_the_points_of_the_slice():
    ls = planted(metadata={"decomposition": "Random", "centre": [float(X[5]), float(Y[3]), 0.5]})
    fig = viz.plot_slices(ls)
    ax_x, ax_y = fig.axes
    # the slice along x runs through row 3 (y = Y[3]): NaN at j = 5; along y through column 5: NaN at i = 3
    (nx,) = [ln for ln in ax_x.lines if ln.get_gid() == "nonfinite"]
    assert list(nx.get_xdata()) == [X[5]] and nx.get_label() == f"loss NaN (1 of {X.size} points)"
    (ny,) = [ln for ln in ax_y.lines if ln.get_gid() == "nonfinite"]
    assert list(ny.get_xdata()) == [Y[3]]


def test_line_marks_above_the_points_and_counts_in_the_title():
    x = np.linspace(-0.5, 1.5, 21)
    z = (x - 1) ** 2 + 1.0
    z[:3] = np.nan                      # the case: alpha <= -0.4 diverged
    z[10] = np.inf
    acc = 1 - z / 10
    ls = Landscape(x=x, y=np.zeros(0), z=z, metadata={"decomposition": "Interpolation"},
                   surfaces={"accuracy": acc}, markers={"A": (0.0, 0.0, 2.0), "B": (1.0, 0.0, 1.0)})
    ax = viz.plot(ls)
    found = marks(ax)
    assert found == {"loss NaN (3 of 21 points)": {(x[k], 0.97) for k in range(3)},
                     "loss +inf (1 of 21 points)": {(x[10], 0.97)}}
    (nan_line,) = [ln for ln in ax.lines if ln.get_label().startswith("loss NaN")]
    assert nan_line.get_transform() == ax.get_xaxis_transform()    # y in axes units: at the top, above x
    assert ax.get_title().endswith("4 of 21 points non-finite")
    assert set(found) <= set(legend_texts(ax))
    # the accuracy of the same points is NaN and -inf: marked on its own axis, -inf at the bottom
    assert marks(ax.right_ax) == {"accuracy NaN (3 of 21 points)": {(x[k], 0.97) for k in range(3)},
                                  "accuracy \u2212inf (1 of 21 points)": {(x[10], 0.03)}}


def test_path_points_and_eigen_ratio_and_log_scale():
    path = LossPath(np.array([-0.5, 0.0]), np.array([0.5, 0.0]), np.array([np.nan, 0.5]), [1, 2])
    ls = planted(path=path, metadata={"decomposition": "PCA"},
                 surfaces={EIGEN_RATIO: np.where(np.isfinite(planted().z), 0.1, np.nan)})
    ax = viz.plot_contour(ls)
    assert marks(ax, "nonfinite-path") == {"path loss NaN (1 of 2 points)": {(-0.5, 0.5)}}
    ax3 = viz.plot_surface(ls, log=False)
    (p3,) = [ln for ln in ax3.lines if ln.get_gid() == "nonfinite-path"]
    assert [float(v[0]) for v in p3.get_data_3d()] == [-0.5, 0.5, ax3.get_zlim()[1]]
    ax = viz.plot(ls, "eigen-ratio")
    assert marks(ax) == {f"|λmin/λmax| NaN (4 of {N} points)": at(NAN_AT + POSINF_AT + NEGINF_AT)}
    low = Landscape(x=X, y=Y, z=np.where(X[None, :] < 0, 0.0, 1.0 + 0 * Y[:, None]),
                    metadata={"decomposition": "Random"})
    ax = viz.plot_heatmap(low, log=True)              # zeros cannot be on a log scale: marked, not hidden
    (off,) = marks(ax).values()
    assert off == {(float(x), float(y)) for x in X[X < 0] for y in Y}


def test_animation_frames_carry_the_marks(tmp_path, monkeypatch):
    seen = []
    grab = PillowWriter.grab_frame

    def spy(self, **kw):
        seen.append([marks(ax) for ax in self.fig.axes if ax.get_title()])
        return grab(self, **kw)

    monkeypatch.setattr(PillowWriter, "grab_frame", spy)
    path = LossPath(np.array([-0.5, 0.0]), np.array([0.5, 0.0]), np.array([1.0, 0.5]), [1, 2])
    frames = [planted(path=path, metadata={"decomposition": "PCA"}, tag=f"landscape_[{k}, {k + 1}]")
              for k in (1, 3)]
    viz.animate(frames, tmp_path / "a.gif")
    assert len(seen) == 2
    for (frame,) in seen:
        assert frame[f"loss NaN (2 of {N} points)"] == at(NAN_AT)
