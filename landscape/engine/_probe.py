"""Whether a batched way gives the one-point values: the planner's probe (private).

A way of running a group of points (:data:`landscape.engine._batching.WAYS`) is used only
after it gave, on a probe of two samples at ``2 p`` points, the losses of the one-point path
within :data:`PROBE_RTOL`, and PyTorch did not warn while it ran (a vmap without a batching
rule runs point by point); where it fails, the reason names the layer. A landscape evaluated
by one engine in this process needs no probe: its engine checks the way the same way on the
landscape's own first group, at two of its points (:attr:`EngineSpec.verify`), and the planner
only picks the first way that applies (:func:`first_applicable_way`); a way refused there is
probed out as here, and the next one used.

The probe is made to cost little next to a small landscape: the one-point path runs once per
plan (:func:`_reference`), on one engine whose network copy, released, is lent to the first
batched way checked, with the random directions drawn once; a way that does not apply is
refused from the one-point engine's modules, without an engine of its own. The values are
those of engines built for the probe from scratch, bit for bit (a test says so).
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import functools
import logging
import warnings
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from torch import nn

from landscape.engine._batching import BATCHINGS, WAYS, inapplicable
from landscape.engine._data import Samples
from landscape.engine._engine import AGREE_RTOL, Engine, EngineSpec, disagreement, group_size
from landscape.tasks import Supervised, batch_size, tensors_in

__all__ = ["verify_way", "first_working_way", "first_applicable_way", "probe_points", "PROBE_RTOL", "shared_probes"]
_log = logging.getLogger("landscape")

#: Relative agreement a batched way must reach with the one-point path on the probe.
PROBE_RTOL = AGREE_RTOL


def probe_points(k: int) -> np.ndarray:
    """``k`` points ``(a, b)`` in [-1, 1), always the same (a new array: the caller may write it)."""
    return _probe_points(k).copy()


@functools.lru_cache(maxsize=64)
def _probe_points(k: int) -> np.ndarray:
    # made once per k: a generator costs about 0.15 ms, a probe of a small landscape a few ms in all
    return np.random.default_rng(12345).uniform(-1.0, 1.0, (k, 2)).astype(np.float64)


@contextlib.contextmanager
def _innermost_layer(root: nn.Module) -> Iterator[list[str]]:
    """The names of the modules whose forward is running (innermost last), kept by hooks while
    the block runs; after an exception the list still says where it happened."""
    names = {id(m): name or type(root).__name__ for name, m in root.named_modules()}
    stack: list[str] = []

    def enter(mod: nn.Module, _args: Any) -> None:
        stack.append(f"{names.get(id(mod), '?')} ({type(mod).__name__})")

    def leave(_mod: nn.Module, _args: Any, _out: Any) -> None:  # returns None: the output stays the module's
        if stack:
            stack.pop()

    handles = []
    for m in root.modules():
        handles.append(m.register_forward_pre_hook(enter))
        handles.append(m.register_forward_hook(leave))
    try:
        yield stack
    finally:
        for h in handles:
            h.remove()


def _probe_spec(spec: EngineSpec) -> EngineSpec:
    probe = spec.samples.first(2)
    two = Samples([probe], [batch_size(probe, spec.task)])
    bn = None if spec.bn_samples is None else spec.bn_samples.first(2)
    bn_two = None if bn is None else Samples([bn], [batch_size(bn, spec.task)])
    return dataclasses.replace(spec, samples=two, bn_samples=bn_two, metrics={}, points_per_call=1, batching=None,
                               stream=False, memory_format="contiguous")


def _run_probe(make: Callable[[], Engine], pts: np.ndarray
               ) -> tuple[Engine | None, np.ndarray | None, str | None, list[str]]:
    """The engine ``make()`` builds and its losses at ``pts``, or None and why (with the layer where
    it failed); and PyTorch's warnings."""
    where: list[str] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            eng = make()
            if eng.p > 1:
                eng.group_fn()  # a way that does not apply says why here
            try:
                return eng, eng.evaluate(pts)["loss"], None, [str(w.message) for w in caught]
            except Exception:
                where = _where_it_fails(eng, pts)
                raise
        except Exception as exc:
            at = f" in layer {where[-1]}" if where else ""
            return None, None, f"{type(exc).__name__}{at}: {exc}", []


