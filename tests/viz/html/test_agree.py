"""One picture of a landscape, whatever draws it: the report and the PNGs mark the same centre with
the same loss and name, colour by the same rule with the same levels, and mark the same clamped points."""

from __future__ import annotations

import h5py
import numpy as np
import pytest
from matplotlib.colors import LogNorm

pytest.importorskip("plotly")

import viz  # noqa: E402
from landscape import Landscape  # noqa: E402
from tests.viz.html._pages import (  # noqa: E402
    as_float,
    clamped_line,
    clamped_plane,
    report_data,
    shared_plane,
    traces,
    wide_plane,
)

S = np.linspace(-1, 1, 40)  # the demo's Random plane: an even grid, no grid point at the centre


def even_random() -> Landscape:
    """MindSpore's convergence point is grid point 20 (0.0256, 0.0256); the centre was evaluated exactly."""
    z = 0.0487 + 0.9 * np.add.outer(S ** 2, S ** 2)
    return Landscape(x=S, y=S.copy(), z=z, convergence_point=(S[20], S[20], float(z[20, 20])), tag="landscape_[10]",
                     metadata={"decomposition": "Random", "centre": [0.0, 0.0, 0.04866]})


def png_star(ls: Landscape, kind: str = "filled") -> tuple[list[float], str]:
    ax = viz.plot(ls, kind)
    (star,) = [ln for ln in ax.lines if ln.get_gid() == "convergence"]
    xyz = star.get_data_3d() if kind == "surface" else (star.get_xdata(), star.get_ydata())
    return [float(v[0]) for v in xyz], star.get_label()


def report_stars(ls: Landscape, tmp_path, name: str) -> tuple[dict, dict]:
    view = report_data(viz.report(ls, tmp_path / "r.html"))["runs"][0]["landscapes"][0]["views"]["loss"]
    (flat,) = traces(view["contour"], name)
    (deep,) = traces(view["surface"], name)
    return flat, deep


def test_report_and_png_mark_the_exact_centre_with_its_loss_not_a_grid_point(tmp_path):
    ls = even_random()
    flat, deep = report_stars(ls, tmp_path, "trained weights (loss 0.04866)")
    assert (flat["x"], flat["y"]) == ([0.0], [0.0])                     # metadata["centre"], not (0.0256, 0.0256)
    assert (deep["x"], deep["y"], deep["z"]) == ([0.0], [0.0], [0.04866])
    assert png_star(ls) == ([0.0, 0.0], "trained weights (loss 0.04866)")
    assert png_star(ls, "surface")[0][:2] == [0.0, 0.0]


def test_the_demo_report_and_png_agree_with_the_file(demo_run, tmp_path):
    (ls,) = [a for a in viz.load_landscapes(demo_run) if a.tag == "landscape_[10]"]
    with h5py.File(demo_run / "landscapes.h5") as fh:  # the centre as the generation stored it
        cx, cy, cz = (float(v) for v in fh["landscape_[10]"].attrs["centre"])
        grid_point = tuple(float(v) for v in fh["landscape_[10]/convergence_point"][()])
        attrs = fh["landscape_[10]"].attrs
        name = f"weights at {attrs['unit']} {list(attrs['checkpoint_steps'])[-1]}"  # the checkpoint it is centred on
    assert grid_point[:2] != (cx, cy)  # the demo's even grid: MindSpore's point is beside the centre
    view = report_data(viz.report(demo_run, tmp_path / "r.html"))["runs"][0]["landscapes"][2]["views"]["loss"]
    (flat,) = traces(view["contour"], f"{name} (loss {cz:.4g})")
    assert (flat["x"], flat["y"]) == ([cx], [cy])
    assert f"Centre: {name} at x {cx:.5g}, y {cy:.5g}, loss {cz:.5g}." in view["info"]
    assert png_star(ls) == ([cx, cy], f"{name} (loss {cz:.4g})")


