"""Curvature operators behind one interface: the Hessian, the generalised Gauss-Newton, the empirical Fisher (private).

:func:`make_operator` is the one way in. Whatever the curvature and the product, the object it
returns offers ``matvec(v) -> A v`` (flat vectors of ``dim`` values, linear and symmetric in
``v``, the same matrix at every call), ``dim``, ``dtype``, ``device``, ``names`` (the moved
parameters in the flat vectors' order), ``curvature``, ``product``, ``products`` (computed so
far), ``unflatten``/``flatten`` between flat vectors and ``{name: tensor}``, and ``loss()``.

The matrices are of the task's mean loss over the samples (batches weighted by their sizes)
with respect to the moved parameters ``theta``:

* ``"hessian"``: ``H = d^2 L / d theta^2`` (:class:`HessianOperator`);
* ``"ggn"``: ``G = sum_b w_b J_b^T H_b J_b``, ``J_b`` the Jacobian of the network's outputs
  (``task.outputs``), ``H_b`` the loss's Hessian in them (``task.loss``): positive
  semi-definite for a convex loss; it needs a task that separates outputs from loss
  (:class:`landscape.tasks.Supervised`, which a ``loss_fn`` becomes);
* ``"fisher"``: ``F = (1/N) sum_i g_i g_i^T`` over per-sample gradients (``torch.func.vmap``
  of ``grad``, ``chunk`` samples at a time, recomputed at every product).

Products (``product=``; None picks each curvature's fastest exact one): the Hessian's
``"reverse"``, ``"forward"`` or ``"finite_difference"``; the GGN's ``"forward"`` (``J v`` by
``jvp``), ``"reverse"`` (by a ``vjp`` of the backward pass) or ``"finite_difference"``
(forward passes, then one backward); the Fisher's ``"reverse"``. Finite differences need no
double backward (FSDP2-sharded models have none): :mod:`landscape.curvature._hvp`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import nn
from torch.func import grad, jvp, vjp, vmap

from collector.common import InstanceOf, Interval, InvalidParameterError, Options, check_param
from landscape.curvature._hvp import HessianOperator, PointOperator, shifted
from landscape.engine import Samples
from landscape.tasks import map_tensors, tensors_in

__all__ = ["make_operator", "check_curvature", "GGNOperator", "FisherOperator", "CURVATURES", "PRODUCTS",
           "CurvatureOperator", "FISHER_CHUNK_BYTES"]

#: The products each curvature offers, the default (None) first.
PRODUCTS = {"hessian": ("reverse", "forward", "finite_difference"),
            "ggn": ("forward", "reverse", "finite_difference"),
            "fisher": ("reverse",)}
CURVATURES = tuple(PRODUCTS)
#: Per-sample gradients held at a time by the Fisher's product (bytes): its ``chunk`` default.
FISHER_CHUNK_BYTES = 1 << 28

#: What :func:`make_operator` returns (every class offers the interface of the module docstring).
CurvatureOperator = PointOperator

_DTYPES = (torch.float32, torch.float64)


def _split_task(task: Any) -> bool:
    return all(callable(getattr(task, k, None)) for k in ("split", "outputs", "loss"))


class GGNOperator(PointOperator):
    """``G v = sum_b w_b J_b^T H_b J_b v``: the generalised Gauss-Newton (see the module docstring).

    Parameters
    ----------
    network, task, samples, names, dtype, device, seed
        As in :class:`~landscape.curvature._hvp.PointOperator`; ``task`` has ``split``,
        ``outputs`` and ``loss`` (:class:`landscape.tasks.Supervised`).
    product : {"forward", "reverse", "finite_difference"}, default="forward"
    """

    curvature = "ggn"

    def __init__(self, network: nn.Module, task: Any, samples: Samples, names: Sequence[str], *,
                 dtype: torch.dtype = torch.float32, device: str | torch.device | None = None, seed: int = 0,
                 product: str = "forward") -> None:
        super().__init__(network, task, samples, names, dtype=dtype, device=device, seed=seed)
        self.product = product
        # per batch: the outputs, the backward pass u -> J^T u, and u -> H_out u (the point is fixed)
        self._graphs: list[Any] = [None] * len(self.batches)

    def _outputs_fn(self, i: int, inputs: Any) -> Any:
        def f(p: dict[str, torch.Tensor]) -> Any:
            self._seeded(i)  # the same dropout masks in every pass
            return self.task.outputs(self.bound(p), inputs)
        return f

    def _graph(self, i: int, batch: Any, point: dict[str, torch.Tensor]) -> tuple[Any, Any, Any, Any]:
        if self._graphs[i] is None:
            inputs, targets = self.task.split(batch)
            f = self._outputs_fn(i, inputs)
            outputs, back = vjp(f, point)[:2]

            def loss_grad(o: Any) -> Any:
                return grad(lambda z: self.task.loss(z, targets))(o)

            hess_out = vjp(loss_grad, outputs)[1]  # the loss's Hessian on the outputs (symmetric)
            self._graphs[i] = (f, outputs, back, hess_out)
        return self._graphs[i]

    def _add_product(self, i: int, batch: Any, wt: float, point: dict[str, torch.Tensor],
                     tangent: dict[str, torch.Tensor], out: torch.Tensor) -> None:
        """``out += wt * J_i^T H_i J_i v`` for batch ``i``."""
        f, outputs, back, hess_out = self._graph(i, batch, point)
        if self.product == "forward":
            jv = jvp(f, (point,), (tangent,))[1]
        elif self.product == "reverse":  # J v = d/du <J^T u, v>: the vjp of the (linear) backward pass
            zero = torch.utils._pytree.tree_map(torch.zeros_like, outputs)
            jv = vjp(lambda u: back(u)[0], zero)[1](tangent)[0]
        else:
            eps = self.fd_step(tangent)
            if eps == 0.0:
                return
            with torch.no_grad():
                plus, minus = f(shifted(point, tangent, eps)), f(shifted(point, tangent, -eps))
            jv = torch.utils._pytree.tree_map(lambda a, b: (a - b) / (2 * eps), plus, minus)
        out.add_(self.flatten(back(hess_out(jv)[0])[0]), alpha=wt)


class FisherOperator(PointOperator):
    """``F v = (1/N) sum_i g_i (g_i . v)``: the empirical Fisher (see the module docstring).

    Parameters
    ----------
    network, task, samples, names, dtype, device, seed
        As in :class:`~landscape.curvature._hvp.PointOperator`.
    chunk : int, optional
        Samples whose gradients are computed (and held) at a time; default: as many as fit
        in :data:`FISHER_CHUNK_BYTES`.
    """

    curvature = "fisher"
    product = "reverse"

    def __init__(self, network: nn.Module, task: Any, samples: Samples, names: Sequence[str], *,
                 dtype: torch.dtype = torch.float32, device: str | torch.device | None = None, seed: int = 0,
                 chunk: int | None = None) -> None:
        super().__init__(network, task, samples, names, dtype=dtype, device=device, seed=seed)
        itemsize = torch.empty((), dtype=dtype).element_size()
        self.chunk = int(chunk) if chunk is not None else max(1, FISHER_CHUNK_BYTES // (self.dim * itemsize))
        self._leaves = [tensors_in(b) for b in self.batches]
        self._rows = [self._count(leaves) for leaves in self._leaves]
        self.samples = int(sum(self._rows))

    @staticmethod
    def _count(leaves: list[torch.Tensor]) -> int:
        first = next((t for t in leaves if t.dim() > 0), None)
        if first is None:
            raise InvalidParameterError("curvature='fisher' needs batches whose tensors have a first dimension of "
                                        "samples; this batch has no such tensor.")
        return int(first.shape[0])

    def _add_product(self, i: int, batch: Any, wt: float, point: dict[str, torch.Tensor],
                     tangent: dict[str, torch.Tensor], out: torch.Tensor) -> None:
        """``out += (1/N) sum_{samples s of batch i} g_s (g_s . v)`` (``wt`` unused: every sample weighs 1/N)."""
        leaves, rows = self._leaves[i], self._rows[i]
        per_row = [t.dim() > 0 and t.shape[0] == rows for t in leaves]

        def sample_loss(p: dict[str, torch.Tensor], *xs: torch.Tensor) -> torch.Tensor:
            parts, at = iter(xs), iter(range(len(leaves)))

            def put(t: torch.Tensor) -> torch.Tensor:
                return next(parts).unsqueeze(0) if per_row[next(at)] else t

            return self._loss(p, map_tensors(batch, put))  # a batch of one: that sample's loss

        per_sample = vmap(grad(sample_loss), in_dims=(None,) + (0,) * sum(per_row), randomness="different")
        acc = {k: torch.zeros_like(t) for k, t in point.items()}
        for a in range(0, rows, self.chunk):
            self._seeded(i)
            g = per_sample(point, *[t[a:a + self.chunk] for t, r in zip(leaves, per_row) if r])
            gv = sum(g[k].reshape(g[k].shape[0], -1) @ tangent[k].reshape(-1) for k in self.names)
            for k in self.names:
                acc[k] += (gv @ g[k].reshape(g[k].shape[0], -1)).view_as(acc[k])
        out.add_(self.flatten(acc), alpha=1.0 / self.samples)


def check_curvature(caller: str, curvature: Any, product: Any, task: Any = None) -> None:
    """``curvature``, ``product`` and, for the GGN, the task (unless None: not known yet): checked before any work."""
    check_param("curvature", curvature, [Options(CURVATURES)], caller=caller,
                hint="'hessian' the loss's second derivative, 'ggn' its Gauss-Newton part J^T H_out J, 'fisher' "
                     "the empirical Fisher (mean of per-sample gradient outer products).")
    check_param("product", product, [None, Options(PRODUCTS[curvature])], caller=caller,
                hint=f"curvature={curvature!r} takes products {list(PRODUCTS[curvature])} (None: "
                     f"{PRODUCTS[curvature][0]!r}).")
    if curvature == "ggn" and task is not None and not _split_task(task):
        raise InvalidParameterError(
            f"The 'curvature' parameter of {caller} is 'ggn', which needs a task that separates the network's "
            f"outputs from the loss (split, outputs and loss methods, as landscape.tasks.Supervised). Got the task "
            f"{task!r} instead. HINT: give loss_fn(outputs, labels), or task=Supervised(loss_fn, inputs=..., "
            "targets=...); 'hessian' and 'fisher' take any task.")


def make_operator(network: nn.Module, task: Any, samples: Samples, names: Sequence[str], *,
                  curvature: str = "hessian", product: str | None = None,
                  dtype: torch.dtype = torch.float32, device: str | torch.device | None = None, seed: int = 0,
                  chunk: int | None = None, caller: str = "make_operator") -> PointOperator:
    """A curvature operator of the task's loss at the network's current weights (see the module docstring).

    Parameters
    ----------
    network : nn.Module
        Used as it is (not copied, never modified): its parameters are the point, its
        ``training`` flag the mode.
    task : callable
        ``task(model, batch) -> loss``; for ``curvature="ggn"`` one with ``split``,
        ``outputs`` and ``loss`` (:class:`landscape.tasks.Supervised`).
    samples : Samples
        The batches and their weights (``landscape.engine.collect``).
    names : sequence of str
        The moved parameters: the operator's rows and columns, in this order.
    curvature : {"hessian", "ggn", "fisher"}, default="hessian"
    product : {"reverse", "forward", "finite_difference"} or None, default=None
        How products are taken (:data:`PRODUCTS` lists each curvature's; None: its first).
    dtype : torch.float32 or torch.float64, default=torch.float32
        Of the products (and the operator's constants and samples).
    device : str or torch.device, optional
        Default: the device of the network's first parameter.
    seed : int, default=0
        Seeds train-mode randomness (dropout), the same in every product.
    chunk : int, optional
        ``curvature="fisher"`` only: samples whose gradients are computed and held at a time
        (default: as many as fit in :data:`FISHER_CHUNK_BYTES`).
    caller : str, default="make_operator"
        Named in error messages (the public function that called this).

    Returns
    -------
    HessianOperator, GGNOperator or FisherOperator
        With ``matvec``, ``dim``, ``dtype``, ``device``, ``names``, ``curvature``,
        ``product``, ``products``, ``unflatten``, ``flatten`` and ``loss``.
    """
    check_curvature(caller, curvature, product, task)
    check_param("dtype", dtype, [Options(_DTYPES)], caller=caller)
    check_param("device", device, [None, str, InstanceOf(torch.device)], caller=caller)
    check_param("seed", seed, [Interval(int, 0, None)], caller=caller)
    check_param("chunk", chunk, [None, Interval(int, 1, None)], caller=caller)
    if chunk is not None and curvature != "fisher":
        raise InvalidParameterError(f"The 'chunk' parameter of {caller} applies to curvature='fisher' only. Got "
                                    f"chunk={chunk!r} with curvature={curvature!r}. HINT: leave it None.")
    kind = product if product is not None else PRODUCTS[curvature][0]
    kw: dict[str, Any] = dict(dtype=dtype, device=device, seed=seed)
    if curvature == "hessian":
        return HessianOperator(network, task, samples, names, product=kind, **kw)
    if curvature == "ggn":
        return GGNOperator(network, task, samples, names, product=kind, **kw)
    return FisherOperator(network, task, samples, names, chunk=chunk, **kw)
