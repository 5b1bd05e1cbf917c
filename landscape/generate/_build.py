"""Building landscapes: define each one on rank 0, evaluate its points, assemble it (private core).

:func:`run_jobs` is the one path of every generation: for each :class:`LandscapeJob`,
:func:`build_landscape` asks the store what it holds (finished, unfinished, absent), defines
what is absent (directions and points by the view's builder, then the evaluation plan),
evaluates the points not done through the executor (finished chunks flushed to the store),
and assembles the :class:`Landscape`. Inputs are validated by the entry points.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from landscape.curvature import hessian_axes
from landscape.engine import (
    CLAMPED,
    EngineSpec,
    WayRefused,
    choose_memory,
    choose_plan,
    is_sharded,
    network_at,
    plan_key,
    point_value,
    shared_probes,
    verify_way,
)
from landscape.execution import Executor
from landscape.generate._jobs import LandscapeJob, Problem
from landscape.geometry import (
    DRAWS,
    SeededDirections,
    ViewInputs,
    centre_state,
    check_keys,
    moved_names,
    shared_draws,
    view_geometry,
)
from landscape.io import Partial, Store, jsonable, kept_directions, model_digest, shared_draws_kept, task_name
from landscape.result import Landscape, LossPath

__all__ = ["run_jobs", "build_landscape", "chunk_bounds", "grid_slices", "slice_centre"]
_log = logging.getLogger("landscape")
#: Chunks per worker: a finished chunk is flushed to the store and counted by the progress bar, so
#: many small ones lose little to a kill; a chunk is never smaller than one group of points.
CHUNKS_PER_WORKER = 32
#: Bytes of moved parameters up to which a landscape kept in memory only (no store) hashes its directions
#: when first asked for, from a copy of its centre made at the end of the call (16 MiB: 4 million float32
#: parameters, the digits MLP to a small CNN; a copy there takes about a millisecond).
LAZY_DIGEST_BYTES = 16 << 20


def run_jobs(problem: Problem, jobs: Sequence[LandscapeJob], ex: Executor, *, store: Store | None = None,
             fingerprints: Mapping[str, Mapping[str, Any]] | None = None,
             stats: dict[str, dict[str, int]] | None = None) -> list[Landscape]:
    """Every job's landscape, in order; ``stats[tag]`` receives the points evaluated and the
    landscape's points. The caller holds ``ex`` and ``store`` (and flushes the store)."""
    results = []
    # the landscapes of one problem share the network, the task and the samples: the batched ways are
    # probed once for all of them (landscape.engine.shared_probes)
    with shared_probes():
        for job in jobs:
            st: dict[str, int] = {}
            fp = (fingerprints or {}).get(job.tag or "")
            results.append(build_landscape(problem, job, ex, store=store, fingerprint=fp, stats=st))
            if stats is not None:
                stats[job.tag or ""] = {"evaluated": st["evaluated"], "points": st["points"]}
    return results


def _moved(problem: Problem, job: LandscapeJob) -> list[str]:
    geo = job.geometry
    # views through models move buffers (batch-norm statistics) too, unless they stay A's or are re-estimated
    buffers = geo.through_models and geo.bn_statistics in ("clamped", "affine")
    return moved_names(problem.network, geo.ignore, geo.include, buffers=buffers)[0]


def build_landscape(problem: Problem, job: LandscapeJob, ex: Executor, *, store: Store | None = None,
                    fingerprint: Mapping[str, Any] | None = None, stats: dict[str, int] | None = None) -> Landscape:
    """One landscape: finished already (the store's), resumed, or defined and evaluated here.

    ``stats`` receives the points evaluated in this call (by all ranks), those of this
    process, and the landscape's points.
    """
    names = _moved(problem, job)
    # kept in memory only, a small network's directions are hashed when first asked for (a copy of its centre
    # kept till then: landscape.io.kept_directions' lazy), a larger one's draw before normalization (drawn
    # again from the recipe then: its lazy_draw), so no draw is hashed as it is drawn
    params = dict(problem.network.named_parameters())
    lazy = store is None and sum(params[n].numel() * params[n].element_size() for n in names
                                 if n in params) <= LAZY_DIGEST_BYTES
    # a small network's random directions are drawn once for the plan's probe, the engine and the
    # digests kept (landscape.io.shared_draws_kept): a 3x3 landscape's fixed cost is mostly such draws
    with shared_draws() if store is None else shared_draws_kept():
        return _build(problem, job, ex, names, store=store, fingerprint=fingerprint, stats=stats, lazy=lazy)


