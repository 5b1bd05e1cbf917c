"""``align``: the permutation that brings model B into model A's basis (private).

The structure is traced from the network (or given), the permutations found by weight or
activation matching (:mod:`landscape.connect._match`), and the permuted B checked to compute
B's function on real samples (:mod:`landscape.connect._check`) before the :class:`Alignment`
is returned.
"""

from __future__ import annotations

import copy
import hashlib
import warnings
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import torch
from torch import nn

from collector.common import InstanceOf, Interval, InvalidParameterError, Options, check_param, unwrap_module
from landscape.connect._check import check_function
from landscape.connect._match import activation_matching, weight_matching
from landscape.connect._spec import PermutationSpec, layout_size, permutation_spec
from landscape.engine import Samples, collect
from landscape.tasks import as_task, slice_batch

__all__ = ["Alignment", "align", "check_pair", "samples_of", "replayable", "task_of", "check_spec", "CHECK_SAMPLES"]

#: Samples of the first batch the function check and the trace run on.
CHECK_SAMPLES = 32
METHODS = ("weights", "activations")


def task_of(loss_fn: Any, task: Any, caller: str) -> Any:
    """The task, or None (the model called on a batch's inputs) when neither is given."""
    if loss_fn is None and task is None:
        return None
    return as_task(loss_fn, task, caller=caller)


def samples_of(data: Any, n: int | None, task: Any, caller: str) -> Samples:
    """The first ``n`` samples of ``data`` (all of a smaller dataset; None: all), read once."""
    return collect(data, n, task, caller=caller, at_most=True)


def replayable(data: Any, n: int | None, task: Any, caller: str) -> Any:
    """``data``, or its first ``n`` samples (None: all) as a list of batches when it can be read only
    once (an iterator, such as a generator): a barrier or a curve reads its data more than once
    (a probe of one batch, the alignment, the line), and each read of an iterator would start where
    the last one stopped."""
    if isinstance(data, Iterator):
        return collect(data, n, task, caller=caller).batches
    return data


def _state(model: nn.Module) -> dict[str, torch.Tensor]:
    return {k: t.detach() for k, t in model.state_dict(keep_vars=True).items()}


def check_pair(model_a: Any, model_b: Any, caller: str) -> None:
    """Refuse two models that are not one architecture, or with non-finite weights (before any work)."""
    check_param("model_a", model_a, [InstanceOf(nn.Module)], caller=caller)
    check_param("model_b", model_b, [InstanceOf(nn.Module)], caller=caller)
    a, b = unwrap_module(model_a), unwrap_module(model_b)
    if type(a) is not type(b):
        raise InvalidParameterError(
            f"The 'model_b' parameter of {caller} must have model_a's architecture ({type(a).__name__}). Got a "
            f"{type(b).__name__} instead. HINT: alignment and barriers compare two trainings of one network.")
    sa, sb = a.state_dict(), b.state_dict()
    if list(sa) != list(sb):
        only = sorted(set(sa) ^ set(sb))[:3] or [next(k for k, j in zip(sa, sb) if k != j)]
        raise InvalidParameterError(
            f"The 'model_b' parameter of {caller} must have model_a's tensors. Their state dicts differ at "
            f"{only}. HINT: both models must be built by the same code with the same sizes.")
    for k in sa:
        if sa[k].shape != sb[k].shape:
            raise InvalidParameterError(
                f"The 'model_b' parameter of {caller} must have model_a's shapes: {k!r} is {tuple(sb[k].shape)} in "
                f"model_b and {tuple(sa[k].shape)} in model_a. HINT: the two models differ in width.")
    for name, st in (("model_a", sa), ("model_b", sb)):
        for k, t in st.items():
            if (t.is_floating_point() or t.is_complex()) and not bool(torch.isfinite(t).all()):
                raise InvalidParameterError(
                    f"The '{name}' parameter of {caller} must have finite weights: {k!r} holds "
                    f"{int((~torch.isfinite(t)).sum())} NaN or infinite values. HINT: the run diverged; use an "
                    "earlier checkpoint.")


