"""``landscape export RUN --format tensorboard``: TensorBoard's reader and server see what our reader sees."""

from __future__ import annotations

import contextlib
import io
import json
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
