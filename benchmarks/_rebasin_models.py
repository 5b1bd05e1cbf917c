"""The models ``bench_rebasin.py`` compares on, built the same way in both environments."""

from __future__ import annotations

from torch import nn

from landscape.examples import MLP, DigitsResNet

KINDS = ("mlp", "resnet20", "gpt2")


def build(kind: str, seed: int = 0) -> nn.Module:
    """The digits MLP (2 hidden layers of 128), the examples' ResNet-20 (16 maps), or the tiny GPT-2
    of ``benchmarks/_models.py`` (2 layers, 2 heads, 64 wide: Hugging Face's class; initialised
    from ``seed``, the others from the global generator)."""
    if kind == "mlp":
        return MLP(128)
    if kind == "resnet20":
        return DigitsResNet(20, 16)
    if kind == "gpt2":
        from benchmarks._models import _gpt2

        return _gpt2(seed)
    raise ValueError(f"unknown model {kind!r}; one of {KINDS}")
