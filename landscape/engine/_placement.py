"""The engine's network: the caller's modules over the centre's tensors, nothing copied (private).

The engine needs modules of its own (it sets their modes, parametrizes them, fuses or folds
them), but not tensors of its own: :func:`network_at` copies the module tree with every
parameter replaced by a parameter over the centre's tensor -- the caller's own tensor when the
centre is the network's state -- so the engine's network costs no parameter memory. Tied
parameters (GPT-2's ``lm_head.weight`` is ``transformer.wte.weight``) stay one parameter.
Buffers are copied (the engine may write them: running statistics in train mode); they are
small next to the parameters.

A network placed by the caller over several devices -- a Hugging Face model loaded with
``device_map`` (``hf_device_map``), or parameters on more than one device -- is evaluated
where it is (:func:`keeps_placement`): nothing is moved, and each moved tensor's centre and
directions live on its own device. Any other network is put on the engine's device (the
parameters copied there only when they are elsewhere).
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import nn

from landscape.engine._modcopy import copy_modules
from landscape.geometry import keeps_placement

__all__ = ["keeps_placement", "network_at", "input_device"]


def input_device(network: nn.Module, default: torch.device) -> torch.device:
    """Where batches go for a network kept where it is: its first parameter's device (Hugging Face's
    ``model.device``; the model's own hooks move activations between its devices)."""
    first = next(network.parameters(), None)
    return first.device if first is not None else default


def network_at(network: nn.Module, centre: Mapping[str, torch.Tensor], device: torch.device | None) -> nn.Module:
    """A copy of ``network``'s modules whose parameters are the ``centre``'s tensors (a state dict of
    ``network``'s keys), in the network's dtypes, on ``device`` (None: each where the network's is).
    Nothing is copied for a parameter already in that dtype on that device; buffers are copied."""
    memo: dict[int, object] = {}

    def place(t: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
        return t.detach().to(device=like.device if device is None else device, dtype=like.dtype)

    for name, p in network.named_parameters(remove_duplicate=False):
        if id(p) not in memo:
            memo[id(p)] = nn.Parameter(_own_version(place(centre[name], p)), requires_grad=False)
    for name, b in network.named_buffers(remove_duplicate=False):
        if id(b) not in memo and name in centre:  # non-persistent buffers are deep-copied with the modules
            t = place(centre[name], b)
            memo[id(b)] = t.clone() if t.data_ptr() == centre[name].data_ptr() else t
    net = copy_modules(network, memo)  # deepcopy's copy, with a memo of our own tensors
    if device is not None:
        net.to(device)  # non-persistent buffers and other registered state; parameters are there already
    return net


def _own_version(t: torch.Tensor) -> torch.Tensor:
    """``t``'s storage under a version counter of its own. A detached alias shares its source's counter,
    and the engine's parametrizations ``set_`` their tensors (torch.nn.utils.parametrize), which counts
    as an in-place write: the caller's parameters then looked modified, and a backward pending in the
    caller's process failed ("modified by an inplace operation") though no value changed. A tensor
    whose storage cannot be re-aliased so (a subclass: DTensor shards) stays as it is."""
    if type(t) is not torch.Tensor or t.layout != torch.strided or t.is_quantized or t.is_conj() or t.is_neg():
        return t  # (a conjugate or negative view's bit is the tensor's, not its storage's)
    alias = torch.empty(0, dtype=t.dtype, device=t.device)
    with torch.no_grad():
        alias.set_(t.untyped_storage(), t.storage_offset(), t.size(), t.stride())
    return alias
