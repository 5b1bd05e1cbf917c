"""Checkpoint files: the one module that writes and reads them.

Writing (``ModelCheckpoint`` and SummaryCollector's interval checkpoints): the state is
copied off the training thread's way (:func:`cpu_state_dict`) and saved by a background
writer through :func:`save_file` (atomic, ``torch.save``'s format). Reading (landscape
generation): :func:`load_checkpoint`, always ``torch.load(..., weights_only=True)``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from collector.common import atomic_path
from collector.trajectory._fast_save import save_bytes

__all__ = ["cpu_state_dict", "save_file", "load_checkpoint", "to_cpu", "IN_MEMORY_SAVE_BYTES"]


def cpu_state_dict(module: nn.Module) -> dict[str, torch.Tensor]:
    """Copy ``module.state_dict()`` to CPU tensors that later training steps cannot change.

    Done on the training thread: once this returns, the optimizer may update the
    parameters in place while a background thread writes the copy.
    """
    out = {}
    for key, value in module.state_dict().items():
        value = value.detach()
        out[key] = value.clone() if value.device.type == "cpu" else value.to("cpu")
    return out


#: Checkpoints whose tensors hold at most this many bytes are serialized in memory first.
IN_MEMORY_SAVE_BYTES = 64 << 20


def _tensor_bytes(obj: Any) -> int:
    if isinstance(obj, torch.Tensor):
        return obj.nbytes
    if isinstance(obj, dict):
        return sum(_tensor_bytes(v) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return sum(_tensor_bytes(v) for v in obj)
    return 0


def save_file(obj: Any, path: str) -> None:
    """``torch.save(obj)`` to ``path`` through a temporary name: a reader never sees half a checkpoint.

    A small checkpoint is serialized into memory and written with one ``write`` call:
    torch's file writer holds the GIL while it writes, Python's file write does not,
    so the disk time then overlaps the training loop or the summary writer instead of
    stopping them. Large ones are streamed to the file (no second copy in memory).
    """
    with atomic_path(path) as tmp:
        if _tensor_bytes(obj) <= IN_MEMORY_SAVE_BYTES:
            data = save_bytes(obj)  # torch.save's bytes; a repeated state-dict layout is not pickled again
            with open(tmp, "wb") as f:
                f.write(data)
        else:
            torch.save(obj, tmp)


def to_cpu(obj: Any) -> Any:
    if isinstance(obj, torch.Tensor):
        return obj.detach().to("cpu", copy=True)
    if isinstance(obj, dict):
        return {k: to_cpu(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(to_cpu(v) for v in obj)
    return obj


def load_checkpoint(item: Any, *, what: str) -> dict[str, torch.Tensor]:
    """A state dict from a mapping or a checkpoint path (``torch.load(weights_only=True)``).

    Parameters
    ----------
    item : mapping or str or os.PathLike
        A state dict (its tensors are detached and moved to the CPU) or a file written by
        ``torch.save``.
    what : str
        How the checkpoint is named in error messages (``"checkpoint 3 of landscape_[1, 5]"``).
    """
    if isinstance(item, Mapping):
        return {k: (v.detach().cpu() if isinstance(v, torch.Tensor) else v) for k, v in item.items()}
    if isinstance(item, (str, os.PathLike)):
        path = os.fspath(item)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"{what}: checkpoint file {path!r} does not exist.")
        sd = torch.load(path, map_location="cpu", weights_only=True)
        if not isinstance(sd, Mapping):
            raise ValueError(f"{what}: checkpoint file {path!r} does not hold a state dict "
                             f"(got {type(sd).__name__}).")
        return dict(sd)
    raise TypeError(f"{what} must be a state dict or a checkpoint path; got {type(item).__name__}.")
