"""Accuracy and Loss metrics."""

from __future__ import annotations

import pytest
import torch

from collector import Accuracy, InvalidParameterError, Loss, Metric
from collector.train._metrics import get_metric


def test_accuracy_indices_one_hot_and_binary():
    acc = Accuracy()
    acc.update(torch.tensor([[0.1, 0.9], [0.8, 0.2], [0.3, 0.7]]), torch.tensor([1, 1, 1]))
    acc.update(torch.tensor([[2.0, 1.0]]), torch.tensor([[1.0, 0.0]]))  # one-hot label
    assert acc.eval() == pytest.approx(3 / 4)
    acc.clear()
    acc.update(torch.tensor([0.9, 0.1, 0.6]), torch.tensor([1, 0, 0]))
    assert acc.eval() == pytest.approx(2 / 3)
    acc.clear()
    with pytest.raises(RuntimeError, match="at least one update"):
        acc.eval()


def test_loss_is_mean_of_batch_losses():
    loss = Loss()
    for value in (torch.tensor(1.0), torch.tensor([2.0, 4.0]), 6.0):
        loss.update(value)
    assert loss.eval() == pytest.approx((1 + 3 + 6) / 3)
    loss.clear()
    with pytest.raises(RuntimeError, match="at least one update"):
        loss.eval()


def test_protocol_and_names():
    assert isinstance(Accuracy(), Metric) and isinstance(Loss(), Metric)
    assert isinstance(get_metric("acc"), Accuracy) and isinstance(get_metric("Loss"), Loss)
    with pytest.raises(InvalidParameterError, match="metric name 'top5' is not known"):
        get_metric("top5")
