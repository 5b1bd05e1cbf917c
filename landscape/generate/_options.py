"""Validation of the options ``compute_landscape`` and ``SummaryLandscape`` share, and the
choice of view from ``directions``, ``between`` and ``dims`` (private)."""

from __future__ import annotations

import math
import numbers
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from torch import nn

from collector.common import Interval, InvalidParameterError, Options, check_param
from landscape.engine import (
    BATCHINGS,
    MEMORY_FORMATS,
    MEMORY_SETTINGS,
    PLAN_MODES,
    is_batch_metric,
    is_point_metric,
    is_sharded,
)
from landscape.geometry import BIASBN, BN_STATISTICS, GRID_KINDS, MAX_DIMS, NORMALIZATIONS, moved_names
from landscape.tasks import Supervised

__all__ = ["check_common", "check_grid", "check_points", "MAX_POINTS", "check_metrics", "check_plan", "check_memory",
           "check_sharded", "check_range", "check_patterns", "check_selection", "check_bn_statistics", "check_runs",
           "check_runs_view", "resolve_view", "View", "SampleCount", "TooManySamples"]

AxisRange = tuple[float, float, int]


def check_patterns(name: str, value: Any, caller: str, *, keyword: str | None = None) -> tuple[str, ...] | None:
    """None, one glob pattern or a sequence of them (non-empty strings), as a tuple."""
    items = [value] if isinstance(value, str) else value
    ok = value is None or (isinstance(items, (list, tuple)) and len(items) > 0
                           and all(isinstance(p, str) and p for p in items))
    if not ok:
        extra = f", or the keyword {keyword!r}" if keyword else ""
        raise InvalidParameterError(
            f"The '{name}' parameter of {caller} must be None, a glob pattern or a non-empty list of glob patterns"
            f"{extra}. Got {value!r} instead. HINT: patterns are matched with fnmatch against parameter names "
            "and their modules' names: 'fc1' or 'fc1.*' for a layer, '*.bias' for every bias.")
    return None if value is None else tuple(items)


def check_range(name: str, value: Any, caller: str) -> AxisRange | None:
    """An axis ``(min, max, num)``: finite min < max, an int num >= 2; returned as floats and an int."""
    if value is None:
        return None
    ok = (isinstance(value, (list, tuple)) and len(value) == 3
          and all(isinstance(v, numbers.Real) and not isinstance(v, bool) for v in value[:2])
          and all(math.isfinite(float(v)) for v in value[:2]) and float(value[0]) < float(value[1])
          and isinstance(value[2], numbers.Integral) and not isinstance(value[2], bool) and int(value[2]) >= 2)
    if not ok:
        raise InvalidParameterError(
            f"The '{name}' parameter of {caller} must be None or a (min, max, num) triple with finite "
            f"min < max and an int num >= 2. Got {value!r} instead. HINT: {name}=(-0.5, 1.5, 101) gives "
            "np.linspace(-0.5, 1.5, 101).")
    return float(value[0]), float(value[1]), int(value[2])


def check_selection(network: nn.Module, ignore: Any, include: Any, caller: str) -> None:
    """Refuse ``include`` / ``ignore`` patterns that match no parameter of ``network`` (or move nothing),
    before any work."""
    try:
        moved_names(network, ignore, include, buffers=True)
    except ValueError as exc:
        raise InvalidParameterError(f"{caller}: {exc}") from None


