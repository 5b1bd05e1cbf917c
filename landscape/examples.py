"""Built-in data and models for the demo and the configs: scikit-learn's digits.

The digits (1,797 8x8 images, shipped inside scikit-learn) need no download, so the
demo runs on a fresh machine with no network. Inputs are scaled by 1/16 to [0, 1], as
in the MindSpore fixture this project is checked against.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from collector.common import Interval, Options, check_param

__all__ = ["digits_tensors", "digits_loader", "MLP", "SmallCNN", "DeepMLP", "build_model", "MODEL_KINDS"]

MODEL_KINDS = ("mlp", "cnn", "deep_plain", "deep_residual")


def digits_tensors(image: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """All 1,797 digits as ``(inputs, labels)``: inputs float32 in [0, 1], (N, 64) or (N, 1, 8, 8)."""
    from sklearn.datasets import load_digits

    data = load_digits()
    x = torch.tensor(data.data, dtype=torch.float32) / 16.0
    y = torch.tensor(data.target, dtype=torch.int64)
    return (x.reshape(-1, 1, 8, 8) if image else x), y


def digits_loader(batch_size: int = 64, *, image: bool = False, shuffle: bool = True, seed: int = 0,
                  drop_last: bool = True) -> DataLoader:
    """A DataLoader over the digits; with the defaults, 28 batches of 64 per epoch."""
    x, y = digits_tensors(image)
    gen = torch.Generator().manual_seed(seed)
    return DataLoader(TensorDataset(x, y), batch_size=batch_size, shuffle=shuffle, drop_last=drop_last, generator=gen)


class MLP(nn.Module):
    """64-128-128-10 with ReLU: the network of the MindSpore fixture (fc1, fc2, fc3)."""

    def __init__(self, hidden: int = 128) -> None:
        super().__init__()
        self.fc1 = nn.Linear(64, hidden)
        self.fc2 = nn.Linear(hidden, hidden)
        self.fc3 = nn.Linear(hidden, 10)
        self.relu = nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc3(self.relu(self.fc2(self.relu(self.fc1(x)))))


class SmallCNN(nn.Module):
    """Two 3x3 convolutions with batch norm on the 1x8x8 images, then a linear head."""

    def __init__(self, channels: int = 16) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, channels, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, 2 * channels, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(2 * channels)
        self.pool = nn.MaxPool2d(2)
        self.relu = nn.ReLU()
        self.fc = nn.Linear(2 * channels * 4 * 4, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.relu(self.bn1(self.conv1(x)))
        x = self.pool(self.relu(self.bn2(self.conv2(x))))
        return self.fc(torch.flatten(x, 1))


class _Block(nn.Module):
    def __init__(self, width: int, residual: bool, norm: bool) -> None:
        super().__init__()
        self.fc = nn.Linear(width, width)
        if norm:  # registered only when used, so the default model's state dict is unchanged
            self.bn = nn.BatchNorm1d(width)
        self.relu = nn.ReLU()
        self.residual = residual

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.fc(x)
        if hasattr(self, "bn"):
            h = self.bn(h)
        out = self.relu(h)
        return x + out if self.residual else out


class DeepMLP(nn.Module):
    """A deep MLP of equal-width blocks, with or without skip connections (Li et al.'s comparison).

    Parameters
    ----------
    depth, width : int
        Blocks ``relu(fc(x))`` (plain) or ``x + relu(fc(x))`` (residual) of ``width`` units.
    residual : bool
    norm : {"none", "batch"}, default="none"
        ``"batch"``: batch normalisation after each block's linear layer (as in Li et al.'s
        ResNets and their "noshort" variants, which differ only in the skip connections).
    init : {"default", "kaiming"}, default="default"
        ``"kaiming"``: He-normal weights (fan-in, ReLU gain) and zero biases in every
        linear layer, which keeps the signal's scale through a deep plain stack; PyTorch's
        default shrinks it by about sqrt(3) per layer, so a 16-block plain MLP starts (and
        stays) at chance.
    """

    def __init__(self, depth: int = 12, width: int = 64, residual: bool = False, norm: str = "none",
                 init: str = "default") -> None:
        super().__init__()
        self.inp = nn.Linear(64, width)
        self.blocks = nn.Sequential(*[_Block(width, residual, norm == "batch") for _ in range(depth)])
        self.out = nn.Linear(width, 10)
        self.relu = nn.ReLU()
        if init == "kaiming":
            for m in self.modules():
                if isinstance(m, nn.Linear):
                    nn.init.kaiming_normal_(m.weight, nonlinearity="relu")
                    nn.init.zeros_(m.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.blocks(self.relu(self.inp(x))))


def build_model(kind: str, *, hidden: int = 128, depth: int = 12, width: int = 64, channels: int = 16,
                norm: str = "none", init: str = "default") -> nn.Module:
    """Make one of the built-in models by name (see ``MODEL_KINDS``); ``norm`` and ``init``
    apply to the deep MLPs (see :class:`DeepMLP`)."""
    check_param("model.kind", kind, [Options(MODEL_KINDS)], caller="the configuration")
    if kind == "mlp":
        check_param("model.hidden", hidden, [Interval(int, 1, None)], caller="the configuration")
        return MLP(hidden)
    if kind == "cnn":
        check_param("model.channels", channels, [Interval(int, 1, None)], caller="the configuration")
        return SmallCNN(channels)
    check_param("model.depth", depth, [Interval(int, 1, None)], caller="the configuration")
    check_param("model.width", width, [Interval(int, 1, None)], caller="the configuration")
    check_param("model.norm", norm, [Options(("none", "batch"))], caller="the configuration")
    check_param("model.init", init, [Options(("default", "kaiming"))], caller="the configuration")
    return DeepMLP(depth, width, residual=kind == "deep_residual", norm=norm, init=init)
