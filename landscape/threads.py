"""How the library's own processes wait for CPU work: the OpenMP wait policy of the ``landscape``
command and of its worker processes, never of the caller's process.

PyTorch's CPU kernels run on libgomp's threads. At the end of each parallel region a thread
spins (``GOMP_SPINCOUNT``, 300,000 iterations by default) before it sleeps. When another busy
process shares the CPUs, the spinning thread takes the core from the one it waits for, and
every kernel call pays for it. Measured on a 2-core machine beside a 2-thread matmul loop
(``benchmarks/bench_busy.py``): an LSTM's 31×31 landscape took 185 s with libgomp's default,
12 s with one thread and 10 s with ``OMP_WAIT_POLICY=PASSIVE``; 5–6 s alone. Alone, passive
waiting costs 10–20 % on small kernels (a thread wakes from the kernel instead of a spin), so
the library chooses it only when other runnable threads would share its CPUs when the
process starts (:func:`wait_policy`). The policy changes where threads wait, not what they
compute: values are the same bits either way.

libgomp reads the policy once, when it is loaded (``import torch``), so it is set in the
environment of a process before that: the command does it first thing
(``landscape.__main__``), the worker pool in the environment it starts workers with. A
``OMP_WAIT_POLICY`` or ``GOMP_SPINCOUNT`` the user set is always left as it is.

This module imports nothing but the standard library (it runs before torch is imported).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Mapping

__all__ = ["others_running", "wait_policy", "owned_env", "set_for_command"]

#: Environment variables through which a user chooses the wait policy themselves.
USER_SETTINGS = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")


def _read_running() -> int | None:
    """Runnable threads on the machine now, the reader included (``/proc/loadavg``'s fourth field)."""
    try:
        with open("/proc/loadavg", encoding="ascii") as fh:
            return int(fh.read().split()[3].split("/")[0])
    except (OSError, IndexError, ValueError):
        return None


def others_running(samples: int = 5, gap: float = 0.002,
                   read: Callable[[], int | None] = _read_running) -> int | None:
    """Threads of other processes runnable on the machine.

    Parameters
    ----------
    samples : int, default=5
        Reads of the load, the fewest of which counts (a daemon waking for a moment is not a
        busy process).
    gap : float, default=0.002
        Seconds between the reads.
    read : callable, default=reading ``/proc/loadavg``
        ``read() -> int | None``: the runnable threads now.

    Returns
    -------
    int or None
        The fewest count, less this process's reading thread; ``None`` where the system
        does not say (not Linux).
    """
    counts = []
    for k in range(samples):
        if k:
            time.sleep(gap)
        running = read()
        if running is None:
            return None
        counts.append(max(0, running - 1))
    return min(counts)


def _cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def _default_threads(env: Mapping[str, str], cpus: int) -> int:
    """The threads torch starts with: ``OMP_NUM_THREADS``, else one per CPU."""
    try:
        return max(1, int(env.get("OMP_NUM_THREADS", "").split(",")[0]))
    except ValueError:
        return cpus


def wait_policy(threads: int | None = None, env: Mapping[str, str] | None = None,
                others: int | None = None) -> str | None:
    """The OpenMP wait policy for ``threads`` threads of ours beside the machine's other work.

    Parameters
    ----------
    threads : int, optional
        Our threads (default: ``OMP_NUM_THREADS``, or one per CPU).
    env : mapping, optional
        The environment (default ``os.environ``): a user's ``OMP_WAIT_POLICY`` or
        ``GOMP_SPINCOUNT`` there always wins.
    others : int, optional
        Other runnable threads (default :func:`others_running`).

    Returns
    -------
    str or None
        ``"PASSIVE"`` when ours and the others exceed the CPUs this process may use;
        ``None`` (libgomp's default) when they fit, when one thread runs (nothing to wait
        for), where the load is unknown, or when the user chose.
    """
    env = os.environ if env is None else env
    if any(env.get(name) for name in USER_SETTINGS):
        return None
    cpus = _cpus()
    if threads is None:
        threads = _default_threads(env, cpus)
    if threads <= 1:
        return None
    if others is None:
        others = others_running()
    if others is None:
        return None
    return "PASSIVE" if others + threads > cpus else None


def owned_env(threads: int | None, processes: int = 1) -> dict[str, str]:
    """The environment to start worker processes with.

    Parameters
    ----------
    threads : int or None
        Threads per worker (``None`` or 0: one per CPU).
    processes : int, default=1
        How many workers run together.

    Returns
    -------
    dict of str to str
        ``os.environ``, plus ``OMP_WAIT_POLICY=PASSIVE`` when :func:`wait_policy` chooses it
        for their threads together.
    """
    env = dict(os.environ)
    per_process = threads if threads else _default_threads(env, _cpus())
    policy = wait_policy(per_process * max(1, processes), env)
    if policy is not None:
        env["OMP_WAIT_POLICY"] = policy
    return env


def set_for_command() -> str | None:
    """In the ``landscape`` command's own process, before torch is imported: set
    ``OMP_WAIT_POLICY`` when :func:`wait_policy` chooses it (its workers inherit it).

    Does nothing once torch is imported (libgomp has read it then).

    Returns
    -------
    str or None
        The policy set, or ``None``.
    """
    if "torch" in sys.modules:
        return None
    policy = wait_policy()
    if policy is not None:
        os.environ["OMP_WAIT_POLICY"] = policy
    return policy
