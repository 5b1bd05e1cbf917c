"""``landscape compare``: two runs of one network on their shared plane, through the command;
killed and rerun it resumes to the same bits; ``compare_runs`` refuses bad runs before any work."""

from __future__ import annotations

import json
import os
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
    assert "explained variance" in res.stdout and "first: 5 checkpoints" in res.stdout
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
