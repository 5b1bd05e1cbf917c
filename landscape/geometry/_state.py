"""Which tensors move, and whether a state dict fits the network (private)."""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch import nn

from collector.common import strip_wrapper_prefixes
from collector.trajectory import check_state_dict

__all__ = ["moved_names", "matches", "as_patterns", "fit_state", "check_keys", "flat_float", "keeps_placement"]


def _prefixes(name: str) -> list[str]:
    """``"a.b.weight"`` -> ``["a.b.weight", "a", "a.b"]``: the name and its modules' names."""
    parts = name.split(".")
    return [name] + [".".join(parts[:k]) for k in range(1, len(parts))]


def matches(name: str, pattern: str) -> bool:
    """Whether parameter ``name`` matches the glob ``pattern`` (:func:`fnmatch.fnmatchcase`),
    itself or through one of its modules: ``"fc1"`` and ``"fc*"`` match ``"fc1.weight"``,
    ``"*.bias"`` every bias, ``"layers.0.*"`` everything under ``layers.0``."""
    return any(fnmatch.fnmatchcase(n, pattern) for n in _prefixes(name))


def as_patterns(value: str | Sequence[str] | None) -> list[str]:
    """``None``, one pattern or a sequence of patterns, as a list."""
    if value is None:
        return []
    return [value] if isinstance(value, str) else list(value)


def moved_names(network: nn.Module, ignore: str | Sequence[str] | None,
                include: str | Sequence[str] | None = None, *, buffers: bool = False) -> tuple[list[str], list[str]]:
    """Return ``(moved, still)``: every floating-point parameter, by its first name.

    Every parameter moves, whatever it is called (a learned positional embedding, a cls
    token and a layer-scale gamma as much as weights and biases); buffers (batch-norm
    statistics) never do; a parameter shared by two modules (tied embeddings) is listed
    once, under the first name ``named_parameters`` gives it, so it moves once.

    ``include`` (glob patterns, see :func:`matches`) keeps only the parameters matching
    one of them; ``ignore`` puts those matching one of its patterns in ``still``, and
    its keyword ``"biasbn"`` every tensor with at most one dimension (Li et al.: their
    direction is zero). A pattern that matches no parameter is refused (a typo would
    otherwise silently move everything), and so is a selection that moves nothing.

    With ``buffers=True`` (an interpolation between models) the floating-point buffers
    (batch-norm running statistics) follow the same rules and come after the parameters,
    as Li et al.'s ``dir_type='states'`` moves them.
    """
    ignores = as_patterns(ignore)
    biasbn = "biasbn" in ignores
    globs = [g for g in ignores if g != "biasbn"]
    includes = as_patterns(include)
    named: list[tuple[str, torch.Tensor]] = [(n, p) for n, p in network.named_parameters()
                                             if p.is_floating_point()]  # tied ones once
    if buffers:
        named += [(n, b) for n, b in network.named_buffers() if b.is_floating_point()]
    for what, patterns in (("include", includes), ("ignore", globs)):
        for pat in patterns:
            if not any(matches(n, pat) for n, _ in named):
                shown = [n for n, _ in named]
                listing = ", ".join(shown[:12]) + (f", ... ({len(shown)} in all)" if len(shown) > 12 else "")
                raise ValueError(f"The {what!r} pattern {pat!r} matches no parameter of the network. "
                                 f"HINT: patterns are fnmatch globs on parameter or module names: {listing}.")
    moved: list[str] = []
    still: list[str] = []
    for name, p in named:
        keep = (not includes or any(matches(name, g) for g in includes)) and \
            not any(matches(name, g) for g in globs) and not (biasbn and p.dim() <= 1)
        (moved if keep else still).append(name)
    if not moved and named:
        raise ValueError(f"No parameter moves with include={include!r} and ignore={ignore!r}. "
                         "HINT: loosen the patterns.")
    return moved, still


def fit_state(network: nn.Module, state: Mapping[str, Any]) -> Mapping[str, Any]:
    """``state`` with the ``module.`` / ``_orig_mod.`` prefixes of DDP, DataParallel and
    ``torch.compile`` removed when that makes its keys the (unwrapped) network's."""
    expected = set(network.state_dict().keys())
    if set(state.keys()) == expected:
        return state
    stripped = strip_wrapper_prefixes(dict(state))
    return stripped if set(stripped.keys()) == expected else state


def check_keys(network: nn.Module, state: Mapping[str, Any], *, what: str, path: str | None = None) -> None:
    """Refuse a state dict whose keys or shapes differ from the network's.

    Raises ``collector.trajectory.CheckpointError`` naming ``what`` (the parameter the
    state came from) and ``path`` (its file, if any), with the first differing keys.
    """
    check_state_dict(state, network.state_dict(), what=what, path=path)


def flat_float(state: Mapping[str, torch.Tensor], names: Sequence[str]) -> list[torch.Tensor]:
    """The tensors ``names`` of ``state`` as contiguous float32 CPU tensors."""
    return [state[n].detach().to("cpu", torch.float32).contiguous() for n in names]


def keeps_placement(network: nn.Module) -> bool:
    """Whether ``network`` is evaluated where its parameters are, by its caller's placement: a Hugging Face
    ``device_map`` model (``hf_device_map``), or parameters on more than one device."""
    if getattr(network, "hf_device_map", None):
        return True
    return len({p.device for p in network.parameters()}) > 1
