"""Summary files on disk: names, lazy creation, size limit, and the writer thread.

``EventFileSet`` owns the summary file and the lineage file of one SummaryRecord.
``BackgroundWriter`` runs encoding jobs on one daemon thread fed by a bounded queue,
so a training loop never waits for protobuf or the disk unless it gets far ahead.
"""

from __future__ import annotations

import logging
import os
import queue
import socket
import stat
import threading
import time
from collections.abc import Callable

from collector.summary import _proto as proto
from collector.summary._framing import encode_record

logger = logging.getLogger(__name__)

__all__ = ["VERSION", "summary_filename", "lineage_filename", "EventFile", "EventFileSet", "BackgroundWriter"]

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
        self._fh = None
        self.size = 0
        self.full = False

    def _open(self) -> None:
        self._fh = open(self.path, "xb")  # never append to or clobber someone else's file
        first = encode_record(self._version_payload())
        if self.max_size is not None and len(first) > self.max_size:
            self.full = True
            raise FileSizeExceededError(
                f"{self.path}: max_file_size={self.max_size} bytes is too small even for the version record"
            )
        self._fh.write(first)
        self.size = len(first)

    def write(self, payload: bytes) -> None:
        if self._fh is None:
            self._open()
        rec = encode_record(payload)
        if self.max_size is not None and self.size + len(rec) > self.max_size:
            # Whole records only: the file stays readable to its last byte.
            self.full = True
            raise FileSizeExceededError(
                f"{self.path}: a record of {len(rec)} bytes would pass max_file_size={self.max_size} "
                f"(file has {self.size} bytes); the record was not written"
            )
        self._fh.write(rec)
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
        self.lineage = EventFile(os.path.join(log_dir, lineage_filename(prefix, seconds, host)), max_size, _version_lineage)

    def files(self) -> tuple[EventFile, EventFile]:
        return self.summary, self.lineage


def _version_event() -> bytes:
    return proto.Event(wall_time=time.time(), step=0, version=VERSION).SerializeToString()


def _version_lineage() -> bytes:
    return proto.LineageEvent(wall_time=time.time(), step=0, version=VERSION).SerializeToString()


_STOP = object()


class BackgroundWriter:
    """Run jobs on one daemon thread; ``submit`` blocks only when the queue is full.

    A job is a callable run on the thread. An exception in a job is passed to
    ``on_error`` (on the thread) and does not stop later jobs. With ``idle=(seconds,
    job)``, ``job`` also runs on the thread whenever no job was submitted for that
    long (SummaryRecord writes its batched records then). The thread starts with the
    first job: a record whose batches are all written by ``flush``/``close`` (a short
    run) never pays for starting and stopping it.
    """

    def __init__(self, on_error: Callable[[BaseException], None], max_pending: int = 32, name: str = "summary-writer",
                 idle: tuple[float, Callable[[], None]] | None = None):
        self._queue: queue.Queue = queue.Queue(maxsize=max_pending)
        self._on_error = on_error
        self._idle = idle
        self._name = name
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()

    def _run(self) -> None:
        while True:
            if self._idle is None:
                job = self._queue.get()
            else:
                try:
                    job = self._queue.get(timeout=self._idle[0])
                except queue.Empty:
                    self._call(self._idle[1])
                    continue
            try:
                if job is _STOP:
                    return
                self._call(job)
            finally:
                self._queue.task_done()

    def _call(self, job: Callable[[], None]) -> None:
        try:
            job()
        except BaseException as exc:  # noqa: BLE001 - reported through on_error
            try:
                self._on_error(exc)
            except BaseException:  # noqa: BLE001
                logger.exception("summary writer: error handler failed")

    def submit(self, job: Callable[[], None]) -> None:
        if self._thread is None:
            with self._start_lock:
                if self._thread is None:
                    self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                    self._thread.start()
        self._queue.put(job)

    def join(self) -> None:
        """Wait until every submitted job has run (and so any idle job that started before the last one)."""
        self._queue.join()

    def stop(self) -> None:
        with self._start_lock:
            thread, self._thread = self._thread, None
            if thread is not None and thread.is_alive():
                self._queue.put(_STOP)
                thread.join()
