"""The evaluation engine (private): the loss at many points of one plane.

The engine's network is the caller's modules over the centre's tensors (nothing copied,
:mod:`._placement`); at each point every moved tensor is computed when a module reads it
(:mod:`._points`: ``(c + b·w) + a·v``, rounded once to the tensor's dtype), under
``torch.inference_mode``, and the task (:mod:`landscape.tasks`) computes the loss over the
evaluation batches. When one point is little work, ``points_per_call`` points
are evaluated in one call: their parameters built by one small matrix product, then a
way of the plan's (:mod:`landscape.engine._batching`: a direct batched forward for plain
stacks of layers, the points folded into the batch, or ``torch.vmap``). Losses stay on the
device and are read back once per chunk, not once per point (a sync and a Python float
each). Every point's arithmetic depends only on its coordinates and the plan
(``points_per_call``, the evaluation batches), never on how points are split between
chunks or workers: groups of points are aligned globally and the last group is padded
to full size.

Samples that fit the device go there once; others (``stream``) stay in host memory,
pinned when the device is CUDA, and one batch at a time is copied for each point.

Point metrics (``metric.metric_inputs == "point"``, e.g. the Hessian's eigen-ratio of
:mod:`landscape.curvature`) need autograd, so they run apart from the loss: after a
chunk's losses are computed as above (the same calls, so losses and speed do not change),
each point's parameters are set in place again, outside ``torch.inference_mode``, and the
metric is called once per point as ``metric(model, task, samples, names) -> float`` with
the network at that point (parameters not requiring grad), the task, the evaluation
``Samples`` (on the device, or in pinned host memory when streamed) and the moved
parameters' names. Its cost is its own; a progress bar counts the points.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from landscape.engine._batching import WAYS, inapplicable
from landscape.engine._data import Samples
from landscape.engine._fuse import fuse_conv_bn
from landscape.engine._heap import Room
from landscape.engine._placement import input_device, keeps_placement, network_at
from landscape.engine._points import Points, point_value
from landscape.engine._progress import Bar
from landscape.geometry import SeededDirections
from landscape.tasks import Supervised, slice_batch, to_device

__all__ = ["Engine", "EngineSpec", "reestimate_bn_statistics", "group_size", "is_batch_metric", "is_point_metric",
           "MEMORY_FORMATS", "Progress",
           "CLAMPED", "WayRefused", "disagreement", "AGREE_RTOL"]

#: The key of :meth:`Engine.evaluate`'s result that counts, at each point, the batch-norm running-variance
#: channels clamped at zero (``bn_statistics="clamped"``): not a metric, the landscape's ``clamped``.
CLAMPED = "bn_clamped_channels"
_log = logging.getLogger("landscape")

#: ``progress(k)``: k more points of a chunk evaluated (a progress bar's update).
Progress = Callable[[int], None]
#: Part of a CUDA device's memory the samples may take before they are streamed from the host.
DEVICE_DATA_SHARE = 0.25


def _device_share(device: torch.device) -> float:
    if device.type != "cuda":
        return float("inf")
    return DEVICE_DATA_SHARE * torch.cuda.get_device_properties(device).total_memory


def is_batch_metric(metric: Any) -> bool:
    """A metric called as ``metric(model, batch)`` (``metric_inputs == "batch"``), like a task;
    others are called on ``(outputs, targets)`` and need a :class:`Supervised` task."""
    return getattr(metric, "metric_inputs", None) == "batch"


def is_point_metric(metric: Any) -> bool:
    """A metric called once per point as ``metric(model, task, samples, names)``, outside
    inference mode (``metric_inputs == "point"``; see the module docstring)."""
    return getattr(metric, "metric_inputs", None) == "point"


def _metric_value(metric: Any, out: torch.Tensor, labels: torch.Tensor) -> float:
    if hasattr(metric, "update") and hasattr(metric, "eval"):
        if hasattr(metric, "clear"):
            metric.clear()
        metric.update(out, labels)
        return float(metric.eval())
    val = metric(out, labels)
    return float(val.item() if isinstance(val, torch.Tensor) else val)


def reestimate_bn_statistics(net: nn.Module, bns: Sequence[Any], task: Any, batch: Callable[[int], Any],
                             sizes: Sequence[int]) -> None:
    """Every batch-norm layer of ``bns`` (in ``net``) with its running statistics estimated again, in
    train mode: the average over the batches (``batch(i)``, of ``sizes[i]`` samples) of their batch
    statistics, each weighted by its samples (Garipov et al.'s ``bn_update``: momentum ``k / (seen + k)``
    for a batch of ``k`` after ``seen`` samples, so a short last batch counts for its samples, not as a
    whole one). The rest of ``net`` keeps its mode; each layer's momentum and mode are restored."""
    saved = [(m, m.momentum, m.training) for m in bns]
    try:
        for m in bns:
            m.reset_running_stats()
            m.train()
        seen = 0
        for i, k in enumerate(sizes):
            for m in bns:
                m.momentum = k / (seen + k)
            task(net, batch(i))
            seen += k
    finally:
        for m, momentum, training in saved:
            m.momentum = momentum
            m.train(training)


