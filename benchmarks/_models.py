"""The benchmark models (ordinary ``nn.Module``s as users write them) and their data.

(a) the digits MLP of ``landscape.examples`` (fc1/fc2/fc3 called in ``forward``);
(b) a ResNet-20 for CIFAR (He et al. 2016, option A shortcuts, BatchNorm) on 3×32×32;
(c) ResNet-18 as ``torchvision.models.resnet18(num_classes=10)`` builds it, at 64×64 --
    a port of torchvision's architecture, because PyPI's torchvision does not import
    beside the CPU build of torch this project installs ("operator torchvision::nms does
    not exist"); same layers, shapes and parameter names;
(d) a 2-layer transformer-encoder text classifier on token ids (``nn.TransformerEncoder``,
    a learned positional embedding, mean pooling);
(e) GPT-2 from a tiny ``transformers.GPT2Config`` (no download), dict batches with labels;
(g) a small vision transformer (ViT: patches of 4×4 of a 3×32×32 image, a class token, a
    learned positional embedding, pre-norm encoder layers) built from ``torch.nn`` only.
Also (f) ResNet-56 (CIFAR), for GPU runs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from landscape.examples import MLP, digits_tensors
from landscape.tasks import HuggingFace, Supervised


# -- (b) ResNet-20 / ResNet-56 for CIFAR ---------------------------------------------
class _ShortcutA(nn.Module):
    """Option A: subsample and zero-pad the channels (no parameters)."""

    def __init__(self, planes: int) -> None:
        super().__init__()
        self.pad = planes // 4

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.pad(x[:, :, ::2, ::2], (0, 0, 0, 0, self.pad, self.pad))


class _CifarBlock(nn.Module):
    def __init__(self, cin: int, planes: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.shortcut: nn.Module = _ShortcutA(planes) if stride != 1 or cin != planes else nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(x))


class CifarResNet(nn.Module):
    def __init__(self, depth: int = 20, num_classes: int = 10) -> None:
        super().__init__()
        n = (depth - 2) // 6
        self.conv1 = nn.Conv2d(3, 16, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(16)
        layers, cin = [], 16
        for planes, stride in ((16, 1), (32, 2), (64, 2)):
            for k in range(n):
                layers.append(_CifarBlock(cin, planes, stride if k == 0 else 1))
                cin = planes
        self.layers = nn.Sequential(*layers)
        self.linear = nn.Linear(64, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.layers(out)
        out = F.adaptive_avg_pool2d(out, 1).flatten(1)
        return self.linear(out)


# -- (c) torchvision's ResNet-18 -------------------------------------------------------
class _BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, inplanes: int, planes: int, stride: int = 1, downsample: nn.Module | None = None) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = downsample

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        if self.downsample is not None:
            identity = self.downsample(x)
        return self.relu(out + identity)


class ResNet18(nn.Module):
    """torchvision.models.resnet18(num_classes=...), layer for layer."""

    def __init__(self, num_classes: int = 10) -> None:
        super().__init__()
        self.inplanes = 64
        self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        self.layer1 = self._make_layer(64, 2)
        self.layer2 = self._make_layer(128, 2, 2)
        self.layer3 = self._make_layer(256, 2, 2)
        self.layer4 = self._make_layer(512, 2, 2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(512, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

    def _make_layer(self, planes: int, blocks: int, stride: int = 1) -> nn.Sequential:
        downsample = None
        if stride != 1 or self.inplanes != planes:
            downsample = nn.Sequential(nn.Conv2d(self.inplanes, planes, 1, stride, bias=False), nn.BatchNorm2d(planes))
        layers = [_BasicBlock(self.inplanes, planes, stride, downsample)]
        self.inplanes = planes
        layers += [_BasicBlock(planes, planes) for _ in range(1, blocks)]
        return nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


# -- (d) a transformer-encoder text classifier -----------------------------------------
class TextClassifier(nn.Module):
    def __init__(self, vocab: int = 1000, dim: int = 64, seq: int = 32, classes: int = 2) -> None:
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.pos = nn.Parameter(torch.randn(seq, dim) * 0.02)
        layer = nn.TransformerEncoderLayer(dim, 4, 128, dropout=0.1, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.head = nn.Linear(dim, classes)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        h = self.encoder(self.emb(ids) + self.pos[: ids.shape[1]])
        return self.head(h.mean(1))


# -- (g) a small vision transformer ------------------------------------------------------
class ViT(nn.Module):
    """Dosovitskiy et al.'s ViT at CIFAR scale, from ``torch.nn`` only: 4×4 patches of a 3×32×32
    image embedded by a strided convolution, a class token, a learned positional embedding,
    ``depth`` pre-norm encoder layers (GELU), the class token's final LayerNorm and a linear head."""

    def __init__(self, image: int = 32, patch: int = 4, dim: int = 64, depth: int = 4, heads: int = 4,
                 mlp: int = 128, classes: int = 10) -> None:
        super().__init__()
        self.patches = nn.Conv2d(3, dim, patch, stride=patch)
        tokens = (image // patch) ** 2
        self.cls = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos = nn.Parameter(torch.randn(1, tokens + 1, dim) * 0.02)
        layer = nn.TransformerEncoderLayer(dim, heads, mlp, dropout=0.0, activation="gelu", batch_first=True,
                                           norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, depth, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.patches(x).flatten(2).transpose(1, 2)
        h = torch.cat([self.cls.expand(h.shape[0], -1, -1), h], dim=1) + self.pos
        return self.head(self.norm(self.encoder(h)[:, 0]))


def _gpt2(seed: int = 0) -> nn.Module:
    from transformers import GPT2Config, GPT2LMHeadModel

    cfg = GPT2Config(vocab_size=1000, n_positions=64, n_embd=64, n_layer=2, n_head=2, resid_pdrop=0.0,
                     embd_pdrop=0.0, attn_pdrop=0.0)
    torch.manual_seed(seed)
    return GPT2LMHeadModel(cfg)


def _images(n: int, side: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, 3, side, side, generator=g), torch.randint(0, 10, (n,), generator=g)


def _tokens(n: int, seq: int = 32, vocab: int = 1000, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, vocab, (n, seq), generator=g), torch.randint(0, 2, (n,), generator=g)


#: name -> (description, make model, make (data, task, forward(model, batch) -> loss)) for n samples
def workload(name: str, n: int) -> tuple[nn.Module, Any, Any, Callable[[nn.Module, Any], torch.Tensor]]:
    """``(model, data, task, plain_forward)``: ``plain_forward(model, batch)`` is the plain
    inference the limit measures (the same loss the task computes)."""
    torch.manual_seed(0)
    ce = nn.CrossEntropyLoss()
    if name == "mlp":
        x, y = digits_tensors()
        reps = -(-n // x.shape[0])
        x, y = x.repeat(reps, 1)[:n], y.repeat(reps)[:n]
        return MLP(), (x, y), Supervised(ce), lambda m, b: ce(m(b[0]), b[1])
    if name in ("resnet20", "resnet56"):
        model = CifarResNet(20 if name == "resnet20" else 56)
        return model, _images(n, 32), Supervised(ce), lambda m, b: ce(m(b[0]), b[1])
    if name == "resnet18":
        return ResNet18(), _images(n, 64), Supervised(ce), lambda m, b: ce(m(b[0]), b[1])
    if name == "transformer":
        return TextClassifier(), _tokens(n), Supervised(ce), lambda m, b: ce(m(b[0]), b[1])
    if name == "vit":
        return ViT(), _images(n, 32), Supervised(ce), lambda m, b: ce(m(b[0]), b[1])
    if name == "mlp26m":  # a network beyond the engine's small-network rules (26.2M parameters, 105 MB)
        g = torch.Generator().manual_seed(0)
        x, y = torch.randn(n, 256, generator=g), torch.randint(0, 10, (n,), generator=g)
        model = nn.Sequential(nn.Linear(256, 4096), nn.ReLU(), nn.Linear(4096, 4096), nn.ReLU(),
                              nn.Linear(4096, 2048), nn.ReLU(), nn.Linear(2048, 10))
        return model, (x, y), Supervised(ce), lambda m, b: ce(m(b[0]), b[1])
    if name == "gpt2":
        ids, _ = _tokens(n)
        batch = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": ids}
        return _gpt2(), [batch], HuggingFace(), lambda m, b: m(**b).loss
    raise ValueError(f"unknown model {name!r}")


MODELS = ("mlp", "resnet20", "resnet18", "transformer", "gpt2")
#: Workloads run only when named (``--models mlp26m``).
MORE_MODELS = ("mlp26m", "vit")
