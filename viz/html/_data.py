"""What a report shows of each run: its landscapes, scalars and lineage, read once (private).

Runs are named, found and read here, with no plotting library: a summary directory, a
directory of runs, a summary file, an HDF5 file, or Landscape objects given directly.
A page is shared: by default (``paths="relative"``) no absolute path of this machine goes
into it. A run is shown by its path relative to the folder the runs share, the notes say
the paths the same way, and an absolute path in the lineage (a dataset's) by its last name.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from collector.common import InvalidParameterError
from collector.lineage import LineageError, filter_summary_lineage
from collector.summary import SummaryReader, summary_files
from landscape.io import H5_NAME, curvature_summary, is_hdf5, read_curvature
from landscape.result import Landscape
from viz.io import find_runs, load_landscapes

__all__ = ["RunData", "resolve_runs", "read_run", "shown_sources", "PATHS"]

logger = logging.getLogger(__name__)

#: How a run's path is shown: relative to the folder the runs share, or as the absolute path.
PATHS = ("relative", "absolute")

@dataclass
class RunData:
    """One run of the report: what it is called, where it was read from (as shown), and what it holds."""

    name: str
    source: str
    landscapes: list[Landscape] = field(default_factory=list)
    scalars: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    lineage: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)
    #: ``landscape curvature``'s results, one :func:`landscape.io.curvature_summary` per checkpoint
    curvature: list[dict[str, Any]] = field(default_factory=list)


def _bad(caller: str, got: Any, why: str) -> InvalidParameterError:
    """The refusal of ``runs`` (or of one item of it: ``got``), saying what is accepted."""
    shown = repr(got) if len(repr(got)) <= 200 else repr(got)[:197] + "..."
    return InvalidParameterError(
        f"The 'runs' parameter of {caller} must be a run directory (summary files or {H5_NAME}), a directory of "
        f"runs, a summary or HDF5 file, a landscape.Landscape, a list of these, or a dict of run name to one of "
        f"these. Got {shown}, {why}. HINT: `landscape ls DIR` lists the runs under a folder.")


def _is_landscapes(value: Any) -> bool:
    return isinstance(value, Landscape) or (
        isinstance(value, Sequence) and not isinstance(value, (str, bytes)) and len(value) > 0
        and all(isinstance(v, Landscape) for v in value))


def _run_dirs(path: Path) -> list[Path]:
    """The runs a directory stands for: itself when it holds summaries or landscapes.h5, else those under it."""
    if summary_files(path) or (path / H5_NAME).is_file():
        return [path]
    found = set(find_runs(path)) | {h5.parent for h5 in path.rglob(H5_NAME) if h5.is_file()}
    return sorted(found)


def _names(paths: list[Path]) -> list[str]:
    """Short unique names: the last folder names of each path, as few as tell them apart.

    >>> _names([Path("runs/a/run1"), Path("runs/b/run1"), Path("runs/c")])
    ['a/run1', 'b/run1', 'runs/c']
    """
    parts = [Path(os.path.abspath(p)).parts for p in paths]
    for k in range(1, max((len(pp) for pp in parts), default=0) + 1):
        names = ["/".join(pp[-k:]) for pp in parts]
        if len(set(names)) == len(names):
            return names
    return [pp[-1] if pp else "." for pp in parts]  # the same path twice: told apart by a number later


def resolve_runs(runs: Any, caller: str) -> list[tuple[str, Path | list[Landscape]]]:
    """``(name, path or landscapes)`` of every run, checked before anything is read.

    Raises
    ------
    InvalidParameterError
        ``runs`` is of the wrong type, empty, or names a path that does not exist or holds no run.
    """
    if isinstance(runs, Mapping):
        items = list(runs.items())
        if not items:
            raise _bad(caller, runs, "an empty dict")
        for name, _value in items:
            if not isinstance(name, str) or not name:
                raise _bad(caller, name, "a run name that is not a non-empty str")
    elif isinstance(runs, (str, os.PathLike)) or _is_landscapes(runs):
        items = [(None, runs)]
    elif isinstance(runs, Sequence) and not isinstance(runs, bytes):
        items = [(None, r) for r in runs]
        if not items:
            raise _bad(caller, runs, "an empty list")
    else:
        raise _bad(caller, runs, f"a {type(runs).__name__}")
    out: list[tuple[str | None, Path | list[Landscape]]] = []
    for name, value in items:
        if _is_landscapes(value):
            out.append((name or "landscapes", [value] if isinstance(value, Landscape) else list(value)))
            continue
        if not isinstance(value, (str, os.PathLike)):
            raise _bad(caller, value, "neither a path nor a Landscape")
        path = Path(value)
        if not path.exists():
            raise _bad(caller, os.fspath(value), "which does not exist")
        dirs = _run_dirs(path) if path.is_dir() else [path]
        if not dirs:
            raise _bad(caller, os.fspath(value), f"which holds no summary file and no {H5_NAME}")
        if name is None:
            out.extend((None, d) for d in dirs)
        else:  # a named directory of runs: each run under the name
            subs = [name] if len(dirs) == 1 else [f"{name}/{os.path.relpath(d, path)}" for d in dirs]
            out.extend(zip(subs, dirs))
    # unnamed runs: by their paths, with as many folder names as tell them apart
    short = iter(_names([v for n, v in out if n is None and isinstance(v, Path)]))
    named = [(n if n is not None else next(short), v) for n, v in out]
    seen: dict[str, int] = {}
    result = []
    for n, v in named:
        seen[n] = seen.get(n, 0) + 1
        result.append((n if seen[n] == 1 else f"{n} ({seen[n]})", v))
    return result


def _lineage(run: Path) -> dict[str, Any] | None:
    """MindInsight's lineage row of the run (``filter_summary_lineage``'s ``model_lineage``), or None."""
    try:
        found = filter_summary_lineage(run)
    except LineageError:  # no lineage file, or one that cannot be read: the report says so
        return None
    for obj in found.get("object", []):
        if obj.get("summary_dir") in ("./", "."):
            return dict(obj.get("model_lineage") or {})
    return None


def _folder(path: Path) -> str:
    """The absolute folder of a run: the path itself for a directory, else the file's folder."""
    path = Path(os.path.abspath(path))
    return os.fspath(path if path.is_dir() else path.parent)


