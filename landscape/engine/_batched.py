"""Several points per call without vmap, for plain stacks of layers (private).

``torch.vmap`` over ``functional_call`` turns every Linear into a ``bmm`` followed by a
separate broadcast bias add, and runs activations and ``log_softmax`` on batched layouts
that are slow on the CPU: on the digits MLP it is about twice as slow per point as one
``baddbmm`` per layer. For an ``nn.Sequential`` (nested allowed) of Linear layers and
elementwise activations the batched forward is therefore written out directly; anything
else keeps the generic vmap path. Leading layers with no moved parameter do not depend on
the point and run once on the shared inputs.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Collection, Sequence
from typing import Any

import torch
from torch import nn
from torch.func import vmap

__all__: list[str] = []

#: Parameter-free modules that act elementwise, so they apply unchanged to (points, n, f).
_ELEMENTWISE = (nn.ReLU, nn.ReLU6, nn.LeakyReLU, nn.ELU, nn.SELU, nn.CELU, nn.GELU, nn.SiLU,
                nn.Mish, nn.Tanh, nn.Sigmoid, nn.Softplus, nn.Hardtanh, nn.Hardswish,
                nn.Hardsigmoid, nn.Tanhshrink, nn.Softsign, nn.Identity)


def _leaves(module: nn.Module, prefix: str) -> list[tuple[str, nn.Module]] | None:
    if type(module) is nn.Sequential:
        out: list[tuple[str, nn.Module]] = []
        for name, child in module.named_children():
            sub = _leaves(child, f"{prefix}{name}.")
            if sub is None:
                return None
            out += sub
        return out
    if list(module.children()):
        return None
    return [(prefix, module)]


def sequential_weights(net: nn.Module, names: Sequence[str]) -> set[str]:
    """The names among ``names`` of Linear layers' weights (:func:`sequential_forward` may take them
    transposed)."""
    out = set()
    for k in names:
        owner, _, leaf = k.rpartition(".")
        if leaf == "weight" and type(net.get_submodule(owner)) is nn.Linear:
            out.add(k)
    return out


def sequential_forward(net: nn.Module, names: Sequence[str], eval_mode: bool,
                       planes: Sequence[Sequence[torch.Tensor]] | None = None,
                       transposed: Collection[int] = ()) -> Callable:
    """``fn(params, x, coef) -> outputs (points, n, ...)`` for ``params`` batched like
    ``names`` and ``coef`` the (points, 3) rows ``(1, a, b)``; a ``ValueError`` saying why
    when ``net`` is not a stack this module knows how to batch (nothing is run).
    ``planes`` = (centre, v, w) lists like ``names``; ``transposed``: the indices of the Linear
    weights (:func:`sequential_weights`) that ``params`` holds as ``(points, in, out)``.

    The first layer is linear in the point: ``x (c + a v + b w)^T = x c^T + a x v^T + b x w^T``.
    Its three products with the shared inputs are computed once, and each call combines
    them with one (points, 3) product instead of one GEMM per point; the other layers need
    the point's own weights."""
    if not eval_mode:
        raise ValueError("train mode (dropout and batch statistics differ per call)")
    leaves = _leaves(net, "") if type(net) is nn.Sequential else None
    if not leaves:
        raise ValueError(f"the network ({type(net).__name__}) is not an nn.Sequential of Linear layers and "
                         "element-wise activations")
    index = {k: i for i, k in enumerate(names)}
    shared: list[nn.Module] = []  # run once on the inputs: nothing moved up to here
    steps: list[tuple[str, Any, Any]] = []
    for prefix, mod in leaves:
        moved = [k for k, _ in mod.named_parameters(prefix=prefix.rstrip("."))
                 if k in index]
        if not steps and not moved:
            shared.append(mod)
        elif type(mod) is nn.Linear:
            wk, bk = f"{prefix}weight", f"{prefix}bias"
            w = index.get(wk, mod.weight)
            b = None if mod.bias is None else index.get(bk, mod.bias)
            steps.append(("linear", w, b))
        # dropout in eval mode (checked above: the engine runs its copy so) is the identity
        elif isinstance(mod, (*_ELEMENTWISE, nn.Dropout)) and not (
                any(True for _ in mod.parameters()) or any(True for _ in mod.buffers())):
            steps.append(("act", mod, None))
        else:
            raise ValueError(f"layer {prefix.rstrip('.')!r} ({type(mod).__name__}) is neither Linear nor a "
                             "parameter-free element-wise activation")
    if not any(s[0] == "linear" for s in steps):
        raise ValueError("no Linear layer moves")

    def pick(ref: Any, params: Sequence[torch.Tensor], p: int) -> torch.Tensor:
        # moved parameters come batched; fixed ones are broadcast (a view, no copy)
        return params[ref] if isinstance(ref, int) else ref.unsqueeze(0).expand(p, *ref.shape)

    cache: dict[tuple, torch.Tensor] = {}
    swap = frozenset(transposed)

    def plane_terms(ref: Any) -> list[torch.Tensor | None]:
        if isinstance(ref, int):
            assert planes is not None
            return [planes[0][ref], planes[1][ref], planes[2][ref]]
        return [ref, None, None]  # not moved: the centre's only

    def first_layer(x: torch.Tensor) -> torch.Tensor:
        """(3, n * out): the first layer's output at the centre and along v and w."""
        _, wref, bref = steps[0]
        ws = plane_terms(wref)
        bs = plane_terms(bref) if bref is not None else [None, None, None]
        rows = []
        for wt, bt in zip(ws, bs):
            r = x.new_zeros(x.shape[0], steps_out) if wt is None else x @ wt.t()
            rows.append((r if bt is None else r + bt).reshape(-1))
        return torch.stack(rows)

    steps_out = next(m.out_features for _, m in leaves if type(m) is nn.Linear and m not in shared)

    def forward(params: Sequence[torch.Tensor], x: torch.Tensor, coef: torch.Tensor) -> torch.Tensor:
        p = params[0].shape[0] if params else coef.shape[0]
        key = (x.data_ptr(), tuple(x.shape), tuple(x.stride()))
        if planes is not None and key not in cache:  # the inputs are fixed for the engine's life
            y = x
            for mod in shared:
                y = mod(y)
            if y.dim() != 2:
                raise ValueError("batched layers need (samples, features) inputs")
            cache[key] = first_layer(y)
        if planes is not None:
            h = (coef @ cache[key]).view(p, -1, steps_out)
            rest = steps[1:]
        else:
            for mod in shared:
                x = mod(x)
            if x.dim() != 2:
                raise ValueError("batched layers need (samples, features) inputs")
            h, rest = x.unsqueeze(0).expand(p, *x.shape), steps
        for kind, a, b in rest:
            if kind == "linear":
                wt = params[a] if isinstance(a, int) and a in swap else pick(a, params, p).transpose(1, 2)
                h = torch.bmm(h, wt) if b is None else torch.baddbmm(pick(b, params, p).unsqueeze(1), h, wt)
            elif type(a) is nn.ReLU:  # in place: h is this call's own fresh buffer
                h = h.relu_()
            else:
                h = a(h)
        return h

    return forward


