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

from collector.common import strip_wrapper_prefixes
from collector.train import get_metric
from collector.trajectory import load_checkpoint
from landscape.engine import Engine, EngineSpec, Samples, activation_elements, batch_size, plan
from landscape.execution._distributed import on_root
from landscape.execution._pool import Pool
from landscape.execution._run import run_points, start_pool, stop_pool
from landscape.generate._plan import Execution, LandscapePlan, Problem
from landscape.geometry._directions import grid_axes, random_directions
from landscape.geometry._pca import pca_trajectory
from landscape.geometry._state import check_keys, fit_state, flat_float, moved_names
from landscape.io._store import Partial, jsonable
from landscape.result._landscape import Landscape, LossPath

__all__: list[str] = []
_log = logging.getLogger("landscape")


def _vmappable(network: nn.Module, task: Any, names: list[str], centre: Mapping[str, torch.Tensor],
               samples: Samples) -> bool:
    """Whether two points evaluate through vmap (tried on two samples, on the CPU)."""
    try:
        ref = flat_float(centre, names)
        probe = samples.first(2)
        two = Samples([probe], [batch_size(probe, task)])
        eng = Engine(EngineSpec(network, task, {}, two, names, centre, ref, ref, points_per_call=2), "cpu")
        eng.evaluate(np.zeros((2, 2)))
        return True
    except Exception as exc:  # any failure: evaluate one point per call
        _log.info("batched evaluation unavailable (%s: %s); one point per call", type(exc).__name__, exc)
        return False


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


def _prepare(problem: Problem, plan_: LandscapePlan, names: list[str]) -> tuple[Partial, Mapping[str, torch.Tensor]]:
    """The landscape's definition (metadata, axes, points, directions) and its centre."""
    geo, label = plan_.geometry, plan_.label
    network, samples, task, eval_mode = problem.network, problem.samples, problem.task, problem.eval_mode
    kind, trajectory, size, normalization, seed = geo.kind, geo.trajectory, geo.size, geo.normalization, geo.seed
    intervals = plan_.intervals
    centre = _centre(network, trajectory, geo.centre, label)
    check_keys(network, centre, what=f"the centre of {label}")
    ref = flat_float(centre, names)
    md: dict[str, Any] = {"decomposition": {"pca": "PCA", "random": "Random"}.get(kind, "Given"),
                          "unit": plan_.unit, "step_per_epoch": plan_.step_per_epoch,
                          "normalization": normalization if kind != "given" else "none",
                          "ignore": geo.ignore or "none", "seed": int(seed), "num_samples": samples.n,
                          "landscape_size": int(size), "eval_mode": bool(eval_mode),
                          "moved_parameters": names}
    coords = None
    if kind == "pca":
        assert trajectory is not None
        n = len(trajectory)

        def load(k: int) -> list[torch.Tensor]:
            if k == n - 1:
                return ref
            sd = fit_state(network, load_checkpoint(trajectory[k], what=f"checkpoint {k} of {label}"))
            check_keys(network, sd, what=f"checkpoint {k} of {label}")
            return flat_float(sd, names)

        res = pca_trajectory(load, n, method=geo.pca_method, solver=geo.pca_solver, normalization=normalization)
        v, w, coords = res["v"], res["w"], res["coords"]
        coords[-1] = 0.0
        md.update(pca_method=geo.pca_method, explained_variance_ratio=res["explained_variance_ratio"][:2],
                  singular_values=res["singular_values"][:2])
        del md["seed"]
    elif kind == "random":
        v, w = random_directions(ref, seed, normalization)
    else:
        assert geo.given is not None
        dv, dw = strip_wrapper_prefixes(dict(geo.given[0])), strip_wrapper_prefixes(dict(geo.given[1]))
        missing = [k for k in names if k not in dv or k not in dw]
        if missing:
            raise ValueError(f"The 'directions' dicts lack the parameters {missing}.")
        v = [dv[k].detach().to("cpu", torch.float32).reshape(r.shape) for k, r in zip(names, ref)]
        w = [dw[k].detach().to("cpu", torch.float32).reshape(r.shape) for k, r in zip(names, ref)]
    if intervals is not None:
        md["checkpoint_steps"] = list(intervals)
    x, y = grid_axes(coords, size)
    gy, gx = np.meshgrid(y, x, indexing="ij")
    points = np.stack([gx.reshape(-1), gy.reshape(-1)], axis=1)
    if coords is not None:
        points = np.concatenate([points, coords])
    n_params = sum(p.numel() for p in network.parameters())
    probe = samples.first(2)
    act = activation_elements(_copy_with(network, centre), task, probe, batch_size(probe, task))
    p, eval_batch = plan(n_params, samples.n, act, eval_mode=eval_mode, vmappable=True)
    if p > 1 and not _vmappable(network, task, names, centre, samples):
        p, eval_batch = plan(n_params, samples.n, act, eval_mode=eval_mode, vmappable=False)
    md.update(points_per_call=p, eval_batch=eval_batch)
    m = len(points)
    path_intervals = None
    if coords is not None:
        path_intervals = list(intervals) if intervals is not None else list(range(1, len(coords) + 1))
    part = Partial(md=jsonable(md), x=x, y=y, points=points, n_path=0 if coords is None else len(coords),
                   intervals=path_intervals, v=_flat(v), w=_flat(w), values={}, done=np.zeros(m, dtype=bool))
    return part, centre