@dataclass
class EngineSpec:
    """Everything an :class:`Engine` needs, the same on every device: what travels to workers.

    Attributes
    ----------
    network : nn.Module
        The architecture: each engine copies its modules over the centre's tensors (no parameter is
        copied; the caller's module is never modified).
    task : callable
        ``task(model, batch) -> loss`` (:mod:`landscape.tasks`).
    metrics : dict of str to metric
        Extra values per point: ``metric(outputs, targets)`` (or objects with
        clear/update/eval) with a :class:`Supervised` task, batch metrics
        ``metric(model, batch)`` (``metric_inputs = "batch"``), or point metrics
        ``metric(model, task, samples, names)`` (``metric_inputs = "point"``).
    samples : Samples
        The evaluation batches (host memory), already cut as the plan says.
    names : list of str
        The moved parameters, aligned with ``v`` and ``w``.
    centre : dict
        Full state dict of the centre (the network's own tensors when it is the network's state).
    v, w : list of Tensor
        The two directions (float32, like ``names``); ``w`` empty: zero (a line); both empty when
        ``recipe`` gives them.
    eval_mode : bool
    points_per_call : int
        The plan (see :func:`plan`): points per forward call.
    batching : {"sequential", "folded", "vmap"} or None
        How a group of points runs (:data:`landscape.engine._batching.WAYS`); None takes the
        first that applies.
    memory_format : {"contiguous", "channels_last"}
        The layout of the network's 4-D parameters (convolution kernels) at one point per
        call: with channels-last kernels every convolution's output is channels-last too,
        which oneDNN (CPU) and cuDNN run faster for most CNNs (1.2-2x measured on ResNets
        and a MNIST CNN on a CPU). The values differ from the contiguous layout's by float
        rounding only; every point uses the same layout, so chunking never changes them.
    seed : int
        Seeds train-mode randomness per point (dropout) when ``eval_mode`` is False.
    bn_statistics : {"clamped", "affine", "a", "recompute"} or None
        On views through models, how batch-norm running statistics follow the point
        (:attr:`landscape.geometry.Geometry.bn_statistics`): moved with the parameters and
        the variances clamped at zero ("clamped"), moved as they are ("affine"), left as the
        centre's ("a"), or estimated again at every point from the samples ("recompute":
        each batch-norm layer's running mean and variance averaged over every evaluation
        batch in train mode, as Garipov et al.'s ``bn_update``; one point per call).
    bn_samples : Samples, optional
        The batches "recompute" estimates the statistics on (the training samples of a line
        evaluated on test samples); None: ``samples``.
    stream : bool or None
        Keep the samples in host memory and copy one batch at a time; None (default)
        decides per device: on a CUDA device when they take more than a quarter of its
        memory (:data:`DEVICE_DATA_SHARE`), never on the CPU. Either way every point
        sees the same batches, so the values do not depend on it.
    recipe : SeededDirections, optional
        Random directions as their recipe, drawn by the engine (``v`` and ``w`` are then empty).
    memory : {"fast", "lean"}
        Hold the directions (two model sizes, in the tensors' dtypes), or draw each tensor of a ``recipe``
        again whenever it is read (nothing held; one point per call). The values are the same.
    verify : bool
        Several points per call: check the way on the first group before its values are used
        (:meth:`Engine.evaluate`; :class:`WayRefused` when it does not give the one-point values).
        The planner's probe needs no engine of its own then (a landscape evaluated in one process).
    """

    network: nn.Module
    task: Any
    metrics: Mapping[str, Any]
    samples: Samples
    names: Sequence[str]
    centre: Mapping[str, torch.Tensor]
    v: Sequence[torch.Tensor]
    w: Sequence[torch.Tensor]
    eval_mode: bool = True
    points_per_call: int = 1
    seed: int = 0
    stream: bool | None = None
    batching: str | None = None
    memory_format: str = "contiguous"
    bn_statistics: str | None = None
    bn_samples: Samples | None = None
    recipe: SeededDirections | None = None
    memory: str = "fast"
    verify: bool = False


