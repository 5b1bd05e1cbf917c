"""``landscape export RUN --format tensorboard``: TensorBoard's reader and server see what our reader sees."""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("tensorboard")

from tensorboard.util import tensor_util  # noqa: E402

import viz  # noqa: E402
from collector import SummaryReader  # noqa: E402
from landscape.cli._main import main  # noqa: E402
from tests.collector.summary._tb_compare import accumulator, assert_same_as_ours  # noqa: E402


def _export(path: Path, out: Path, *extra: str) -> tuple[int, str]:
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        code = main(["export", str(path), "--format", "tensorboard", "--out", str(out), *extra])
    return code, buf.getvalue()


@pytest.fixture(scope="module")
def exported(demo_run, mindspore_run_dir, tmp_path_factory):
    """The demo run and MindSpore's fixture, exported under one logdir (tb/demo, tb/mindspore)."""
    base = tmp_path_factory.mktemp("tbexport")
    tb = base / "tb"
    for name, run in (("demo", demo_run), ("mindspore", mindspore_run_dir)):
        code, out = _export(run, tb / name)
        assert code == 0, out
        assert out.splitlines() == [str(tb / name), f"view with: tensorboard --logdir {tb / name}"]
    return tb


@pytest.fixture(scope="module")
def mindspore_run_dir():
    from tests.conftest import MINDSPORE_RUN

    return MINDSPORE_RUN


def test_demo_run_every_kind_equal_in_tensorboards_reader(exported, demo_run):
    kinds = assert_same_as_ours(demo_run, exported / "demo")
    assert kinds == {"scalar", "histogram", "landscape", "lineage"}  # the demo's MLP has no image input
    acc = accumulator(exported / "demo")
    tags = set(acc.Tags()["images"])
    assert tags == {f"{t}/filled_contour" for t in SummaryReader(demo_run).landscapes()}


def test_mindspore_fixture_every_kind_equal_in_tensorboards_reader(exported, mindspore_run_dir):
    kinds = assert_same_as_ours(mindspore_run_dir, exported / "mindspore")
    assert kinds == {"scalar", "histogram", "landscape", "lineage"}
    acc = accumulator(exported / "mindspore")
    assert len(acc.Scalars("loss/auto")) == 290  # every loss MindSpore recorded
    assert set(acc.Tags()["images"]) == {"landscape_[1, 5]/filled_contour", "landscape_[6, 10]/filled_contour",
                                         "landscape_[10]/filled_contour"}


def test_a_directory_of_runs_keeps_its_layout_and_a_second_export_replaces_the_first(tmp_path, mindspore_run_dir):
    for name in ("a", "b/c"):
        shutil.copytree(mindspore_run_dir, tmp_path / "runs" / name)
    written = viz.export_tensorboard(tmp_path / "runs", tmp_path / "tb", images=False)
    assert written == [tmp_path / "tb" / "a", tmp_path / "tb" / "b" / "c"]
    again = viz.export_tensorboard(tmp_path / "runs", tmp_path / "tb", images=False)
    assert again == written
    for run in written:
        assert len(list(run.glob("*tfevents*"))) == 1
        assert accumulator(run).Tags()["images"] == []  # images=False: no pictures
    # the default place: beside the runs, under export/tensorboard
    default = viz.export_tensorboard(tmp_path / "runs" / "a", images=False)
    assert default == [tmp_path / "runs" / "a" / "export" / "tensorboard"]


def test_command_errors(tmp_path, capsys):
    assert main(["export", str(tmp_path / "none"), "--format", "tensorboard"]) == 2
    assert "no such file or directory" in capsys.readouterr().err
    assert main(["export", str(tmp_path), "--format", "tensorboard", "--tag", "x"]) == 2
    assert "--tag selects one landscape" in capsys.readouterr().err
    assert main(["export", str(tmp_path), "--format", "tensorboard"]) == 1
    assert "No summary file under" in capsys.readouterr().err


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(port: int, path: str, **query: str):
    url = f"http://127.0.0.1:{port}{path}" + ("?" + urllib.parse.urlencode(query) if query else "")
    with urllib.request.urlopen(url, timeout=10) as resp:
        return json.loads(resp.read())


@pytest.mark.slow
def test_tensorboard_serves_the_exported_runs(exported, mindspore_run_dir):
    """``tensorboard --logdir`` on loopback lists both runs and serves their data through its HTTP API."""
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "tensorboard.main", "--logdir", str(exported), "--host",
                             "127.0.0.1", "--port", str(port), "--load_fast", "false", "--reload_interval", "1"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline, runs = time.monotonic() + 120, []
        while time.monotonic() < deadline:
            try:
                runs = _get(port, "/data/runs")
                if sorted(runs) == ["demo", "mindspore"]:
                    break
            except OSError:
                pass
            time.sleep(0.5)
        assert sorted(runs) == ["demo", "mindspore"]
        steps, values = SummaryReader(mindspore_run_dir).scalars()["loss/auto"]
        scalars = []
        while time.monotonic() < deadline and len(scalars) < len(steps):  # the run may still be loading
            scalars = _get(port, "/data/plugin/scalars/scalars", run="mindspore", tag="loss/auto")
            time.sleep(0.5)
        assert [s for _, s, _ in scalars] == steps.tolist()
        np.testing.assert_array_equal(np.float32([v for _, _, v in scalars]), values.astype(np.float32))
        # the server samples histograms (50 of a tag by default, the first and last kept)
        hist = _get(port, "/data/plugin/histograms/histograms", run="mindspore", tag="fc1.weight/auto")
        ours = SummaryReader(mindspore_run_dir).histograms()["fc1.weight/auto"]
        assert 10 <= len(hist) <= len(ours) and hist[0][1] == ours[0]["step"] and hist[-1][1] == ours[-1]["step"]
        assert {step for _, step, _ in hist} <= {h["step"] for h in ours}
        for _, step, buckets in (hist[0], hist[-1]):
            want = next(h for h in ours if h["step"] == step)
            assert sum(count for _, _, count in buckets) == pytest.approx(float(want["count"].sum()))
        images = _get(port, "/data/plugin/images/tags")
        assert "landscape_[1, 5]/filled_contour" in images["demo"]
        meshes = _get(port, "/data/plugin/mesh/tags")
        assert {"landscape_[1, 5]/surface", "landscape_[1, 5]/path"} <= set(meshes["mindspore"])
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="module")
def views_run(tmp_path_factory):
    """A run holding a plane spanning 0.1 with a loss spanning 2, and an interpolation with a NaN point."""
    from collector import SummaryRecord
    from tests.viz.html._pages import nan_line, tall_plane

    run = tmp_path_factory.mktemp("views") / "run"
    with SummaryRecord(run) as rec:
        for ls in (tall_plane(), nan_line()):
            rec.add_value("landscape", ls.tag, ls.to_proto())
            rec.record(0)
    return run


