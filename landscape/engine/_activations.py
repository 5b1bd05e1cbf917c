"""Elements of a network's activations per sample, what the plan sizes its calls by (private).

Only the shapes of the leaf modules' outputs matter, so a large network is run on PyTorch's
``meta`` device: a copy of its modules over tensors without storage, every operation computing
its output's shape and nothing else (GPT-2 124M on two sequences of 128 tokens: about 0.1 s
instead of 0.5 s). A meta tensor has the shape the real one would have, and an operation whose
output's shape depends on values (``nonzero``), or a branch on a value (``.item()``), raises
there instead of guessing, so the count is the real forward's or the real forward runs: where
the meta run fails, and for a network placed by its caller over devices, the network itself
runs (no copy; its modes are restored afterwards). A small network runs as it is: its
forward takes less time than copying its modules.

The normalization layers of the meta copy pass their input on: their output has their input's
shape by definition, and PyTorch computes a batch norm's on the meta device through its Python
decomposition, and its layer norm likewise (about a millisecond a layer, most of the count).
"""

from __future__ import annotations

import functools
import logging
from typing import Any

import torch
from torch import nn

from landscape.engine._modcopy import copy_modules
from landscape.geometry import keeps_placement
from landscape.tasks import to_device

__all__ = ["activation_elements", "META_FROM"]
_log = logging.getLogger("landscape")

#: Parameters from which the activations are measured on the meta device (below, a forward on a
#: couple of samples costs less than the meta run's copy of the modules and its dispatching).
META_FROM = 1 << 22


def activation_elements(network: nn.Module, task: Any, batch: Any, n: int, *, eval_mode: bool = True) -> int:
    """Elements of all leaf-module outputs per sample, measured by running the task on ``batch``
    (``n`` samples): on a ``meta`` copy of a large network's modules, else (or where that fails) with
    the network itself (its weights do not matter, and its modes are restored afterwards)."""
    if not keeps_placement(network) and sum(p.numel() for p in network.parameters()) >= META_FROM:
        try:
            return _count(_on_meta(network), task, to_device(batch, "meta"), n, eval_mode)
        except Exception as exc:  # no meta kernel, a value read: the real forward says
            _log.debug("activations measured with the network itself (on the meta device: %s: %s)",
                       type(exc).__name__, exc)
    first = next(network.parameters(), None)
    return _count(network, task, to_device(batch, first.device) if first is not None else batch, n, eval_mode)


def _on_meta(network: nn.Module) -> nn.Module:
    """A copy of ``network``'s modules on the meta device (no tensor's storage copied)."""
    memo: dict[int, Any] = {}
    for p in network.parameters():
        memo.setdefault(id(p), nn.Parameter(torch.empty_like(p, device="meta"), requires_grad=False))
    for b in network.buffers():
        memo.setdefault(id(b), torch.empty_like(b, device="meta"))
    copy = copy_modules(network, memo).to("meta")
    for m in copy.modules():
        if type(m) in _SAME_SHAPE:
            m.forward = functools.partial(_same_shape, m)  # the copy's own module: the network is not touched
    return copy


#: Modules whose output has their input's shape (the exact classes: a subclass may return another).
_SAME_SHAPE = (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d, nn.LayerNorm, nn.GroupNorm)


def _same_shape(module: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """A normalization layer's output on the meta device: its input's shape (checked as the layer
    checks it, so that an input it would refuse still fails there)."""
    if isinstance(module, nn.modules.batchnorm._BatchNorm):
        module._check_input_dim(x)
    elif isinstance(module, nn.LayerNorm):
        shape = tuple(module.normalized_shape)
        if tuple(x.shape[x.dim() - len(shape):]) != shape:
            raise RuntimeError(f"layer norm over {list(shape)}, input of shape {list(x.shape)}")
    elif x.dim() < 2 or x.shape[1] != module.num_channels:  # GroupNorm
        raise RuntimeError(f"group norm of {module.num_channels} channels, input of shape {list(x.shape)}")
    return x


def _count(network: nn.Module, task: Any, batch: Any, n: int, eval_mode: bool) -> int:
    total = [0]

    def hook(_m: nn.Module, _i: Any, out: Any) -> None:
        if isinstance(out, torch.Tensor):
            total[0] += out.numel()

    modes = [(m, m.training) for m in network.modules()]
    handles = [m.register_forward_hook(hook) for m in network.modules() if not list(m.children())]
    try:
        network.train(not eval_mode)
        if not eval_mode:  # batch statistics would move the running ones: a probe must leave no trace
            for m in network.modules():
                if isinstance(m, nn.modules.batchnorm._BatchNorm):
                    m.eval()
        with torch.inference_mode():
            task(network, batch)
    finally:
        for h in handles:
            h.remove()
        for m, training in modes:
            m.training = training
    return max(1, total[0] // max(1, n))
