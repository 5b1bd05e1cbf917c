"""The ways a group of points runs in one call: a registry (private).

A way is a value: its name, what it needs (:attr:`Way.unavailable` says why it does not
apply to an engine's network and task, naming the layer, without running anything) and
how it builds the group function ``fn(params, batch, coef) -> (losses (p,), [outputs])``
of an engine. :data:`WAYS` lists them in the order the planner prefers them:

* ``"sequential"``: a plain ``nn.Sequential`` of Linear layers and element-wise
  activations, written out as one batched product per layer (:mod:`._batched`);
* ``"folded"``: any network of Linear, Conv, BatchNorm (eval), LayerNorm and Embedding
  layers, the points folded into the batch (:mod:`._folded`);
* ``"vmap"``: anything, through ``torch.func.functional_call`` under ``torch.vmap``.

Whether a way gives the one-point values is not decided here: the planner runs every way
it would use on a probe first (:func:`landscape.engine._probe.verify_way`), also when the
plan is given as a dict.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import torch
from torch import nn
from torch.func import functional_call, vmap

from landscape.engine._batched import batched_loss, sequential_forward, sequential_weights
from landscape.engine._folded import FoldedNetwork, foldable_leaves
from landscape.tasks import Supervised, batch_size, mean_loss, slice_batch

if TYPE_CHECKING:  # the engine builds the ways; they read its state
    from landscape.engine._engine import Engine

__all__ = ["Way", "WAYS", "BATCHINGS", "GroupFn", "Modules", "inapplicable"]

#: ``fn(params, batch, coef) -> (losses (p,),)`` or ``(losses, outputs)`` when metrics need outputs.
GroupFn = Callable[[tuple, Any, torch.Tensor], Any]


class Modules(Protocol):
    """What a way's :attr:`Way.unavailable` reads: the network's modules (run in ``eval_mode``),
    the moved tensors' names and the task when it is :class:`~landscape.tasks.Supervised`."""

    net: nn.Module
    names: list[str]
    sup: Supervised | None
    eval_mode: bool


@dataclass(frozen=True)
class Way:
    """One way of running a group of points per call.

    Attributes
    ----------
    name : str
    unavailable : callable
        ``unavailable(engine) -> str | None``: why this way does not apply (None: it may), from
        what :class:`Modules` names alone (an engine has it; so has the planner's view of a
        network it has not copied).
    build : callable
        ``build(engine) -> (fn, built, transposed)``: the group function, the indices of the moved
        parameters it needs built per group (None: all of them) and those among them it takes with
        their last two dimensions swapped (Linear weights as ``(p, in, out)``: MKL's batched product
        reads that layout 3-30 % faster than the transposed view of ``(p, out, in)``; the same bits in
        every shape tried with 16 samples per point or more).
    """

    name: str
    unavailable: Callable[[Modules], str | None]
    build: Callable[[Engine], tuple[GroupFn, list[int] | None, frozenset[int]]]


class _Bound:
    """The network with a point's parameters: calling it is ``functional_call`` (for vmap).

    The task receives this in place of the module; attribute reads (``model.config``) go
    to the network itself.
    """

    def __init__(self, net: nn.Module, params: dict[str, torch.Tensor]) -> None:
        self._net, self._params = net, params

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return functional_call(self._net, self._params, args, kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._net, name)


# -- sequential ---------------------------------------------------------------------------
def _sequential_unavailable(eng: Modules) -> str | None:
    if eng.sup is None or not eng.sup.plain:
        return "it needs a plain Supervised(loss_fn) task ((inputs, targets) batches)"
    try:
        sequential_forward(eng.net, eng.names, eng.eval_mode)
    except ValueError as exc:
        return str(exc)
    return None


def _sequential_build(eng: Engine) -> tuple[GroupFn, list[int] | None, frozenset[int]]:
    sup = eng.sup
    assert sup is not None
    # measured with MKL only: on other devices the layout as before
    weights = sequential_weights(eng.net, eng.names) if eng.device.type == "cpu" else set()
    transposed = frozenset(i for i, k in enumerate(eng.names) if k in weights)
    fwd = sequential_forward(eng.net, eng.names, eng.eval_mode, (eng.c, eng.v, eng.w), transposed)
    loss_b = batched_loss(sup.loss_fn, mean_loss)
    keep = bool(eng.metrics)

    def direct(params: tuple, batch: Any, coef: torch.Tensor) -> Any:
        x, y = sup.split(batch)
        out = fwd(params, x, coef)
        return (loss_b(out, y), out) if keep else (loss_b(out, y),)

    return direct, None, transposed