def check_common(*, normalization: Any, ignore: Any, seed: Any, eval_mode: Any, device_ids: Any,
                 caller: str, include: Any = None, biasbn: Any = "normalize") -> None:
    """Validate the options shared by compute_landscape and SummaryLandscape."""
    check_param("normalization", normalization, [Options(NORMALIZATIONS)], caller=caller,
                hint="'layer' is MindSpore's; 'filter', 'dfilter', 'dlayer' and 'weight' are Li et al.'s.")
    check_patterns("ignore", ignore, caller, keyword="biasbn")
    check_patterns("include", include, caller)
    check_param("biasbn", biasbn, [Options(BIASBN)], caller=caller,
                hint="'li' gives tensors with at most one dimension the tensor itself as their direction.")
    check_param("seed", seed, [Interval(int, 0, None)], caller=caller)
    check_param("eval_mode", eval_mode, ["boolean"], caller=caller)
    ids_ok = (device_ids is None or (isinstance(device_ids, (list, tuple)) and len(device_ids) > 0
              and all(isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in device_ids)
              and len(set(device_ids)) == len(device_ids)))
    if not ids_ok:
        raise InvalidParameterError(
            f"The 'device_ids' parameter of {caller} must be None or a non-empty list of distinct "
            f"ints >= 0. Got {device_ids!r} instead. HINT: [0, 1] uses CUDA devices 0 and 1, or two "
            "CPU worker processes when no CUDA device is visible.")


def check_metrics(metrics: Mapping[str, Any], task: Any, caller: str) -> None:
    """Metrics on (outputs, targets) need a Supervised task (a loss_fn); refuse them otherwise."""
    legacy = sorted(k for k, m in metrics.items() if not (is_batch_metric(m) or is_point_metric(m)))
    if legacy and not isinstance(task, Supervised):
        raise InvalidParameterError(
            f"The 'metrics' parameter of {caller}: {legacy} are computed on (outputs, targets), which only a "
            f"loss_fn or a Supervised task gives; the task here is {task!r}. HINT: write them as "
            "metric(model, batch) and set metric.metric_inputs = 'batch'.")


def check_plan(plan: Any, caller: str) -> None:
    """``"auto"``, ``"tune"`` (``"heuristic"``: the former name of "auto") or a dict with
    points_per_call, batching, eval_batch and memory_format."""
    if isinstance(plan, Mapping):
        unknown = sorted(set(plan) - {"points_per_call", "batching", "eval_batch", "memory_format"})
        if unknown or "points_per_call" not in plan:
            raise InvalidParameterError(
                f"The 'plan' parameter of {caller} must be 'auto', 'tune' or a dict with the keys "
                f"'points_per_call' (required), 'batching', 'eval_batch' and 'memory_format'. "
                f"Got {dict(plan)!r} instead.")
        check_param("plan['points_per_call']", plan["points_per_call"], [Interval(int, 1, None)], caller=caller)
        check_param("plan['batching']", plan.get("batching"), [None, Options(BATCHINGS)], caller=caller)
        check_param("plan['eval_batch']", plan.get("eval_batch"), [None, Interval(int, 1, None)], caller=caller)
        check_param("plan['memory_format']", plan.get("memory_format"), [None, Options(tuple(MEMORY_FORMATS))],
                    caller=caller)
        if plan["points_per_call"] > 1 and plan.get("batching") is None:
            raise InvalidParameterError(f"The 'plan' parameter of {caller}: points_per_call > 1 needs a 'batching' "
                                        f"({', '.join(BATCHINGS)}). Got {dict(plan)!r} instead.")
        return
    check_param("plan", plan, [Options((*PLAN_MODES, "heuristic"))], caller=caller,
                hint="'auto' is deterministic, 'tune' times the candidates; or a dict {'points_per_call': 4, "
                     "'batching': 'folded', 'eval_batch': 256}.")


def check_memory(memory: Any, plan: Any, caller: str) -> None:
    """``"auto"``, ``"fast"`` or ``"lean"``; "lean" evaluates one point per call, so a plan dict asking
    for more is refused with it."""
    check_param("memory", memory, [Options(MEMORY_SETTINGS)], caller=caller,
                hint="'fast' holds the directions (two model sizes), 'lean' draws random directions "
                     "again whenever a tensor is read (no memory); 'auto' holds them when they fit.")
    if memory == "lean" and isinstance(plan, Mapping) and int(plan.get("points_per_call", 1)) > 1:
        raise InvalidParameterError(
            f"The 'plan' parameter of {caller} asks for {plan['points_per_call']} points per call, which need the "
            f"directions held; memory='lean' draws them at every read, one point per call. Got plan={dict(plan)!r} "
            "with memory='lean'. HINT: memory='fast' or plan={'points_per_call': 1}.")


