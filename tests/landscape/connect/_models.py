"""Models and data of the between-models tests: small ones of each kind users align."""

from __future__ import annotations

import torch
from torch import nn

from landscape.examples import MLP, digits_tensors, train_epoch


def digits_pair_data() -> tuple[torch.Tensor, torch.Tensor]:
    """The digits as (inputs, labels)."""
    return digits_tensors()


def trained_mlp(seed: int, hidden: int = 128, epochs: int = 3, n: int | None = None) -> MLP:
    """The digits MLP trained for a few epochs of SGD (seeded)."""
    x, y = digits_tensors()
    if n is not None:
        x, y = x[:n], y[:n]
    torch.manual_seed(seed)
    net = MLP(hidden)
    opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    gen = torch.Generator().manual_seed(seed)
    for _ in range(epochs):
        train_epoch(net, opt, x, y, gen)
    return net.eval()


class CumsumMLP(nn.Module):
    """An MLP whose hidden units are summed cumulatively: their order matters, so they cannot be permuted."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(4, 8)
        self.mix = nn.Linear(8, 8)
        self.fc2 = nn.Linear(8, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.fc1(x))
        return self.fc2(torch.cumsum(self.mix(h), dim=1))
