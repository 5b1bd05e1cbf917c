"""The ``--task`` of the ``landscape connect`` tests: the digits MLP (16 wide) on 256 digits."""

from __future__ import annotations

from torch import nn

from landscape.examples import MLP, digits_tensors


class _Model:
    loss_fn = nn.CrossEntropyLoss()


def task():
    x, y = digits_tensors()
    return _Model(), MLP(16), (x[:256], y[:256]), None