def check_sharded(network: nn.Module, *, kind: str, centre_given: bool, metrics: Any, eval_mode: Any, plan: Any,
                  distributed: Any, caller: str) -> None:
    """What a network sharded with FSDP2 (``fully_shard``) can do, checked before any work: a random
    plane or line around its own state, the loss only, in eval mode, one point per call, on every rank
    of an initialised process group."""
    if not is_sharded(network):
        return
    import torch.distributed as td

    hint = ("HINT: launch every rank with torchrun, shard the model with fully_shard, and call "
            "compute_landscape(model, data=..., task=...) on every rank with random directions.")
    refusals = [
        ("directions", kind != "random", f"random (each rank draws its shard of them), not a {kind!r} view"),
        ("checkpoints", centre_given, "None: the centre is the sharded network's own state"),
        ("metrics", bool(metrics), "None: every rank computes the loss on its share of the samples"),
        ("eval_mode", eval_mode is not True, "True: train mode's dropout would draw per rank"),
        ("plan", plan == "tune" or (isinstance(plan, Mapping) and int(plan.get("points_per_call", 1)) != 1),
         "'auto' or a dict with points_per_call=1: the ranks evaluate one point per call together"),
        ("distributed", distributed is False, "None or True: the shards live on the ranks of the group"),
    ]
    for name, bad, need in refusals:
        if bad:
            raise InvalidParameterError(f"The '{name}' parameter of {caller} must be {need} for a network sharded "
                                        f"with fully_shard. {hint}")
    if not (td.is_available() and td.is_initialized()):
        raise InvalidParameterError(f"The 'network' parameter of {caller} is sharded with fully_shard, but no "
                                    f"process group is initialised. {hint}")


def check_grid(*, runs: Any, memory: Any, network: nn.Module, dims: int, caller: str) -> None:
    """What an n-D grid (``dims > 2``) cannot do, refused before any work: several runs (their paths are
    drawn on a plane), ``memory="lean"`` (its directions are held) and a network sharded with FSDP2 (its
    planes are evaluated around moved copies of the centre)."""
    refusals = [
        ("checkpoints", runs is not None, "a list (or None), not several runs: their paths are drawn on planes"),
        ("memory", memory == "lean", "'auto' or 'fast': an n-D grid holds its directions"),
        ("network", is_sharded(network), "a network that is not sharded with fully_shard"),
    ]
    for name, bad, need in refusals:
        if bad:
            raise InvalidParameterError(f"The '{name}' parameter of {caller} must be {need} for an n-D grid "
                                        f"(dims={dims}). HINT: dims=2 draws a plane.")


#: The most points a landscape's grid may hold (2**24): its coordinates and values are arrays of that
#: many rows, and each point is one evaluation of the network. A fixed bound, so that whether a call is
#: refused never depends on the machine.
MAX_POINTS = 2 ** 24


def check_points(*, dims: int, size: int, x: Any, y: Any, caller: str) -> None:
    """Refuse, before any work, a grid of more than :data:`MAX_POINTS` points: ``x``'s and ``y``'s
    ``num`` (``size`` where not given; ``y`` only from 2 dimensions) times ``size`` along each later
    axis of an n-D grid."""

    def count(s: int) -> int:
        nx = int(x[2]) if x is not None else s
        ny = (int(y[2]) if y is not None else s) if dims >= 2 else 1
        return nx * ny * s ** max(dims - 2, 0)

    points = count(size)
    if points <= MAX_POINTS:
        return
    given = [name for name, axis in (("x", x), ("y", y)) if axis is not None]
    fits = next((s for s in range(size - 1, 1, -1) if count(s) <= MAX_POINTS), None)
    hint = f"fewer points per axis: size={fits} gives {count(fits):,}" if fits is not None else \
        f"fewer points along {' and '.join(given)}"
    axes = "".join(f", {name}={axis!r}" for name, axis in (("x", x), ("y", y)) if axis is not None)
    raise InvalidParameterError(
        f"The grid of {caller} with dims={dims} and size={size}{axes} "
        f"holds {points:,} points, more than the {MAX_POINTS:,} (2**24) a landscape may hold: each is an evaluation "
        f"of the network, and their coordinates alone would take {8 * max(dims, 2) * points / 2 ** 30:.3g} GiB. "
        f"HINT: {hint}.")


