"""torch checkpoint files (``torch.save``'s format): the one module that writes and reads them.

Writing (``ModelCheckpoint`` and SummaryCollector's interval checkpoints): the state is copied
off the training thread's way (:func:`cpu_state_dict`) and saved by a background writer
through :func:`save_file` (atomic; ``torch.save``'s format, or safetensors through
:mod:`collector.trajectory._safetensors`), which returns the file's SHA-256 and size
(:class:`FileDigest`, hashed on the writer's thread from the bytes it writes). Reading:
:func:`torch_load`, always ``torch.load(..., weights_only=True)``, whole or memory-mapped,
every failure worded as a :class:`CheckpointError` naming the file and where it came from;
state dicts are checked against a network by :mod:`collector.trajectory._loading`.

Fast saving of repeated layouts (:class:`StateDictSaver`, :func:`save_bytes`): interval
checkpoints save the same keys, dtypes and shapes again and again, and pickling the whole
structure each time was most of the time of writing a small network's checkpoint.
``torch.save`` writes a zip archive whose first records (``data.pkl``, ``.format_version``,
``.storage_alignment``, ``byteorder``) depend on the layout only, then one record per storage;
:class:`StateDictSaver` takes those first records from a real ``torch.save`` of a layout's
first state dict and writes them again, followed by the new storages, through the zip writer
``torch.save`` uses. A layout is reused only after one replay gave exactly ``torch.save``'s
bytes; anything unusual (shared or partial storages, tensor subclasses, non-CPU tensors, an
internal API that moved in another torch version) takes ``torch.save`` itself.
"""

from __future__ import annotations

import hashlib
import io
import os
import pickle
import re
import struct
import sys
import threading
import warnings
import zipfile
from typing import Any

import torch
from torch import nn

from collector.common import atomic_path
from collector.trajectory import _safetensors
from collector.trajectory._integrity import (
    HINT_RESTORE,
    CheckpointError,
    FileDigest,
    check_archive,
    file_digest,
    unreadable,
)

__all__ = ["cpu_state_dict", "save_file", "to_cpu", "save_bytes", "StateDictSaver", "IN_MEMORY_SAVE_BYTES",
           "torch_load", "is_zip", "tensor_offsets", "HINT_STATE_DICT"]


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


def save_file(obj: Any, path: str, *, file_format: str = "torch") -> FileDigest:
    """``torch.save(obj)`` to ``path`` through a temporary name: a reader never sees half a checkpoint.

    With ``file_format="safetensors"`` (a state dict: names to tensors) the file is a
    safetensors file instead, written tensor by tensor from the tensors' own memory and
    hashed as it is written (:func:`collector.trajectory._safetensors.write`).

    A small checkpoint is serialized into memory and written with one ``write`` call:
    torch's file writer holds the GIL while it writes, Python's file write does not,
    so the disk time then overlaps the training loop or the summary writer instead of
    stopping them. Large ones are streamed to the file (no second copy in memory).

    Returns
    -------
    FileDigest
        SHA-256 and size of the bytes written: hashed from memory for a small
        checkpoint, read back from the file for a streamed one. Called from a background
        writer, the hashing costs the training thread nothing (``hashlib`` releases the
        GIL for large buffers).
    """
    with atomic_path(path) as tmp:
        if file_format == "safetensors":
            digest = FileDigest(*_safetensors.write(obj, tmp))
        elif _tensor_bytes(obj) <= IN_MEMORY_SAVE_BYTES:
            data = save_bytes(obj)  # torch.save's bytes; a repeated state-dict layout is not pickled again
            with open(tmp, "wb") as f:
                f.write(data)
            digest = FileDigest(hashlib.sha256(data).hexdigest(), len(data))
        else:
            torch.save(obj, tmp)
            digest = file_digest(tmp)
    return digest


