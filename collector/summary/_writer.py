"""``EventWriter``: batch recorded events and write them to the summary and lineage files.

The file-writing half of ``SummaryRecord`` (as ``torch.utils.tensorboard``'s
``FileWriter`` is of its ``SummaryWriter``): it owns the files
(:class:`collector.summary._files.EventFileSet`), the writer thread
(:class:`collector.common.BackgroundWriter`), the batching policy and the errors of
writing. What it writes is built by :mod:`collector.summary._events`.
"""

from __future__ import annotations

import functools
import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from collector.common import BackgroundWriter
from collector.summary._events import (
    Record,
    batch_histograms,
    export_npy,
    record_events,
    values_nbytes,
)
from collector.summary._files import EventFileSet

logger = logging.getLogger(__name__)

__all__ = ["EventWriter", "EventMirror", "BATCH_RECORDS", "BATCH_BYTES", "BATCH_SECONDS"]

# Recorded events wait in a batch until one of these is reached (or flush/close), then
# the writer thread encodes and writes the whole batch. Encoding each record as it came
# cost two to three times more: every one ran with cold caches between training steps
# and woke the writer thread to compete with the training loop for the GIL. The limits
# keep memory bounded (values are private copies) and the files at most a few seconds
# behind the training, as a viewer of a running job expects. Read when used, so a test
# may change them.
BATCH_RECORDS = 512
BATCH_BYTES = 32 << 20
BATCH_SECONDS = 2.0


class EventMirror(Protocol):
    """What receives a copy of every event an :class:`EventWriter` writes (a TensorBoard writer)."""

    def add_payload(self, kind: str, payload: bytes) -> None: ...
    def flush(self) -> None: ...
    def close(self) -> None: ...


