"""The eigen-ratio surface end to end: resumable storage, the command, plots, exports, the
pipeline's chance-level check."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from matplotlib.figure import Figure

import viz
from collector.common import InvalidParameterError
from landscape import Landscape, SummaryLandscape, read_h5
from landscape.cli._gen import with_eigen_ratio
from landscape.cli._pipeline import CHANCE_LOSS, config_from_dict, training_note
from landscape.curvature import EigenRatio
from landscape.engine import _planner as _evaluate
from landscape.engine._engine import Engine
from tests.landscape import _gen_task

ROOT = Path(__file__).resolve().parents[3]
OVERRIDE = {"landscape_size": 4, "create_landscape": {"train": False, "result": True}}


def _task_with_ratio(tol: float = 1e-4):
    def task():
        model, net, data, _ = _gen_task.task()
        return model, net, data, {"eigen_ratio": EigenRatio(tol=tol)}

    return task


def test_eigen_ratio_resumes_after_an_interruption(summary_dir, tmp_path, monkeypatch):
    monkeypatch.setattr(_evaluate, "CALL_BYTES", 0)  # one point per call: several chunks
    ref = SummaryLandscape(summary_dir).gen_landscapes_with_multi_process(
        _task_with_ratio(), collect_landscape=OVERRIDE, output=tmp_path / "ref")[-1]
    assert np.isfinite(ref.surfaces["eigen_ratio"]).all()
    calls = []
    original = Engine.evaluate

    def dying(self, pts, start=0, **kw):
        calls.append(len(pts))
        if len(calls) == 3:
            raise KeyboardInterrupt
        return original(self, pts, start, **kw)

    monkeypatch.setattr(Engine, "evaluate", dying)
    out = tmp_path / "out"
    sl = SummaryLandscape(summary_dir)
    with pytest.raises(KeyboardInterrupt):
        sl.gen_landscapes_with_multi_process(_task_with_ratio(), collect_landscape=OVERRIDE, output=out)
    asked = []
    monkeypatch.setattr(Engine, "evaluate", lambda self, pts, start=0, **kw: asked.append(len(pts)) or
                        original(self, pts, start, **kw))
    again = sl.gen_landscapes_with_multi_process(_task_with_ratio(), collect_landscape=OVERRIDE, output=out)[-1]
    # only the points not flushed before the interruption (4x4 and the exact centre: 17)
    assert sum(asked) == 17 - sum(calls[:2])
    np.testing.assert_array_equal(again.surfaces["eigen_ratio"], ref.surfaces["eigen_ratio"])
    np.testing.assert_array_equal(again.z, ref.z)
    stored = read_h5(out / "landscapes.h5")["landscape_[6]"]
    np.testing.assert_array_equal(stored.surfaces["eigen_ratio"], ref.surfaces["eigen_ratio"])
    # the map's settings are part of the landscape's definition
    with pytest.raises(ValueError, match="point_metrics"):
        sl.gen_landscapes_with_multi_process(_task_with_ratio(tol=1e-3), collect_landscape=OVERRIDE, output=out)


def test_gen_eigen_ratio_then_plot_and_export(summary_dir, tmp_path):
    out = tmp_path / "out"
    run = lambda *a: subprocess.run([sys.executable, "-m", "landscape", *a], capture_output=True, text=True,
                                    cwd=ROOT, timeout=300)
    res = run("gen", str(summary_dir), "--task", "tests.landscape._gen_task:task", "--output", str(out), "--size",
              "3", "--eigen-ratio")
    assert res.returncode == 0, res.stderr
    landscapes = read_h5(out / "landscapes.h5")
    assert all(ls.surfaces["eigen_ratio"].shape == (3, 3) for ls in landscapes.values())
    res = run("plot", str(out / "landscapes.h5"), "--kind", "eigen-ratio", "--tag", "landscape_[6]", "-o",
              str(tmp_path / "ratio.png"))
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "ratio.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    res = run("export", str(out / "landscapes.h5"), "--format", "csv", "--tag", "landscape_[6]", "-o", str(tmp_path))
    assert res.returncode == 0, res.stderr
    header = next(iter(tmp_path.glob("*.csv"))).read_text().splitlines()[0]
    assert header == "x,y,loss,eigen_ratio"


def test_with_eigen_ratio_keeps_the_users_metrics():
    got = with_eigen_ratio(lambda: (None, None, None, ["accuracy"]))()
    assert sorted(got[3]) == ["accuracy", "eigen_ratio"] and isinstance(got[3]["eigen_ratio"], EigenRatio)
    got = with_eigen_ratio(lambda: (None, None, None, None, "task"))()
    assert list(got[3]) == ["eigen_ratio"] and got[4] == "task"


def _ratio_landscape(note=None):
    s = np.linspace(-1, 1, 9)
    z = 0.5 + s[None, :] ** 2 + s[:, None] ** 2
    ratio = 0.05 + 0.4 * (s[None, :] ** 2 + s[:, None] ** 2)
    md = {"decomposition": "Random"}
    if note:
        md["note"] = note
    return Landscape(x=s, y=s.copy(), z=z, convergence_point=(0.0, 0.0, 0.5), metadata=md,
                     surfaces={"eigen_ratio": ratio}, tag="landscape_[10]")


def test_plot_eigen_ratio_colours_and_scale():
    ls = _ratio_landscape()
    ax = viz.plot(ls, "eigen-ratio")
    (mesh,) = [c for c in ax.collections if c.get_gid() == "eigen_ratio"]
    assert mesh.norm.vmin == 0.0 and mesh.norm.vmax == pytest.approx(ls.surfaces["eigen_ratio"].max())
    assert mesh.cmap.name.startswith("RdYlBu_r")  # blue low (convex), red high
    assert mesh.cmap(0.0)[2] > mesh.cmap(0.0)[0] and mesh.cmap(1.0)[0] > mesh.cmap(1.0)[2]
    assert [c for c in ax.collections if c.get_gid() == "loss_lines"]
    assert "|λmin/λmax|" in ax.get_title()
    ax = viz.plot_eigen_ratio(ls, vmax=2.0, colorbar=False)
    (mesh,) = [c for c in ax.collections if c.get_gid() == "eigen_ratio"]
    assert mesh.norm.vmax == 2.0
    with pytest.raises(InvalidParameterError, match="'surface' parameter of plot_eigen_ratio"):
        viz.plot_eigen_ratio(ls, surface="nope")
    fig = viz.compare_eigen_ratio({"plain": ls, "residual": _ratio_landscape(note="centre at chance level")})
    assert isinstance(fig, Figure) and len(fig.axes) == 6  # 4 panels and 2 colour bars
    assert any("centre at chance level" in a.get_title() for a in fig.axes)


def test_title_carries_the_note():
    ax = viz.plot(_ratio_landscape(note="centre at chance level: loss 2.302"), "filled")
    assert "centre at chance level" in ax.get_title()


def test_training_note():
    assert training_note(2.31, 2.3025).startswith("centre at chance level")
    assert training_note(1.0, 0.95).startswith("training loss never fell")
    assert training_note(2.3, 0.1) is None
    assert "diverged" in training_note(2.3, float("nan"))
    assert CHANCE_LOSS == pytest.approx(2.302585)


def test_curvature_config_section():
    cfg = config_from_dict({"curvature": {"eigen_ratio": True, "size": 9, "tol": 1e-3, "dtype": "float64"}})
    assert cfg.eigen_ratio and cfg.curvature_size == 9 and cfg.curvature_dtype == "float64"
    with pytest.raises(InvalidParameterError, match="curvature.size"):
        config_from_dict({"curvature": {"size": 1}})
    with pytest.raises(InvalidParameterError, match="unknown key"):
        config_from_dict({"curvature": {"grid": 3}})