def _where_it_fails(eng: Engine, pts: np.ndarray) -> list[str]:
    """The modules whose forward was running (innermost last) when ``eng.evaluate(pts)``, run again under
    :func:`_innermost_layer`'s hooks, failed; empty when it does not fail again. Hooked only after a
    failure: on a probe that passes, the hooks would cost every module call of it."""
    with _innermost_layer(eng.run_modules) as stack:
        try:
            eng.evaluate(pts)
        except Exception:
            return list(stack)
    return []


@dataclass
class _Probe:
    """The one-point path run once on the probe; the batched ways are checked against it (:func:`_check_way`).

    Attributes
    ----------
    spec : EngineSpec
        Two samples, one point per call; the directions held (a recipe's drawn once, by the one-point engine).
    pts : ndarray
        The probe's ``2 p`` points.
    reference : ndarray or None
        The one-point losses at ``pts``; None: the one-point path failed, and ``why`` says how.
    why : str or None
    unavailable : dict
        Why each way does not apply (:attr:`landscape.engine._batching.Way.unavailable`, None: it
        may), read on the one-point engine: what a batched engine would raise, without building it.
        Empty where a batched engine would fail or run one point per call before asking.
    lent : nn.Module or None
        The one-point engine's network, released: the next batched way's engine runs on it (a way
        may fold it in place, so it is lent once; later ways build their own).
    """

    spec: EngineSpec
    pts: np.ndarray
    reference: np.ndarray | None
    why: str | None = None
    unavailable: dict[str, str | None] = field(default_factory=dict)
    lent: nn.Module | None = None


def _reference(spec: EngineSpec, p: int) -> _Probe:
    """The one-point losses at the probe's ``2 p`` points, on one engine over one copy of the network."""
    base = _probe_spec(spec)
    pts = probe_points(2 * p)

    def one_point() -> Engine:
        # its draw kept only as a small network's is: a large one would outlive the probe while workers evaluate
        eng = Engine(base, "cpu", keep_draw=False)
        # the moved tensors written at each of the few points: the values the lazy reads give (both are
        # point_value; where those fail, the engine writes them so too), without parametrizing the network
        # and running a forward to see how it reads them
        eng.points.form = "in place"
        return eng

    eng, reference, why, _ = _run_probe(one_point, pts)
    if eng is None:
        return _Probe(base, pts, None, why)
    eng.points.release()
    dirs = eng.points.dirs
    if dirs.lean:  # memory="lean" refuses several points per call when a batched engine is built
        return _Probe(base, pts, reference)
    # each direction held whole, or None throughout when it is zero (then given as empty)
    v, w = ([t for t in held if t is not None] for held in dirs.held)
    base = dataclasses.replace(base, v=v, w=w, recipe=None)
    if group_size(dataclasses.replace(base, points_per_call=p)) == 1:
        # train mode or statistics recomputed at every point: a "batched" engine runs one point per call,
        # on its own copy (the reference's may hold the last point's batch statistics)
        return _Probe(base, pts, reference)
    unavailable = {way: WAYS[way].unavailable(eng) for way in BATCHINGS}
    return _Probe(base, pts, reference, None, unavailable, eng.net)


def _check_way(probe: _Probe, way: str, p: int) -> str | None:
    """Why running groups of ``p`` points ``way`` does not give the probe's one-point values (None: it does)."""
    if probe.reference is None:
        return f"the one-point path fails on a probe ({probe.why})"
    unavailable = probe.unavailable.get(way)
    if unavailable is not None:
        exc = inapplicable(way, [f"{way}: {unavailable}"])
        return f"{type(exc).__name__}: {exc}"
    net, probe.lent = probe.lent, None
    spec = dataclasses.replace(probe.spec, points_per_call=p, batching=way)
    _, got, why, warned = _run_probe(lambda: Engine(spec, "cpu", network=net), probe.pts)
    if got is None:
        return why
    return disagreement(got, probe.reference, warned)