def _centre(network: nn.Module, trajectory: Sequence[Any] | None, centre: Mapping[str, torch.Tensor] | None,
            label: str) -> Mapping[str, torch.Tensor]:
    """The trajectory's last checkpoint, else ``centre``, else the network's own state."""
    if trajectory is not None:
        return fit_state(network, load_checkpoint(trajectory[-1], what=f"checkpoint {len(trajectory) - 1} of {label}"))
    if centre is not None:
        return fit_state(network, centre)
    return {k: v.detach().cpu() for k, v in network.state_dict().items()}


def _flat(ts: Sequence[torch.Tensor]) -> np.ndarray:
    if not ts:
        return np.zeros(0, dtype=np.float32)
    return torch.cat([t.reshape(-1).to(torch.float32) for t in ts]).numpy()


def _unflat(flat: np.ndarray, like: Sequence[torch.Tensor]) -> list[torch.Tensor]:
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
    size = len(part.x)
    s2 = size * size
    loss = values["loss"]
    z = loss[:s2].reshape(size, size)
    surfaces = {k: a[:s2].reshape(size, size) for k, a in values.items() if k != "loss"}
    path = None
    if part.n_path:
        pts = part.points[s2:]
        path = LossPath(pts[:, 0].copy(), pts[:, 1].copy(), loss[s2:].copy(), list(part.intervals or []))
        conv = (0.0, 0.0, float(path.z[-1]))
    else:
        h = size // 2
        conv = (float(part.x[h]), float(part.y[h]), float(z[h, h]))
    return Landscape(x=np.asarray(part.x), y=np.asarray(part.y), z=z, path=path, convergence_point=conv,
                     metadata=dict(part.md), surfaces=surfaces, tag=tag)


def _build(problem: Problem, plan_: LandscapePlan, execution: Execution, *, pool: Pool | None,
           keep_pool: bool, stats: dict[str, int] | None) -> Landscape:
    """:func:`build_landscape` with its worker pool decided."""
    label, tag, geo = plan_.label, plan_.tag, plan_.geometry
    store, dist, fingerprint = execution.store, execution.dist, plan_.fingerprint
    network = problem.network
    names, _still = moved_names(network, geo.ignore)
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
            c = _centre(network, geo.trajectory, geo.centre, label)
            _log.info("%s: resuming, %d of %d points done", label, int(part.done.sum()), len(part.done))
            return part, c
        part, c = _prepare(problem, plan_, names)
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
    values = part.values
    n_workers = dist.world if dist is not None else len(execution.devices)
    chunks = chunk_bounds(part.done, p, n_workers)
    spec = EngineSpec(network=network, task=problem.task, metrics=metrics, samples=problem.samples.rebatch(eval_batch),
                      names=names, centre=c, v=v, w=w, eval_mode=problem.eval_mode, points_per_call=p, seed=geo.seed)
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
