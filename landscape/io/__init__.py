"""HDF5 files of landscapes (``landscapes.h5``, Li et al.'s layout), the resumable store and
the fingerprints it compares.

Users read and write files with :func:`read_h5` / :func:`write_h5`; generation uses the
:class:`Store` of an output folder and :class:`Fingerprints`; the command's stamp reads and
writes :data:`GEN_STAMP`. A file records the run its landscapes belong to (:func:`run_record`,
:func:`check_run`, :func:`read_run`) and each landscape's directions (:func:`kept_directions`,
``Landscape.directions()``); ``landscape curvature``'s results are its group ``curvature``
(:func:`write_curvature`, :func:`read_curvature`). The fingerprints and the directions (which
need torch) load on first use (PEP 562), so that reading files and stamps does not import torch.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from landscape.io._h5 import (
    CURVATURE,
    GEN_STAMP,
    H5_NAME,
    CurvatureRecord,
    DirectionsRecord,
    Partial,
    Stored,
    curvature_summary,
    curvature_text,
    is_hdf5,
    read_curvature,
    read_directions,
    read_gen_stamp,
    read_h5,
    read_run,
    stored_landscapes,
    write_curvature,
    write_gen_stamp,
    write_h5,
    write_h5_single,
)
from landscape.io._run import check_run, run_record
from landscape.io._store import Store, jsonable

__all__ = ["read_h5", "write_h5", "write_h5_single", "is_hdf5", "H5_NAME", "Store", "Partial", "Fingerprints",
           "jsonable", "file_digest", "model_digest", "tensor_digest", "task_name", "GEN_STAMP", "read_gen_stamp",
           "write_gen_stamp", "stored_landscapes", "Stored", "run_record", "check_run", "read_run", "run_identity",
           "DirectionsRecord", "read_directions", "kept_directions", "shared_draws_kept", "DIRECTIONS_MAX_BYTES",
           "CURVATURE", "CurvatureRecord", "read_curvature", "write_curvature", "curvature_summary", "curvature_text"]

_LAZY = {"Fingerprints": "_fingerprint", "file_digest": "_fingerprint", "model_digest": "_fingerprint",
         "tensor_digest": "_fingerprint", "task_name": "_fingerprint", "run_identity": "_fingerprint",
         "kept_directions": "_directions", "shared_draws_kept": "_directions",
         "DIRECTIONS_MAX_BYTES": "_directions"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(f"landscape.io.{_LAZY[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'landscape.io' has no attribute {name!r}")


if TYPE_CHECKING:  # for type checkers; at run time these load on first use
    from landscape.io._directions import DIRECTIONS_MAX_BYTES, kept_directions, shared_draws_kept
    from landscape.io._fingerprint import (
        Fingerprints,
        file_digest,
        model_digest,
        run_identity,
        task_name,
        tensor_digest,
    )
