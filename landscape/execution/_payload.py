"""The workers' payload file: the one module that writes and reads it (private).

What every worker needs (an :class:`~landscape.engine.EngineSpec`: network, task, samples,
centre, directions, plan) is written once by the parent into its private temporary folder
and read by each worker. ``torch.save``'s format keeps every tensor storage as its own
record, so the workers load them memory-mapped and share one copy of the samples in the
page cache; cloudpickle pickles the rest (classes defined in a script or notebook, by
value). The file is ours, written by our parent process, so it is read with a full
unpickler -- unlike checkpoints, which are always read with ``weights_only=True``.
"""

from __future__ import annotations

import os

import torch

from landscape.engine import EngineSpec
from landscape.execution._devices import cloudpickle

__all__ = ["write_payload", "read_payload", "PAYLOAD_NAME"]

PAYLOAD_NAME = "payload.pt"


def write_payload(spec: EngineSpec, folder: str | os.PathLike) -> str:
    """Write ``spec`` into ``folder`` (the parent's private temporary folder); return its path."""
    path = os.path.join(os.fspath(folder), PAYLOAD_NAME)
    torch.save(spec, path, pickle_module=cloudpickle)
    return path


def read_payload(path: str) -> EngineSpec:
    """The spec :func:`write_payload` wrote, its tensors memory-mapped from the file."""
    spec = torch.load(path, mmap=True, weights_only=False)
    if not isinstance(spec, EngineSpec):
        raise TypeError(f"{path} does not hold a worker payload (got {type(spec).__name__}).")
    return spec
