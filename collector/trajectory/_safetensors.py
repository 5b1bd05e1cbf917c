"""safetensors checkpoint files (Hugging Face's ``model.safetensors``): the one module that reads and writes them.

The format (https://github.com/huggingface/safetensors): an 8-byte little-endian header
length ``N``, ``N`` bytes of a JSON object mapping each tensor's name to its ``dtype``,
``shape`` and ``data_offsets`` (``[begin, end)`` in the data part, which they must cover
exactly, without holes or overlaps), an optional ``__metadata__`` object of strings, and
then the tensors' bytes, little-endian. No pickle: loading runs no code from the file.

* :func:`is_safetensors` and :func:`read_header` (the structural check of a file: header
  JSON, dtypes, offsets and sizes against the file's length) use the standard library
  only, so that ``collector.trajectory._integrity`` verifies a file without torch;
* :func:`write` writes a state dict tensor by tensor from the tensors' own memory and
  hashes the bytes as it writes them (no serialized copy of the checkpoint, no second
  read of the file); its bytes are those of the reference ``safetensors.torch.save``
  (same tensor order and header layout);
* :func:`load` reads a whole file through the ``safetensors`` package (imported when
  first used; ``pip install safetensors``, which ``transformers`` installs too), into
  memory of its own: with the package's ``pread`` backend when it has one, else copied
  out of its memory map at once, so no file stays mapped;
* :func:`tensor_offsets` gives each tensor's place in the file (from the checked header),
  where ``collector.trajectory.CheckpointReader`` reads rows with plain file reads.

torch is imported only by the functions that make or take tensors.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["SUFFIX", "Entry", "is_safetensors", "read_header", "write", "load", "tensor_offsets", "require_package"]

SUFFIX = ".safetensors"
#: The reference implementation refuses larger headers.
_MAX_HEADER = 100_000_000
_ITEMSIZE = {"BOOL": 1, "U8": 1, "I8": 1, "F8_E5M2": 1, "F8_E4M3": 1, "F8_E4M3FNUZ": 1, "F8_E5M2FNUZ": 1,
             "I16": 2, "U16": 2, "F16": 2, "BF16": 2, "I32": 4, "U32": 4, "F32": 4, "C64": 8, "F64": 8,
             "I64": 8, "U64": 8}
#: The reference writes tensors by dtype, in the reverse of this order, then by name.
_RANK = {name: i for i, name in enumerate(_ITEMSIZE)}
_FROM_TORCH = {"bool": "BOOL", "uint8": "U8", "int8": "I8", "float8_e5m2": "F8_E5M2", "float8_e4m3fn": "F8_E4M3",
               "float8_e4m3fnuz": "F8_E4M3FNUZ", "float8_e5m2fnuz": "F8_E5M2FNUZ", "int16": "I16",
               "uint16": "U16", "float16": "F16", "bfloat16": "BF16", "int32": "I32", "uint32": "U32",
               "float32": "F32", "complex64": "C64", "float64": "F64", "int64": "I64", "uint64": "U64"}
_TO_TORCH = {v: k for k, v in _FROM_TORCH.items()}
_PACKAGE_HINT = "HINT: pip install safetensors (or torch-landscape[safetensors]; transformers installs it too)."


@dataclass(frozen=True)
class Entry:
    """One tensor of a safetensors file: its dtype name (``"F32"``), shape and byte range in the data part."""

    dtype: str
    shape: tuple[int, ...]
    begin: int
    end: int


def is_safetensors(path: str) -> bool:
    """Whether ``path`` is (meant to be) a safetensors file: by its ``.safetensors`` name, or
    by its content (a header length that fits the file, then ``{``), so that a renamed file
    is recognised too. A torch checkpoint starts with ``PK`` (zip) or a pickle opcode."""
    if path.endswith(SUFFIX):
        return True
    try:
        with open(path, "rb") as fh:
            head = fh.read(9)
        size = os.path.getsize(path)
    except OSError:
        return False
    return len(head) == 9 and head[8:9] == b"{" and 2 <= int.from_bytes(head[:8], "little") <= size - 8


def read_header(path: str) -> tuple[dict[str, Entry], dict[str, str], int]:
    """The checked header of a safetensors file: ``(entries, metadata, data_start)``.

    Raises
    ------
    OSError
        The file cannot be read.
    ValueError
        The file is not a whole safetensors file; the message says what is wrong (a
        header length beyond the file, a header that is not JSON, a tensor whose byte
        range does not match its dtype and shape, holes or overlaps between tensors, a
        file longer or shorter than its header says).
    """
    size = os.path.getsize(path)
    with open(path, "rb") as fh:
        head = fh.read(8)
        if len(head) < 8:
            raise ValueError(f"it has {size} bytes, fewer than the 8 of a header length")
        n = int.from_bytes(head, "little")
        if n < 2 or n > _MAX_HEADER or 8 + n > size:
            raise ValueError(f"its header length {n} does not fit a file of {size} bytes")
        raw = fh.read(n)
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise ValueError(f"its {n}-byte header is not JSON ({exc})") from None
    if not isinstance(header, dict):
        raise ValueError(f"its header is a JSON {type(header).__name__}, not an object")
    meta = header.pop("__metadata__", {})
    if not (isinstance(meta, dict) and all(isinstance(v, str) for v in meta.values())):
        raise ValueError(f"its __metadata__ is not an object of strings: {meta!r}")
    entries = {name: _entry(name, spec) for name, spec in header.items()}
    at = 0
    for name, e in sorted(entries.items(), key=lambda kv: (kv[1].begin, kv[1].end)):
        if e.begin != at:
            gap = "overlaps the tensor before it" if e.begin < at else f"leaves bytes [{at}, {e.begin}) unused"
            raise ValueError(f"tensor {name!r} at bytes [{e.begin}, {e.end}) {gap}")
        at = e.end
    if 8 + n + at != size:
        raise ValueError(f"its header describes {8 + n + at} bytes but the file has {size} (truncated, or bytes "
                         "appended)")
    return entries, dict(meta), 8 + n


def _entry(name: str, spec: Any) -> Entry:
    ok = isinstance(spec, dict) and spec.get("dtype") in _ITEMSIZE and isinstance(spec.get("shape"), list) \
        and isinstance(spec.get("data_offsets"), list) and len(spec["data_offsets"]) == 2 \
        and all(isinstance(k, int) and not isinstance(k, bool) and k >= 0
                for k in spec["shape"] + spec["data_offsets"])
    if not ok:
        raise ValueError(f"the header's entry of tensor {name!r} is not {{dtype, shape, data_offsets}} with a known "
                         f"dtype and non-negative integers: {spec!r}")
    begin, end = spec["data_offsets"]
    want = math.prod(spec["shape"]) * _ITEMSIZE[spec["dtype"]]
    if end - begin != want:
        raise ValueError(f"tensor {name!r} ({spec['dtype']} of shape {spec['shape']}) needs {want} bytes but its "
                         f"data_offsets [{begin}, {end}) hold {end - begin}")
    return Entry(spec["dtype"], tuple(spec["shape"]), begin, end)


def write(state: Mapping[str, Any], path: str, metadata: Mapping[str, str] | None = None) -> tuple[str, int]:
    """Write a state dict of CPU tensors to ``path`` (the caller renames it into place).

    The tensors' bytes go to the file from their own memory, one tensor at a time (a
    non-contiguous one is made contiguous first: one tensor's copy at most), and are
    hashed as they are written.

    Returns
    -------
    (str, int)
        The file's SHA-256 (hex) and size in bytes.
    """
    import torch  # only here and in the readers: the header functions serve the torch-free integrity check

    if sys.byteorder != "little":
        raise NotImplementedError("safetensors files are little-endian; writing them on a big-endian machine "
                                  "is not supported. HINT: save with checkpoint_format='torch'.")
    items = []
    for name, t in state.items():
        kind = _FROM_TORCH.get(str(t.dtype).removeprefix("torch."))
        if not isinstance(t, torch.Tensor) or kind is None or t.device.type != "cpu" or t.layout != torch.strided:
            raise ValueError(f"safetensors files hold dense CPU tensors of the dtypes {sorted(_FROM_TORCH)}; "
                             f"{name!r} is {type(t).__name__} {getattr(t, 'dtype', '')}")
        items.append((name, kind, t))
    items.sort(key=lambda it: (-_ITEMSIZE[it[1]], -_RANK[it[1]], it[0]))
    header: dict[str, Any] = {"__metadata__": dict(metadata)} if metadata else {}
    at = 0
    for name, kind, t in items:
        header[name] = {"dtype": kind, "shape": list(t.shape), "data_offsets": [at, at + t.numel() * t.element_size()]}
        at += t.numel() * t.element_size()
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)
    digest = hashlib.sha256()
    with open(path, "wb") as fh:
        for chunk in (len(text).to_bytes(8, "little"), text):
            fh.write(chunk)
            digest.update(chunk)
        for _, _, t in items:
            if t.numel():
                view = t.detach().contiguous().reshape(-1).view(torch.uint8).numpy().data
                fh.write(view)
                digest.update(view)
    return digest.hexdigest(), 8 + len(text) + at


def require_package() -> Any:
    """The ``safetensors.torch`` module, or an ImportError saying what to install."""
    try:
        import safetensors.torch
    except ImportError:
        raise ImportError("Reading safetensors checkpoints needs the 'safetensors' package, which is not installed. "
                          + _PACKAGE_HINT) from None
    return safetensors


_PREAD: list[bool] = []  # whether the installed package has the pread backend (tried once)


def _open(path: str) -> tuple[Any, bool]:
    """A ``safe_open`` handle and whether its tensors are in memory of their own (pread backend)."""
    package = require_package()
    if not _PREAD or _PREAD[0]:
        try:
            handle = package.safe_open(path, framework="pt", device="cpu", backend="pread")
        except TypeError:  # safetensors < 0.8: memory-mapped tensors only
            _PREAD[:] = [False]
        else:
            _PREAD[:] = [True]
            return handle, True
    return package.safe_open(path, framework="pt", device="cpu"), False


def load(path: str) -> dict[str, Any]:
    """Every tensor of a (checked) safetensors file, in memory of their own."""
    handle, owned = _open(path)
    out = {}
    with handle as f:
        names = list(f.keys())  # a safe_open handle is not iterable
        for name in names:
            t = f.get_tensor(name)
            out[name] = t if owned else t.clone()
    return out


def tensor_offsets(path: str) -> dict[str, tuple[int, Any, tuple[int, ...]]]:
    """``{name: (byte offset in the file, torch dtype, shape)}`` of a safetensors file's tensors
    (its header checked by :func:`read_header`), for reading rows of them with plain file reads."""
    import torch  # the header functions serve the torch-free integrity check

    entries, _, start = read_header(path)
    return {name: (start + e.begin, getattr(torch, _TO_TORCH[e.dtype]), e.shape) for name, e in entries.items()}
