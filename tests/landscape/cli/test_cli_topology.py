"""``landscape topology RUN`` and ``landscape gen --view grid``: what they print against grid_topology
of the files' grids, and their refusals."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from landscape import Landscape, read_h5, write_h5
from landscape.cli._main import main
from landscape.topology import grid_topology
from tests.landscape._helpers import usage_error

ROOT = Path(__file__).resolve().parents[3]


def _wells() -> np.ndarray:
    x = np.linspace(-2, 2, 41)
    gx, gy = np.meshgrid(x, x, indexing="xy")
    return -(np.exp(-((gx - 1) ** 2 + gy ** 2) / 0.3) + 0.5 * np.exp(-((gx + 1) ** 2 + gy ** 2) / 0.3)) \
        + 0.05 * (gx ** 2 + gy ** 2)


@pytest.fixture
def h5(tmp_path) -> Path:
    x = np.linspace(-2, 2, 41)
    alpha = np.linspace(-0.5, 1.5, 41)
    line = np.cos(2 * np.pi * alpha) * 0.2 + 0.1 * alpha
    line[5] = np.nan
    path = tmp_path / "landscapes.h5"
    write_h5(path, [Landscape(x=x, y=x, z=_wells(), tag="wells", metadata={"centre": [0.0, 0.0, 0.0]}),
                    Landscape(x=alpha, y=np.zeros(0), z=line, tag="line")])
    return path


def test_topology_prints_every_landscape(h5, capsys):
    assert main(["topology", str(h5)]) == 0
    lines = dict(line.split(": ", 1) for line in capsys.readouterr().out.strip().splitlines())
    stored = read_h5(h5)
    assert lines == {tag: grid_topology(ls.z, axes=[ls.x] if ls.dims == 1 else None).summary()
                     for tag, ls in stored.items()}
    assert "2 minima, 1 saddle, 1 finite pair" in lines["wells"] and "SMAD 0.649183" in lines["wells"]
    assert "1 of 41 points non-finite, left out" in lines["line"] and "; barriers 0.1582 at x=0," in lines["line"]


def test_topology_options_and_json(h5, capsys):
    assert main(["topology", str(h5), "--tag", "wells", "--connectivity", "full", "--threshold", "0.5",
                 "--basin", "0.2"]) == 0
    out = capsys.readouterr().out
    assert "full connectivity, threshold 0.5: 1 minimum, 0 saddles" in out
    basin = grid_topology(_wells(), connectivity="full", threshold=0.5).basin(0.2, at=(20, 20))
    assert f"{basin.points} points" in out and ("does not hold the centre" in out) is not basin.contains
    assert main(["topology", str(h5), "--json", "--basin", "0.1"]) == 0
    got = {r["tag"]: r for r in json.loads(capsys.readouterr().out)}
    assert got["wells"]["minima"] == 2 and got["wells"]["smad"] == pytest.approx(0.649183, rel=1e-6)
    assert got["wells"]["connectivity"] == "axis" and got["wells"]["threshold"] == 0.0
    want = grid_topology(read_h5(h5)["line"].z).barriers()
    assert [b["height"] for b in got["line"]["barriers"]] == [b.height for b in want]
    assert got["line"]["non_finite"] == 1


@pytest.mark.parametrize("argv, fragment", [
    (["--threshold", "-1"], "argument --threshold: expected a finite number >= 0"),
    (["--threshold", "nan"], "argument --threshold: expected a finite number >= 0"),
    (["--basin", "x"], "argument --basin: expected a number >= 0"),
    (["--connectivity", "diagonal"], "argument --connectivity: invalid choice"),
    (["--tag", "nope"], "--tag 'nope' not found"),
])
def test_topology_refusals(h5, capsys, argv, fragment):
    err = usage_error(["topology", str(h5), *argv], capsys)
    assert fragment in err and len(err.strip().splitlines()) == 1


def test_gen_grid_then_topology(summary_dir, tmp_path, capsys, monkeypatch):
    """A 3-D grid along the top Hessian directions through the command, then summarised."""
    monkeypatch.chdir(ROOT)
    out = tmp_path / "out"
    argv = ["gen", str(summary_dir), "--task", "tests.landscape._gen_task:task", "--output", str(out),
            "--view", "grid", "--dims", "3", "--directions", "hessian", "--size", "3"]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "hessian_3d_[6]: 3x3x3, min loss" in printed and "evaluated 27 of 27 points" in printed
    assert "(landscapes.h5)" in printed and not [f for f in os.listdir(out) if "summary" in f]
    grid = read_h5(out / "landscapes.h5")["hessian_3d_[6]"]
    assert grid.z.shape == (3, 3, 3) and len(grid.metadata["hessian_eigenvalues"]) == 3
    assert main(["topology", str(out)]) == 0
    assert capsys.readouterr().out.strip() == f"hessian_3d_[6]: {grid_topology(grid.z).summary()}"


@pytest.mark.parametrize("extra, fragment", [
    (["--dims", "3"], "--dims and --directions are for --view grid; got no --view"),
    (["--view", "line", "--directions", "hessian"], "--dims and --directions are for --view grid; got --view line"),
    (["--view", "grid", "--dims", "9"], "--dims must be 2 to 6"),
    (["--view", "grid", "--dims", "3", "--memory", "lean"], "--memory lean does not apply to an n-D grid"),
    (["--view", "grid", "--between", "1,6"], "--between 1,6 needs --view interpolation, plane or target"),
])
def test_gen_grid_refusals_before_any_work(summary_dir, tmp_path, capsys, monkeypatch, extra, fragment):
    monkeypatch.chdir(ROOT)
    out = tmp_path / "out"
    err = usage_error(["gen", str(summary_dir), "--task", "tests.landscape._gen_task:task", "--output", str(out),
                       *extra], capsys)
    assert fragment in err and not out.exists()
