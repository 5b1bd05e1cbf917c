"""The evaluation data: exactly the first ``num_samples`` samples, in batches of any structure (private).

:func:`collect` takes them once from whatever the user has (an ``(inputs, labels)`` pair
of tensors, a DataLoader, any iterable of batches, a map-style Dataset) and keeps them in
host memory. When every batch has the same structure (the same keys and nesting, tensors
that differ only in their first dimension) the samples are copied as they arrive into one
buffer per tensor, allocated once for ``num_samples`` samples: one copy of the data, never
two, and the evaluation batches are views of it (:meth:`Samples.rebatch`). Batches of
different shapes (dynamic padding of token ids, say) are kept as they come.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import torch
from torch.utils.data import BatchSampler, DataLoader, Dataset, DistributedSampler, IterableDataset, SequentialSampler

from collector.common import InvalidParameterError
from landscape.engine._digest import samples_digest
from landscape.tasks import Supervised, batch_size, map_tensors, slice_batch, tensors_in, to_device

__all__ = ["Samples", "collect", "collate", "TooFewSamples", "check_order", "AUTO_SAMPLES"]

#: Samples per batch when a map-style Dataset is given (wrapped in a DataLoader).
DATASET_BATCH = 256
#: What ``num_samples="auto"`` takes at most (MindSpore's default, and the collector's).
AUTO_SAMPLES = 2048
_log = logging.getLogger("landscape")


def _signature(obj: Any, n: int) -> Any:
    """The structure of a batch of ``n`` samples, tensors by dtype and trailing shape."""
    if isinstance(obj, torch.Tensor):
        if obj.dim() > 0 and obj.shape[0] == n:
            return ("batch", obj.dtype, tuple(obj.shape[1:]))
        return ("fixed", obj.dtype, tuple(obj.shape))
    if isinstance(obj, Mapping):
        return (type(obj), tuple((k, _signature(v, n)) for k, v in obj.items()))
    if isinstance(obj, (list, tuple)):
        return (type(obj), tuple(_signature(v, n) for v in obj))
    return ("value", repr(obj)[:200])


@dataclass
class Samples:
    """Host batches and their sizes; ``merged`` when they are views of one buffer per tensor.

    Attributes
    ----------
    batches : list
        The batches, each any structure of tensors (CPU).
    sizes : list of int
        Each batch's weight (its number of samples, or the task's ``batch_size``).
    merged : bool
        The batches are consecutive views of one buffer per tensor, so they can be
        re-cut into batches of any size without a copy.
    """

    batches: list[Any]
    sizes: list[int]
    merged: bool = False
    _whole: Any = field(default=None, repr=False)
    _digest: str | None = field(default=None, repr=False, compare=False)

    @property
    def n(self) -> int:
        """The number of samples (the sum of the sizes)."""
        return int(sum(self.sizes))

    def tensors(self) -> list[torch.Tensor]:
        """Every tensor of the samples, in order (what a digest of the data reads)."""
        if self._whole is not None:
            return tensors_in(self._whole)
        return [t for b in self.batches for t in tensors_in(b)]

    def digest(self) -> str:
        """The SHA-256 (hex) of the samples as the task receives them, in order: every tensor's dtype,
        shape and bytes (:func:`landscape.engine._digest.samples_digest` defines the layout). Computed
        once; what a result records as ``samples_digest``."""
        if self._digest is None:
            self._digest = samples_digest(self)
        return self._digest

    @property
    def nbytes(self) -> int:
        """Bytes of tensor data held."""
        if self._whole is not None:
            return sum(t.nbytes for t in tensors_in(self._whole))
        return sum(t.nbytes for b in self.batches for t in tensors_in(b))

    def first(self, k: int) -> Any:
        """A batch of the first ``k`` samples (for probing the model: shapes, vmap)."""
        return slice_batch(self.batches[0], min(k, self.sizes[0]), size=batch_size(self.batches[0]))

    @property
    def rebatchable(self) -> bool:
        """Whether :meth:`rebatch` re-cuts the samples (one block of tensors); else the caller's batches run as
        they are."""
        return self.merged and self._whole is not None

    def rebatch(self, size: int) -> Samples:
        """The same samples in batches of ``size`` (the last smaller), when merged; else as they are."""
        if not self.rebatchable:
            return self
        n = self.n
        if len(self.batches) == 1 and size >= n:
            return self
        starts = range(0, n, max(1, size))
        batches = [slice_batch(self._whole, min(n, s + size), s, size=n) for s in starts]
        return Samples(batches, [min(n, s + size) - s for s in starts], merged=True, _whole=self._whole)

    def share(self, rank: int, world: int) -> Samples:
        """Rank ``rank``'s contiguous share of the samples among ``world`` ranks (sizes differing by one at
        most): samples ``[n*rank//world, n*(rank+1)//world)`` in order, cut from the batches that hold them
        (merged samples re-cut into batches of at most the first batch's size)."""
        n = self.n
        lo, hi = n * rank // world, n * (rank + 1) // world
        if hi <= lo:
            raise ValueError(f"{n} samples cannot be shared by {world} ranks: rank {rank} would get none.")
        if self.merged and self._whole is not None:
            whole = slice_batch(self._whole, hi, lo, size=n)
            size, m = max(1, self.sizes[0]), hi - lo
            starts = range(0, m, size)
            return Samples([slice_batch(whole, min(m, s + size), s, size=m) for s in starts],
                           [min(m, s + size) - s for s in starts], merged=True, _whole=whole)
        batches, sizes, start = [], [], 0
        for batch, k in zip(self.batches, self.sizes):
            a, b = max(lo, start) - start, min(hi, start + k) - start
            if a < b:
                batches.append(batch if (a, b) == (0, k) else slice_batch(batch, b, a, size=k))
                sizes.append(b - a)
            start += k
        return Samples(batches, sizes)

    def to(self, device: torch.device | str) -> Samples:
        """The batches on ``device`` (one copy; a CPU target keeps CPU tensors as they are)."""
        dev = torch.device(device)
        if dev.type == "cpu":
            return self
        if self._whole is not None:
            whole = to_device(self._whole, dev)
            n = self.n
            batches, s = [], 0
            for k in self.sizes:
                batches.append(slice_batch(whole, s + k, s, size=n))
                s += k
            return Samples(batches, list(self.sizes), merged=True, _whole=whole)
        return Samples([to_device(b, dev) for b in self.batches], list(self.sizes))

    def pinned(self) -> Samples:
        """The batches in pinned host memory (fast, asynchronous copies to a CUDA device)."""
        if not torch.cuda.is_available():
            return self
        pin = lambda t: t.pin_memory() if t.device.type == "cpu" else t
        if self._whole is not None:
            whole = map_tensors(self._whole, pin)
            return Samples([slice_batch(whole, s + k, s, size=self.n) for s, k in _offsets(self.sizes)],
                           list(self.sizes), merged=True, _whole=whole)
        return Samples([map_tensors(b, pin) for b in self.batches], list(self.sizes))


def _offsets(sizes: list[int]) -> list[tuple[int, int]]:
    out, s = [], 0
    for k in sizes:
        out.append((s, k))
        s += k
    return out


class _Buffers:
    """One preallocated buffer per batch tensor, filled as batches arrive."""

    def __init__(self, first: Any, n: int, total: int) -> None:
        self.signature = _signature(first, n)
        self.total = total
        self.filled = 0
        self.whole = map_tensors(first, lambda t: torch.empty((total, *t.shape[1:]), dtype=t.dtype)
                                  if t.dim() > 0 and t.shape[0] == n else t.clone())

    def add(self, batch: Any, n: int) -> bool:
        """Copy the batch's samples in; False (nothing copied) when its structure differs."""
        if self.filled + n > self.total or _signature(batch, n) != self.signature:
            return False
        dst, src = tensors_in(self.whole), tensors_in(batch)
        for d, s in zip(dst, src):
            if s.dim() > 0 and s.shape[0] == n and d.shape[0] == self.total:
                d[self.filled:self.filled + n].copy_(s)
        self.filled += n
        return True


def _describe(batch: Any) -> str:
    if isinstance(batch, Mapping):
        return f"{type(batch).__name__}s with the keys {list(batch)}"
    if isinstance(batch, torch.Tensor):
        return f"single tensors (shape {tuple(batch.shape)})"
    if isinstance(batch, (list, tuple)):
        return f"{type(batch).__name__}s of {len(batch)} item(s)"
    return f"{type(batch).__name__} objects"


def _via_callback_fn(caller: str) -> bool:
    """Whether the data and task came from ``callback_fn`` (SummaryLandscape, and ``landscape gen``,
    which calls it) rather than from parameters (``compute_landscape``, the curvature functions)."""
    return caller.startswith("SummaryLandscape")


def _task_hint(caller: str, batch: Any) -> str:
    """Where the task goes and which one: named after the entry point the user called."""
    if isinstance(batch, Mapping):
        keys = [str(k) for k in batch]
        target = "labels" if "labels" in keys else keys[-1]
        inputs = next((k for k in keys if k != target), target)
        example = (f"landscape.tasks.HuggingFace() for a Hugging Face model whose batches hold its labels, or "
                   f"landscape.tasks.Supervised(loss_fn, inputs={inputs!r}, targets={target!r})")
    else:
        example = ("landscape.tasks.HuggingFace() for a Hugging Face model whose batches are dicts holding its "
                   "labels, or landscape.tasks.Supervised(loss_fn, inputs=..., targets=...) naming where the "
                   "inputs and targets are")
    if _via_callback_fn(caller):
        return ("return a task as the fifth item of callback_fn's result, (model, network, dataset, metrics, "
                f"task): {example}")
    return f"pass {caller} a task (task=...): {example}"


def _check_task_fits(batch: Any, task: Any, caller: str) -> None:
    """Refuse, before any work, batches the :class:`Supervised` task cannot take apart (a dict
    of token ids given with only a ``loss_fn``), instead of a ``KeyError: 0`` at the first point.
    Other tasks are the user's own functions: only evaluating them would tell."""
    if not isinstance(task, Supervised):
        return
    error = None
    if isinstance(batch, torch.Tensor) and not (callable(task.inputs) and callable(task.targets)):
        error = "indexing a tensor would take its first samples as inputs and targets"
    else:
        try:
            task.split(batch)
        except (KeyError, IndexError, TypeError) as exc:
            error = f"{type(exc).__name__}: {exc}"
    if error is not None:
        data = ("the dataset callback_fn returned (its third item)" if _via_callback_fn(caller)
                else f"the 'data' parameter of {caller}")
        raise InvalidParameterError(
            f"The batches of {data} are {_describe(batch)}, which the task {task!r} cannot take apart: it reads "
            f"the inputs at {task.inputs!r} and the targets at {task.targets!r} ({error}). "
            f"HINT: {_task_hint(caller, batch)}.")


class TooFewSamples(ValueError):
    """The data holds fewer samples than asked for: ``asked`` and ``have`` say how many, so that a
    caller can word the refusal with its own option's name, or take the whole dataset instead."""

    def __init__(self, caller: str, asked: int, have: int) -> None:
        super().__init__(f"The 'num_samples' parameter of {caller} ({asked}) is larger than the dataset "
                         f"({have} samples). HINT: lower num_samples to at most {have}.")
        self.asked, self.have = asked, have


def _too_small(caller: str, num_samples: int, have: int) -> ValueError:
    return TooFewSamples(caller, num_samples, have)


def _dataset_size(data: Any) -> int | None:
    ds = getattr(data, "dataset", None)
    if ds is not None and hasattr(ds, "__len__") and getattr(data, "drop_last", False) is False:
        try:
            return len(ds)
        except TypeError:
            return None
    return None


def _sampler(data: DataLoader) -> Any:
    """What orders a DataLoader's samples: its batch sampler's sampler, or a batch sampler of the user's."""
    batches = getattr(data, "batch_sampler", None)
    if batches is None:  # batch_size=None: the sampler yields the samples one by one
        return data.sampler
    return batches.sampler if type(batches) is BatchSampler else batches


def _sequential(sampler: Any) -> bool:
    """Whether a sampler gives the same order at every pass: sequential, an iterable dataset's own
    order, or a DistributedSampler without shuffling. Any other (random, weighted, a user's own)
    is not known to."""
    if isinstance(sampler, SequentialSampler):
        return True
    return isinstance(sampler, DistributedSampler) and not sampler.shuffle


def check_order(data: Any, caller: str) -> None:
    """Refuse a DataLoader whose order may change from pass to pass (the rule every entry point
    follows): the first ``num_samples`` would be other samples at every call, and a result could
    not say which. The fix keeps the samples one fixed set."""
    if not isinstance(data, DataLoader) or isinstance(data.dataset, IterableDataset):
        return  # an iterable dataset's order is its own
    sampler = _sampler(data)
    if _sequential(sampler):
        return
    data_name = ("The dataset callback_fn returned (its third item)" if _via_callback_fn(caller)
                 else f"The 'data' parameter of {caller}")
    raise InvalidParameterError(
        f"{data_name} is a DataLoader whose order is not known to stay the same from pass to pass (its sampler is "
        f"a {type(sampler).__name__}): each call would average other samples. HINT: pass a DataLoader with "
        "shuffle=False (and no random sampler), over a torch.utils.data.Subset of fixed indices to use chosen "
        "samples.")


def collect(data: Any, num_samples: int | Literal["auto"] | None, task: Any = None, *, caller: str,
            at_most: bool = False) -> Samples:
    """The first ``num_samples`` samples of ``data`` (all of them with None), on the host.

    Parameters
    ----------
    data : (Tensor, Tensor), DataLoader, iterable of batches, or map-style Dataset
        An ``(inputs, labels)`` pair of tensors is one batch; a Dataset is read through a
        ``DataLoader(batch_size=256)`` in order. Batches may be any structure (see
        :mod:`landscape.tasks`).
    num_samples : int, "auto" or None
        Exactly this many samples are used for every point; ``None`` takes all; ``"auto"``
        the first :data:`AUTO_SAMPLES` (2048), or all of a smaller dataset (the log says so;
        the result records the number used).
    task : task, optional
        Its ``batch_size(batch)``, when it has one, counts a batch's samples.
    caller : str
        Named in error messages.
    at_most : bool, default=False
        Take all of a dataset that holds fewer than ``num_samples`` instead of refusing it
        (what "auto" does). ``data`` is read once either way: a generator of batches too.

    Raises
    ------
    ValueError
        The dataset holds fewer than ``num_samples`` samples (naming both numbers), or a
        pair's inputs and labels differ in length.
    TypeError
        ``data`` is none of the accepted forms, or a batch holds no tensor.
    InvalidParameterError
        ``data`` is a DataLoader whose order may change from pass to pass (a shuffling or
        other random sampler, or a sampler not known to be sequential: :func:`check_order`).
    InvalidParameterError
        A :class:`Supervised` task (the task of a plain ``loss_fn``) cannot take the first
        batch apart into inputs and targets (a dict of token ids): the message says to pass
        a task.
    """
    if num_samples == "auto":
        got = collect(data, AUTO_SAMPLES, task, caller=caller, at_most=True)
        if got.n < AUTO_SAMPLES:
            _log.info("num_samples='auto': the dataset holds %d samples (fewer than %d): all %d are used", got.n,
                      AUTO_SAMPLES, got.n)
        return got
    if (isinstance(data, (tuple, list)) and len(data) == 2 and all(isinstance(t, torch.Tensor) for t in data)):
        inputs, labels = data
        if inputs.dim() == 0 or labels.dim() == 0 or inputs.shape[0] != labels.shape[0]:
            raise ValueError(f"The 'data' parameter of {caller}: inputs hold "
                             f"{inputs.shape[0] if inputs.dim() else 0} samples but labels "
                             f"{labels.shape[0] if labels.dim() else 0}.")
        have = int(inputs.shape[0])
        k = have if num_samples is None or (at_most and have < num_samples) else num_samples
        if have < k:
            raise _too_small(caller, k, have)
        pair = (inputs[:k].detach().cpu(), labels[:k].detach().cpu())
        _check_task_fits(pair, task, caller)
        return Samples([pair], [k], merged=True, _whole=pair)
    check_order(data, caller)
    if isinstance(data, Dataset) and not isinstance(data, Iterable):
        data = DataLoader(data, batch_size=DATASET_BATCH, shuffle=False)
    size = _dataset_size(data)
    if num_samples is not None and size is not None and size < num_samples:
        if not at_most:
            raise _too_small(caller, num_samples, size)
        num_samples = size
    if not isinstance(data, Iterable) or isinstance(data, (str, bytes, Mapping, torch.Tensor)):
        raise TypeError(f"The 'data' parameter of {caller} must be a DataLoader, an iterable of batches, a "
                        "map-style Dataset or an (inputs, labels) pair of tensors; "
                        f"got {type(data).__name__}.")
    batches: list[Any] = []  # list mode: the batches as they came
    sizes: list[int] = []
    buffers: _Buffers | None = None  # merged mode (the total known): one copy of the samples
    total = num_samples if num_samples is not None else size
    have = 0
    for batch in data:
        try:
            n = batch_size(batch, task)
        except ValueError as exc:
            raise TypeError(f"The 'data' parameter of {caller} yielded a batch with no samples: {exc}") from None
        if num_samples is not None and have + n > num_samples:
            batch = slice_batch(batch, num_samples - have, size=n)
            n = num_samples - have
        if n <= 0:
            break
        if have == 0:
            _check_task_fits(batch, task, caller)
        batch = map_tensors(batch, lambda t: t.detach().cpu())
        if total is not None and have == 0:
            buffers = _Buffers(batch, n, total)
        if buffers is not None and not buffers.add(batch, n):
            # another structure: the samples so far become views of the buffer, then list mode
            filled = buffers.whole
            batches = [slice_batch(filled, s + k, s, size=buffers.total) for s, k in _offsets(sizes)]
            buffers = None
        if buffers is None:
            batches.append(batch)
        sizes.append(n)
        have += n
        if num_samples is not None and have >= num_samples:
            break
    if num_samples is not None and have < num_samples and not at_most:
        raise _too_small(caller, num_samples, have)
    if not sizes:
        raise ValueError(f"The 'data' parameter of {caller} holds no samples.")
    if buffers is not None and buffers.filled == have:
        whole = buffers.whole if have == buffers.total else slice_batch(buffers.whole, have, size=buffers.total)
        views = [slice_batch(whole, s + k, s, size=have) for s, k in _offsets(sizes)]
        return Samples(views, sizes, merged=True, _whole=whole)
    return Samples(batches, sizes)


def collate(data: Any, num_samples: int, *, caller: str) -> tuple[torch.Tensor, torch.Tensor]:
    """The first ``num_samples`` ``(inputs, labels)`` of ``data`` as two CPU tensors (the
    MindSpore-style data SummaryLandscape's fingerprint digests)."""
    samples = collect(data, num_samples, caller=caller)
    whole = samples._whole
    if not (samples.merged and isinstance(whole, (tuple, list)) and len(whole) >= 2
            and all(isinstance(t, torch.Tensor) for t in whole[:2])):
        raise TypeError(f"The 'data' parameter of {caller} must yield (inputs, labels) batches of tensors.")
    return whole[0].contiguous(), whole[1].contiguous()
