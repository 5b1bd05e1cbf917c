"""Convolution + batch norm as one convolution at each point, in eval mode (private).

In eval mode a ``BatchNorm2d`` that only follows a ``Conv2d`` is an affine map per output
channel, so the pair is one convolution with kernel ``W * s`` and bias ``β + (b - μ) s``,
``s = γ / √(σ² + ε)``: the batch-norm pass over the activations (memory-bound, one per
convolution in a ResNet) disappears. The engine moves the network's own parameters in place
(and, on a view through models, its running statistics), so the fused kernels are rebuilt
from them at every point (:meth:`FusedNetwork.refresh`, a few small operations per pair).

Pairs are found on a ``torch.fx`` trace of the engine's copy: a ``Conv2d`` module called once
whose only user is a ``BatchNorm2d`` module in eval mode with running statistics. A network
that does not trace, or has no such pair, runs as it is. The fused convolutions live in the
traced module under names of their own; the network's modules are never changed.
"""

from __future__ import annotations

import copy
import logging
from typing import Any

import torch
from torch import fx, nn

__all__ = ["FusedNetwork", "fuse_conv_bn"]

_log = logging.getLogger("landscape")


class FusedNetwork:
    """The traced network with fused pairs; call it like the network, :meth:`refresh` after moving it."""

    def __init__(self, graph_module: fx.GraphModule, pairs: list[tuple[nn.Conv2d, nn.BatchNorm2d, nn.Conv2d]]) -> None:
        self.module = graph_module
        self.pairs = pairs

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.module(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.module, name)

    @torch.no_grad()
    def refresh(self) -> None:
        """The fused kernels and biases from the convolutions' and batch norms' current values."""
        for conv, bn, fused in self.pairs:
            assert bn.running_var is not None and bn.running_mean is not None
            scale = torch.rsqrt(bn.running_var + bn.eps)
            if bn.weight is not None:
                scale = scale * bn.weight
            torch.mul(conv.weight, scale.view(-1, 1, 1, 1), out=fused.weight)  # keeps the kernel's layout
            shift = -bn.running_mean if conv.bias is None else conv.bias - bn.running_mean
            bias = shift * scale
            assert fused.bias is not None
            fused.bias.copy_(bias if bn.bias is None else bias + bn.bias)


def fuse_conv_bn(net: nn.Module) -> FusedNetwork | None:
    """``net`` (eval mode) with its Conv2d -> BatchNorm2d pairs fused, or None (nothing to fuse, or
    the network does not trace)."""
    kinds = {type(m) for m in net.modules()}
    if nn.Conv2d not in kinds or not any(issubclass(k, nn.BatchNorm2d) for k in kinds):
        return None
    try:
        gm = fx.symbolic_trace(net)
    except Exception as exc:  # data-dependent control flow, unsupported calls: run the network as it is
        _log.info("convolutions and batch norms not fused: the network does not trace (%s: %s)",
                  type(exc).__name__, exc)
        return None
    modules = dict(gm.named_modules())
    calls: dict[str, int] = {}
    for node in gm.graph.nodes:
        if node.op == "call_module":
            calls[str(node.target)] = calls.get(str(node.target), 0) + 1
    pairs: list[tuple[nn.Conv2d, nn.BatchNorm2d, nn.Conv2d]] = []
    for node in list(gm.graph.nodes):
        bn = modules.get(node.target) if node.op == "call_module" else None
        if not isinstance(bn, nn.BatchNorm2d) or bn.training or bn.running_mean is None or bn.running_var is None:
            continue
        src = node.args[0] if len(node.args) == 1 and not node.kwargs else None
        if not isinstance(src, fx.Node) or src.op != "call_module":
            continue
        conv = modules.get(str(src.target))
        if type(conv) is not nn.Conv2d or len(src.users) != 1 or calls[str(src.target)] != 1 \
                or conv.padding_mode != "zeros" or conv.out_channels != bn.num_features:
            continue
        fused = copy.deepcopy(conv)  # same geometry and kernel layout; its values are set by refresh
        fused.requires_grad_(False)
        if fused.bias is None:
            fused.bias = nn.Parameter(torch.zeros(conv.out_channels, device=conv.weight.device,
                                                  dtype=conv.weight.dtype), requires_grad=False)
        name = f"_landscape_fused_{len(pairs)}"
        gm.add_submodule(name, fused)
        src.target = name
        node.replace_all_uses_with(src)
        gm.graph.erase_node(node)
        pairs.append((conv, bn, fused))
    if not pairs:
        return None
    gm.graph.lint()
    gm.recompile()
    out = FusedNetwork(gm, pairs)
    out.refresh()
    _log.debug("%d convolution + batch norm pair(s) fused", len(pairs))
    return out
