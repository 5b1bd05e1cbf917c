"""The topology drawn: the figure's marks against grid_topology's numbers, n-D grids' one picture, the
report's topology figures (and in a browser), the refusals of pictures an n-D grid has not."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from matplotlib.figure import Figure

import viz
from collector.common import InvalidParameterError
from landscape import Landscape, write_h5
from landscape.cli._main import main
from landscape.topology import grid_topology


def _wells(n: int = 21) -> tuple[np.ndarray, np.ndarray]:
    x = np.linspace(-2, 2, n)
    gx, gy = np.meshgrid(x, x, indexing="xy")
    return x, -(np.exp(-((gx - 1) ** 2 + gy ** 2) / 0.3) + 0.5 * np.exp(-((gx + 1) ** 2 + gy ** 2) / 0.3)) \
        + 0.05 * (gx ** 2 + gy ** 2)


def _plane() -> Landscape:
    x, z = _wells()
    return Landscape(x=x, y=x, z=z, tag="wells", metadata={"decomposition": "Random", "centre": [0.0, 0.0, 0.0]})


def _grid() -> Landscape:
    x, z = _wells()
    stack = np.stack([z + 0.1 * k ** 2 for k in range(-2, 3)])
    return Landscape(x=x, y=x, z=stack, tag="grid", extra_axes=(np.linspace(-1, 1, 5),),
                     metadata={"decomposition": "Hessian", "dims": 3})


def _line() -> Landscape:
    a = np.linspace(-0.5, 1.5, 41)
    return Landscape(x=a, y=np.zeros(0), z=0.2 * np.cos(2 * np.pi * a) + 0.1 * a + 0.5, tag="line",
                     metadata={"decomposition": "Interpolation"}, convergence_point=(0.0, 0.0, 0.7))


def _offsets(ax, label: str) -> np.ndarray:
    for coll in ax.collections:
        if coll.get_label() == label:
            return np.asarray(coll.get_offsets())
    raise AssertionError(f"no {label!r} marks")


def test_plane_marks_and_panels_are_grid_topologys():
    ls = _plane()
    fig = viz.plot_topology(ls, threshold=0.01)
    assert isinstance(fig, Figure)
    contour, diagram, tree = fig.axes[0], fig.axes[-2], fig.axes[-1]
    topo = grid_topology(ls.z, threshold=0.01)
    x = ls.x
    want = sorted((float(x[j]), float(x[i])) for i, j in topo.minima.positions)  # (x, y) of each minimum
    np.testing.assert_allclose(sorted(map(tuple, _offsets(contour, "minima").tolist())), want)
    np.testing.assert_allclose(_offsets(diagram, "1 pair"), topo.pairs)
    assert len(_offsets(tree, "minima")) == len(topo.minima) == 2
    assert "threshold 0.01" in fig.get_suptitle() and "axis connectivity" in fig.get_suptitle()


def test_line_and_grid_pictures():
    fig = viz.plot(_line(), "topology")
    topo = grid_topology(_line().z)
    assert len(_offsets(fig.axes[0], "minima")) == len(topo.minima)
    grid = _grid()
    fig = viz.plot(grid)  # an n-D grid's default: its topology, two panels
    assert isinstance(fig, Figure) and len(fig.axes) == 2
    assert fig.get_suptitle().startswith("grid: 21x21x5, axis connectivity")
    assert viz.repr_png(grid)[:4] == b"\x89PNG"
    with pytest.raises(InvalidParameterError, match="'kind'.*grid of 3 directions"):
        viz.plot(grid, "contour")
    with pytest.raises(ValueError, match="viz.plot_topology"):
        viz.plot_contour(grid)
    with pytest.raises(ValueError, match="viz.plot_topology"):
        viz.plot_overview([grid])


def test_export_and_plot_command_take_grids(tmp_path, capsys):
    grid = _grid()
    with pytest.raises(ValueError, match="as h5 only"):
        viz.export(grid, tmp_path / "grid.csv")
    viz.export(grid, tmp_path / "grid.h5")
    back = viz.load_landscapes(tmp_path / "grid.h5")[0]
    np.testing.assert_array_equal(back.z, grid.z)
    run = tmp_path / "run"
    run.mkdir()
    write_h5(run / "landscapes.h5", [_plane(), grid])
    assert main(["plot", str(run), "-o", str(tmp_path / "plots")]) == 0
    written = sorted(os.listdir(tmp_path / "plots"))
    assert written == ["grid_topology.png", "wells_filled.png"]
    assert main(["export", str(run), "--format", "csv", "-o", str(tmp_path / "csv")]) == 0
    assert "grid: skipped, a grid of 3 directions (--format h5 exports it)" in capsys.readouterr().err
    assert os.listdir(tmp_path / "csv") == ["wells.csv"]


def test_report_holds_each_landscapes_topology(tmp_path):
    pytest.importorskip("plotly")
    from viz.html._page import landscape_entry

    for ls in (_plane(), _line(), _grid()):
        entry = landscape_entry(ls)
        topo = grid_topology(ls.z)
        diagram = entry["topology"]["diagram"]
        pairs = next(t for t in diagram["data"] if t.get("name") == "pairs")
        np.testing.assert_allclose(np.column_stack([pairs["x"], pairs["y"]]), topo.pairs)
        assert topo.summary().split(":")[0] in entry["topology"]["info"]
    assert set(landscape_entry(_grid())["views"]["loss"]) == {"info"}  # no picture of its own


@pytest.mark.slow
def test_grid_in_the_report_in_a_browser(tmp_path):
    pytest.importorskip("plotly")
    from tests._chromium import Chromium, chromium_path

    if chromium_path() is None and os.environ.get("LANDSCAPE_TEST_CHROMIUM") != "required":
        pytest.skip("needs chromium")
    out = viz.report({"run": [_plane(), _grid()]}, tmp_path / "r.html")
    dom = """(() => ({diagram: document.querySelectorAll('#topology-diagram .scatterlayer .trace').length,
      tree: document.querySelectorAll('#topology-tree .scatterlayer .trace').length,
      hidden3d: document.getElementById('view-3d').hidden, hiddenLine: document.getElementById('view-line').hidden,
      info: document.getElementById('topology-info').innerText}))()"""
    with Chromium(1400, 1000) as browser:
        browser.offline()
        browser.open(out.resolve().as_uri())
        browser.wait_until("document.body.dataset.reportReady === 'true'")
        for label, plane in (("wells \u2014 Random", True), ("grid \u2014 Hessian, 3-D grid", False)):
            browser.evaluate(f"window.landscapeReport.select('run', {json.dumps(label)}, 'loss')")
            browser.pump(0.5)
            got = browser.evaluate(dom)
            assert got["diagram"] >= 2 and got["tree"] >= 3 and got["hidden3d"] is not plane and got["hiddenLine"]
            assert "axis connectivity, threshold 0" in got["info"]
        assert browser.errors() == []