#: Relative agreement a batched way must reach with the one-point path (atol 1e-6) to be used.
AGREE_RTOL = 1e-4


def disagreement(got: np.ndarray, reference: np.ndarray, warned: Sequence[str] = (),
                 on: str = "a probe") -> str | None:
    """Why a batched way is not used (None: it is), given its losses ``got`` at points ``on`` what,
    the one-point ``reference`` there and what PyTorch warned while the way ran (e.g. vmap without
    a batching rule for an operator, which then runs point by point)."""
    if not np.allclose(got, reference, rtol=AGREE_RTOL, atol=1e-6, equal_nan=True):
        err = float(np.max(np.abs(got - reference) / np.maximum(np.abs(reference), 1e-12)))
        return f"it gives other values than one point per call on {on} (relative difference {err:.2g})"
    if warned:
        return f"PyTorch warns when it runs so: {warned[0].splitlines()[0]}"
    return None


class WayRefused(Exception):
    """The plan's way did not give the one-point values on an engine's first group (``verify``):
    raised before any of its values is used; ``way`` and ``reason`` say which and why."""

    def __init__(self, way: str, reason: str) -> None:
        super().__init__(f"batching {way!r} not used: {reason}")
        self.way, self.reason = way, reason


def group_size(spec: EngineSpec) -> int:
    """The points an engine of ``spec`` evaluates per call: the plan's in eval mode, one when
    batch statistics are used or recomputed at every point."""
    return int(spec.points_per_call) if spec.eval_mode and spec.bn_statistics != "recompute" else 1


#: The layouts :attr:`EngineSpec.memory_format` names.
MEMORY_FORMATS = {"contiguous": torch.contiguous_format, "channels_last": torch.channels_last}


