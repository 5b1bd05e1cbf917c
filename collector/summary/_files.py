"""Summary files on disk: names, lazy creation, the version record, size limit.

``EventFileSet`` owns the summary file and the lineage file of one SummaryRecord; the
records themselves are framed by :mod:`collector.summary._framing`.
"""

from __future__ import annotations

import logging
import os
import socket
import stat
import time
from collections.abc import Callable
from typing import BinaryIO

from collector.summary import _proto as proto
from collector.summary._framing import encode_record

logger = logging.getLogger(__name__)

__all__ = ["VERSION", "summary_filename", "lineage_filename", "EventFile", "EventFileSet", "FileSizeExceededError"]

VERSION = "MindSpore.Event:1"


def summary_filename(prefix: str, suffix: str, seconds: int, host: str) -> str:
    """``{prefix}.out.events.summary.{seconds}.{host}{suffix}`` (the spec's name)."""
    return f"{prefix}.out.events.summary.{seconds}.{host}{suffix}"


def lineage_filename(prefix: str, seconds: int, host: str) -> str:
    """``{prefix}.out.events.summary.{seconds}.{host}_lineage``."""
    return f"{prefix}.out.events.summary.{seconds}.{host}_lineage"


class FileSizeExceededError(OSError):
    """A record was not written because the file would pass ``max_file_size``."""


class EventFile:
    """One summary or lineage file, created on first write, read-only once closed."""

    def __init__(self, path: str, max_size: int | None, version_payload: Callable[[], bytes]) -> None:
        self.path = path
        self.max_size = max_size
        self._version_payload = version_payload
        self._fh: BinaryIO | None = None
        self.size = 0
        self.full = False

    def _open(self) -> BinaryIO:
        # "x": never append to or clobber someone else's file; closed by close()
        fh = self._fh = open(self.path, "xb")  # noqa: SIM115
        first = encode_record(self._version_payload())
        if self.max_size is not None and len(first) > self.max_size:
            self.full = True
            raise FileSizeExceededError(
                f"{self.path}: max_file_size={self.max_size} bytes is too small even for the version record"
            )
        fh.write(first)
        self.size = len(first)
        return fh

    def write(self, payload: bytes) -> None:
        fh = self._fh if self._fh is not None else self._open()
        rec = encode_record(payload)
        if self.max_size is not None and self.size + len(rec) > self.max_size:
            # Whole records only: the file stays readable to its last byte.
            self.full = True
            raise FileSizeExceededError(
                f"{self.path}: a record of {len(rec)} bytes would pass max_file_size={self.max_size} "
                f"(file has {self.size} bytes); the record was not written"
            )
        fh.write(rec)
        self.size += len(rec)

    def flush(self) -> None:
        if self._fh is not None:
            self._fh.flush()

    def close(self) -> None:
        if self._fh is not None:
            # Flushed to the OS, not fsync'ed: the file is complete for every reader once
            # this returns; fsync would only guard against a machine crash, at ~0.5 ms per
            # file (tensorboardX and torch.utils.tensorboard do not sync either).
            self._fh.close()
            self._fh = None
            os.chmod(self.path, stat.S_IRUSR)  # 0400, as MindSpore leaves its files


class EventFileSet:
    """The summary and lineage files of one SummaryRecord, named once at creation."""

    def __init__(self, log_dir: str, prefix: str, suffix: str, max_size: int | None) -> None:
        host = socket.gethostname() or "localhost"
        seconds = int(time.time())
        # Two records opened in one second would get the same names: take the next
        # free second, which keeps MindInsight's name-based ordering right.
        while any(
            os.path.exists(os.path.join(log_dir, n))
            for n in (summary_filename(prefix, suffix, seconds, host), lineage_filename(prefix, seconds, host))
        ):
            seconds += 1
        self.seconds = seconds
        self.summary = EventFile(
            os.path.join(log_dir, summary_filename(prefix, suffix, seconds, host)), max_size, _version_event
        )
        self.lineage = EventFile(os.path.join(log_dir, lineage_filename(prefix, seconds, host)), max_size,
                                 _version_lineage)

    def files(self) -> tuple[EventFile, EventFile]:
        return self.summary, self.lineage


def _version_event() -> bytes:
    return proto.Event(wall_time=time.time(), step=0, version=VERSION).SerializeToString()


def _version_lineage() -> bytes:
    return proto.LineageEvent(wall_time=time.time(), step=0, version=VERSION).SerializeToString()
