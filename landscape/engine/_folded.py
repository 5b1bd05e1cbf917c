"""Several points per call for ordinary ``nn.Module``s: points folded into the batch (private).

``torch.vmap`` over ``functional_call`` runs any network at several points at once, but
on the CPU it costs more than it saves: every Linear becomes a ``bmm`` plus a separate
broadcast add, every op runs on batched layouts, and the functional call's own overhead
is paid per op. Here the network's forward runs as the user wrote it, once per group of
``p`` points, on activations whose first dimension holds the ``p`` points' samples one
after the other (``(p * n, ...)``), and each parametric leaf module is replaced by a
version that applies each point's own weights to its part: ``baddbmm`` for Linear, one
grouped convolution for Conv, a per-point affine for the norms, a per-point gather for
Embedding.

The model's inputs are not copied ``p`` times: a tensor whose first dimension is the
batch's ``n`` is the same for every point, and a parametric layer that receives one
(normally the first) is linear in the point, ``x (c + a v + b w)ᵀ = x cᵀ + a x vᵀ +
b x wᵀ``: its three products with the fixed input are computed once per engine and each
call combines them with one ``(p, 3)`` product. Parameter-free code between layers
(activations, pooling, reshapes, residual sums) runs unchanged on the folded tensors.

What cannot be folded is refused when the copy is built (a parametric leaf of another
type, a parameter read by a parent's ``forward`` rather than through a leaf, batch norm
in train mode), and the engine checks the folded values against the one-point path
before using them, so an unusual forward (one that mixes samples, or that keeps a
point-independent tensor to add to a folded one) falls back instead of giving wrong
numbers.
"""

from __future__ import annotations

import copy as _copy
import logging
import math
from collections.abc import Collection, Mapping, Sequence
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

__all__ = ["FoldedNetwork", "fold_network", "foldable_leaves", "CACHE_BYTES"]

_log = logging.getLogger("landscape")

#: Bytes the cached products of the first layer may take (three per batch and layer); past
#: it a shared input is simply folded, and the layer costs p applications per call.
CACHE_BYTES = 256 << 20
#: Bytes the reused outputs of the folded products may take (:meth:`_Context.buffer`); past it
#: the products allocate their outputs as before.
BUFFER_BYTES = 64 << 20


class _Context:
    """What the folded leaves read during one call: the points' parameters and coefficients."""

    def __init__(self) -> None:
        self.p = 1
        self.n = 0
        self.params: dict[str, torch.Tensor] = {}  # moved parameter name -> (p, *shape)
        # the Linear weights among them given as (p, in, out), the layout a batched product reads fastest
        self.transposed: frozenset[str] = frozenset()
        self.coef: torch.Tensor | None = None  # (p, 3): rows (1, a, b)
        self.cache: dict[tuple, tuple[torch.Tensor, torch.Size]] = {}
        self.cache_bytes = 0
        self.reads: set[str] | None = None  # while not None, the moved parameters the leaves read
        # Outputs of the folded products kept from call to call (see :meth:`buffer`)
        self.reuse = False
        self.calls = 0  # products taken so far in this call of the network
        self.buffers: dict[int, torch.Tensor] = {}
        self.buffer_bytes = 0

    def buffer(self, shape: tuple[int, ...], dtype: torch.dtype, device: torch.device) -> torch.Tensor | None:
        """Where the next folded product of this call of the network goes, or None (a fresh tensor).

        A group of 8 points of the digits MLP at 512 samples makes 2 MB per layer; in a process
        whose malloc is not tuned (a notebook: :func:`landscape.engine.tune_malloc` never touches
        the caller's process) glibc serves each with fresh mmap pages, faulted in and zeroed at
        every call. So the k-th product of a call writes into the k-th buffer, the same at every
        call: a layer applied twice, or a branch held while others run, has its own. Only when
        :attr:`reuse` (the engine keeps no outputs past the loss), without autograd, and while
        the buffers take at most :data:`BUFFER_BYTES`; else a fresh tensor as before."""
        if not self.reuse or torch.is_grad_enabled():
            return None
        k = self.calls
        self.calls += 1
        buf = self.buffers.get(k)
        if buf is not None and tuple(buf.shape) == tuple(shape) and buf.dtype == dtype and buf.device == device:
            return buf
        nbytes = math.prod(shape) * torch.empty((), dtype=dtype).element_size()
        old = 0 if buf is None else buf.nbytes
        if self.buffer_bytes - old + nbytes > BUFFER_BYTES:
            return None
        self.buffer_bytes += nbytes - old
        buf = self.buffers[k] = torch.empty(shape, dtype=dtype, device=device)
        return buf


