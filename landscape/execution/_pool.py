"""Devices and worker processes (private): chunks of points go out on demand.

One device evaluates in this process. Several devices (CUDA devices, or CPU worker
processes that split the cores) get one worker process each (``landscape.execution._worker_main``),
started with ``subprocess`` and spoken to over a private socket. A process of our own
rather than an executor's because a failure must name what it hit: each worker is bound
to one device and its chunks in flight are known, so a worker that dies (killed, out of
memory, a crash in native code) is seen at once through its socket's end and reported
with the chunk and the device it was on. Workers ignore Ctrl-C (the caller stops them),
die with their parent (``PR_SET_PDEATHSIG``), and are killed and reaped before the call
returns, on success, error or interrupt, so none outlives it.

When the user selected another joblib backend with ``joblib.parallel_config`` (dask,
ray, threading, ...), chunks go through ``joblib.Parallel`` on that backend instead.
"""

from __future__ import annotations

import collections
import hashlib
import logging
import os
import pickle
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import traceback
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection, wait
from typing import Any

import numpy as np
import torch
from tqdm.auto import tqdm

from landscape.engine._engine import Engine

__all__: list[str] = []
_log = logging.getLogger("landscape")

#: (index, lo, hi): a chunk number and its points [lo, hi).
Chunk = tuple[int, int, int]
OnChunk = Callable[[int, int, dict[str, np.ndarray]], None]


def cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def resolve_devices(device_ids: list[int] | None, caller: str) -> tuple[list[str], int]:
    """Device names, one per worker, and the CPU threads each worker uses (0: default)."""
    n_cuda = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if device_ids is None:
        if n_cuda:
            return [f"cuda:{i}" for i in range(n_cuda)], 0
        return ["cpu"], 0
    if n_cuda:
        bad = [i for i in device_ids if i >= n_cuda]
        if bad:
            raise ValueError(f"The 'device_ids' parameter of {caller} names CUDA devices {bad} "
                             f"that do not exist; {n_cuda} device(s) are visible "
                             f"(ids 0..{n_cuda - 1}).")
        return [f"cuda:{i}" for i in device_ids], 0
    cores = cpu_count()
    if len(device_ids) > cores:
        raise ValueError(f"The 'device_ids' parameter of {caller} asks for {len(device_ids)} CPU "
                         f"workers but only {cores} cores are available (no CUDA device is "
                         "visible, so device_ids counts CPU worker processes).")
    if len(device_ids) == 1:
        return ["cpu"], 0
    return ["cpu"] * len(device_ids), max(1, cores // len(device_ids))


def fail_message(label: str, chunk: int, lo: int, hi: int, device: str, exc: BaseException) -> str:
    tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return (f"Evaluating landscape {label!r} failed in chunk {chunk} (points {lo}..{hi - 1}) "
            f"on device {device}: {type(exc).__name__}: {exc}\n{tb}")


class WorkerDied(RuntimeError):
    """A worker process ended while it had work (killed, crashed, out of memory)."""


def _how(returncode: int | None) -> str:
    if returncode is None:
        return "its connection closed"
    if returncode < 0:
        try:
            return f"killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exit status {returncode}"


class _Proc:
    """One worker process bound to one device."""

    def __init__(self, device: str, threads: int) -> None:
        self.device = device
        ours, theirs = socket.socketpair()
        pkg_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        code = (f"import sys; sys.path.insert(0, {pkg_root!r}); "
                "from landscape.execution._worker_main import main; sys.exit(main())")
        try:
            self.proc = subprocess.Popen([sys.executable, "-c", code, str(theirs.fileno())],
                                         pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL,
                                         start_new_session=True)  # no terminal Ctrl-C for workers
        finally:
            theirs.close()
        self.conn = Connection(ours.detach())
        self.inflight: collections.deque[Chunk] = collections.deque()
        self.conn.send(("init", list(sys.path), threads))

    def kill(self) -> None:
        if self.proc.poll() is None:
            try:
                self.proc.kill()
            except ProcessLookupError:  # pragma: no cover - ended in between
                pass

    def close(self, timeout: float) -> None:
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            self.proc.wait()
        self.conn.close()


class Pool:
    """Worker processes, one per device, started at once (their imports overlap with the
    caller's work on directions and data)."""

    def __init__(self, devices: Sequence[str], threads: int) -> None:
        self.procs: list[_Proc] = []
        try:
            for dev in devices:
                self.procs.append(_Proc(dev, threads))
        except BaseException:
            self.shutdown(ok=False)
            raise

    def shutdown(self, ok: bool = True) -> None:
        """Stop every worker: politely after success, SIGKILL after a failure; always reaped."""
        for p in self.procs:
            if ok:
                try:
                    p.conn.send(None)
                except OSError:
                    pass
            else:
                p.kill()
        for p in self.procs:
            p.close(timeout=10.0 if ok else 5.0)
        self.procs = []


def start_pool(devices: list[str], threads: int) -> Pool | None:
    """Worker processes for ``devices`` (None for one in-process device or a joblib backend).

    The caller must pass it to ``run_points`` or call ``stop_pool``.
    """
    if len(devices) == 1 or _joblib_backend() is not None:
        return None
    return Pool(devices, threads)


def stop_pool(pool: Pool | None, ok: bool = True) -> None:
    if pool is not None:
        pool.shutdown(ok)


def _joblib_backend() -> tuple[Any, int | None] | None:
    """The backend chosen with ``joblib.parallel_config``, unless it is the default loky one
    (then our own processes do the same job with exact failure reports)."""
    from joblib.parallel import get_active_backend

    backend, n_jobs = get_active_backend()
    if type(backend).__name__ == "LokyBackend":
        return None
    return backend, n_jobs


def run_points(payload: dict[str, Any], points: np.ndarray, chunks: Sequence[Chunk], *,
               devices: list[str], threads: int, label: str, on_chunk: OnChunk,
               pool: Pool | None = None, keep_pool: bool = False) -> int:
    """Evaluate the ``chunks`` of ``points`` (array (m, 2)); each result goes to ``on_chunk``.

    Returns the number of points evaluated. ``pool`` (from ``start_pool``) is used and
    shut down, unless ``keep_pool`` (it is still killed after a failure); without it one
    is started here when needed.
    """
    total = sum(hi - lo for _, lo, hi in chunks)
    bar = tqdm(total=total, desc=label, unit="pt", leave=False, disable=None)

    def store(lo: int, hi: int, res: dict[str, np.ndarray]) -> None:
        on_chunk(lo, hi, res)
        bar.update(hi - lo)

    try:
        if not chunks:
            if not keep_pool:
                stop_pool(pool)
            return 0
        joblib_backend = _joblib_backend()
        if joblib_backend is not None:
            stop_pool(pool)
            _run_joblib(payload, points, chunks, label, store, joblib_backend[1])
        elif len(devices) == 1:
            stop_pool(pool)
            engine = Engine(device=devices[0], **payload)
            for i, lo, hi in chunks:
                try:
                    res = engine.evaluate(points[lo:hi], lo)
                except Exception as exc:
                    raise RuntimeError(fail_message(label, i, lo, hi, devices[0], exc)) from None
                store(lo, hi, res)
        else:
            _run_pool(payload, points, chunks, devices, threads, label, store, pool, keep_pool)
        return total
    finally:
        bar.close()


def _cloudpickle() -> Any:
    """cloudpickle (pickles a network class defined in a script or notebook by value): a
    dependency of joblib >= 1.5, vendored inside older joblib releases."""
    try:
        import cloudpickle
    except ImportError:  # pragma: no cover - joblib < 1.5
        from joblib.externals import cloudpickle
    return cloudpickle


def _run_pool(payload: dict[str, Any], points: np.ndarray, chunks: Sequence[Chunk], devices: list[str],
              threads: int, label: str, store: OnChunk, pool: Pool | None, keep_pool: bool) -> None:
    cloudpickle = _cloudpickle()
    keep_pool = keep_pool and pool is not None
    pool = pool if pool is not None else Pool(devices, threads)
    ok = False
    try:
        with tempfile.TemporaryDirectory(prefix="landscape_") as tmp:
            path = os.path.join(tmp, "payload.pkl")
            with open(path, "wb") as fh:
                cloudpickle.dump(payload, fh)
            todo = collections.deque(chunks)
            # CPU workers get two chunks each, so a worker starts its next chunk while the
            # caller stores the last one; a GPU worker's device is busy with one
            depth = 2 if all(d == "cpu" for d in devices) else 1
            by_conn = {p.conn: p for p in pool.procs}
            done_points = 0
            while todo or any(p.inflight for p in pool.procs):
                for p in pool.procs:
                    while todo and len(p.inflight) < depth:
                        i, lo, hi = todo.popleft()
                        p.inflight.append((i, lo, hi))
                        try:
                            p.conn.send((path, p.device, label, i, lo, hi, points[lo:hi]))
                        except OSError:
                            _died(p, label, done_points)
                for conn in wait([p.conn for p in pool.procs if p.inflight]):
                    p = by_conn[conn]
                    try:
                        kind, i, res = conn.recv()
                    except (EOFError, OSError):
                        _died(p, label, done_points)
                    i, lo, hi = p.inflight.popleft()
                    if kind == "error":
                        raise RuntimeError(res)
                    store(lo, hi, res)
                    done_points += hi - lo
        ok = True
    finally:
        if not (ok and keep_pool):
            pool.shutdown(ok)


def _died(p: _Proc, label: str, done_points: int) -> None:
    try:
        rc = p.proc.wait(timeout=5.0)
    except subprocess.TimeoutExpired:  # pragma: no cover - a closed socket but a live process
        rc = None
    if p.inflight:
        i, lo, hi = p.inflight[0]
        where = f"while evaluating chunk {i} (points {lo}..{hi - 1}) on device {p.device}"
    else:
        where = f"while idle on device {p.device}"
    raise WorkerDied(f"A worker process (pid {p.proc.pid}) of landscape {label!r} died ({_how(rc)}) "
                     f"{where}; {done_points} point(s) finished by then were kept. Rerun to evaluate "
                     "the rest.")


# -- joblib's other backends (dask, ray, ...) -----------------------------------------
_LOCAL = threading.local()


def _joblib_chunk(blob: bytes, digest: str, label: str, i: int, lo: int, hi: int,
                  points: np.ndarray) -> tuple[int, int, dict[str, np.ndarray]]:
    """One chunk on whatever machine the backend runs it: its first CUDA device, else CPU.
    The engine is built once per worker thread and payload."""
    device = "cuda" if torch.cuda.is_available() else "cpu"
    try:
        cached = getattr(_LOCAL, "engine", None)
        if cached is None or cached[0] != digest:
            _LOCAL.engine = None
            _LOCAL.engine = (digest, Engine(device=device, **pickle.loads(blob)))
        return lo, hi, _LOCAL.engine[1].evaluate(points, lo)
    except Exception as exc:
        raise RuntimeError(fail_message(label, i, lo, hi, device, exc)) from None


def _run_joblib(payload: dict[str, Any], points: np.ndarray, chunks: Sequence[Chunk], label: str,
                store: OnChunk, n_jobs: int | None) -> None:
    from joblib import Parallel, delayed

    blob = _cloudpickle().dumps(payload)
    digest = hashlib.sha256(blob).hexdigest()
    tasks = (delayed(_joblib_chunk)(blob, digest, label, i, lo, hi, points[lo:hi]) for i, lo, hi in chunks)
    parallel = Parallel(n_jobs=-1 if n_jobs is None else n_jobs, return_as="generator_unordered")
    for lo, hi, res in parallel(tasks):
        store(lo, hi, res)
