"""`landscape gen --view ...`, then `plot` and `export` of the views, through subprocess."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np

from landscape import read_h5

ROOT = Path(__file__).resolve().parents[3]
TASK = "tests.landscape._gen_task:task"


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "landscape", *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=300)


def test_gen_views_then_plot_and_export(summary_dir, tmp_path):
    out = tmp_path / "views"
    runs = [("--view", "interpolation", "--between", "1,6", "--x=-0.5:1.5:9"),
            ("--view", "plane", "--between", "1,4,6", "--size", "4"),
            ("--view", "target", "--second", "pca", "--x=-0.2:1.2:5", "--y=-0.3:0.1:3"),
            ("--view", "line", "--x=-1:1:5", "--normalization", "filter", "--biasbn", "li", "--include", "fc*")]
    for args in runs:
        res = _run("gen", str(summary_dir), "--task", TASK, "--output", str(out), *args)
        assert res.returncode == 0, res.stderr
    found = read_h5(out / "landscapes.h5")
    assert sorted(found) == ["interpolation_[1, 6]", "line_[6]", "plane_[1, 4, 6]", "target_[1, 6]"]
    interp = found["interpolation_[1, 6]"]
    assert interp.z.shape == (9,) and list(interp.markers) == ["A", "B"]
    assert found["target_[1, 6]"].z.shape == (3, 5) and found["target_[1, 6]"].path.intervals == [1, 2, 3, 4, 5, 6]
    line = found["line_[6]"]
    assert line.metadata["biasbn"] == "li" and line.metadata["normalization"] == "filter"
    assert line.metadata["moved_parameters"] == ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]
    assert list(found["plane_[1, 4, 6]"].markers) == ["A", "B", "C"]
    res = _run("plot", str(out), "--kind", "all")
    assert res.returncode == 0, res.stderr
    names = sorted(Path(p).name for p in res.stdout.split())
    assert "interpolation_1_6_line.png" in names and "plane_1_4_6_all.png" in names
    assert "line_6_line.png" in names and not any(n.startswith("line_6_contour") for n in names)
    res = _run("plot", str(out), "--kind", "line")
    assert sorted(Path(p).name for p in res.stdout.split()) == ["interpolation_1_6_line.png", "line_6_line.png"]
    # the line's csv and vtp are tested through viz.export (tests/viz/io/test_export_lines.py)
    res = _run("export", str(out), "--format", "h5", "--tag", "interpolation_[1, 6]")
    assert res.returncode == 0, res.stderr
    back = read_h5(out / "export" / "interpolation_1_6.h5")["interpolation_[1, 6]"]
    np.testing.assert_array_equal(back.z, interp.z)


def test_gen_view_usage_errors(summary_dir, tmp_path):
    res = _run("gen", str(summary_dir), "--task", TASK, "--output", str(tmp_path), "--x=1:0:5")
    assert res.returncode == 2 and "argument --x: expected MIN:MAX:NUM with finite MIN < MAX" in res.stderr
    res = _run("gen", str(summary_dir), "--task", TASK, "--x", "a:b")
    assert res.returncode == 2 and "MIN:MAX:NUM" in res.stderr
    res = _run("gen", str(summary_dir), "--task", TASK, "--output", str(tmp_path), "--view", "plane",
               "--between", "1,6")
    assert res.returncode == 2 and "--between must be 3 checkpoints for --view plane; got 2" in res.stderr
    res = _run("gen", str(summary_dir), "--task", TASK, "--output", str(tmp_path), "--ignore", "conv*")
    assert res.returncode == 2 and "'ignore' pattern 'conv*' matches no parameter" in res.stderr
