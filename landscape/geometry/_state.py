"""Which tensors move, and whether a state dict fits the network (private)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch import nn

from collector.trajectory import check_state_dict

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


def check_keys(network: nn.Module, state: Mapping[str, Any], *, what: str, path: str | None = None) -> None:
    """Refuse a state dict whose keys or shapes differ from the network's.

    Raises ``collector.trajectory.CheckpointError`` naming ``what`` (the parameter the
    state came from) and ``path`` (its file, if any), with the first differing keys.
    """
    check_state_dict(state, network.state_dict(), what=what, path=path)


def flat_float(state: Mapping[str, torch.Tensor], names: Sequence[str]) -> list[torch.Tensor]:
    """The tensors ``names`` of ``state`` as contiguous float32 CPU tensors."""
    return [state[n].detach().to("cpu", torch.float32).contiguous() for n in names]
