"""One landscape from a network, data and a choice of directions (private core)."""

from __future__ import annotations

import contextlib
import copy
import logging
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch
from torch import nn

from collector.train import get_metric
from landscape.curvature import hessian_directions
from landscape.engine import Engine, EngineSpec
from landscape.engine._planner import choose_plan
from landscape.execution._distributed import on_root
from landscape.execution._pool import Pool
from landscape.execution._run import run_points, start_pool, stop_pool
from landscape.generate._plan import Execution, LandscapePlan, Problem
from landscape.generate._views import centre_state, view_geometry
from landscape.geometry._state import check_keys, flat_float, moved_names
from landscape.io._store import Partial, jsonable
from landscape.result._landscape import Landscape, LossPath

__all__: list[str] = []
_log = logging.getLogger("landscape")


def build_landscape(problem: Problem, plan_: LandscapePlan, execution: Execution,
                    stats: dict[str, int] | None = None) -> Landscape:
    """Compute one landscape; ``plan_.geometry.kind`` is "pca" (trajectory), "random" or "given".

    With ``execution.store`` (and the plan's ``fingerprint``) finished chunks are flushed
    to landscapes.h5 and a run interrupted before resumes where it stopped; with
    ``execution.dist`` the ranks share the work (rank 0 decides, computes the directions
    and writes). ``stats`` receives the points evaluated in this call (by all ranks),
    those of this process, and the landscape's points. Inputs are assumed validated (and
    the stored fingerprint checked) by the public entry points.

    Worker processes (several devices) start first, so their start-up (spawn, imports)
    overlaps with loading checkpoints, PCA and directions here; they are shut down before
    this returns, also on errors. A pool passed in ``execution.pool`` (``start_pool``, for
    several landscapes in a row) stays up after a success; the caller stops it.
    """
    own = execution.pool is None and execution.dist is None
    pool = start_pool(execution.devices, execution.threads) if own else execution.pool
    try:
        return _build(problem, plan_, execution, pool=pool, keep_pool=not own, stats=stats)
    except BaseException:
        stop_pool(pool, ok=False)  # a no-op when run_points already shut it down
        raise


def _prepare(problem: Problem, plan_: LandscapePlan, names: list[str],
             device: str) -> tuple[Partial, Mapping[str, torch.Tensor]]:
    """The landscape's definition (metadata, axes, points, directions) and its centre."""
    geo, label = plan_.geometry, plan_.label
    network, samples, task, eval_mode = problem.network, problem.samples, problem.task, problem.eval_mode
    centre = centre_state(network, geo, names, label)
    check_keys(network, centre, what=f"the centre of {label}")
    md: dict[str, Any] = {"unit": plan_.unit, "step_per_epoch": plan_.step_per_epoch,
                          "normalization": geo.normalization, "ignore": _patterns_text(geo.ignore),
                          "seed": int(geo.seed), "num_samples": samples.n, "landscape_size": int(geo.size),
                          "eval_mode": bool(eval_mode), "moved_parameters": names}
    if geo.biasbn != "normalize":
        md["biasbn"] = geo.biasbn
    if geo.include is not None:
        md["include"] = list(geo.include)
    def hessian() -> tuple[list[torch.Tensor], list[torch.Tensor], dict[str, Any]]:
        # on the landscape's device, in its mode (Lanczos seeded by the landscape's seed)
        net = _copy_with(network, centre).train(not eval_mode).to(device)
        v, w, eig = hessian_directions(net, task, samples, names, seed=geo.seed)
        return v, w, {"hessian_eigenvalues": [float(e) for e in eig.eigenvalues],
                      "hessian_residuals": [float(r) for r in eig.residuals]}

    view = view_geometry(network, geo, names, centre, label, plan_.intervals,
                         hessian=hessian if geo.kind == "hessian" else None)
    if "seed" not in view.md:  # only random directions have one
        del md["seed"]
    md.update(view.md)
    md = {"decomposition": md.pop("decomposition"), **md}
    if plan_.intervals is not None:
        md["checkpoint_steps"] = list(plan_.intervals)
    points = view.points
    # a line's w is zero (not stored); the planner's probe evaluates with it
    w = view.w if len(view.w) == len(view.v) else [torch.zeros_like(t) for t in view.v]
    spec = EngineSpec(network=network, task=task, metrics={}, samples=samples, names=names, centre=centre,
                      v=view.v, w=w, eval_mode=eval_mode, seed=int(geo.seed))
    md.update(choose_plan(spec, n_points=len(points), device=device, mode=problem.plan,
                          cache=problem.plan_cache).metadata())
    m = len(points)
    part = Partial(md=jsonable(md), x=view.x, y=view.y, points=points, n_path=view.n_path,
                   intervals=view.intervals, v=_flat(view.v), w=_flat(view.w), values={},
                   done=np.zeros(m, dtype=bool))
    return part, centre