@pytest.mark.parametrize(("metadata", "name"), [
    ({"centre_on": "start"}, "shared centre: the runs' start"),
    ({"centre_on": "mean"}, "shared centre: the runs' mean"),
    ({"centre_on": "adam"}, "shared centre: run adam's end"),
    ({}, "shared centre: run sgd's end"),                             # the default: the first run's end
])
def test_a_shared_plane_names_its_centre_alike(tmp_path, metadata, name):
    ls = shared_plane()
    ls.metadata.update(metadata, centre=[0.0, 0.0, 0.0])
    flat, _deep = report_stars(ls, tmp_path, f"{name} (loss 0)")
    assert (flat["x"], flat["y"]) == ([0.0], [0.0])
    assert png_star(ls) == ([0.0, 0.0], f"{name} (loss 0)")


def test_views_through_models_mark_the_models_not_a_centre(tmp_path):
    ls = clamped_plane()
    view = report_data(viz.report(ls, tmp_path / "r.html"))["runs"][0]["landscapes"][0]["views"]["loss"]
    (models,) = traces(view["contour"], "models")
    assert models["text"] == ["A", "B", "C"] and models["x"] == [0.0, 1.0, 0.5] and models["y"] == [0.0, 0.0, 1.0]
    assert not [t for t in view["contour"]["data"] if "trained weights" in str(t.get("name"))]
    assert "Centre: model A at x 0, y 0" in view["info"]
    ax = viz.plot(ls, "contour")
    assert {ln.get_label() for ln in ax.lines if ln.get_gid() == "marker"} == {
        "model A (loss 0.29)", "model B (loss 0.54)", "model C (loss 0.69)"}
    assert not [ln for ln in ax.lines if ln.get_gid() == "convergence"]


def test_a_cnn_range_is_coloured_on_the_png_s_log_scale_with_its_levels(tmp_path):
    ls = wide_plane()  # 0.0036 to 15.4: one flat basin on a linear scale
    data = report_data(viz.report(ls, tmp_path / "r.html", levels=9))
    view = data["runs"][0]["landscapes"][0]["views"]["loss"]
    (contour,) = traces(view["contour"], kind="contour")
    np.testing.assert_array_equal(as_float(contour["z"]), np.log10(ls.z))  # colours by log10 of the loss
    np.testing.assert_array_equal(as_float(contour["customdata"]), ls.z)   # the hover: the loss itself
    assert contour["colorbar"]["title"]["text"] == "loss (log scale)"
    assert contour["contours"]["start"] == np.log10(ls.z.min())
    png = next(c for c in viz.plot_filled_contour(ls, levels=9).collections if c.get_gid() == "landscape")
    assert isinstance(png.norm, LogNorm) and png.norm.vmin == ls.z.min()
    levels = contour["contours"]["start"] + contour["contours"]["size"] * np.arange(9)
    np.testing.assert_allclose(levels, np.log10(png.levels), rtol=0, atol=1e-12)  # the PNG's levels, as log10
    assert contour["contours"]["end"] == pytest.approx(np.log10(png.norm.vmax), abs=1e-12)
    ticks = contour["colorbar"]["ticktext"]
    np.testing.assert_allclose(np.log10([float(t) for t in ticks]), contour["colorbar"]["tickvals"])
    assert "Colours: log scale (the values span more than a decade, as in the PNGs), 9 contour levels" in view["info"]
    # the toggle: the linear button restyles trace 0 with the loss itself over the linear range
    (menu,) = view["contour"]["layout"]["updatemenus"]
    linear, log = menu["buttons"]
    assert (linear["label"], log["label"], menu["active"]) == ("linear colours", "log colours", 1)
    np.testing.assert_array_equal(as_float(linear["args"][0]["z"][0]), ls.z)
    np.testing.assert_array_equal(as_float(log["args"][0]["z"][0]), np.log10(ls.z))
    assert linear["args"][1] == [0] and linear["args"][0]["colorbar.title.text"] == ["loss"]
    (surface,) = traces(view["surface"], kind="surface")
    np.testing.assert_array_equal(as_float(surface["z"]), ls.z)                # heights: the loss
    np.testing.assert_array_equal(as_float(surface["surfacecolor"]), np.log10(ls.z))
    # accuracy holds zeros: no log scale, no toggle; forced linear: the linear view first
    acc = data["runs"][0]["landscapes"][0]["views"]["accuracy"]
    assert "updatemenus" not in acc["contour"]["layout"] and "no log scale" in acc["info"]
    view = report_data(viz.report(ls, tmp_path / "r.html", log=False))["runs"][0]["landscapes"][0]["views"]["loss"]
    (contour,) = traces(view["contour"], kind="contour")
    np.testing.assert_array_equal(as_float(contour["z"]), ls.z)
    assert view["contour"]["layout"]["updatemenus"][0]["active"] == 0 and "linear scale (as asked)" in view["info"]