class _Leaf(nn.Module):
    """Base of the folded leaves: per-point parameters from the context, fixed ones as they are."""

    def __init__(self, ctx: _Context, prefix: str, module: nn.Module, planes: Mapping[str, tuple]) -> None:
        super().__init__()
        self.ctx = ctx
        self.prefix = prefix
        # (centre, v, w) of each moved parameter of this leaf, by local name
        self.planes = {k: planes[f"{prefix}{k}"] for k, _ in module.named_parameters(recurse=False)
                       if f"{prefix}{k}" in planes}
        self.fixed = {k: p.detach() for k, p in module.named_parameters(recurse=False)
                      if f"{prefix}{k}" not in planes}

    def param(self, name: str) -> torch.Tensor | None:
        """The parameter ``name`` at every point, ``(p, *shape)`` (a broadcast view when fixed)."""
        full = f"{self.prefix}{name}"
        if self.ctx.reads is not None:
            self.ctx.reads.add(full)
        if full in self.ctx.params:
            return self.ctx.params[full]
        if name in self.planes:  # moved, but not among the parameters built for the group: built here
            assert self.ctx.coef is not None
            rows = torch.stack([t.reshape(-1) for t in self.planes[name]])
            return (self.ctx.coef @ rows).view(self.ctx.p, *self.planes[name][0].shape)
        t = self.fixed.get(name)
        return None if t is None else t.unsqueeze(0).expand(self.ctx.p, *t.shape)

    def shared(self, x: torch.Tensor) -> bool:
        """Whether ``x`` is the same for every point (the batch's own samples, not folded)."""
        return x.dim() > 0 and x.shape[0] == self.ctx.n and self.ctx.p > 1

    def fold(self, x: torch.Tensor) -> torch.Tensor:
        """A shared ``x`` as a folded tensor: the same samples for every point (a copy)."""
        p = self.ctx.p
        return x.unsqueeze(0).expand(p, *x.shape).reshape(p * x.shape[0], *x.shape[1:])

    def linear_in_point(self, x: torch.Tensor, apply: Any) -> torch.Tensor | None:
        """``apply(x, weights...)`` at every point for a shared ``x``, through the three
        products of ``x`` with the centre and the directions, computed once and cached;
        None when the cache has no room for them (the caller folds ``x`` instead)."""
        ctx = self.ctx
        key = (id(self), x.data_ptr(), tuple(x.shape), tuple(x.stride()))
        got = ctx.cache.get(key)
        if got is None:
            outs = []
            for k in range(3):
                kw = {}
                for name in set(self.planes) | set(self.fixed):
                    if name in self.planes:
                        kw[name] = self.planes[name][k]
                    else:  # a fixed parameter belongs to the centre term only
                        kw[name] = self.fixed[name] if k == 0 else torch.zeros_like(self.fixed[name])
                outs.append(apply(x, **kw))
            rows = torch.stack([o.reshape(-1) for o in outs])
            if ctx.cache_bytes + rows.nbytes > CACHE_BYTES:
                return None
            ctx.cache_bytes += rows.nbytes
            got = ctx.cache[key] = (rows, outs[0].shape)
        rows, shape = got
        assert ctx.coef is not None
        buf = ctx.buffer((ctx.coef.shape[0], rows.shape[1]), rows.dtype, rows.device)
        if buf is None or ctx.coef.dtype != rows.dtype:
            return (ctx.coef @ rows).view(ctx.p * shape[0], *shape[1:])
        return torch.mm(ctx.coef, rows, out=buf).view(ctx.p * shape[0], *shape[1:])


