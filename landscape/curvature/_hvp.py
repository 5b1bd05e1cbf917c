"""Hessian-vector products of the loss over the evaluation samples (private).

The loss is the task's (``task(model, batch) -> loss``, :mod:`landscape.tasks`) over exactly
the samples the landscape uses, batches weighted by their sizes; the Hessian is taken with
respect to the moved parameters only. Products are linear in the batches, ``H v = sum_i (k_i
/ n) H_i v``, and come three ways (``product=``):

* ``"reverse"``: ``vjp`` of ``torch.func.grad`` through ``functional_call``
  (reverse-over-reverse), each batch's gradient graph kept between products;
* ``"forward"``: ``jvp`` of ``grad`` (forward-over-reverse; nothing kept);
* ``"finite_difference"``: central differences of gradients, ``(g(theta + eps v) -
  g(theta - eps v)) / (2 eps)`` with ``eps = eps_mach^(1/3) (1 + ||theta||) / ||v||``, which
  balances truncation against rounding; first derivatives only, for models with no double
  backward (FSDP2-sharded ones). For smooth networks only: on a piecewise-linear one (ReLU,
  max-pooling) every usable step crosses kinks where the gradient jumps, and the differences
  mean nothing. Its accuracy against exact products is in docs/curvature.md.

Vectors are flat: the moved parameters' values concatenated in ``names`` order, in ``dtype``
(float32 by default: PyTorch's CPU convolutions have no fast float64 path).

Attention: ``scaled_dot_product_attention``'s fused kernels have no double backward, so every
product runs with the math kernel only (``torch.nn.attention.sdpa_kernel(SDPBackend.MATH)``
for the duration of the product, torch's setting restored after it): the same values to
rounding, with the attention matrix held in memory.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
from torch import nn
from torch.func import functional_call, grad, jvp, vjp, vmap

try:
    from torch.nn.attention import SDPBackend, sdpa_kernel

    _SDPA_KERNEL = True
except ImportError:  # torch < 2.3: the older switch of the same kernels
    _SDPA_KERNEL = False

from landscape.engine import Samples
from landscape.tasks import map_tensors

__all__ = ["HessianOperator", "PointOperator", "math_attention", "shifted"]
_log = logging.getLogger("landscape")


def math_attention() -> Any:
    """A context in which ``scaled_dot_product_attention`` runs its math kernel only (see the module docstring)."""
    if not _SDPA_KERNEL:
        return torch.backends.cuda.sdp_kernel(enable_flash=False, enable_math=True, enable_mem_efficient=False)
    return sdpa_kernel(SDPBackend.MATH)


def _has_attention(network: nn.Module) -> bool:
    return any(isinstance(m, nn.MultiheadAttention) or type(m).__name__.endswith("Attention")
               for m in network.modules())


class _Bound:
    """The network with given tensors: what the task calls in place of the module."""

    def __init__(self, net: nn.Module, tensors: dict[str, torch.Tensor]) -> None:
        self._net, self._tensors = net, tensors

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return functional_call(self._net, self._tensors, args, kwargs)

    def __getattr__(self, name: str) -> Any:  # model.config and the like: the module's own
        return getattr(self._net, name)


def _cast(batch: Any, device: torch.device, dtype: torch.dtype) -> Any:
    """The batch on ``device`` with its floating-point tensors in ``dtype`` (labels kept)."""
    return map_tensors(batch, lambda t: t.to(device, dtype) if t.is_floating_point() else t.to(device))


class PointOperator:
    """The loss at the network's current weights, over ``samples``: what every curvature operator shares.

    Parameters
    ----------
    network : nn.Module
        Used as it is (not copied, never modified): its current parameters are the point,
        its ``training`` flag the mode (eval for batch-norm running statistics and no dropout).
    task : callable
        ``task(model, batch) -> loss``.
    samples : Samples
        The batches and their weights (host or device memory; copied once to ``device``
        in ``dtype``).
    names : sequence of str
        The moved parameters: the operator's rows and columns, in this order.
    dtype : torch.dtype, default=torch.float32
    device : str or torch.device, optional
        Default: the device of the network's first parameter.
    seed : int, default=0
        In train mode, seeds each batch's randomness (dropout) identically for every
        product, so that the operator is one fixed matrix.

    Attributes
    ----------
    dim : int
        Number of moved values (the operator is ``dim x dim``).
    products : int
        Products computed so far.
    """

    curvature = ""
    product = ""

    def __init__(self, network: nn.Module, task: Any, samples: Samples, names: Sequence[str], *,
                 dtype: torch.dtype = torch.float32, device: str | torch.device | None = None,
                 seed: int = 0) -> None:
        params = dict(network.named_parameters())
        missing = [k for k in names if k not in params]
        if missing:
            raise ValueError(f"{type(self).__name__}: the network has no parameters {missing}.")
        first = next(iter(params.values()), None)
        self.device = torch.device(device) if device is not None else (
            first.device if first is not None else torch.device("cpu"))
        self.dtype, self.net, self.task = dtype, network, task
        self.names = list(names)
        self.training, self.seed = network.training, int(seed)

        def conv(t: torch.Tensor) -> torch.Tensor:
            t = t.detach().to(self.device)
            return t.to(dtype) if t.is_floating_point() else t

        moved = set(self.names)
        # every other parameter and every buffer is a constant of the loss, in dtype
        self.fixed = {k: conv(t) for k, t in network.named_parameters(remove_duplicate=False) if k not in moved}
        self.fixed.update({k: conv(t) for k, t in network.named_buffers(remove_duplicate=False)})
        self.point = [conv(params[k]) for k in self.names]
        self.shapes = [p.shape for p in self.point]
        self.sizes = [p.numel() for p in self.point]
        self.dim = int(sum(self.sizes))
        self.batches = [_cast(b, self.device, dtype) for b in samples.batches]
        self.weights = [k / samples.n for k in samples.sizes]
        self.offsets = [int(sum(samples.sizes[:i])) for i in range(len(samples.sizes))]
        self.products = 0
        self._tied = self._tied_names(network)
        if _has_attention(network):
            _log.info("Curvature products through attention: scaled_dot_product_attention runs its math "
                      "kernel (the fused kernels have no double backward).")

    @staticmethod
    def _tied_names(network: nn.Module) -> dict[str, str]:
        """Other names of shared parameters (tied embeddings): alias -> the first name."""
        first: dict[int, str] = {}
        alias: dict[str, str] = {}
        for k, p in network.named_parameters(remove_duplicate=False):
            if id(p) in first:
                alias[k] = first[id(p)]
            else:
                first[id(p)] = k
        return alias

    def unflatten(self, flat: torch.Tensor) -> dict[str, torch.Tensor]:
        """``flat`` as ``{name: tensor}`` views, shaped like the parameters."""
        return {k: t.view(s) for k, t, s in zip(self.names, torch.split(flat, self.sizes), self.shapes)}

    def flatten(self, tensors: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """``{name: tensor}`` as one flat vector in ``names`` order."""
        return torch.cat([tensors[k].reshape(-1) for k in self.names])

    def point_dict(self) -> dict[str, torch.Tensor]:
        """The point as ``{name: tensor}`` (the moved parameters, in ``dtype``)."""
        return dict(zip(self.names, self.point))

    def bound(self, moved: Mapping[str, torch.Tensor]) -> _Bound:
        """The network with the moved parameters replaced by ``moved`` (what a task calls)."""
        tensors = dict(self.fixed)
        tensors.update(moved)
        for alias, name in self._tied.items():  # a tied parameter moves under each of its names
            if name in moved:
                tensors[alias] = moved[name]
        return _Bound(self.net, tensors)

    def _loss(self, moved: Mapping[str, torch.Tensor], batch: Any) -> torch.Tensor:
        return self.task(self.bound(moved), batch)

    def _seeded(self, i: int) -> None:
        """In train mode, batch ``i``'s randomness (dropout masks) the same in every product."""
        if self.training:
            torch.manual_seed(self.seed + self.offsets[i])

    def matvec(self, v: torch.Tensor) -> torch.Tensor:
        """The product with a flat vector ``v`` (``dim`` values, any dtype and device): flat, in ``dtype``."""
        v = v.to(self.device, self.dtype)
        point = self.point_dict()
        tangent = self.unflatten(v)
        out = torch.zeros(self.dim, dtype=self.dtype, device=self.device)
        with math_attention():
            for i, (batch, wt) in enumerate(zip(self.batches, self.weights)):
                self._add_product(i, batch, wt, point, tangent, out)
        self.products += 1
        return out

    def _add_product(self, i: int, batch: Any, wt: float, point: dict[str, torch.Tensor],
                     tangent: dict[str, torch.Tensor], out: torch.Tensor) -> None:
        """``out += wt * A_i v`` for batch ``i``."""
        raise NotImplementedError

    def matmat(self, vs: torch.Tensor) -> torch.Tensor:
        """The products with the rows of ``vs`` (``(c, dim)``), as rows: ``c`` products (one at a
        time here; the reverse-mode Hessian takes them together)."""
        return torch.stack([self.matvec(v) for v in vs])

    def loss(self) -> float:
        """The mean loss at the point (a check of the set-up)."""
        point = self.point_dict()
        total = 0.0
        with torch.no_grad(), math_attention():  # the kernel of the products
            for i, (batch, wt) in enumerate(zip(self.batches, self.weights)):
                self._seeded(i)
                total += wt * float(self._loss(point, batch))
        return total

    def fd_step(self, v: Mapping[str, torch.Tensor]) -> float:
        """The central-difference step for the tangent ``v``: ``eps_mach^(1/3) (1 + ||theta||) / ||v||``."""
        if not hasattr(self, "_theta_norm"):
            self._theta_norm = math.sqrt(sum(float(torch.sum(p.double() ** 2)) for p in self.point))
        v_norm = math.sqrt(sum(float(torch.sum(t.double() ** 2)) for t in v.values()))
        rel = torch.finfo(self.dtype).eps ** (1 / 3)
        return rel * (1.0 + self._theta_norm) / v_norm if v_norm > 0 else 0.0


