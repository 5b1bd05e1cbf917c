"""``landscape gen`` on a finished run, answered without torch (private).

Importing torch alone takes about 1.7 s on a 2-core CPU, and the full check of a rerun
(``callback_fn`` called, its network and data hashed, every checkpoint verified) more.
After a generation finishes, the command records a *stamp* in ``landscapes.h5``: a digest
of the command's options, of the task module's source file, of ``train_metadata.json``
and of the size and modification time of every file in ``ckpt_dir/``, with the
fingerprint of every landscape it finished. Run again with the same stamp while those
landscapes are still there with the same fingerprints, it prints them and returns
without importing torch or calling ``callback_fn``.

What the shortcut does not re-read is the data ``callback_fn`` loads (and any module the
task module imports): ``--verify`` takes the full path, which refuses a landscape made
from other data. ``--restart``, torchrun and a task module that cannot be located also
take the full path.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
from pathlib import Path
from typing import Any

from collector.trajectory import CKPT_DIR, METADATA_FILE, file_digest
from landscape.cli._common import UsageError, describe
from landscape.cli._gen_check import locate_task, split_task
from landscape.io import H5_NAME, read_gen_stamp, read_h5, write_gen_stamp

__all__ = ["command_key", "finished_run", "record_finished"]

_NOT_OPTIONS = {"command", "verbose", "restart", "verify"}


def _task_file(spec: str) -> str | None:
    try:
        found = locate_task(split_task(spec)[0])  # imports a dotted name's parent packages, not the module
    except (ImportError, ValueError, UsageError):
        return None
    origin = getattr(found, "origin", None)
    return origin if origin and os.path.isfile(origin) else None


def _jsonable(value: Any) -> Any:
    if isinstance(value, Path):
        return str(value.resolve())
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value


def output_dir(args: argparse.Namespace) -> Path:
    return Path(args.output or args.summary_dir)


def command_key(args: argparse.Namespace) -> str | None:
    """The stamp of this ``landscape gen`` command, or None when it cannot have one (see the
    module docstring)."""
    if args.restart or getattr(args, "verify", False) or int(os.environ.get("WORLD_SIZE", "1")) > 1:
        return None
    if args.distributed:
        return None
    task_file = _task_file(args.task)
    ckpt_dir = os.path.join(args.summary_dir, CKPT_DIR)
    metadata = os.path.join(ckpt_dir, METADATA_FILE)
    if task_file is None or not os.path.isfile(metadata):
        return None
    files = []
    with os.scandir(ckpt_dir) as it:
        for entry in sorted(it, key=lambda e: e.name):
            if entry.is_file():
                st = entry.stat()
                files.append([entry.name, st.st_size, st.st_mtime_ns])
    options = {k: _jsonable(v) for k, v in sorted(vars(args).items()) if k not in _NOT_OPTIONS}
    what = {"options": options, "task_file": [os.path.abspath(task_file), file_digest(task_file).sha256],
            "metadata": file_digest(metadata).sha256, "ckpt_dir": files}
    return hashlib.sha256(json.dumps(what, sort_keys=True).encode()).hexdigest()


def _fp_digest(fp: str | None) -> str | None:
    return None if fp is None else hashlib.sha256(fp.encode()).hexdigest()


def finished_run(args: argparse.Namespace, key: str) -> bool:
    """Print the landscapes of a run this same command finished, and say so; False (nothing
    printed) when the output folder does not hold them exactly as they were finished."""
    h5 = output_dir(args) / H5_NAME
    if not h5.is_file():
        return False
    try:
        raw, done = read_gen_stamp(h5)
        stamp = json.loads(raw) if raw else None
    except (OSError, ValueError, KeyError):  # damaged or locked: the full path words it
        return False
    if not isinstance(stamp, dict) or stamp.get("key") != key:
        return False
    tags = stamp.get("tags") or {}
    if not tags or any(t not in done or _fp_digest(done[t]) != d for t, d in tags.items()):
        return False
    landscapes = read_h5(h5)
    for tag in tags:
        print(f"{describe(landscapes[tag])}, already complete in {H5_NAME}")
    print(f"Nothing to do: {len(tags)} landscape(s) in {output_dir(args)} were finished by this same command "
          "(same options, task file and checkpoints). The task's data was not re-read; pass --verify to "
          "check everything again.")
    return True


def record_finished(args: argparse.Namespace, key: str, tags: list[str]) -> None:
    """Stamp the output's landscapes.h5 with this command and the landscapes it finished."""
    h5 = output_dir(args) / H5_NAME
    _, done = read_gen_stamp(h5)
    if any(t not in done for t in tags):
        return
    write_gen_stamp(h5, json.dumps({"key": key, "tags": {t: _fp_digest(done[t]) for t in tags}}, sort_keys=True))
