"""The one owner of where points are evaluated: an executor (private).

``with executor(device_ids, distributed, caller) as ex:`` holds, for the whole block, what
runs the points of every landscape of a generation, and releases it once at the end
(normally, on an error, or on Ctrl-C):

* one device: the engine in this process;
* several devices: our worker processes, one per device (:mod:`._pool`), started on entry
  so that their start-up overlaps with the caller's directions and data, killed and
  reaped on exit after a failure;
* a joblib backend the user chose with ``joblib.parallel_config`` (dask, ray, threading):
  chunks through ``joblib.Parallel`` (:mod:`._joblib`);
* a ``torch.distributed`` group (:mod:`._distributed`): rank 0 decides, chunks go
  round-robin, every rank gets every result; a group this call initialised is destroyed
  on exit. A network sharded over the group with FSDP2 is the other split: every rank
  evaluates every chunk on its share of the samples (:class:`landscape.engine.ShardedEngine`).

Callers use :meth:`Executor.on_root` (decide once, on rank 0) and :meth:`Executor.run`
(evaluate chunks, with a progress bar) without knowing which it is.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from types import TracebackType
from typing import Any

import numpy as np
import torch
from torch import nn

from collector.common import InvalidParameterError
from landscape.engine import (
    Engine,
    EngineSpec,
    ProgressMeter,
    ShardedEngine,
    WayRefused,
    is_sharded,
    keeps_placement,
    tune_malloc,
)
from landscape.execution._devices import Chunk, OnChunk, fail_message, resolve_devices
from landscape.execution._distributed import Dist, check_devices_for_dist, detect, on_root
from landscape.execution._joblib import joblib_backend, run_joblib
from landscape.execution._pool import Pool, run_pool

__all__ = ["Executor", "executor", "check_devices", "check_placed_devices"]


class Executor:
    """Where the points of a generation are evaluated (see the module docstring).

    Attributes
    ----------
    devices : list of str
        One worker per entry (``"cpu"`` or ``"cuda:k"``) in this process's share.
    threads : int
        CPU threads per worker process (0: torch's default).
    dist : Dist or None
        The torch.distributed group.
    """

    def __init__(self, devices: list[str], threads: int, dist: Dist | None, *, in_process: bool = False) -> None:
        self.devices, self.threads, self.dist = devices, threads, dist
        self.in_process = in_process  # a network placed by its caller runs where it is, in this process
        self.pool: Pool | None = None
        self.backend: Any = None
        self.progress_bars = True

    # -- lifetime -------------------------------------------------------------------------
    def __enter__(self) -> Executor:
        if self.dist is None and not self.in_process:
            backend = joblib_backend()
            if backend is not None:
                self.backend = backend[1]
            elif len(self.devices) > 1:
                self.pool = Pool(self.devices, self.threads)
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        try:
            if self.pool is not None:
                self.pool.shutdown(ok=exc_type is None)  # killed and reaped after a failure
                self.pool = None
        finally:
            if self.dist is not None:
                self.dist.close()

    # -- what callers use -----------------------------------------------------------------
    @property
    def root(self) -> bool:
        """Whether this process decides and writes (rank 0, or the only process)."""
        return self.dist is None or self.dist.root

    @property
    def here(self) -> bool:
        """Whether every point is evaluated in this process, by one engine (no group, pool or joblib
        backend): chunks then only split the work for a store to flush."""
        return self.dist is None and self.pool is None and self.backend is None

    @property
    def device(self) -> str:
        """Where this process plans and computes directions."""
        return self.dist.device if self.dist is not None else self.devices[0]

    @property
    def eval_threads(self) -> int:
        """CPU threads of each evaluating process: BLAS kernels may round a product differently with
        another number of threads, so values are bit for bit the same for the same plan and threads."""
        if self.dist is not None and self.dist.threads:
            return int(self.dist.threads)
        if self.pool is not None and self.threads:
            return int(self.threads)
        return int(torch.get_num_threads())

    @property
    def workers_per_memory(self) -> int:
        """How many of this machine's evaluating processes share one device's memory: the CPU worker
        processes (or torchrun's local ranks) on the CPU, one per CUDA device."""
        if torch.device(self.device).type == "cuda":
            return 1
        if self.dist is not None:
            return self.dist.local_world
        return len(self.devices)

    @property
    def workers(self) -> int:
        """How many evaluate at once (chunks are sized for them)."""
        return self.dist.world if self.dist is not None else len(self.devices)

    def on_root(self, fn: Callable[[], Any]) -> Any:
        """``fn()`` on rank 0 (here without a group); its result, or its exception raised, everywhere."""
        return on_root(self.dist, fn)

    def run(self, spec: EngineSpec, points: np.ndarray, chunks: Sequence[Chunk], label: str,
            on_chunk: OnChunk) -> int:
        """Evaluate the ``chunks`` of ``points`` (array (m, 2)); each result goes to ``on_chunk``
        (on every rank). Returns the points this process evaluated."""
        total = sum(hi - lo for _, lo, hi in chunks)
        if not chunks:
            return 0
        bar = ProgressMeter(label, total, enabled=self.progress_bars and self.root)
        try:
            if is_sharded(spec.network):  # every rank evaluates every point on its share of the samples
                if self.dist is None:
                    raise RuntimeError("a network sharded with fully_shard needs its process group: launch with "
                                       "torchrun and leave distributed=None or True")
                return self.dist.run_all(lambda dev: ShardedEngine(spec, dev), points, chunks, label,
                                         on_chunk, bar.update if self.root else None)
            if self.dist is not None:
                return self.dist.run(lambda dev: Engine(spec, dev), points, chunks, label,
                                     _counting(on_chunk, bar))
            if self.backend is not None:
                run_joblib(spec, points, chunks, label, _counting(on_chunk, bar), self.backend)
            elif self.pool is not None:
                run_pool(spec, points, chunks, self.pool, label, _counting(on_chunk, bar))
            else:
                self._run_here(spec, points, chunks, label, on_chunk, bar)
            return total
        finally:
            bar.close()

    def _run_here(self, spec: EngineSpec, points: np.ndarray, chunks: Sequence[Chunk], label: str,
                  on_chunk: OnChunk, bar: ProgressMeter) -> None:
        tune_malloc()  # only when LANDSCAPE_MALLOC_TUNING=1 asks for it: this is the caller's process
        engine = Engine(spec, self.devices[0])
        for i, lo, hi in chunks:
            try:
                res = engine.evaluate(points[lo:hi], lo, progress=bar.update)
            except WayRefused:  # before any value: the caller plans again without that way
                raise
            except Exception as exc:
                raise RuntimeError(fail_message(label, i, lo, hi, self.devices[0], exc)) from None
            on_chunk(lo, hi, res)


def _counting(on_chunk: OnChunk, bar: ProgressMeter) -> OnChunk:
    def counted(lo: int, hi: int, res: dict[str, np.ndarray]) -> None:
        on_chunk(lo, hi, res)
        bar.update(hi - lo)

    return counted


def check_devices(device_ids: list[int] | None, distributed: bool | None, caller: str) -> None:
    """Refuse ``device_ids`` that do not exist or do not fit ``distributed``, before any work."""
    check_devices_for_dist(distributed, device_ids, caller)
    resolve_devices(None if device_ids is None else list(device_ids), caller)


def executor(device_ids: list[int] | None, distributed: bool | None, caller: str, *,
             network: nn.Module | None = None) -> Executor:
    """The executor for ``device_ids`` (None: every CUDA device, else the CPU) and ``distributed``
    (None: a group when there is one), refused with a clear error before any work when they do
    not fit. A ``network`` its caller placed over several devices (``hf_device_map``) runs where it
    is, in this process (:func:`check_placed_devices`). Use it as a context manager."""
    check_devices_for_dist(distributed, device_ids, caller)
    if network is not None and is_sharded(network) and distributed is None:
        distributed = True  # its shards live on the ranks of the group, however many (one included)
    if network is not None and keeps_placement(network):
        check_placed_devices(network, device_ids, caller)
        first = next(network.parameters(), None)
        devices = [str(first.device) if first is not None else "cpu"]
        return Executor(devices, 0, detect(distributed, caller), in_process=True)
    devices, threads = resolve_devices(None if device_ids is None else list(device_ids), caller)
    return Executor(devices, threads, detect(distributed, caller))


def check_placed_devices(network: nn.Module, device_ids: Any, caller: str) -> None:
    """``device_ids`` must be None for a network placed over several devices by its caller."""
    if device_ids is not None and keeps_placement(network):
        raise InvalidParameterError(
            f"The 'device_ids' parameter of {caller} must be None for a network placed over devices by its caller "
            f"(hf_device_map, or parameters on several devices); got {device_ids!r}. HINT: such a network is "
            "evaluated where it is, in this process; leave device_ids out.")
