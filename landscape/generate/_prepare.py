"""What both entry points do before any point: validate, then build the problem (private).

:func:`check_options` validates the options ``compute_landscape`` and ``SummaryLandscape``
share, without the network (``SummaryLandscape`` calls it before its ``callback_fn``);
:func:`prepare_problem` takes the network and the data: the task, the metrics, the moved
tensors' selection and the samples, as a :class:`Problem`.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from torch import nn

from collector.common import InvalidParameterError, check_param, unwrap_module
from collector.train import check_metrics as check_metric_forms
from collector.train import get_metric
from landscape.engine import Samples, TooFewSamples, check_loss, collect, is_sharded
from landscape.execution import check_devices
from landscape.generate._jobs import Problem
from landscape.generate._options import (
    SampleCount,
    TooManySamples,
    check_common,
    check_memory,
    check_metrics,
    check_patterns,
    check_plan,
    check_range,
    check_selection,
)
from landscape.tasks import as_task

__all__ = ["SharedOptions", "check_options", "prepare_problem", "metric_dict", "take_samples"]
_log = logging.getLogger("landscape")

AxisRange = tuple[float, float, int]


@dataclass(frozen=True)
class SharedOptions:
    """The shared options, validated: the axes and the selection of moved tensors as the
    geometry takes them."""

    x: AxisRange | None
    y: AxisRange | None
    ignore: str | tuple[str, ...] | None
    include: tuple[str, ...] | None


def check_options(*, normalization: Any, ignore: Any, include: Any, biasbn: Any, seed: Any, eval_mode: Any,
                  device_ids: Any, distributed: Any, plan: Any, x: Any, y: Any, caller: str,
                  memory: Any = "auto") -> SharedOptions:
    """Validate the options shared by both entry points (nothing is loaded or run)."""
    check_common(normalization=normalization, ignore=ignore, seed=seed, eval_mode=eval_mode, device_ids=device_ids,
                 caller=caller, include=include, biasbn=biasbn)
    check_param("distributed", distributed, [None, "boolean"], caller=caller)
    check_plan(plan, caller)
    check_memory(memory, plan, caller)
    x_range, y_range = check_range("x", x, caller), check_range("y", y, caller)
    check_devices(None if device_ids is None else list(device_ids), distributed, caller)
    ignores = check_patterns("ignore", ignore, caller, keyword="biasbn")
    return SharedOptions(x_range, y_range, ignores[0] if ignores is not None and len(ignores) == 1 else ignores,
                   check_patterns("include", include, caller))


def metric_dict(metrics: Any) -> dict[str, Any]:
    """The user's metrics by name: a dict as given, a set, list or tuple of names (``"accuracy"``)
    through ``collector.train.get_metric``."""
    if not metrics:
        return {}
    if isinstance(metrics, (set, list, tuple)):
        return {str(n): get_metric(n) for n in metrics}
    return {str(k): m for k, m in dict(metrics).items()}


def prepare_problem(network: nn.Module, data: Any, *, loss_fn: Any = None, task: Any = None, metrics: Any = None,
                    num_samples: int | Literal["auto"] | SampleCount | None, eval_mode: bool, plan: Any, ignore: Any,
                    include: Any, caller: str, where: str = "", metrics_name: str = "metrics",
                    memory: str = "auto", bn_data: Any = None) -> Problem:
    """The problem every landscape of the call evaluates, checked before any point: the network
    (DDP, DataParallel and torch.compile unwrapped), the task from ``loss_fn`` or ``task``, the
    metrics, the moved tensors' selection, then the samples (read once; see :func:`take_samples`),
    and the task's loss on them at the network's weights (:func:`landscape.engine.check_loss`: bad
    data refused before any point, file or folder). ``where`` says where the user gave them
    (" (callback_fn)") for messages. ``bn_data``: the samples batch-norm statistics are estimated
    again on, taken as ``data``'s (the same ``num_samples``) after them."""
    if not isinstance(network, nn.Module):
        raise InvalidParameterError(f"The 'network' parameter of {caller}{where} must be an nn.Module. Got "
                                    f"{type(network).__name__} instead.")
    network = unwrap_module(network)
    task_ = as_task(loss_fn, task, caller=f"{caller}{where}")
    check_metric_forms(metrics, name=metrics_name, caller=caller)
    metric_map = metric_dict(metrics)
    check_metrics(metric_map, task_, f"{caller}{where}")
    check_selection(network, ignore, include, caller)
    if isinstance(num_samples, SampleCount):
        samples = take_samples(data, task_, num_samples, caller=caller, where=where)
    else:  # "auto": the first AUTO_SAMPLES, or all of a smaller dataset (landscape.engine.collect)
        samples = collect(data, num_samples, task_, caller=caller)
    if not is_sharded(network):  # a sharded network's forward needs every rank: its engine's first group tells
        check_loss(network, task_, samples, caller=f"{caller}{where}", eval_mode=eval_mode,
                   loss_fn_given=task is None)
    bn_samples = None if bn_data is None else _bn_samples(bn_data, task_, num_samples, caller)
    return Problem(network, task_, samples, metrics=metric_map, eval_mode=eval_mode, plan=plan, memory=memory,
                   bn_samples=bn_samples)


