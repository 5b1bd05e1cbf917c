"""A run on scikit-learn's breast-cancer data (569 samples, fewer than the default 2048).

``train(summary_dir)`` collects a small MLP's run with SummaryCollector, leaving
``num_samples`` at its default; ``task`` is what ``landscape gen --task`` calls.
"""

from __future__ import annotations

from typing import Any

import torch
from sklearn.datasets import load_breast_cancer
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from collector import SummaryCollector

#: Samples of the dataset.
SIZE = 569


class _Model:
    loss_fn = nn.CrossEntropyLoss()


def data() -> TensorDataset:
    x, y = load_breast_cancer(return_X_y=True)
    xt = torch.tensor(x, dtype=torch.float32)
    xt = (xt - xt.mean(0)) / xt.std(0)
    return TensorDataset(xt, torch.tensor(y, dtype=torch.long))


def network() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(30, 16), nn.ReLU(), nn.Linear(16, 2))


def task() -> tuple[Any, nn.Module, DataLoader, None]:
    return _Model(), network(), DataLoader(data(), batch_size=64), None


def train(summary_dir: Any, epochs: int = 3) -> None:
    net = network()
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    loader = DataLoader(data(), batch_size=64)
    with SummaryCollector(str(summary_dir), collect_freq=1, collect_specified_data={
            "collect_landscape": {"unit": "epoch", "intervals": [[1, 2, 3]], "landscape_size": 5}}) as sc:
        sc.begin_train(network=net, optimizer=opt, train_dataset=loader, epoch_num=epochs)
        for _ in range(epochs):
            for xb, yb in loader:
                opt.zero_grad()
                loss = nn.functional.cross_entropy(net(xb), yb)
                loss.backward()
                opt.step()
                sc.step(loss)
            sc.epoch_end()
        sc.end()
