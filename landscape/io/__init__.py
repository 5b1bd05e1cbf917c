"""HDF5 files of landscapes (``landscapes.h5``, Li et al.'s layout), the resumable store and
the fingerprints it compares.

Users read and write files with :func:`read_h5` / :func:`write_h5`; generation uses the
:class:`Store` of an output folder and :class:`Fingerprints`; the command's stamp reads and
writes :data:`GEN_STAMP`. The fingerprints (which need torch) load on first use (PEP 562),
so that reading files and stamps does not import torch.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from landscape.io._h5 import (
    GEN_STAMP,
    H5_NAME,
    Partial,
    Stored,
    is_hdf5,
    read_gen_stamp,
    read_h5,
    stored_landscapes,
    write_gen_stamp,
    write_h5,
    write_h5_single,
)
from landscape.io._store import Store, jsonable

__all__ = ["read_h5", "write_h5", "write_h5_single", "is_hdf5", "H5_NAME", "Store", "Partial", "Fingerprints",
           "jsonable", "file_digest", "model_digest", "tensor_digest", "task_name", "GEN_STAMP", "read_gen_stamp",
           "write_gen_stamp", "stored_landscapes", "Stored"]

_LAZY = ("Fingerprints", "file_digest", "model_digest", "tensor_digest", "task_name")


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module("landscape.io._fingerprint"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'landscape.io' has no attribute {name!r}")


if TYPE_CHECKING:  # for type checkers; at run time these load on first use
    from landscape.io._fingerprint import Fingerprints, file_digest, model_digest, task_name, tensor_digest
