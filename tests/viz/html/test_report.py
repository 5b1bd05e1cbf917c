"""``viz.report``: the HTML file holds the runs' values, marks non-finite ones, frames planes, refuses bad input."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest

pytest.importorskip("plotly")

import viz  # noqa: E402
from collector import InvalidParameterError, SummaryReader, get_summary_lineage  # noqa: E402
from tests.viz.html._pages import as_float, nan_line, nan_plane, report_data, shared_plane, traces  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def demo_report(demo_run, tmp_path_factory) -> Path:
    return viz.report(demo_run, tmp_path_factory.mktemp("report") / "demo.html")


def test_demo_report_holds_the_runs_values(demo_report, demo_run):
    data = report_data(demo_report)
    (run,) = data["runs"]
    assert run["name"] == demo_run.name
    with h5py.File(demo_run / "landscapes.h5") as fh:  # read directly, not through viz's loader
        assert [ls["tag"] for ls in run["landscapes"]] == ["landscape_[1, 5]", "landscape_[6, 10]", "landscape_[10]"]
        for ls in run["landscapes"]:
            group = fh[ls["tag"]]
            view = ls["views"]["loss"]
            (surface,) = traces(view["surface"], kind="surface")
            np.testing.assert_array_equal(as_float(surface["z"]), group["train_loss"][()])
            np.testing.assert_array_equal(surface["x"], group["xcoordinates"][()])
            np.testing.assert_array_equal(surface["y"], group["ycoordinates"][()])
            (contour,) = traces(view["contour"], kind="contour")
            assert contour["customdata"] == surface["z"] and "%{customdata" in contour["hovertemplate"]
            loss = group["train_loss"][()]
            colours = np.log10(loss) if "log scale" in contour["colorbar"]["title"]["text"] else loss
            np.testing.assert_array_equal(as_float(contour["z"]), colours)
            if "path" in group:
                path = traces(view["contour"], "training path")[0]
                np.testing.assert_array_equal(path["x"], group["path/x"][()])
                np.testing.assert_array_equal(path["y"], group["path/y"][()])
                (path3d,) = traces(view["surface"], "training path")
                np.testing.assert_array_equal(path3d["z"], group["path/z"][()])
            cx, cy, cz = group.attrs["centre"]  # the centre evaluated exactly, not a grid point beside it
            # named by the checkpoint it is (an interval's last, not necessarily the run's)
            name = f"weights at {group.attrs['unit']} {list(group.attrs['checkpoint_steps'])[-1]}"
            (star,) = traces(view["contour"], f"{name} (loss {cz:.4g})")
            assert (star["x"], star["y"]) == ([cx], [cy])
            assert "All 36 values finite." in view["info"]
    steps, values = SummaryReader(demo_run).scalars()["loss/auto"]
    (scalar,) = [s for s in data["scalars"] if s["tag"] == "loss/auto"]
    (curve,) = scalar["figure"]["data"]
    assert curve["name"] == demo_run.name and data["default_scalar"] == "loss/auto"
    np.testing.assert_array_equal(curve["x"], steps)
    np.testing.assert_array_equal(curve["y"], values)


def test_self_contained_and_the_same_bytes_twice(demo_report, demo_run, tmp_path):
    text = demo_report.read_text(encoding="utf-8")
    assert not re.search(r"<(script|link|img)[^>]+(src|href)=", text)  # nothing loaded from elsewhere
    assert "plotly.js v" in text[:text.index("</head>")]  # the library inline, in the head
    again = viz.report(demo_run, tmp_path / "again.html")
    assert again.read_bytes() == demo_report.read_bytes()


def test_lineage_table(demo_report, demo_run):
    text = demo_report.read_text(encoding="utf-8")
    (table,) = re.findall(r'<table id="lineage-table">(.*?)</table>', text, re.S)
    head = re.findall(r"<th>(.*?)</th>", table)
    cells = re.findall(r"<td[^>]*>(.*?)</td>", table)
    row = dict(zip(head, cells))
    lineage = get_summary_lineage(demo_run)
    assert row["run"] == demo_run.name
    assert row["optimizer"] == lineage["hyper_parameters"]["optimizer"]
    assert float(row["learning_rate"]) == pytest.approx(lineage["hyper_parameters"]["learning_rate"])
    assert int(row["batch_size"]) == lineage["hyper_parameters"]["batch_size"]
    assert row["network"] == lineage["algorithm"]["network"]


def test_non_finite_values_are_gaps_and_marked(tmp_path):
    ls, line = nan_plane(), nan_line()
    data = report_data(viz.report({"views": [ls, line]}, tmp_path / "r.html"))
    plane_entry, line_entry = data["runs"][0]["landscapes"]
    bad = np.argwhere(~np.isfinite(ls.z))  # (row i = y, column j = x)
    for key, kind in (("surface", "scatter3d"), ("contour", "scatter")):
        fig = plane_entry["views"]["loss"][key]
        (grid,) = [t for t in fig["data"] if t["type"] in ("surface", "contour")]
        got = as_float(grid["z"])
        np.testing.assert_array_equal(np.argwhere(np.isnan(got)), bad)
        np.testing.assert_array_equal(got[np.isfinite(ls.z)], ls.z[np.isfinite(ls.z)])
        (marks,) = traces(fig, "not finite: 2 of 20", kind)
        assert sorted(zip(marks["x"], marks["y"])) == sorted((ls.x[j], ls.y[i]) for i, j in bad)
        assert sorted(marks["text"]) == ["inf", "nan"]
        if kind == "scatter3d":
            assert marks["z"] == [float(np.nanmax(np.where(np.isinf(ls.z), np.nan, ls.z)))] * 2
    assert "2 of 20 points not finite" in plane_entry["views"]["loss"]["info"]
    assert set(plane_entry["views"]) == {"loss", "accuracy"}
    models = traces(plane_entry["views"]["loss"]["contour"], "models")[0]
    assert models["text"] == ["A", "B", "C"] and models["x"] == [0.0, 0.05, 0.0]
    (curve,) = traces(line_entry["views"]["loss"]["line"], "loss")
    np.testing.assert_array_equal(as_float(curve["y"]), line.z)
    (marks,) = traces(line_entry["views"]["loss"]["line"], "not finite: 1 of 9")
    assert marks["x"] == [line.x[0]] and marks["text"] == ["nan"]
    assert line_entry["dims"] == 1 and "1 of 9 points not finite" in line_entry["views"]["loss"]["info"]


def test_the_3d_box_frames_the_surface_whatever_the_units(tmp_path):
    """A grid spanning 0.1 with a loss spanning ~2 fills the box (proportions set, not the data's units)."""
    data = report_data(viz.report([nan_plane(), shared_plane()], tmp_path / "r.html"))
    small, shared = (ls["views"]["loss"]["surface"]["layout"]["scene"] for ls in data["runs"][0]["landscapes"])
    assert small["aspectmode"] == "manual"
    for scene, y_over_x in ((small, 0.08 / 0.1), (shared, 0.5)):  # the plane's true proportions
        box = scene["aspectratio"]
        assert box["y"] / box["x"] == pytest.approx(y_over_x)
        assert box["z"] / box["x"] == pytest.approx(0.6)  # the loss axis: 0.6 of the plane's longer side
        assert np.linalg.norm([box["x"], box["y"], box["z"]]) == pytest.approx(np.sqrt(3))  # plotly's default cube


def test_paths_of_several_runs_each_in_its_colour(tmp_path):
    ls = shared_plane()
    data = report_data(viz.report(ls, tmp_path / "r.html"))
    view = data["runs"][0]["landscapes"][0]["views"]["loss"]
    for key in ("surface", "contour"):
        fig = view[key]
        sgd, adam = traces(fig, "sgd")[0], traces(fig, "adam")[0]
        assert sgd["line"]["color"] != adam["line"]["color"]
        np.testing.assert_array_equal(sgd["x"], ls.paths["sgd"].x)
        np.testing.assert_array_equal(adam["y"], ls.paths["adam"].y)
        assert not traces(fig, "training path")  # ls.path is not drawn when paths is set
        ends = [t["name"] for t in fig["data"] if t.get("name", "").endswith(")") and ": end" in t.get("name", "")]
        assert ends == ["sgd: end (epoch 3)", "adam: end (epoch 3)"]
    assert "Paths: sgd, adam" in view["info"]


def test_runs_from_a_folder_of_runs_and_names(tmp_path, demo_run):
    import shutil
    for name in ("a/run", "b/run"):
        shutil.copytree(demo_run, tmp_path / "runs" / name)
    data = report_data(viz.report(tmp_path / "runs", tmp_path / "r.html"))
    assert [r["name"] for r in data["runs"]] == ["a/run", "b/run"]
    (scalar,) = [s for s in data["scalars"] if s["tag"] == "loss/auto"]
    assert [t["name"] for t in scalar["figure"]["data"]] == ["a/run", "b/run"]
    data = report_data(viz.report({"mine": tmp_path / "runs" / "a" / "run"}, tmp_path / "r.html",
                                  title="Mine"))
    assert [r["name"] for r in data["runs"]] == ["mine"]
    assert "<title>Mine</title>" in (tmp_path / "r.html").read_text()


def test_bad_input_refused_before_anything_is_written(tmp_path):
    out = tmp_path / "new" / "r.html"
    with pytest.raises(InvalidParameterError, match=r"'runs' parameter of report .*missing', which does not exist"):
        viz.report([nan_plane(), tmp_path / "missing"], out)
    with pytest.raises(InvalidParameterError, match="'runs' parameter of report.*holds no summary file"):
        viz.report(tmp_path, out)
    with pytest.raises(InvalidParameterError, match="'runs' parameter of report.*Got \\[\\], an empty list"):
        viz.report([], out)
    with pytest.raises(InvalidParameterError, match="'output' parameter of report must be the HTML file"):
        viz.report(nan_plane(), tmp_path)
    with pytest.raises(InvalidParameterError, match="'title' parameter of report"):
        viz.report(nan_plane(), out, title=3)
    assert not (tmp_path / "new").exists() and list(tmp_path.iterdir()) == []


def test_without_plotly_the_error_says_what_to_install():
    code = ("import sys; sys.modules['plotly'] = None\n"
            "import viz\n"
            "try:\n    viz.report\nexcept ImportError as exc:\n    print(exc)\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert "pip install 'torch-landscape[report]'" in res.stdout, res.stderr
