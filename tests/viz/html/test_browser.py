"""The report in a real browser: headless Chromium opens it from a file URL with the network off.

Driven over the DevTools protocol on a pipe (tests/_chromium.py): the page's uncaught
exceptions, console errors and every request it makes are recorded, the plots' DOM is
queried, and screenshots of the views are checked for a drawn surface.
"""

from __future__ import annotations

import io
import json
import os
from urllib.parse import urlparse

import numpy as np
import pytest

pytest.importorskip("plotly")
from PIL import Image  # noqa: E402

import viz  # noqa: E402
from tests._chromium import Chromium, chromium_path  # noqa: E402
from tests.viz.html._pages import clamped_plane, nan_line, nan_plane, shared_plane, tall_plane, wide_plane  # noqa: E402

# skipped without chromium, except where it is required (.ci/run installs it and sets this)
_REQUIRED = os.environ.get("LANDSCAPE_TEST_CHROMIUM") == "required"
pytestmark = [pytest.mark.skipif(chromium_path() is None and not _REQUIRED,
                                 reason="needs chromium (apt-get install -y chromium; .ci/run installs it)"),
              pytest.mark.slow]

#: The DOM of the drawn views: WebGL canvases of the 3-D scene, contour paths, line traces.
_DOM = """(() => {
  const q = (s) => document.querySelectorAll(s).length;
  return {gl: q('#view-3d .gl-container canvas'), svg3d: q('#view-3d .main-svg'),
          contour: q('#view-contour .contourlayer path'), scalar: q('#scalar-plot .scatterlayer .trace'),
          line: q('#view-line .scatterlayer .trace'), webglMessage: document.body.innerText.includes('WebGL'),
          hidden3d: document.getElementById('view-3d').hidden, hiddenLine: document.getElementById('view-line').hidden};
})()"""


def _coloured_box(png: bytes, share: float = 0.02) -> tuple[float, float, int]:
    """Width and height (fractions of the picture) of the box holding its coloured pixels (columns and
    rows more than ``share`` coloured), left of the colour bar, and the number of distinct colours: a
    blank or white picture gives (0, 0, few)."""
    rgb = np.asarray(Image.open(io.BytesIO(png)).convert("RGB")).astype(int)
    plot = rgb[:, : int(rgb.shape[1] * 0.88)]  # the colour bar is at the right
    coloured = (plot.max(axis=2) - plot.min(axis=2)) > 60  # viridis and the path; not grey axes or text
    cols, rows = np.flatnonzero(coloured.mean(axis=0) > share), np.flatnonzero(coloured.mean(axis=1) > share)
    if not cols.size:
        return 0.0, 0.0, len(np.unique(rgb.reshape(-1, 3), axis=0))
    return ((cols[-1] - cols[0]) / plot.shape[1], (rows[-1] - rows[0]) / plot.shape[0],
            len(np.unique(rgb.reshape(-1, 3), axis=0)))


def _open(browser: Chromium, path) -> None:
    browser.offline()
    browser.open(path.resolve().as_uri())
    browser.wait_until("document.body.dataset.reportReady === 'true'")


def _select(browser: Chromium, run: str, label: str, surface: str = "loss") -> dict:
    browser.evaluate(f"window.landscapeReport.select({json.dumps(run)}, {json.dumps(label)}, {json.dumps(surface)})")
    browser.pump(0.5)  # the 3-D scene draws on the next animation frames
    return browser.evaluate(_DOM)


def test_demo_report_opens_offline_without_errors_and_draws_its_views(demo_run, tmp_path):
    out = viz.report(demo_run, tmp_path / "demo.html")
    with Chromium(1400, 1000) as browser:
        _open(browser, out)
        labels = browser.evaluate("window.landscapeReport.data.runs[0].landscapes.map(l => l.label)")
        assert len(labels) == 3
        for label in labels:
            dom = _select(browser, demo_run.name, label)
            assert browser.evaluate("window.landscapeReport.current().ls.label") == label
            assert dom["gl"] >= 1 and dom["svg3d"] >= 1 and not dom["webglMessage"], dom
            assert dom["contour"] > 10 and dom["scalar"] == 1 and not dom["hidden3d"] and dom["hiddenLine"], dom
            width, height, colours = _coloured_box(browser.screenshot("#view-3d"))
            assert width > 0.4 and height > 0.2 and colours > 500, (label, width, height, colours)
            width, height, colours = _coloured_box(browser.screenshot("#view-contour"))
            assert width > 0.6 and height > 0.6 and colours > 500, (label, width, height, colours)
        assert browser.errors() == []
        schemes = {urlparse(u).scheme for u in browser.requests()}
        assert schemes <= {"file", "data", "blob"} and out.resolve().as_uri() in browser.requests()


