"""Which tensors move, and whether a state dict fits the network (private)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch import nn

from collector.common import strip_wrapper_prefixes

__all__ = ["moved_names", "fit_state", "check_keys", "flat_float"]


def moved_names(network: nn.Module, ignore: str | None) -> tuple[list[str], list[str]]:
    """Return ``(moved, still)``: every floating-point parameter, by its first name.

    Every parameter moves, whatever it is called (a learned positional embedding, a cls
    token and a layer-scale gamma as much as weights and biases); buffers (batch-norm
    statistics) never do; a parameter shared by two modules (tied embeddings) is listed
    once, under the first name ``named_parameters`` gives it, so it moves once. With
    ``ignore="biasbn"`` every tensor with at most one dimension is put in ``still``
    instead (its direction is zero, Li et al.).
    """
    moved, still = [], []
    for name, p in network.named_parameters():  # remove_duplicate: tied parameters once
        if not p.is_floating_point():
            continue
        if ignore == "biasbn" and p.dim() <= 1:
            still.append(name)
        else:
            moved.append(name)
    return moved, still


def fit_state(network: nn.Module, state: Mapping[str, Any]) -> Mapping[str, Any]:
    """``state`` with the ``module.`` / ``_orig_mod.`` prefixes of DDP, DataParallel and
    ``torch.compile`` removed when that makes its keys the (unwrapped) network's."""
    expected = set(network.state_dict().keys())
    if set(state.keys()) == expected:
        return state
    stripped = strip_wrapper_prefixes(dict(state))
    return stripped if set(stripped.keys()) == expected else state


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
