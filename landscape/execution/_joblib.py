"""Chunks through ``joblib.Parallel`` on the backend the user chose (dask, ray, threading, ...) (private)."""

from __future__ import annotations

import hashlib
import pickle
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from joblib import Parallel, delayed
from joblib.parallel import get_active_backend

from landscape.engine import Engine, EngineSpec
from landscape.execution._devices import Chunk, OnChunk, cloudpickle, fail_message

__all__ = ["joblib_backend", "run_joblib"]


def joblib_backend() -> tuple[Any, int | None] | None:
    """The backend chosen with ``joblib.parallel_config``, unless it is the default loky one
    (then our own processes do the same job with exact failure reports)."""
    backend, n_jobs = get_active_backend()
    if type(backend).__name__ == "LokyBackend":
        return None
    return backend, n_jobs


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
            _LOCAL.engine = (digest, Engine(pickle.loads(blob), device))
        return lo, hi, _LOCAL.engine[1].evaluate(points, lo)
    except Exception as exc:
        raise RuntimeError(fail_message(label, i, lo, hi, device, exc)) from None


def run_joblib(payload: EngineSpec, points: np.ndarray, chunks: Sequence[Chunk], label: str,
                store: OnChunk, n_jobs: int | None) -> None:
    blob = cloudpickle.dumps(payload)
    digest = hashlib.sha256(blob).hexdigest()
    tasks = (delayed(_joblib_chunk)(blob, digest, label, i, lo, hi, points[lo:hi]) for i, lo, hi in chunks)
    parallel = Parallel(n_jobs=-1 if n_jobs is None else n_jobs, return_as="generator_unordered")
    for lo, hi, res in parallel(tasks):
        store(lo, hi, res)