def check_spec(spec: Any, model: nn.Module, caller: str) -> PermutationSpec | None:
    """A given spec, validated against the network (a dict in Git Re-Basin's form becomes a spec)."""
    check_param("spec", spec, [None, InstanceOf(PermutationSpec, Mapping)], caller=caller)
    if spec is None:
        return None
    if isinstance(spec, Mapping):
        return PermutationSpec.from_axes(spec, model)
    state = model.state_dict()
    for key, lay in spec.axes.items():
        if key not in state or len(lay) != state[key].dim():
            raise InvalidParameterError(
                f"The 'spec' parameter of {caller} does not fit the network: {key!r} "
                + ("is not one of its tensors" if key not in state else
                   f"has {state[key].dim()} axes, the spec {len(lay)}")
                + ". HINT: a spec is found for one architecture (permutation_spec(model, batch)).")
        for a, ax in enumerate(lay):
            if layout_size(ax) != state[key].shape[a]:
                raise InvalidParameterError(
                    f"The 'spec' parameter of {caller} does not fit the network: axis {a} of {key!r} is "
                    f"{state[key].shape[a]} long, the spec's {layout_size(ax)}.")
    return spec


@dataclass
class Alignment:
    """Permutations of a network's units that bring one model into another's basis.

    Attributes
    ----------
    perms : dict of str to LongTensor
        Each permutation group's permutation: unit ``i`` of the aligned model is unit
        ``perms[g][i]`` of the model it was made from.
    spec : PermutationSpec
        The network's structure: which tensor axes each group permutes, and what stays still.
    method : str
        ``"weights"``, ``"activations"``, ``"random"``, ``"identity"`` or ``"inverse of ..."``.
    iterations : int
        Coordinate-ascent iterations (weight matching; activation matching counts one pass).
    history : list of float
        The weight-matching objective ``sum <A, pi(B)>`` at the start and after each iteration
        (never decreasing).
    seed : int
    checked : dict or None
        The function check: the largest relative output differences in eval and train mode and
        the samples used; None when no data was given to check on.
    matched : dict of str to str
        How each group was found ("weights" or "activations").

    Examples
    --------
    >>> import torch
    >>> from landscape.connect import Alignment
    >>> from landscape.examples import MLP
    >>> model = MLP(hidden=8)
    >>> data = (torch.rand(16, 64), torch.zeros(16, dtype=torch.long))
    >>> pi = Alignment.random(model, data, seed=1)
    >>> back = pi.inverse().apply(pi.apply(model))
    >>> all(torch.equal(back.state_dict()[k], t) for k, t in model.state_dict().items())
    True
    """

    perms: dict[str, torch.Tensor]
    spec: PermutationSpec
    method: str = "weights"
    iterations: int = 0
    history: list[float] = field(default_factory=list)
    seed: int = 0
    checked: dict[str, Any] | None = None
    matched: dict[str, str] = field(default_factory=dict)

    @property
    def digest(self) -> str:
        """SHA-256 of the groups and their permutations (recorded with barriers made with it)."""
        h = hashlib.sha256()
        for g in sorted(self.perms):
            h.update(g.encode())
            h.update(self.perms[g].to(torch.int64).numpy().tobytes())
        return h.hexdigest()

    def apply_state(self, state: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """A state dict permuted (new tensors where permuted, the same ones elsewhere)."""
        return self.spec.apply(state, self.perms)

    def apply(self, model: nn.Module) -> nn.Module:
        """A permuted copy of ``model`` (``model`` itself is not changed): B in A's basis."""
        if self.checked is None:
            warnings.warn("This alignment was not checked on real samples (no data was given to align): call "
                          "alignment.check(model, data) before trusting the permuted model.", stacklevel=2)
        out = copy.deepcopy(unwrap_module(model))
        done: set[int] = set()
        with torch.no_grad():
            for key, t in out.state_dict(keep_vars=True).items():
                if id(t) in done:  # a tied weight: permuted once
                    continue
                done.add(id(t))
                p = self.spec.permute(key, t.detach(), self.perms)
                if p is not t.detach():
                    t.copy_(p)
        return out

    def inverse(self) -> Alignment:
        """The alignment undoing this one (A's basis back into B's), bit for bit."""
        perms = {g: torch.argsort(p) for g, p in self.perms.items()}
        return Alignment(perms, self.spec, f"inverse of {self.method}", 0, [], self.seed, self.checked,
                         dict(self.matched))

    def check(self, model: nn.Module, data: Any, *, task: Any = None, loss_fn: Any = None) -> dict[str, Any]:
        """Check that ``model`` permuted computes ``model``'s function on ``data``'s first samples (eval and
        train mode); raises ``FunctionChanged`` naming the first operation that differs.
        """
        t = task_of(loss_fn, task, "Alignment.check")
        batch = samples_of(data, CHECK_SAMPLES, t, "Alignment.check").batches[0]
        self.checked = check_function(unwrap_module(model), self.spec, self.perms, batch, t)
        return self.checked

    @classmethod
    def random(cls, model: nn.Module, data: Any = None, *, seed: int = 0, spec: Any = None, task: Any = None,
               loss_fn: Any = None) -> Alignment:
        """A random permutation of every group of ``model``'s structure (seeded): planted permutations
        for tests and demonstrations. The structure is traced on ``data`` unless ``spec`` is given."""
        check_param("model", model, [InstanceOf(nn.Module)], caller="Alignment.random")
        check_param("seed", seed, [Interval(int, 0, None)], caller="Alignment.random")
        model = unwrap_module(model)
        given = check_spec(spec, model, "Alignment.random")
        t = task_of(loss_fn, task, "Alignment.random")
        if given is None and data is None:
            raise InvalidParameterError("Alignment.random needs data (a batch to trace the network on) or a spec.")
        batch = samples_of(data, CHECK_SAMPLES, t, "Alignment.random").batches[0] if data is not None else None
        sp = given if given is not None else permutation_spec(model, batch, t)
        g = torch.Generator().manual_seed(seed)
        perms = {name: torch.randperm(n, generator=g) for name, n in sp.groups.items()}
        out = cls(perms, sp, "random", 0, [], seed, None, dict.fromkeys(perms, "random"))
        if batch is not None:
            out.checked = check_function(model, sp, perms, batch, t)
        return out

    def summary(self) -> str:
        """Two lines: the method, groups, iterations and objective; the function check."""
        obj = f", objective {self.history[0]:.6g} -> {self.history[-1]:.6g}" if len(self.history) > 1 else ""
        chk = ("not checked" if self.checked is None else
               f"checked on {self.checked['samples']} samples: relative difference {self.checked['eval']:.1e} "
               f"(eval), {self.checked['train']:.1e} (train)")
        return f"Alignment ({self.method}): {len(self.perms)} groups, {self.iterations} iterations{obj}\n  {chk}"

    def __str__(self) -> str:
        return self.summary()

    def __repr__(self) -> str:
        return f"Alignment(method={self.method!r}, groups={len(self.perms)}, iterations={self.iterations})"


def align(model_a: nn.Module, model_b: nn.Module, *, method: Literal["weights", "activations"] = "weights",
          data: Any = None, seed: int = 0, spec: Any = None, task: Any = None, loss_fn: Any = None,
          num_samples: int | None = None, max_iter: int = 100) -> Alignment:
    """The permutation of model B's units that brings it into model A's basis.

    Parameters
    ----------
    model_a, model_b : nn.Module
        Two models of one architecture (same tensors, same shapes, finite weights).
    method : {"weights", "activations"}, default="weights"
        Weight matching (Git Re-Basin: coordinate ascent over the groups in a seeded random
        order, one linear assignment per step, until an iteration changes nothing) or
        activation matching (one linear assignment per group on the inner products of A's and
        B's activations over one pass of ``data``; groups no single activation carries, such as
        attention heads, are then weight-matched).
    data : DataLoader, iterable of batches, Dataset or (inputs, labels) tensors
        Its first samples are what the network is traced on (its structure) and what the
        permuted B is checked on: B permuted must give B's outputs in eval and train mode
        (relative 1e-10 in float64, 1e-5 in float32), else ``FunctionChanged`` is raised naming
        the first operation that differs. Activation matching reads all of it (or
        ``num_samples``). Without data a ``spec`` must be given, and the alignment is unchecked.
    seed : int, default=0
        The order groups are visited in (weight matching).
    spec : PermutationSpec or dict, optional
        The structure, instead of tracing it: a :class:`PermutationSpec`, or Git Re-Basin's
        ``{state-dict key: (group or None per axis)}``.
    task, loss_fn : optional
        How a batch reaches the model (``task(model, batch)``); by default ``model(inputs)``
        for ``(inputs, labels)`` batches and ``model(**batch)`` for dicts.
    num_samples : int, optional
        Samples activation matching reads (default: all of ``data``).
    max_iter : int, default=100
        Weight-matching iterations at most.

    Returns
    -------
    Alignment
        ``Alignment.apply(model_b)`` is B in A's basis.

    Examples
    --------
    >>> import torch
    >>> from landscape import align
    >>> from landscape.connect import Alignment
    >>> from landscape.examples import MLP
    >>> torch.manual_seed(0)  # doctest: +ELLIPSIS
    <torch._C.Generator object at ...>
    >>> a = MLP(hidden=16)
    >>> data = (torch.rand(64, 64), torch.zeros(64, dtype=torch.long))
    >>> b = Alignment.random(a, data, seed=3).apply(a)     # a planted permutation
    >>> found = align(a, b, data=data)
    >>> aligned = found.apply(b)
    >>> all(torch.equal(aligned.state_dict()[k], t) for k, t in a.state_dict().items())
    True
    """
    caller = "align"
    check_pair(model_a, model_b, caller)
    check_param("method", method, [Options(METHODS)], caller=caller,
                hint="'weights' (Git Re-Basin's weight matching) or 'activations' (matching over data).")
    check_param("seed", seed, [Interval(int, 0, None)], caller=caller)
    check_param("num_samples", num_samples, [None, Interval(int, 1, None)], caller=caller)
    check_param("max_iter", max_iter, [Interval(int, 1, None)], caller=caller)
    a, b = unwrap_module(model_a), unwrap_module(model_b)
    given = check_spec(spec, a, caller)
    t = task_of(loss_fn, task, caller)
    if data is None and (given is None or method == "activations"):
        raise InvalidParameterError(
            f"The 'data' parameter of {caller} is required"
            + (" for activation matching" if method == "activations" else
               " to trace the network's structure and check the permuted model")
            + ". HINT: pass data=(inputs, labels) or a DataLoader; a few samples are enough for weight matching.")
    samples = None
    if data is not None:
        samples = samples_of(data, num_samples if method == "activations" else CHECK_SAMPLES, t, caller)
    batch = samples.batches[0] if samples is not None else None
    sp = given if given is not None else permutation_spec(a, _first(batch), t)
    sa, sb = _state(a), _state(b)
    keys = _param_keys(a, sp)
    if method == "weights":
        perms, iterations, history = weight_matching(sp, sa, sb, keys, seed=seed, max_iter=max_iter)
        how = dict.fromkeys(sp.groups, "weights")
    else:
        assert samples is not None
        perms, iterations, history, how = activation_matching(sp, a, b, sa, sb, samples.batches, t, keys,
                                                              seed=seed, max_iter=max_iter)
    out = Alignment(perms, sp, method, iterations, history, seed, None, how)
    if batch is not None:
        out.checked = check_function(b, sp, perms, _first(batch), t)
    return out


def _first(batch: Any) -> Any:
    """At most :data:`CHECK_SAMPLES` samples of a batch."""
    try:
        return slice_batch(batch, CHECK_SAMPLES)
    except ValueError:
        return batch


def _param_keys(model: nn.Module, spec: PermutationSpec) -> list[str]:
    """The parameters' keys (each tied tensor once) with a permuted axis: what weight matching reads
    (running statistics are permuted with their layer but do not vote)."""
    seen: set[int] = set()
    keys = []
    for name, p in model.named_parameters():
        if id(p) in seen:
            continue
        seen.add(id(p))
        if name in spec.axes and any(ax[0] != "fixed" for ax in spec.axes[name]):
            keys.append(name)
    return keys
