"""Runs with tasks for ``landscape gen``: a Hugging Face-style model, two inputs, regression.

Each ``*_callback`` is what a user's ``--task MODULE:FUNCTION`` gives: ``(model, network,
dataset, metrics, task)``. ``train(kind, summary_dir)`` collects a small run of that kind
with SummaryCollector's plain-loop API.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from collector import SummaryCollector
from landscape.tasks import HuggingFace, Supervised, regression
from tests.landscape.engine.test_tasks import HFLike, TwoInputs


def _tokens(n: int = 64) -> list[dict[str, torch.Tensor]]:
    g = torch.Generator().manual_seed(5)
    ids = torch.randint(0, 30, (n, 7), generator=g)
    labels = torch.roll(ids, -1, dims=1)
    return [{"input_ids": ids[s:s + 16], "labels": labels[s:s + 16]} for s in range(0, n, 16)]


def _pairs(n: int = 64) -> list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(6)
    x, z = torch.randn(n, 4, generator=g), torch.randn(n, 3, generator=g)
    y = ((x.sum(1) + z.sum(1)) > 0).long()
    return [(x[s:s + 16], z[s:s + 16], y[s:s + 16]) for s in range(0, n, 16)]


def _curve(n: int = 64) -> list[tuple[torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(7)
    x = torch.randn(n, 3, generator=g)
    y = torch.sin(x.sum(1, keepdim=True))
    return [(x[s:s + 16], y[s:s + 16]) for s in range(0, n, 16)]


def _regressor() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(3, 16), nn.Tanh(), nn.Linear(16, 1))


KINDS = {
    "hf": (HFLike, _tokens, HuggingFace()),
    "two": (TwoInputs, _pairs, Supervised(nn.CrossEntropyLoss(), inputs=lambda b: (b[0], b[1]), targets=2)),
    "regression": (_regressor, _curve, regression()),
}


def train(kind: str, summary_dir: Any, epochs: int = 3) -> None:
    make, data, task = KINDS[kind]
    torch.manual_seed(0)
    net = make()
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    batches = data()
    with SummaryCollector(str(summary_dir), collect_freq=2, collect_specified_data={
            "collect_landscape": {"unit": "epoch", "intervals": [[1, 2, 3]], "landscape_size": 5,
                                  "num_samples": 64}}) as sc:
        sc.begin_train(network=net, optimizer=opt, train_dataset=batches, epoch_num=epochs)
        for _ in range(epochs):
            for batch in batches:
                opt.zero_grad()
                loss = task(net, batch)
                loss.backward()
                opt.step()
                sc.step(loss)
            sc.epoch_end()
        sc.end()


def plain_loss(kind: str, state: dict[str, torch.Tensor]) -> float:
    """The loss of ``state`` over the run's 64 samples by one forward per batch (independent)."""
    make, data, _ = KINDS[kind]
    net = make()
    net.load_state_dict(state)
    net.eval()
    total = 0.0
    with torch.no_grad():
        for batch in data():
            if kind == "hf":
                out = net(batch["input_ids"])
                loss = F.cross_entropy(out.logits.reshape(-1, 30), batch["labels"].reshape(-1))
                n = batch["input_ids"].shape[0]
            elif kind == "two":
                loss, n = F.cross_entropy(net(batch[0], batch[1]), batch[2]), batch[0].shape[0]
            else:
                loss, n = F.mse_loss(net(batch[0]), batch[1]), batch[0].shape[0]
            total += float(loss) * n
    return total / 64


def _callback(kind: str) -> tuple:
    make, data, task = KINDS[kind]
    net = make()
    return None, net, data(), None, task


def hf_callback() -> tuple:
    return _callback("hf")


def two_callback() -> tuple:
    return _callback("two")


def regression_callback() -> tuple:
    return _callback("regression")