def test_lines_as_scalar_series_and_pictures_planes_framed(views_run, tmp_path, caplog):
    from tensorboard.plugins.mesh.plugin_data_pb2 import MeshPluginData

    from tests.viz.html._pages import nan_line, tall_plane

    code, _ = _export(views_run, tmp_path / "tb")
    assert code == 0 and "no picture" not in caplog.text and "not converted" not in caplog.text
    assert assert_same_as_ours(views_run, tmp_path / "tb") == {"landscape"}
    acc = accumulator(tmp_path / "tb")
    assert set(acc.Tags()["images"]) == {"tall/filled_contour", "interpolation_[1, 10]/line"}
    line = nan_line()  # the values written, against what TensorBoard reads back
    points = acc.Scalars("interpolation_[1, 10]/loss")
    assert [p.step for p in points] == list(range(9)) and np.isnan(points[0].value)
    np.testing.assert_array_equal(np.float32([p.value for p in points[1:]]), line.z[1:].astype(np.float32))
    description = acc.SummaryMetadata("interpolation_[1, 10]/loss").summary_description
    assert "x[k] = -0.5 + k * 0.25" in description
    plane = tall_plane()
    vertices = tensor_util.make_ndarray(acc.Tensors("tall/surface_VERTEX")[0].tensor_proto)[0]
    gx, gy = np.meshgrid(plane.x, plane.y)
    want = np.stack([gx.ravel() * 20, gy.ravel() * 20, (plane.z.ravel() - 0.05) / 2.0], axis=1)  # by hand
    np.testing.assert_allclose(vertices, want, rtol=0, atol=2e-6)
    content = acc.SummaryMetadata("tall/surface_VERTEX").plugin_data.content
    camera = json.loads(MeshPluginData.FromString(content).json_config)["camera"]
    assert camera["cls"] == "PerspectiveCamera" and len(camera["position"]) == 3


@pytest.mark.slow
def test_mesh_dashboard_shows_the_surface_filling_its_card(views_run, tmp_path):
    """TensorBoard's Mesh tab in headless Chromium: the surface's card is mostly surface, not a dot."""
    from PIL import Image

    from tests._chromium import Chromium, chromium_path

    if chromium_path() is None and os.environ.get("LANDSCAPE_TEST_CHROMIUM") != "required":
        pytest.skip("needs chromium (apt-get install -y chromium; .ci/run installs it)")
    viz.export_tensorboard(views_run, tmp_path / "tb", images=False)
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "tensorboard.main", "--logdir", str(tmp_path / "tb"), "--host",
                             "127.0.0.1", "--port", str(port), "--load_fast", "false"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                if "tall/surface" in _get(port, "/data/plugin/mesh/tags").get(".", {}):
                    break
            except OSError:
                pass
            time.sleep(0.5)
        # the mesh viewer's canvas lives in the dashboard's shadow DOM
        canvas = ("(() => { const found = []; const walk = (root) => root.querySelectorAll('*').forEach(e => {"
                  " if (e.tagName === 'CANVAS' && e.width > 100) found.push(e); if (e.shadowRoot) walk(e.shadowRoot);"
                  " }); walk(document); return found; })()")
        with Chromium(1400, 1000) as browser:
            browser.open(f"http://127.0.0.1:{port}/#mesh")
            browser.wait_until(f"{canvas}.length >= 1", timeout=120)
            browser.pump(5)  # the mesh is fetched and drawn after the card appears
            png = browser.screenshot_of(f"{canvas}[0]")
            assert browser.errors() == []
    finally:
        proc.terminate()
        proc.wait(timeout=20)
    rgb = np.asarray(Image.open(io.BytesIO(png)).convert("RGB")).astype(int)
    coloured = (rgb.max(axis=2) - rgb.min(axis=2)) > 60  # viridis, not the white background
    cols, rows = np.flatnonzero(coloured.any(axis=0)), np.flatnonzero(coloured.any(axis=1))
    # unscaled (x, y, loss) it was a small star seen from above: 0.1 % of the card, 9 % of its width
    assert coloured.mean() > 0.1, coloured.mean()
    assert (cols[-1] - cols[0]) / rgb.shape[1] > 0.6 and (rows[-1] - rows[0]) / rgb.shape[0] > 0.3
