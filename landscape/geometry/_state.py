"""Which tensors move, and whether a state dict fits the network (private)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch import nn

__all__: list[str] = []


def moved_names(network: nn.Module, ignore: str | None) -> tuple[list[str], list[str]]:
    """Return ``(moved, still)``: trainable float parameters named weight/bias.

    ``moved`` get a direction; with ``ignore="biasbn"`` every moved tensor with at most
    one dimension is put in ``still`` instead (its direction is zero, Li et al.).
    """
    moved, still = [], []
    for name, p in network.named_parameters():
        leaf = name.rsplit(".", 1)[-1]
        if not (p.requires_grad and p.is_floating_point()):
            continue
        if ("weight" not in leaf and "bias" not in leaf) or "moment" in name:
            continue
        if ignore == "biasbn" and p.dim() <= 1:
            still.append(name)
        else:
            moved.append(name)
    return moved, still


def check_keys(network: nn.Module, state: Mapping[str, Any], *, what: str) -> None:
    """Refuse a state dict whose keys differ from the network's, listing both differences."""
    expected = set(network.state_dict().keys())
    got = set(state.keys())
    missing, unexpected = sorted(expected - got), sorted(got - expected)
    if missing or unexpected:
        raise ValueError(
            f"The parameters of the network do not match {what}: missing keys {missing}, "
            f"unexpected keys {unexpected}. HINT: callback_fn must build the same network "
            "architecture that was trained.")
    sd = network.state_dict()
    for k in sorted(expected):
        if isinstance(state[k], torch.Tensor) and tuple(state[k].shape) != tuple(sd[k].shape):
            raise ValueError(f"The parameters of the network do not match {what}: {k!r} has shape "
                             f"{tuple(state[k].shape)} in the checkpoint and {tuple(sd[k].shape)} "
                             "in the network.")


def flat_float(state: Mapping[str, torch.Tensor], names: Sequence[str]) -> list[torch.Tensor]:
    """The tensors ``names`` of ``state`` as contiguous float32 CPU tensors."""
    return [state[n].detach().to("cpu", torch.float32).contiguous() for n in names]
