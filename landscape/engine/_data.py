"""Collate the first ``num_samples`` samples of a dataset once (private)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch

__all__: list[str] = []


def _as_tensor(x: Any) -> torch.Tensor:
    if isinstance(x, torch.Tensor):
        return x
    return torch.as_tensor(x)


def _dataset_size(data: Any) -> int | None:
    ds = getattr(data, "dataset", None)
    if ds is not None and hasattr(ds, "__len__") and getattr(data, "drop_last", False) is False:
        try:
            return len(ds)
        except TypeError:
            return None
    return None


def collate(data: Any, num_samples: int, *, caller: str) -> tuple[torch.Tensor, torch.Tensor]:
    """The first ``num_samples`` (inputs, labels) of ``data`` as two CPU tensors.

    ``data`` is an ``(inputs, labels)`` pair of tensors, a DataLoader or an iterable of
    ``(inputs, labels)`` batches. Raises ValueError naming both sizes when the dataset
    holds fewer than ``num_samples`` samples.
    """
    def too_small(have: int) -> ValueError:
        return ValueError(
            f"The 'num_samples' parameter of {caller} ({num_samples}) is larger than the "
            f"dataset ({have} samples). HINT: lower num_samples to at most {have}.")

    if (isinstance(data, (tuple, list)) and len(data) == 2
            and all(isinstance(t, torch.Tensor) for t in data)):
        inputs, labels = data
        if inputs.shape[0] != labels.shape[0]:
            raise ValueError(f"The 'data' parameter of {caller}: inputs hold {inputs.shape[0]} "
                             f"samples but labels {labels.shape[0]}.")
        if inputs.shape[0] < num_samples:
            raise too_small(int(inputs.shape[0]))
        return inputs[:num_samples].detach().cpu(), labels[:num_samples].detach().cpu()
    size = _dataset_size(data)
    if size is not None and size < num_samples:
        raise too_small(size)
    if not isinstance(data, Iterable):
        raise TypeError(f"The 'data' parameter of {caller} must be a DataLoader, an iterable "
                        f"of (inputs, labels) batches or an (inputs, labels) pair of tensors; "
                        f"got {type(data).__name__}.")
    xs, ys, have = [], [], 0
    for batch in data:
        if not (isinstance(batch, (tuple, list)) and len(batch) >= 2):
            raise TypeError(f"The 'data' parameter of {caller} must yield (inputs, labels) "
                            f"batches; got a {type(batch).__name__}.")
        x, y = _as_tensor(batch[0]), _as_tensor(batch[1])
        if x.dim() == 0 or x.shape[0] != y.shape[0]:
            raise ValueError(f"The 'data' parameter of {caller} yielded a batch whose inputs and "
                             "labels differ in length.")
        xs.append(x.detach().cpu())
        ys.append(y.detach().cpu())
        have += int(x.shape[0])
        if have >= num_samples:
            break
    if have < num_samples:
        raise too_small(have)
    return torch.cat(xs)[:num_samples].contiguous(), torch.cat(ys)[:num_samples].contiguous()
