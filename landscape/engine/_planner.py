"""Choosing the plan: points per call, how a group runs, samples per evaluation batch (private).

A plan is ``(points_per_call, batching, eval_batch, memory_format)``. The heuristic (:func:`plan`) sizes it
from the work per point and a memory budget; a batched way of running a group
("sequential", "folded", "vmap": see :class:`landscape.engine._engine.Engine`) is only used
after it gave the one-point path's values on a probe. Where it matters -- a landscape whose
evaluation is estimated at :data:`CALIBRATE_FROM_WORK` multiply-adds or more -- the planner then
measures instead of guessing: it times the candidate plans on the real samples (each on a
few points, after a warm-up call) and keeps the fastest, a batched plan only when it beats
one point per call by :data:`MARGIN`, within :data:`CALIBRATE_SHARE` of the estimated time.

What is reproducible: for the same inputs and the same plan, every point's value is the
same bit for bit on the CPU, whatever the chunking, the workers, the ranks or a resume
(the plan is recorded in the landscape's metadata and in landscapes.h5, and a resume uses
the stored one). The calibration chooses by timing, so two runs on other machines or
under other load may choose other plans; their values then differ by float rounding.
``plan="heuristic"`` (no timing) or a plan given explicitly makes the choice itself
reproducible.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn

from landscape.engine._data import Samples
from landscape.engine._engine import BATCHINGS, Engine, EngineSpec
from landscape.engine._task import batch_size, slice_batch

__all__ = ["Plan", "choose_plan", "plan", "activation_elements"]
_log = logging.getLogger("landscape")

#: Bytes of one call's working set (the points' parameters and activations) the heuristic aims
#: at: a group of points should stay in the CPU's caches. The fastest points per call measured on
#: eight MLPs (inputs 32-784, hidden 64-512, 64 and 512 samples; the first layer cached, so a wide
#: input gains most) kept the working set at 3-25 MB, 16 MB being within 10 % of the best in each.
CALL_BYTES = 16 << 20
#: Bytes the batched parameters and activations of one call may use.
MEMORY_BUDGET = 1 << 30
MAX_POINTS_PER_CALL = 32
#: Estimated work of a whole landscape (points x samples x the larger of parameters and
#: activations per sample) from which the planner times the candidates: a few seconds on a
#: 2-core CPU. A count, not a timing, so whether a run calibrates never depends on the load.
CALIBRATE_FROM_WORK = 2e10
#: Share of the estimated evaluation time the calibration may take.
CALIBRATE_SHARE = 0.1
#: ... or when the landscape has at least this many points of at least this much work each (a
#: ResNet-20 over 256 CIFAR images is 1.3e8, the digits MLP over 512 samples 1.4e7; tiny test models
#: stay on the heuristic)
CALIBRATE_FROM_POINTS = 64
CALIBRATE_POINT_WORK = 1e7
#: ... and whose evaluation, timed at one point per call, takes at least this long
CALIBRATE_FROM_SECONDS = 2.0
#: Fewer points than this are never timed: one candidate (a warm-up call and a timed point, twice the
#: time of a point) would already cost more than CALIBRATE_SHARE of the landscape (16 points of a
#: ResNet-18 spent a quarter of their time choosing the evaluation batch).
CALIBRATE_MIN_POINTS = 40
#: At most this long is spent calibrating, whatever the landscape's size.
CALIBRATE_MAX_S = 30.0
#: Samples the candidates are timed on: the plans' ranking does not depend on how many
#: samples a point averages over, and a point of 50,000 images takes a minute on a CPU.
CALIBRATE_SAMPLES = 4096
#: A batched plan must be this much faster per point than one point per call.
MARGIN = 1.1
#: Relative agreement a batched way must reach with the one-point path on the probe.
PROBE_RTOL = 1e-4


@dataclass(frozen=True)
class Plan:
    """How the points are evaluated (recorded in the landscape's metadata).

    Attributes
    ----------
    points_per_call : int
    batching : str or None
        "sequential", "folded" or "vmap" when ``points_per_call > 1``.
    eval_batch : int
        Samples per evaluation batch (when the samples are one mergeable block).
    how : {"heuristic", "calibrated", "given"}
    timings : dict
        Seconds per point of each candidate the calibration measured.
    memory_format : {"contiguous", "channels_last"}
        The layout of the convolution kernels at one point per call
        (:attr:`landscape.engine._engine.EngineSpec.memory_format`).
    """

    points_per_call: int
    batching: str | None
    eval_batch: int
    how: str = "heuristic"
    timings: Mapping[str, float] = field(default_factory=dict)
    memory_format: str = "contiguous"

    def metadata(self) -> dict[str, Any]:
        """The plan as the landscape's metadata records it."""
        md: dict[str, Any] = {"points_per_call": self.points_per_call, "eval_batch": self.eval_batch,
                              "batching": self.batching, "memory_format": self.memory_format, "plan": self.how}
        if self.timings:
            md["plan_timings"] = {k: round(v, 6) for k, v in self.timings.items()}
        return md


def activation_elements(network: nn.Module, task: Any, batch: Any, n: int) -> int:
    """Elements of all leaf-module outputs per sample, measured by running the task on
    ``batch`` (``n`` samples)."""
    total = [0]

    def hook(_m: nn.Module, _i: Any, out: Any) -> None:
        if isinstance(out, torch.Tensor):
            total[0] += out.numel()

    handles = [m.register_forward_hook(hook) for m in network.modules() if not list(m.children())]
    try:
        with torch.inference_mode():
            task(network, batch)
    finally:
        for h in handles:
            h.remove()
    return max(1, total[0] // max(1, n))


def plan(n_params: int, n_samples: int, act_per_sample: int, *, eval_mode: bool,
         vmappable: bool) -> tuple[int, int]:
    """``(points_per_call, eval_batch)`` from a call's working set (:data:`CALL_BYTES`) and the
    memory budget.

    Deterministic: it depends only on the model's sizes and ``n_samples``, never on the
    device or the number of workers.
    """
    p = 1
    if eval_mode and vmappable:
        per_point = 4 * (n_params + n_samples * act_per_sample)
        p = int(min(MAX_POINTS_PER_CALL, max(1, CALL_BYTES // per_point)))
        p = 1 << (p.bit_length() - 1)  # power of two
        while p > 1 and 4 * p * (n_params + n_samples * act_per_sample) > MEMORY_BUDGET:
            p //= 2
    eval_batch = n_samples
    while eval_batch > 1 and 4 * p * eval_batch * act_per_sample > MEMORY_BUDGET:
        eval_batch = (eval_batch + 1) // 2
    return p, eval_batch


def has_conv2d(network: nn.Module) -> bool:
    """Whether the network has 2-D convolutions, whose kernels the plan may lay out channels-last."""
    return any(isinstance(m, nn.Conv2d) for m in network.modules())


def _probe_points(k: int) -> np.ndarray:
    return np.random.default_rng(12345).uniform(-1.0, 1.0, (k, 2)).astype(np.float64)


def _agrees(a: np.ndarray, b: np.ndarray) -> bool:
    return bool(np.allclose(a, b, rtol=PROBE_RTOL, atol=1e-6, equal_nan=True))


def _working_batchings(spec: EngineSpec, p: int) -> list[str]:
    """The batched ways that run this network and task and give the one-point values, on a probe
    of two samples on the CPU (cheap: a few tiny calls)."""
    probe = spec.samples.first(2)
    two = Samples([probe], [batch_size(probe, spec.task)])
    base = dataclasses.replace(spec, samples=two, metrics={}, points_per_call=1, batching=None, stream=False)
    pts = _probe_points(2 * p)
    try:
        ref = Engine(base, "cpu").evaluate(pts)["loss"]
    except Exception as exc:
        _log.info("probe of the one-point path failed (%s); one point per call", exc)
        return []
    ok = []
    for kind in BATCHINGS:
        try:
            eng = Engine(dataclasses.replace(base, points_per_call=p, batching=kind), "cpu")
            got = eng.evaluate(pts)["loss"]
        except Exception as exc:
            _log.info("batching %r unavailable (%s: %s)", kind, type(exc).__name__, exc)
            continue
        if _agrees(got, ref):
            ok.append(kind)
        else:
            _log.info("batching %r differs from one point per call on the probe; not used", kind)
    return ok


def _time_per_point(spec: EngineSpec, device: str, points: int) -> float:
    eng = Engine(spec, device)
    warm = _probe_points(max(1, spec.points_per_call))
    eng.evaluate(warm)  # first call: caches, allocations, kernels
    pts = _probe_points(points)
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)
    t0 = time.perf_counter()
    eng.evaluate(pts)
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)
    return (time.perf_counter() - t0) / points


def choose_plan(spec: EngineSpec, *, n_points: int, device: str = "cpu", mode: Any = "auto",
                cache: dict[Any, Any] | None = None) -> Plan:
    """The plan for evaluating ``n_points`` points of ``spec`` (whose plan fields are ignored).

    Parameters
    ----------
    spec : EngineSpec
        The network, task, samples (not yet cut into evaluation batches), centre and directions.
    n_points : int
        Points of the landscape (the calibration's budget is a share of their estimated time).
    device : str
        Where the calibration runs (the first device of the evaluation).
    mode : {"auto", "heuristic"} or dict
        "auto": the heuristic, verified, then timed when the landscape is large enough;
        "heuristic": no timing; a dict ``{"points_per_call", "batching", "eval_batch",
        "memory_format"}``: that plan.
    cache : dict, optional
        Keeps what depends only on the network, task and samples (the activations'
        size, the batched ways that work) between the landscapes of one generation.
    """
    cache = {} if cache is None else cache
    samples = spec.samples
    n = samples.n
    if isinstance(mode, Mapping):
        return Plan(int(mode["points_per_call"]), mode.get("batching"), int(mode.get("eval_batch") or n), how="given",
                    memory_format=str(mode.get("memory_format") or "contiguous"))
    network = spec.network
    # Convolution kernels channels-last at one point per call: oneDNN and cuDNN run most CNNs faster
    # so (1.2-2x measured on ResNet-20/18 and a MNIST CNN on a CPU); timed against contiguous below
    conv = has_conv2d(network)
    n_params = sum(p.numel() for p in network.parameters())
    if "act" not in cache:
        probe = samples.first(2)
        cache["act"] = activation_elements(_eval_copy(spec), spec.task, probe, batch_size(probe, spec.task))
    act = cache["act"]
    p, eval_batch = plan(n_params, n, act, eval_mode=spec.eval_mode, vmappable=True)
    key = ("kinds", min(p, 4))
    if p > 1 and key not in cache:
        cache[key] = _working_batchings(spec, min(p, 4))
    kinds = cache[key] if p > 1 else []
    if p > 1 and not kinds:
        p, eval_batch = plan(n_params, n, act, eval_mode=spec.eval_mode, vmappable=False)
    fmt = "channels_last" if conv and p == 1 else "contiguous"
    heuristic = Plan(p, kinds[0] if p > 1 else None, eval_batch, memory_format=fmt)
    work = float(n_points) * n * max(n_params, act)
    # Timing pays off on a heavy landscape, or on enough points that a few timed calls are a small
    # share: the evaluation batch alone is worth measuring (convolutional and attention models run
    # fastest at 64-128 samples per batch on a CPU, MLPs at all of them; no size rule predicts it).
    # many points of real size, and not well under a second in all (then not even one point is worth timing)
    many = n_points >= CALIBRATE_FROM_POINTS and work >= max(n_points * CALIBRATE_POINT_WORK, CALIBRATE_FROM_WORK / 10)
    if mode == "heuristic" or (not samples.merged and p == 1) or (work < CALIBRATE_FROM_WORK and not many) \
            or n_points < CALIBRATE_MIN_POINTS:
        return heuristic
    # One point per call, timed on (at most CALIBRATE_SAMPLES of) the real samples, sets the budget.
    timed = _head(samples, CALIBRATE_SAMPLES)
    fmt = "channels_last" if conv else "contiguous"
    one = dataclasses.replace(spec, samples=timed.rebatch(eval_batch), points_per_call=1, batching=None,
                              memory_format=fmt)
    t1 = _time_per_point(one, device, 1)
    if work < CALIBRATE_FROM_WORK and t1 * n_points * n / timed.n < CALIBRATE_FROM_SECONDS:
        return heuristic  # a landscape of a second or two: timing the candidates would cost more than it saves
    budget = min(CALIBRATE_MAX_S, max(CALIBRATE_SHARE * t1 * n_points * n / timed.n, 4 * t1))
    spent = 2 * t1
    def label(q: int, kind: str | None, eb: int, layout: str) -> str:
        return f"p={q}" + (f" {kind}" if kind else "") + f" batch={eb}" + (" channels_last" if layout != "contiguous"
                                                                           else "")

    timings: dict[str, float] = {label(1, None, eval_batch, fmt): t1}
    best = (t1, Plan(1, None, eval_batch, memory_format=fmt))
    # (points per call, batching, samples per batch, layout); a layout of None: the best one-point plan's
    candidates: list[tuple[int, str | None, int, str | None]] = []
    if conv:
        candidates.append((1, None, eval_batch, "contiguous"))
    if samples.merged:  # smaller evaluation batches for one point per call (cache-friendlier)
        b = eval_batch // 2
        while b >= 16 and len(candidates) < 3 + conv:
            candidates.append((1, None, b, None))
            b //= 2
    for way in kinds:
        q = 2
        while q <= max(p, 2):
            candidates.append((q, way, eval_batch, "contiguous"))
            q *= 2
    for q, kind, eb, layout in candidates:
        if spent >= budget:
            break
        layout = layout or best[1].memory_format
        trial = dataclasses.replace(spec, samples=timed.rebatch(eb), points_per_call=q, batching=kind,
                                    memory_format=layout)
        try:
            t0 = time.perf_counter()
            # one point per call in this layout is warmed up already, in the other it needs its warm-up
            t = _time_per_point(trial, device, max(q, 2) if q > 1 else 1)
            spent += time.perf_counter() - t0
        except Exception as exc:
            _log.info("plan p=%d %s batch=%d %s failed in calibration: %s", q, kind, eb, layout, exc)
            continue
        timings[label(q, kind, eb, layout)] = t
        better = t * (MARGIN if q > 1 and best[1].points_per_call == 1 else 1.0) < best[0]
        if better:
            best = (t, Plan(q, kind, eb, memory_format=layout))
    chosen = best[1]
    _log.info("plan: %d point(s) per call%s, batches of %d, %s (calibrated in %.2f s: %s)", chosen.points_per_call,
              f" ({chosen.batching})" if chosen.batching else "", chosen.eval_batch, chosen.memory_format, spent,
              ", ".join(f"{k}: {v * 1e3:.3g} ms/pt" for k, v in timings.items()))
    return dataclasses.replace(chosen, how="calibrated", timings=timings)


def _head(samples: Samples, k: int) -> Samples:
    """The first ``k`` samples (all when there are fewer): views of a merged block, else whole batches."""
    if samples.n <= k:
        return samples
    if samples.merged and samples._whole is not None:
        whole = slice_batch(samples._whole, k, size=samples.n)
        return Samples([whole], [k], merged=True, _whole=whole)
    batches, sizes, have = [], [], 0
    for batch, size in zip(samples.batches, samples.sizes):
        if have >= k:
            break
        batches.append(batch)
        sizes.append(size)
        have += size
    return Samples(batches, sizes)


def _eval_copy(spec: EngineSpec) -> nn.Module:
    net = copy.deepcopy(spec.network).cpu()
    net.load_state_dict(spec.centre)
    net.eval()
    return net