def _build(problem: Problem, job: LandscapeJob, ex: Executor, names: list[str], *, store: Store | None,
           fingerprint: Mapping[str, Any] | None, stats: dict[str, int] | None, lazy: bool) -> Landscape:
    tag = job.tag or "landscape"
    metrics = _usable_metrics(problem.metrics)
    # a network sharded over the group: each rank keeps its own shards as the centre (nothing is sent)
    sharded = is_sharded(problem.network)

    def decide() -> Any:
        """On rank 0: a finished landscape, or (definition, centre, whether defined now) with the points
        done."""
        state = store.check(tag, fingerprint or {}) if store is not None else "absent"
        if state == "complete":
            assert store is not None
            _log.info("%s: already complete in %s", job.label, store.path)
            return store.load_complete(tag)
        if state == "partial":
            assert store is not None
            part = store.load_partial(tag)
            _log.info("%s: resuming, %d of %d points done", job.label, int(part.done.sum()), len(part.done))
            return part, None if sharded else _shareable(centre_state(problem.network, job.geometry, names,
                                                                      job.label), ex), False
        part, centre = _define(problem, job, names, ex, store)
        counted = [CLAMPED] if _bn_setting(job.geometry, problem.network) == "clamped" and not sharded else []
        part.values = {k: np.full(len(part.points), np.nan) for k in ["loss", *metrics, *counted]}
        if store is not None:
            store.begin(tag, fingerprint or {}, part)
        return part, None if sharded else _shareable(centre, ex), True

    got = ex.on_root(decide)
    if isinstance(got, Landscape):
        if stats is not None:
            stats.update(evaluated=0, by_this_process=0,
                         points=got.z.size + (len(got.path.z) if got.path is not None else 0))
        return got
    part, centre, defined = got
    if centre is None:
        centre = centre_state(problem.network, job.geometry, names, job.label)
    run = _Evaluation(problem, job, part, centre, names, metrics, ex, store, fingerprint or {})
    todo = evaluated = 0
    # a plane, a line (one slice of all the points), or each plane of an n-D grid in turn around its own
    # centre: the base centre moved along the later directions (grid_slices)
    for lo, hi, moved in grid_slices(part):
        if part.done[lo:hi].all():
            continue
        at = centre if not moved else slice_centre(centre, names, part.more, moved)
        spec = run.checked(_engine_spec(problem, job, part, at, names, metrics, ex), defined)
        try:
            counts = run.evaluate(spec, lo, hi)
        except WayRefused as refused:  # on the first group, before any value was kept
            spec = run.replan(spec, refused.way, refused.reason, centre=at)
            counts = run.evaluate(spec, lo, hi)
        todo, evaluated = todo + counts[0], evaluated + counts[1]
        del at, spec
    if stats is not None:
        stats.update(evaluated=todo, points=len(part.points), by_this_process=evaluated)
    result = assemble(part, part.values, job.tag)
    bad, total = result.non_finite
    if bad and ex.root:  # kept as they are (never dropped or filled): said once, as the plots mark them
        _log.warning("%s: %d of %d points non-finite (NaN or infinite loss)", job.label, bad, total)
    clamped, channels = result.clamped_points
    if clamped and ex.root:  # values of a clamped network, not of the models' statistics: said as the plots mark them
        _log.warning("%s: %d of %d points with batch-norm running variances clamped at zero (up to %d channels; "
                     "bn_statistics='recompute' estimates them at every point instead)", job.label, clamped,
                     result.z.size, channels)
    if ex.root and not sharded:  # kept for an audit (Landscape.directions): landscape/io/_directions.py
        result.directions_source = kept_directions(part, names, centre, _recipe(part.md, names), lazy=lazy,
                                                     lazy_draw=store is None)
    if store is not None and ex.root:
        store.finish(result, fingerprint or {})
    return result