def _patterns_text(ignore: str | Sequence[str] | None) -> str | list[str]:
    """How the metadata records ``ignore``: "none", one pattern, or the list."""
    if ignore is None:
        return "none"
    return ignore if isinstance(ignore, str) else list(ignore)


def _flat(ts: Sequence[torch.Tensor]) -> np.ndarray:
    if not ts:
        return np.zeros(0, dtype=np.float32)
    return torch.cat([t.reshape(-1).to(torch.float32) for t in ts]).numpy()


def _unflat(flat: np.ndarray, like: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """Split a stored flat direction like ``like``; an empty one (a line's ``w``) is zero."""
    if np.size(flat) == 0:
        return [torch.zeros_like(r, dtype=torch.float32) for r in like]
    t = torch.from_numpy(np.ascontiguousarray(flat, dtype=np.float32))
    out, o = [], 0
    for r in like:
        out.append(t[o:o + r.numel()].reshape(r.shape).clone())
        o += r.numel()
    if o != t.numel():
        raise ValueError(f"stored directions hold {t.numel()} values; the moved parameters need {o}.")
    return out


def chunk_bounds(done: np.ndarray, p: int, workers: int) -> list[tuple[int, int, int]]:
    """Chunks (number, lo, hi) of the points not done. Chunk starts are multiples of the
    group size ``p``, so every group is evaluated with the same partners as in a run
    without interruption; the chunk size gives each worker about eight chunks."""
    m = len(done)
    chunk = p * max(1, math.ceil(m / (p * max(1, workers) * 8)))
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


def _assemble(part: Partial, values: Mapping[str, np.ndarray], tag: str | None) -> Landscape:
    """The Landscape from the points' values: the grid, the path, the markers (``md["layout"]``)."""
    md = dict(part.md)
    layout = md.pop("layout", None) or {}
    x, y = np.asarray(part.x), np.asarray(part.y)
    line = y.size == 0
    n_grid = x.size if line else x.size * y.size
    shape = (x.size,) if line else (y.size, x.size)
    loss = values["loss"]
    z = loss[:n_grid].reshape(shape)
    surfaces = {k: a[:n_grid].reshape(shape) for k, a in values.items() if k != "loss"}
    path = None
    if part.n_path:
        pts = part.points[n_grid:n_grid + part.n_path]
        path = LossPath(pts[:, 0].copy(), pts[:, 1].copy(), loss[n_grid:n_grid + part.n_path].copy(),
                        list(part.intervals or []))
    markers = {str(k): (float(px), float(py), float(loss[int(i)]))
               for k, (px, py, i) in (layout.get("markers") or {}).items()}
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
                     markers=markers)