# -- folded -------------------------------------------------------------------------------
#: Points of the run that finds which moved parameters the folded layers read (:func:`_folded_build`).
PROBE_POINTS = 2


def _folded_unavailable(eng: Modules) -> str | None:
    if eng.sup is None:
        return "it needs a Supervised task (inputs, targets and a loss_fn)"
    if not eng.eval_mode:
        return "train mode (batch statistics mix the points' samples)"
    try:
        foldable_leaves(eng.net, set(eng.names), training=not eng.eval_mode)
    except ValueError as exc:
        return str(exc)
    return None


def _folded_build(eng: Engine) -> tuple[GroupFn, list[int] | None, frozenset[int]]:
    sup, names = eng.sup, eng.names
    assert sup is not None
    # an engine whose points all go through groups never needs the network itself: fold it in place
    in_place = eng.p > 1 and not eng.batch_metrics and not eng.point_metrics
    folded = FoldedNetwork(eng.net, {k: (c, a, b) for k, c, a, b in zip(names, eng.c, eng.v, eng.w)},
                           copy=not in_place)
    loss_f = batched_loss(sup.loss_fn, mean_loss)
    keep = bool(eng.metrics)
    # the outputs are used up by the loss before the next group: the products may reuse buffers
    folded.ctx.reuse = not keep

    # Parameters only the first layers read (linear in the point, computed from the inputs once) need
    # not be built for every group: which ones the network reads is found once, on one sample at two points
    # (more than one, so that the inputs are told from the folded activations; the group's own count made
    # the products copy the centre's weights that many times: 0.3 ms of a 20x20 plane of the digits MLP)
    x1 = sup.split(eng.batch(0))[0]
    x1 = slice_batch(x1, 1, size=batch_size(x1))
    coef0 = torch.zeros(PROBE_POINTS, 3, device=eng.device)
    coef0[:, 0] = 1.0
    centre = [c.unsqueeze(0).expand(PROBE_POINTS, *c.shape) for c in eng.c]

    def probe() -> None:
        folded.set_points(names, centre, coef0, 1)
        sup.outputs(folded, x1)

    reads = folded.parameters_read(probe)
    idx = [i for i, k in enumerate(names) if reads is None or k in reads]
    built = [names[i] for i in idx]
    linear = folded.linear_weights() if eng.device.type == "cpu" else set()  # as _sequential_build
    transposed = frozenset(i for i in idx if names[i] in linear)
    given_t = [names[i] for i in transposed]

    def fold(params: tuple, batch: Any, coef: torch.Tensor) -> Any:
        x, y = sup.split(batch)
        folded.set_points(built, params, coef, batch_size(x), given_t)
        out = sup.outputs(folded, x)
        p = coef.shape[0]
        out = out.reshape(p, out.shape[0] // p, *out.shape[1:])
        return (loss_f(out, y), out) if keep else (loss_f(out, y),)

    eng.run_modules = folded.net  # what the planner's probe watches for the failing layer
    return fold, idx, transposed


# -- vmap ---------------------------------------------------------------------------------
def _vmap_unavailable(eng: Modules) -> str | None:
    return None  # anything runs under vmap; the probe finds what fails or differs


def _vmap_build(eng: Engine) -> tuple[GroupFn, list[int] | None, frozenset[int]]:
    net, names, sup, task, keep = eng.net, eng.names, eng.sup, eng.task, bool(eng.metrics)

    def one(params: tuple, batch: Any) -> Any:
        model = _Bound(net, dict(zip(names, params)))
        if keep:
            assert sup is not None
            x, y = sup.split(batch)
            out = sup.outputs(model, x)
            return sup.loss(out, y), out
        return (task(model, batch),)

    mapped = vmap(one, in_dims=(0, None))
    return (lambda params, batch, coef: mapped(params, batch)), None, frozenset()


#: The ways, in the order they are preferred (each is faster than the next where it applies).
WAYS: dict[str, Way] = {w.name: w for w in (
    Way("sequential", _sequential_unavailable, _sequential_build),
    Way("folded", _folded_unavailable, _folded_build),
    Way("vmap", _vmap_unavailable, _vmap_build),
)}
#: Their names (the values of a plan's ``batching``).
BATCHINGS = tuple(WAYS)


def inapplicable(batching: str | None, reasons: list[str]) -> ValueError:
    """The error of an engine whose plan's ``batching`` (None: any way) does not apply; ``reasons``:
    ``"way: why"`` for each way tried."""
    return ValueError(f"batching {batching!r} does not apply to this network and task ({'; '.join(reasons)})")
