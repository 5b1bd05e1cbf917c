"""The evaluation engine (private): the loss at many points of one plane.

The centre's state is loaded once; per point the moved parameters are set in place
from the centre and the two directions with ``torch._foreach`` ops under
``torch.inference_mode``. When one point is little work, ``points_per_call`` points are
evaluated in one call: their parameters built by one small matrix product, then a direct
batched forward for plain stacks of layers (``_batched``) or ``torch.func.functional_call``
+ ``torch.vmap`` for any other network. Losses stay on the device and are read back once
per chunk, not once per point (a sync and a Python float each). Every point's
arithmetic depends only on its coordinates and the plan (``points_per_call``,
``eval_batch``), never on how points are split between chunks or workers: groups of
points are aligned globally and the last group is padded to full size.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.func import functional_call, vmap

from landscape.engine._batched import batched_loss, sequential_forward

__all__ = ["Engine", "EngineSpec", "plan", "activation_elements"]
_log = logging.getLogger("landscape")

#: Multiply-adds per call above which one point per call is enough.
TARGET_WORK = 1 << 26
#: Bytes the batched parameters and activations of one call may use.
MEMORY_BUDGET = 1 << 30
MAX_POINTS_PER_CALL = 64


def _mean_loss(val: torch.Tensor, n: int, loss_fn: Any) -> torch.Tensor:
    """Mean over samples whatever the loss's reduction ('mean', 'sum' or 'none')."""
    if val.dim() == 0:
        if getattr(loss_fn, "reduction", None) == "sum":
            return val / n
        return val
    return val.float().mean()


def _metric_value(metric: Any, out: torch.Tensor, labels: torch.Tensor) -> float:
    if hasattr(metric, "update") and hasattr(metric, "eval"):
        if hasattr(metric, "clear"):
            metric.clear()
        metric.update(out, labels)
        return float(metric.eval())
    val = metric(out, labels)
    return float(val.item() if isinstance(val, torch.Tensor) else val)


