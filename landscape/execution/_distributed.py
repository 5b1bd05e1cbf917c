"""Many processes on many machines through ``torch.distributed`` (private).

Under ``torchrun`` (or any launcher that sets ``RANK``/``WORLD_SIZE``/``MASTER_ADDR``)
the generation finds its process group by itself: gloo on CPU, nccl when CUDA is
visible (one device per process, ``cuda:LOCAL_RANK``). Rank 0 reads and writes the
files and computes each landscape's directions; it shares them with the other ranks, which
then take chunks round-robin. After every round all ranks exchange their results, so each
holds the whole landscape and a rank's failure reaches every rank at once (nobody waits on
a peer that gave up). Every point's arithmetic depends only on its coordinates and the
plan, so on CPU the result equals a single-process run bit for bit.
"""

from __future__ import annotations

import datetime as _dt
import logging
import os
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
import torch.distributed as td

from collector.common import InvalidParameterError
from landscape.execution._devices import cpu_count, fail_message

__all__: list[str] = []
_log = logging.getLogger("landscape")
_ENV = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


class _Failed:
    """A rank's error, sent instead of a result so that every rank raises it."""

    def __init__(self, message: str) -> None:
        self.message = message


class Dist:
    """This process's place in the process group, and the collectives the engine needs."""

    def __init__(self, owns_group: bool) -> None:
        self.td = td
        self.owns_group = owns_group
        self.rank = td.get_rank()
        self.world = td.get_world_size()
        self.backend = str(td.get_backend())
        local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        local_world = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
        self.local_world = local_world
        if torch.cuda.is_available() and self.backend == "nccl":
            self.device = f"cuda:{torch.cuda.current_device()}"
            self.threads = 0
        else:
            self.device = "cpu"
            # the processes of one machine split its cores
            self.threads = max(1, cpu_count() // max(1, local_world))
        _log.info("rank %d of %d (local rank %d), backend %s, device %s", self.rank, self.world,
                  local_rank, self.backend, self.device)

    @property
    def root(self) -> bool:
        return self.rank == 0

    def share(self, obj: Any) -> Any:
        """Rank 0's ``obj`` on every rank; a ``BaseException`` there is raised everywhere."""
        box: list[Any] = [None]
        if self.root:
            box[0] = _Failed(f"{type(obj).__name__}: {obj}") if isinstance(obj, BaseException) else obj
        self.td.broadcast_object_list(box, src=0)
        got = box[0]
        if isinstance(got, _Failed):
            if self.root and isinstance(obj, BaseException):
                raise obj
            raise RuntimeError(f"rank 0 failed: {got.message}")
        return got

    def run(self, make_engine: Callable[[str], Any], points: np.ndarray, chunks: Sequence[tuple[int, int, int]],
            label: str, on_chunk: Callable[[int, int, dict[str, np.ndarray]], None]) -> int:
        """Evaluate ``chunks`` round-robin over the ranks; ``on_chunk`` sees every chunk of
        every rank, on every rank. Returns the points this rank evaluated."""
        if self.threads:
            torch.set_num_threads(self.threads)
        engine = None
        mine = 0
        pending: _Failed | None = None  # rank 0's failure to store a chunk, sent to all next
        for start in range(0, len(chunks) + self.world, self.world):  # one more round: the last store
            k = start + self.rank
            item: Any = pending
            if pending is None and k < len(chunks):
                i, lo, hi = chunks[k]
                try:
                    if engine is None:
                        engine = make_engine(self.device)
                    item = (lo, hi, engine.evaluate(points[lo:hi], lo))
                    mine += hi - lo
                except Exception as exc:  # every rank learns of it in the gather below
                    item = _Failed(f"rank {self.rank}: " + fail_message(label, i, lo, hi, self.device, exc))
            gathered: list[Any] = [None] * self.world
            self.td.all_gather_object(gathered, item)
            failed = [g for g in gathered if isinstance(g, _Failed)]
            if failed:
                raise RuntimeError(failed[0].message)
            try:
                for g in gathered:
                    if g is not None:
                        on_chunk(*g)
            except Exception as exc:
                pending = _Failed(f"rank {self.rank} could not store the results of landscape {label!r}: "
                                  f"{type(exc).__name__}: {exc}")
        return mine

    def run_all(self, make_engine: Callable[[str], Any], points: np.ndarray, chunks: Sequence[tuple[int, int, int]],
                label: str, on_chunk: Callable[[int, int, dict[str, np.ndarray]], None],
                progress: Callable[[int], None] | None = None) -> int:
        """Evaluate every chunk on every rank, in the same order (a sharded network's forward is a
        collective: the ranks evaluate each point together, each on its share of the samples, and all
        get its value). Returns the points evaluated."""
        if self.threads:
            torch.set_num_threads(self.threads)
        engine = make_engine(self.device)
        done = 0
        for i, lo, hi in chunks:
            try:
                res = engine.evaluate(points[lo:hi], lo, progress=progress)
            except Exception as exc:  # a peer's collective fails too (or times out): each rank says where
                raise RuntimeError(f"rank {self.rank}: " + fail_message(label, i, lo, hi, self.device, exc)) from None
            on_chunk(lo, hi, res)
            done += hi - lo
        return done

    def close(self) -> None:
        if self.owns_group and self.td.is_initialized():
            self.td.destroy_process_group()


def on_root(dist: Dist | None, fn: Callable[[], Any]) -> Any:
    """``fn()`` run on rank 0 (here, without ``dist``); its result, or its exception
    raised, on every rank."""
    if dist is None:
        return fn()
    got: Any = None
    if dist.root:
        try:
            got = fn()
        except BaseException as exc:
            got = exc
    return dist.share(got)


def detect(switch: bool | None, caller: str, timeout_s: float = 1800.0) -> Dist | None:
    """The process group to use: ``switch`` None (auto) uses an initialised group or
    torchrun's environment, True requires one, False runs in this process alone."""
    if switch is False:
        return None
    if not td.is_available():
        if switch:
            raise RuntimeError(f"distributed=True in {caller}, but this PyTorch build has no "
                               "torch.distributed.")
        return None
    if td.is_initialized():
        return Dist(owns_group=False) if td.get_world_size() > 1 or switch else None
    env_ok = all(k in os.environ for k in _ENV)
    if not env_ok:
        if switch:
            missing = [k for k in _ENV if k not in os.environ]
            raise RuntimeError(
                f"distributed=True in {caller}, but no process group is initialised and the "
                f"environment lacks {missing}. HINT: launch with `torchrun --nproc_per_node N "
                "-m landscape gen ...` or call torch.distributed.init_process_group first.")
        return None
    if int(os.environ["WORLD_SIZE"]) <= 1 and not switch:
        return None
    if torch.cuda.is_available():
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
        backend = "nccl"
    else:
        backend = "gloo"
    td.init_process_group(backend, timeout=_dt.timedelta(seconds=timeout_s))
    return Dist(owns_group=True)


def check_devices_for_dist(distributed: bool | None, device_ids: Any, caller: str) -> None:
    """``device_ids`` must be None when the call will run distributed."""
    if distributed is False or device_ids is None:
        return
    if td.is_available() and td.is_initialized():
        several = td.get_world_size() > 1
    else:
        several = int(os.environ.get("WORLD_SIZE", "1")) > 1
    if several or distributed:
        raise InvalidParameterError(
            f"The 'device_ids' parameter of {caller} must be None in a distributed run; got "
            f"{device_ids!r}. HINT: each process uses one device (cuda:LOCAL_RANK, or the CPU): "
            "choose devices with torchrun's --nproc_per_node and CUDA_VISIBLE_DEVICES.")
