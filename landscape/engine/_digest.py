"""SHA-256 of tensors, and of the samples a result used (private).

One byte layout everywhere (the samples' digest, the store's fingerprints, the directions'
digests): for each tensor, in order, the UTF-8 text of its dtype and shape as PyTorch and
Python print them (``torch.float32(442, 10)``), then its values in C order, in the machine's
byte order (little-endian on x86 and ARM). Nothing separates the tensors.

:func:`samples_digest` is that digest over the samples' tensors as the task receives them:
when every batch has the same structure (:attr:`landscape.engine.Samples.merged`) the
batches are one block, each of its tensors every sample's rows in order (an ``(inputs,
targets)`` pair: the inputs ``x[:n]``, then the targets ``y[:n]``); else each batch's
tensors, batch by batch (depth first through dicts, lists and tuples).
"""

from __future__ import annotations

import hashlib
from typing import Any

import torch

__all__ = ["hash_tensor", "tensor_digest", "samples_digest"]


def hash_tensor(h: Any, t: torch.Tensor) -> None:
    """Add a tensor's dtype, shape and bytes to the hash ``h`` (read in place: no copy of the data);
    :func:`tensor_digest` of tensors is these updates in order, so a digest can be made one tensor
    at a time."""
    t = t.detach().cpu().contiguous()
    h.update(f"{t.dtype}{tuple(t.shape)}".encode())
    if t.numel():
        h.update(t.reshape(-1).view(torch.uint8).numpy().data)  # the bytes in place, no copy


def tensor_digest(*tensors: torch.Tensor) -> str:
    """SHA-256 of the tensors' dtypes, shapes and bytes (read in place: no copy of the data)."""
    h = hashlib.sha256()
    for t in tensors:
        hash_tensor(h, t)
    return h.hexdigest()


def samples_digest(samples: Any) -> str:
    """The SHA-256 of the samples a result used (``samples.tensors()``, the module's layout), hex."""
    return tensor_digest(*samples.tensors())
