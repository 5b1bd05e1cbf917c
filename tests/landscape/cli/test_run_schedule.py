"""`landscape run`: a learning-rate warm-up, a run's own training settings, another seed.

``[train] warmup_epochs`` is checked against torch's own schedulers (LinearLR per step,
MultiStepLR per epoch); ``[runs.train]``/``[runs.collect]`` and ``--seed`` by training the
same networks in a plain PyTorch loop and comparing the weights the run wrote, bit for bit.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from collector.common import InvalidParameterError
from collector.train import Callback, Model
from landscape.cli._pipeline import _callbacks, _optimizer, config_from_dict, run_pipeline
from landscape.examples import DigitsResNet, digits_loader, digits_tensors

ROOT = Path(__file__).resolve().parents[3]
COLLECT = {"landscape_size": 3, "num_samples": 64, "intervals": [[1, 2, 3]], "create_train": False}


def _torch_rates(lr: float, epochs: int, spe: int, warmup: int, milestones: list[int], gamma: float) -> list[float]:
    """Each step's rate under torch's LinearLR warm-up (stepped per step) chained with MultiStepLR."""
    opt = torch.optim.SGD(torch.nn.Linear(1, 1).parameters(), lr=lr)
    scheds: list[torch.optim.lr_scheduler.LRScheduler] = []
    if warmup:
        scheds.append(torch.optim.lr_scheduler.LinearLR(opt, 1 / (warmup * spe), 1.0, warmup * spe - 1))
    scheds.append(torch.optim.lr_scheduler.MultiStepLR(opt, [m * spe for m in milestones], gamma))
    rates = []
    for _ in range(epochs * spe):
        rates.append(opt.param_groups[0]["lr"])
        opt.step()  # no gradients: nothing moves, but torch wants it before the schedulers' steps
        for s in scheds:
            s.step()
    return rates


def _plain_loop(seed: int, depth: int, epochs: int, lr: float, warmup: int, milestones: list[int]) -> dict:
    """A DigitsResNet without shortcuts trained by hand: SGD with momentum, torch's schedulers."""
    torch.manual_seed(seed)
    net = DigitsResNet(depth, 4, shortcut=False)
    loader = digits_loader(64, image=True, seed=seed)
    spe = len(loader)
    opt = torch.optim.SGD(net.parameters(), lr=lr, momentum=0.9)
    scheds: list[torch.optim.lr_scheduler.LRScheduler] = []
    if warmup:
        scheds.append(torch.optim.lr_scheduler.LinearLR(opt, 1 / (warmup * spe), 1.0, warmup * spe - 1))
    scheds.append(torch.optim.lr_scheduler.MultiStepLR(opt, [m * spe for m in milestones], 0.1))
    net.train()
    for _ in range(epochs):
        for x, y in loader:
            opt.zero_grad()
            torch.nn.functional.cross_entropy(net(x), y).backward()
            opt.step()
            for s in scheds:
                s.step()
    return net.state_dict()


def _eval_loss(state: dict, depth: int, num_samples: int) -> float:
    net = DigitsResNet(depth, 4, shortcut=False)
    net.load_state_dict(state)
    net.eval()
    x, y = digits_tensors(True)
    with torch.no_grad():
        return float(torch.nn.functional.cross_entropy(net(x[:num_samples]), y[:num_samples]))


def _assert_same_weights(path: Path, expected: dict) -> None:
    got = torch.load(path, weights_only=True)
    got = got.get("state_dict", got) if isinstance(got, dict) else got
    assert set(got) == set(expected)
    for key, value in expected.items():
        assert torch.equal(got[key], value), key


@pytest.mark.parametrize(("warmup", "milestones"), [(2, [4, 5]), (1, []), (3, [3]), (0, [2])])
def test_warmup_and_milestones_give_torchs_linearlr_and_multisteplr_rates(warmup, milestones):
    cfg = config_from_dict({"train": {"epochs": 6, "learning_rate": 0.2, "lr_milestones": milestones, "lr_gamma": 0.5,
                                      "warmup_epochs": warmup}, "collect": {"intervals": [[1, 2, 3]]}})
    x, y = torch.randn(12, 3), torch.randint(0, 2, (12,))
    loader = [(x[i:i + 4], y[i:i + 4]) for i in range(0, 12, 4)]  # 3 steps per epoch
    net = torch.nn.Linear(3, 2)
    opt = _optimizer(cfg, net.parameters(), 3)
    seen = []

    class Record(Callback):
        def step_begin(self, run_context):
            seen.append(opt.param_groups[0]["lr"])

    collector, *scheduler = _callbacks(cfg, None, steps_per_epoch=3)  # type: ignore[arg-type]
    Model(net, torch.nn.CrossEntropyLoss(), opt).train(6, loader, callbacks=[Record(), *scheduler])
    assert seen == pytest.approx(_torch_rates(0.2, 6, 3, warmup, milestones, 0.5), rel=1e-12)
    if warmup:  # from a warm-up's step's share of the rate up to the full rate at its last step
        assert seen[0] == pytest.approx(0.2 / (3 * warmup)) and seen[3 * warmup - 1] == pytest.approx(0.2)


