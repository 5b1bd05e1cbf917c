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


def digits_split() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """The digits split 1,437 / 360, stratified (scikit-learn, random_state=0): train x, y, test x, y."""
    from sklearn.model_selection import train_test_split

    x, y = digits_tensors()
    tr, te = train_test_split(list(range(len(x))), test_size=360, stratify=y.numpy(), random_state=0)
    return x[tr], y[tr], x[te], y[te]


def train_digits(seed: int, make, epochs: int, lr: float = 0.05) -> nn.Module:
    """``make()`` trained on the digits' training split: SGD with momentum 0.9, one-cycle learning
    rate, weight decay 5e-4, batches of 32 (the reference notes' probe, with fewer epochs)."""
    xtr, ytr, _, _ = digits_split()
    torch.manual_seed(seed)
    net = make()
    opt = torch.optim.SGD(net.parameters(), lr=lr, momentum=0.9, weight_decay=5e-4)
    steps = -(-len(xtr) // 32)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=epochs * steps)
    gen = torch.Generator().manual_seed(seed)
    for _ in range(epochs):
        order = torch.randperm(len(xtr), generator=gen)
        for i in range(0, len(xtr), 32):
            idx = order[i:i + 32]
            opt.zero_grad()
            nn.functional.cross_entropy(net(xtr[idx]), ytr[idx]).backward()
            opt.step()
            sched.step()
    return net.eval()
