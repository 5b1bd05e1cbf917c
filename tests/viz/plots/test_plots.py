"""Every plot on a KNOWN surface: z = x**2 + 2*y**2, a path of known points."""

from __future__ import annotations

import io

import numpy as np
import pytest
from matplotlib.colors import LogNorm
from matplotlib.contour import ContourSet
from matplotlib.figure import Figure

import viz
from collector import InvalidParameterError
from landscape import Landscape, LossPath

X = np.linspace(-1.0, 1.0, 21)
Y = np.linspace(-1.5, 1.0, 26)          # not square: catches x/y mix-ups
PATH_X = np.array([-1.2, -0.5, 0.0])     # the first point lies outside the grid
PATH_Y = np.array([0.8, 0.3, 0.0])


def bowl(**changes) -> Landscape:
    z = X[None, :] ** 2 + 2 * Y[:, None] ** 2
    kw = dict(x=X.copy(), y=Y.copy(), z=z,
              path=LossPath(PATH_X, PATH_Y, PATH_X ** 2 + 2 * PATH_Y ** 2, [1, 5, 10]),
              convergence_point=(0.0, 0.0, 0.0),
              metadata={"decomposition": "PCA", "unit": "epoch", "step_per_epoch": 28},
              tag="landscape_[1, 10]")
    kw.update(changes)
    return Landscape(**kw)


def random_bowl(**changes) -> Landscape:
    s = np.linspace(-1, 1, 11)
    z = 0.5 + s[None, :] ** 2 + s[:, None] ** 2
    kw = dict(x=s, y=s.copy(), z=z, path=None, convergence_point=(s[5], s[5], z[5, 5]),
              metadata={"decomposition": "Random", "unit": "epoch"}, tag="landscape_[10]")
    kw.update(changes)
    return Landscape(**kw)


def landscape_artist(ax):
    found = [c for c in ax.collections if c.get_gid() == "landscape"]
    assert len(found) == 1
    return found[0]


def gid_lines(ax, gid):
    return [line for line in ax.lines if line.get_gid() == gid]


def check_path_and_convergence(ax, grid=True):
    (path,) = gid_lines(ax, "path")
    np.testing.assert_allclose(path.get_xdata(), PATH_X)
    np.testing.assert_allclose(path.get_ydata(), PATH_Y)
    (conv,) = gid_lines(ax, "convergence")
    assert list(conv.get_xdata()) == [0.0] and list(conv.get_ydata()) == [0.0]
    x0, x1 = ax.get_xlim()
    y0, y1 = ax.get_ylim()
    assert x0 < PATH_X.min() < x1 and y0 < PATH_Y.max() < y1     # the path stays in view
    if grid:
        assert x0 <= X.min() and x1 >= X.max()
    labels = {t.get_text() for t in ax.texts}
    assert {"1", "5", "10"} <= labels
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "training path (epochs 1\u201310)" in legend
    assert "trained weights (loss 0)" in legend  # a PCA plane's centre: the path's last checkpoint


@pytest.mark.parametrize("func,filled", [(viz.plot_contour, False), (viz.plot_filled_contour, True)])
def test_contour_known_surface(func, filled):
    ax = func(bowl(), levels=12)
    cs = landscape_artist(ax)
    assert isinstance(cs, ContourSet) and cs.filled is filled
    assert len(cs.levels) == 12
    np.testing.assert_allclose(cs.levels[[0, -1]], [0.0, 1.0 + 2 * 1.5 ** 2])
    assert ax.get_xlabel() == "direction 1 (PC1)" and ax.get_ylabel() == "direction 2 (PC2)"
    assert ax.get_title().startswith("landscape_[1, 10]") and "PCA" in ax.get_title()
    assert cs.colorbar is not None and cs.colorbar.ax.get_ylabel() == "loss"
    check_path_and_convergence(ax)


