"""Loading checkpoints, whole or a few rows at a time, and checking them against a network.

The one place a checkpoint becomes a state dict (:func:`load_checkpoint`) or is read in
blocks (:class:`CheckpointReader`), whatever its format: ``torch.save``'s (read by
:mod:`collector.trajectory._checkpoints` with ``weights_only=True``) or safetensors
(:mod:`collector.trajectory._safetensors`, no pickle), told apart by the file's name and
content. Every failure is a :class:`CheckpointError` naming the file and where it came
from.

A state dict fits a network when its keys and shapes are the network's once the
``module.`` / ``_orig_mod.`` prefixes of a wrapped network are removed, and once the
tensors a network ties (one storage under two names, e.g. GPT-2's ``lm_head.weight`` and
``transformer.wte.weight``) are filled in from their twin: Hugging Face's
``save_pretrained`` writes each tied tensor once.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch import nn

from collector.common import InvalidParameterError, strip_wrapper_prefixes
from collector.trajectory import _safetensors
from collector.trajectory._checkpoints import HINT_STATE_DICT, is_zip, tensor_offsets, torch_load
from collector.trajectory._integrity import (
    HINT_RESTORE,
    CheckpointError,
    FileDigest,
    existing_file,
    unreadable,
    verify_checkpoint_file,
)
from collector.trajectory._metadata import recorded_digest
from collector.trajectory._mismatch import mismatch_hint

__all__ = ["load_checkpoint", "check_state_dict", "check_checkpoints", "CheckpointReader"]

#: How many differing keys a message lists.
_SHOWN_KEYS = 5


def _load_file(path: str, what: str, *, mapped: bool = False) -> dict[str, Any]:
    """A checkpoint file's state dict; ``mapped``: its tensors memory-mapped where the format allows."""
    if _safetensors.is_safetensors(path):
        try:
            # the header is checked against the file first (cheap): the package's own errors are terse
            entries = _safetensors.read_header(path)[0]
            if mapped:  # the structure only: shapes from the header, the data read by CheckpointReader.read
                return {k: torch.empty(e.shape, device="meta") for k, e in entries.items()}
            return _safetensors.load(path)
        except OSError as exc:
            raise unreadable(path, what, exc) from None
        except ImportError:
            raise
        except Exception as exc:  # ValueError of read_header; the package's SafetensorError
            raise CheckpointError(f"{what}: checkpoint file {path!r} is not a whole safetensors file: {exc}. "
                                  + HINT_RESTORE, path=path, what=what) from None
    loaded = torch_load(path, what, mapped=mapped)
    if not isinstance(loaded, Mapping):
        raise CheckpointError(f"{what}: checkpoint file {path!r} holds a {type(loaded).__name__}, not a state "
                              "dict (parameter names mapped to tensors). " + HINT_STATE_DICT, path=path, what=what)
    return dict(loaded)


def _tied(reference: Mapping[str, Any]) -> dict[str, list[str]]:
    """For each tensor of a network's state dict, the other names of the same tensor (one storage, offset, shape)."""
    groups: dict[tuple, list[str]] = {}
    for k, t in reference.items():
        if isinstance(t, torch.Tensor) and t.numel() and t.device.type != "meta":
            groups.setdefault((t.untyped_storage().data_ptr(), t.storage_offset(), tuple(t.shape), t.stride()),
                              []).append(k)
    return {k: [o for o in g if o != k] for g in groups.values() if len(g) > 1 for k in g}


def _fit_keys(keys: Sequence[str], reference: Mapping[str, Any]) -> dict[str, str]:
    """Network key -> checkpoint key: the wrapper prefixes removed when that makes the keys the
    network's, tied tensors missing from the checkpoint taken from their twin; keys that still
    do not fit map to themselves (:func:`check_state_dict` says which)."""
    found = dict(zip(keys, keys))
    if set(found) != set(reference):
        stripped = strip_wrapper_prefixes(found)
        found = stripped if set(stripped) <= set(reference) else found
    missing = [k for k in reference if k not in found]
    if missing:
        tied = _tied(reference)
        for k in missing:
            twin = next((o for o in tied.get(k, ()) if o in found), None)
            if twin is not None:
                found[k] = found[twin]
    return found


def _fit(sd: dict[str, Any], network: nn.Module, what: str, path: str | None) -> dict[str, Any]:
    reference = network.state_dict()
    keymap = _fit_keys(list(sd), reference)
    fitted = {k: sd[v] for k, v in keymap.items()}
    check_state_dict(fitted, reference, what=what, path=path)
    return fitted


