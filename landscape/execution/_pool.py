"""Our own worker processes, one per device (private).

Several devices (CUDA devices, or CPU worker processes that split the cores) get one
worker process each (``_worker_main``), started with ``subprocess`` and spoken to over
a private socket. A process of our own rather than an executor's because a failure must
name what it hit: each worker is bound to one device and its chunks in flight are known,
so a worker that dies (killed, out of memory, a crash in native code) is seen at once
through its socket's end and reported with the chunk and the device it was on. Workers
ignore Ctrl-C (the caller stops them), die with their parent (``PR_SET_PDEATHSIG``), and
are killed and reaped before the call returns, on success, error or interrupt, so none
outlives it.
"""

from __future__ import annotations

import collections
import os
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from multiprocessing.connection import Connection, wait
from typing import cast

import numpy as np

from landscape.engine import EngineSpec
from landscape.execution._devices import Chunk, OnChunk
from landscape.execution._payload import write_payload
from landscape.threads import owned_env

__all__ = ["Pool", "WorkerDied", "run_pool"]


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

    def __init__(self, device: str, threads: int, env: dict[str, str] | None = None) -> None:
        self.device = device
        ours, theirs = socket.socketpair()
        pkg_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        code = (f"import sys; sys.path.insert(0, {pkg_root!r}); "
                "from landscape.execution._worker_main import main; sys.exit(main())")
        try:
            self.proc = subprocess.Popen([sys.executable, "-c", code, str(theirs.fileno())],
                                         pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL, env=env,
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
    caller's work on directions and data); :class:`landscape.execution._executor.Executor`
    starts and stops it."""

    def __init__(self, devices: Sequence[str], threads: int) -> None:
        self.procs: list[_Proc] = []
        # the workers are ours: they wait passively when other processes keep the CPUs busy
        # (landscape/threads.py); the caller's own process is left as it is
        env = owned_env(threads, len(devices))
        try:
            for dev in devices:
                self.procs.append(_Proc(dev, threads, env))
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


def run_pool(payload: EngineSpec, points: np.ndarray, chunks: Sequence[Chunk], pool: Pool, label: str,
             store: OnChunk) -> None:
    """Evaluate ``chunks`` on ``pool``'s workers; each result goes to ``store``. A failure raises
    (a worker's error, or :class:`WorkerDied`); the pool's owner stops it."""
    devices = [p.device for p in pool.procs]
    with tempfile.TemporaryDirectory(prefix="landscape_") as tmp:
        path = write_payload(payload, tmp)
        todo = collections.deque(chunks)
        # CPU workers get two chunks each, so a worker starts its next chunk while the
        # caller stores the last one; a GPU worker's device is busy with one
        depth = 2 if all(d == "cpu" for d in devices) else 1
        by_conn = {p.conn: p for p in pool.procs}
        for p in pool.procs:
            p.inflight.clear()
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
            for ready in wait([p.conn for p in pool.procs if p.inflight]):
                conn = cast(Connection, ready)
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
