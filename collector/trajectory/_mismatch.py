"""What a checkpoint whose keys do not fit the network most likely is, and how to fix it (private).

The common mismatches name their fix: keys that differ by a prefix (a checkpoint saved
from a LightningModule holding the network as ``self.net`` has ``net.fc1.weight`` where
the bare network has ``fc1.weight``; the other way round, a network that wraps the one
saved), and a training checkpoint's dict around the state dict (``{"state_dict": ...}``).
The hint names no entry point: the same check serves ``compute_landscape``,
``SummaryLandscape`` and ``landscape gen``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["mismatch_hint", "key_prefix"]


def key_prefix(longer: set[str], shorter: list[str]) -> str | None:
    """The module path ``p`` (ending in ".") such that ``p + k`` is in ``longer`` for every ``k`` of
    ``shorter``, if there is one."""
    if not shorter:
        return None
    first = shorter[0]
    for key in sorted(longer):
        if key.endswith("." + first):
            prefix = key[:-len(first)]
            if all(prefix + k in longer for k in shorter):
                return prefix
    return None


def mismatch_hint(missing: list[str], unexpected: list[str], state: Mapping[str, Any]) -> str:
    """The ``HINT: ...`` of a key mismatch: ``missing`` keys are the network's that the checkpoint
    lacks, ``unexpected`` the checkpoint's that the network lacks."""
    if "state_dict" in unexpected and isinstance(state.get("state_dict"), Mapping):
        return ("HINT: this is a training checkpoint (a dict holding 'state_dict'), not a state dict; use its "
                "'state_dict' entry: torch.save(torch.load(path, weights_only=True)['state_dict'], new_path).")
    prefix = key_prefix(set(unexpected), missing)
    if prefix is not None:
        return (f"HINT: the checkpoint's keys are the network's with the prefix {prefix!r} (a checkpoint saved "
                "from a module holding the network as an attribute, such as a LightningModule's "
                f"self.{prefix.rstrip('.')}); strip the prefix: {{k[{len(prefix)}:]: v for k, v in state.items() "
                f"if k.startswith({prefix!r})}}, or use the module that was saved as the network.")
    prefix = key_prefix(set(missing), unexpected)
    if prefix is not None:
        return (f"HINT: the network's keys are the checkpoint's with the prefix {prefix!r} (the network wraps the "
                f"one that was saved); use the inner module (network.{prefix.rstrip('.')}) as the network, or add "
                f"the prefix: {{{prefix!r} + k: v for k, v in state.items()}}.")
    return "HINT: the network must be the architecture that was trained."