def shifted(point: Mapping[str, torch.Tensor], v: Mapping[str, torch.Tensor], eps: float) -> dict[str, torch.Tensor]:
    """``point + eps * v``, tensor by tensor."""
    return {k: p + eps * v[k] for k, p in point.items()}


class HessianOperator(PointOperator):
    """``H v`` for the mean loss over ``samples`` at the network's current weights.

    Parameters
    ----------
    network, task, samples, names, dtype, device, seed
        As in :class:`PointOperator` (float32 by default).
    product : {"reverse", "forward", "finite_difference"}, default="reverse"
        ``vjp`` of ``grad`` (reverse-over-reverse), ``jvp`` of ``grad``
        (forward-over-reverse), or central differences of gradients (first derivatives
        only; see the module docstring for the step and its error).
    cache : bool, default=True
        In reverse mode, keep each batch's gradient graph between products: the point is
        fixed, so every product after the first is one backward pass through it (about
        twice as fast on the digits MLP), at the memory of one forward-backward pass per
        batch held for the operator's life.

    Attributes
    ----------
    dim : int
        Number of moved values (the Hessian is ``dim x dim``).
    products : int
        Hessian-vector products computed so far.
    """

    curvature = "hessian"

    def __init__(self, network: nn.Module, task: Any, samples: Samples, names: Sequence[str], *,
                 dtype: torch.dtype = torch.float32, device: str | torch.device | None = None, seed: int = 0,
                 product: str = "reverse", cache: bool = True) -> None:
        super().__init__(network, task, samples, names, dtype=dtype, device=device, seed=seed)
        self.product = product
        self.cache = cache and product == "reverse"
        self._fns: list[Any] = [None] * len(self.batches)

    def matmat(self, vs: torch.Tensor) -> torch.Tensor:
        """The products with the rows of ``vs`` (``(c, dim)``), as rows: with the reverse product's
        kept graphs, the ``c`` backward passes through each batch's graph vectorized (``torch.func.vmap``:
        one pass over ``c`` tangents, ``c`` times a product's temporaries); else one at a time (and
        where vmap has no rule for an operation of the network)."""
        if not self.cache or getattr(self, "_no_vmap", False):
            return super().matmat(vs)
        if any(fn is None for fn in self._fns):  # the graphs, kept by a first product
            first = self.matvec(vs[0])
            rest = self.matmat(vs[1:]) if len(vs) > 1 else vs[:0].to(self.device, self.dtype)
            return torch.cat([first[None], rest])
        vs = vs.to(self.device, self.dtype)
        tangents = {k: t.reshape(len(vs), *s) for k, t, s in zip(self.names, torch.split(vs, self.sizes, dim=1),
                                                                  self.shapes)}
        out = torch.zeros((len(vs), self.dim), dtype=self.dtype, device=self.device)
        try:
            with math_attention():
                for fn, wt in zip(self._fns, self.weights):
                    hv = vmap(fn)(tangents)[0]
                    out.add_(torch.cat([hv[k].reshape(len(vs), -1) for k in self.names], dim=1), alpha=wt)
        except RuntimeError as exc:  # an operation without a batching rule: the products one by one
            _log.info("Curvature products: vmap over the kept graphs failed (%s); one product at a time.", exc)
            self._no_vmap = True
            return super().matmat(vs)
        self.products += len(vs)
        return out

    def _grad(self, batch: Any) -> Callable[[dict[str, torch.Tensor]], Any]:
        def g(p: dict[str, torch.Tensor]) -> Any:
            return grad(self._loss)(p, batch)
        return g

    def _add_product(self, i: int, batch: Any, wt: float, point: dict[str, torch.Tensor],
                     tangent: dict[str, torch.Tensor], out: torch.Tensor) -> None:
        """``out += wt * H_i v`` for batch ``i``."""
        g = self._grad(batch)
        if self.product == "finite_difference":
            eps = self.fd_step(tangent)
            if eps == 0.0:
                return
            self._seeded(i)
            plus = self.flatten(g(shifted(point, tangent, eps)))
            self._seeded(i)
            out.add_(plus.sub_(self.flatten(g(shifted(point, tangent, -eps)))), alpha=wt / (2 * eps))
            return
        fn = self._fns[i]
        if fn is None:
            self._seeded(i)
            if self.product == "forward":
                hv = jvp(g, (point,), (tangent,))[1]
            else:
                fn = vjp(g, point)[1]
                if self.cache:
                    self._fns[i] = fn
        if fn is not None:
            hv = fn(tangent)[0]
        out.add_(self.flatten(hv), alpha=wt)
