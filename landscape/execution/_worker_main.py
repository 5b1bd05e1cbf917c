"""The worker process of :mod:`._pool` (private): ``python -m landscape.execution._worker_main FD``.

It talks to its parent over one inherited socket (``multiprocessing.connection``):
first ``("init", sys_path, threads)``, then ``(payload_path, device, label, chunk, lo, hi,
points)`` tasks, answered by ``("ok", chunk, results)`` or ``("error", chunk, message)``;
``None`` or the socket's end (the parent exited or was killed) ends the process.
"""

from __future__ import annotations

import os
import signal
import sys
from multiprocessing.connection import Connection
from typing import Any

import torch

from landscape.engine import Engine, tune_malloc
from landscape.execution._devices import fail_message
from landscape.execution._payload import read_payload

__all__: list[str] = []


def _die_with_parent() -> None:
    """Ask Linux to SIGKILL this process when its parent dies (a killed caller leaves no
    worker behind even while a long chunk is running)."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # pragma: no cover - not Linux: the socket's EOF remains
        pass


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parent = os.getppid()
    _die_with_parent()
    if os.getppid() != parent:  # pragma: no cover - the parent died before prctl
        return 1
    # Ctrl-C is the caller's to handle: it stops the workers itself and keeps what is done
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    conn = Connection(int(argv[0]))
    try:
        kind, sys_path, threads = conn.recv()
    except EOFError:
        return 0
    assert kind == "init"
    sys.path[:] = list(dict.fromkeys(list(sys_path) + sys.path))  # the caller's modules import here
    if threads:
        torch.set_num_threads(int(threads))
    tune_malloc(owned=True)  # this process is ours: the same activations freed and allocated every call

    engines: dict[tuple[str, str], Any] = {}
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return 0
        if msg is None:
            return 0
        path, device, label, chunk, lo, hi, points = msg
        try:
            key = (path, device)
            if key not in engines:
                engines.clear()
                engines[key] = Engine(read_payload(path), device)
            reply: tuple = ("ok", chunk, engines[key].evaluate(points, lo))
        except Exception as exc:  # sent back; the parent raises it naming chunk and device
            reply = ("error", chunk, fail_message(label, chunk, lo, hi, device, exc))
        try:
            conn.send(reply)
        except (BrokenPipeError, ConnectionResetError, OSError):
            return 0


if __name__ == "__main__":
    sys.exit(main())