def check_bn_statistics(value: Any, caller: str) -> None:
    check_param("bn_statistics", value, [Options(BN_STATISTICS)], caller=caller,
                hint="'clamped' (default) carries them with the parameters, variances clamped at zero; 'recompute' "
                     "estimates them again at every point from the samples (Garipov et al.'s bn_update).")


@dataclass(frozen=True)
class SampleCount:
    """How many samples a generation takes, and where the number comes from (for its messages).

    Attributes
    ----------
    n : int or None
        The samples (None: the whole dataset).
    way : str
        How the user gives the number, with ``{n}`` for it: ``"collect_landscape={{'num_samples': {n}}}"``.
    recorded_in : str or None
        The metadata file the number was read from; None when the caller asked for it.
    default : bool
        Recorded as the collector's default (not chosen when training): a smaller dataset is
        then taken whole, and the log says so.
    """

    n: int | None
    way: str
    recorded_in: str | None = None
    default: bool = False


class TooManySamples(InvalidParameterError):
    """More samples asked for (or recorded when training) than the dataset holds, refused before
    any checkpoint is loaded or any point evaluated.

    Attributes
    ----------
    count : SampleCount
    have : int
        The dataset's samples.
    """

    def __init__(self, count: SampleCount, have: int, caller: str, data: str) -> None:
        self.count, self.have = count, have
        super().__init__(f"{caller}: {self.worded(count.way, data)}")

    def worded(self, way: str, data: str) -> str:
        """The refusal naming ``way`` (``"--num-samples {n}"`` at the command line) as the way out
        and ``data`` as where the samples come from."""
        asked = self.count.n
        if self.count.recorded_in is None:
            what = f"{way.format(n=asked)} asks for more samples than {data} holds"
        else:
            what = (f"{self.count.recorded_in} records num_samples={asked} (chosen when training), more samples "
                    f"than {data} holds")
        return (f"{what} ({self.have} samples). HINT: pass {way.format(n=self.have)} or fewer; each point's "
                "loss is the mean over exactly that many samples.")


def check_runs(checkpoints: Any, caller: str) -> dict[str, list]:
    """Several runs given as ``checkpoints={"sgd": [...], "adam": [...]}``: names usable as file
    groups, each run a non-empty list."""
    runs = {}
    for name, ckpts in checkpoints.items():
        if not (isinstance(name, str) and name and "/" not in name and not name.startswith("_")):
            raise InvalidParameterError(
                f"The 'checkpoints' parameter of {caller}: run names must be non-empty strings without '/' and not "
                f"starting with '_'. Got {name!r} instead.")
        if not isinstance(ckpts, (list, tuple)) or len(ckpts) == 0:
            raise InvalidParameterError(f"The 'checkpoints' parameter of {caller}: run {name!r} must be a non-empty "
                                        f"list of checkpoints. Got {ckpts!r:.100} instead.")
        runs[name] = list(ckpts)
    if not runs:
        raise InvalidParameterError(f"The 'checkpoints' parameter of {caller} must not be empty.")
    return runs


def check_runs_view(runs: Mapping[str, list], centre: Any, view_kind: str, second: str, caller: str) -> None:
    """A view several runs can be drawn on, and ``centre`` one of theirs."""
    if view_kind == "pca" and sum(len(r) for r in runs.values()) < 3:
        raise InvalidParameterError(
            f"The 'checkpoints' parameter of {caller} must hold at least 3 checkpoints in all for a shared PCA "
            f"plane. Got {sum(len(r) for r in runs.values())} instead.")
    if view_kind == "interpolation" or (view_kind == "target" and second == "pca"):
        raise InvalidParameterError(
            f"The 'checkpoints' parameter of {caller}: several runs are drawn on a plane (directions='pca' for "
            "their shared plane, or a random, given, Hessian, target or three-model plane); not on "
            f"{'an interpolation' if view_kind == 'interpolation' else 'directions=(target, pca)'}.")
    centres = ("start", "mean", *runs)
    check_param("centre", centre, [None, Options(centres)], caller=caller,
                hint=("'start' (the runs' saved initial weights; for runs saved without them, the first run's "
                      "first checkpoint)" if caller == "compare_runs" else "'start' (the first run's first "
                      "checkpoint: the runs' start when they share it)") + ", 'mean' (of all their checkpoints) or "
                     "a run's name (its last checkpoint); None: the first run's end.")


