"""Running chunks of points where they should run: here, our worker processes or joblib (private).

One device evaluates in this process. Several devices get one worker process each
(:mod:`landscape.execution._pool`). When the user selected another joblib backend with
``joblib.parallel_config`` (dask, ray, threading, ...), chunks go through
``joblib.Parallel`` on that backend instead (:mod:`landscape.execution._joblib`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from tqdm.auto import tqdm

from landscape.engine import Engine, EngineSpec
from landscape.execution._devices import Chunk, OnChunk, fail_message
from landscape.execution._joblib import joblib_backend, run_joblib
from landscape.execution._pool import Pool, run_pool

__all__ = ["run_points", "start_pool", "stop_pool"]


def start_pool(devices: list[str], threads: int) -> Pool | None:
    """Worker processes for ``devices`` (None for one in-process device or a joblib backend).

    The caller must pass it to ``run_points`` or call ``stop_pool``.
    """
    if len(devices) == 1 or joblib_backend() is not None:
        return None
    return Pool(devices, threads)


def stop_pool(pool: Pool | None, ok: bool = True) -> None:
    if pool is not None:
        pool.shutdown(ok)


def run_points(payload: EngineSpec, points: np.ndarray, chunks: Sequence[Chunk], *,
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
        backend = joblib_backend()
        if backend is not None:
            stop_pool(pool)
            run_joblib(payload, points, chunks, label, store, backend[1])
        elif len(devices) == 1:
            stop_pool(pool)
            engine = Engine(payload, devices[0])
            for i, lo, hi in chunks:
                try:
                    res = engine.evaluate(points[lo:hi], lo)
                except Exception as exc:
                    raise RuntimeError(fail_message(label, i, lo, hi, devices[0], exc)) from None
                store(lo, hi, res)
        else:
            run_pool(payload, points, chunks, devices, threads, label, store, pool, keep_pool)
        return total
    finally:
        bar.close()
