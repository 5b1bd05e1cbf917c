"""Convolution + batch norm as one convolution at each point, in eval mode (private).

In eval mode a ``BatchNorm2d`` that only follows a ``Conv2d`` is an affine map per output
channel, so the pair is one convolution with kernel ``W * s`` and bias ``β + (b - μ) s``,
``s = γ / √(σ² + ε)``: the batch-norm pass over the activations (memory-bound, one per
convolution in a ResNet) disappears. The engine moves the network's own parameters in place
(and, on a view through models, its running statistics), so the fused kernels are rebuilt
from them at every point (:meth:`FusedNetwork.refresh`, a few small operations per pair; each moved
tensor read once, since a read forms its value at the point, and a pair's ``1 / √(σ² + ε)`` and ``-μ``
computed once when its statistics never change: on a GPU a small CNN's point is bound by the host's
launches, not by the device).

Pairs are found on a ``torch.fx`` trace of the engine's copy: a ``Conv2d`` module called once
whose only user is a ``BatchNorm2d`` module in eval mode with running statistics. A network
that does not trace, or has no such pair, runs as it is. The fused convolutions live in the
traced module under names of their own; the network's modules are never changed.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import fx, nn

__all__ = ["FusedNetwork", "fuse_conv_bn"]

_log = logging.getLogger("landscape")


class FusedNetwork:
    """The traced network with fused pairs; call it like the network, :meth:`refresh` after moving it.

    ``fixed[k]``: whether pair ``k``'s running statistics keep their values at every point (neither
    moved nor estimated again): their ``1 / √(σ² + ε)`` and ``-μ`` are then computed once, the bits
    :meth:`refresh` computes from them at each point."""

    def __init__(self, graph_module: fx.GraphModule, pairs: list[tuple[nn.Conv2d, nn.BatchNorm2d, nn.Conv2d]],
                 fixed: list[bool] | None = None) -> None:
        self.module = graph_module
        self.pairs = pairs
        self._fixed = list(fixed) if fixed is not None else [False] * len(pairs)
        self._statistics: list[tuple[torch.Tensor, torch.Tensor] | None] = [None] * len(pairs)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.module(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.module, name)

    def _inverse_std_and_negated_mean(self, k: int, bn: nn.BatchNorm2d) -> tuple[torch.Tensor, torch.Tensor]:
        got = self._statistics[k]
        if got is None:
            mean, var = bn.running_mean, bn.running_var
            assert var is not None and mean is not None
            got = (torch.rsqrt(var + bn.eps), -mean)
            if self._fixed[k]:
                self._statistics[k] = got
        return got

    @torch.no_grad()
    def refresh(self) -> None:
        """The fused kernels and biases from the convolutions' and batch norms' current values: per pair
        ``W * s`` and ``(b - μ) s + β`` with ``s = γ / √(σ² + ε)``, the products and sums of all pairs in one
        multi-tensor operation each (the same bits as pair by pair; on a GPU a few kernels, not one per pair)."""
        # each moved tensor read once: a read forms its value at the point
        reads = [(conv.weight, conv.bias, bn.weight, bn.bias) for conv, bn, _ in self.pairs]
        stats = [self._inverse_std_and_negated_mean(k, bn) for k, (_, bn, _) in enumerate(self.pairs)]
        scales = _where_given([s for s, _ in stats], [r[2] for r in reads], torch._foreach_mul)
        for (_, _, fused), (weight, _, _, _), scale in zip(self.pairs, reads, scales):
            torch.mul(weight, scale.view(-1, 1, 1, 1), out=fused.weight)  # keeps the kernel's layout
        shifts = _where_given([m for _, m in stats], [r[1] for r in reads], torch._foreach_add)  # b - μ as b + (-μ)
        biases = _where_given(list(torch._foreach_mul(shifts, scales)), [r[3] for r in reads], torch._foreach_add)
        targets = [fused.bias for _, _, fused in self.pairs]
        assert all(t is not None for t in targets)
        torch._foreach_copy_(targets, biases)  # type: ignore[arg-type]


def _where_given(first: list[torch.Tensor], second: list[torch.Tensor | None],
                 op: Callable[[list[torch.Tensor], list[torch.Tensor]], Sequence[torch.Tensor]]) -> list[torch.Tensor]:
    """``op(first[k], second[k])`` where ``second[k]`` is given, ``first[k]`` where it is None: one
    multi-tensor call for all the given ones."""
    given = [k for k, t in enumerate(second) if t is not None]
    out = list(first)
    if given:
        for k, t in zip(given, op([first[k] for k in given], [second[k] for k in given])):  # type: ignore[misc]
            out[k] = t
    return out


def fuse_conv_bn(net: nn.Module, fixed: Callable[[nn.BatchNorm2d], bool] | None = None) -> FusedNetwork | None:
    """``net`` (eval mode) with its Conv2d -> BatchNorm2d pairs fused, or None (nothing to fuse, or
    the network does not trace). ``fixed(bn)``: whether ``bn``'s running statistics keep their values
    at every point (default: none is assumed to; see :class:`FusedNetwork`)."""
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
        # same geometry and kernel layout; its values are set by refresh, so its kernel is not copied (ResNet-18's
        # convolutions are 45 MB)
        fused = copy.deepcopy(conv, {id(t): nn.Parameter(torch.empty_like(t), requires_grad=False)
                                     for t in (conv.weight, conv.bias) if t is not None})
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
    out = FusedNetwork(gm, pairs, [fixed is not None and fixed(bn) for _, bn, _ in pairs])
    out.refresh()
    _log.debug("%d convolution + batch norm pair(s) fused", len(pairs))
    return out