def verify_way(spec: EngineSpec, way: str, p: int) -> str | None:
    """Why running groups of ``p`` points ``way`` does not give the one-point values of ``spec``'s
    network and task on a probe of two samples (None: it does)."""
    return _check_way(_reference(spec, p), way, p)


#: Within :func:`shared_probes`: :func:`first_working_way`'s answers, by what the probe depends on.
_SHARED: contextvars.ContextVar[dict[Any, str | None] | None] = contextvars.ContextVar("landscape_shared_probes",
                                                                                       default=None)


@contextlib.contextmanager
def shared_probes() -> Iterator[None]:
    """Within the block, :func:`first_working_way` probes once per network, task, samples' shapes, moved
    tensors and setting, and gives that answer to the landscapes of the block that share them (the
    landscapes of one generation: PCA, random and view landscapes of the same run). Whether a way gives
    the one-point values is a property of the network's layers and the task, not of the directions'
    values, which are all that differs between those landscapes; each landscape's plan is recorded in its
    metadata as before, and a resumed one reads it from there."""
    token = _SHARED.set({})
    try:
        yield
    finally:
        _SHARED.reset(token)


@dataclass
class _Modules:
    """The network's modules as :attr:`~landscape.engine._batching.Way.unavailable` reads them
    (:class:`~landscape.engine._batching.Modules`): nothing copied, nothing run."""

    net: nn.Module
    names: list[str]
    sup: Supervised | None
    eval_mode: bool


def first_applicable_way(spec: EngineSpec, exclude: Collection[str] = ()) -> str | None:
    """The first way, in preference order and not in ``exclude``, that applies to ``spec``'s network
    and task, judged from its modules alone (no probe: whether it gives the one-point values is then
    checked on the landscape's first group, :attr:`~landscape.engine._engine.EngineSpec.verify`)."""
    sup = spec.task if isinstance(spec.task, Supervised) else None
    modules = _Modules(spec.network, list(spec.names), sup, spec.eval_mode)
    for way in BATCHINGS:
        if way in exclude:
            continue
        why = WAYS[way].unavailable(modules)
        if why is None:
            return way
        _log.info("batching %r not used: %s", way, why)
    return None


def _probe_key(spec: EngineSpec, p: int) -> tuple:
    probe = spec.samples.first(2)
    shapes = tuple((tuple(t.shape), str(t.dtype)) for t in tensors_in(probe))
    dims = spec.recipe.dims if spec.recipe is not None else 1 + bool(len(spec.w))
    return (id(spec.network), id(spec.task), tuple(spec.names), p, shapes, dims, spec.eval_mode, spec.memory,
            spec.bn_statistics, tuple(sorted(spec.metrics)), tuple(str(spec.centre[n].dtype) for n in spec.names))


def first_working_way(spec: EngineSpec, p: int, exclude: Collection[str] = ()) -> str | None:
    """The first way, in preference order and not in ``exclude``, that applies and gives the
    one-point values on the probe (None: none does). The ways after it are not probed: only the
    first is used. Within :func:`shared_probes`, a landscape like one probed before gets that
    answer without a probe."""
    shared = _SHARED.get()
    if shared is None:
        return _first_working_way(spec, p, exclude)
    key = (_probe_key(spec, p), tuple(sorted(exclude)))
    if key in shared:
        _log.info("batching: %s, as probed for an earlier landscape of this call", shared[key])
    else:
        shared[key] = _first_working_way(spec, p, exclude)
    return shared[key]


def _first_working_way(spec: EngineSpec, p: int, exclude: Collection[str]) -> str | None:
    probe = _reference(spec, p)
    if probe.reference is None:
        _log.info("probe of the one-point path failed (%s); one point per call", probe.why)
        return None
    for way in BATCHINGS:
        if way in exclude:
            continue
        reason = _check_way(probe, way, p)
        if reason is None:
            return way
        _log.info("batching %r not used: %s", way, reason)
    return None