@dataclass
class _Evaluation:
    """The points of one defined landscape: evaluated (and kept) through the executor, with its
    heuristic plan's way checked before any of its values is kept."""

    problem: Problem
    job: LandscapeJob
    part: Partial
    centre: Mapping[str, torch.Tensor]
    names: list[str]
    metrics: Mapping[str, Any]
    ex: Executor
    store: Store | None
    fingerprint: Mapping[str, Any]

    def checked(self, spec: EngineSpec, defined: bool) -> EngineSpec:
        """``spec`` with its way to be checked by the engine on the landscape's first group when one
        engine here evaluates it (the planner probed nothing then); planned again without the way
        when a landscape defined elsewhere (a resume of one that kept no point) gives other values
        on the probe."""
        heuristic = self.part.md.get("plan") == "heuristic" and not self.part.done.any()
        way = spec.batching if heuristic else None
        if way is None:
            return spec
        if self.ex.here:
            return dataclasses.replace(spec, verify=True)
        if not defined:
            why = verify_way(self._planning(spec), way, min(spec.points_per_call, 4))
            if why is not None:
                return self.replan(spec, way, why)
        return spec

    def _planning(self, spec: EngineSpec) -> EngineSpec:
        return dataclasses.replace(spec, samples=self.problem.samples, metrics={}, verify=False)

    def replan(self, spec: EngineSpec, refused: str, why: str,
               centre: Mapping[str, torch.Tensor] | None = None) -> EngineSpec:
        """The plan again without the way ``refused`` (on the probe: nothing is evaluated yet), recorded;
        ``centre``: the one the spec evaluates around (an n-D grid's slice), default the landscape's."""
        part, tag = self.part, self.job.tag or "landscape"
        _log.info("%s: batching %r not used: %s", self.job.label, refused, why)
        part.md.update(choose_plan(self._planning(spec), n_points=len(part.points), device=self.ex.device,
                                   exclude=(refused,)).metadata())
        if self.store is not None and self.ex.root:
            self.store.begin(tag, self.fingerprint, part)  # its definition written again with this plan
        return _engine_spec(self.problem, self.job, part, self.centre if centre is None else centre, self.names,
                            self.metrics, self.ex)

    def evaluate(self, spec: EngineSpec, first: int = 0, last: int | None = None) -> tuple[int, int]:
        """The points ``first:last`` not done, evaluated and kept: (points to do, points this process
        evaluated). The engine takes their first two coordinates (an n-D grid's slice: ``spec``'s centre
        holds the others)."""
        part, ex, store, job = self.part, self.ex, self.store, self.job
        last = len(part.points) if last is None else last
        # chunks are what a store flushes (and a kill loses at most one of); evaluated here with no store, one
        # chunk: each is a call of the engine (about 40 us: a tenth of a 3x3 landscape's fixed cost on the MLP)
        chunks = chunk_bounds(part.done[first:last], spec.points_per_call, ex.workers,
                              per_worker=1 if store is None and ex.here else CHUNKS_PER_WORKER)
        todo = sum(hi - lo for _, lo, hi in chunks)
        _log.info("%s: %d of %d points to evaluate, %d per call, %d chunk(s)", job.label, todo, last - first,
                  spec.points_per_call, len(chunks))
        values = part.values
        writing = store is not None and ex.root and bool(chunks)
        with store.chunks(job.tag or "landscape") if writing else contextlib.nullcontext() as flush:  # type: ignore[union-attr]

            def on_chunk(lo: int, hi: int, res: Mapping[str, np.ndarray]) -> None:
                # what the landscape's definition stores (a resume of one begun before clamps were counted
                # has no place for them: its ``clamped`` stays unknown, None)
                res = {k: arr for k, arr in res.items() if k in values}
                for k, arr in res.items():
                    values[k][first + lo:first + hi] = arr
                if flush is not None:
                    flush(first + lo, first + hi, res)

            points = np.ascontiguousarray(part.points[first:last, :2])
            return todo, ex.run(spec, points, chunks, job.label, on_chunk)


