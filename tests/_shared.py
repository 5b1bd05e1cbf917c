"""Folders made once per test run and shared by every pytest-xdist worker.

A session fixture runs once per worker process under ``pytest -n``; an expensive one (the
documentation site, the demo's run) is made once for the whole run instead, as
pytest-xdist's documentation advises: in the run's common temporary folder (the parent
of each worker's own), under a file lock, the first worker making it and the others
waiting for it and reading it.
"""

from __future__ import annotations

import fcntl
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest


def shared_folder(tmp_path_factory: pytest.TempPathFactory, name: str, make: Callable[[Path], None]) -> Path:
    """The folder ``name``, made by ``make(folder)`` once per test run (per worker without xdist).

    A ``make`` that raises leaves no folder behind, and the next worker that asks tries again."""
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent
    folder, done = root / name, root / f"{name}.done"
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if not done.exists():
                shutil.rmtree(folder, ignore_errors=True)
                folder.mkdir()
                try:
                    make(folder)
                except BaseException:
                    shutil.rmtree(folder, ignore_errors=True)
                    raise
                done.touch()
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    return folder
