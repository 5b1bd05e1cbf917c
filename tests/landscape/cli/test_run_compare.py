"""`landscape run` with several networks: Li et al.'s skip-connection comparison at toy size.

Two depth-8 DigitsResNets (with and without shortcuts, 4 maps) trained 3 epochs, a 5x5
Random plane each, then the comparison figure on shared levels and the surface-Hessian
score, which is checked against numpy's eigenvalues of the finite-difference Hessians of
the written surfaces.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from collector.common import InvalidParameterError
from landscape.cli._pipeline import config_from_dict, load_config
from landscape.examples import DigitsResNet

ROOT = Path(__file__).resolve().parents[3]

TINY = """
name = "tiny_shortcuts"
seed = 0
[train]
epochs = 3
batch_size = 64
optimizer = "momentum"
learning_rate = 0.05
momentum = 0.9
[collect]
collect_freq = 10
landscape_size = 5
unit = "epoch"
num_samples = 128
intervals = [[1, 2, 3]]
create_train = false
create_result = true
[generate]
normalization = "filter"
ignore = "biasbn"
[plot]
kinds = ["contour"]
compare = ["contour"]
compare_levels = 12
compare_log = true
[[runs]]
name = "res8"
model = { kind = "resnet", depth = 8, channels = 4, shortcut = true }
[[runs]]
name = "plain8"
model = { kind = "resnet", depth = 8, channels = 4, shortcut = false }
"""


def _numpy_fraction(x: np.ndarray, y: np.ndarray, z: np.ndarray) -> float:
    """Central differences assembled into 2x2 matrices point by point, diagonalised by numpy."""
    hx, hy = x[1] - x[0], y[1] - y[0]
    smallest = []
    for i in range(1, len(y) - 1):
        for j in range(1, len(x) - 1):
            fxx = (z[i, j + 1] - 2 * z[i, j] + z[i, j - 1]) / hx**2
            fyy = (z[i + 1, j] - 2 * z[i, j] + z[i - 1, j]) / hy**2
            fxy = (z[i + 1, j + 1] - z[i + 1, j - 1] - z[i - 1, j + 1] + z[i - 1, j - 1]) / (4 * hx * hy)
            smallest.append(np.linalg.eigvalsh(np.array([[fxx, fxy], [fxy, fyy]]))[0])
    return float(np.mean(np.array(smallest) < 0))


@pytest.fixture(scope="module")
def compare_run(tmp_path_factory) -> tuple[Path, str]:
    tmp = tmp_path_factory.mktemp("shortcuts")
    cfg = tmp / "tiny.toml"
    cfg.write_text(TINY)
    res = subprocess.run([sys.executable, "-m", "landscape", "run", str(cfg), "--out", str(tmp / "out")],
                         capture_output=True, text=True, cwd=tmp, timeout=300)
    assert res.returncode == 0, res.stderr
    return tmp / "out", res.stdout


def test_every_run_and_the_comparison_are_written(compare_run):
    out, _ = compare_run
    assert (out / "compare_contour.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    results = json.loads((out / "results.json").read_text())
    assert list(results["runs"]) == ["res8", "plain8"]
    assert results["figures"][-1] == str(out / "compare_contour.png")
    for name in ("res8", "plain8"):
        assert (out / name / "landscapes.h5").is_file()
        assert (out / name / "plots" / "landscape_3_contour.png").is_file()
        assert sorted(p.name for p in (out / name / "ckpt_dir").glob("*.pt")) == [
            f"DigitsResNet_{e}_epoch.pt" for e in (0, 1, 2, 3)]  # the initial weights, then the intervals


def test_the_score_is_numpys_count_of_negative_hessian_eigenvalues(compare_run):
    import viz

    out, stdout = compare_run
    results = json.loads((out / "results.json").read_text())
    for name in ("res8", "plain8"):
        (ls,) = viz.load_landscapes(out / name / "landscapes.h5")
        x, y, z = (np.asarray(a, dtype=np.float64) for a in (ls.x, ls.y, ls.z))
        assert z.shape == (5, 5) and np.isfinite(z).all()
        np.testing.assert_allclose(x, np.linspace(-1, 1, 5))
        score = results["runs"][name]["surface_nonconvexity"]
        expected = _numpy_fraction(x, y, z)
        assert score["fraction_negative"] == pytest.approx(expected, abs=1e-12)
        assert score["points"] == 9 and score["negative"] == round(9 * expected) and score["nonfinite"] == 0
        assert score["max"] == pytest.approx(float(z.max()), rel=1e-12)
        # printed with the run
        block = stdout.split(f"run {name}:")[1]
        printed = re.search(r"negative 2D-Hessian eigenvalue at (\d+) % of the plane \((\d+)/9", block)
        assert printed and int(printed.group(2)) == score["negative"]
        assert int(printed.group(1)) == round(100 * expected)


def test_bad_model_and_compare_options_are_refused_before_any_work(tmp_path):
    with pytest.raises(InvalidParameterError, match="'model.depth'.*6n \\+ 2.*Got 9"):
        config_from_dict({"runs": [{"name": "r", "model": {"kind": "resnet", "depth": 9}}]})
    with pytest.raises(InvalidParameterError, match="'plot.compare\\[\\]'.*'heatmap'"):
        config_from_dict({"plot": {"compare": ["heatmap"]}})
    with pytest.raises(InvalidParameterError, match="'plot.compare_log'"):
        config_from_dict({"plot": {"compare_log": "yes"}})
    with pytest.raises(InvalidParameterError, match="'shortcut'"):
        DigitsResNet(20, shortcut="no")  # type: ignore[arg-type]


def test_the_li_et_al_configuration_is_the_one_described():
    cfg = load_config(ROOT / "configs" / "digits_resnet_shortcuts.toml")
    assert [(r.model["depth"], r.model["shortcut"]) for r in cfg.runs] == [(20, True), (20, False), (56, True),
                                                                           (56, False)]
    assert (cfg.epochs, cfg.landscape_size, cfg.num_samples, cfg.normalization, cfg.ignore) == (
        15, 21, 1024, "filter", "biasbn")
    layers = [m for m in DigitsResNet(56, 16, shortcut=True).modules() if m.__class__.__name__ in ("Conv2d", "Linear")]
    assert len(layers) == 56 + 2  # 56 weighted layers and the two 1x1 projections where stages start
    plain = [m for m in DigitsResNet(56, 16, shortcut=False).modules() if m.__class__.__name__ in ("Conv2d", "Linear")]
    assert len(plain) == 56


def test_lr_milestones_decay_the_rate_as_torchs_multisteplr():
    """Each step's learning rate under ``[train] lr_milestones`` is MultiStepLR's stepped per epoch."""
    import torch

    from collector.train import Callback, Model
    from landscape.cli._pipeline import _callbacks

    cfg = config_from_dict({"train": {"epochs": 6, "learning_rate": 0.2, "lr_milestones": [2, 4], "lr_gamma": 0.5},
                            "collect": {"intervals": [[1, 2, 3]]}})
    x, y = torch.randn(12, 3), torch.randint(0, 2, (12,))
    loader = [(x[i:i + 4], y[i:i + 4]) for i in range(0, 12, 4)]  # 3 steps per epoch
    net = torch.nn.Linear(3, 2)
    opt = torch.optim.SGD(net.parameters(), lr=0.2)
    seen = []

    class Record(Callback):
        def step_begin(self, run_context):
            seen.append(opt.param_groups[0]["lr"])

    collector, scheduler = _callbacks(cfg, None, steps_per_epoch=3)  # type: ignore[arg-type]
    assert collector is None
    Model(net, torch.nn.CrossEntropyLoss(), opt).train(6, loader, callbacks=[Record(), scheduler])
    ref_opt = torch.optim.SGD(torch.nn.Linear(3, 2).parameters(), lr=0.2)
    sched = torch.optim.lr_scheduler.MultiStepLR(ref_opt, [2, 4], 0.5)
    expected = []
    for _ in range(6):
        expected += [ref_opt.param_groups[0]["lr"]] * 3
        ref_opt.step()  # no gradients: nothing moves, but torch wants it before the scheduler's step
        sched.step()
    assert seen == pytest.approx(expected, rel=1e-15)
    with pytest.raises(InvalidParameterError, match="'train.lr_milestones'.*strictly increasing"):
        config_from_dict({"train": {"epochs": 6, "lr_milestones": [4, 2]}, "collect": {"intervals": [[1, 2, 3]]}})