#: Classes below which a cross-entropy's losses of a call may be computed over a (points, classes, samples)
#: view (:func:`batched_loss`): AVX-512's 16 floats; past a register's width the last dimension is faster.
FEW_CLASSES = 16

#: Losses whose unreduced value has one entry per sample (or per output element), so the
#: mean over one point's samples is the mean of its slice; class weights would make the
#: reduced mean a weighted one, so those keep the vmap path.
_PER_SAMPLE = (nn.CrossEntropyLoss, nn.NLLLoss, nn.MSELoss, nn.L1Loss, nn.SmoothL1Loss,
               nn.HuberLoss, nn.BCEWithLogitsLoss, nn.BCELoss)


def batched_loss(loss_fn: Any, mean_loss: Callable) -> Callable:
    """``fn(outputs (points, n, ...), labels) -> (points,)`` mean losses."""
    def one(out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return mean_loss(loss_fn(out, y), out.shape[0], loss_fn)

    def looped(out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch.stack([one(out[i], y) for i in range(out.shape[0])])

    # the losses above have batching rules; another (MultiMarginLoss, a user's function) may not, and would
    # run point by point under vmap anyway, with PyTorch's warning about the performance drop
    general = vmap(one, in_dims=(0, None)) if type(loss_fn) in _PER_SAMPLE else looped

    if type(loss_fn) not in _PER_SAMPLE or getattr(loss_fn, "weight", None) is not None \
            or getattr(loss_fn, "pos_weight", None) is not None:
        return general
    unreduced = copy.copy(loss_fn)
    unreduced.reduction = "none"
    classes = isinstance(loss_fn, (nn.CrossEntropyLoss, nn.NLLLoss))
    cross_entropy = isinstance(loss_fn, nn.CrossEntropyLoss)
    ignore = getattr(loss_fn, "ignore_index", None)

    # whether a label tensor holds ignore_index, checked once per tensor (a device sync per call saved): the
    # engine passes the same label tensors at every call; held here so that their ids stay theirs
    ignored: dict[int, tuple[torch.Tensor, bool]] = {}
    # cross-entropy over fewer classes than a SIMD register holds (16 floats with AVX-512, 8 with AVX2):
    # PyTorch's CPU log-softmax along the last dimension runs a scalar loop there, 2-6x slower than along the
    # classes of a (points, classes, samples) view -- at 512 samples 8 points' losses took a fifth of a
    # digits MLP's call -- and both sum the classes one by one, so they agree bit for bit. Which layout a
    # call uses is decided on the first one by computing both: the view only where every loss is the same
    # bits (else, or where it would not be faster, the layout as before)
    transposed: list[bool] = []

    def tiled(y: torch.Tensor, p: int) -> torch.Tensor:  # the labels of every point's samples, end to end
        return y.unsqueeze(0).expand(p, *y.shape).reshape(-1, *y.shape[1:])

    def flat(out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        if classes and not y.is_floating_point():
            hit = ignored.get(id(y))
            if hit is None or hit[0] is not y:
                if len(ignored) >= 64:  # streamed batches: new tensors every call
                    ignored.clear()
                hit = ignored[id(y)] = (y, bool(torch.as_tensor(y == ignore).any()))
            if hit[1]:
                return general(out, y)  # the mean skips ignored samples
        elif tuple(out.shape[1:]) != tuple(y.shape):
            return general(out, y)  # broadcasting between outputs and targets: keep it exact
        p = out.shape[0]
        if cross_entropy and out.dim() == 3 and out.shape[2] < FEW_CLASSES and out.device.type == "cpu" \
                and not y.is_floating_point() and transposed != [False]:
            per_class = unreduced(out.transpose(1, 2), y.unsqueeze(0).expand(p, *y.shape))
            if transposed:
                return per_class.mean(1)
            plain = unreduced(out.reshape(-1, out.shape[2]), tiled(y, p)).reshape(p, -1)
            transposed.append(bool(torch.equal(per_class, plain)))  # NaN: not equal, the plain layout
            return plain.mean(1)
        return unreduced(out.reshape(-1, *out.shape[2:]), tiled(y, p)).reshape(p, -1).mean(1)

    return flat
