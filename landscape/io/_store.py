"""Resumable generation in ``landscapes.h5`` (private).

While a landscape is computed, ``/_in_progress/{tag}`` holds everything that defines it:
its inputs' fingerprint, its metadata, the grid axes, every point, the two directions
(flat float32, the moved parameters in order), and per point its values and a ``done``
flag. Chunks are flushed as they finish. A finished landscape replaces its progress group
by the final group ``/{tag}`` (Li et al.'s dataset names), which keeps the fingerprint.

Crash safety (SIGKILL, Ctrl-C or a dying worker at any moment):

* Groups are only ever created or removed in a copy of the file that replaces the
  original with ``os.replace`` (atomic on POSIX): a crash leaves the old or the new file.
* Per chunk, only raw values of datasets created (storage allocated, contiguous) with the
  group are overwritten in place. No HDF5 metadata changes, so the file stays readable;
  the values are flushed before their ``done`` flags, so a ``done`` point always has its
  values. A crash between the two costs at most that chunk.

The file records the run its landscapes belong to (:mod:`landscape.io._run`); a store made
for a run (``run=``) refuses a file of another run's landscapes when it takes it
(:meth:`Store.claim`), replaces it on ``restart``, and writes its record with every change.
Each finished landscape is written with its directions (:mod:`landscape.io._directions`).

Writes are batched in time (:data:`FLUSH_SECONDS`, or the environment variable
``LANDSCAPE_FLUSH_SECONDS``): each atomic rewrite costs two ``fsync`` calls, about 12 ms
on a cloud disk, so a landscape gets its progress group only once it has been evaluated
for that long (a short one never needs one), and finished landscapes are written
together, at most that often and when the generation ends (also after an error). At
most that much evaluation is lost to a kill; 0 writes every step at once.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from landscape.io._h5 import (
    DirectionsInFile,
    Partial,
    drop_stale_copies,
    landscape_status,
    progress_writer,
    read_h5,
    read_progress,
    recorded_plans,
    refuse_open_read_only,
    rewrite,
    write_group,
    write_progress,
    write_run,
)
from landscape.io._run import check_run
from landscape.result import Landscape

__all__ = ["Store", "Partial", "jsonable", "differences", "FLUSH_SECONDS", "env_number"]
_log = logging.getLogger("landscape")

#: Seconds of evaluation that may pass before what is done is written (see the module docstring).
FLUSH_SECONDS = 2.0


def env_number(name: str, default: float, kind: Callable[[str], float], unit: str) -> float:
    """The environment variable ``name`` read by ``kind`` (``float``, ``int``), or ``default`` when unset;
    anything but a number >= 0 is refused, naming the variable and the ``unit``."""
    text = os.environ.get(name)
    if text is None:
        return default
    try:
        value = kind(text)
    except ValueError:
        raise ValueError(f"{name} must be a number of {unit} >= 0; got {text!r}.") from None
    if not value >= 0:
        raise ValueError(f"{name} must be a number of {unit} >= 0; got {text!r}.")
    return value


def _flush_seconds() -> float:
    return env_number("LANDSCAPE_FLUSH_SECONDS", FLUSH_SECONDS, float, "seconds")


def differences(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """Human-readable differences between two fingerprints (digests shortened)."""

    def show(v: Any) -> str:
        if isinstance(v, str) and len(v) == 64:
            return v[:12]
        return json.dumps(v)

    out = []
    for key in sorted(set(old) | set(new)):
        if old.get(key) != new.get(key):
            out.append(f"{key}: {show(old.get(key, '(absent)'))} then, {show(new.get(key, '(absent)'))} now")
    return out



# -- the file -------------------------------------------------------------------------
def jsonable(value: Any) -> Any:
    """``value`` with numpy arrays and scalars turned into lists and Python numbers."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, (np.generic,)):
        return value.item()
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    return value


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


