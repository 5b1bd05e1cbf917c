"""``landscape compare``: two runs of one network on their shared plane, through the command;
killed and rerun it resumes to the same bits; ``compare_runs`` refuses bad runs before any work."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest
import torch

from collector.common import InvalidParameterError
from landscape import compare_runs, read_h5
from tests.landscape import _gen_task
from tests.landscape._helpers import TinyMLP, make_data, train_trajectory

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def _run(folder, seed):
    """A run written by hand as SummaryCollector leaves it: from the same start, another data order."""
    torch.manual_seed(0)
    net = TinyMLP()
    start = {k: v.clone() for k, v in net.state_dict().items()}
    x, y = make_data(seed=seed)
    traj = [start, *train_trajectory(net, x, y, n_ckpt=4)]
    ckpt = folder / "ckpt_dir"
    ckpt.mkdir(parents=True)
    files = {}
    for i, sd in enumerate(traj):
        files[str(i)] = f"TinyMLP_{i}_epoch.pt"
        torch.save(sd, ckpt / files[str(i)])
    md = {"epoch_group": {"0": list(range(len(traj)))}, "model_params_file_map": files, "step_per_epoch": 4,
          "unit": "epoch", "num_samples": 64, "landscape_size": 4, "create_landscape": {"train": True, "result": True}}
    (ckpt / "train_metadata.json").write_text(json.dumps(md))
    return folder


def _compare(runs, out, *extra):
    cmd = [sys.executable, "-m", "landscape", "compare", *map(str, runs), "--task", "tests.landscape._gen_task:task",
           "-o", str(out), "--size", "5", *extra]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_two_runs_on_their_shared_plane_through_the_command(tmp_path):
    runs = [_run(tmp_path / "first", 0), _run(tmp_path / "second", 1)]
    res = _compare(runs, tmp_path / "cmp", "--centre", "start")
    assert res.returncode == 0, res.stderr[-2000:]
    assert "PCA explained variance (before normalization)" in res.stdout and "first (epochs 0-4):" in res.stdout
    (ls,) = read_h5(tmp_path / "cmp" / "landscapes.h5").values()
    assert list(ls.paths) == ["first", "second"]
    assert ls.paths["first"].x[0] == ls.paths["second"].x[0] == 0.0  # the common start is the centre
    assert sum(ls.metadata["explained_variance_ratio"]) <= 1.0
    assert set(ls.metadata["path_distance"]) == {"first", "second"}
    # the same in Python, from the same checkpoint files: the same bits
    again = compare_runs(runs, _gen_task.task, tmp_path / "py", centre="start", size=5)
    for name in ls.paths:
        np.testing.assert_array_equal(again.paths[name].z, ls.paths[name].z)
    np.testing.assert_array_equal(again.z, ls.z)
    # a rerun into the same folder has nothing to do and gives the same landscape
    res = _compare(runs, tmp_path / "cmp", "--centre", "start")
    assert res.returncode == 0, res.stderr[-2000:]
    np.testing.assert_array_equal(next(iter(read_h5(tmp_path / "cmp" / "landscapes.h5").values())).z, ls.z)
    # another centre is another landscape: refused until --restart
    res = _compare(runs, tmp_path / "cmp", "--centre", "mean")
    assert res.returncode != 0 and "centre_on" in res.stderr


def test_the_printed_share_of_movement_is_the_stored_planes(tmp_path):
    """At the defaults the printed share of the runs' movement in the plane, each checkpoint's distance off it
    and the largest, named, are what the plane stored in landscapes.h5 holds: the checkpoint files projected
    on its directions here, in float64 with numpy."""
    runs = [_run(tmp_path / "first", 0), _run(tmp_path / "second", 1)]
    res = _compare(runs, tmp_path / "cmp")
    assert res.returncode == 0, res.stderr[-2000:]
    (ls,) = read_h5(tmp_path / "cmp" / "landscapes.h5").values()
    v, w = ls.directions()
    names = list(v)
    q, _ = np.linalg.qr(np.stack([np.concatenate([d[k].double().numpy().ravel() for k in names]) for d in (v, w)],
                                 axis=1))

    def flat(path):
        sd = torch.load(path, weights_only=True)
        return np.concatenate([sd[k].double().numpy().ravel() for k in names])

    files = {run.name: [run / "ckpt_dir" / f"TinyMLP_{i}_epoch.pt" for i in range(5)] for run in runs}
    centre = flat(files["first"][-1])  # the default centre: the first run's end
    d = np.stack([flat(f) - centre for run in files.values() for f in run])
    share = ((d @ q) ** 2).sum() / (d ** 2).sum()
    printed = re.search(r"in the drawn plane: ([0-9.]+) % of the runs' movement", res.stdout)
    assert printed is not None, res.stdout
    assert float(printed.group(1)) / 100 == pytest.approx(share, abs=1e-6)
    assert ls.metadata["movement_in_plane"] == pytest.approx(share, abs=1e-6)
    assert (ls.metadata["pca_method"], ls.metadata["normalization"]) == ("uncentred", "none")
    norms = np.linalg.norm(d, axis=1)
    off = np.linalg.norm(d - (d @ q) @ q.T, axis=1) / np.where(norms > 0, norms, 1.0)
    np.testing.assert_allclose(ls.metadata["path_distance"]["first"] + ls.metadata["path_distance"]["second"], off,
                               atol=1e-5)
    k = int(np.argmax(off))
    assert f"largest: {100 * off[k]:.1f} % (run {['first', 'second'][k // 5]}, epoch {k % 5})" in res.stdout
    assert "at most" not in res.stdout


def test_compare_runs_refuses_before_any_work(tmp_path):
    runs = [_run(tmp_path / "a", 0), _run(tmp_path / "b", 1)]
    called = []

    def task():
        called.append(1)
        return _gen_task.task()

    with pytest.raises(InvalidParameterError, match="'centre' parameter .* must be"):
        compare_runs(runs, task, tmp_path / "out", centre="last")
    with pytest.raises(InvalidParameterError, match="at least 2 runs"):
        compare_runs(runs[:1], task, tmp_path / "out")
    with pytest.raises(InvalidParameterError, match="'size' parameter"):
        compare_runs(runs, task, tmp_path / "out", size=2)
    assert not called and not (tmp_path / "out").exists()