class Engine:
    """Evaluate the loss (and metrics) at points ``centre + a*v + b*w`` on one device.

    Parameters
    ----------
    spec : EngineSpec
        The network, task, data, centre, directions and plan.
    device : str or torch.device, default="cpu"
    network : nn.Module, optional
        The engine's network when it is built already: :func:`network_at` of ``spec``'s network
        and centre on ``device``, in ``spec``'s mode and layout, nothing parametrized, fused or
        folded in it (the planner's probe lends its one-point engine's network, released, to
        the batched way it checks next). Default: built here.
    keep_draw : bool, default=True
        Whether a random draw of any size may be kept for the landscape's digests
        (:class:`~landscape.engine._points.Directions`' ``keep``); the planner's probe's engine says False.
    """

    def __init__(self, spec: EngineSpec, device: str | torch.device = "cpu", *,
                 network: nn.Module | None = None, keep_draw: bool = True) -> None:
        self.device = torch.device(device)
        as_is = keeps_placement(spec.network)  # a device_map model stays where it is
        if as_is:
            self.device = input_device(spec.network, self.device)
        # heap room for the calls' activations while this engine lives (caller's process): landscape/engine/_heap.py
        self._room = Room(self.device)
        net = network if network is not None else network_at(spec.network, spec.centre,
                                                             None if as_is else self.device)
        if spec.memory_format != "contiguous":
            net.to(memory_format=MEMORY_FORMATS[spec.memory_format])  # type: ignore[call-overload]  # accepted at run time
        net.train(not spec.eval_mode)
        self.net, self.task = net, spec.task
        metrics = dict(spec.metrics or {})
        self.batch_metrics = {k: m for k, m in metrics.items() if is_batch_metric(m)}
        self.point_metrics = {k: m for k, m in metrics.items() if is_point_metric(m)}
        self.metrics = {k: m for k, m in metrics.items() if not (is_batch_metric(m) or is_point_metric(m))}
        self.sup = spec.task if isinstance(spec.task, Supervised) else None
        if self.metrics and self.sup is None:
            raise ValueError(f"metrics {sorted(self.metrics)} take (outputs, targets), which only a Supervised task "
                             "gives; give metrics of the form metric(model, batch) with metric_inputs='batch'.")
        self.eval_mode, self.seed = spec.eval_mode, int(spec.seed)
        self.stream = self.device.type != "cpu" and (
            spec.stream if spec.stream is not None else spec.samples.nbytes > _device_share(self.device))
        samples = spec.samples.pinned() if self.stream else spec.samples.to(self.device)
        self.batches, self.sizes = list(samples.batches), list(samples.sizes)
        self.offsets = [int(sum(self.sizes[:i])) for i in range(len(self.sizes))]
        self.n = samples.n
        self.bn_statistics = spec.bn_statistics
        recompute = spec.bn_statistics == "recompute"
        self.p = group_size(spec)
        lean = spec.memory == "lean" and spec.recipe is not None
        if lean and self.p > 1:
            raise ValueError("memory='lean' evaluates one point per call (the batched ways need the directions "
                             f"held); the plan asks for {self.p}.")
        # moved tensors are parameters, and on an interpolation also floating-point buffers
        # (batch-norm statistics), so that its ends are the two models exactly
        self.names = list(spec.names)
        # running variances moved with the point, clamped at zero ("clamped"): past the models a
        # variance carried affinely can turn negative, and batch norm divides by its square root
        bns = [(n, m) for n, m in net.named_modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
        var_names = {f"{n}.running_var" if n else "running_var" for n, _ in bns}
        self.clamp_idx = [i for i, k in enumerate(self.names) if k in var_names] \
            if spec.bn_statistics == "clamped" else []
        #: the clamped channels are counted at every point (:data:`CLAMPED`), with or without batch norm
        self.count_clamps = spec.bn_statistics == "clamped"
        self._group_clamped: torch.Tensor | None = None
        self.points = Points(net, self.names, set(self.clamp_idx), spec.v, spec.w, spec.recipe, lean=lean,
                             source=[spec.centre[k] for k in self.names] if network is None else None,
                             keep_draw=keep_draw)
        self.params: list[torch.Tensor] = self.points.tensors
        self.c = self.points.centre
        self._vw: tuple[list[torch.Tensor], list[torch.Tensor]] | None = None
        # train mode writes running statistics: the buffers not moved are restored after each batch
        moved = {id(t) for t in self.params}
        self.buffers = [] if spec.eval_mode else [b for b in net.buffers() if id(b) not in moved]
        self.buffers0 = [b.detach().clone() for b in self.buffers]
        self.recompute_bns = [m for _, m in bns if m.track_running_stats] if recompute else []
        # the batches the statistics are estimated on: the evaluation's, or bn_samples (placed as they are)
        self._bn_batches, self._bn_sizes = self.batches, self.sizes
        if self.recompute_bns and spec.bn_samples is not None:
            bn = spec.bn_samples.pinned() if self.stream else spec.bn_samples.to(self.device)
            self._bn_batches, self._bn_sizes = list(bn.batches), list(bn.sizes)
        self._batched: Any = None
        self.batching = spec.batching
        self._verify = spec.verify and self.p > 1
        self.batching_used: str | None = None
        self._basis: torch.Tensor | None = None
        self._flat: torch.Tensor | None = None  # every point's moved parameters of a group (see _forward_group)
        self._group_idx: list[int] | None = None  # the moved parameters a group builds (None: all)
        self._group_t: frozenset[int] = frozenset()  # those among them built with their last two dims swapped
        self._targets: Any = None
        # one point per call in eval mode: convolution + batch norm pairs run as one convolution, its
        # kernels rebuilt from the moved parameters at every point (the loss only: metrics see the network)
        # (a batch norm's running statistics keep their values unless moved or estimated again at every point)
        self.fused = fuse_conv_bn(net, lambda bn: not recompute and id(bn.running_mean) not in moved
                                  and id(bn.running_var) not in moved) if spec.eval_mode and self.p == 1 else None
        self.run_net: Any = self.fused if self.fused is not None else net
        #: the modules a call runs (a probe watches them to name a failing layer)
        self.run_modules: nn.Module = self.fused.module if self.fused is not None else net

    def batch(self, i: int) -> Any:
        """Evaluation batch ``i``, on the device."""
        b = self.batches[i]
        return to_device(b, self.device, non_blocking=True) if self.stream else b

    def _all_targets(self) -> Any:
        """The targets of every batch, concatenated (for the (outputs, targets) metrics)."""
        if self._targets is None:
            assert self.sup is not None
            parts = [self.sup.split(self.batch(i))[1] for i in range(len(self.batches))]
            self._targets = parts[0] if len(parts) == 1 else torch.cat(parts)
        return self._targets

    @property
    def v(self) -> list[torch.Tensor]:
        """The first direction, held (what the batched ways build from)."""
        return self._directions()[0]

    @property
    def w(self) -> list[torch.Tensor]:
        """The second direction, held (zeros for a line)."""
        return self._directions()[1]

    def _directions(self) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        if self._vw is None:
            self._vw = self.points.dirs.lists()
        return self._vw

    # -- one point ----------------------------------------------------------------------
    def _set_point(self, a: float, b: float) -> None:
        self.points.set(a, b)
        if self.recompute_bns:
            self._recompute_statistics()
        if self.fused is not None:
            self.fused.refresh()

    def _probe_loss(self) -> float:
        """The loss on the first two samples at the point set (how :class:`Points` chooses its way)."""
        batch = slice_batch(self.batch(0), min(2, self.sizes[0]), size=self.sizes[0])
        with torch.inference_mode():
            if self.fused is not None:
                self.fused.refresh()
            if not self.eval_mode:
                torch.manual_seed(self.seed)
            loss = _as_float(self.task(self.run_net, batch))
            if self.buffers:
                torch._foreach_copy_(self.buffers, self.buffers0)
        return loss

    def _bn_batch(self, i: int) -> Any:
        b = self._bn_batches[i]
        return to_device(b, self.device, non_blocking=True) if self.stream else b

    def _recompute_statistics(self) -> None:
        reestimate_bn_statistics(self.net, self.recompute_bns, self.task, self._bn_batch, self._bn_sizes)

    def _clamped_at(self, a: float, b: float) -> int:
        """The running-variance channels negative at ``(a, b)`` before the clamp (what the point's clamp
        set to zero): formed as the point forms them (:func:`point_value`), so the count is the clamp's."""
        n = 0
        for i in self.clamp_idx:
            v, w = self.points.dirs.pair(i, bool(a), bool(b))
            n += int(point_value(self.c[i], v, w, a, b).lt(0).sum())
        return n

    def _point(self, a: float, b: float, index: int) -> tuple[torch.Tensor, list[Any], dict[str, float]]:
        """:meth:`_forward_point` at ``(a, b)`` (a failed point leaves train mode's buffers as they were)."""
        with torch.inference_mode():
            try:
                self._set_point(a, b)
                loss, outs, extra = self._forward_point(index)
                if self.count_clamps:
                    extra[CLAMPED] = float(self._clamped_at(a, b))
                return loss, outs, extra
            except Exception:
                if self.buffers:
                    torch._foreach_copy_(self.buffers, self.buffers0)
                raise

    def _forward_point(self, index: int) -> tuple[torch.Tensor, list[Any], dict[str, float]]:
        """The loss as a 0-d tensor, left on the device: reading it back (a sync and a
        Python float per point) is done once per chunk by ``evaluate``."""
        total: Any = None
        outs: list[Any] = []
        extra = dict.fromkeys(self.batch_metrics, 0.0)
        single = len(self.batches) == 1
        for i, k in enumerate(self.sizes):
            batch = self.batch(i)
            if not self.eval_mode:
                torch.manual_seed(self.seed + 7919 * index + self.offsets[i])
            if self.metrics:
                assert self.sup is not None
                x, y = self.sup.split(batch)
                out = self.sup.outputs(self.run_net, x)
                loss = self.sup.loss(out, y)
                outs.append(out)
            else:
                loss = self.task(self.run_net, batch)
            if not isinstance(loss, torch.Tensor) or loss.numel() != 1:
                raise _not_a_loss(loss)
            if single:  # one batch: its mean is the loss
                total = loss
            else:
                part = loss.double() * k
                total = part if total is None else total + part
            for name, metric in self.batch_metrics.items():
                extra[name] += _as_float(metric(self.net, batch)) * k
            if not self.eval_mode and self.buffers:
                torch._foreach_copy_(self.buffers, self.buffers0)
        if not single:
            total = total / self.n
        return total, outs, {k: v / self.n for k, v in extra.items()}

    # -- several points per call --------------------------------------------------
    def group_fn(self) -> Any:
        """``fn(params, batch, coef) -> (losses (p,), [outputs])`` for a group of points, built once:
        the plan's ``batching``, or the first way of :data:`~landscape.engine._batching.WAYS` that
        applies. A way that does not apply raises a ``ValueError`` saying why."""
        if self._batched is not None:
            return self._batched
        kinds = [self.batching] if self.batching is not None else list(WAYS)
        reasons = []
        for kind in kinds:
            way = WAYS[kind]
            why = way.unavailable(self)
            if why is None:
                fn, idx, self._group_t = way.build(self)
                self._batched, self._group_idx, self.batching_used = fn, idx, kind
                return fn
            reasons.append(f"{kind}: {why}")
        raise inapplicable(self.batching, reasons)

    def _forward_group(self, a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, list]:
        p = a.shape[0]
        fn = self.group_fn()
        idx = self._group_idx if self._group_idx is not None else range(len(self.c))
        swap = self._group_t
        if self._basis is None:  # rows: centre, v, w, the group's moved parameters flattened (in the way's layout)
            self._basis = torch.stack([torch.cat([(ts[i].t() if i in swap else ts[i]).reshape(-1) for i in idx])
                                       if len(idx) else torch.zeros(0, device=self.device)
                                       for ts in (self.c, self.v, self.w)])
        # every point's parameters in one (p, 3) @ (3, P) product instead of 3 ops per tensor, written into
        # the same memory at every group: made afresh, the product (4 MB for the digits MLP's 58 points) was
        # cut from a different place of the heap at each of a process's first groups, which faulted it in again
        coef = torch.stack([torch.ones_like(a), a, b], dim=1)
        if self._flat is None or self._flat.shape[0] != p:
            self._flat = torch.empty(p, self._basis.shape[1], dtype=self._basis.dtype, device=self._basis.device)
        flat = torch.mm(coef, self._basis, out=self._flat)
        params, o = [], 0
        clamp = set(self.clamp_idx)
        clamped = torch.zeros(p, dtype=torch.int64, device=flat.device) if self.count_clamps else None
        for i in idx:
            c = self.c[i]
            t = flat[:, o:o + c.numel()].view(p, *(c.shape[::-1] if i in swap else c.shape))
            if i in clamp:
                if clamped is not None:  # each point's channels the clamp sets to zero
                    clamped += t.reshape(p, -1).lt(0).sum(dim=1)
                t = t.clamp_min(0.0)
            params.append(t)
            o += c.numel()
        if clamped is not None and len(idx) < len(self.c):  # running variances the group reads unbuilt
            rest = [i for i in self.clamp_idx if i not in set(idx)]
            for j, (aj, bj) in enumerate(zip(a.tolist(), b.tolist())):
                for i in rest:
                    v, w = self.points.dirs.pair(i, bool(aj), bool(bj))
                    clamped[j] += int(point_value(self.c[i], v, w, aj, bj).lt(0).sum())
        self._group_clamped = clamped
        total: Any = None
        outs = []
        single = len(self.batches) == 1
        for i, k in enumerate(self.sizes):
            res = fn(tuple(params), self.batch(i), coef)
            if single:  # one batch: its mean is the loss
                total = res[0]
            else:
                part = res[0].double() * k
                total = part if total is None else total + part
            if self.metrics:
                outs.append(res[1])
        if not single:
            total = total / self.n
        return total, outs

    def _verified_group(self, a: torch.Tensor, b: torch.Tensor, points: np.ndarray,
                        start: int) -> tuple[torch.Tensor, list]:
        """The first group, checked as the planner's probe checks a way (:data:`AGREE_RTOL`, no
        warning from PyTorch while it runs), at its first and last points against the one-point path,
        run on this engine's network before the way is built (a way may fold it in place): a
        :class:`WayRefused` otherwise. Two one-point evaluations instead of a probe's two engines."""
        at = sorted({0, len(points) - 1})
        reference = np.empty(len(at))
        # each point's tensors the network's own while it runs (no buffers of the in-place form), then the centre
        form, self.points.form = self.points.form, None
        try:  # within evaluate's inference mode
            for j, i in enumerate(at):
                with self.points.materialized(float(points[i][0]), float(points[i][1])):
                    reference[j] = float(self._forward_point(start + i)[0])
        finally:
            self.points.form = form
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                loss, outs = self._forward_group(a, b)
            except Exception as exc:
                raise WayRefused(self.batching_used or str(self.batching), f"{type(exc).__name__}: {exc}") from exc
        why = disagreement(loss[at].double().cpu().numpy(), reference, [str(w.message) for w in caught],
                           "the landscape's first group")
        if why is not None:
            raise WayRefused(self.batching_used or str(self.batching), why)
        self._verify = False
        return loss, outs

    # -- public -------------------------------------------------------------------
    def evaluate(self, points: np.ndarray, start: int = 0, progress: Progress | None = None) -> dict[str, np.ndarray]:
        """Loss (and metrics) at ``points`` (array (m, 2) of (a, b)); ``start`` = global index;
        ``progress(k)`` is called as points are done (``k`` of them at a time)."""
        m = len(points)
        res = {"loss": np.empty(m)}
        for name in (*self.metrics, *self.batch_metrics, *self.point_metrics):
            res[name] = np.empty(m)
        if self.count_clamps:
            res[CLAMPED] = np.zeros(m)
        one_point = self.p == 1 or bool(self.batch_metrics)
        first = None
        if one_point and m:
            # the first point decides the way when every moved tensor is read through its attribute (no probe's
            # forward); a batch metric reads the network too, so its reads would not be the task's
            if not self.batch_metrics:
                first = self.points.first_point(lambda: self._point(float(points[0][0]), float(points[0][1]), start))
            if self.points.choose(self._probe_loss) != "jit":
                first = None  # computed on the parametrized network: not what "in place" gives
        self._room.watch()
        try:
            self._evaluate_into(res, points, start, progress, one_point, first)
        finally:
            self._room.keep()  # for the next evaluation of the process (landscape/engine/_heap.py)
        if self.point_metrics:
            self._point_metrics_into(res, points)
        return res

    def _evaluate_into(self, res: dict[str, np.ndarray], points: np.ndarray, start: int, progress: Progress | None,
                       one_point: bool, first: Any) -> None:
        """:meth:`evaluate`'s calls, their values written into ``res``."""
        m, room = len(points), self._room
        with torch.inference_mode():
            if one_point:
                # each point's loss copied into one buffer made before the calls, on the device (read back once):
                # kept one by one, the 0-d tensors were cut from the heap between the calls' activations, which
                # then no longer fitted in the room and were faulted in again at every call (GPT-2: 2,000-4,000
                # pages a point, 35 % of its time)
                losses = torch.empty(m, dtype=torch.float64, device=self.device)
                for i, (a, b) in enumerate(points):
                    loss, outs, extra = first if i == 0 and first is not None else \
                        self._point(float(a), float(b), start + i)
                    losses[i] = loss
                    del loss
                    if outs:
                        self._metrics_into(res, i, torch.cat(outs))
                    for name, value in extra.items():
                        res[name][i] = value
                    if progress is not None:
                        progress(1)
                    room.check()
                if m:
                    res["loss"][:] = losses.cpu().numpy()
            else:
                for g in range(0, m, self.p):
                    grp = np.asarray(points[g:g + self.p], dtype=np.float32)
                    k = len(grp)
                    if k < self.p:  # pad so every call has the same shapes
                        grp = np.concatenate([grp, np.repeat(grp[-1:], self.p - k, axis=0)])
                    a = torch.from_numpy(np.ascontiguousarray(grp[:, 0])).to(self.device)
                    b = torch.from_numpy(np.ascontiguousarray(grp[:, 1])).to(self.device)
                    if self._verify:
                        loss, outs = self._verified_group(a, b, grp[:k], start + g)
                    else:
                        loss, outs = self._forward_group(a, b)
                    res["loss"][g:g + k] = loss[:k].cpu().numpy()
                    if self._group_clamped is not None:
                        res[CLAMPED][g:g + k] = self._group_clamped[:k].cpu().numpy()
                    if progress is not None:
                        progress(k)
                    if outs:
                        full = torch.cat(outs, dim=1)
                        for i in range(k):
                            self._metrics_into(res, g + i, full[i])
                    room.check()

    def _point_metrics_into(self, res: dict, points: np.ndarray) -> None:
        """Point metrics, once per point, outside inference mode (they may need autograd), with the
        network's own tensors at the point."""
        samples = Samples(list(self.batches), list(self.sizes))
        for i, (a, b) in enumerate(Bar(points, desc="point metrics", unit="pt", leave=False, disable=None)):
            with self.points.materialized(float(a), float(b)):
                if self.recompute_bns:
                    with torch.no_grad():
                        self._recompute_statistics()
                for name, metric in self.point_metrics.items():
                    res[name][i] = _as_float(metric(self.net, self.task, samples, self.names))

    def _metrics_into(self, res: dict, i: int, out: torch.Tensor) -> None:
        targets = self._all_targets()
        for name, metric in self.metrics.items():
            res[name][i] = _metric_value(metric, out, targets)


def _not_a_loss(loss: Any) -> TypeError:
    """The error for a task whose result is not one number per batch."""
    got = f"a tensor of shape {tuple(loss.shape)}" if isinstance(loss, torch.Tensor) else \
        f"{type(loss).__name__} {loss!r:.60}"
    return TypeError(f"The task must return a batch's loss as a tensor of one element (its mean over the batch's "
                     f"samples). Got {got} instead. HINT: reduce it as training did (.mean()).")


def _as_float(value: Any) -> float:
    return float(value.item() if isinstance(value, torch.Tensor) else value)
