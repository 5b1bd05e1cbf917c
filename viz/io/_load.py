"""Loading landscapes from summaries and HDF5 files, and finding runs (private)."""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path

from collector.common import check_param
from collector.summary import SummaryReader
from landscape.io import H5_NAME, is_hdf5, read_h5
from landscape.result import Landscape

__all__ = ["load_landscapes", "find_runs"]

logger = logging.getLogger(__name__)

# MindInsight's rule: a run directory holds a file whose name contains "summary." and digits
_SUMMARY_RE = re.compile(r"summary\.\d+")


def find_runs(base_dir: str | os.PathLike) -> list[Path]:
    """Every directory under ``base_dir`` (itself included) that holds a summary file.

    Parameters
    ----------
    base_dir : str or os.PathLike
        Directory searched recursively.

    Returns
    -------
    list of Path
        Run directories, sorted by path. A folder that cannot be listed is skipped with
        a warning naming it.
    """
    check_param("base_dir", base_dir, ["path"], caller="find_runs")
    base = Path(base_dir)
    if not base.is_dir():
        raise FileNotFoundError(f"The 'base_dir' parameter of find_runs must be an existing directory. "
                                f"Got {os.fspath(base_dir)!r} instead.")
    def skipped(exc: OSError) -> None:
        logger.warning("find_runs: skipped %r, which cannot be listed: %s", exc.filename, exc.strerror or exc)

    runs = []
    for root, dirs, files in os.walk(base, onerror=skipped):
        dirs.sort()
        if any(_SUMMARY_RE.search(f) for f in files):
            runs.append(Path(root))
    return sorted(runs)


def load_landscapes(path: str | os.PathLike) -> list[Landscape]:
    """Every loss landscape in a summary directory, a summary file or an HDF5 file.

    Parameters
    ----------
    path : str or os.PathLike
        - a summary directory: the landscapes of all its summary files (MindSpore's or
          ours) and of its ``landscapes.h5``. A tag that is in both takes the
          ``landscapes.h5`` version (written by the same generation): the summary
          message holds only what MindSpore's does (the loss in float32), the file also
          the extra surfaces (accuracy), the metadata and the models' labels; a tag only
          in ``landscapes.h5`` (an n-D grid, which no summary message holds) comes after;
        - one summary (events) file;
        - an HDF5 file: ours (one group per tag, as ``landscape.write_h5`` writes it) or
          Li et al.'s layout (``xcoordinates``, ``ycoordinates``, ``train_loss`` at the top,
          other 2-D datasets such as ``train_acc`` become ``surfaces``).

    Returns
    -------
    list of Landscape
        In file order; a tag written twice keeps its first position and its latest value.
        In a directory, a summary file that cannot be read, or a landscape whose content is
        damaged, is skipped with a warning naming it (``collector.SummaryReader``'s
        ``issues``); the others are returned.

    Raises
    ------
    FileNotFoundError
        ``path`` does not exist.
    ValueError
        ``path`` holds no landscape.
    """
    check_param("path", path, ["path"], caller="load_landscapes")
    p = Path(path)
    skipped = ""
    if not p.exists():
        raise FileNotFoundError(f"The 'path' parameter of load_landscapes must be an existing summary "
                                f"directory, summary file or HDF5 file. Got {os.fspath(path)!r}, which does not "
                                "exist.")
    if p.is_file():
        found = _load_h5(p) if is_hdf5(p) else _load_summary(p)
    else:
        found = _load_summary(p) if any(_SUMMARY_RE.search(f.name) for f in p.iterdir() if f.is_file()) else []
        if (p / H5_NAME).is_file():  # richer (lines, markers, every surface) where it can be read
            try:
                richer = {ls.tag: ls for ls in _load_h5(p / H5_NAME)}
            except (OSError, ValueError, KeyError) as exc:  # h5py's errors for a damaged file
                skipped = f" ({str(p / H5_NAME)!r} cannot be read: {exc})"
                logger.warning("load_landscapes: skipped %r, which cannot be read: %s", str(p / H5_NAME), exc)
                richer = {}
            # a tag only there (an n-D grid, which the summary message cannot hold) after the others
            tags = {ls.tag for ls in found}
            found = [richer.get(ls.tag, ls) for ls in found] + [ls for t, ls in richer.items() if t not in tags]
    if not found:
        raise ValueError(f"No loss landscape found in {os.fspath(p)!r}{skipped}. HINT: pass a summary directory or "
                         f"events file written with collect_landscape / SummaryLandscape, or a {H5_NAME}; "
                         "viz.find_runs(base_dir) lists the run directories under a folder.")
    return found


def _load_summary(p: Path) -> list[Landscape]:
    reader = SummaryReader(p)
    by_tag: dict[str, Landscape] = {}
    for _step, tag, msg in reader.landscape_messages():
        by_tag[tag] = Landscape.from_proto(msg, tag=tag)
    return list(by_tag.values())


def _load_h5(p: Path) -> list[Landscape]:
    return list(read_h5(p).values())