@dataclass(frozen=True)
class View:
    """What ``directions``, ``between`` and ``dims`` ask for (see :func:`resolve_view`)."""

    kind: str
    dims: int
    normalization: str
    second: str = "random"
    given: tuple[Mapping, Mapping | None] | None = None


def _is_model(item: Any) -> bool:
    return isinstance(item, (Mapping, str, os.PathLike, nn.Module))


def resolve_view(*, directions: Any, between: Any, dims: Any, checkpoints: Any, normalization: Any,
                 caller: str) -> View:
    """The view, with the options that do not fit it refused (each message names the fix).

    =====================================  =========  ==============================
    directions / between                   dims       view
    =====================================  =========  ==============================
    "random" (default)                     2 or 1     random plane / line
    "pca" (checkpoints)                    2          PCA plane with the path
    "hessian"                              2 or 1     top Hessian eigenvectors
    "random", "hessian" or "pca"           3 to 6     an n-D grid of as many directions
    (dict, dict) / dict                    2 / 1      given directions
    between=(A, B)                         1          interpolation A -> B
    between=(A, B), "target"               2          B - A and a random axis
    between=(A, B), ("target", "pca")      2          B - A and the trajectory's axis
    between=(A, B, C)                      2          plane through A, B, C
    =====================================  =========  ==============================

    ``normalization=None`` takes the view's default: "layer" (MindSpore's) for random and
    PCA directions, "none" for given directions and axes between models.
    """
    check_param("dims", dims, [None, Interval(int, 1, MAX_DIMS)], caller=caller,
                hint=f"1 for a line, 2 for a plane, 3 to {MAX_DIMS} for an n-D grid (random, Hessian or PCA "
                     "directions).")
    if dims is not None and dims > 2 and (between is not None or not isinstance(directions, (str, type(None)))
                                          or (directions or "random") not in GRID_KINDS):
        raise InvalidParameterError(
            f"The 'dims' parameter of {caller} is {dims}: a grid of more than two directions takes directions "
            f"{' or '.join(repr(k) for k in GRID_KINDS)}, without between. Got directions={directions!r:.100}"
            f"{'' if between is None else ' with between'} instead. HINT: dims=2 for the other views.")
    if normalization is not None:
        check_param("normalization", normalization, [Options(NORMALIZATIONS)], caller=caller)
    if between is not None:
        ok = isinstance(between, (list, tuple)) and len(between) in (2, 3) and all(_is_model(m) for m in between)
        if not ok:
            raise InvalidParameterError(
                f"The 'between' parameter of {caller} must be None or a sequence of 2 or 3 models (state dicts, "
                f"checkpoint paths or nn.Modules). Got {between!r:.200} instead. HINT: between=(A, B) is the line "
                "from A to B, between=(A, B, C) the plane through three models.")
    given_pair = (isinstance(directions, (tuple, list)) and len(directions) == 2
                  and all(isinstance(d, Mapping) for d in directions))
    target = directions == "target" or (isinstance(directions, (tuple, list)) and len(directions) == 2
                                        and directions[0] == "target" and isinstance(directions[1], str))
    if target:
        second = "random" if directions == "target" else directions[1]
        check_param("directions[1]", second, [Options(("random", "pca"))], caller=caller,
                    hint="('target', 'random') or ('target', 'pca').")
        if between is None or len(between) != 2:
            raise InvalidParameterError(
                f"The 'directions' parameter of {caller}: 'target' is the direction B - A of between=(A, B); "
                f"got between={between!r:.100}. HINT: pass between=(model_a, model_b).")
        if dims == 1:
            raise InvalidParameterError(
                f"The 'dims' parameter of {caller} must be 2 with directions='target'. Got 1 instead. HINT: the "
                "line along B - A is the interpolation: between=(A, B) without directions.")
        if second == "pca" and (checkpoints is None or len(checkpoints) < 3):
            raise InvalidParameterError(
                f"The 'checkpoints' parameter of {caller} must hold at least 3 checkpoints for directions="
                "('target', 'pca'): the second axis is the trajectory's top direction away from B - A. "
                f"Got {None if checkpoints is None else len(checkpoints)} instead.")
        if second == "pca":
            _no_normalization(normalization, "the second axis of ('target', 'pca') (scaled to ||B - A||)", caller)
        elif checkpoints is not None:
            _unused_checkpoints(caller, "directions='target' with a random second axis")
        return View("target", 2, "none" if second == "pca" else (normalization or "layer"), second=second)
    if between is not None:
        if directions is not None:
            raise InvalidParameterError(
                f"The 'directions' parameter of {caller} must be None or 'target' with between. Got "
                f"{directions!r:.100} instead. HINT: between=(A, B) alone is the interpolation, "
                "directions='target' adds a random second axis, between=(A, B, C) is the plane through three.")
        if checkpoints is not None:
            _unused_checkpoints(caller, "between (the models are the view's)")
        _no_normalization(normalization, "axes between models", caller)
        if len(between) == 2:
            if dims == 2:
                raise InvalidParameterError(
                    f"The 'dims' parameter of {caller} must be 1 or None with between=(A, B). Got 2 instead. "
                    "HINT: directions='target' gives B - A and a random second axis; between=(A, B, C) the "
                    "plane through three models.")
            return View("interpolation", 1, "none")
        if dims == 1:
            raise InvalidParameterError(f"The 'dims' parameter of {caller} must be 2 or None with three models "
                                        "in between. Got 1 instead. HINT: between=(A, B) is a line.")
        return View("plane", 2, "none")
    if isinstance(directions, Mapping) or given_pair:
        pair = given_pair
        want = 2 if pair else 1
        if dims is not None and dims != want:
            raise InvalidParameterError(
                f"The 'dims' parameter of {caller} must be {want} or None with {'two' if pair else 'one'} given "
                f"direction{'s' if pair else ''}. Got {dims} instead.")
        given = (directions[0], directions[1]) if pair else (directions, None)
        return View("given", want, normalization or "none", given=given)
    d = "random" if directions is None else directions
    check_param("directions", d, [Options(("random", "pca", "hessian"))], caller=caller,
                hint="or 'target' with between=(A, B), a pair of state-dict-shaped direction dicts, or one "
                     "such dict for a line.")
    if d == "pca":
        need = max(3, (dims or 2) + 1)  # a direction per difference from the last checkpoint, at most
        if checkpoints is None or len(checkpoints) < need:
            raise InvalidParameterError(
                f"The 'checkpoints' parameter of {caller} must hold at least {need} checkpoints for "
                f"directions='pca'{'' if need == 3 else f' with dims={dims}'}. Got "
                f"{None if checkpoints is None else len(checkpoints)} instead.")
        if dims == 1:
            raise InvalidParameterError(
                f"The 'dims' parameter of {caller} must be 2 with directions='pca' (the path needs both "
                "coordinates). Got 1 instead. HINT: dims=1 is for random or given directions.")
    return View(d, 2 if dims is None else int(dims), normalization or "layer")


def _no_normalization(normalization: Any, what: str, caller: str) -> None:
    if normalization not in (None, "none"):
        raise InvalidParameterError(
            f"The 'normalization' parameter of {caller} must be None or 'none' for {what}. Got "
            f"{normalization!r} instead. HINT: these axes are differences between models (or scaled to them); "
            "normalizing them would move the models off their coordinates.")


def _unused_checkpoints(caller: str, what: str) -> None:
    raise InvalidParameterError(
        f"The 'checkpoints' parameter of {caller} must be None with {what}. HINT: checkpoints give a PCA "
        "trajectory (directions='pca' or ('target', 'pca')) or the centre of random directions.")
