"""Record framing of summary files (identical to TFRecord) with masked CRC32C.

Each record is ``len:uint64 LE | masked_crc(len):uint32 LE | payload | masked_crc(payload):uint32 LE``.
This layer knows nothing about protobuf; ``_events.py`` builds on it.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass

import google_crc32c

__all__ = [
    "masked_crc32c",
    "encode_record",
    "iter_records",
    "RecordIssue",
    "SummaryReadError",
    "CorruptRecordError",
    "HEADER_SIZE",
    "FOOTER_SIZE",
]

HEADER_SIZE = 12
FOOTER_SIZE = 4
_MASK_DELTA = 0xA282EAD8
# A length above this is taken as corruption rather than read: no summary record is
# anywhere near 4 GiB, and trusting a flipped high bit would try to allocate it.
_MAX_RECORD = 1 << 32


class SummaryReadError(OSError):
    """Base class of the errors the summary reader raises: a file it cannot read, or damage in strict mode."""


class CorruptRecordError(SummaryReadError):
    """A record's length or payload CRC does not match, the file ends inside a record, or (strict mode
    of the reader) a record's payload or one of its values is damaged."""


@dataclass(frozen=True)
class RecordIssue:
    """What the reader skipped: the file, the byte offset of the bad record, and why.

    For a damaged value inside an intact record (a PNG that does not decode, tensor bytes
    that do not fit their dims, ...) also its ``tag`` and ``step``; None otherwise.
    """

    path: str
    offset: int
    reason: str
    tag: str | None = None
    step: int | None = None

    def __str__(self) -> str:
        value = f"tag {self.tag!r} at step {self.step}: " if self.tag is not None else ""
        return f"{self.path}: at byte {self.offset}: {value}{self.reason}"


def masked_crc32c(data: bytes) -> int:
    """CRC32C (Castagnoli) of ``data``, masked as TFRecord does."""
    crc = google_crc32c.value(data)
    return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF


def encode_record(payload: bytes) -> bytes:
    """Frame one payload as a record."""
    header = struct.pack("<Q", len(payload))
    return b"".join(
        (header, struct.pack("<I", masked_crc32c(header)), payload, struct.pack("<I", masked_crc32c(payload)))
    )


def iter_records(path: str | os.PathLike, issues: list[RecordIssue] | None = None) -> Iterator[tuple[int, bytes]]:
    """Yield ``(offset, payload)`` for every intact record of a file, in order.

    Reading stops at the first record whose header or payload CRC fails, or that the
    file ends inside (a torn tail): after a bad length there is no reliable way to find
    the next record boundary. What was skipped is appended to ``issues`` as a
    :class:`RecordIssue`; nothing is raised for damaged content.

    Parameters
    ----------
    path : str or os.PathLike
        The file to read.
    issues : list, optional
        Receives one :class:`RecordIssue` if the file has damage.
    """
    path = os.fspath(path)
    with open(path, "rb") as f:
        data = f.read()
    pos, end = 0, len(data)
    while pos < end:
        if end - pos < HEADER_SIZE:
            _note(issues, path, pos, f"file ends inside a record header ({end - pos} trailing bytes)")
            return
        header = data[pos : pos + 8]
        (length,) = struct.unpack("<Q", header)
        (hcrc,) = struct.unpack("<I", data[pos + 8 : pos + 12])
        if hcrc != masked_crc32c(header) or length > _MAX_RECORD:
            _note(issues, path, pos, f"record header CRC mismatch; {end - pos} bytes skipped")
            return
        stop = pos + HEADER_SIZE + length + FOOTER_SIZE
        if stop > end:
            _note(issues, path, pos, f"file ends inside a record of {length} bytes (torn tail)")
            return
        payload = data[pos + HEADER_SIZE : pos + HEADER_SIZE + length]
        (pcrc,) = struct.unpack("<I", data[stop - FOOTER_SIZE : stop])
        if pcrc != masked_crc32c(payload):
            _note(issues, path, pos, f"payload CRC mismatch; {end - pos} bytes skipped")
            return
        yield pos, payload
        pos = stop


def _note(issues: list[RecordIssue] | None, path: str, offset: int, reason: str) -> None:
    if issues is not None:
        issues.append(RecordIssue(path, offset, reason))
