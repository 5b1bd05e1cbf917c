"""``compute_landscape``: the notebook entry point (validation, then the private core)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal, cast

from torch import nn

from collector.common import (
    InstanceOf,
    Interval,
    InvalidParameterError,
    Options,
    check_param,
    unwrap_module,
)
from landscape.engine import Supervised, as_task, collect, is_batch_metric
from landscape.execution._devices import resolve_devices
from landscape.execution._distributed import check_devices_for_dist, detect
from landscape.generate._build import build_landscape, metric_dict
from landscape.generate._plan import Execution, Geometry, Kind, LandscapePlan, Problem
from landscape.result._landscape import Landscape

__all__ = ["compute_landscape"]
_CALLER = "compute_landscape"


def check_common(*, normalization: Any, ignore: Any, seed: Any, eval_mode: Any, device_ids: Any,
                 caller: str) -> None:
    """Validate the options shared by compute_landscape and SummaryLandscape."""
    check_param("normalization", normalization, [Options(("layer", "filter", "none"))], caller=caller)
    check_param("ignore", ignore, [None, Options(("biasbn",))], caller=caller)
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
    legacy = sorted(k for k, m in metrics.items() if not is_batch_metric(m))
    if legacy and not isinstance(task, Supervised):
        raise InvalidParameterError(
            f"The 'metrics' parameter of {caller}: {legacy} are computed on (outputs, targets), which only a "
            f"loss_fn or a Supervised task gives; the task here is {task!r}. HINT: write them as "
            "metric(model, batch) and set metric.metric_inputs = 'batch'.")


def compute_landscape(
    network: nn.Module,
    loss_fn: Any = None,
    data: Any = None,
    *,
    task: Any = None,
    directions: Literal["random", "pca"] | tuple[Mapping, Mapping] = "random",
    checkpoints: Sequence[Any] | None = None,
    size: int = 40,
    num_samples: int | None = 2048,
    normalization: Literal["layer", "filter", "none"] = "layer",
    ignore: Literal["biasbn"] | None = None,
    seed: int = 0,
    eval_mode: bool = True,
    device_ids: list[int] | None = None,
    metrics: Mapping[str, Any] | None = None,
    pca_method: Literal["mindspore", "li"] = "mindspore",
    tag: str | None = None,
    distributed: bool | None = None,
) -> Landscape:
    """Compute a loss landscape around a network's weights or a trajectory's last checkpoint.

    Parameters
    ----------
    network : nn.Module
        The architecture (never modified: the engine works on a copy).
    loss_fn : callable, optional
        ``loss_fn(outputs, labels)`` for ``(inputs, labels)`` batches; 'mean', 'sum' or
        'none' reductions all give the mean. Give this or ``task``.
    data : DataLoader, iterable of batches, map-style Dataset or (inputs, labels) tensors
        The first ``num_samples`` samples are taken once and used for every point.
        Batches may be any structure the task understands (dicts of token ids, tuples
        of several inputs); every tensor in them is moved to the device.
    task : callable, optional
        ``task(model, batch) -> loss`` (a 0-d tensor, the mean over the batch's samples)
        instead of ``loss_fn``: ``landscape.tasks.HuggingFace()`` for a Hugging Face model
        given its labels, ``Supervised(loss_fn, inputs=..., targets=..., output=...)`` for
        other batch layouts, or your own function.
    directions : {"random", "pca"} or (dict, dict), default="random"
        Seeded normal directions, PCA of ``checkpoints`` (MindSpore's by default), or two
        state-dict-shaped direction dicts used as given.
    checkpoints : list of state dicts or paths, default=None
        The trajectory (the last is the centre); without it the centre is ``network``.
    size : int, default=40
        Grid resolution (``size`` x ``size``).
    num_samples : int or None, default=2048
        Samples the loss is averaged over; None takes the whole dataset. Samples that
        do not fit the device's share of memory are streamed from host memory, one
        batch at a time, with the same result.
    normalization : {"layer", "filter", "none"}, default="layer"
    ignore : {"biasbn"} or None, default=None
        Zero the direction of every tensor with at most one dimension.
    seed : int, default=0
        Seed of the random directions.
    eval_mode : bool, default=True
        Evaluate in eval mode (batch-norm running statistics, no dropout).
    device_ids : list of int, default=None
        CUDA devices, or that many CPU worker processes without CUDA.
    metrics : dict of str to metric, default=None
        Extra surfaces: callables ``m(outputs, labels)`` or objects with clear/update/eval
        (with ``loss_fn`` or a ``Supervised`` task), or ``m(model, batch)`` with
        ``m.metric_inputs = "batch"`` (any task).
    pca_method : {"mindspore", "li"}, default="mindspore"
    tag : str, default=None
    distributed : bool or None, default=None
        Share the points between the processes of a ``torch.distributed`` group (one
        device each): None uses an initialised group or torchrun's environment when there
        is one, True requires one, False computes everything here. Every rank returns the
        whole landscape.

    Returns
    -------
    Landscape
    """
    check_param("network", network, [InstanceOf(nn.Module)], caller=_CALLER)
    task_ = as_task(loss_fn, task, caller=_CALLER)
    network = unwrap_module(network)  # DDP, DataParallel, torch.compile: the module inside
    if data is None:
        raise InvalidParameterError(f"The 'data' parameter of {_CALLER} is required: a DataLoader, an iterable of "
                                    "batches, a Dataset or an (inputs, labels) pair of tensors.")
    pair = (isinstance(directions, (tuple, list)) and len(directions) == 2
            and all(isinstance(d, Mapping) for d in directions))
    if not pair:
        check_param("directions", directions, [Options(("random", "pca"))], caller=_CALLER,
                    hint="or pass a pair of state-dict-shaped direction dicts.")
    check_param("checkpoints", checkpoints, [None, InstanceOf(list, tuple)], caller=_CALLER)
    if directions == "pca" and (checkpoints is None or len(checkpoints) < 3):
        raise InvalidParameterError(
            f"The 'checkpoints' parameter of {_CALLER} must hold at least 3 checkpoints for "
            f"directions='pca'. Got {None if checkpoints is None else len(checkpoints)} instead.")
    if checkpoints is not None and len(checkpoints) == 0:
        raise InvalidParameterError(f"The 'checkpoints' parameter of {_CALLER} must not be empty.")
    check_param("size", size, [Interval(int, 2, None)], caller=_CALLER)
    check_param("num_samples", num_samples, [Interval(int, 1, None), None], caller=_CALLER,
                hint="None uses the whole dataset.")
    check_param("pca_method", pca_method, [Options(("mindspore", "li"))], caller=_CALLER)
    check_param("tag", tag, [None, str], caller=_CALLER)
    check_param("distributed", distributed, [None, "boolean"], caller=_CALLER)
    check_devices_for_dist(distributed, device_ids, _CALLER)
    check_common(normalization=normalization, ignore=ignore, seed=seed, eval_mode=eval_mode,
                 device_ids=device_ids, caller=_CALLER)
    devices, threads = resolve_devices(None if device_ids is None else list(device_ids), _CALLER)
    metric_map = metric_dict(metrics)
    check_metrics(metric_map, task_, _CALLER)
    samples = collect(data, num_samples, task_, caller=_CALLER)
    kind: Kind = "given" if pair else cast(Kind, directions)
    trajectory = list(checkpoints) if checkpoints is not None else None
    if kind != "pca" and trajectory is not None:
        trajectory = trajectory[-1:]
    dist = detect(distributed, _CALLER)
    try:
        problem = Problem(network, task_, samples, metrics=metric_map, eval_mode=eval_mode)
        geometry = Geometry(kind=kind, size=size, normalization=normalization, ignore=ignore, seed=seed,
                            trajectory=trajectory,
                            given=(cast(Mapping, directions[0]), cast(Mapping, directions[1])) if pair else None,
                            pca_method=pca_method)
        return build_landscape(problem, LandscapePlan(geometry, tag=tag),
                               Execution(devices=devices, threads=threads, dist=dist))
    finally:
        if dist is not None:
            dist.close()
