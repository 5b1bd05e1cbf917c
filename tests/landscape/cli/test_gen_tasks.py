"""``landscape gen`` with tasks: a Hugging Face-style model, two inputs and regression, end to end."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from landscape import read_h5
from tests.landscape import _task_runs

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("kind", ["hf", "two", "regression"])
def test_landscape_gen_with_a_task(kind, tmp_path):
    run = tmp_path / "run"
    _task_runs.train(kind, run)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    res = subprocess.run([sys.executable, "-m", "landscape", "gen", str(run), "--task",
                          f"tests.landscape._task_runs:{kind}_callback"],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    assert "landscape_[1, 3]: 5x5" in res.stdout and "landscape_[3]: 5x5" in res.stdout
    got = read_h5(run / "landscapes.h5")
    # epoch 3's checkpoint (the collector also keeps the initial weights, as epoch 0)
    last = torch.load(next((run / "ckpt_dir").glob("*_3_epoch.pt")), weights_only=True)
    expected = _task_runs.plain_loss(kind, last)
    # the centre of both landscapes (an odd size puts the random one's on the grid) is the last checkpoint:
    # its loss, computed independently
    assert got["landscape_[1, 3]"].path.z[-1] == pytest.approx(expected, rel=1e-5)
    rnd = got["landscape_[3]"]
    assert rnd.convergence_point[2] == pytest.approx(expected, rel=1e-5)