def shown_sources(sources: list[Path | None], paths: str) -> tuple[list[str], str | None]:
    """How each run's path is shown, and the absolute folder they are shown relative to (None: absolute).

    Relative: to the folder above the runs' folders (``runs/a/run`` and ``runs/b/run`` are
    shown ``a/run`` and ``b/run``, one run folder by its name, a file with its folder's name);
    None (Landscape objects given in Python) as "(landscapes given in Python)".
    """
    given = [p for p in sources if p is not None]
    base = None
    if paths == "relative" and given:
        base = os.path.commonpath([os.path.dirname(_folder(p)) for p in given])
    out = []
    for p in sources:
        if p is None:
            out.append("(landscapes given in Python)")
        else:
            out.append(os.path.relpath(os.path.abspath(p), base) if base is not None else os.path.abspath(p))
    return out, base


def _scrubbed(text: str, base: str | None) -> str:
    """``text`` with the absolute folder ``base`` (and its real path) left out of every path in it."""
    if base is None:
        return text
    for prefix in sorted({base, os.path.realpath(base)}, key=len, reverse=True):
        if prefix != os.sep:
            text = text.replace(prefix + os.sep, "")
    return text


def _lineage_shown(lineage: dict[str, Any] | None, base: str | None) -> dict[str, Any] | None:
    """The lineage with absolute paths (a dataset's) shown by their last name: ``.../mnist``."""
    if lineage is None or base is None:
        return lineage

    def shown(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: shown(v) for k, v in value.items()}
        if isinstance(value, str) and os.path.isabs(value):
            return "\u2026/" + os.path.basename(os.path.normpath(value))
        return value

    return shown(lineage)


def read_run(name: str, source: Path | list[Landscape], shown: str | None = None,
             base: str | None = None) -> RunData:
    """Everything the report shows of one run; what cannot be read is noted, not fatal.

    ``shown``: the run's path as the page shows it (:func:`shown_sources`); ``base``: the
    absolute folder left out of the notes' paths (None: paths as they are).
    """
    if not isinstance(source, Path):
        return RunData(name, shown or "(landscapes given in Python)", landscapes=list(source))
    run = RunData(name, shown if shown is not None else os.fspath(source))
    try:
        run.landscapes = load_landscapes(source)
    except (ValueError, OSError) as exc:
        run.notes.append(f"no landscape: {exc}")
    is_summary = (source.is_dir() and bool(summary_files(source))) or (source.is_file() and not is_hdf5(source))
    if is_summary:
        try:
            reader = SummaryReader(source)
            run.scalars = reader.scalars()
            run.notes.extend(f"skipped damaged data: {issue}" for issue in reader.issues)
        except (OSError, ValueError) as exc:
            run.notes.append(f"scalars cannot be read: {exc}")
    if source.is_dir():
        run.lineage = _lineage_shown(_lineage(source), base)
    h5 = source / H5_NAME if source.is_dir() else source
    if h5.is_file() and is_hdf5(h5):
        try:
            run.curvature = [curvature_summary(rec) for rec in read_curvature(h5).values()]
        except (OSError, KeyError, ValueError) as exc:
            run.notes.append(f"curvature results cannot be read: {exc}")
    run.notes = [_scrubbed(note, base) for note in run.notes]
    for note in run.notes:
        logger.warning("report: run %s: %s", name, note)
    return run