@pytest.mark.parametrize(("train", "match"), [
    ({"warmup_epochs": 6}, r"'train.warmup_epochs'.*\[0, 5\].*Got 6"),
    ({"warmup_epochs": 3, "lr_milestones": [2]}, r"'train.warmup_epochs'.*\[0, 2\].*Got 3"),
    ({"warmup_epochs": -1}, r"'train.warmup_epochs'.*Got -1"),
    ({"warmup_epochs": 1.5}, r"'train.warmup_epochs'.*int.*Got 1.5"),
    ({"warmup_epochs": True}, r"'train.warmup_epochs'"),
])
def test_a_bad_warmup_is_refused_naming_the_key_and_its_range(train, match):
    with pytest.raises(InvalidParameterError, match=match):
        config_from_dict({"train": {"epochs": 6, **train}, "collect": {"intervals": [[1, 2, 3]]}})


@pytest.mark.parametrize(("run", "match"), [
    ({"trian": {"epochs": 4}}, r"unknown key\(s\) \['trian'\] in runs\[0\] \('r'\).*\[runs.train\]"),
    ({"train": {"epoch": 4}}, r"\[runs.train\] of runs\[0\]: unknown key\(s\) \['epoch'\]; accepted: \['batch_size'"),
    ({"collect": {"landscape_size": 5}}, r"\[runs.collect\] of runs\[0\]: unknown key\(s\) \['landscape_size'\]; "
                                         r"accepted: \['intervals'\]"),
    ({"train": {"epochs": 2}}, r"run 'r': interval epoch 3 is beyond train.epochs=2"),
    ({"train": {"warmup_epochs": 5}}, r"'train.warmup_epochs' parameter of the configuration: run 'r' must be an int "
                                      r"in the range \[0, 3\]. Got 5"),
    ({"train": "fast"}, r"'train' parameter.*dict"),
    ({"collect": {"intervals": [[1, 2]]}}, r"'intervals'\]\[0\]' parameter of the configuration: run 'r' must be a "
                                         r"list of at least three"),
])
def test_a_runs_own_settings_are_checked_in_its_place(run, match):
    with pytest.raises(InvalidParameterError, match=match):
        config_from_dict({"train": {"epochs": 4}, "collect": COLLECT,
                          "runs": [{"name": "r", "model": {"kind": "mlp"}, **run}]})


def test_seed_must_be_one_torch_accepts():
    with pytest.raises(InvalidParameterError, match=r"'seed'.*Got 18446744073709551616"):
        config_from_dict({"seed": 2 ** 64, "collect": {"intervals": [[1, 2, 3]]}})


def test_a_run_trains_with_its_own_schedule_as_a_plain_loop_would(tmp_path):
    """Two runs of one configuration: the first with the shared settings, the second with its
    own epochs, warm-up, milestones and intervals; each run's last checkpoint holds the weights
    a plain PyTorch loop with torch's schedulers reaches, bit for bit."""
    cfg = config_from_dict({
        "seed": 3, "train": {"epochs": 3, "learning_rate": 0.05, "lr_milestones": [2]}, "collect": COLLECT,
        "plot": {"kinds": [], "compare": []},
        "runs": [{"name": "shared", "model": {"kind": "resnet", "depth": 8, "channels": 4, "shortcut": False}},
                 {"name": "own", "model": {"kind": "resnet", "depth": 8, "channels": 4, "shortcut": False},
                  "train": {"epochs": 5, "learning_rate": 0.1, "warmup_epochs": 2, "lr_milestones": [4]},
                  "collect": {"intervals": [[3, 4, 5]]}}]})
    results = run_pipeline(cfg, tmp_path / "out")
    shared = _plain_loop(3, 8, 3, 0.05, 0, [2])
    own = _plain_loop(3, 8, 5, 0.1, 2, [4])
    _assert_same_weights(tmp_path / "out" / "shared" / "ckpt_dir" / "DigitsResNet_3_epoch.pt", shared)
    _assert_same_weights(tmp_path / "out" / "own" / "ckpt_dir" / "DigitsResNet_5_epoch.pt", own)
    assert results["runs"]["shared"]["final_loss"] == pytest.approx(_eval_loss(shared, 8, 64), abs=1e-6)
    assert results["runs"]["own"]["final_loss"] == pytest.approx(_eval_loss(own, 8, 64), abs=1e-6)
    # the plane is centred on the run's own last epoch, and results.json says how each run trained
    assert results["runs"]["own"]["landscapes"] == ["landscape_[5]"]
    assert results["runs"]["shared"]["landscapes"] == ["landscape_[3]"]
    written = json.loads((tmp_path / "out" / "results.json").read_text())
    assert written["seed"] == 3
    assert written["runs"]["own"]["train"]["warmup_epochs"] == 2 and written["runs"]["own"]["train"]["epochs"] == 5
    assert written["runs"]["shared"]["train"]["warmup_epochs"] == 0 and written["runs"]["own"]["intervals"] == [
        [3, 4, 5]]