def _bn_setting(geo: Any, network: torch.nn.Module) -> str | None:
    """The engine's ``bn_statistics``: the view's on a view through models whose network keeps
    batch-norm running statistics, else None (nothing to carry, clamp or estimate again: a network
    without them is evaluated as any other, several points per call where the plan says so)."""
    if not geo.through_models:
        return None
    bns = (m for m in network.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm))
    return geo.bn_statistics if any(m.track_running_stats for m in bns) else None


def _shareable(centre: Mapping[str, torch.Tensor], ex: Executor) -> Mapping[str, torch.Tensor]:
    """The centre as rank 0 sends it to the other ranks: in host memory (a CUDA tensor would be
    restored on rank 0's device)."""
    if ex.dist is None:
        return centre
    return {k: t.cpu() for k, t in centre.items()}


def _recipe(md: Mapping[str, Any], names: Sequence[str]) -> SeededDirections | None:
    """The random directions' recipe a landscape's metadata records (None: its directions are stored)."""
    draw = md.get("direction_draw")
    if draw not in DRAWS or int(md.get("dims", 2)) > 2:  # an n-D grid holds its drawn directions
        return None
    # a landscape begun before the per-block draw keeps its per-tensor draw (a resume gives the same bits)
    return SeededDirections(int(md["seed"]), str(md["normalization"]), str(md.get("biasbn", "normalize")),
                            tuple(names), int(md.get("dims", 2)), str(draw))


def _engine_spec(problem: Problem, job: LandscapeJob, part: Partial, centre: Mapping[str, torch.Tensor],
                 names: list[str], metrics: Mapping[str, Any], ex: Executor) -> EngineSpec:
    """What the engine needs, from the landscape's stored definition (so a resume is the same)."""
    md = part.md
    p, eval_batch = int(md["points_per_call"]), int(md["eval_batch"])
    geo = job.geometry
    recipe = _recipe(md, names)
    shapes = [tuple(centre[n].shape) for n in names]
    v, w = ([], []) if recipe is not None else (_unflat(part.v, shapes), _unflat(part.w, shapes))
    memory = choose_memory(problem.memory, recipe, [centre[n] for n in names], points_per_call=p,
                           device=ex.device, workers=ex.workers_per_memory, label=job.label)
    return EngineSpec(network=problem.network, task=problem.task, metrics=metrics,
                      samples=problem.samples.rebatch(eval_batch), names=names, centre=centre, v=v, w=w,
                      eval_mode=problem.eval_mode, points_per_call=p, seed=geo.seed,
                      batching=md.get("batching") if p > 1 else None,
                      memory_format=str(md.get("memory_format") or "contiguous"),
                      bn_statistics=_bn_setting(geo, problem.network), recipe=recipe, memory=memory,
                      bn_samples=None if problem.bn_samples is None else problem.bn_samples.rebatch(eval_batch))


