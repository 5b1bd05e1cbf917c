"""A small regression problem whose data or loss is bad in one of the ways every entry point refuses,
and ``--task`` functions returning it, for the refusal tests (Python and the command line).

``LANDSCAPE_TEST_FORWARDS`` (a file path) makes every forward of :class:`Regressor` append one
character to that file, so that a test can count the forwards of a command it ran in a subprocess.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import torch
from torch import nn

from landscape.tasks import Supervised

N = 96


class Regressor(nn.Module):
    """8 -> 16 -> 1, counting its forwards (``calls``, and the file ``LANDSCAPE_TEST_FORWARDS`` names)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(8, 16)
        self.fc2 = nn.Linear(16, 1)
        self.calls = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        where = os.environ.get("LANDSCAPE_TEST_FORWARDS")
        if where:
            with open(where, "a") as fh:
                fh.write("f")
        return self.fc2(torch.tanh(self.fc1(x)))


def data(kind: str = "good") -> tuple[torch.Tensor, torch.Tensor]:
    """``(x, y)`` of N samples, y of shape (N, 1); "nan": sample 70 holds a NaN input; "broadcast": y of shape (N,)."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(N, 8, generator=g)
    y = (x[:, :1] - 0.5 * x[:, 1:2]).clone()
    if kind == "nan":
        x[70, 3] = float("nan")
    if kind == "broadcast":
        y = y.reshape(-1)
    return x, y


def loss_fn(kind: str = "good") -> nn.Module:
    return nn.MSELoss(reduction="none") if kind == "per_sample" else nn.MSELoss()


CASES = ("nan", "per_sample", "broadcast")
#: What each refusal says (a regular expression): the cause, and the fix.
MESSAGES = {
    "nan": r"NaN on samples 0-95: the inputs hold 1 NaN value\(s\) \(sample 70\).*HINT: drop or impute",
    "per_sample": r"loss_fn of .* returned a tensor of shape \(96, 1\) for a batch of 96 samples.*one number per "
                  r"batch.*HINT: use its 'mean' reduction",
    "broadcast": r"outputs have shape \(96, 1\) and the targets \(96,\): MSELoss broadcasts them to \(96, 96\).*"
                 r"HINT: reshape the targets",
}


def write_run(folder: Path, *, seed: int = 0, checkpoints: int = 4) -> Path:
    """A run as SummaryCollector leaves it (checkpoints numbered by epoch, their metadata), written by hand:
    the Regressor's weights drifting from one start (the same for every seed)."""
    torch.manual_seed(0)
    start = {k: v.detach().clone() for k, v in Regressor().state_dict().items()}
    g = torch.Generator().manual_seed(seed + 1)
    drift = {k: 0.1 * torch.randn(v.shape, generator=g) for k, v in start.items()}
    states = [start] + [{k: v + (i + 1) * drift[k] + 0.02 * torch.randn(v.shape, generator=g)
                         for k, v in start.items()} for i in range(checkpoints)]
    ckpt = folder / "ckpt_dir"
    ckpt.mkdir(parents=True)
    files = {}
    for i, sd in enumerate(states):
        files[str(i)] = f"Regressor_{i}_epoch.pt"
        torch.save(sd, ckpt / files[str(i)])
    md = {"epoch_group": {"0": list(range(len(states)))}, "model_params_file_map": files, "step_per_epoch": 4,
          "unit": "epoch", "num_samples": N, "landscape_size": 3,
          "create_landscape": {"train": True, "result": True}}
    (ckpt / "train_metadata.json").write_text(json.dumps(md))
    return folder


class _Model:
    def __init__(self, kind: str) -> None:
        self.loss_fn = loss_fn(kind)


def _task(kind: str) -> tuple:
    return _Model(kind), Regressor(), data(kind), None


def nan() -> tuple:
    return _task("nan")


def per_sample() -> tuple:
    return _task("per_sample")


def broadcast() -> tuple:
    return _task("broadcast")


def good() -> tuple:
    return _task("good")


def as_task(kind: str) -> tuple:
    """The same problem with its loss as a task (the fifth item)."""
    model, net, xy, metrics = _task(kind)
    return model, net, xy, metrics, Supervised(loss_fn(kind))
