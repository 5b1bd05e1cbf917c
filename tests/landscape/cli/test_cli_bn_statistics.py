"""`landscape gen --view interpolation` through a BatchNorm network, by the command: the default
estimates the statistics again at every point (equal to a hand-written bn_update and eval forward),
and ``--bn-statistics clamped`` counts its clamps in the summary line and landscapes.h5."""

from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import torch
from torch import nn

from landscape import read_h5
from tests.landscape._helpers import TinyMLP, make_data

ROOT = Path(__file__).resolve().parents[3]
TASK = "tests.landscape._gen_task:task"
ALPHAS = np.linspace(-0.5, 1.5, 9)


def _gen(run: Path, out: Path, *args: str) -> subprocess.CompletedProcess:
    res = subprocess.run([sys.executable, "-m", "landscape", "gen", str(run), "--task", TASK, "--output", str(out),
                          "--view", "interpolation", "--between", "1,6", "--x=-0.5:1.5:9", *args],
                         capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert res.returncode == 0, res.stderr
    return res


def _checkpoint(run: Path, i: int) -> dict:
    return torch.load(run / "ckpt_dir" / f"TinyMLP_{i}_epoch.pt", weights_only=True)


def _reference(a: dict, b: dict, n: int, batch: int) -> np.ndarray:
    """Every alpha by hand: the interpolated weights, batch-norm statistics estimated again on the
    landscape's samples in train mode (each batch weighted by its samples), then the eval loss."""
    x, y = make_data()  # what the task gives, in its order
    x, y = x[:n], y[:n]
    net = TinyMLP()
    out = []
    for alpha in ALPHAS:
        state = {k: (1 - alpha) * a[k] + alpha * b[k] if a[k].is_floating_point() and "running" not in k else a[k]
                 for k in a}
        net.load_state_dict(state)
        net.bn.reset_running_stats()
        net.train()
        with torch.no_grad():
            seen = 0
            for lo in range(0, n, batch):
                k = min(batch, n - lo)
                net.bn.momentum = k / (seen + k)
                net(x[lo:lo + k])
                seen += k
            net.eval()
            out.append(float(nn.functional.cross_entropy(net(x), y)))
    return np.array(out)


def test_the_default_estimates_the_statistics_again_at_every_point(summary_dir, tmp_path):
    _gen(summary_dir, tmp_path / "out")
    ls = read_h5(tmp_path / "out" / "landscapes.h5")["interpolation_[1, 6]"]
    assert ls.metadata["bn_statistics"] == "recompute" and ls.clamped is None
    assert np.isfinite(ls.z).all()
    want = _reference(_checkpoint(summary_dir, 1), _checkpoint(summary_dir, 6), int(ls.metadata["num_samples"]),
                      int(ls.metadata["eval_batch"]))
    np.testing.assert_allclose(ls.z, want, rtol=1e-5)


def test_clamped_statistics_are_counted_in_the_summary_line_and_the_file(summary_dir, tmp_path):
    # epoch 6's running variances four times epoch 1's: at alpha = -0.5 all 16 channels turn negative
    a, b = _checkpoint(summary_dir, 1), copy.deepcopy(_checkpoint(summary_dir, 6))
    b["bn.running_var"] = 4.0 * a["bn.running_var"]
    path = summary_dir / "ckpt_dir" / "TinyMLP_6_epoch.pt"
    path.chmod(0o644)
    torch.save(b, path)
    res = _gen(summary_dir, tmp_path / "out", "--bn-statistics", "clamped")
    said = "1 of 9 points with batch-norm variances clamped at zero (up to 16 channels)"
    assert said in res.stdout, res.stdout
    ls = read_h5(tmp_path / "out" / "landscapes.h5")["interpolation_[1, 6]"]
    np.testing.assert_array_equal(ls.clamped, [16, 0, 0, 0, 0, 0, 0, 0, 0])
    with h5py.File(tmp_path / "out" / "landscapes.h5", "r") as fh:
        g = fh["interpolation_[1, 6]"]
        assert g.attrs["clamped_points"] == 1 and g.attrs["clamped_channels_max"] == 16
