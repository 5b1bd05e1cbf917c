"""Parameter-free modules replaced by the same function in a faster form, in the engine's copy (private).

Only exact mathematical equivalents, so that a point's value changes by float rounding at
most (as between any two kernels): Hugging Face's ``NewGELUActivation`` and
``FastGELUActivation`` (GPT-2, GPT-J, CodeGen, ... as ``gelu_new`` / ``gelu_fast``) compute
the tanh approximation of GELU in five element-wise operations, each allocating its output;
``torch.nn.functional.gelu(x, approximate="tanh")`` is that function in one kernel
(transformers' own ``gelu_pytorch_tanh`` activation is it). On a tiny GPT-2 on a CPU the
activation took 30 % of the forward pass; replaced, a pass took 13-15 % less.

The modules are recognised by their class's module and name, so transformers is never
imported here; the user's network is never changed (the engine works on its own copy).
"""

from __future__ import annotations

import logging

import torch
from torch import nn
from torch.nn import functional as F

__all__ = ["TanhGELU", "replace_equivalents"]

_log = logging.getLogger("landscape")

#: (class module, class name) of modules equal to ``F.gelu(x, approximate="tanh")``.
TANH_GELU = {("transformers.activations", "NewGELUActivation"),
             ("transformers.activations", "FastGELUActivation")}


class TanhGELU(nn.Module):
    """``F.gelu(x, approximate="tanh")``: 0.5 x (1 + tanh(√(2/π) (x + 0.044715 x³)))."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(x, approximate="tanh")


def replace_equivalents(net: nn.Module) -> int:
    """Replace ``net``'s sub-modules that have a faster equal form (in place); how many were."""
    count = 0
    for name, module in list(net.named_modules()):
        kind = type(module)
        if name and (kind.__module__, kind.__name__) in TANH_GELU and not module._forward_hooks \
                and not module._forward_pre_hooks:
            parent_name, _, leaf = name.rpartition(".")
            parent = net.get_submodule(parent_name) if parent_name else net
            setattr(parent, leaf, TanhGELU())
            count += 1
    if count:
        _log.debug("%d tanh-GELU activation(s) run as F.gelu(approximate='tanh')", count)
    return count