def test_views_lines_non_finite_values_and_shared_paths_in_the_browser(tmp_path):
    out = viz.report({"views": [tall_plane(), nan_plane(), nan_line(), shared_plane()]}, tmp_path / "views.html")
    with Chromium(1400, 1000) as browser:
        _open(browser, out)
        labels = browser.evaluate("window.landscapeReport.data.runs[0].landscapes.map(l => l.label)")
        # a grid spanning 0.1 with a loss spanning 2 fills the view (in data units it would be a thin sliver)
        dom = _select(browser, "views", labels[0])
        assert dom["gl"] >= 1 and not dom["webglMessage"]
        # the legend (its gold centre marker) hidden: the measure is the surface's
        browser.evaluate("Plotly.relayout('view-3d', {showlegend: false}).then(() => true)")
        browser.pump(0.5)
        width, height, _ = _coloured_box(browser.screenshot("#view-3d"))
        assert width > 0.5 and height > 0.3, (width, height)
        # the measure tells: the same surface in data units (plotly's aspectmode "data") is a sliver
        browser.evaluate("Plotly.relayout('view-3d', {'scene.aspectmode': 'data'}).then(() => true)")
        browser.pump(0.5)
        sliver, _, _ = _coloured_box(browser.screenshot("#view-3d"))
        assert sliver < 0.2, sliver
        for surface in ("loss", "accuracy"):
            dom = _select(browser, "views", labels[1], surface)
            assert dom["gl"] >= 1 and dom["contour"] > 0
            assert "2 of 20 points not finite" in browser.evaluate("document.getElementById('landscape-info').innerText")
        dom = _select(browser, "views", labels[2])
        assert dom["hidden3d"] and not dom["hiddenLine"] and dom["line"] == 3, dom  # the line, the models, the NaN
        width, height, colours = _coloured_box(browser.screenshot("#view-line"), share=0)  # a thin line
        assert width > 0.7 and height > 0.3 and colours > 50, (width, height, colours)
        _select(browser, "views", labels[3])
        legend = browser.evaluate("[...document.querySelectorAll('#view-contour .legendtext')].map(e => e.textContent)")
        assert {"sgd", "adam"} <= set(legend)
        assert browser.errors() == []
        assert {urlparse(u).scheme for u in browser.requests()} <= {"file", "data", "blob"}


_CLICK = """(() => {
  const buttons = [...document.querySelectorAll('#view-contour .updatemenu-button')];
  const button = buttons.find(b => b.textContent === %s);
  button.dispatchEvent(new MouseEvent('click', {bubbles: true}));
  return buttons.length;
})()"""


def test_the_colour_toggle_and_clamped_marks_in_the_browser(tmp_path):
    out = viz.report({"views": [wide_plane(), clamped_plane()]}, tmp_path / "toggle.html")
    with Chromium(1400, 1000) as browser:
        _open(browser, out)
        labels = browser.evaluate("window.landscapeReport.data.runs[0].landscapes.map(l => l.label)")
        _select(browser, "views", labels[0])
        title = "document.getElementById('view-contour').data[0].colorbar.title.text"
        assert browser.evaluate(title) == "loss (log scale)"
        logged = browser.screenshot("#view-contour")
        assert browser.evaluate(_CLICK % json.dumps("linear colours")) == 2
        browser.pump(0.5)
        assert browser.evaluate(title) == "loss"
        linear = browser.screenshot("#view-contour")
        # a CNN's range on a linear scale: the basin is one colour, so far fewer colours are drawn
        assert _coloured_box(linear)[2] < _coloured_box(logged)[2], (_coloured_box(linear), _coloured_box(logged))
        _select(browser, "views", labels[1])
        legend = browser.evaluate("[...document.querySelectorAll('#view-contour .legendtext')].map(e => e.textContent)")
        assert "batch-norm variances clamped at zero: 13 of 42 points" in legend
        info = browser.evaluate("document.getElementById('landscape-info').innerText")
        assert "13 of 42 points with batch-norm variances clamped at zero" in info
        assert browser.errors() == []