class _Linear(_Leaf):
    def __init__(self, ctx: _Context, prefix: str, module: nn.Linear, planes: Mapping[str, tuple]) -> None:
        super().__init__(ctx, prefix, module, planes)
        self.out_features = module.out_features

    @staticmethod
    def _run(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
        return F.linear(x, weight, bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        p = self.ctx.p
        if self.shared(x):
            out = self.linear_in_point(x, self._run)
            if out is not None:
                return out
            x = self.fold(x)
        w = self.param("weight")
        b = self.param("bias")
        assert w is not None
        x3 = x.reshape(p, -1, x.shape[-1])
        wt = w if f"{self.prefix}weight" in self.ctx.transposed else w.transpose(1, 2)
        same = x3.dtype == wt.dtype and (b is None or b.dtype == wt.dtype)
        buf = self.ctx.buffer((p, x3.shape[1], wt.shape[2]), x3.dtype, x3.device) if same else None
        if buf is None:
            out = torch.bmm(x3, wt) if b is None else torch.baddbmm(b.unsqueeze(1), x3, wt)
        else:
            out = torch.bmm(x3, wt, out=buf) if b is None else torch.baddbmm(b.unsqueeze(1), x3, wt, out=buf)
        return out.reshape(*x.shape[:-1], self.out_features)


class _Conv(_Leaf):
    def __init__(self, ctx: _Context, prefix: str, module: nn.Conv1d | nn.Conv2d, planes: Mapping[str, tuple]) -> None:
        super().__init__(ctx, prefix, module, planes)
        self.stride, self.padding = module.stride, module.padding
        self.dilation, self.groups = module.dilation, module.groups
        self.fn = F.conv1d if isinstance(module, nn.Conv1d) else F.conv2d
        # "reflect", "replicate", "circular": padded by F.pad first, then no padding (as Conv*d.forward does)
        self.pad_mode = module.padding_mode
        self.pad = module._reversed_padding_repeated_twice if module.padding_mode != "zeros" else None
        if self.pad is not None:
            self.padding = (0,) * len(module.kernel_size)

    def _padded(self, x: torch.Tensor) -> torch.Tensor:
        return x if self.pad is None else F.pad(x, self.pad, mode=self.pad_mode)

    def _run(self, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
        return self.fn(self._padded(x), weight, bias, self.stride, self.padding, self.dilation, self.groups)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.shared(x):
            out = self.linear_in_point(x, self._run)
            if out is not None:
                return out
            x = self.fold(x)
        p = self.ctx.p
        w = self.param("weight")
        b = self.param("bias")
        assert w is not None
        n = x.shape[0] // p
        x = self._padded(x)  # per sample and channel: padding before regrouping gives each point its own
        spatial = x.shape[2:]
        # (p*n, C, ...) -> (n, p*C, ...): one grouped convolution for all the points
        xg = x.reshape(p, n, x.shape[1], *spatial).transpose(0, 1).reshape(n, p * x.shape[1], *spatial)
        out = self.fn(xg, w.reshape(-1, *w.shape[2:]), None if b is None else b.reshape(-1), self.stride,
                      self.padding, self.dilation, self.groups * p)
        cout = w.shape[1]
        return out.reshape(n, p, cout, *out.shape[2:]).transpose(0, 1).reshape(p * n, cout, *out.shape[2:])


class _BatchNorm(_Leaf):
    """Batch norm in eval mode: the running statistics (buffers, never moved) and per-point affine."""

    running_mean: torch.Tensor
    running_var: torch.Tensor

    def __init__(self, ctx: _Context, prefix: str, module: nn.modules.batchnorm._BatchNorm,
                 planes: Mapping[str, tuple]) -> None:
        super().__init__(ctx, prefix, module, planes)
        assert module.running_mean is not None and module.running_var is not None
        self.register_buffer("running_mean", module.running_mean.detach().clone())
        self.register_buffer("running_var", module.running_var.detach().clone())
        self.eps = module.eps
        self.affine = module.affine

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.batch_norm(x, self.running_mean, self.running_var, None, None, False, 0.0, self.eps)
        if not self.affine:
            return y
        p = self.ctx.p
        w, b = self.param("weight"), self.param("bias")
        assert w is not None and b is not None
        if self.shared(y):
            y = self.fold(y)
        shape = (p, -1, w.shape[1]) + (1,) * (y.dim() - 2)
        yv = y.reshape(p, -1, *y.shape[1:])
        return torch.addcmul(b.reshape(shape), yv, w.reshape(shape)).reshape(y.shape)


class _LayerNorm(_Leaf):
    def __init__(self, ctx: _Context, prefix: str, module: nn.LayerNorm, planes: Mapping[str, tuple]) -> None:
        super().__init__(ctx, prefix, module, planes)
        self.shape = tuple(module.normalized_shape)
        self.eps = module.eps
        self.affine = module.elementwise_affine
        self.has_bias = module.bias is not None if self.affine else False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.layer_norm(x, self.shape, None, None, self.eps)
        if not self.affine:
            return y
        p = self.ctx.p
        if self.shared(y):
            y = self.fold(y)
        w = self.param("weight")
        assert w is not None
        mid = (1,) * (y.dim() - len(self.shape))
        yv = y.reshape(p, -1, *y.shape[1:])
        wv = w.reshape(p, *mid, *self.shape)
        if self.has_bias:
            b = self.param("bias")
            assert b is not None
            return torch.addcmul(b.reshape(p, *mid, *self.shape), yv, wv).reshape(y.shape)
        return (yv * wv).reshape(y.shape)


class _Embedding(_Leaf):
    def __init__(self, ctx: _Context, prefix: str, module: nn.Embedding, planes: Mapping[str, tuple]) -> None:
        super().__init__(ctx, prefix, module, planes)
        self.padding_idx = module.padding_idx

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        p = self.ctx.p
        w = self.param("weight")
        assert w is not None
        vocab = w.shape[1]
        if self.shared(ids):  # the same ids for every point: one gather over the stacked tables
            ids = ids.unsqueeze(0).expand(p, *ids.shape)
        else:
            ids = ids.reshape(p, -1, *ids.shape[1:])
        offset = torch.arange(p, device=ids.device).view(p, *([1] * (ids.dim() - 1))) * vocab
        out = F.embedding(ids + offset, w.reshape(p * vocab, -1))
        return out.reshape(-1, *out.shape[2:])


_FOLDED: list[tuple[type, type]] = [
    (nn.Linear, _Linear),
    (nn.Conv1d, _Conv),
    (nn.Conv2d, _Conv),
    (nn.modules.batchnorm._BatchNorm, _BatchNorm),
    (nn.LayerNorm, _LayerNorm),
    (nn.Embedding, _Embedding),
]


def _folded_type(module: nn.Module) -> type | None:
    for base, folded in _FOLDED:
        if type(module) is base or (base is nn.modules.batchnorm._BatchNorm and isinstance(module, base)):
            return folded
    return None


def foldable_leaves(net: nn.Module, moved: Collection[str], *,
                    training: bool | None = None) -> list[tuple[str, nn.Module, type]]:
    """``(name, module, folded type)`` of every parametric leaf of ``net`` to replace; a
    ``ValueError`` naming the layer when the network cannot be folded with the parameters
    ``moved`` moving (checked on the modules alone: nothing is built or run). ``training``:
    the mode the modules will run in (None: each module's own)."""
    owners: set[str] = set()
    out: list[tuple[str, nn.Module, type]] = []
    for mod_name, module in net.named_modules():
        own = [k for k, _ in module.named_parameters(recurse=False)]
        if not own:
            continue
        prefix = f"{mod_name}." if mod_name else ""
        where = f"{type(module).__name__} {mod_name or '(the network)'!r}"
        if list(module.children()):
            read = [k for k in own if f"{prefix}{k}" in moved]
            if read:
                raise ValueError(f"{where} reads its own parameters {read} in its forward")
            continue
        folded = _folded_type(module)
        if folded is None:
            if any(f"{prefix}{k}" in moved for k in own):
                raise ValueError(f"{where} has no folded form (Linear, Conv1d/2d, BatchNorm, LayerNorm and "
                                 "Embedding have one)")
            continue
        if isinstance(module, nn.modules.batchnorm._BatchNorm) and (
                module.training if training is None else training):
            raise ValueError(f"{where} is in train mode: batch statistics mix the samples of a batch")
        if isinstance(module, nn.Embedding) and module.max_norm is not None:
            raise ValueError(f"{where} has max_norm: it renormalises its weights in place")
        if not mod_name:
            raise ValueError("the network itself is a single parametric layer")
        owners.update(f"{prefix}{k}" for k in own)
        out.append((mod_name, module, folded))
    missing = [k for k in moved if k not in owners]
    if missing:
        raise ValueError(f"parameters {missing} are not owned by a foldable layer")
    return out


class FoldedNetwork:
    """A copy of the network that evaluates a group of points per call (see the module docstring).

    Parameters
    ----------
    net : nn.Module
        The engine's network (its parameters hold the centre).
    planes : dict of str to (Tensor, Tensor, Tensor)
        ``(centre, v, w)`` of each moved parameter, on the device.
    copy : bool, default=True
        Fold a copy of ``net``; False replaces ``net``'s own layers (an engine that never
        evaluates one point at a time saves the copy). Either way nothing is replaced when the
        network cannot be folded.
    """

    def __init__(self, net: nn.Module, planes: Mapping[str, tuple[torch.Tensor, torch.Tensor, torch.Tensor]],
                 copy: bool = True) -> None:
        self.ctx = _Context()
        self.net = _copy.deepcopy(net) if copy else net
        leaves = foldable_leaves(self.net, planes)  # raises before anything is replaced
        for mod_name, module, folded in leaves:
            prefix = f"{mod_name}." if mod_name else ""
            self._replace(mod_name, folded(self.ctx, prefix, module, planes))

    def _replace(self, name: str, new: nn.Module) -> None:
        parent_name, _, leaf = name.rpartition(".")
        parent = self.net.get_submodule(parent_name) if parent_name else self.net
        setattr(parent, leaf, new)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.ctx.calls = 0  # the products of this call take the buffers in order
        return self.net(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.net, name)

    def parameters_read(self, run: Any) -> set[str] | None:
        """The moved parameters the folded layers read while ``run()`` calls the network (the
        first Linear or Conv on the model's inputs reads none: see :meth:`_Leaf.linear_in_point`),
        or None when ``run`` fails. What ``run`` cached of the first layers is dropped."""
        self.ctx.reads = set()
        try:
            run()
            return set(self.ctx.reads)
        except Exception as exc:  # an unusual forward: every parameter is built, as without this
            _log.info("could not tell which parameters the folded layers read (%s)", exc)
            return None
        finally:
            self.ctx.reads = None
            self.ctx.cache.clear()  # the probe's own products of the first layers
            self.ctx.cache_bytes = 0

    def linear_weights(self) -> set[str]:
        """The names of the Linear layers' weights: those :meth:`set_points` may take transposed."""
        return {f"{m.prefix}weight" for m in self.net.modules() if isinstance(m, _Linear)}

    def set_points(self, names: Sequence[str], params: Sequence[torch.Tensor], coef: torch.Tensor, n: int,
                   transposed: Collection[str] = ()) -> None:
        """The group's parameters (``(p, *shape)`` each, like ``names``), coefficients and batch size;
        ``transposed``: Linear weights (:meth:`linear_weights`) among ``names`` given as ``(p, in, out)``."""
        self.ctx.p = int(coef.shape[0])
        self.ctx.n = int(n)
        self.ctx.coef = coef
        self.ctx.params = dict(zip(names, params))
        self.ctx.transposed = frozenset(k for k in transposed if k in self.ctx.params)


def fold_network(net: nn.Module, names: Sequence[str], centre: Sequence[torch.Tensor], v: Sequence[torch.Tensor],
                 w: Sequence[torch.Tensor], copy: bool = True) -> FoldedNetwork | None:
    """A :class:`FoldedNetwork`, or None when this network cannot be folded (the reason is logged)."""
    try:
        return FoldedNetwork(net, {k: (c, a, b) for k, c, a, b in zip(names, centre, v, w)}, copy=copy)
    except ValueError as exc:
        _log.info("points cannot be folded into the batch: %s", exc)
        return None
