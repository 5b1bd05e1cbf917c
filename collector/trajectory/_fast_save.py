"""``torch.save`` bytes of state dicts whose layout repeats, without pickling them each time.

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
import threading
import zipfile
from typing import Any

import torch

__all__ = ["StateDictSaver", "save_bytes"]

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
        except Exception:  # noqa: BLE001 - torch.save's internals moved: keep using torch.save
            ok = False
        with self._lock:
            if ok and len(self._heads) < _MAX_LAYOUTS:
                self._heads[layout] = head
            elif not ok:
                self._refused.add(layout)
        return reference


_SAVER = StateDictSaver()


def save_bytes(state: Any) -> bytes:
    """``torch.save(state)`` into bytes (see :class:`StateDictSaver`)."""
    return _SAVER.to_bytes(state)
