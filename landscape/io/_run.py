"""The run a ``landscapes.h5`` belongs to: its record, and the refusal of another run's landscapes (private).

One output folder holds one run's landscapes: ``landscape ls``, ``plot`` and ``report`` read a
folder's ``landscapes.h5`` (and summary files) as one run, so a generation of run B into a
folder of run A's landscapes would show them as one. The file therefore records its run (the
root attribute ``run``, JSON text, written with every change of the file by
:class:`landscape.io.Store`):

* ``name``: the run's summary directory (absolute), for people; never compared, so a run
  moved or copied elsewhere is still the same run;
* ``checkpoints``: ``"{unit} {n}"`` -> SHA-256 of every checkpoint ``train_metadata.json``
  lists (the digest recorded when the file was written, else the file's own);
* ``network`` (:func:`landscape.io._fingerprint.model_digest`), ``network_class`` (for
  messages) and ``task`` (the loss's name).

Two records are of the same run when the checkpoints both list have the same digests (at
least one in common: a run that went on collecting checkpoints is still the same run) and,
where both say them, the same network and task. A call checks its record against the file
before any work (the checkpoints before they are read, the network and task as soon as the
task returned them), and the store again when it takes the file. This module reads no
tensor and imports no torch.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

from collector.common import InvalidParameterError
from collector.trajectory import TrainMetadata, file_digest
from landscape.io._h5 import read_run

__all__ = ["run_record", "run_differences", "check_run", "run_refusal"]

#: What is compared besides the checkpoints (a record that lacks one, such as the first check's, skips it).
_COMPARED = ("network", "task")


def run_record(summary_dir: str | os.PathLike, metadata: TrainMetadata, ckpt_dir: str | os.PathLike
               ) -> dict[str, Any]:
    """The record of the run in ``summary_dir``, from its ``train_metadata.json``: its name and its
    checkpoints' SHA-256 (recorded ones are not read; a checkpoint without one, in MindSpore's metadata,
    is hashed, and one that is missing is left out). The network and task are added by the caller once
    it has them (:func:`landscape.io._fingerprint.run_identity`)."""
    checkpoints = {}
    for n in sorted(metadata.files):
        digest = metadata.digests.get(n)
        if digest is None:
            name = metadata.files[n]
            path = name if os.path.isabs(name) else os.path.join(os.fspath(ckpt_dir), name)
            if not os.path.isfile(path):
                continue
            digest = file_digest(path)
        checkpoints[f"{metadata.unit} {n}"] = digest.sha256
    return {"name": os.path.abspath(os.fspath(summary_dir)), "checkpoints": checkpoints}


def run_differences(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """Why ``old`` and ``new`` are not the same run ([] when they are), digests shortened."""
    out = []
    a, b = dict(old.get("checkpoints") or {}), dict(new.get("checkpoints") or {})
    shared = [k for k in b if k in a]
    if not shared:
        out.append(f"no checkpoint in common ({_span(a)} then, {_span(b)} now)")
    differ = [k for k in shared if a[k] != b[k]]
    if differ:
        shown = "; ".join(f"checkpoint {k}: SHA-256 {a[k][:12]} then, {b[k][:12]} now" for k in differ[:3])
        more = f" and {len(differ) - 3} more" if len(differ) > 3 else ""
        out.append(f"{len(differ)} of {len(shared)} checkpoints in common differ ({shown}{more})")
    for key in _COMPARED:
        if key in old and key in new and old[key] != new[key]:
            if key == "network":  # named as the landscapes' fingerprints name it
                out.append(f"model: {old.get('network_class', '?')} {old[key][:12]} then, "
                           f"{new.get('network_class', '?')} {new[key][:12]} now")
            else:
                out.append(f"{key}: {json.dumps(old[key])} then, {json.dumps(new[key])} now")
    return out


def _span(checkpoints: Mapping[str, str]) -> str:
    keys = list(checkpoints)
    if not keys:
        return "none"
    return keys[0] if len(keys) == 1 else f"{keys[0]} to {keys[-1]}"


def run_refusal(path: str, old: Mapping[str, Any], new: Mapping[str, Any], diff: list[str], *, caller: str,
                parameter: str) -> InvalidParameterError:
    """The refusal of writing run ``new``'s landscapes into ``path``, which holds run ``old``'s."""
    folder, then, now = os.path.dirname(path) or ".", old.get("name", "?"), new.get("name", "?")
    whose = f"landscapes of run {then!r} made from other inputs than this call's" if then == now else \
        f"the landscapes of another run, {then!r}, made from other inputs than this call's run {now!r}"
    return InvalidParameterError(
        f"The '{parameter}' parameter of {caller} must be a folder holding no other run's landscapes. Got "
        f"{folder!r}, whose {os.path.basename(path)} holds {whose}: " + "; ".join(diff) + ". Nothing was written. "
        "HINT: write this run's landscapes to another folder (output=..., landscape gen --output DIR), or "
        "replace that landscapes.h5 by this run's with restart=True (landscape gen --restart).")


def check_run(path: str | os.PathLike, record: Mapping[str, Any], *, caller: str, parameter: str = "output",
              restart: bool = False) -> list[str]:
    """Refuse (``InvalidParameterError``) a ``landscapes.h5`` at ``path`` that holds another run's
    landscapes; with ``restart`` return the differences instead (the store replaces the file when it
    takes it). A missing file, or one written before runs were recorded, is this run's: []."""
    path = os.fspath(path)
    if not os.path.isfile(path):
        return []
    try:
        stored = read_run(path)
    except (OSError, ValueError, KeyError):  # an unreadable file is refused by the store, naming it
        return []
    if stored is None:
        return []
    diff = run_differences(stored, record)
    if diff and not restart:
        raise run_refusal(path, stored, record, diff, caller=caller, parameter=parameter)
    return diff