def load_checkpoint(item: Any, *, what: str, network: nn.Module | None = None, digest: FileDigest | None = None,
                    verify: bool = False, recorded_in: str | None = None) -> dict[str, torch.Tensor]:
    """A state dict from a mapping or a checkpoint path: the one place a checkpoint is loaded.

    Files written by ``torch.save`` are read with ``torch.load(weights_only=True)``;
    safetensors files (``model.safetensors``, by name or content) through the
    ``safetensors`` package, without pickles. Any failure (missing, unreadable,
    truncated, not a checkpoint, a pickle of other objects, keys or shapes that do not
    fit ``network``) raises :class:`CheckpointError` naming the file and ``what``.

    Parameters
    ----------
    item : mapping or str or os.PathLike
        A state dict (its tensors are detached and moved to the CPU) or a checkpoint file.
    what : str
        Where the checkpoint came from, for messages (``"checkpoints[2] of compute_landscape"``).
    network : nn.Module, optional
        The state dict must have exactly its keys and shapes, once the ``module.`` /
        ``_orig_mod.`` prefixes of a wrapped network's are removed and the tensors the
        network ties are filled in from their twin (the state returned has the network's
        keys).
    digest : FileDigest, optional
        The file must have this SHA-256 and size (see :func:`verify_checkpoint_file`).
    verify : bool, default=False
        Without ``digest``, check the file's structure first (the CRC-32 of every record
        of a torch zip archive; a safetensors file's header against its length).
    recorded_in : str, optional
        Where ``digest`` was recorded, for messages.

    Returns
    -------
    dict of str to Tensor

    Raises
    ------
    CheckpointError
        The checkpoint cannot be used (see above).
    InvalidParameterError
        ``item`` is neither a mapping nor a path.
    ImportError
        A safetensors file, and the ``safetensors`` package is not installed.
    """
    path = None
    if isinstance(item, Mapping):
        sd = {k: (v.detach().cpu() if isinstance(v, torch.Tensor) else v) for k, v in item.items()}
    elif isinstance(item, (str, os.PathLike)):
        path = os.fspath(item)
        if digest is not None or verify:
            verify_checkpoint_file(path, what=what, digest=digest, recorded_in=recorded_in)
        else:
            existing_file(path, what)
        sd = _load_file(path, what)
    else:
        raise InvalidParameterError(f"{what} must be a state dict or a checkpoint path. Got "
                                    f"{type(item).__name__} instead.")
    return _fit(sd, network, what, path) if network is not None else sd


def _shown(keys: list[str]) -> str:
    if len(keys) <= _SHOWN_KEYS:
        return repr(keys)
    return f"{keys[:_SHOWN_KEYS]!r} and {len(keys) - _SHOWN_KEYS} more"


def check_state_dict(state: Mapping[str, Any], reference: Mapping[str, Any], *, what: str,
                     path: str | None = None) -> None:
    """Refuse a state dict whose keys or tensor shapes differ from ``reference`` (the network's).

    The message names ``what`` and ``path``, the first missing and unexpected keys (or
    the first keys whose shapes differ, with both shapes), and what the mismatch most
    likely is: keys that differ by a prefix (a checkpoint of a LightningModule holding the
    network as ``self.net``: ``net.fc1.weight`` for ``fc1.weight``) say so and how to strip it.

    Parameters
    ----------
    state : mapping of str to Tensor
        The checkpoint's state dict.
    reference : mapping of str to Tensor
        The network's ``state_dict()``.
    what : str
        Where the state came from (``"checkpoints[1] of compute_landscape"``).
    path : str, optional
        Its file.

    Raises
    ------
    CheckpointError
    """
    where = f"{what} ({path!r})" if path is not None else what
    expected, got = set(reference), set(state)
    missing, unexpected = sorted(expected - got), sorted(got - expected)
    if missing or unexpected:
        raise CheckpointError(f"The parameters of the network do not match {where}: missing keys {_shown(missing)}, "
                              f"unexpected keys {_shown(unexpected)}. " + mismatch_hint(missing, unexpected, state),
                              path=path, what=what)
    shapes = [(k, tuple(state[k].shape), tuple(reference[k].shape)) for k in sorted(expected)
              if isinstance(state[k], torch.Tensor) and isinstance(reference[k], torch.Tensor)
              and tuple(state[k].shape) != tuple(reference[k].shape)]
    if shapes:
        k, mine, theirs = shapes[0]
        more = f" ({len(shapes) - 1} more differ: {_shown([s[0] for s in shapes[1:]])})" if len(shapes) > 1 else ""
        raise CheckpointError(f"The parameters of the network do not match {where}: {k!r} has shape {mine} in the "
                              f"checkpoint and {theirs} in the network{more}. HINT: the network must be the "
                              "architecture that was trained, with the same layer sizes.", path=path, what=what)


def check_checkpoints(items: Any, network: nn.Module, *, name: str, caller: str) -> None:
    """Check, before any work, that every checkpoint of a list loads and fits ``network``.

    Each file is verified against the digest recorded for it by the
    ``train_metadata.json`` of its folder (SummaryCollector's checkpoints), otherwise by
    its structure (:func:`verify_checkpoint_file`: a torch archive's CRC-32s, a
    safetensors file's header); then its keys and shapes are compared with the
    network's from the file's structure (:class:`CheckpointReader`: a memory-mapped
    ``torch.load``, a safetensors header), so no checkpoint is held in memory.

    Parameters
    ----------
    items : sequence of mapping or path
        The checkpoints (``compute_landscape``'s ``checkpoints``).
    network : nn.Module
    name, caller : str
        Messages name an item as ``{name}[i] of {caller}``.

    Raises
    ------
    CheckpointError
    """
    for i, item in enumerate(items):
        what = f"{name}[{i}] of {caller}"
        if isinstance(item, (str, os.PathLike)):
            recorded = recorded_digest(item)
            verify_checkpoint_file(item, what=what, digest=recorded[0] if recorded else None,
                                   recorded_in=recorded[1] if recorded else None)
            CheckpointReader(item, what=what, network=network)
        else:
            load_checkpoint(item, what=what, network=network)