def test_contour_explicit_levels_and_no_path():
    ax = viz.plot_contour(bowl(), levels=[0.5, 1.0, 2.0], path=False, colorbar=False)
    assert list(landscape_artist(ax).levels) == [0.5, 1.0, 2.0]
    assert not gid_lines(ax, "path") and not gid_lines(ax, "convergence")


def test_heatmap_orientation_and_labels():
    ls = bowl()
    ax = viz.plot_heatmap(ls)
    mesh = landscape_artist(ax)
    np.testing.assert_allclose(np.asarray(mesh.get_array()).reshape(Y.size, X.size), ls.z)
    assert mesh.colorbar.ax.get_ylabel() == "loss"
    check_path_and_convergence(ax)


def test_surface_known_surface():
    ax = viz.plot_surface(bowl())
    assert ax.name == "3d"
    assert ax.get_xlabel() == "direction 1 (PC1)" and ax.get_zlabel() == "loss"
    np.testing.assert_allclose(ax.get_zlim(), (0.0, 1.0 + 2 * 1.5 ** 2))
    (path,) = gid_lines(ax, "path")
    xs, ys, zs = path.get_data_3d()
    np.testing.assert_allclose(xs, PATH_X)
    np.testing.assert_allclose(zs, PATH_X ** 2 + 2 * PATH_Y ** 2)
    (conv,) = gid_lines(ax, "convergence")
    np.testing.assert_allclose([a[0] for a in conv.get_data_3d()], [0, 0, 0])


def test_view_angle_avoids_a_wall_in_front_of_the_minimum():
    g = np.arange(15) - 7.0
    z = 0.1 + 0.01 * (g[None, :] ** 2 + g[:, None] ** 2)   # minimum at the centre cell (7, 7)
    z[:4, :] = 10.0          # a wall on the low-y side, where matplotlib's default camera stands
    z[:, 11:] = 10.0         # and on the high-x side
    elev, azim = viz.view_angle(z)
    assert (elev, azim) != (30.0, -60.0)
    e, a = np.radians(elev), np.radians(azim)
    assert np.sin(a) > 0 or np.sin(e) > 0.8            # looks from the +y side, or from above
    assert viz.view_angle(np.add.outer(np.zeros(9), np.linspace(0, 1, 9))) == (30.0, -60.0)  # a slope


def test_random_landscape_labels_and_no_path():
    ls = random_bowl()
    ax = viz.plot(ls, "contour")
    assert ax.get_xlabel() == "random direction 1" and ax.get_ylabel() == "random direction 2"
    assert not gid_lines(ax, "path")
    (conv,) = gid_lines(ax, "convergence")
    assert conv.get_xdata()[0] == pytest.approx(ls.x[5])


@pytest.mark.parametrize("kind", ["contour", "filled", "heatmap"])
def test_diverging_point_does_not_blow_the_colour_scale(kind):
    ls = bowl()
    ls.z[3, 4] = 1e6
    ax = viz.plot(ls, kind)
    art = landscape_artist(ax)
    assert art.norm.vmax < 10 and not isinstance(art.norm, LogNorm)
    assert art.colorbar.extend == "max"


def test_diverging_point_surface_and_slices():
    ls = bowl()
    ls.z[12, 10] = 1e6   # near the centre, on the slices
    ax = viz.plot_surface(ls)
    assert ax.get_zlim()[1] < 10
    fig = viz.plot_slices(ls)
    assert all(a.get_ylim()[1] < 10 for a in fig.axes)


def test_nan_and_inf_cells_are_masked():
    ls = bowl()
    ls.z[0, 0], ls.z[1, 1] = np.nan, np.inf
    ax = viz.plot_heatmap(ls)
    arr = landscape_artist(ax).get_array()
    mask = np.ma.getmaskarray(arr).reshape(Y.size, X.size)
    assert mask[0, 0] and mask[1, 1] and mask.sum() == 2
    viz.plot_filled_contour(ls)
    viz.plot_surface(ls)


