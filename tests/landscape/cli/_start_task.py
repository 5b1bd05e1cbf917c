"""Runs collected by SummaryCollector (initial weights saved), and the ``--task`` that compares them.

``train(summary_dir, seed, optimizer)`` trains a TinyMLP from ``torch.manual_seed(seed)`` in a
plain loop; ``task`` is what ``landscape compare --task`` calls. With ``LANDSCAPE_TEST_CENTRE``
set to a file name, ``task`` also makes the command save there the centre state the
generation uses (what ``centre_state`` returns), so a test can compare it with the files.
"""

from __future__ import annotations

import os
from typing import Any

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from collector import SummaryCollector
from tests.landscape._helpers import TinyMLP, make_data


class _Model:
    loss_fn = nn.CrossEntropyLoss()


def _batches() -> list[tuple[torch.Tensor, torch.Tensor]]:
    x, y = make_data()
    return [(x[i:i + 32], y[i:i + 32]) for i in range(0, len(x), 32)]


def train(summary_dir: Any, seed: int, optimizer: str) -> None:
    torch.manual_seed(seed)
    net = TinyMLP()
    opt = (torch.optim.SGD(net.parameters(), lr=0.3, momentum=0.5) if optimizer == "sgd"
           else torch.optim.Adam(net.parameters(), lr=0.05))
    batches = DataLoader(TensorDataset(*make_data()), batch_size=32)  # 96 samples: num_samples 96 is recorded
    with SummaryCollector(str(summary_dir), collect_freq=100, collect_specified_data={
            "collect_landscape": {"unit": "epoch", "intervals": [[1, 2, 3]], "landscape_size": 5}}) as sc:
        sc.begin_train(network=net, optimizer=opt, train_dataset=batches, epoch_num=3)
        for _ in range(3):
            for xb, yb in batches:
                opt.zero_grad()
                loss = nn.functional.cross_entropy(net(xb), yb)
                loss.backward()
                opt.step()
                sc.step(loss)
            sc.epoch_end()
        sc.end()


def task() -> tuple[Any, nn.Module, list, None]:
    out = os.environ.get("LANDSCAPE_TEST_CENTRE")
    if out:
        from landscape.generate import _build  # the test's spy on the centre the command uses

        real = _build.centre_state

        def spy(network: nn.Module, geo: Any, names: Any, label: str) -> Any:
            centre = real(network, geo, names, label)
            torch.save({k: v.detach().cpu().clone() for k, v in centre.items()}, out)
            return centre

        _build.centre_state = spy
    torch.manual_seed(0)
    return _Model(), TinyMLP(), _batches(), None
