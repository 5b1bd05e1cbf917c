"""Devices and failure messages shared by every way of running chunks (private)."""

from __future__ import annotations

import os
import traceback
from collections.abc import Callable

import numpy as np
import torch

try:  # pickles a network class defined in a script or notebook by value
    import cloudpickle
except ImportError:  # pragma: no cover - joblib < 1.5 vendors it instead of depending on it
    from joblib.externals import cloudpickle

__all__ = ["cpu_count", "resolve_devices", "fail_message", "Chunk", "OnChunk", "cloudpickle"]

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