def _define(problem: Problem, job: LandscapeJob, names: list[str], ex: Executor,
            store: Store | None) -> tuple[Partial, Mapping[str, torch.Tensor]]:
    """The landscape's definition (metadata, axes, points, directions, plan) and its centre."""
    geo, label, device = job.geometry, job.label, ex.device
    network, samples = problem.network, problem.samples
    centre = centre_state(network, geo, names, label)
    check_keys(network, centre, what=f"the centre of {label}")
    md: dict[str, Any] = {"unit": job.unit, "step_per_epoch": job.step_per_epoch,
                          "normalization": geo.normalization, "ignore": _patterns_text(geo.ignore),
                          "num_samples": samples.n, "samples_digest": samples.digest(), "landscape_size": int(geo.size),
                          "eval_mode": bool(problem.eval_mode), "moved_parameters": names}
    if geo.biasbn != "normalize":
        md["biasbn"] = geo.biasbn
    if geo.include is not None:
        md["include"] = list(geo.include)
    if geo.through_models:
        md["bn_statistics"] = geo.bn_statistics
    if problem.bn_samples is not None:  # the statistics' own samples (a test line's, the training samples)
        md.update(bn_num_samples=problem.bn_samples.n, bn_samples_digest=problem.bn_samples.digest())

    def hessian(k: int) -> tuple[list[list[torch.Tensor]], dict[str, Any]]:
        # on the landscape's device, in its mode (Lanczos seeded by the landscape's seed)
        net = network_at(network, centre, torch.device(device)).train(not problem.eval_mode)
        dirs, eig = hessian_axes(net, problem.task, samples, names, k=k, seed=geo.seed)
        return dirs, {"hessian_eigenvalues": [float(e) for e in eig.eigenvalues],
                      "hessian_residuals": [float(r) for r in eig.residuals]}

    view = view_geometry(ViewInputs(network, geo, names, centre, label, job.intervals,
                                    hessian=hessian if geo.kind == "hessian" else None))
    md.update(view.md)
    md = {"decomposition": md.pop("decomposition"), **md}
    if job.intervals is not None:
        md["checkpoint_steps"] = list(job.intervals)
    # a line's w is zero: empty, not stored; random directions are their recipe (nothing held here)
    memory = choose_memory(problem.memory, view.recipe, [centre[n] for n in names], points_per_call=None,
                           device=device, workers=ex.workers_per_memory, label=label)
    spec = EngineSpec(network=network, task=problem.task, metrics={}, samples=samples, names=names, centre=centre,
                      v=view.v, w=view.w, eval_mode=problem.eval_mode, seed=int(geo.seed),
                      bn_statistics=_bn_setting(geo, network), recipe=view.recipe,
                      memory=memory, bn_samples=problem.bn_samples)
    # one engine here evaluates it: the way is checked on its first group, not on a probe (build_landscape)
    md.update(_plan(problem, spec, len(view.points), device, store, defer=ex.here))
    if torch.device(device).type == "cpu":  # with the plan, what makes the values the same bit for bit
        md["threads"] = ex.eval_threads
    if is_sharded(network):  # the ranks' shares of the samples: their sums are added in another order
        md["sample_shares"] = ex.workers
    del spec
    more = np.stack([_flat(d) for d in view.more]) if view.more else np.zeros((0, 0), dtype=np.float32)
    part = Partial(md=jsonable(md), x=view.x, y=view.y, points=view.points, n_path=view.n_path,
                   intervals=view.intervals, v=_flat(view.v), w=_flat(view.w), values={},
                   done=np.zeros(len(view.points), dtype=bool), more=more)
    return part, centre


def _plan(problem: Problem, spec: EngineSpec, n_points: int, device: str, store: Store | None, *,
          defer: bool = False) -> dict[str, Any]:
    """The evaluation plan's metadata: ``plan="tune"`` reuses a tuned plan the store recorded for
    the same network, task, samples' shapes, moved tensors, points and device kind. A sharded
    network runs one point per call on each rank's share of the samples (all in one batch, or the
    plan dict's ``eval_batch``): probing it would need every rank."""
    mode = problem.plan
    if is_sharded(problem.network):
        given = isinstance(mode, Mapping)
        eval_batch = int(mode.get("eval_batch") or spec.samples.n) if given else spec.samples.n
        return {"points_per_call": 1, "eval_batch": eval_batch, "batching": None, "memory_format": "contiguous",
                "plan": "given" if given else "heuristic"}
    if mode != "tune":
        return choose_plan(spec, n_points=n_points, device=device, mode=mode, defer=defer).metadata()
    key = plan_key(spec, n_points, device, model_digest(problem.network), task_name(problem.task))
    recorded = store.recorded_plan(key) if store is not None else None
    if recorded is not None:
        _log.info("plan: reusing the tuned plan recorded in %s: %s", store.path if store else "", recorded)
        md = choose_plan(spec, n_points=n_points, device=device, mode=recorded).metadata()
        md["plan"] = "tuned"
    else:
        md = choose_plan(spec, n_points=n_points, device=device, mode="tune").metadata()
    md["plan_key"] = key
    return md