def to_cpu(obj: Any) -> Any:
    if isinstance(obj, torch.Tensor):
        return obj.detach().to("cpu", copy=True)
    if isinstance(obj, dict):
        return {k: to_cpu(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(to_cpu(v) for v in obj)
    return obj


# -- loading checkpoint files -----------------------------------------------------------
HINT_STATE_DICT = "HINT: save a state dict of tensors: torch.save(network.state_dict(), path)."
#: How many differing keys a message lists.
_SHOWN_KEYS = 5


def _first_sentence(exc: BaseException) -> str:
    """The start of an exception's message, without torch's advice to load with weights_only=False."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    text = text.split(". ")[0].rstrip(".")
    if "weights_only" in text:
        text = ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def is_zip(path: str) -> bool:
    """Whether a file starts as a zip archive (``torch.save``'s format since torch 1.6)."""
    with open(path, "rb") as fh:
        return fh.read(4) == b"PK\x03\x04"


def torch_load(path: str, what: str, *, mapped: bool = False) -> Any:
    """``torch.load(path, weights_only=True)`` to the CPU, every failure a :class:`CheckpointError`.

    With ``mapped``, a zip checkpoint (``torch.save``'s format since torch 1.6) is
    memory-mapped (``mmap=True``): its tensors are read from the file when used, and the
    mapping ends when the last of them is dropped; a legacy file is loaded whole.
    """
    mapped = mapped and is_zip(path)
    try:
        return _torch_load_or_raise(path, what, mapped)
    except CheckpointError as exc:
        if exc.path == path and "weights_only=True" not in str(exc):
            # torch.load's own failure of a zip checkpoint (a bare OSError for a truncated one): the archive's
            # structure and CRC-32s usually say more precisely what is wrong.
            check_archive(path, what)
        raise


def _torch_load_or_raise(path: str, what: str, mapped: bool) -> Any:
    try:
        with warnings.catch_warnings():
            # torch warns about a foreign pickle's protocol before refusing it; the error below says more.
            warnings.filterwarnings("ignore", message=".*pickle protocol", category=UserWarning)
            return torch.load(path, map_location="cpu", weights_only=True, mmap=mapped)
    except pickle.UnpicklingError as exc:
        # torch's message advises weights_only=False (running code from the file); keep only its diagnosis.
        m = re.search(r"WeightsUnpickler error:\s*(.+?)(?:\.\s|\n|$)", str(exc))
        detail = m.group(1).strip().rstrip(".") if m else _first_sentence(exc)
        if detail.startswith("Unsupported global"):
            raise CheckpointError(
                f"{what}: checkpoint file {path!r} holds Python objects other than tensors and plain containers "
                f"({detail}). Checkpoints are loaded with torch.load(weights_only=True), which never runs code "
                "from a file. " + HINT_STATE_DICT, path=path, what=what) from None
        raise CheckpointError(
            f"{what}: checkpoint file {path!r} is not a PyTorch checkpoint, or it is damaged: its content is not a "
            f"pickle of tensors ({detail}). " + HINT_RESTORE, path=path, what=what) from None
    except OSError as exc:
        try:  # torch reports some damaged archives as OSError (EINVAL): tell them from a file that cannot be read
            with open(path, "rb") as fh:
                fh.read(1)
        except OSError:
            raise unreadable(path, what, exc) from None
        raise CheckpointError(
            f"{what}: checkpoint file {path!r} is not a PyTorch checkpoint, or it is truncated or damaged "
            f"({_first_sentence(exc)}). " + HINT_RESTORE, path=path, what=what) from None
    except EOFError:
        raise CheckpointError(f"{what}: checkpoint file {path!r} is empty or truncated ({os.path.getsize(path)} "
                              "bytes). " + HINT_RESTORE, path=path, what=what) from None
    except Exception as exc:  # torch raises RuntimeError, KeyError, ValueError... for files it cannot parse
        raise CheckpointError(
            f"{what}: checkpoint file {path!r} is not a PyTorch checkpoint, or it is truncated or damaged "
            f"({_first_sentence(exc)}). " + HINT_RESTORE, path=path, what=what) from None




def _record_starts(path: str) -> list[int]:
    """Where the bytes of each tensor storage record (``.../data/N``) of a zip checkpoint begin."""
    starts = []
    with zipfile.ZipFile(path) as archive, open(path, "rb") as fh:
        for info in archive.infolist():
            if info.compress_type != zipfile.ZIP_STORED or "/data/" not in info.filename:
                continue
            fh.seek(info.header_offset)
            head = fh.read(30)
            name_len, extra_len = struct.unpack("<HH", head[26:30])
            starts.append(info.header_offset + 30 + name_len + extra_len)
    return starts


def tensor_offsets(path: str, mapped: Any) -> dict[str, int]:
    """The byte offset in ``path`` of each contiguous tensor of a state dict memory-mapped by
    ``torch_load(path, mapped=True)``, so that rows of it can be read with plain file reads.

    ``torch.load(mmap=True)`` maps the file once and makes every storage a view of that
    mapping at its record's offset: a tensor's offset is its storage's address less the
    mapping's, plus its own offset in the storage. The mapping's address is the lowest
    storage's less the first storage record's start. Each offset is then checked by reading the
    tensor's first bytes from the file and comparing them with the mapped ones; a tensor
    not found so (or a file whose layout differs, or big-endian data) is left out, and the
    caller reads it through the mapping instead.
    """
    tensors = {k: t for k, t in mapped.items() if isinstance(t, torch.Tensor) and t.numel() and t.is_contiguous()
               and t.device.type == "cpu"}
    starts = _record_starts(path)
    if not tensors or not starts or sys.byteorder != "little":
        return {}
    base = min(t.untyped_storage().data_ptr() for t in tensors.values()) - min(starts)
    out = {}
    with open(path, "rb") as fh:
        for key, t in tensors.items():
            offset = int(t.untyped_storage().data_ptr() - base + t.storage_offset() * t.element_size())
            count = min(t.nbytes, 64)
            fh.seek(offset)
            if fh.read(count) == t.reshape(-1).view(torch.uint8)[:count].numpy().tobytes():
                out[key] = offset
    return out