def test_a_narrow_range_stays_linear_as_in_the_png(tmp_path):
    s = np.linspace(-1, 1, 11)
    ls = Landscape(x=s, y=s.copy(), z=0.5 + 0.4 * np.add.outer(s ** 2, s ** 2) / 2, metadata={"decomposition": "Random"})
    view = report_data(viz.report(ls, tmp_path / "r.html"))["runs"][0]["landscapes"][0]["views"]["loss"]
    (contour,) = traces(view["contour"], kind="contour")
    np.testing.assert_array_equal(as_float(contour["z"]), ls.z)
    png = next(c for c in viz.plot_filled_contour(ls).collections if c.get_gid() == "landscape")
    assert not isinstance(png.norm, LogNorm)
    levels = contour["contours"]["start"] + contour["contours"]["size"] * np.arange(20)
    np.testing.assert_allclose(levels, png.levels, rtol=0, atol=1e-12)


def test_clamped_points_are_marked_and_counted_in_the_report(tmp_path):
    ls = clamped_plane()
    view = report_data(viz.report(ls, tmp_path / "r.html"))["runs"][0]["landscapes"][0]["views"]["loss"]
    hit = np.argwhere(ls.clamped > 0)  # (i, j): at (x[j], y[i])
    name = f"batch-norm variances clamped at zero: {len(hit)} of {ls.z.size} points"
    assert f"{len(hit)} of {ls.z.size} points with batch-norm variances clamped at zero" in view["info"]
    assert "up to 3 channels at a point" in view["info"]
    (flat,) = traces(view["contour"], name)
    assert sorted(zip(flat["x"], flat["y"], flat["customdata"])) == sorted(
        (ls.x[j], ls.y[i], int(ls.clamped[i, j])) for i, j in hit)
    (deep,) = traces(view["surface"], name)
    top = float(np.nanmax(ls.z))
    assert sorted(zip(deep["x"], deep["y"], deep["z"])) == sorted(
        (ls.x[j], ls.y[i], float(ls.z[i, j]) if np.isfinite(ls.z[i, j]) else top) for i, j in hit)
    assert traces(report_data(viz.report(ls, tmp_path / "r.html"))["runs"][0]["landscapes"][0]["views"]["accuracy"]
                  ["contour"], name)  # every surface of the point is the clamped network's


def test_a_line_s_clamped_points_and_nan_metric_in_the_report(tmp_path):
    ls = clamped_line()
    views = report_data(viz.report(ls, tmp_path / "r.html"))["runs"][0]["landscapes"][0]["views"]
    (marks,) = traces(views["loss"]["line"], "batch-norm variances clamped at zero: 2 of 9 points")
    top = float(np.nanmax(ls.z))
    assert marks["x"] == ls.x[ls.clamped > 0].tolist() and marks["y"] == [float(ls.z[7]), top]  # NaN: at the top
    assert "2 of 9 points with batch-norm variances clamped at zero" in views["accuracy"]["info"]
    (acc,) = traces(views["accuracy"]["line"], "accuracy")
    assert acc["y"][8] is None and acc["connectgaps"] is False  # a gap, never bridged
    np.testing.assert_array_equal(as_float(acc["y"]), ls.surfaces["accuracy"])