TINY = """
name = "tiny_seed"
seed = 0
[train]
epochs = 3
learning_rate = 0.05
[collect]
landscape_size = 3
num_samples = 64
intervals = [[1, 2, 3]]
create_train = false
[plot]
kinds = []
[[runs]]
name = "plain8"
model = { kind = "resnet", depth = 8, channels = 4, shortcut = false }
"""


def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "landscape", "run", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=300)


def test_seed_option_trains_from_that_seed(tmp_path):
    cfg = tmp_path / "tiny.toml"
    cfg.write_text(TINY)
    res = _run(str(cfg), "--out", str(tmp_path / "out"), "--seed", "5", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "Seed: 5" in res.stdout
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    assert results["seed"] == 5
    centre = results["runs"]["plain8"]["centre_nonconvexity"]  # on a 3x3 plane: its one interior point
    assert (centre["points"], centre["radius"]) == (1, 0.25)
    assert f"within 0.25 of the centre: negative at {centre['negative']} of 1 interior points" in res.stdout
    _assert_same_weights(tmp_path / "out" / "ckpt_dir" / "DigitsResNet_3_epoch.pt",
                         _plain_loop(5, 8, 3, 0.05, 0, []))


@pytest.mark.parametrize(("seed", "message"), [
    ("18446744073709551616", "'seed'"),
    ("two", "--seed: expected an int >= 0; got 'two'"),
    ("-1", "--seed: expected an int >= 0; got -1"),
])
def test_a_bad_seed_option_is_refused_before_any_work(tmp_path, seed, message):
    cfg = tmp_path / "tiny.toml"
    cfg.write_text(TINY)
    res = _run(str(cfg), "--out", str(tmp_path / "out"), "--seed", seed, cwd=tmp_path)
    assert res.returncode == 2 and message in res.stderr
    assert not (tmp_path / "out").exists()


def test_the_centre_score_is_numpys_count_within_the_radius():
    """On a 21x21 plane over [-1, 1]^2: the 21 interior points within 0.25 of the origin, each
    Hessian assembled from central differences and diagonalised by numpy; a NaN value leaves
    out the points whose stencil holds it."""
    import numpy as np

    from landscape.cli._scores import centre_nonconvexity
    from landscape.result import Landscape

    s = np.linspace(-1, 1, 21)
    gx, gy = np.meshgrid(s, s)
    z = gx**2 + 0.5 * gy**2 - 8 * gx**2 * gy**2 + 0.3 * gx * gy  # a saddle-ridged bowl
    z[10, 12] = np.nan  # at (0.2, 0): the stencils of the 9 points around it are undefined
    score = centre_nonconvexity(Landscape(x=s, y=s.copy(), z=z))
    expected = {"negative": 0, "points": 0, "undefined": 0}
    for i in range(1, 20):
        for j in range(1, 20):
            if np.hypot(s[j], s[i]) > 0.25 + 1e-12:
                continue
            block = z[i - 1:i + 2, j - 1:j + 2]
            if not np.isfinite(block).all():
                expected["undefined"] += 1
                continue
            h = 0.1
            fxx = (z[i, j + 1] - 2 * z[i, j] + z[i, j - 1]) / h**2
            fyy = (z[i + 1, j] - 2 * z[i, j] + z[i - 1, j]) / h**2
            fxy = (z[i + 1, j + 1] - z[i + 1, j - 1] - z[i - 1, j + 1] + z[i - 1, j - 1]) / (4 * h * h)
            expected["points"] += 1
            expected["negative"] += int(np.linalg.eigvalsh(np.array([[fxx, fxy], [fxy, fyy]]))[0] < 0)
    assert expected["points"] + expected["undefined"] == 21 and 0 < expected["negative"] < expected["points"]
    assert {k: score[k] for k in expected} == expected
    assert score["fraction_negative"] == expected["negative"] / expected["points"] and score["radius"] == 0.25


def test_the_li_et_al_configuration_trains_the_plain_resnet56_on_its_own_schedule():
    """configs/digits_resnet_shortcuts.toml: the plain ResNet-56 alone trains longer, warmed up,
    and its plane is centred on its own last epoch; the other three share [train]."""
    from landscape.cli._pipeline import load_config
    from landscape.cli._training import effective_config

    cfg = load_config(ROOT / "configs" / "digits_resnet_shortcuts.toml")
    own = {run.name: effective_config(cfg, run) for run in cfg.runs}
    plain = own.pop("ResNet-56-noshort")
    assert (plain.epochs, plain.warmup_epochs, plain.lr_milestones, plain.intervals[-1][-1]) == (60, 5, [45, 55], 60)
    for run in own.values():
        assert run == cfg and (run.epochs, run.warmup_epochs, run.intervals[-1][-1]) == (15, 0, 15)
