"""The one background writer thread: jobs run in submission order, off the caller's thread.

Used by ``SummaryRecord`` (encoding and writing batches of events) and by the checkpoint
writers (``ModelCheckpoint``, SummaryCollector's interval checkpoints), so that a training
loop never waits for protobuf, serialization or the disk unless it gets far ahead --
in jobs, or in bytes: a job may say how many bytes it holds (a checkpoint's snapshot),
and :meth:`BackgroundWriter.make_room` lets the caller wait, before it makes the next
snapshot, until the jobs queued or running hold few enough.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

logger = logging.getLogger(__name__)

__all__ = ["BackgroundWriter"]

_STOP = object()


class BackgroundWriter:
    """Run jobs on one daemon thread; ``submit`` blocks only when the queue is full.

    An exception in a job does not stop later jobs. With ``on_error`` it is passed to
    that callable (on the thread); without, it is kept and raised by the next
    :meth:`wait`. With ``idle=(seconds, job)``, ``job`` also runs on the thread whenever
    nothing was submitted for that long (SummaryRecord writes its batched records then).
    The thread starts with the first job: a user whose jobs all run on their own thread
    (``flush``/``close`` of a short run) never pays for starting and stopping it.

    Parameters
    ----------
    name : str
        The thread's name.
    on_error : callable, optional
        Receives each job's exception; by default they are raised by :meth:`wait`.
    max_pending : int, default=32
        Jobs queued before ``submit`` blocks.
    idle : (float, callable), optional
        A job to run after that many idle seconds.
    max_pending_bytes : int, optional
        The bytes that jobs queued or running may hold (see :meth:`make_room`); None: no limit.
    """

    def __init__(self, name: str, *, on_error: Callable[[BaseException], None] | None = None,
                 max_pending: int = 32, idle: tuple[float, Callable[[], None]] | None = None,
                 max_pending_bytes: int | None = None) -> None:
        self._queue: queue.Queue = queue.Queue(maxsize=max_pending)
        self._max_bytes = max_pending_bytes
        self._bytes = 0  # held by the jobs queued or running
        self._bytes_freed = threading.Condition()
        self._on_error = on_error
        self._errors: list[BaseException] = []
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

    def _call(self, job: Callable[[], Any]) -> None:
        try:
            job()
        except BaseException as exc:
            if self._on_error is None:
                self._errors.append(exc)
                return
            try:
                self._on_error(exc)
            except BaseException:
                logger.exception("%s: error handler failed", self._name)

    def submit(self, job: Callable[..., Any], *args: Any, nbytes: int = 0) -> None:
        """Queue ``job(*args)`` to run on the thread after the jobs submitted before.

        ``nbytes``: the memory the job holds until it ends (its arguments), counted
        against ``max_pending_bytes`` by :meth:`make_room`.
        """
        if self._thread is None:
            with self._start_lock:
                if self._thread is None:
                    self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                    self._thread.start()
        if nbytes:
            with self._bytes_freed:
                self._bytes += nbytes
            run = (lambda: job(*args)) if args else job

            def counted() -> None:
                try:
                    run()
                finally:
                    with self._bytes_freed:
                        self._bytes -= nbytes
                        self._bytes_freed.notify_all()

            self._queue.put(counted)
        else:
            self._queue.put((lambda: job(*args)) if args else job)

    def make_room(self, nbytes: int) -> float:
        """Wait until jobs holding ``nbytes`` more would stay within ``max_pending_bytes``, or
        until no job holds any (a single job larger than the limit is never refused).

        Called before making what a job will hold (a snapshot of a network's state): with
        ``max_pending_bytes`` no larger than one snapshot, at most one exists at a time.
        Returns the seconds waited.
        """
        if self._max_bytes is None:
            return 0.0
        start = time.monotonic()
        with self._bytes_freed:
            while self._bytes and self._bytes + nbytes > self._max_bytes:
                self._bytes_freed.wait()
        return time.monotonic() - start

    def join(self) -> None:
        """Wait until every submitted job has run (and so any idle job that started before the last one)."""
        self._queue.join()

    def wait(self) -> None:
        """:meth:`join`, then raise the first error of a job since the last ``wait`` (without ``on_error``)."""
        self.join()
        errors, self._errors = self._errors, []
        if errors:
            raise errors[0]

    def stop(self) -> None:
        """Let the queued jobs finish and end the thread (a later ``submit`` starts a new one)."""
        with self._start_lock:
            thread, self._thread = self._thread, None
            if thread is not None and thread.is_alive():
                self._queue.put(_STOP)
                thread.join()

    def shutdown(self) -> None:
        """:meth:`wait`, then :meth:`stop` even if a job failed (its error is raised)."""
        try:
            self.wait()
        finally:
            self.stop()
