"""The loss at the weights given, on every sample, before any point: bad data refused (private).

Every entry point that evaluates a loss (``compute_landscape``, ``SummaryLandscape`` and
``landscape gen``, ``compare_runs`` and ``landscape compare``, the curvature functions and
``landscape curvature``) calls :func:`check_loss` once its samples are collected and before
any point, file or folder: the task runs on every sample at the network's weights as given
(the centre itself for ``compute_landscape`` without checkpoints and for the curvature
functions), in the mode of the call, without gradients, and it refuses, naming the cause and
the fix (:class:`collector.common.InvalidParameterError`):

* a loss that is not one number per batch (a tensor of one element: 0-d, or shape ``(1,)``),
  whatever the task (a ``loss_fn`` with reduction 'none' included: :func:`landscape.tasks.mean_loss`);
* outputs and targets an element-wise loss would broadcast (``(N, 1)`` against ``(N,)`` for
  ``MSELoss``, ...: :func:`landscape.tasks.broadcast_mismatch`), and any task during which torch
  warns that a target's size differs from the input's;
* a loss that is not finite, naming the samples and saying whether their tensors hold NaN or
  infinite values (the data) or not (the weights or the loss itself).

The caller's network is left as it was: its modules' modes, its buffers (a batch norm in
train mode updates its running statistics) and torch's random state are restored. Cost:
one forward pass over the samples, a point's, in the data's own batches (an ``(inputs,
labels)`` pair, or batches of more than :data:`CHECK_BATCH` samples, re-cut into batches of
that many when they are one block).
"""

from __future__ import annotations

import contextlib
import math
import warnings
from collections.abc import Iterator
from typing import Any

import torch
from torch import nn

from collector.common import InvalidParameterError
from landscape.engine._data import Samples
from landscape.tasks import NotOneNumber, Supervised, broadcast_mismatch, tensors_in, to_device

__all__ = ["check_loss", "CHECK_BATCH"]

#: Samples per forward of the check when the samples can be re-cut (one block of tensors).
CHECK_BATCH = 256
#: What torch warns when an element-wise loss is given a target of another size (it then broadcasts).
_BROADCAST_WARNING = "target size"


def _device(network: nn.Module) -> torch.device:
    tensors: list[torch.Tensor] = [*network.parameters(recurse=True), *network.buffers()]
    return tensors[0].device if tensors else torch.device("cpu")


@contextlib.contextmanager
def _untouched(network: nn.Module, train: bool, device: torch.device) -> Iterator[None]:
    """The network in ``train`` mode for the duration; its modes, buffers and torch's random state
    restored after (dropout draws, batch-norm statistics updated in train mode)."""
    modes = [(m, m.training) for m in network.modules()]
    buffers = [(b, b.detach().clone()) for b in network.buffers()] if train else []
    devices = [device] if device.type == "cuda" else []
    with torch.random.fork_rng(devices=devices), torch.no_grad():
        network.train(train)
        try:
            yield
        finally:
            for m, mode in modes:
                m.training = mode
            for b, saved in buffers:
                b.copy_(saved)


def _where(samples: Samples, i: int, start: int, size: int, cut: bool) -> str:
    what = f"samples {start}-{start + size - 1}" if size > 1 else f"sample {start}"
    return what if cut or len(samples.batches) == 1 else f"{what} (batch {i} of the data)"


def _non_finite(obj: Any) -> tuple[int, int]:
    """``(NaN values, infinite values)`` in the floating-point tensors of a structure."""
    nan = inf = 0
    for t in tensors_in(obj):
        if t.is_floating_point() or t.is_complex():
            nan += int(torch.isnan(t).sum())
            inf += int(torch.isinf(t).sum())
    return nan, inf


def _bad_samples(obj: Any, size: int, start: int) -> list[int]:
    """The samples (numbered in the whole set) whose rows hold a NaN or infinite value."""
    bad = torch.zeros(size, dtype=torch.bool)
    for t in tensors_in(obj):
        if (t.is_floating_point() or t.is_complex()) and t.dim() and t.shape[0] == size:
            bad |= (~torch.isfinite(t)).reshape(size, -1).any(dim=1).cpu()
    return [start + int(i) for i in torch.nonzero(bad).reshape(-1)]


def _count(nan: int, inf: int) -> str:
    parts = ([f"{nan} NaN"] if nan else []) + ([f"{inf} infinite"] if inf else [])
    return " and ".join(parts) + " value(s)"


def _which(indices: list[int]) -> str:
    if not indices:
        return ""
    shown = ", ".join(str(i) for i in indices[:5])
    more = f" and {len(indices) - 5} more" if len(indices) > 5 else ""
    return f" (sample{'s' if len(indices) > 1 else ''} {shown}{more})"


