"""A network sharded over the processes of a group with FSDP2: every rank, every point (private).

A model that does not fit one device is given as PyTorch's FSDP2 module
(``torch.distributed.fsdp.fully_shard`` over a device mesh, under ``torchrun``): each rank
holds a shard (``Shard(0)``) of every parameter. :class:`ShardedEngine` evaluates every point
on every rank, on that rank's share of the samples (contiguous, :meth:`Samples.share`):

* the shards are never written: they stay the centre. FSDP gathers each unit's tensors (the
  centre) before the unit's forward, and a forward pre-hook of the engine, run right after
  FSDP's, overwrites the gathered tensors with the point's -- ``(c + b·w) + a·v``
  (:func:`point_value`, element by element, so the same bits as one process forms) -- once per
  gather (a unit that FSDP keeps gathered, like the root, is not moved twice). What a rank holds
  beyond its shard is its share of the directions and the units FSDP has gathered;
* the directions: each tensor's random direction is drawn whole on the CPU from the recipe (the
  same bits as one process draws) and normalized against the whole centre tensor. With
  ``memory="fast"`` each rank keeps its slice of both (two shard sizes, in the shard's dtype),
  forms its own chunk of each gathered tensor in place, and the ranks' chunks are exchanged (one
  broadcast per rank, unit and dtype, after FSDP's own gather of the centre); with ``"lean"``
  each rank draws the whole tensor again at every point, one tensor at a time, against the
  gathered centre (no communication of its own);
* the loss: each rank's sample-weighted sum in float64, summed over the ranks
  (``all_reduce``) and divided by the number of samples. One process sums the same float64
  terms batch by batch, so the values agree to float rounding of the summation (about 1e-7
  relative), and bit for bit when the shares are whole batches of the same size.

A moved parameter that FSDP does not shard (a plain tensor, whole on every rank) is moved in
place with a copy of it kept as the centre, and written back after every chunk.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch
import torch.distributed as td
from torch import nn

from landscape.engine._points import _work_dtype, direction_dtype, point_value
from landscape.tasks import to_device

__all__ = ["ShardedEngine", "is_sharded"]


def is_sharded(network: nn.Module) -> bool:
    """Whether ``network`` is an FSDP2 module (``fully_shard``): evaluated by :class:`ShardedEngine`.

    Read from ``torch.distributed.fsdp`` only where a module has imported it (``fully_shard`` does): importing
    it here would cost every process its import (0.5 s here, seconds without compiled bytecode, with sympy's)."""
    fsdp = sys.modules.get("torch.distributed.fsdp")
    module_type = getattr(fsdp, "FSDPModule", None)
    return module_type is not None and isinstance(network, module_type)


def _is_dtensor(p: torch.Tensor) -> bool:
    return hasattr(p, "device_mesh") and hasattr(p, "_local_tensor")


def _local(p: torch.Tensor) -> torch.Tensor:
    """The part of ``p`` this rank holds (a DTensor's local shard; a plain tensor is whole everywhere)."""
    return p._local_tensor if _is_dtensor(p) else p.data  # type: ignore[attr-defined]


def _full(p: torch.Tensor) -> torch.Tensor:
    """The whole tensor (a DTensor gathered: a collective, every rank calls it in the same order).

    A tensor sharded on one dimension over a 1-D mesh (FSDP2's layouts) is gathered as the moved
    tensors' chunks are exchanged (:func:`_share_chunks`); another mesh (HSDP's two dimensions)
    through DTensor's ``full_tensor``."""
    if not _is_dtensor(p):
        return p.detach()
    local = _local(p)
    whole = torch.empty(p.shape, dtype=local.dtype, device=local.device)
    chunks = _shard_chunks(whole, p)
    if chunks is None:
        return p.full_tensor()  # type: ignore[attr-defined]
    chunks[3][chunks[2]].copy_(local)
    _share_chunks([chunks])
    return whole


def _slice(whole: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
    """This rank's slice of ``whole`` (shaped like ``p``), laid out as ``p`` is sharded (no communication)."""
    if not _is_dtensor(p):
        return whole
    from torch.distributed.tensor import distribute_tensor

    local = distribute_tensor(whole, p.device_mesh, p.placements,  # type: ignore[attr-defined]
                               src_data_rank=None).to_local()
    return local.clone() if local.untyped_storage().data_ptr() == whole.untyped_storage().data_ptr() else local


def _shard_chunks(t: torch.Tensor, p: torch.Tensor) -> tuple[Any, list[int], int, list[torch.Tensor]] | None:
    """For ``p`` sharded on one dimension over a 1-D mesh (FSDP2's ``Shard(0)``, or another dimension by its
    ``shard_placement_fn``): the group, the ranks in chunk order, this rank's place and ``t``'s (the whole
    tensor's) chunks of each rank along that dimension, as DTensor chunks it (views); None for another
    layout."""
    from torch.distributed.tensor import Shard

    mesh, placements = p.device_mesh, p.placements  # type: ignore[attr-defined]
    if p.dim() == 0 or mesh.ndim != 1 or len(placements) != 1 or not isinstance(placements[0], Shard):
        return None
    dim = placements[0].dim % p.dim()
    ranks, me = [int(r) for r in mesh.mesh.flatten().tolist()], mesh.get_local_rank()
    chunks = list(torch.chunk(t, len(ranks), dim=dim))
    chunks += [t.narrow(dim, 0, 0)] * (len(ranks) - len(chunks))  # torch.chunk gives fewer when rows are few
    if chunks[me].shape != _local(p).shape:
        return None
    return mesh.get_group(), ranks, me, chunks


def _share_chunks(moved: list[tuple[Any, list[int], int, list[torch.Tensor]]]) -> None:
    """Each rank's chunks of the tensors ``moved`` (written by that rank) copied into every rank's: per
    group and dtype, one broadcast from each rank of its chunks of all the tensors, packed (a buffer of one
    rank's share of them at a time)."""
    order: dict[tuple[int, torch.dtype], list[tuple[Any, list[int], int, list[torch.Tensor]]]] = {}
    for item in moved:
        order.setdefault((id(item[0]), item[3][0].dtype), []).append(item)
    for items in order.values():
        group, ranks, me = items[0][:3]
        for k, src in enumerate(ranks):
            parts = [chunks[k] for *_, chunks in items if chunks[k].numel()]
            if not parts:
                continue
            if k == me:
                buf = torch.cat([x.reshape(-1) for x in parts])
            else:
                buf = torch.empty(sum(x.numel() for x in parts), dtype=parts[0].dtype, device=parts[0].device)
            td.broadcast(buf, src=src, group=group)
            if k != me:
                for x, got in zip(parts, buf.split([x.numel() for x in parts])):
                    x.copy_(got.view(x.shape))
            del buf


def _move_into(t: torch.Tensor, c: torch.Tensor, v: torch.Tensor | None, w: torch.Tensor | None, a: float,
               b: float) -> None:
    """``t = point_value(c, v, w, a, b)``; in place, without a tensor of its own, where ``t`` holds ``c``'s
    values in a float dtype the point is computed in (the same roundings: one per term)."""
    if t.dtype == c.dtype == _work_dtype(c.dtype):
        if t is not c:
            t.copy_(c)
        if w is not None and b:
            t.add_(w, alpha=b)
        if v is not None and a:
            t.add_(v, alpha=a)
        return
    t.copy_(point_value(c, v, w, a, b))


def _owned(unit: nn.Module, units: set[int]) -> Iterator[tuple[nn.Module, str, torch.Tensor]]:
    """``(module, name, parameter)`` of every parameter registered in ``unit``'s modules, those of the
    FSDP units nested in it excepted (FSDP gathers them with their own unit)."""
    stack = [unit]
    while stack:
        m = stack.pop()
        for name, p in m._parameters.items():
            if p is not None:
                yield m, name, p
        stack.extend(c for c in m._modules.values() if c is not None and id(c) not in units)


class ShardedEngine:
    """Every point on this rank's share of the samples, with an FSDP2 network moved as FSDP gathers it.

    Parameters
    ----------
    spec : EngineSpec
        ``network`` is the FSDP2 module (the caller's; its shards are read, never written); random
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
        self.a = self.b = 0.0
        self._moved: set[int] = set()  # the units whose gathered tensors hold the current point
        from torch.distributed.fsdp import FSDPModule

        self._fsdp: list[Any] = [m for m in self.net.modules() if isinstance(m, FSDPModule)]
        # after a forward FSDP keeps the root's tensors gathered (for a backward) and registers them in
        # place of the shards: read the shards, never tensors whose storage FSDP frees at its next reshard
        self._reshard()
        params = dict(self.net.named_parameters())
        self.params = [params[k] for k in spec.names]
        self.local = [_local(p) for p in self.params]
        index = {id(p): i for i, p in enumerate(self.params)}
        # each sharded moved tensor with the unit that gathers it: a tensor registered in several units'
        # modules (tied) is FSDP's first unit's to claim it, and fully_shard is applied innermost first
        ids = {id(m) for m in self._fsdp}
        self._units: list[tuple[nn.Module, list[tuple[nn.Module, str, int]]]] = []
        claimed: set[int] = set()
        for unit in reversed(self._fsdp):
            entries = []
            for m, name, p in _owned(unit, ids):
                i = index.get(id(p))
                if i is not None and i not in claimed and _is_dtensor(p):
                    claimed.add(i)
                    entries.append((m, name, i))
            if entries:
                self._units.append((unit, entries))
        # moved tensors FSDP does not shard: moved in place, their centre kept
        self._plain = {i: self.local[i].detach().clone() for i in range(len(self.params)) if i not in claimed
                       and not _is_dtensor(self.params[i])}
        unmoved = [spec.names[i] for i in range(len(self.params)) if i not in claimed and i not in self._plain]
        if unmoved:
            raise ValueError(f"sharded parameters {unmoved[:3]} are not gathered by an FSDP unit's forward")
        self.v: list[torch.Tensor | None] = []
        self.w: list[torch.Tensor | None] = []
        if not self.lean:
            self.v, self.w = self._directions()
        mine = spec.samples.share(self.rank, self.world)
        self.batches = [to_device(b, self.device) for b in mine.batches]
        self.sizes, self.n = list(mine.sizes), spec.samples.n
        self.eval_mode = spec.eval_mode

    # -- directions ---------------------------------------------------------------------------
    def _draws(self, i: int, a: float, b: float, whole: torch.Tensor, like: torch.Tensor
               ) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        """Tensor ``i`` of ``v`` (where ``a``) and of ``w`` (where ``b``) drawn whole against the whole centre
        tensor, together (the centre's norms once, their blocks on threads), on ``like``'s device in
        :func:`direction_dtype` of its dtype (None: not asked, or zero)."""
        dv, dw = self.recipe.pair(i, whole, bool(a), bool(b))
        dtype = direction_dtype(like.dtype)
        return None if dv is None else dv.to(like.device, dtype), None if dw is None else dw.to(like.device, dtype)

    def _directions(self) -> tuple[list[torch.Tensor | None], list[torch.Tensor | None]]:
        """This rank's slices of both directions, held (``memory="fast"``). Each centre tensor is gathered
        (a collective, every rank calls it for the same tensors in the same order), each draw made whole
        and freed before the next: the centre's tensor and one draw at a time."""
        v: list[torch.Tensor | None] = []
        w: list[torch.Tensor | None] = []
        for i, p in enumerate(self.params):
            whole = _full(p)
            for axis, out in ((0, v), (1, w)):
                d = self.recipe.tensor(i, axis, whole)
                out.append(None if d is None else
                           _slice(d, p).to(self.local[i].device, direction_dtype(self.local[i].dtype)))
                del d
            del whole
        return v, w

    # -- moving the gathered tensors ----------------------------------------------------------
    def _move_lean(self, i: int, t: torch.Tensor) -> None:
        """Make ``t``, moved tensor ``i`` as FSDP gathered it (the centre, whole), the current point's: both
        directions drawn whole against the whole centre in the shards' dtype (FSDP may have gathered it
        cast), one tensor at a time."""
        a, b, local = self.a, self.b, self.local[i]
        whole = t if t.dtype == local.dtype else _full(self.params[i])
        dv, dw = self._draws(i, a, b, whole, local)
        _move_into(t, whole, dv, dw, a, b)

    def _move_fast(self, gathered: list[tuple[torch.Tensor, int]]) -> None:
        """Make the tensors FSDP gathered for a unit the current point's: this rank forms its chunk from its
        shard and held direction slices (the same elements as the whole point), in place, and the ranks'
        chunks are exchanged; a tensor over another mesh (HSDP) is formed on the shards and gathered whole
        by DTensor."""
        a, b = self.a, self.b
        shared = []
        for t, i in gathered:
            p, local, v, w = self.params[i], self.local[i], self.v[i], self.w[i]
            chunks = _shard_chunks(t, p)
            if chunks is None:
                from torch.distributed.tensor import DTensor

                mesh, placements = p.device_mesh, p.placements
                whole = DTensor.from_local(point_value(local, v, w, a, b), mesh, placements, run_check=False,
                                           shape=p.shape, stride=p.stride()).full_tensor()
                t.copy_(whole)
                del whole
                continue
            mine = chunks[3][chunks[2]]
            _move_into(mine, mine if mine.dtype == local.dtype else local, v, w, a, b)
            shared.append(chunks)
        _share_chunks(shared)

    def _pre_forward(self, unit: nn.Module, entries: list[tuple[nn.Module, str, int]]) -> None:
        if id(unit) in self._moved:  # gathered and moved already (FSDP kept it gathered)
            return
        if self.a or self.b:
            gathered: list[tuple[torch.Tensor, int]] = []
            for m, name, i in entries:
                param = m._parameters[name]
                if param is None or _is_dtensor(param):
                    raise RuntimeError(f"FSDP did not gather {type(m).__name__}.{name} before its unit's forward")
                gathered.append((param.detach(), i))
            with torch.no_grad():
                if self.lean:
                    for t, i in gathered:
                        self._move_lean(i, t)
                else:
                    self._move_fast(gathered)
        self._moved.add(id(unit))

    def _post_forward(self, unit: nn.Module, entries: list[tuple[nn.Module, str, int]]) -> None:
        m, name, _ = entries[0]
        if _is_dtensor(m._parameters[name]):  # type: ignore[arg-type]  # resharded: the next gather is the centre
            self._moved.discard(id(unit))

    def _hooks(self) -> list[Any]:
        """The engine's hooks on every unit, after FSDP's own (FSDP's pre-forward hook is prepended)."""
        handles = []
        for unit, entries in self._units:
            handles.append(unit.register_forward_pre_hook(
                lambda mod, _args, e=entries: self._pre_forward(mod, e)))
            handles.append(unit.register_forward_hook(
                lambda mod, _args, _out, e=entries: self._post_forward(mod, e)))
        return handles

    def _reshard(self) -> None:
        """Every FSDP unit's gathered tensors freed (FSDP keeps the root's gathered after a forward, for a
        backward): the next forward gathers the centre again."""
        for m in self._fsdp:
            m.reshard()
        self._moved.clear()

    def _set(self, a: float, b: float) -> None:
        self._reshard()
        self.a, self.b = a, b
        with torch.no_grad():
            for i, c in self._plain.items():
                whole = c
                dv, dw = self._draws(i, a, b, whole, c) if self.lean else \
                    (self.v[i] if a else None, self.w[i] if b else None)
                self.local[i].copy_(point_value(c, dv, dw, a, b))

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
        handles = self._hooks()
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
            for h in handles:
                h.remove()
            self._reshard()
            self.a = self.b = 0.0
            with torch.no_grad():
                for i, c in self._plain.items():
                    self.local[i].copy_(c)
            for m, training in modes:
                m.training = training
        return {"loss": out}