def _patterns_text(ignore: str | Sequence[str] | None) -> str | list[str]:
    """How the metadata records ``ignore``: "none", one pattern, or the list."""
    if ignore is None:
        return "none"
    return ignore if isinstance(ignore, str) else list(ignore)


def _flat(ts: list[torch.Tensor]) -> np.ndarray:
    """The tensors as one float32 vector (what the store keeps). The list is emptied as it is
    copied, so the tensors and the vector are not both held whole."""
    out = np.empty(sum(t.numel() for t in ts), dtype=np.float32)
    o = 0
    while ts:
        t = ts.pop(0)
        out[o:o + t.numel()] = t.detach().reshape(-1).to("cpu", torch.float32).numpy()
        o += t.numel()
        del t
    return out


def _unflat(flat: np.ndarray, shapes: Sequence[tuple[int, ...]]) -> list[torch.Tensor]:
    """Split a stored flat direction into views shaped ``shapes``; an empty one (a line's ``w``) is
    empty: a zero direction."""
    if np.size(flat) == 0:
        return []
    t = torch.from_numpy(np.ascontiguousarray(flat, dtype=np.float32))
    out, o = [], 0
    for shape in shapes:
        k = math.prod(shape)
        out.append(t[o:o + k].reshape(shape))
        o += k
    if o != t.numel():
        raise ValueError(f"stored directions hold {t.numel()} values; the moved parameters need {o}.")
    return out


def grid_slices(part: Partial) -> list[tuple[int, int, tuple[float, ...]]]:
    """The landscape's points as the engine evaluates them: ``(lo, hi, moved)``, points ``lo:hi`` around
    the centre moved by ``moved`` along the later directions. One slice of every point for a line or a
    plane (``moved`` empty); for an n-D grid one plane of ``len(x) * len(y)`` points per value of its
    later axes (each point's third and later coordinates), then its extra points (the centre, when no
    grid point is at 0) one by one."""
    n = len(part.points)
    if not np.size(part.more):
        return [(0, n, ())]
    plane = np.size(part.x) * np.size(part.y)
    out = []
    for lo in range(0, n, plane):
        hi = min(n, lo + plane)
        later = part.points[lo:hi, 2:]
        if not (later == later[0]).all():  # the extra points after the grid: each alone
            out += [(i, i + 1, tuple(float(c) for c in part.points[i, 2:])) for i in range(lo, hi)]
            continue
        out.append((lo, hi, tuple(float(c) for c in later[0])))
    return out


def slice_centre(centre: Mapping[str, torch.Tensor], names: Sequence[str], more: np.ndarray,
                 moved: Sequence[float]) -> dict[str, torch.Tensor]:
    """``centre`` moved along the later directions ``more`` (flat float32 rows) by ``moved``: each moved
    tensor ``(c + m_3 u_3) + m_4 u_4 ...``, each term added with one rounding in float32 (float64 for a
    float64 tensor) then rounded to the tensor's dtype (:func:`landscape.engine.point_value`); a zero
    coefficient's term skipped, so at 0 the centre itself. One more model size, held while its plane is
    evaluated."""
    out = dict(centre)
    offsets = [0]
    for n in names:
        offsets.append(offsets[-1] + centre[n].numel())
    for i, n in enumerate(names):
        t = centre[n]
        for row, coef in zip(more, moved):
            if coef != 0.0:
                d = torch.from_numpy(np.ascontiguousarray(row[offsets[i]:offsets[i + 1]])).reshape(t.shape)
                t = point_value(t, None, d.to(t.device), 0.0, float(coef))
        out[n] = t
    return out