class Store:
    """``landscapes.h5`` of one output folder, written only by one process (rank 0).

    Parameters
    ----------
    path : str or os.PathLike
    run : dict, optional
        The record of the run whose landscapes this store writes (``landscape/io/_run.py``):
        checked by :meth:`claim`, written with every change of the file.
    """

    def __init__(self, path: str | os.PathLike, run: Mapping[str, Any] | None = None) -> None:
        self.path = os.fspath(path)
        self.run = None if run is None else dict(run)
        drop_stale_copies(self.path, _alive)
        self.flush_seconds = _flush_seconds()
        self._last_write = time.monotonic()
        # landscapes begun but without a progress group on disk: tag -> (fingerprint, part, started)
        self._unwritten: dict[str, tuple[str, Partial, float]] = {}
        # finished landscapes not written yet: tag -> (landscape, fingerprint JSON)
        self._finished: dict[str, tuple[Landscape, str]] = {}
        # tuned plans the file recorded when opened (kept through forget(): a restart reuses them)
        self._plans: dict[str, dict[str, Any]] = {}
        if os.path.exists(self.path):
            with contextlib.suppress(OSError):  # an unreadable file is refused by check(), naming it
                self._plans = recorded_plans(self.path)

    @contextlib.contextmanager
    def lock(self) -> Iterator[None]:
        """Hold ``{path}.lock`` (an advisory ``flock``) while generating, so that a second
        generation into the same folder is refused instead of mixing its writes in. The
        kernel drops the lock when the process ends, however it ends; the file is removed
        on release."""
        # a read-only handle of this process (a notebook's h5py.File left open) would refuse the chunks'
        # writes later, after work: refused now, before the lock file is made
        refuse_open_read_only(self.path)
        lock_path = self.path + ".lock"
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                other = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
                raise RuntimeError(f"Another generation (pid {other}) is writing to {self.path}; wait for it "
                                   "to finish or choose another output folder.") from None
            os.ftruncate(fd, 0)
            os.pwrite(fd, str(os.getpid()).encode(), 0)
            try:
                yield
            finally:
                with contextlib.suppress(OSError):
                    os.remove(lock_path)
        finally:
            os.close(fd)

    def claim(self, tags: Sequence[str], *, restart: bool = False, caller: str = "Store",
              parameter: str = "output") -> None:
        """Take the file for :attr:`run` (under :meth:`lock`): one of another run's landscapes is refused
        (``InvalidParameterError`` naming ``parameter`` of ``caller``, nothing written), or with ``restart``
        removed, to start afresh; with ``restart`` the landscapes ``tags`` are started over."""
        diff = [] if self.run is None else check_run(self.path, self.run, caller=caller, parameter=parameter,
                                                     restart=restart)
        if diff:
            _log.warning("%s holds another run's landscapes (%s): removed, as restart asks, to start afresh",
                         self.path, "; ".join(diff))
            os.remove(self.path)
            self._plans = {}  # that run's tuned plans go with its file
            return
        if restart:
            self.forget(tags)

    def _rewrite(self, *, drop: Sequence[str] = (), add: Callable[[Any], None] | None = None) -> None:
        """:func:`rewrite` of the groups ``drop`` (finished or not), with this store's run record."""

        def add_all(fh: Any) -> None:
            if self.run is not None:
                write_run(fh, self.run)
            if add is not None:
                add(fh)

        rewrite(self.path, drop=drop, drop_progress=drop, add=add_all)

    # -- reading ------------------------------------------------------------------
    def status(self, tag: str) -> tuple[str, dict[str, Any] | None]:
        """("absent" | "partial" | "complete", stored fingerprint or None)."""
        if not os.path.exists(self.path):
            return "absent", None
        state, stored = landscape_status(self.path, tag)
        return state, (json.loads(stored) if stored is not None else ({} if state == "complete" else None))

    def check(self, tag: str, fingerprint: Mapping[str, Any]) -> str:
        """What the file holds for ``tag`` ("absent", "partial", "complete"); a landscape
        made from other inputs is refused (``forget`` it first to start over)."""
        state, stored = self.status(tag)
        if state == "absent":
            return state
        diff = differences(stored or {}, fingerprint)
        if diff:
            what = "an unfinished" if state == "partial" else "a finished"
            raise ValueError(
                f"{self.path} holds {what} landscape {tag!r} made from other inputs than this call's: "
                + "; ".join(diff) + ". HINT: pass restart=True (landscape gen --restart) to start it over, "
                "or write to another output folder.")
        return state

    def recorded_plan(self, key: str) -> dict[str, Any] | None:
        """A tuned plan recorded with one of the file's landscapes for ``key`` (what decided it), as a
        ``plan=`` dict; None when there is none (tuning again would choose by timing). Plans recorded
        when the store opened count too, so a restart (``forget``) still reuses them."""
        fields = ("points_per_call", "batching", "eval_batch", "memory_format")
        for _, part, _ in self._unwritten.values():  # begun in this call, not on disk yet
            if part.md.get("plan_key") == key:
                return {k: part.md.get(k) for k in fields}
        for ls, _ in self._finished.values():
            if ls.metadata.get("plan_key") == key:
                return {k: ls.metadata.get(k) for k in fields}
        if os.path.exists(self.path):
            with contextlib.suppress(OSError):
                self._plans.update(recorded_plans(self.path))
        return self._plans.get(key)

    def load_partial(self, tag: str) -> Partial:
        return read_progress(self.path, tag)

    def load_complete(self, tag: str) -> Landscape:
        return read_h5(self.path)[tag]

    # -- writing ------------------------------------------------------------------
    def forget(self, tags: Sequence[str]) -> None:
        """Start over: remove these landscapes, finished or not."""
        if os.path.exists(self.path):
            self._rewrite(drop=tags)

    def begin(self, tag: str, fingerprint: Mapping[str, Any], part: Partial) -> None:
        """A landscape's definition, with no point done: written with its progress group once
        it has been evaluated for :attr:`flush_seconds` (at once when that is 0)."""
        fp = json.dumps(dict(fingerprint), sort_keys=True)
        self._unwritten[tag] = (fp, part, time.monotonic())
        if self.flush_seconds == 0:
            self._write_progress(tag)

    def _write_progress(self, tag: str) -> None:
        """Create ``tag``'s progress group (its values and ``done`` flags as they are now), with
        the finished landscapes that wait, in one atomic rewrite."""
        fp, part, _ = self._unwritten.pop(tag)
        md = json.dumps(jsonable(part.md), sort_keys=True)
        finished = self._take_finished()

        def add(fh: Any) -> None:
            write_progress(fh, tag, fp, md, part)
            for ls, lfp in finished:
                write_group(fh, ls)
                fh[ls.tag or "landscape"].attrs["fingerprint"] = lfp

        drop = [tag, *(ls.tag or "landscape" for ls, _ in finished)]
        self._rewrite(drop=drop, add=add)
        self._read_back(finished)
        self._last_write = time.monotonic()

    @contextlib.contextmanager
    def chunks(self, tag: str) -> Iterator[Callable[[int, int, Mapping[str, np.ndarray]], None]]:
        """A writer of finished chunks: in memory until the landscape has a progress group,
        then in place on disk (values first, flushed, then their ``done`` flags). When the
        evaluation stops with an exception, the points held in memory are written first."""
        with contextlib.ExitStack() as stack:
            on_disk: list[Callable[[int, int, Mapping[str, np.ndarray]], None]] = []

            def write(lo: int, hi: int, res: Mapping[str, np.ndarray]) -> None:
                if on_disk:
                    on_disk[0](lo, hi, res)
                    return
                pending = self._unwritten.get(tag)
                if pending is None:  # resumed: the group is on disk already
                    on_disk.append(stack.enter_context(progress_writer(self.path, tag)))
                    on_disk[0](lo, hi, res)
                    return
                _, part, started = pending
                for name, arr in res.items():
                    part.values[name][lo:hi] = np.asarray(arr, dtype=np.float64)
                part.done[lo:hi] = True
                if time.monotonic() - started >= self.flush_seconds and not part.done.all():
                    self._write_progress(tag)
                    on_disk.append(stack.enter_context(progress_writer(self.path, tag)))

            try:
                yield write
            except BaseException:
                # Ctrl-C or a failure: keep the points evaluated so far, whatever the flush period
                pending = self._unwritten.get(tag)
                if not on_disk and pending is not None and pending[1].done.any():
                    with contextlib.suppress(Exception):
                        self._write_progress(tag)
                raise

    def finish(self, landscape: Landscape, fingerprint: Mapping[str, Any]) -> None:
        """Record ``landscape`` as finished: written (replacing its progress group) with the
        others that wait, at most every :attr:`flush_seconds` and by :meth:`flush`."""
        tag = landscape.tag or "landscape"
        self._unwritten.pop(tag, None)
        self._finished[tag] = (landscape, json.dumps(dict(fingerprint), sort_keys=True))
        if time.monotonic() - self._last_write >= self.flush_seconds:
            self.flush()

    def _take_finished(self) -> list[tuple[Landscape, str]]:
        finished, self._finished = list(self._finished.values()), {}
        return finished

    def flush(self) -> None:
        """Write the finished landscapes that wait, in one atomic rewrite."""
        finished = self._take_finished()
        if not finished:
            return

        def add(fh: Any) -> None:
            for ls, fp in finished:
                write_group(fh, ls)
                fh[ls.tag or "landscape"].attrs["fingerprint"] = fp

        self._rewrite(drop=[ls.tag or "landscape" for ls, _ in finished], add=add)
        self._read_back(finished)
        self._last_write = time.monotonic()

    def _read_back(self, written: list[tuple[Landscape, str]]) -> None:
        """Landscapes written with their directions read them from the file from now on (what memory
        held of them is freed)."""
        for ls, _ in written:
            if ls.directions_source is not None:
                ls.directions_source = DirectionsInFile(self.path, ls.tag or "landscape")