class CheckpointReader:
    """A checkpoint's tensors, a block of rows at a time: memory for the block, not the checkpoint.

    Only the rows asked for are read, into memory of their own, and nothing stays mapped,
    so neither the process's memory nor its mapped pages grow with the checkpoint: a
    checkpoint file by plain file reads at its tensors' offsets, found once: a safetensors
    file's from its header, a torch zip checkpoint's from a ``torch.load(mmap=True,
    weights_only=True)`` (``_checkpoints.tensor_offsets``; a tensor whose offset cannot be
    established is read through a new mapping for each :meth:`read`). A legacy (non-zip)
    torch file cannot be mapped: it is loaded once and kept. A state dict given in memory
    is sliced in place.

    Constructing one checks the checkpoint's keys and shapes against ``network`` (from the
    file's structure: no tensor data is read).

    Parameters
    ----------
    item : mapping or str or os.PathLike
    what : str
        Where the checkpoint came from, for messages.
    network : nn.Module
        The keys of :meth:`read` are the network's (see :func:`load_checkpoint`).
    """

    def __init__(self, item: Any, *, what: str, network: nn.Module) -> None:
        self.what = what
        self._path: str | None = None
        self._state: dict[str, Any] | None = None
        self._safetensors = False
        self._offsets: dict[str, tuple[int, torch.dtype, tuple[int, ...]]] = {}
        if isinstance(item, (str, os.PathLike)):
            path = os.fspath(item)
            existing_file(path, what)
            self._safetensors = _safetensors.is_safetensors(path)
            structure = _load_file(path, what, mapped=True)
            if not self._safetensors and not is_zip(path):
                self._state = structure  # a legacy file: loaded whole by torch.load, kept
            else:
                self._path = path
            if self._safetensors:
                self._offsets = _safetensors.tensor_offsets(path)
            elif self._state is None:
                self._offsets = {k: (off, structure[k].dtype, tuple(structure[k].shape))
                                 for k, off in tensor_offsets(path, structure).items()}
        else:
            structure = load_checkpoint(item, what=what)
            self._state = structure
        reference = network.state_dict()
        self._keys = _fit_keys(list(structure), reference)
        check_state_dict({k: structure[v] for k, v in self._keys.items()}, reference, what=what, path=self._path)

    def read(self, parts: Sequence[tuple[str, int, int]]) -> list[torch.Tensor]:
        """Rows ``[start, stop)`` along the first dimension of each named tensor (a 0-d tensor whole),
        in the checkpoint's dtype; copies when read from a file, views of a state dict's tensors."""
        keyed = [(self._keys[name], start, stop) for name, start, stop in parts]
        if self._state is not None:
            return [_rows(self._state[k], a, b) for k, a, b in keyed]
        assert self._path is not None
        try:
            out: list[torch.Tensor | None] = [None] * len(keyed)
            with open(self._path, "rb") as fh:
                for i, (k, a, b) in enumerate(keyed):
                    if k in self._offsets:
                        out[i] = _read_rows(fh, *self._offsets[k], a, b)
            rest = [i for i, t in enumerate(out) if t is None]
            if rest:
                mapped = torch_load(self._path, self.what, mapped=True)
                for i in rest:  # copies: the mapping ends with `mapped`
                    out[i] = _rows(mapped[keyed[i][0]], keyed[i][1], keyed[i][2]).clone()
            return [t for t in out if t is not None]
        except OSError as exc:
            raise unreadable(self._path, self.what, exc) from None


def _read_rows(fh: Any, offset: int, dtype: torch.dtype, shape: tuple[int, ...], start: int,
               stop: int) -> torch.Tensor:
    """Rows ``[start, stop)`` of a contiguous tensor stored at ``offset`` of an open file."""
    if not shape:
        start, stop = 0, 1
    row = math.prod(shape[1:]) if shape else 1
    itemsize = torch.empty((), dtype=dtype).element_size()
    buf = bytearray((stop - start) * row * itemsize)
    fh.seek(offset + start * row * itemsize)
    if fh.readinto(buf) != len(buf):
        raise OSError(f"the file ended within a tensor's bytes (offset {offset})")
    rows = (stop - start, *shape[1:]) if shape else ()
    return torch.frombuffer(buf, dtype=dtype).reshape(rows) if buf else torch.empty(rows, dtype=dtype)


def _rows(t: torch.Tensor, start: int, stop: int) -> torch.Tensor:
    return t.detach()[start:stop] if t.dim() else t.detach()

