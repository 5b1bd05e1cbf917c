"""Which steps SummaryCollector collects at (``collect_freq`` / ``collect_tensor_freq``).

Kept apart from the callback so the rule can be tested on its own against the seed's
worked example (600 steps, ``collect_freq=10``: 61 collections, 20 of them with tensors;
20 steps: 3 and 3).
"""

from __future__ import annotations

from typing import Literal

__all__ = ["tensor_collect_range", "collection_kind", "plan_collections", "TENSOR_LIMIT"]

#: At most this many tensor collections by default (MindSpore's rule).
TENSOR_LIMIT = 20


def tensor_collect_range(total_steps: int | None, collect_freq: int, collect_tensor_freq: int | None) -> range | None:
    """The step numbers at which tensor values are collected (besides the first step).

    MindSpore's rule: with ``collect_tensor_freq`` every multiple of it; otherwise the
    multiples of ``collect_freq`` when they are at most 20, else 20 steps spread evenly
    (``total_steps // 19`` apart). None when the total is unknown (an unsized dataset):
    tensors are then collected with the other values.
    """
    if total_steps is None:
        return None
    if collect_tensor_freq is not None:
        # total_steps + 1: the last step number is total_steps itself.
        return range(0, total_steps + 1, collect_tensor_freq)
    summary_to_collect = len(range(0, total_steps + 1, collect_freq))
    if summary_to_collect > TENSOR_LIMIT:
        tensor_freq = total_steps // (TENSOR_LIMIT - 1)
        if tensor_freq > 1:
            return range(0, total_steps + 1, tensor_freq)[:TENSOR_LIMIT]
        # Steps count from 1, so step 0 of the range is never hit: take one more.
        return range(0, total_steps + 1)[:TENSOR_LIMIT + 1]
    return range(0, total_steps + 1, collect_freq)


def collection_kind(
    step: int, first: bool, collect_freq: int, tensor_range: range | None
) -> Literal["all", "tensor", "other"] | None:
    """What to collect at ``step``: everything, tensors only, all but tensors, or nothing."""
    if first:
        return "all"
    on_freq = step % collect_freq == 0
    in_tensor = on_freq if tensor_range is None else step in tensor_range
    if on_freq and in_tensor:
        return "all"
    if in_tensor:
        return "tensor"
    if on_freq:
        return "other"
    return None


def plan_collections(total_steps: int, collect_freq: int, collect_tensor_freq: int | None = None,
                     first_step: int = 1) -> tuple[list[int], list[int]]:
    """(steps with non-tensor values, steps with tensor values) for a whole run."""
    tensor_range = tensor_collect_range(total_steps, collect_freq, collect_tensor_freq)
    others, tensors = [], []
    for step in range(first_step, total_steps + 1):
        kind = collection_kind(step, step == first_step, collect_freq, tensor_range)
        if kind in ("all", "other"):
            others.append(step)
        if kind in ("all", "tensor"):
            tensors.append(step)
    return others, tensors