def test_log_scale_explicit_and_auto():
    ls = bowl(z=bowl().z + 0.1)
    cs = landscape_artist(viz.plot_filled_contour(ls, log=True, levels=10))
    assert isinstance(cs.norm, LogNorm)
    np.testing.assert_allclose(cs.levels, np.geomspace(0.1, ls.z.max(), 10))
    assert cs.colorbar.ax.get_ylabel() == "loss (log scale)"
    wide = bowl(z=10.0 ** (4 * bowl().z / bowl().z.max() - 2))   # 1e-2 .. 1e2, smooth
    assert isinstance(landscape_artist(viz.plot_contour(wide)).norm, LogNorm)
    assert not isinstance(landscape_artist(viz.plot_contour(wide, log=False)).norm, LogNorm)
    ax3d = viz.plot_surface(ls, log=True)
    assert ax3d.get_zlabel() == "loss (log scale)"
    np.testing.assert_allclose(ax3d.get_zlim(), np.log10([0.1, ls.z.max()]))


def test_extra_surface():
    ls = bowl(surfaces={"accuracy": 1 - bowl().z / 10})
    cs = landscape_artist(viz.plot_filled_contour(ls, surface="accuracy"))
    assert cs.colorbar.ax.get_ylabel() == "accuracy"
    with pytest.raises(InvalidParameterError, match="'surface' parameter"):
        viz.plot_contour(ls, surface="nope")


