"""Checkpoint integrity: the one error type, a file's digest, and checking a file before use.

Shared by :mod:`collector.trajectory._checkpoints` (which hashes what it writes and
loads checkpoints) and :mod:`collector.trajectory._metadata` (which records the digests
in ``train_metadata.json``); kept apart, and free of torch, so that reading the metadata
and verifying files do not import torch. Verification reads a checkpoint's bytes only
(its digest; or the CRC-32s of a torch zip archive; or the structure of a safetensors
file, :func:`collector.trajectory._safetensors.read_header`): loading it is ``_loading``'s job.
"""

from __future__ import annotations

import hashlib
import os
import re
import zipfile
import zlib
from dataclasses import dataclass

from collector.trajectory import _safetensors

__all__ = ["CheckpointError", "CheckpointNotFoundError", "FileDigest", "file_digest", "verify_checkpoint_file",
           "existing_file", "unreadable", "check_archive", "check_structure", "HINT_RESTORE"]

HINT_RESTORE = ("HINT: restore the file from a backup, or train again to collect it; a landscape is never "
                "computed from a checkpoint that differs from the one training wrote.")


class CheckpointError(ValueError, OSError):
    """A checkpoint cannot be used: missing, unreadable, damaged, changed since training, or another network's.

    The one error raised for a checkpoint by ``collector.trajectory`` (a subclass of both
    ``ValueError`` and ``OSError``). Its message names the file (or the state dict), the
    parameter it came from, what is wrong and what to do.

    Attributes
    ----------
    path : str or None
        The checkpoint file (None for a state dict given in memory).
    what : str or None
        Where the checkpoint came from (``"checkpoints[2] of compute_landscape"``).
    """

    def __init__(self, message: str, *, path: str | None = None, what: str | None = None) -> None:
        super().__init__(message)
        self.path = path
        self.what = what


class CheckpointNotFoundError(CheckpointError, FileNotFoundError):
    """A checkpoint file that does not exist (also a ``FileNotFoundError``)."""


@dataclass(frozen=True)
class FileDigest:
    """A file's SHA-256 (64 lowercase hex digits) and its size in bytes."""

    sha256: str
    size: int


def file_digest(path: str | os.PathLike) -> FileDigest:
    """SHA-256 and size of a file, read in 1 MiB blocks.

    Examples
    --------
    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "f.bin")
    >>> with open(path, "wb") as fh:
    ...     _ = fh.write(b"abc")
    >>> file_digest(path)
    FileDigest(sha256='ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad', size=3)
    """
    h = hashlib.sha256()
    size = 0
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
            size += len(block)
    return FileDigest(h.hexdigest(), size)


def existing_file(path: str, what: str) -> None:
    if not os.path.lexists(path):
        raise CheckpointNotFoundError(f"{what}: checkpoint file {path!r} does not exist.", path=path, what=what)
    if os.path.isdir(path):
        raise CheckpointError(f"{what}: {path!r} is a folder, not a checkpoint file.", path=path, what=what)
    if not os.path.isfile(path):
        raise CheckpointError(f"{what}: {path!r} is not a regular file (a broken link, a pipe or a device).",
                              path=path, what=what)


def unreadable(path: str, what: str, exc: OSError) -> CheckpointError:
    return CheckpointError(f"{what}: checkpoint file {path!r} cannot be read: {exc.strerror or exc}.",
                           path=path, what=what)