def _bn_samples(bn_data: Any, task: Any, num_samples: Any, caller: str) -> Samples:
    """``bn_data``'s samples (as many as ``data``'s rule takes), refused naming ``bn_data``."""
    try:
        return collect(bn_data, num_samples, task, caller=caller)
    except TooFewSamples as exc:
        raise InvalidParameterError(
            f"The 'num_samples' parameter of {caller} ({exc.asked}) is larger than 'bn_data' ({exc.have} samples). "
            f"HINT: lower num_samples to at most {exc.have}, or give more samples for the statistics.") from None
    except (TypeError, ValueError) as exc:
        raise InvalidParameterError(
            f"The 'bn_data' parameter of {caller} must be None or data of a form 'data' takes: a DataLoader, an "
            "iterable of batches, a Dataset or an (inputs, labels) pair of tensors, holding samples. Got "
            f"{type(bn_data).__name__} instead ({exc}).") from None


def take_samples(data: Any, task: Any, count: SampleCount, *, caller: str, where: str = "") -> Samples:
    """The first ``count.n`` samples of ``data``. A dataset smaller than that is refused
    (:class:`TooManySamples`, naming ``count.way``), unless the number is the collector's default
    recorded when training: then the whole dataset is used, and the log says so (the landscapes'
    metadata record the samples used). A dataset of known size is refused before it is read; any
    data is read once (a generator of batches too)."""
    try:
        samples = collect(data, count.n, task, caller=caller, at_most=count.default)
    except TooFewSamples as exc:
        raise TooManySamples(count, exc.have, caller, f"the dataset{where}") from None
    if count.n is None or samples.n >= count.n:
        return samples
    have = samples.n
    # the default was recorded without the dataset's size (runs written before the collector
    # capped it): all of a smaller dataset is what the default meant
    _log.warning("%s records num_samples=%d, the collector's default, and the dataset%s holds %d samples: the "
                 "landscapes use all %d (num_samples=%d in their metadata). HINT: %s (--num-samples N at the command "
                 "line) chooses the number.", count.recorded_in, count.n, where, have, have, have,
                 count.way.format(n="N"))
    return samples


def refuse_unused(name: str, value: Any, caller: str, why: str) -> None:
    """An option that means nothing in this call is refused, saying why."""
    if value is not None:
        raise InvalidParameterError(f"The '{name}' parameter of {caller} must be None {why}. Got {value!r} instead.")


def as_list(items: Sequence[Any] | None) -> list[Any] | None:
    return None if items is None else list(items)
