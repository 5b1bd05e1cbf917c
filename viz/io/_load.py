"""Loading landscapes from summaries and HDF5 files, and finding runs (private)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from collector.common._validation import check_param

if TYPE_CHECKING:  # pragma: no cover
    from landscape import Landscape

__all__ = ["load_landscapes", "find_runs"]

# MindInsight's rule: a run directory holds a file whose name contains "summary." and digits
_SUMMARY_RE = re.compile(r"summary\.\d+")
_LI_NAMES = ("xcoordinates", "ycoordinates", "train_loss")
H5_NAME = "landscapes.h5"


def find_runs(base_dir: str | os.PathLike) -> list[Path]:
    """Every directory under ``base_dir`` (itself included) that holds a summary file.

    Parameters
    ----------
    base_dir : str or os.PathLike
        Directory searched recursively.

    Returns
    -------
    list of Path
        Run directories, sorted by path.
    """
    check_param("base_dir", base_dir, ["path"], caller="find_runs")
    base = Path(base_dir)
    if not base.is_dir():
        raise FileNotFoundError(f"The 'base_dir' parameter of find_runs must be an existing directory. "
                                f"Got {os.fspath(base_dir)!r} instead.")
    runs = []
    for root, dirs, files in os.walk(base):
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
          ours); when they hold none, its ``landscapes.h5``;
        - one summary (events) file;
        - an HDF5 file: ours (one group per tag, as ``landscape.write_h5`` writes it) or
          Li et al.'s layout (``xcoordinates``, ``ycoordinates``, ``train_loss`` at the top,
          other 2-D datasets such as ``train_acc`` become ``surfaces``).

    Returns
    -------
    list of Landscape
        In file order; a tag written twice keeps its first position and its latest value.

    Raises
    ------
    FileNotFoundError
        ``path`` does not exist.
    ValueError
        ``path`` holds no landscape.
    """
    check_param("path", path, ["path"], caller="load_landscapes")
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"The 'path' parameter of load_landscapes must be an existing summary "
                                f"directory, summary file or HDF5 file. Got {os.fspath(path)!r}, which does not "
                                "exist.")
    if p.is_file():
        found = _load_h5(p) if _is_hdf5(p) else _load_summary(p)
    else:
        found = _load_summary(p) if any(_SUMMARY_RE.search(f.name) for f in p.iterdir() if f.is_file()) else []
        if not found and (p / H5_NAME).is_file():
            found = _load_h5(p / H5_NAME)
    if not found:
        raise ValueError(f"No loss landscape found in {os.fspath(p)!r}. HINT: pass a summary directory or "
                         f"events file written with collect_landscape / SummaryLandscape, or a {H5_NAME}; "
                         "viz.find_runs(base_dir) lists the run directories under a folder.")
    return found


def _is_hdf5(p: Path) -> bool:
    with open(p, "rb") as fh:
        head = fh.read(8)
    return head == b"\x89HDF\r\n\x1a\n"


def _load_summary(p: Path) -> list[Landscape]:
    from collector import SummaryReader
    from landscape import Landscape

    reader = SummaryReader(p)
    by_tag: dict[str, Landscape] = {}
    for _step, tag, msg in reader.landscape_messages():
        by_tag[tag] = Landscape.from_proto(msg, tag=tag)
    return list(by_tag.values())


def _load_h5(p: Path) -> list[Landscape]:
    import h5py

    with h5py.File(p, "r") as fh:
        if all(name in fh for name in _LI_NAMES):
            return [_from_li_group(fh, tag=str(fh.attrs.get("tag", p.stem)))]
        groups = [name for name, item in fh.items() if isinstance(item, h5py.Group) and "train_loss" in item]
        if not groups:
            return []
        if all("convergence_point" in fh[g] for g in groups):
            from landscape import read_h5

            return list(read_h5(p).values())
        return [_from_li_group(fh[g], tag=g) for g in groups]


def _from_li_group(g: Any, tag: str) -> Landscape:
    """A Landscape from a group (or file) in Li et al.'s layout, plus our optional extras."""
    from landscape import Landscape, LossPath

    x = np.asarray(g["xcoordinates"][()], dtype=np.float64).reshape(-1)
    y = np.asarray(g["ycoordinates"][()], dtype=np.float64).reshape(-1)

    def grid(name: str) -> np.ndarray:
        a = np.asarray(g[name][()], dtype=np.float64)
        # Li et al. allocate (len(x), len(y)) but fill it in meshgrid(x, y).ravel() order,
        # which is (len(y), len(x)) row-major: the flat order is what counts.
        return a.reshape(y.size, x.size)

    z = grid("train_loss")
    surfaces = {}
    for name, item in g.items():
        if name in _LI_NAMES or not hasattr(item, "shape") or int(np.prod(item.shape)) != z.size:
            continue
        surfaces[name] = grid(name)
    md: dict[str, Any] = {}
    for k, v in g.attrs.items():
        if k in ("tag", "convergence_point"):
            continue
        v = v.item() if isinstance(v, np.generic) else (v.decode() if isinstance(v, bytes) else v)
        if isinstance(v, str) and v.startswith("{"):
            try:
                v = json.loads(v)
            except ValueError:
                pass
        md[k] = v
    path = None
    if "path" in g and hasattr(g["path"], "keys"):
        pg = g["path"]
        path = LossPath(pg["x"][()], pg["y"][()], pg["z"][()], [int(i) for i in pg["intervals"][()]])
    if "convergence_point" in g.attrs:
        cp = tuple(float(c) for c in np.ravel(g.attrs["convergence_point"])[:3])
    else:  # Li et al.: the trained model sits at (0, 0); take the grid point nearest it
        i, j = int(np.argmin(np.abs(y))), int(np.argmin(np.abs(x)))
        cp = (float(x[j]), float(y[i]), float(z[i, j]))
    return Landscape(x=x, y=y, z=z, path=path, convergence_point=cp, metadata=md, surfaces=surfaces,
                     tag=tag)
