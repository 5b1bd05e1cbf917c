"""The landscapes a command reads from a PATH (a run, an events file, an HDF5 file), one tag or all."""

from __future__ import annotations

from pathlib import Path

import viz
from landscape.cli._common import UsageError
from landscape.result import Landscape

__all__ = ["select_landscapes"]


def select_landscapes(path: Path, tag: str | None) -> list[Landscape]:
    """The landscapes of ``path``, or only the one tagged ``tag``."""
    if not path.exists():
        raise UsageError(f"no such file or directory: {str(path)!r}")
    landscapes = viz.load_landscapes(path)
    if tag is not None:
        landscapes = [ls for ls in landscapes if ls.tag == tag]
        if not landscapes:
            raise UsageError(f"--tag {tag!r} not found in {str(path)!r}")
    return landscapes
