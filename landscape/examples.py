"""Built-in data and models for the demo and the configs: scikit-learn's digits.

The digits (1,797 8x8 images, shipped inside scikit-learn) need no download, so the
demo runs on a fresh machine with no network. Inputs are scaled by 1/16 to [0, 1], as
in the MindSpore fixture this project is checked against.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from collector.common import Interval, Options, Predicate, check_param

__all__ = ["digits_tensors", "digits_loader", "train_epoch", "MLP", "SmallCNN", "DeepMLP", "DigitsResNet",
           "build_model", "MODEL_KINDS", "IMAGE_KINDS"]

MODEL_KINDS = ("mlp", "cnn", "deep_plain", "deep_residual", "resnet")
#: The kinds that take the digits as 1x8x8 images (the others take 64 features).
IMAGE_KINDS = ("cnn", "resnet")


def digits_tensors(image: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """All 1,797 of scikit-learn's 8x8 digits (shipped with scikit-learn: no download).

    Parameters
    ----------
    image : bool, default=False
        Shape the inputs as images, (N, 1, 8, 8), instead of 64 features.

    Returns
    -------
    inputs : tensor of shape (1797, 64) or (1797, 1, 8, 8)
        float32, scaled to [0, 1].
    labels : tensor of shape (1797,)
        int64 classes 0 to 9.

    Examples
    --------
    >>> from landscape.examples import digits_tensors
    >>> inputs, labels = digits_tensors()
    >>> tuple(inputs.shape), int(labels.max())
    ((1797, 64), 9)
    """
    from sklearn.datasets import load_digits

    data = load_digits()
    x = torch.tensor(data.data, dtype=torch.float32) / 16.0
    y = torch.tensor(data.target, dtype=torch.int64)
    return (x.reshape(-1, 1, 8, 8) if image else x), y


def digits_loader(batch_size: int = 64, *, image: bool = False, shuffle: bool = True, seed: int = 0,
                  drop_last: bool = True) -> DataLoader:
    """A DataLoader over the digits (:func:`digits_tensors`); with the defaults, 28 batches of 64 per epoch.

    Parameters
    ----------
    batch_size : int, default=64
    image : bool, default=False
        Images, (B, 1, 8, 8), instead of 64 features.
    shuffle : bool, default=True
        A new order each epoch, drawn from a generator seeded with ``seed``.
    seed : int, default=0
    drop_last : bool, default=True
        Leave out the last, short batch.

    Returns
    -------
    torch.utils.data.DataLoader
        Over a ``TensorDataset`` of ``(inputs, labels)``.
    """
    x, y = digits_tensors(image)
    gen = torch.Generator().manual_seed(seed)
    return DataLoader(TensorDataset(x, y), batch_size=batch_size, shuffle=shuffle, drop_last=drop_last, generator=gen)


def train_epoch(net: nn.Module, opt: torch.optim.Optimizer, x: torch.Tensor, y: torch.Tensor,
                generator: torch.Generator, batch_size: int = 64, drop_last: bool = False) -> None:
    """One epoch of SGD-style training: cross-entropy minibatches over ``(x, y)``, in place.

    Parameters
    ----------
    net : nn.Module
        Trained in place.
    opt : torch.optim.Optimizer
        Over ``net``'s parameters; one step per batch.
    x, y : tensor
        Inputs and labels (:func:`digits_tensors`).
    generator : torch.Generator
        Draws the batches' order, so that an epoch is reproducible.
    batch_size : int, default=64
    drop_last : bool, default=False
        Leave out the last, short batch.
    """
    order = torch.randperm(len(x), generator=generator)
    stop = len(x) - batch_size + 1 if drop_last else len(x)
    for i in range(0, stop, batch_size):
        idx = order[i:i + batch_size]
        opt.zero_grad()
        nn.functional.cross_entropy(net(x[idx]), y[idx]).backward()
        opt.step()


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


_RESNET_DEPTH = Predicate(lambda d: isinstance(d, int) and not isinstance(d, bool) and d >= 8 and (d - 2) % 6 == 0,
                          "an int 6n + 2 (8, 14, 20, 26, 32, 44, 56, 110, ...)")


class _ConvBlock(nn.Module):
    """Two 3x3 convolutions with batch norm; with ``shortcut``, plus the identity (or a 1x1
    convolution with batch norm where the shape changes), as in Li et al.'s CIFAR ResNets."""

    def __init__(self, cin: int, planes: int, stride: int, shortcut: bool) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, planes, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU()
        self.shortcut: nn.Module | None = None
        if shortcut:
            self.shortcut = nn.Identity() if stride == 1 and cin == planes else nn.Sequential(
                nn.Conv2d(cin, planes, 1, stride=stride, bias=False), nn.BatchNorm2d(planes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.bn2(self.conv2(self.relu(self.bn1(self.conv1(x)))))
        if self.shortcut is not None:
            out = out + self.shortcut(x)
        return self.relu(out)


class DigitsResNet(nn.Module):
    """He et al.'s CIFAR ResNet layout on the 1x8x8 digits, with or without the shortcuts.

    A 3x3 convolution to ``channels`` maps, three stages of ``(depth - 2) / 6`` blocks of
    two 3x3 convolutions (``channels``, ``2 * channels``, ``4 * channels`` maps; strides 1,
    2, 2, so 8x8, 4x4 and 2x2 maps: CIFAR's 32, 16, 8 halved the same way), global average
    pooling and a linear head: ``depth`` weighted layers. Batch norm after every
    convolution. ``shortcut=False`` is Li et al.'s "noshort" network: the same layers,
    no skip connections (not even the 1x1 projections where a stage starts).

    Parameters
    ----------
    depth : int, default=20
        ``6n + 2`` layers: 8, 14, 20, 26, 32, 44, 56, 110, ...
    channels : int, default=16
        Maps of the first stage.
    shortcut : bool, default=True
    """

    def __init__(self, depth: int = 20, channels: int = 16, shortcut: bool = True) -> None:
        super().__init__()
        check_param("depth", depth, [_RESNET_DEPTH], caller="DigitsResNet")
        check_param("channels", channels, [Interval(int, 1, None)], caller="DigitsResNet")
        check_param("shortcut", shortcut, ["boolean"], caller="DigitsResNet")
        n = (depth - 2) // 6
        self.conv = nn.Conv2d(1, channels, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(channels)
        self.relu = nn.ReLU()
        blocks: list[nn.Module] = []
        cin = channels
        for stage, stride in enumerate((1, 2, 2)):
            planes = channels * 2 ** stage
            for k in range(n):
                blocks.append(_ConvBlock(cin, planes, stride if k == 0 else 1, shortcut))
                cin = planes
        self.blocks = nn.Sequential(*blocks)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(cin, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.blocks(self.relu(self.bn(self.conv(x))))
        return self.fc(torch.flatten(self.pool(x), 1))


def build_model(kind: str, *, hidden: int = 128, depth: int | None = None, width: int = 64, channels: int = 16,
                norm: str = "none", init: str = "default", shortcut: bool = True) -> nn.Module:
    """Make one of the built-in models by name, as a configuration's ``[[runs]] model`` names it.

    Parameters
    ----------
    kind : str
        One of ``MODEL_KINDS``: "mlp", "cnn", "deep_plain", "deep_residual", "resnet".
    hidden : int, default=128
        The MLP's hidden width.
    depth : int, optional
        The deep MLPs' depth (default 12) or the ResNet's (default 20).
    width : int, default=64
        The deep MLPs' width.
    channels : int, default=16
        The CNN's and the ResNet's first channels.
    norm, init : str
        The deep MLPs' normalization and initialisation (:class:`DeepMLP`).
    shortcut : bool, default=True
        The ResNet's identity shortcuts (:class:`DigitsResNet`); False is Li et al.'s "noshort".

    Returns
    -------
    nn.Module
        A fresh model; a wrong name or value raises ``InvalidParameterError`` naming it.
    """
    check_param("model.kind", kind, [Options(MODEL_KINDS)], caller="the configuration")
    if kind == "mlp":
        check_param("model.hidden", hidden, [Interval(int, 1, None)], caller="the configuration")
        return MLP(hidden)
    if kind == "cnn":
        check_param("model.channels", channels, [Interval(int, 1, None)], caller="the configuration")
        return SmallCNN(channels)
    if kind == "resnet":
        check_param("model.depth", 20 if depth is None else depth, [_RESNET_DEPTH], caller="the configuration")
        check_param("model.channels", channels, [Interval(int, 1, None)], caller="the configuration")
        check_param("model.shortcut", shortcut, ["boolean"], caller="the configuration")
        return DigitsResNet(20 if depth is None else depth, channels, shortcut)
    depth = 12 if depth is None else depth
    check_param("model.depth", depth, [Interval(int, 1, None)], caller="the configuration")
    check_param("model.width", width, [Interval(int, 1, None)], caller="the configuration")
    check_param("model.norm", norm, [Options(("none", "batch"))], caller="the configuration")
    check_param("model.init", init, [Options(("default", "kaiming"))], caller="the configuration")
    return DeepMLP(depth, width, residual=kind == "deep_residual", norm=norm, init=init)