def verify_checkpoint_file(path: str | os.PathLike, *, what: str, digest: FileDigest | None = None,
                           recorded_in: str | None = None) -> FileDigest | None:
    """Check that a checkpoint file is intact, before anything is computed from it.

    With ``digest`` (recorded when the file was written) the file's SHA-256 and size must
    equal it. Without one, every record of the zip archive ``torch.save`` writes must match
    the CRC-32 stored for it, which finds a flipped bit in any tensor and a truncated
    file (``torch.load`` checks neither); a file that is not a zip archive (the legacy
    ``torch.save`` format, or not a checkpoint) is left to :func:`load_checkpoint`. A
    safetensors file (by its ``.safetensors`` name or its content) must be whole: a JSON
    header whose tensors' dtypes, shapes and byte ranges cover the rest of the file
    exactly. The format stores no checksum of the tensors' bytes, so a flipped bit in
    them is found only against a recorded digest (SummaryCollector records one for each
    checkpoint it writes).

    Parameters
    ----------
    path : str or os.PathLike
        The checkpoint file.
    what : str
        Where it came from, for messages (``"the checkpoint of epoch 3 (...)"``).
    digest : FileDigest, optional
        What the file must hash to.
    recorded_in : str, optional
        Where ``digest`` was recorded (named in the message of a mismatch).

    Returns
    -------
    FileDigest or None
        The digest found (with ``digest``), else None.

    Raises
    ------
    CheckpointError
        The file is missing, unreadable, or differs from what was recorded or written.
    """
    path = os.fspath(path)
    existing_file(path, what)
    if digest is None:
        check_structure(path, what)
        return None
    try:
        found = file_digest(path)
    except OSError as exc:
        raise unreadable(path, what, exc) from None
    if found != digest:
        where = f", recorded in {recorded_in!r}" if recorded_in else ""
        raise CheckpointError(
            f"{what}: checkpoint file {path!r} is not the file training wrote: expected SHA-256 {digest.sha256} "
            f"({digest.size} bytes{where}), found SHA-256 {found.sha256} ({found.size} bytes). It was changed, "
            "truncated or damaged after it was written. " + HINT_RESTORE, path=path, what=what)
    return found


def check_structure(path: str, what: str) -> None:
    """Check a checkpoint without a recorded digest: a safetensors file's header against its
    length (:func:`check_safetensors`), else a zip archive's CRC-32s (:func:`check_archive`)."""
    if _safetensors.is_safetensors(path):
        check_safetensors(path, what)
    else:
        check_archive(path, what)


def check_safetensors(path: str, what: str) -> None:
    """A safetensors file's header, dtypes, shapes and byte ranges against the file's length."""
    try:
        _safetensors.read_header(path)
    except OSError as exc:
        raise unreadable(path, what, exc) from None
    except ValueError as exc:
        raise CheckpointError(f"{what}: checkpoint file {path!r} is not a whole safetensors file: {exc}. "
                              + HINT_RESTORE, path=path, what=what) from None


def check_archive(path: str, what: str) -> None:
    """Read every record of a zip checkpoint, checking the CRC-32 stored for it."""
    try:
        with open(path, "rb") as fh:
            if fh.read(4) != b"PK\x03\x04":
                return  # not torch.save's zip format: torch.load decides (and load_checkpoint words its failure)
        size = os.path.getsize(path)
        with zipfile.ZipFile(path) as archive:
            for info in archive.infolist():
                # torch.save with compute_crc32=False stores 0: nothing to compare with.
                if info.CRC == 0 or info.is_dir():
                    continue
                with archive.open(info) as member:
                    while member.read(1 << 20):
                        pass
    except OSError as exc:
        raise unreadable(path, what, exc) from None
    except zipfile.BadZipFile as exc:
        crc = re.match(r"Bad CRC-32 for file '([^']*)'", str(exc))
        if crc:
            reason = (f"is damaged: the bytes of its record {crc.group(1)!r} do not match the CRC-32 stored for "
                      "them, so it was changed after it was written")
        else:
            reason = f"is truncated or damaged: its zip archive cannot be read ({size} bytes; {exc})"
        raise CheckpointError(f"{what}: checkpoint file {path!r} {reason}. " + HINT_RESTORE,
                              path=path, what=what) from None
    except (EOFError, ValueError, NotImplementedError, zlib.error) as exc:
        raise CheckpointError(f"{what}: checkpoint file {path!r} is damaged: its zip archive cannot be read "
                              f"({type(exc).__name__}: {exc}). " + HINT_RESTORE, path=path, what=what) from None
