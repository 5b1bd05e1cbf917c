"""Checkpoint files: the one module that writes and reads them.

Writing (``ModelCheckpoint`` and SummaryCollector's interval checkpoints): the state is
copied off the training thread's way (:func:`cpu_state_dict`) and saved by a background
writer through :func:`save_file` (atomic, ``torch.save``'s format). Reading (landscape
generation): :func:`load_checkpoint`, always ``torch.load(..., weights_only=True)``.

Fast saving of repeated layouts (:class:`StateDictSaver`, :func:`save_bytes`):
``torch.save`` bytes of state dicts whose layout repeats, without pickling them each time.

Interval checkpoints save the same network again and again: the same keys, dtypes and
shapes, only the values change. ``torch.save`` pickles the whole structure every time
(a Python ``persistent_id`` call per pickled object), which was about two thirds of
the time of writing a small network's checkpoint. The file ``torch.save`` writes is
a zip archive whose first records (``data.pkl``, ``.format_version``,
``.storage_alignment``, ``byteorder``) depend on the layout only, followed by one
record per tensor storage (``data/0``, ``data/1``, ...). :class:`StateDictSaver`
takes those first records from a real ``torch.save`` of the first state dict of a
layout, and for later ones writes them again followed by the new storages, through
the same zip writer ``torch.save`` uses.

Safety: a layout is only reused after one replay was checked to give exactly
``torch.save``'s bytes; anything unusual (shared or partial storages, tensor
subclasses, non-CPU tensors, an internal API that moved in another torch version)
takes ``torch.save`` itself.
"""

from __future__ import annotations

import io
import os
import threading
import zipfile
from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from collector.common import atomic_path

__all__ = ["cpu_state_dict", "save_file", "load_checkpoint", "to_cpu", "save_bytes", "StateDictSaver",
           "IN_MEMORY_SAVE_BYTES"]


# -- torch.save's bytes of repeated layouts ----------------------------------------
#: Layouts remembered per process (a run saves one or two networks).
_MAX_LAYOUTS = 16


def _torch_save_bytes(obj: Any) -> bytes:
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    return buffer.getvalue()


def _layout(state: Any) -> tuple | None:
    """What ``data.pkl`` depends on, or None when the state is not a plain flat dict of
    CPU tensors that each own their whole, contiguous storage."""
    if type(state) is not dict or not state:
        return None
    items = []
    seen = set()
    for key, t in state.items():
        if type(key) is not str or type(t) is not torch.Tensor:
            return None
        if (t.layout is not torch.strided or t.device.type != "cpu" or t.requires_grad or t.is_quantized
                or t.is_conj() or t.is_neg() or t.__dict__ or not t.is_contiguous() or t.storage_offset() != 0):
            return None
        storage = t.untyped_storage()
        ptr = storage.data_ptr()
        if storage.nbytes() != t.nbytes or t.nbytes == 0 or ptr in seen:
            return None
        seen.add(ptr)
        items.append((key, t.dtype, tuple(t.shape), t.stride()))
    return tuple(items)


def _head_records(data: bytes, count: int) -> list[tuple[str, bytes]] | None:
    """The records ``torch.save`` wrote before the storages, if its archive has the expected shape."""
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        names = archive.namelist()
        prefix = names[0].split("/", 1)[0] + "/"
        if not all(name.startswith(prefix) for name in names):
            return None
        names = [name[len(prefix):] for name in names]
        data_names = [name for name in names if name.startswith("data/")]
        if data_names != [f"data/{i}" for i in range(count)]:
            return None
        first = names.index("data/0")
        return [(name, archive.read(prefix + name)) for name in names[:first]]


def _replay(head: list[tuple[str, bytes]], state: dict[str, torch.Tensor]) -> bytes:
    buffer = io.BytesIO()
    # The writer torch.save uses for a buffer (same CRC and alignment settings).
    with torch.serialization._open_zipfile_writer(buffer) as writer:
        for name, record in head:
            writer.write_record(name, record, len(record))
        for i, t in enumerate(state.values()):
            storage = t.untyped_storage()
            writer.write_record(f"data/{i}", storage, storage.nbytes())
    return buffer.getvalue()


class StateDictSaver:
    """``torch.save(state)`` as bytes, reusing the pickled layout of earlier state dicts.

    The bytes are always those ``torch.save`` gives (checked once per layout).
    """

    def __init__(self) -> None:
        self._heads: dict[tuple, list[tuple[str, bytes]]] = {}
        self._refused: set[tuple] = set()
        self._lock = threading.Lock()

    def to_bytes(self, state: Any) -> bytes:
        layout = _layout(state)
        if layout is None or layout in self._refused:
            return _torch_save_bytes(state)
        head = self._heads.get(layout)
        if head is not None:
            return _replay(head, state)
        reference = _torch_save_bytes(state)
        try:
            head = _head_records(reference, len(state))
            ok = head is not None and _replay(head, state) == reference
        except Exception:
            ok = False
        with self._lock:
            if ok and head is not None and len(self._heads) < _MAX_LAYOUTS:
                self._heads[layout] = head
            elif not ok:
                self._refused.add(layout)
        return reference


_SAVER = StateDictSaver()


def save_bytes(state: Any) -> bytes:
    """``torch.save(state)`` into bytes (see :class:`StateDictSaver`)."""
    return _SAVER.to_bytes(state)


# -- writing and reading checkpoint files -------------------------------------------
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
