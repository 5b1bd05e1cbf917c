"""Copying network state off the training thread's way and writing it in the background.

Shared by ModelCheckpoint and the landscape checkpoints of SummaryCollector.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import torch
from torch import nn

from collector.trajectory._fast_save import save_bytes

__all__ = ["unwrap_module", "cpu_state_dict", "BackgroundWriter", "save_file", "to_cpu", "IN_MEMORY_SAVE_BYTES"]


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


class BackgroundWriter:
    """One writer thread, so files are written in submission order."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._pool: ThreadPoolExecutor | None = None
        self._futures: list[Future] = []
        self._lock = threading.Lock()

    def submit(self, fn, *args) -> None:
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=self._name)
            self._futures.append(self._pool.submit(fn, *args))

    def wait(self) -> None:
        """Block until every submitted write finished; re-raise the first failure."""
        with self._lock:
            futures, self._futures = self._futures, []
        errors = [f.exception() for f in futures]
        errors = [e for e in errors if e is not None]
        if errors:
            raise errors[0]

    def shutdown(self) -> None:
        try:
            self.wait()
        finally:
            with self._lock:
                pool, self._pool = self._pool, None
            if pool is not None:
                pool.shutdown(wait=True)


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
    tmp = f"{path}.tmp{os.getpid()}"
    if _tensor_bytes(obj) <= IN_MEMORY_SAVE_BYTES:
        data = save_bytes(obj)  # torch.save's bytes; a repeated state-dict layout is not pickled again
        with open(tmp, "wb") as f:
            f.write(data)
    else:
        torch.save(obj, tmp)
    os.replace(tmp, path)


def to_cpu(obj: Any) -> Any:
    if isinstance(obj, torch.Tensor):
        return obj.detach().to("cpu", copy=True)
    if isinstance(obj, dict):
        return {k: to_cpu(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(to_cpu(v) for v in obj)
    return obj