def _data_words(task: Any, batch: Any, size: int, start: int) -> str:
    """Whether the batch's tensors (its inputs and targets, for a Supervised task) hold NaN or inf, and where."""
    parts: list[tuple[str, Any]] = [("the batch's tensors", batch)]
    if isinstance(task, Supervised):
        try:
            inputs, targets = task.split(batch)
            parts = [("the inputs", inputs), ("the targets", targets)]
        except (KeyError, IndexError, TypeError):  # the batch as a whole then
            pass
    said = [f"{name} hold {_count(*_non_finite(part))}{_which(_bad_samples(part, size, start))}"
            for name, part in parts if any(_non_finite(part))]
    if said:
        return " and ".join(said)
    return " and ".join(name for name, _ in parts) + " there are finite"


def _task_name(task: Any, loss_fn_given: bool) -> str:
    if loss_fn_given:
        return "loss_fn"
    name = getattr(task, "__qualname__", None) if callable(task) and not isinstance(task, Supervised) else None
    return f"task {name or repr(task)[:80]}"


def _loss(task: Any, model: nn.Module, batch: Any, caller: str, what: str) -> Any:
    """The task's loss of a batch; a Supervised task's outputs and targets checked against
    broadcasting first, and torch's own broadcasting warning refused for any task."""
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        if isinstance(task, Supervised):
            inputs, targets = task.split(batch)
            outputs = task.outputs(model, inputs)
            why = broadcast_mismatch(task.loss_fn, outputs, targets)
            if why is not None:
                raise InvalidParameterError(f"The {what} of {caller} cannot take these batches: {why}")
            value = task.loss(outputs, targets)
        else:
            value = task(model, batch)
    for w in seen:
        if _BROADCAST_WARNING in str(w.message):
            raise InvalidParameterError(
                f"The {what} of {caller} compares outputs and targets of other shapes, which torch broadcasts: "
                f"{w.message} HINT: give targets of the outputs' shape (y.reshape(-1, 1) for one output per "
                "sample), or squeeze the outputs (Supervised(loss_fn, output=lambda out: out.squeeze(-1))).")
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)  # the others, as they were
    return value


def check_loss(network: nn.Module, task: Any, samples: Samples, *, caller: str, eval_mode: bool,
               loss_fn_given: bool = False) -> None:
    """Refuse, before any point, data or a task that would make every value meaningless (the
    module's docstring): the task's loss on every sample at the network's weights as given.

    Parameters
    ----------
    network : nn.Module
        Evaluated as it is (on its device), in eval mode with ``eval_mode``; left as it was.
    task : callable
        ``task(model, batch) -> loss``.
    samples : Samples
        What every point averages over.
    caller : str
        Named in the messages (with where the user gave the data: ``"... (callback_fn)"``).
    eval_mode : bool
    loss_fn_given : bool, default=False
        The task is the user's ``loss_fn`` in a :class:`landscape.tasks.Supervised`: messages name
        ``loss_fn``.

    Raises
    ------
    InvalidParameterError
        A loss of more than one number per batch, outputs and targets an element-wise loss
        would broadcast, or a loss that is not finite (naming the samples and whether they
        hold NaN or infinite values).
    """
    device = _device(network)
    what = _task_name(task, loss_fn_given)
    cut = samples.rebatchable and max(samples.sizes) > CHECK_BATCH  # the data's own batches, at most CHECK_BATCH
    batches = samples.rebatch(CHECK_BATCH) if cut else samples
    with _untouched(network, not eval_mode, device):
        start = 0
        for i, (batch, size) in enumerate(zip(batches.batches, batches.sizes)):
            on_device = to_device(batch, device)
            try:
                value = _loss(task, network, on_device, caller, what)
            except NotOneNumber as exc:
                raise InvalidParameterError(f"The {what} of {caller} returned a tensor of shape {exc.shape} for a "
                                            f"batch of {size} samples: {exc.rule}") from None
            if not isinstance(value, torch.Tensor) or value.numel() != 1:
                got = f"a tensor of shape {tuple(value.shape)}" if isinstance(value, torch.Tensor) else \
                    f"{type(value).__name__} {value!r:.60}"
                raise InvalidParameterError(
                    f"The {what} of {caller} must return a batch's loss as a tensor of one element (its mean over "
                    f"the batch's samples). Got {got} for a batch of {size} samples instead. HINT: reduce it as "
                    "training did (.mean()).")
            loss = float(value.detach().reshape(()))
            if not math.isfinite(loss):
                raise InvalidParameterError(
                    f"The loss ({what}) of {caller} at the network's weights is "
                    f"{'NaN' if math.isnan(loss) else 'infinite'} on "
                    f"{_where(samples, i, start, size, cut)}: {_data_words(task, batch, size, start)}. Every point "
                    "would be non-finite there. HINT: " + (
                        "drop or impute the non-finite values (torch.nan_to_num, or keep the finite samples: "
                        "x[torch.isfinite(x).all(dim=1)]) before passing the data."
                        if any(_non_finite(batch)) else
                        "the weights or the loss give it (a log of 0, weights that diverged): evaluate "
                        "task(network, batch) on these samples by hand."))
            start += size