def _build(problem: Problem, plan_: LandscapePlan, execution: Execution, *, pool: Pool | None,
           keep_pool: bool, stats: dict[str, int] | None) -> Landscape:
    """:func:`build_landscape` with its worker pool decided."""
    label, tag, geo = plan_.label, plan_.tag, plan_.geometry
    store, dist, fingerprint = execution.store, execution.dist, plan_.fingerprint
    network = problem.network
    names, _still = moved_names(network, geo.ignore, geo.include, buffers=geo.kind in ("line", "plane", "target"))
    metrics = _usable_metrics(problem.metrics)
    root = dist is None or dist.root

    def decide() -> Any:
        """On rank 0: a finished landscape, or (definition, centre) with the points done."""
        state = store.check(tag or "landscape", fingerprint or {}) if store is not None else "absent"
        if state == "complete":
            assert store is not None
            _log.info("%s: already complete in %s", label, store.path)
            return store.load_complete(tag or "landscape")
        if state == "partial":
            assert store is not None
            part = store.load_partial(tag or "landscape")
            c = centre_state(network, geo, names, label)
            _log.info("%s: resuming, %d of %d points done", label, int(part.done.sum()), len(part.done))
            return part, c
        device = dist.device if dist is not None else execution.devices[0]
        part, c = _prepare(problem, plan_, names, device)
        part.values = {k: np.full(len(part.points), np.nan) for k in ["loss", *metrics]}
        if store is not None:
            store.begin(tag or "landscape", fingerprint or {}, part)
        return part, c

    got = on_root(dist, decide)
    if isinstance(got, Landscape):
        if not keep_pool:
            stop_pool(pool)
        if stats is not None:
            stats.update(evaluated=0, by_this_process=0,
                         points=got.z.size + (len(got.path.z) if got.path is not None else 0))
        return got
    part, c = got
    ref = flat_float(c, names)
    v, w = _unflat(part.v, ref), _unflat(part.w, ref)
    p, eval_batch = int(part.md["points_per_call"]), int(part.md["eval_batch"])
    batching = part.md.get("batching")
    values = part.values
    n_workers = dist.world if dist is not None else len(execution.devices)
    chunks = chunk_bounds(part.done, p, n_workers)
    spec = EngineSpec(network=network, task=problem.task, metrics=metrics, samples=problem.samples.rebatch(eval_batch),
                      names=names, centre=c, v=v, w=w, eval_mode=problem.eval_mode, points_per_call=p, seed=geo.seed,
                      batching=batching if p > 1 else None,
                      memory_format=str(part.md.get("memory_format") or "contiguous"))
    todo = sum(hi - lo for _, lo, hi in chunks)
    _log.info("%s: %d of %d points to evaluate, %d per call, %d chunk(s)", label, todo, len(part.points), p,
              len(chunks))
    flushing = store.chunks(tag or "landscape") if (store is not None and root and chunks) else contextlib.nullcontext()
    with flushing as flush:

        def on_chunk(lo: int, hi: int, res: Mapping[str, np.ndarray]) -> None:
            for k, arr in res.items():
                values[k][lo:hi] = arr
            if flush is not None:
                flush(lo, hi, res)

        if dist is not None:
            evaluated = dist.run(lambda dev: Engine(spec, dev), part.points, chunks, label, on_chunk)
        else:
            evaluated = run_points(spec, part.points, chunks, devices=execution.devices, threads=execution.threads,
                                   label=label, on_chunk=on_chunk, pool=pool, keep_pool=keep_pool)
    if stats is not None:
        stats.update(evaluated=todo, points=len(part.points), by_this_process=evaluated)
    result = _assemble(part, values, tag)
    if store is not None and root:
        store.finish(result, fingerprint or {})
    return result


def _copy_with(network: nn.Module, centre: Mapping[str, torch.Tensor]) -> nn.Module:
    net = copy.deepcopy(network).cpu()
    net.load_state_dict(centre)
    net.eval()
    return net


def metric_dict(metrics: Any) -> dict[str, Any]:
    """The user's metrics by name: a dict as given, a set, list or tuple of names (``"accuracy"``)
    through ``collector.train.get_metric``."""
    if not metrics:
        return {}
    if isinstance(metrics, (set, list, tuple)):
        return {str(n): get_metric(n) for n in metrics}
    return {str(k): m for k, m in dict(metrics).items()}


def _usable_metrics(metrics: Mapping[str, Any]) -> dict[str, Any]:
    """Metrics computed on (outputs, labels); loss-input metrics (the loss itself) dropped."""
    return {k: m for k, m in metrics.items()
            if getattr(m, "metric_inputs", None) != "loss" and (callable(m) or hasattr(m, "update"))}