def test_slices_through_the_convergence_point():
    cx, cy = 0.07, 0.03  # between grid lines, nearer one than the other: the nearest line is not the answer
    ls = bowl(metadata={"decomposition": "PCA", "centre": [cx, cy, cx ** 2 + 2 * cy ** 2]})
    fig = viz.plot_slices(ls)
    ax_x, ax_y = fig.axes
    (sx,) = gid_lines(ax_x, "slice")
    (sy,) = gid_lines(ax_y, "slice")
    np.testing.assert_allclose(sx.get_xdata(), X)
    np.testing.assert_allclose(sy.get_xdata(), Y)
    # the grid's columns (rows) interpolated linearly at the centre by numpy: on this bowl the interpolated
    # x-slice is X**2 + 0.006 (0.7 * 2 * 0**2 + 0.3 * 2 * 0.1**2), the nearest row's X**2 + 0, the exact X**2 + 0.0018
    z = ls.z
    along_x = np.array([np.interp(cy, Y, z[:, j]) for j in range(X.size)])
    along_y = np.array([np.interp(cx, X, z[i, :]) for i in range(Y.size)])
    np.testing.assert_allclose(along_x, X ** 2 + 0.3 * 2 * 0.1 ** 2, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(sx.get_ydata(), along_x, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(sy.get_ydata(), along_y, rtol=1e-12, atol=1e-14)
    assert ax_x.get_xlabel() == "direction 1 (PC1)" and ax_y.get_xlabel() == "direction 2 (PC2)"
    assert gid_lines(ax_x, "convergence")[0].get_xdata()[0] == cx
    assert gid_lines(ax_y, "convergence")[0].get_xdata()[0] == cy


def test_plot_path_on_existing_axes():
    ax = Figure().add_subplot()
    viz.plot_path(bowl(), ax)
    check_path_and_convergence(ax, grid=False)


@pytest.mark.parametrize("kind", ["contour", "filled", "surface", "heatmap"])
def test_dispatcher_returns_axes_on_given_ax(kind):
    fig = Figure()
    ax = fig.add_subplot(projection="3d" if kind == "surface" else None)
    assert viz.plot(bowl(), kind, ax=ax) is ax


def test_all_kinds_figure():
    fig = viz.plot(bowl(), "all")
    assert isinstance(fig, Figure)
    titles = {a.get_title() for a in fig.get_axes()}
    subtitles = {a.get_title() for sf in fig.subfigs for s in [sf, *sf.subfigs] for a in s.axes}
    assert {"contour lines", "filled contour", "heatmap", "surface"} <= titles | subtitles


def test_overview_grid_with_paths():
    fig = viz.plot_overview([bowl(), bowl(tag="landscape_[11, 20]"), random_bowl()])
    panels = [a for a in fig.axes if a.get_title()]
    assert [a.get_title().split(" ")[0] for a in panels] == ["landscape_[1,", "landscape_[11,", "landscape_[10]"]
    assert [len(gid_lines(a, "path")) for a in panels] == [1, 1, 0]


def test_compare_uses_one_colour_scale():
    low, high = random_bowl(), random_bowl(z=random_bowl().z * 3)
    fig = viz.compare({"plain": low, "residual": high}, kind="filled")
    panels = [a for a in fig.axes if a.get_title()]
    assert [a.get_title().splitlines()[0] for a in panels] == ["plain", "residual"]
    norms = {(landscape_artist(a).norm.vmin, landscape_artist(a).norm.vmax) for a in panels}
    assert norms == {(low.z.min(), high.z.max())}
    assert len(fig.axes) == 3                                   # two panels, ONE colourbar
    assert fig.axes[2].get_ylabel() == "loss (log scale)"               # 0.5 to 7.5: over a decade


def test_compare_picks_tag_or_random():
    fig = viz.compare([[bowl(), random_bowl()], [bowl(), random_bowl()]], kind="heatmap")
    assert all("landscape_[10]" in a.get_title() for a in fig.axes[:2])
    fig = viz.compare([[bowl(), random_bowl()]], tag="landscape_[1, 10]", kind="contour")
    assert "landscape_[1, 10]" in fig.axes[0].get_title()
    with pytest.raises(ValueError, match="'tag' parameter"):
        viz.compare([[bowl()]], tag="landscape_[99]")


def test_animate_one_frame_per_pca_interval(tmp_path):
    from PIL import Image

    out = viz.animate([random_bowl(), bowl(tag="landscape_[11, 20]"), bowl()], tmp_path / "a.gif", fps=2)
    with Image.open(out) as im:
        assert im.format == "GIF" and im.n_frames == 2
    with pytest.raises(ValueError, match="no PCA"):
        viz.animate([random_bowl()], tmp_path / "b.gif")


def test_repr_png_and_no_pyplot_state():
    import matplotlib.pyplot as plt

    before = plt.get_fignums()
    data = viz.repr_png(bowl())
    viz.plot(bowl(), "all")
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    from PIL import Image

    assert Image.open(io.BytesIO(data)).size[0] > 300
    assert plt.get_fignums() == before


@pytest.mark.parametrize("call,match", [
    (lambda: viz.plot(bowl(), "pie"), "'kind' parameter of plot must be one of 'contour', 'filled'"),
    (lambda: viz.plot("not a landscape"), "'landscape' parameter of plot"),
    (lambda: viz.plot_contour(bowl(), levels=1), "'levels' parameter of plot_contour"),
    (lambda: viz.plot_heatmap(bowl(), log="yes"), "'log' parameter of plot_heatmap"),
    (lambda: viz.plot_surface(bowl(), ax=Figure().add_subplot()), "'ax' parameter must be a 3D Axes"),
    (lambda: viz.plot_overview([bowl()], kind="all"), "'kind' parameter of plot_overview"),
    (lambda: viz.compare([]), "'runs' parameter of compare"),
    (lambda: viz.plot_filled_contour(bowl(), vmin=2.0, vmax=1.0), "'vmin' parameter"),
    (lambda: viz.repr_png(bowl(), kind="3d"), "'kind' parameter of repr_png"),
])
def test_bad_input_names_the_parameter(call, match):
    with pytest.raises((InvalidParameterError, ValueError), match=match):
        call()


def test_all_nan_grid_is_a_clear_error():
    with pytest.raises(ValueError, match="no finite value"):
        viz.plot_contour(bowl(z=np.full((Y.size, X.size), np.nan)))