def chunk_bounds(done: np.ndarray, p: int, workers: int, per_worker: int = CHUNKS_PER_WORKER
                 ) -> list[tuple[int, int, int]]:
    """Chunks (number, lo, hi) of the points not done. Chunk starts are multiples of the
    group size ``p``, so every group is evaluated with the same partners as in a run
    without interruption (the values do not depend on the chunks); each worker gets about
    ``per_worker`` chunks."""
    m = len(done)
    chunk = p * max(1, math.ceil(m / (p * max(1, workers) * max(1, per_worker))))
    out: list[tuple[int, int, int]] = []
    for i, lo in enumerate(range(0, m, chunk)):
        hi = min(m, lo + chunk)
        # a chunk partly done (a rerun with another worker count): only its missing groups
        g0 = lo
        while g0 < hi:
            g1 = min(hi, g0 + p)
            if not done[g0:g1].all():
                if out and out[-1][0] == i and out[-1][2] == g0:
                    out[-1] = (i, out[-1][1], g1)
                else:
                    out.append((i, g0, g1))
            g0 = g1
    return out


def assemble(part: Partial, values: Mapping[str, np.ndarray], tag: str | None) -> Landscape:
    """The Landscape from the points' values: the grid, the path, the markers and the centre
    (``md["layout"]``)."""
    md = dict(part.md)
    layout = md.pop("layout", None) or {}
    x, y = np.asarray(part.x), np.asarray(part.y)
    line = y.size == 0
    extra = tuple(np.linspace(float(lo), float(hi), int(n)) for lo, hi, n in md.get("axis_ranges") or [])
    shape = (x.size,) if line else (*(a.size for a in extra[::-1]), y.size, x.size)
    n_grid = math.prod(shape)
    loss = values["loss"]
    z = loss[:n_grid].reshape(shape)
    # a metric where the loss is not finite is not a value (the argmax of NaN logits is class 0): NaN too
    finite = np.isfinite(loss[:n_grid]).reshape(shape)
    surfaces = {k: np.where(finite, a[:n_grid].reshape(shape), np.nan)
                for k, a in values.items() if k not in ("loss", CLAMPED)}
    channels = values.get(CLAMPED)
    clamped = None if channels is None or not np.isfinite(channels[:n_grid]).all() else \
        channels[:n_grid].astype(np.int64).reshape(shape)
    path = None
    paths: dict[str, LossPath] = {}
    if part.n_path:
        pts, zs = part.points[n_grid:n_grid + part.n_path], loss[n_grid:n_grid + part.n_path]
        steps = list(part.intervals or [])
        counts = md.get("runs") or {"": part.n_path}  # several runs: their paths one after the other
        o = 0
        for name, c in counts.items():
            paths[name] = LossPath(pts[o:o + c, 0].copy(), pts[o:o + c, 1].copy(), zs[o:o + c].copy(), steps[o:o + c])
            o += c
        path = next(iter(paths.values()))
        if "runs" not in md:
            paths = {}
    markers = {str(k): (float(px), float(py), float(loss[int(i)]))
               for k, (px, py, i) in (layout.get("markers") or {}).items()}
    if layout.get("centre") is not None:  # the trained weights (or model A) exactly, for plots
        cx, cy, ci = layout["centre"]
        md["centre"] = [float(cx), float(cy), float(loss[int(ci)])]
    rule = layout.get("convergence", "path" if part.n_path else "mindspore")
    if isinstance(rule, list):
        conv = (float(rule[0]), float(rule[1]), float(loss[int(rule[2])]))
    elif rule == "path":
        assert path is not None
        conv = (0.0, 0.0, float(path.z[-1]))
    else:  # MindSpore's Random landscape: the grid point at index size // 2 of both axes
        h = x.size // 2
        conv = (float(x[h]), float(y[h]), float(z[h, h]))
    return Landscape(x=x, y=y, z=z, path=path, convergence_point=conv, metadata=md, surfaces=surfaces, tag=tag,
                     markers=markers, paths=paths, clamped=clamped, extra_axes=extra)


def _usable_metrics(metrics: Mapping[str, Any]) -> dict[str, Any]:
    """Metrics computed on (outputs, labels); loss-input metrics (the loss itself) dropped."""
    return {k: m for k, m in metrics.items()
            if getattr(m, "metric_inputs", None) != "loss" and (callable(m) or hasattr(m, "update"))}
