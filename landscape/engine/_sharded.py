"""A network sharded over the processes of a group with FSDP2: every rank, every point (private).

A model that does not fit one device is given as PyTorch's FSDP2 module
(``torch.distributed.fsdp.fully_shard`` over a device mesh, under ``torchrun``): each rank
holds a shard (``Shard(0)``) of every parameter. :class:`ShardedEngine` evaluates every point
on every rank, on that rank's share of the samples (contiguous, :meth:`Samples.share`):

* each rank moves its own shards in place: shard ``(c + b·w) + a·v`` (:func:`point_value`,
  element by element, so it is the same slice of the same point as one process forms), and
  FSDP gathers the point's full tensors layer by layer as its forward needs them (every
  module resharded between points: FSDP keeps the root's tensors gathered after a forward);
* the directions' shards: each tensor's random direction is drawn whole on the CPU from the
  recipe (the same bits as one process draws), normalized against the gathered centre tensor,
  and this rank keeps its slice -- held (``memory="fast"``: two shard sizes, in the shard's dtype)
  or drawn again at every point, one tensor at a time (``"lean"``);
* the loss: each rank's sample-weighted sum in float64, summed over the ranks
  (``all_reduce``) and divided by the number of samples. One process sums the same float64
  terms batch by batch, so the values agree to float rounding of the summation (about 1e-7
  relative), and bit for bit when the shares are whole batches of the same size.

The centre's shards are kept (one more shard-size) and written back after every chunk, so the
caller's module is at its centre again whenever the engine returns.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
import torch.distributed as td
from torch import nn

from landscape.engine._points import direction_dtype, point_value
from landscape.tasks import to_device

__all__ = ["ShardedEngine", "is_sharded"]


def is_sharded(network: nn.Module) -> bool:
    """Whether ``network`` is an FSDP2 module (``fully_shard``): evaluated by :class:`ShardedEngine`."""
    try:
        from torch.distributed.fsdp import FSDPModule
    except ImportError:  # pragma: no cover - a build without torch.distributed
        return False
    return isinstance(network, FSDPModule)


def _local(p: torch.Tensor) -> torch.Tensor:
    """The part of ``p`` this rank holds (a DTensor's local shard; a plain tensor is whole everywhere)."""
    return p._local_tensor if hasattr(p, "_local_tensor") else p.data


def _full(p: torch.Tensor) -> torch.Tensor:
    """The whole tensor (a DTensor gathered: a collective, every rank calls it in the same order)."""
    return p.full_tensor() if hasattr(p, "full_tensor") else p.detach()


def _slice(whole: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
    """This rank's slice of ``whole`` (shaped like ``p``), laid out as ``p`` is sharded (no communication)."""
    if not hasattr(p, "device_mesh"):
        return whole
    from torch.distributed.tensor import distribute_tensor

    local = distribute_tensor(whole, p.device_mesh, p.placements,  # type: ignore[attr-defined]
                               src_data_rank=None).to_local()
    return local.clone() if local.untyped_storage().data_ptr() == whole.untyped_storage().data_ptr() else local


class ShardedEngine:
    """Every point on this rank's share of the samples, with an FSDP2 network moved in its own shards.

    Parameters
    ----------
    spec : EngineSpec
        ``network`` is the FSDP2 module (the caller's, moved in place and restored); random
        directions as a ``recipe`` (see the module docstring).
    device : str or torch.device
        Where this rank's batches go (its shard's device).
    """

    def __init__(self, spec: Any, device: str | torch.device = "cpu") -> None:
        if spec.recipe is None:
            raise ValueError("a sharded network's landscape takes random directions (a recipe)")
        self.net, self.task, self.recipe = spec.network, spec.task, spec.recipe
        self.device = torch.device(device)
        self.rank, self.world = td.get_rank(), td.get_world_size()
        self.lean = spec.memory == "lean"
        from torch.distributed.fsdp import FSDPModule

        self._fsdp = [m for m in self.net.modules() if isinstance(m, FSDPModule)]
        params = dict(self.net.named_parameters())
        self.params = [params[k] for k in spec.names]
        self.local = [_local(p) for p in self.params]
        self.centre = [t.detach().clone() for t in self.local]
        self.v: list[torch.Tensor | None] = []
        self.w: list[torch.Tensor | None] = []
        if not self.lean:
            self.v, self.w = self._directions()
        mine = spec.samples.share(self.rank, self.world)
        self.batches = [to_device(b, self.device) for b in mine.batches]
        self.sizes, self.n = list(mine.sizes), spec.samples.n
        self.eval_mode = spec.eval_mode

    def _pair(self, i: int) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        """This rank's slices of tensor ``i`` of both directions (the centre tensor gathered: a collective,
        every rank calls it for the same tensors in the same order)."""
        p = self.params[i]
        whole = _full(p)
        out = []
        local = self.local[i]
        for axis in (0, 1):
            d = self.recipe.tensor(i, axis, whole)
            out.append(None if d is None else _slice(d, p).to(local.device, direction_dtype(local.dtype)))
            del d  # the whole draw freed before the next is made: the centre's tensor and one draw at a time
        return out[0], out[1]

    def _directions(self) -> tuple[list[torch.Tensor | None], list[torch.Tensor | None]]:
        """This rank's slices of both directions, held (``memory="fast"``)."""
        pairs = [self._pair(i) for i in range(len(self.params))]
        return [v for v, _ in pairs], [w for _, w in pairs]

    def _reshard(self) -> None:
        """Every FSDP module's gathered tensors freed: FSDP keeps the root's gathered after a forward (for a
        backward), which the next point would read instead of gathering its moved shards."""
        for m in self._fsdp:
            m.reshard()

    def _set(self, a: float, b: float) -> None:
        self._reshard()
        with torch.no_grad():
            for i, (t, c) in enumerate(zip(self.local, self.centre)):
                if not self.lean:
                    dv, dw = self.v[i], self.w[i]
                elif a or b:  # drawn for this tensor only, freed before the next: one tensor held at a time
                    dv, dw = self._pair(i)
                else:
                    dv = dw = None
                t.copy_(point_value(c, dv if a else None, dw if b else None, a, b))

    def _loss(self) -> float:
        """The loss over all ranks' samples: the ranks' float64 sums added, then divided."""
        total = torch.zeros((), dtype=torch.float64)
        for batch, k in zip(self.batches, self.sizes):
            total += self.task(self.net, batch).detach().to("cpu", torch.float64) * k
        if td.get_backend() == "nccl":
            total = total.to(self.device)
        td.all_reduce(total)
        return float(total) / self.n

    def evaluate(self, points: np.ndarray, start: int = 0, progress: Any = None) -> dict[str, np.ndarray]:
        """The loss at ``points`` (every rank evaluates every point; all get the same values)."""
        del start  # eval mode only: no per-point seeds
        out = np.empty(len(points))
        modes = [(m, m.training) for m in self.net.modules()]
        self.net.train(not self.eval_mode)
        try:
            # no_grad, not inference_mode: FSDP2 over one rank reads the version counters of the tensors it
            # gathers, which inference tensors do not have
            with torch.no_grad():
                for i, (a, b) in enumerate(points):
                    self._set(float(a), float(b))
                    out[i] = self._loss()
                    if progress is not None:
                        progress(1)
        finally:
            self._reshard()
            with torch.no_grad():
                for t, c in zip(self.local, self.centre):
                    t.copy_(c)
            for m, training in modes:
                m.training = training
        return {"loss": out}
