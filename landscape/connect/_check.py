"""The function check: a permuted network computes what the original computes (private).

Before an alignment is used, the network permuted by it is run beside the original on real
samples, in eval mode and in train mode (dropout off in both copies, batch norm on the
batch's statistics), and every floating output compared: the largest difference relative to
the largest output must stay within :data:`TOLERANCE` (float64: 1e-10; float32: 1e-5, since a
permuted sum adds in another order: 3-8e-6 measured on the digits MLP's logits; a network
that computes parts in a lower precision than its outputs, such as Llama's float32 norms, is
held to that precision's). Otherwise :class:`FunctionChanged` is raised, naming the first operation (and its
layer) whose output is not a permutation of the original's: a wrong hand-written spec, or an
operation the trace misread.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import Any

import torch
from torch import nn

from landscape.connect._spec import PermutationSpec
from landscape.connect._trace import Recorder, model_call, output_tensors, run_call, shell
from landscape.tasks import batch_size

__all__ = ["FunctionChanged", "check_function", "TOLERANCE", "tolerance"]

#: The largest relative difference accepted, by the outputs' dtype.
TOLERANCE = {torch.float64: 1e-10, torch.float32: 1e-5}


class FunctionChanged(ValueError):
    """The permuted network does not compute the original's function (the message names where)."""


def tolerance(dtype: torch.dtype, computed: tuple[str, ...] = ()) -> float:
    """:data:`TOLERANCE` of a dtype (half precision: 1e-2), or of the least precise dtype the network
    ``computed`` in (a float64 network whose norms run in float32 is held to float32's)."""
    tol = TOLERANCE.get(dtype, 1e-2)
    for name in computed:
        tol = max(tol, TOLERANCE.get(getattr(torch, name, torch.float32), 1e-2))
    return tol


@contextlib.contextmanager
def _rng() -> Iterator[None]:
    """The global generator's state kept (a train-mode forward may draw)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        yield


def _no_dropout(net: nn.Module) -> nn.Module:
    for m in net.modules():
        if isinstance(m, nn.modules.dropout._DropoutNd):
            m.p = 0.0
    return net


#: Elements compared at a time: float64 copies of a block, not of a whole output (a language
#: model's logits are tens of megabytes).
_BLOCK = 1 << 20


def _relative(a: torch.Tensor, b: torch.Tensor) -> float:
    """The largest difference of the finite entries relative to the largest of ``a``'s; infinite when the
    non-finite entries (NaN, inf) are not the same ones with the same values (an input that makes some
    outputs NaN must not hide the rest)."""
    if a.shape != b.shape:
        return float("inf")
    fla, flb = a.detach().reshape(-1), b.detach().reshape(-1)
    scale = diff = 0.0
    for lo in range(0, fla.numel(), _BLOCK):
        a64, b64 = fla[lo:lo + _BLOCK].double(), flb[lo:lo + _BLOCK].double()
        fa, fb = torch.isfinite(a64), torch.isfinite(b64)
        if not torch.equal(fa, fb) or not torch.equal(a64[~fa].nan_to_num(0.0), b64[~fb].nan_to_num(0.0)):
            return float("inf")
        a64, b64 = a64[fa], b64[fb]
        if a64.numel():
            scale = max(scale, float(a64.abs().max()))
            diff = max(diff, float((a64 - b64).abs().max()))
    return diff / scale if scale > 0 else diff


def _outputs(net: nn.Module, args: Any, kwargs: Any, train: bool) -> list[torch.Tensor]:
    """The output tensors of one call, detached: the call's autograd graph (its saved activations) is
    freed before the next call runs."""
    with _rng():
        return [t.detach() for t in output_tensors(run_call(net, args, kwargs, train=train))]


def check_function(model: nn.Module, spec: PermutationSpec, perms: Mapping[str, torch.Tensor], batch: Any,
                   task: Any = None) -> dict[str, Any]:
    """``{"eval": d, "train": d, "samples": n}``: the largest relative output differences of ``model``
    permuted by ``perms`` against ``model`` on ``batch``; raises :class:`FunctionChanged` past the
    tolerance."""
    state = {k: t.detach() for k, t in model.state_dict(keep_vars=True).items()}
    permuted = spec.apply(state, perms)
    got: dict[str, Any] = {}
    for mode in ("eval", "train"):
        train = mode == "train"
        net, pnet = _no_dropout(shell(model, state)), _no_dropout(shell(model, permuted))
        args, kwargs = model_call(net, task, batch)
        out = _outputs(net, args, kwargs, train)
        pout = _outputs(pnet, args, kwargs, train)
        worst, tol = 0.0, 0.0
        for a, b in zip(out, pout):
            if a.is_floating_point():
                worst = max(worst, _relative(a, b))
                tol = max(tol, tolerance(a.dtype, spec.dtypes))
        if len(out) != len(pout) or worst > tol:
            where = _first_difference(model, state, permuted, args, kwargs, train, spec.dtypes)
            raise FunctionChanged(
                f"The network permuted by the alignment does not compute the original's function ({mode} mode: "
                f"largest output difference {worst:.3g} of the largest output, more than {tol:g}); the first "
                f"operation that differs is {where}. HINT: a hand-written spec must permute every tensor the "
                "layer reads; with the traced spec this is a bug to report, with the layer named here.")
        got[mode] = worst
    got["samples"] = _samples(batch)
    return got


def _samples(batch: Any) -> int:
    try:
        return batch_size(batch)
    except ValueError:
        return 0


def _first_difference(model: nn.Module, state: Mapping[str, torch.Tensor], permuted: Mapping[str, torch.Tensor],
                      args: Any, kwargs: Any, train: bool, computed: tuple[str, ...]) -> str:
    """The first operation whose outputs are not a permutation of the original's: a permutation of
    axes keeps the sorted values, so the sorted outputs are compared, event by event."""
    recs = []
    for st in (state, permuted):
        net = _no_dropout(shell(model, st))
        rec = Recorder()
        with _rng():
            run_call(net, args, kwargs, rec, train=train)
        recs.append(rec.events)
    for k, (e, f) in enumerate(zip(*recs)):
        if e.name != f.name:
            return f"operation {k} ({e.name} against {f.name}: the permuted network runs other operations)"
        for a, b in zip(e.outputs, f.outputs):
            if not a.is_floating_point() or a.numel() == 0:
                continue
            sa, sb = a.detach().reshape(-1).sort().values, b.detach().reshape(-1).sort().values
            if _relative(sa, sb) > tolerance(a.dtype, computed):
                return f"{e.name} in {e.module or 'the model itself'!r} (operation {k})"
    return "not found operation by operation (the outputs' order differs)"