class EventWriter:
    """Write recorded events in batches, on a background thread or in :meth:`flush`/:meth:`close`.

    A batch is handed to the thread when it holds ``BATCH_RECORDS`` records or
    ``BATCH_BYTES`` bytes of values, or when its oldest record is ``BATCH_SECONDS`` old
    (checked at each :meth:`add`; the running thread also looks that often).
    :meth:`flush` and :meth:`close` write the rest themselves, since their caller waits
    for it anyway (handing it to the thread would only add two thread wake-ups). The
    thread starts with the first batch handed to it; until then a batch that grew old is
    handed over by the next :meth:`add`.

    An error while writing (a full file, a failed npy export) loses only the record it
    concerns. With ``raise_exception`` it is kept and raised by :meth:`raise_pending`
    (and so by :meth:`flush` and :meth:`close`); without, it is logged.

    Parameters
    ----------
    log_dir : str
        An existing directory, for the files and the npy export.
    file_prefix, file_suffix : str
        Of the file names (see :class:`collector.summary._files.EventFileSet`).
    max_file_size : int or None
        Largest size of each file in bytes; a record that would pass it is not written.
    raise_exception : bool, default=False
        Keep errors for :meth:`raise_pending` instead of logging them.
    export_format : {"npy", None}, default=None
        "npy": also save every tensor value as
        ``{log_dir}/export_{seconds}/tensor/{url-quoted tag}_{step}.npy``.
    on_batch_taken : callable, optional
        Called when a non-empty batch is taken to be written, before it is written
        (SummaryRecord starts new snapshot slabs then: the batch's are sorted in place).
    mirror : EventMirror, optional
        Also receives every event written, as ``mirror.add_payload(file, event bytes)``
        (``file`` "summary" or "lineage"), on the thread that writes it; flushed and
        closed with the files. An error of the mirror is handled like a write error.
    """

    def __init__(self, log_dir: str, file_prefix: str, file_suffix: str, max_file_size: int | None, *,
                 raise_exception: bool = False, export_format: str | None = None,
                 on_batch_taken: Callable[[], None] | None = None, mirror: EventMirror | None = None) -> None:
        if export_format not in ("npy", None):
            raise ValueError(f"EventWriter: export_format must be 'npy' or None. Got {export_format!r} instead.")
        self.log_dir = log_dir
        self.files = EventFileSet(log_dir, file_prefix, file_suffix, max_file_size)
        #: Keep errors for :meth:`raise_pending` (True) or log them (False).
        self.raise_exception = raise_exception
        self._export = (functools.partial(export_npy, os.path.join(log_dir, f"export_{self.files.seconds}", "tensor"))
                        if export_format == "npy" else None)
        self._on_batch_taken = on_batch_taken
        self._mirror = mirror
        self._errors: list[BaseException] = []
        # Guards the batch: records not yet handed to the thread.
        self._lock = threading.Lock()
        self._batch: list[Record] = []
        self._batch_bytes = 0
        self._batch_since = 0.0
        # Held while a batch is taken and written: batches reach the files whole and in order,
        # whichever thread writes them.
        self._write_lock = threading.Lock()
        self._thread = BackgroundWriter("summary-writer", on_error=self._on_error,
                                        idle=(BATCH_SECONDS, self._write_stale_batch))

    # ------------------------------------------------------------------ state
    @property
    def summary_path(self) -> str:
        """Path of the summary file (it exists once something was written)."""
        return self.files.summary.path

    @property
    def lineage_path(self) -> str:
        """Path of the lineage file (it exists once lineage was written)."""
        return self.files.lineage.path

    @property
    def has_errors(self) -> bool:
        """Whether errors are kept for :meth:`raise_pending` (only with ``raise_exception``)."""
        return bool(self._errors)

    @property
    def pending_records(self) -> int:
        """Records added and not yet handed to the thread or written."""
        return len(self._batch)

    # ------------------------------------------------------------------ API
    def add(self, step: int, wall_time: float, values: list[tuple[str, str, Any]]) -> bool:
        """Add one record to the batch; hand the batch to the thread when it is full or old.

        Parameters
        ----------
        step : int
        wall_time : float
            Written as the events' wall time (the time of the ``record`` call, not of the write).
        values : list of (plugin, tag, prepared value)
            The record's values (:mod:`collector.summary._values`), the writer's from now on.

        Returns
        -------
        bool
            ``not has_errors``: whether no error waits for :meth:`raise_pending` (what
            ``SummaryRecord.record`` returns; answered here to save it a call per record).
        """
        nbytes = values_nbytes(values)
        now = time.monotonic()
        with self._lock:
            if not self._batch:
                self._batch_since = now
            self._batch.append((step, wall_time, values))
            self._batch_bytes += nbytes
            full = (len(self._batch) >= BATCH_RECORDS or self._batch_bytes >= BATCH_BYTES
                    or now - self._batch_since >= BATCH_SECONDS)
        if full:
            batch = self._take_batch()
            if batch:
                self._thread.submit(lambda: self._write_batch(batch))
        return not self._errors

    def join(self) -> None:
        """Wait until the batches handed to the thread are written (the current batch is not)."""
        self._thread.join()

    def flush(self) -> None:
        """Write everything added so far, flush the files to the OS, then :meth:`raise_pending`."""
        # The batches handed to the thread before (add() hands them over from the recording
        # thread, the one that flushes), then one it may write while idle.
        self._thread.join()
        with self._write_lock:
            self._write_batch_locked(self._take_batch())
            for f in self.files.files():
                f.flush()
            if self._mirror is not None:
                self._mirror_call(self._mirror.flush)
        self.raise_pending()

    def close(self) -> None:
        """Write everything added, stop the thread, close the files (read-only), then :meth:`raise_pending`.

        The files are closed and the thread stopped even when writing fails.
        """
        try:
            self._thread.join()
            with self._write_lock:
                self._write_batch_locked(self._take_batch())
        finally:
            self._thread.stop()  # the thread ends after the jobs queued before (an idle batch included)
            for f in self.files.files():
                try:
                    f.close()
                except OSError as exc:
                    self._on_error(exc)
            if self._mirror is not None:
                self._mirror_call(self._mirror.close)
        self.raise_pending()

    def raise_pending(self) -> None:
        """Raise the first error kept since the last call, and forget the others.

        Raises
        ------
        OSError, RuntimeError
            The error itself when it is one of these; any other is wrapped in a RuntimeError.
        """
        if self._errors:
            exc = self._errors.pop(0)
            self._errors.clear()
            if isinstance(exc, (OSError, RuntimeError)):
                raise exc
            raise RuntimeError(f"SummaryRecord failed while writing: {exc!r}") from exc

    # ------------------------------------------------------------------ internals
    def _take_batch(self) -> list[Record]:
        with self._lock:
            batch, self._batch, self._batch_bytes = self._batch, [], 0
        if batch and self._on_batch_taken is not None:
            self._on_batch_taken()
        return batch

    def _write_stale_batch(self) -> None:
        """Runs on the thread when it was idle for ``BATCH_SECONDS``: write what waits."""
        with self._write_lock:
            with self._lock:
                stale = bool(self._batch) and time.monotonic() - self._batch_since >= BATCH_SECONDS
            if stale:
                self._write_batch_locked(self._take_batch())

    def _write_batch(self, batch: list[Record]) -> None:
        with self._write_lock:
            self._write_batch_locked(batch)

    def _write_batch_locked(self, batch: Sequence[Record]) -> None:
        """Write the records of a batch, in order (``_write_lock`` held).

        The histograms of every record are encoded together; each record is then
        framed and written on its own, so an error (a full file, say) loses only the
        records it concerns, as when they were written one by one.
        """
        if not batch:
            return
        mirror = self._mirror
        for (step, wall_time, values), histograms in zip(batch, batch_histograms(batch)):
            try:
                for kind, payload in record_events(step, wall_time, values, histograms, self._export):
                    (self.files.summary if kind == "summary" else self.files.lineage).write(payload)
                    if mirror is not None:
                        self._mirror_call(mirror.add_payload, kind, payload)
            except Exception as exc:
                self._on_error(exc)

    def _mirror_call(self, fn: Callable[..., Any], *args: Any) -> None:
        """Call the mirror; its failure is reported like a write error and never stops our own files."""
        try:
            fn(*args)
        except Exception as exc:
            self._on_error(RuntimeError(f"the event mirror ({type(self._mirror).__name__}) failed: {exc!r}"))

    def _on_error(self, exc: BaseException) -> None:
        if self.raise_exception:
            self._errors.append(exc)
        else:
            logger.error("SummaryRecord (%s): %s", self.log_dir, exc)
