"""The evaluation plan: points per call, how a group runs, samples per batch, kernels' layout (private).

A plan is a value (:class:`Plan`), made before any point is evaluated, recorded in the
landscape's metadata and handed to every chunk, worker, rank and resume. It is chosen by
name (the ``plan=`` option):

* ``"auto"`` (default): a pure function of the network, the task, the samples' shapes, the
  number of points and the device's kind (:func:`heuristic_plan`). No timing: the same
  command gives the same plan, so the same values bit for bit, on any load.
* ``"tune"``: the heuristic's candidates timed on the real data (:func:`tune_plan`), the
  fastest kept. Opt-in, like ``torch.backends.cudnn.benchmark``: two tuned runs may choose
  other plans, whose values differ by float rounding; a tuned plan is recorded with the
  landscape (and reused by a resume, every rank, and later landscapes of the same folder).
* a dict ``{"points_per_call", "batching", "eval_batch", "memory_format"}``: that plan.

Whatever the mode, a batched way of running a group (:data:`landscape.engine._batching.WAYS`)
is used only after it gave the one-point values on a probe of two samples
(:mod:`landscape.engine._probe`); a given plan whose way does not apply or does not agree is
refused before any point, naming the layer where it failed.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from collector.common import InvalidParameterError
from landscape.engine._activations import activation_elements
from landscape.engine._data import Samples
from landscape.engine._engine import Engine, EngineSpec
from landscape.engine._probe import first_applicable_way, first_working_way, probe_points, verify_way
from landscape.tasks import batch_size, slice_batch

__all__ = ["Plan", "choose_plan", "heuristic_plan", "tune_plan", "sizes", "PLAN_MODES",
           "plan_key"]
_log = logging.getLogger("landscape")

#: The plan modes by name (a dict gives the plan itself).
PLAN_MODES = ("auto", "tune")
#: Bytes of one call's working set (the points' parameters and activations) the heuristic aims
#: at: a group of points should stay in the CPU's caches. Chosen on eight MLPs (inputs 32-784,
#: hidden 64-512, 64 and 512 samples) by ``benchmarks/bench_call_bytes.py``: 32 MiB came within
#: 10 % of the fastest points per call on every shape, where 16 and 64 MiB were well off on some.
CALL_BYTES = 32 << 20
#: Bytes the batched parameters and activations of one call may use.
MEMORY_BUDGET = 1 << 30
#: At most this many points per call: a small network at few samples (the digits MLP at 32-64 samples)
#: gains up to here over 32 points per call, with the same bits, and next to nothing beyond.
MAX_POINTS_PER_CALL = 64
#: Landscapes of at most this many points (a 3x3 plane, a line of up to 15 points) run one point per
#: call: checking a batched way (on the first group, or the probe) and building it cost about what
#: batching saves on so few points. ``benchmarks/bench_small_landscapes.py`` on two MLPs (the digits
#: MLP, 784-512-512) at 64 and 512 samples, in this process: batched over one point per call 1.05-1.13
#: on a 3x3 plane, 0.97-1.03 on a 15-point line, 0.88-1.00 on a 4x4 plane, 0.73-0.79 on a 31-point line.
SMALL_LANDSCAPE_POINTS = 15
#: At most this long is spent tuning, whatever the landscape's size.
TUNE_MAX_S = 30.0
#: Share of the estimated evaluation time tuning may take (at least four points' time).
TUNE_SHARE = 0.1
#: Samples the candidates are timed on: the plans' ranking does not depend on how many
#: samples a point averages over, and a point of 50,000 images takes a minute on a CPU.
TUNE_SAMPLES = 4096
#: A batched plan must be this much faster per point than one point per call.
MARGIN = 1.1


@dataclass(frozen=True)
class Plan:
    """How the points are evaluated (recorded in the landscape's metadata).

    Attributes
    ----------
    points_per_call : int
    batching : str or None
        "sequential", "folded" or "vmap" when ``points_per_call > 1``.
    eval_batch : int
        Samples per evaluation batch: chosen when the samples are one mergeable block, else the
        caller's batches run as they are and this is the largest of them.
    how : {"heuristic", "tuned", "given"}
        What made it: ``plan="auto"``, ``plan="tune"`` or a dict.
    timings : dict
        Seconds per point of each candidate tuning measured.
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

    def given(self) -> dict[str, Any]:
        """The plan as a ``plan=`` dict (what reproduces it)."""
        return {"points_per_call": self.points_per_call, "batching": self.batching, "eval_batch": self.eval_batch,
                "memory_format": self.memory_format}


def sizes(n_params: int, n_samples: int, act_per_sample: int, *, eval_mode: bool, batched: bool,
          n_points: int | None = None) -> tuple[int, int]:
    """``(points_per_call, eval_batch)`` from a call's working set (:data:`CALL_BYTES`), the memory
    budget and the landscape's points: never more points per call than it has, and as few per call as
    the calls the working set asks for need (their points spread evenly, so the last call is not mostly
    padding)."""
    p = 1
    if eval_mode and batched:
        per_point = max(1, 4 * (n_params + n_samples * act_per_sample))
        p = int(min(MAX_POINTS_PER_CALL, max(1, CALL_BYTES // per_point)))
        p = 1 << (p.bit_length() - 1)  # power of two
        while p > 1 and 4 * p * (n_params + n_samples * act_per_sample) > MEMORY_BUDGET:
            p //= 2
        if n_points is not None:
            p = max(1, min(p, n_points))
            # the calls the working set needs, the points spread evenly over them: the last call pads fewer
            # copies (51 points at up to 16 per call: four calls of 13, not three of 16 and one of 3 padded)
            calls = -(-n_points // p)
            p = -(-n_points // calls)
    eval_batch = n_samples
    while eval_batch > 1 and 4 * p * eval_batch * act_per_sample > MEMORY_BUDGET:
        eval_batch = (eval_batch + 1) // 2
    return p, eval_batch


def _batch_run(samples: Samples, eval_batch: int) -> int:
    """The samples per evaluation batch that run: ``eval_batch`` for one mergeable block of samples; the
    caller's own batches otherwise (their largest), which are never cut (a batch's loss is the task's over
    it, e.g. a mean over its tokens), so that is what a plan records."""
    return eval_batch if samples.rebatchable else max(samples.sizes, default=eval_batch)


def has_conv2d(network: nn.Module) -> bool:
    """Whether the network has 2-D convolutions, whose kernels the plan may lay out channels-last."""
    return any(isinstance(m, nn.Conv2d) for m in network.modules())


def _activations(spec: EngineSpec) -> int:
    probe = spec.samples.first(2)
    return activation_elements(spec.network, spec.task, probe, batch_size(probe, spec.task), eval_mode=spec.eval_mode)


def heuristic_plan(spec: EngineSpec, *, n_points: int, device: str = "cpu", defer: bool = False,
                   exclude: Collection[str] = ()) -> Plan:
    """The default plan: a pure function of the network, the task, the samples' shapes, the
    number of points and the device's kind (probes are run, never timed).

    One point per call for a landscape of at most :data:`SMALL_LANDSCAPE_POINTS` points. Else
    several points per call when a call's working set allows it, by the first way (not in
    ``exclude``) that gives the one-point values on a probe -- or, ``defer``, the first that
    applies, to be checked by its engine on the landscape's first group
    (:attr:`~landscape.engine._engine.EngineSpec.verify`); otherwise one point per call with convolution kernels
    channels-last (oneDNN and cuDNN run most CNNs 1.2-2x faster so). Samples per batch: all of
    them, within the memory budget (what tuning chose for ResNet-20 (eval), ResNet-18 and GPT-2
    on a CPU; see the README's benchmarks for where it differs).
    """
    del device  # the same sizes on every kind today; kept in the signature: it is an input of the rule
    samples = spec.samples
    n_params = sum(t.numel() for t in spec.network.parameters())
    # batch-norm statistics estimated at every point need the point alone in the network, directions
    # drawn at every read (memory="lean") one point per call, and the batched ways form the points in
    # float32 (a bfloat16 network's points are rounded to it one by one)
    batched = spec.bn_statistics != "recompute" and spec.memory != "lean" and \
        all(spec.centre[n].dtype == torch.float32 for n in spec.names)
    batched = batched and n_points > SMALL_LANDSCAPE_POINTS  # too few points to pay for the probe
    # the activations (a forward on two samples, hooked) size the points per call and the evaluation batch;
    # they only lower the points per call, so where none leaves one point per call and the caller's batches
    # run as they are (a large model's list of batches), they are not counted (that forward took 0.2 s of
    # GPT-2's 11 x 11 landscape on a GPU)
    sized = samples.rebatchable or sizes(n_params, samples.n, 0, eval_mode=spec.eval_mode, batched=batched,
                                         n_points=n_points)[0] > 1
    act = _activations(spec) if sized else 0
    p, eval_batch = sizes(n_params, samples.n, act, eval_mode=spec.eval_mode, batched=batched, n_points=n_points)
    way = None
    if p > 1:
        way = first_applicable_way(spec, exclude) if defer else first_working_way(spec, min(p, 4), exclude)
    if p > 1 and way is None:
        p, eval_batch = sizes(n_params, samples.n, act, eval_mode=spec.eval_mode, batched=False)
    fmt = "channels_last" if has_conv2d(spec.network) and p == 1 else "contiguous"
    return Plan(p, way if p > 1 else None, _batch_run(samples, eval_batch), memory_format=fmt)


def given_plan(spec: EngineSpec, mode: Mapping[str, Any], *, caller: str = "compute_landscape") -> Plan:
    """The plan of a ``plan=`` dict, its way verified on the probe (refused before any work)."""
    p = int(mode["points_per_call"])
    plan = Plan(p, mode.get("batching") if p > 1 else None, int(mode.get("eval_batch") or spec.samples.n),
                how="given", memory_format=str(mode.get("memory_format") or "contiguous"))
    if plan.batching is not None:
        why = verify_way(spec, plan.batching, min(p, 4))
        if why is not None:
            raise InvalidParameterError(
                f"The 'plan' parameter of {caller}: batching {plan.batching!r} cannot run this network and task: "
                f"{why}. HINT: plan='auto' picks a way that gives the one-point values (or one point per call).")
    return plan


def _time_per_point(spec: EngineSpec, device: str, points: int) -> float:
    eng = Engine(spec, device)
    warm = probe_points(max(1, spec.points_per_call))
    eng.evaluate(warm)  # first call: caches, allocations, kernels
    pts = probe_points(points)
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)
    t0 = time.perf_counter()
    eng.evaluate(pts)
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)
    return (time.perf_counter() - t0) / points


def _label(q: int, kind: str | None, eb: int, layout: str) -> str:
    return f"p={q}" + (f" {kind}" if kind else "") + f" batch={eb}" + (
        " channels_last" if layout != "contiguous" else "")


def tune_plan(spec: EngineSpec, *, n_points: int, device: str = "cpu") -> Plan:
    """``plan="tune"``: the heuristic's candidates timed on (at most :data:`TUNE_SAMPLES` of) the
    real samples within :data:`TUNE_SHARE` of the expected time; the fastest kept, a batched
    plan only when it beats one point per call by :data:`MARGIN`."""
    heuristic = heuristic_plan(spec, n_points=n_points, device=device)
    samples = spec.samples
    timed = _head(samples, TUNE_SAMPLES)
    conv = has_conv2d(spec.network)
    n_params = sum(t.numel() for t in spec.network.parameters())
    _, eval_batch = sizes(n_params, samples.n, _activations(spec), eval_mode=spec.eval_mode, batched=False)
    eval_batch = _batch_run(samples, eval_batch)
    fmt = "channels_last" if conv else "contiguous"
    one = dataclasses.replace(spec, samples=timed.rebatch(eval_batch), points_per_call=1, batching=None,
                              memory_format=fmt)
    t1 = _time_per_point(one, device, 1)
    budget = min(TUNE_MAX_S, max(TUNE_SHARE * t1 * n_points * samples.n / timed.n, 4 * t1))
    spent = 2 * t1
    timings: dict[str, float] = {_label(1, None, eval_batch, fmt): t1}
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
    if heuristic.points_per_call > 1:
        q = 2
        while q <= heuristic.points_per_call:
            candidates.append((q, heuristic.batching, heuristic.eval_batch, "contiguous"))
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
            _log.info("plan %s failed while tuning: %s", _label(q, kind, eb, layout), exc)
            continue
        timings[_label(q, kind, eb, layout)] = t
        if t * (MARGIN if q > 1 and best[1].points_per_call == 1 else 1.0) < best[0]:
            best = (t, Plan(q, kind, eb, memory_format=layout))
    chosen = best[1]
    _log.info("plan: %s (tuned in %.2f s: %s)", _label(chosen.points_per_call, chosen.batching, chosen.eval_batch,
                                                        chosen.memory_format), spent,
              ", ".join(f"{k}: {v * 1e3:.3g} ms/pt" for k, v in timings.items()))
    return dataclasses.replace(chosen, how="tuned", timings=timings)


def choose_plan(spec: EngineSpec, *, n_points: int, device: str = "cpu", mode: Any = "auto",
                caller: str = "compute_landscape", defer: bool = False, exclude: Collection[str] = ()) -> Plan:
    """The plan for evaluating ``n_points`` points of ``spec`` (whose plan fields are ignored).

    Parameters
    ----------
    spec : EngineSpec
        The network, task, samples (not yet cut into evaluation batches), centre and directions.
    n_points : int
        Points of the landscape.
    device : str
        Where tuning runs (the first device of the evaluation); its kind is an input of the heuristic.
    mode : {"auto", "tune"} or dict
        See the module docstring ("heuristic", the former name of "auto", is accepted).
    caller : str
        The entry point a refused plan is reported for.
    defer, exclude
        ``mode="auto"``: the way's check left to the engine's first group, and the ways not to use
        (:func:`heuristic_plan`).
    """
    if isinstance(mode, Mapping):
        return given_plan(spec, mode, caller=caller)
    if mode == "tune":
        return tune_plan(spec, n_points=n_points, device=device)
    return heuristic_plan(spec, n_points=n_points, device=device, defer=defer, exclude=exclude)


def plan_key(spec: EngineSpec, n_points: int, device: str, model_digest: str, task_name: str) -> str:
    """What decides a tuned plan, as text: a recorded tuned plan with the same key is reused."""
    shapes = [(tuple(t.shape), str(t.dtype)) for t in spec.samples.tensors()[:8]]
    return repr((model_digest, task_name, spec.samples.n, len(spec.samples.batches), shapes, spec.eval_mode,
                 list(spec.names), n_points, torch.device(device).type))


def _head(samples: Samples, k: int) -> Samples:
    """The first ``k`` samples (all when there are fewer): views of a merged block, else whole batches."""
    if samples.n <= k:
        return samples
    if samples.rebatchable:
        whole = slice_batch(samples._whole, k, size=samples.n)
        return Samples([whole], [k], merged=True, _whole=whole)
    batches, sizes_, have = [], [], 0
    for batch, size in zip(samples.batches, samples.sizes):
        if have >= k:
            break
        batches.append(batch)
        sizes_.append(size)
        have += size
    return Samples(batches, sizes_)