def activation_elements(network: nn.Module, sample: torch.Tensor) -> int:
    """Elements of all leaf-module outputs for one sample (measured on two samples)."""
    total = [0]

    def hook(_m: nn.Module, _i: Any, out: Any) -> None:
        if isinstance(out, torch.Tensor):
            total[0] += out.numel()

    handles = [m.register_forward_hook(hook) for m in network.modules() if not list(m.children())]
    try:
        with torch.inference_mode():
            network(sample)
    finally:
        for h in handles:
            h.remove()
    return max(1, total[0] // max(1, sample.shape[0]))


def plan(n_params: int, n_samples: int, act_per_sample: int, *, eval_mode: bool,
         vmappable: bool) -> tuple[int, int]:
    """``(points_per_call, eval_batch)`` from the work per point and the memory budget.

    Deterministic: it depends only on the model's sizes and ``n_samples``, never on the
    device or the number of workers.
    """
    work = n_samples * max(n_params, act_per_sample)
    p = 1
    if eval_mode and vmappable:
        p = int(min(MAX_POINTS_PER_CALL, max(1, TARGET_WORK // max(1, work))))
        p = 1 << (p.bit_length() - 1)  # power of two
        while p > 1 and 4 * p * (n_params + n_samples * act_per_sample) > MEMORY_BUDGET:
            p //= 2
    eval_batch = n_samples
    while eval_batch > 1 and 4 * p * eval_batch * act_per_sample > MEMORY_BUDGET:
        eval_batch = (eval_batch + 1) // 2
    return p, eval_batch


@dataclass
class EngineSpec:
    """Everything an :class:`Engine` needs, the same on every device: what travels to workers.

    Attributes
    ----------
    network : nn.Module
        The architecture (copied by each engine; the caller's module is never modified).
    loss_fn : callable
        ``loss_fn(outputs, labels)``.
    metrics : dict of str to metric
        Extra values per point.
    inputs, labels : Tensor
        The samples (CPU), moved to the engine's device once.
    names : list of str
        The moved parameters, aligned with ``v`` and ``w``.
    centre : dict
        Full state dict of the centre.
    v, w : list of Tensor
        The two directions (float32, like ``names``).
    eval_mode : bool
    points_per_call, eval_batch : int
        The plan (see :func:`plan`): points per forward call and samples per batch.
    seed : int
        Seeds train-mode randomness per point (dropout) when ``eval_mode`` is False.
    """

    network: nn.Module
    loss_fn: Any
    metrics: Mapping[str, Any]
    inputs: torch.Tensor
    labels: torch.Tensor
    names: Sequence[str]
    centre: Mapping[str, torch.Tensor]
    v: Sequence[torch.Tensor]
    w: Sequence[torch.Tensor]
    eval_mode: bool = True
    points_per_call: int = 1
    eval_batch: int | None = None
    seed: int = 0


class Engine:
    """Evaluate the loss (and metrics) at points ``centre + a*v + b*w`` on one device.

    Parameters
    ----------
    spec : EngineSpec
        The network, loss, data, centre, directions and plan.
    device : str or torch.device, default="cpu"
    """

    def __init__(self, spec: EngineSpec, device: str | torch.device = "cpu") -> None:
        network, loss_fn, metrics = spec.network, spec.loss_fn, spec.metrics
        inputs, labels, names, centre, v, w = spec.inputs, spec.labels, spec.names, spec.centre, spec.v, spec.w
        eval_mode, points_per_call, eval_batch, seed = spec.eval_mode, spec.points_per_call, spec.eval_batch, spec.seed
        self.device = torch.device(device)
        net = copy.deepcopy(network)
        net.load_state_dict(centre)
        net.to(self.device)
        net.train(not eval_mode)
        for p in net.parameters():
            p.requires_grad_(False)
        self.net, self.loss_fn, self.metrics = net, loss_fn, dict(metrics or {})
        self.eval_mode, self.seed = eval_mode, int(seed)
        self.inputs, self.labels = inputs.to(self.device), labels.to(self.device)
        self.n = int(self.inputs.shape[0])
        self.eval_batch = int(eval_batch or self.n)
        self.p = int(points_per_call) if eval_mode else 1
        named = dict(net.named_parameters())
        self.names = list(names)
        self.params: list[torch.Tensor] = [named[k] for k in self.names]
        self.c = [t.detach().clone() for t in self.params]
        self.v = [t.to(self.device, torch.float32) for t in v]
        self.w = [t.to(self.device, torch.float32) for t in w]
        self.buffers = list(net.buffers())
        self.buffers0 = [b.detach().clone() for b in self.buffers]
        self._row_b: float | None = None
        self._row: list[torch.Tensor] | tuple[torch.Tensor, ...] = []
        self._batched: Any = None
        self._basis: torch.Tensor | None = None

    # -- one point, in place --------------------------------------------------------
    def _set_point(self, a: float, b: float) -> None:
        if self._row_b != b:
            self._row = torch._foreach_add(self.c, self.w, alpha=b) if self.c else []
            self._row_b = b
        if self.params:
            torch._foreach_copy_(self.params, self._row)
            torch._foreach_add_(self.params, self.v, alpha=a)

    def _forward_point(self, index: int) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """The loss as a 0-d tensor, left on the device: reading it back (a sync and a
        Python float per point) is done once per chunk by ``evaluate``."""
        total: Any = None
        outs = []
        for s in range(0, self.n, self.eval_batch):
            x, y = self.inputs[s:s + self.eval_batch], self.labels[s:s + self.eval_batch]
            if not self.eval_mode:
                torch.manual_seed(self.seed + 7919 * index + s)
            out = self.net(x)
            loss = _mean_loss(self.loss_fn(out, y), x.shape[0], self.loss_fn)
            if self.eval_batch >= self.n:  # one batch: its mean is the loss
                total = loss
            else:
                part = loss.double() * x.shape[0]
                total = part if total is None else total + part
            if self.metrics:
                outs.append(out)
            if not self.eval_mode and self.buffers:
                torch._foreach_copy_(self.buffers, self.buffers0)
        if self.eval_batch < self.n:
            total = total / self.n
        return total, outs

    # -- several points per call --------------------------------------------------
    def _vmapped(self) -> Any:
        if self._batched is None:
            net, names, loss_fn, keep = self.net, self.names, self.loss_fn, bool(self.metrics)
            fwd = sequential_forward(net, names, self.eval_mode, (self.c, self.v, self.w))
            if fwd is not None:  # plain stack of layers: baddbmm per layer, vmap only the loss
                loss_b = batched_loss(loss_fn, _mean_loss)

                def direct(params: tuple, x: torch.Tensor, y: torch.Tensor, coef: torch.Tensor) -> Any:
                    out = fwd(params, x, coef)
                    return (loss_b(out, y), out) if keep else (loss_b(out, y),)

                self._batched = direct
                return direct
            def one(params: tuple, x: torch.Tensor, y: torch.Tensor) -> Any:
                out = functional_call(net, dict(zip(names, params)), (x,))
                loss = _mean_loss(loss_fn(out, y), x.shape[0], loss_fn)
                return (loss, out) if keep else (loss,)

            mapped = vmap(one, in_dims=(0, None, None))
            self._batched = lambda params, x, y, coef: mapped(params, x, y)
        return self._batched

    def _forward_group(self, a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, list]:
        p = a.shape[0]
        if self._basis is None:  # rows: centre, v, w, all moved parameters flattened
            self._basis = torch.stack([torch.cat([t.reshape(-1) for t in ts]) if ts
                                       else torch.zeros(0, device=self.device) for ts in (self.c, self.v, self.w)])
        # every point's parameters in one (p, 3) @ (3, P) product instead of 3 ops per tensor
        coef = torch.stack([torch.ones_like(a), a, b], dim=1)
        flat = coef @ self._basis
        params, o = [], 0
        for c in self.c:
            params.append(flat[:, o:o + c.numel()].view(p, *c.shape))
            o += c.numel()
        fn = self._vmapped()
        total: Any = None
        outs = []
        for s in range(0, self.n, self.eval_batch):
            x, y = self.inputs[s:s + self.eval_batch], self.labels[s:s + self.eval_batch]
            res = fn(tuple(params), x, y, coef)
            if self.eval_batch >= self.n:  # one batch: its mean is the loss
                total = res[0]
            else:
                part = res[0].double() * x.shape[0]
                total = part if total is None else total + part
            if self.metrics:
                outs.append(res[1])
        if self.eval_batch < self.n:
            total = total / self.n
        return total, outs

    # -- public -------------------------------------------------------------------
    def evaluate(self, points: np.ndarray, start: int = 0) -> dict[str, np.ndarray]:
        """Loss (and metrics) at ``points`` (array (m, 2) of (a, b)); ``start`` = global index."""
        m = len(points)
        res = {"loss": np.empty(m)}
        for name in self.metrics:
            res[name] = np.empty(m)
        with torch.inference_mode():
            if self.p == 1:
                losses = []
                for i, (a, b) in enumerate(points):
                    self._set_point(float(a), float(b))
                    loss, outs = self._forward_point(start + i)
                    losses.append(loss)
                    if outs:
                        self._metrics_into(res, i, torch.cat(outs))
                if losses:
                    res["loss"][:] = torch.stack(losses).double().cpu().numpy()
            else:
                for g in range(0, m, self.p):
                    grp = np.asarray(points[g:g + self.p], dtype=np.float32)
                    k = len(grp)
                    if k < self.p:  # pad so every call has the same shapes
                        grp = np.concatenate([grp, np.repeat(grp[-1:], self.p - k, axis=0)])
                    a = torch.from_numpy(np.ascontiguousarray(grp[:, 0])).to(self.device)
                    b = torch.from_numpy(np.ascontiguousarray(grp[:, 1])).to(self.device)
                    loss, outs = self._forward_group(a, b)
                    res["loss"][g:g + k] = loss[:k].cpu().numpy()
                    if outs:
                        full = torch.cat(outs, dim=1)
                        for i in range(k):
                            self._metrics_into(res, g + i, full[i])
        return res

    def _metrics_into(self, res: dict, i: int, out: torch.Tensor) -> None:
        for name, metric in self.metrics.items():
            res[name][i] = _metric_value(metric, out, self.labels)
