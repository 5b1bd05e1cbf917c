"""Helpers on torch modules that every layer needs (imported on first use: torch is heavy)."""

from __future__ import annotations

from torch import nn

__all__ = ["unwrap_module", "WRAPPER_PREFIXES", "strip_wrapper_prefixes"]

#: State-dict key prefixes added by wrappers: DDP/DataParallel (``module.``) and
#: ``torch.compile`` (``_orig_mod.``).
WRAPPER_PREFIXES = ("module.", "_orig_mod.")


def unwrap_module(module: nn.Module) -> nn.Module:
    """Return the user's module inside DDP/DataParallel (``.module``) and ``torch.compile`` (``._orig_mod``).

    Unwrapping keeps state-dict keys free of ``module.`` / ``_orig_mod.`` prefixes, so a
    checkpoint loads into a plain instance of the network class.
    """
    seen = set()
    while id(module) not in seen:
        seen.add(id(module))
        if isinstance(module, (nn.parallel.DistributedDataParallel, nn.DataParallel)):
            module = module.module
        elif hasattr(module, "_orig_mod") and isinstance(module._orig_mod, nn.Module):
            module = module._orig_mod
        else:
            break
    return module


def strip_wrapper_prefixes(keys: dict) -> dict:
    """A state dict with every wrapper prefix removed from the front of its keys.

    Keys are stripped only when all of them carry the same prefix (a wrapper prefixes
    every key), so a network with a real sub-module named ``module`` keeps its names.
    """
    out = dict(keys)
    changed = True
    while changed and out:
        changed = False
        for prefix in WRAPPER_PREFIXES:
            if all(k.startswith(prefix) for k in out):
                out = {k[len(prefix):]: v for k, v in out.items()}
                changed = True
    return out
