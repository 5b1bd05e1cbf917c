"""HDF5 files of landscapes: the one module that reads and writes them (private).

One layout everywhere, Li et al.'s (their ``h52vtp.py``, ``plot_2D.py`` and ``plot_1D.py``
read it), in a group per tag of ``landscapes.h5`` or at the root of a one-landscape file
(``viz.export(ls, "x.h5")``): ``xcoordinates``, ``ycoordinates`` (absent for a line) and
``train_loss`` (ny, nx), an n-D grid's also ``axis3coordinates``, ... and a ``train_loss`` of
shape (..., n3, ny, nx); each extra surface under its own name (``surface_{name}`` where the
name is the layout's own); ``convergence_point`` and the group ``path``;
``clamped_channels`` on a view through models with clamped batch-norm variances; the markers
as the JSON attribute ``markers``; the metadata as attributes (JSON text for strings in
lists and dicts; among them ``samples_digest``, the SHA-256 of the samples used, in the layout of
``landscape/engine/_digest.py``, and for a plane with paths ``movement_in_plane`` and
``path_distance``). docs/summary-format.md (its landscapes.h5 section) describes every dataset.

``landscapes.h5`` also holds each landscape's group ``directions`` (:class:`DirectionsRecord`,
:func:`write_directions`), the root attribute ``run`` (:data:`RUN_ATTR`,
``landscape/io/_run.py``), the group ``curvature`` (:data:`CURVATURE`, one
:class:`CurvatureRecord` per checkpoint) and unfinished landscapes under ``/_in_progress``
(:mod:`landscape.io._store`'s, through :func:`rewrite` and :func:`open_h5` here). Every change
of groups is made in a copy that atomically replaces the file (:func:`rewrite`), so a crash
never leaves a damaged file.

Li et al.'s own files (no ``convergence_point``; ``train_loss`` filled in ``meshgrid(x, y)``
order) read too; their trained model sits at (0, 0), so the grid point nearest it is the
convergence point.
"""

from __future__ import annotations

import contextlib
import glob
import importlib
import json
import math
import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import h5py
import numpy as np

from collector.common import atomic_path
from landscape.result import Landscape, LossPath

__all__ = ["open_h5", "refuse_open_read_only", "read_h5", "write_h5", "write_h5_single", "write_group", "read_group",
           "rewrite", "drop_stale_copies", "is_hdf5", "Partial", "landscape_status", "read_progress",
           "write_progress", "progress_writer", "H5_NAME", "PROGRESS", "SCHEMA_VERSION", "GEN_STAMP",
           "read_gen_stamp", "write_gen_stamp", "recorded_plans", "Stored", "stored_landscapes", "RUN_ATTR",
           "read_run", "write_run", "DIRECTIONS", "DirectionsRecord", "DirectionsInFile", "write_directions",
           "read_directions", "CURVATURE", "CurvatureRecord", "write_curvature", "read_curvature",
           "curvature_summary", "curvature_text"]

H5_NAME = "landscapes.h5"
PROGRESS = "_in_progress"
SCHEMA_VERSION = 3
_LAYOUT = ("xcoordinates", "ycoordinates", "train_loss", "convergence_point", "path", "clamped_channels")
#: The dataset of an n-D grid's axis ``k`` (3, 4, ...).
_AXIS = "axis{}coordinates"
_NOT_METADATA = ("fingerprint", "tag", "convergence_point", "markers", "clamped_points", "clamped_channels_max")
_SIGNATURE = b"\x89HDF\r\n\x1a\n"


def is_hdf5(path: str | os.PathLike) -> bool:
    """Whether ``path`` starts with the HDF5 signature."""
    with open(path, "rb") as fh:
        return fh.read(8) == _SIGNATURE


def _is_axis(name: str) -> bool:
    return name.startswith("axis") and name.endswith("coordinates") and name[4:-11].isdigit()


def _dataset_name(surface: str) -> str:
    reserved = surface in _LAYOUT or surface == DIRECTIONS or surface.startswith("surface_") or _is_axis(surface)
    return f"surface_{surface}" if reserved else surface


def _attr_value(val: Any) -> Any:
    if isinstance(val, dict) or (isinstance(val, (list, tuple)) and any(isinstance(v, str) for v in val)):
        return json.dumps(val if isinstance(val, dict) else list(val))
    if isinstance(val, (list, tuple, np.ndarray)):
        return np.asarray(val)
    return val


def write_group(target: Any, ls: Landscape, *, name: str | None = None) -> None:
    """Write ``ls`` into the open HDF5 file or group ``target``: as the group ``name`` (default
    its tag), or, with ``name=""``, at ``target`` itself (a one-landscape file)."""
    if name == "":
        g = target
        if ls.tag:
            g.attrs["tag"] = ls.tag
    else:
        g = target.create_group(name or ls.tag or "landscape")
    g.create_dataset("xcoordinates", data=np.asarray(ls.x, dtype=np.float64))
    if ls.dims >= 2:  # a line has no y axis (Li et al.'s 1-D layout)
        g.create_dataset("ycoordinates", data=np.asarray(ls.y, dtype=np.float64))
    for k, axis in enumerate(ls.extra_axes, start=3):
        g.create_dataset(_AXIS.format(k), data=np.asarray(axis, dtype=np.float64))
    g.create_dataset("train_loss", data=np.asarray(ls.z, dtype=np.float64))
    g.create_dataset("convergence_point", data=np.asarray(ls.convergence_point, dtype=np.float64))
    for surface, values in ls.surfaces.items():
        g.create_dataset(_dataset_name(str(surface)), data=np.asarray(values, dtype=np.float64))
    if ls.path is not None:
        p = g.create_group("path")
        p.create_dataset("x", data=np.asarray(ls.path.x, dtype=np.float64))
        p.create_dataset("y", data=np.asarray(ls.path.y, dtype=np.float64))
        p.create_dataset("z", data=np.asarray(ls.path.z, dtype=np.float64))
        p.create_dataset("intervals", data=np.asarray(ls.path.intervals, dtype=np.int64))
    if ls.paths:  # several runs on one plane (``path`` is the first), in their order
        g.create_group("paths").attrs["order"] = [str(n) for n in ls.paths]
    for name, run_path in ls.paths.items():
        p = g["paths"].create_group(name)
        p.create_dataset("x", data=np.asarray(run_path.x, dtype=np.float64))
        p.create_dataset("y", data=np.asarray(run_path.y, dtype=np.float64))
        p.create_dataset("z", data=np.asarray(run_path.z, dtype=np.float64))
        p.create_dataset("intervals", data=np.asarray(run_path.intervals, dtype=np.int64))
    if ls.clamped is not None:
        g.create_dataset("clamped_channels", data=np.asarray(ls.clamped, dtype=np.int32))
        g.attrs["clamped_points"], g.attrs["clamped_channels_max"] = ls.clamped_points
    if ls.markers:
        g.attrs["markers"] = json.dumps({str(k): [float(c) for c in v] for k, v in ls.markers.items()})
    for key, val in ls.metadata.items():
        if val is not None and key not in _NOT_METADATA:
            g.attrs[key] = _attr_value(val)
    if name != "":  # landscapes.h5 keeps the directions; a one-landscape export (Li et al.'s layout) does not
        _write_kept_directions(g, ls)


def _attr(v: Any) -> Any:
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, np.ndarray):
        return v.tolist()
    if isinstance(v, bytes):
        v = v.decode()
    if isinstance(v, str) and v[:1] in "[{":  # lists of names and dicts are stored as JSON
        try:
            return json.loads(v)
        except ValueError:
            return v
    return v


def read_group(g: Any, tag: str) -> Landscape:
    """A Landscape from a group (or a file's root) in the layout above, ours or Li et al.'s."""
    x = np.asarray(g["xcoordinates"][()], dtype=np.float64).reshape(-1)
    line = "ycoordinates" not in g  # Li et al.'s 1-D layout
    y = np.zeros(0) if line else np.asarray(g["ycoordinates"][()], dtype=np.float64).reshape(-1)
    extra: list[np.ndarray] = []
    while _AXIS.format(len(extra) + 3) in g:  # an n-D grid's later axes
        extra.append(np.asarray(g[_AXIS.format(len(extra) + 3)][()], dtype=np.float64).reshape(-1))
    shape = (x.size,) if line else (*(a.size for a in extra[::-1]), y.size, x.size)

    def grid(dataset: str) -> np.ndarray:
        # Li et al. allocate (len(x), len(y)) but fill it in meshgrid(x, y).ravel() order,
        # which is (len(y), len(x)) row-major: the flat order is what counts.
        values = np.asarray(g[dataset][()], dtype=np.float64)
        return values.reshape(shape)

    z = grid("train_loss")
    surfaces = {}
    for dataset, item in g.items():
        if dataset in _LAYOUT or _is_axis(dataset) or not isinstance(item, h5py.Dataset) \
                or int(np.prod(item.shape)) != z.size:
            continue
        surfaces[dataset[len("surface_"):] if dataset.startswith("surface_") else dataset] = grid(dataset)
    md = {k: _attr(v) for k, v in g.attrs.items() if k not in _NOT_METADATA}
    markers = {}
    if "markers" in g.attrs:
        markers = {str(k): (float(v[0]), float(v[1]), float(v[2])) for k, v in _attr(g.attrs["markers"]).items()}
    path = None
    if "path" in g and isinstance(g["path"], h5py.Group):
        p = g["path"]
        path = LossPath(p["x"][()], p["y"][()], p["z"][()], [int(i) for i in p["intervals"][()]])
    paths = {}
    if "paths" in g and isinstance(g["paths"], h5py.Group):
        for name in g["paths"].attrs.get("order", list(g["paths"])):
            p = g["paths"][name]
            paths[str(name)] = LossPath(p["x"][()], p["y"][()], p["z"][()], [int(i) for i in p["intervals"][()]])
    if "convergence_point" in g:
        cp = tuple(float(c) for c in np.ravel(g["convergence_point"][()])[:3])
    elif "convergence_point" in g.attrs:  # one-landscape files written before SCHEMA_VERSION 3
        cp = tuple(float(c) for c in np.ravel(g.attrs["convergence_point"])[:3])
    elif line:  # Li et al.: the trained model sits at 0; take the point nearest it
        j = int(np.argmin(np.abs(x)))
        cp = (float(x[j]), 0.0, float(z[j]))
    else:  # Li et al.: the trained model sits at (0, 0); take the grid point nearest it
        i, j = int(np.argmin(np.abs(y))), int(np.argmin(np.abs(x)))
        cp = (float(x[j]), float(y[i]), float(z[i, j]))
    clamped = np.asarray(g["clamped_channels"][()], dtype=np.int64).reshape(z.shape) \
        if "clamped_channels" in g else None
    ls = Landscape(x=x, y=y, z=z, path=path, convergence_point=(cp[0], cp[1], cp[2]), metadata=md,
                   surfaces=surfaces, tag=tag, markers=markers, paths=paths, clamped=clamped, extra_axes=tuple(extra))
    if DIRECTIONS in g and isinstance(g[DIRECTIONS], h5py.Group):  # read when asked for (Landscape.directions)
        ls.directions_source = DirectionsInFile(g.file.filename, g.name.lstrip("/"))
    return ls


#: What HDF5 says when a file this process holds open is opened again with other file-locking flags.
_LOCKING_MISMATCH = "file locking flag values don't match"
#: What HDF5 says when a file this process holds open read-only is opened for writing.
_OPEN_READ_ONLY = "already open for read-only"
#: Seconds :func:`open_h5` waits for a read-only handle of this process (another thread's read) to close
#: before it refuses to open the file for writing.
WRITE_WAIT_S = 2.0


def open_h5(path: str | os.PathLike, mode: str = "r", *, locking: bool | None = None) -> h5py.File:
    """``path`` opened with h5py: ``mode`` ``"r"`` or ``"r+"``; ``locking`` HDF5's file lock for a read
    (False: read while another process writes, as :func:`stored_landscapes` does).

    HDF5 keeps one handle per file in a process, shared by every open of it, and refuses an open
    that does not fit that handle. Two cases come from the caller's own process, and neither is the
    file's fault:

    * a read with other file-locking flags than an open handle's (a notebook's ``h5py.File(path)``
      left open): read with that handle's flags instead;
    * a write (``"r+"``) while a read-only handle is open: waited for :data:`WRITE_WAIT_S` (another
      thread's read ends), then refused with a ``RuntimeError`` that says which file and what to do.
    """
    if mode == "r+":
        try:
            return h5py.File(path, "r+")
        except OSError as exc:
            if _OPEN_READ_ONLY not in str(exc):
                raise
        refuse_open_read_only(path)  # waits for the read-only handle to close, or raises
        return h5py.File(path, "r+")
    if mode != "r":
        raise ValueError(f"open_h5 opens files to read ('r') or to write in place ('r+'), got mode={mode!r}")
    for flags in dict.fromkeys((locking, None, False, "best-effort")):  # the asked flags first, each once
        try:
            return h5py.File(path, "r", locking=flags)
        except OSError as exc:
            if _LOCKING_MISMATCH not in str(exc):
                raise
    raise OSError(f"{os.fspath(path)}: this process holds the file open with file-locking flags h5py cannot "
                  "match; close that handle and try again")


def open_read_only_here(path: str | os.PathLike) -> bool:
    """Whether this process holds the file at ``path`` open read-only through HDF5 (an ``h5py.File`` of the
    caller's). The same file as HDF5 sees it: the same device and inode (a handle of a file that an atomic
    rewrite has since replaced is another file, and does not keep the new one from being written)."""
    try:
        st = os.stat(path)
    except OSError:
        return False
    for fid in h5py.h5f.get_obj_ids(types=h5py.h5f.OBJ_FILE):
        if fid.get_intent() & h5py.h5f.ACC_RDWR:
            continue
        try:
            held = os.fstat(fid.get_vfd_handle())
        except (OSError, ValueError, TypeError):  # a driver without a file descriptor: its name then
            name = fid.name.decode(errors="replace") if isinstance(fid.name, bytes) else str(fid.name)
            if os.path.realpath(name) == os.path.realpath(os.fspath(path)):
                return True
            continue
        if (held.st_dev, held.st_ino) == (st.st_dev, st.st_ino):
            return True
    return False


def refuse_open_read_only(path: str | os.PathLike) -> None:
    """Raise, before any work, when this process holds ``path`` open read-only for longer than
    :data:`WRITE_WAIT_S`: a landscape written into it could not be saved (:func:`open_h5`)."""
    deadline = time.monotonic() + WRITE_WAIT_S
    while open_read_only_here(path):
        if time.monotonic() >= deadline:
            raise RuntimeError(_open_here_message(path))
        time.sleep(0.02)


def _open_here_message(path: str | os.PathLike) -> str:
    return (f"{os.fspath(path)} is open read-only in this process (an h5py.File that was not closed, in a "
            "notebook for example), and HDF5 cannot write a file beside a read-only handle of it in the same "
            "process. Close it (f.close(), or open it in a 'with' block), then run again.")


def read_h5(path: str | os.PathLike) -> dict[str, Landscape]:
    """Every finished landscape of an HDF5 file, by tag.

    Parameters
    ----------
    path : str or os.PathLike
        ``landscapes.h5`` (one group per tag; unfinished ones under ``/_in_progress`` are
        left out), a file ``viz.export`` wrote, or one of Li et al.'s (the tag is the file's
        stem when the file does not record one).

    Returns
    -------
    dict of str to Landscape
        By tag, in the file's order; each keeps its directions where the file holds them
        (``Landscape.directions()``).

    Examples
    --------
    >>> import tempfile, os, numpy as np
    >>> from landscape import Landscape, read_h5, write_h5
    >>> ls = Landscape(x=np.linspace(-1, 1, 3), y=np.linspace(-1, 1, 3), z=np.ones((3, 3)), tag="t")
    >>> path = os.path.join(tempfile.mkdtemp(), "landscapes.h5")
    >>> write_h5(path, [ls])
    >>> read_h5(path)["t"].z.shape
    (3, 3)
    """
    out = {}
    with open_h5(path) as fh:
        if "train_loss" in fh and "xcoordinates" in fh:  # one landscape at the root
            tag = fh.attrs.get("tag", os.path.splitext(os.path.basename(os.fspath(path)))[0])
            tag = tag.decode() if isinstance(tag, bytes) else str(tag)
            return {tag: read_group(fh, tag)}
        for tag, g in fh.items():
            if tag.startswith("_") or not isinstance(g, h5py.Group) or "train_loss" not in g:
                continue
            out[tag] = read_group(g, tag)
    return out


def drop_stale_copies(path: str | os.PathLike, alive: Callable[[int], bool]) -> None:
    """Remove the copies :func:`rewrite` left when its process was killed (never the live file)."""
    for tmp in glob.glob(glob.escape(os.fspath(path)) + ".tmp-*"):
        pid = tmp.rsplit("-", 1)[-1]
        if pid.isdigit() and int(pid) != os.getpid() and not alive(int(pid)):
            with contextlib.suppress(OSError):
                os.remove(tmp)


def rewrite(path: str | os.PathLike, *, drop: Sequence[str] = (), drop_progress: Sequence[str] = (),
            add: Callable[[Any], None] | None = None) -> None:
    """Copy the file without the groups ``drop`` (finished) and ``drop_progress`` (unfinished),
    let ``add`` write into the copy, then atomically replace the file by the copy
    (``fsync``-ed: the copy is complete before it becomes the file)."""
    target = os.fspath(path)
    with atomic_path(target, durable=True) as tmp, h5py.File(tmp, "w") as dst:
        if os.path.exists(target):
            with open_h5(target) as src:
                for k, v in src.attrs.items():
                    dst.attrs[k] = v
                for name in src:
                    if name == PROGRESS:
                        for t in src[PROGRESS]:
                            if t not in drop_progress:
                                src.copy(src[PROGRESS][t], dst.require_group(PROGRESS), name=t)
                    elif name not in drop:
                        src.copy(src[name], dst, name=name)
        dst.attrs["schema_version"] = SCHEMA_VERSION
        if PROGRESS in dst and not len(dst[PROGRESS]):
            del dst[PROGRESS]
        if add is not None:
            add(dst)


def write_h5(path: str | os.PathLike, landscapes: list[Landscape]) -> None:
    """Write (or replace) one group per landscape tag in the HDF5 file ``path``.

    The file is replaced atomically (a copy written, then renamed): a crash leaves the old
    file or the new one, never a damaged one.

    Parameters
    ----------
    path : str or os.PathLike
        The file, created if missing; groups of other tags are kept.
    landscapes : list of Landscape
        Each written under its ``tag``, with its directions where it has them.
    """
    tags = [ls.tag or "landscape" for ls in landscapes]

    def add(fh: Any) -> None:
        for ls in landscapes:
            write_group(fh, ls)

    rewrite(path, drop=tags, drop_progress=tags, add=add)


def write_h5_single(path: str | os.PathLike, ls: Landscape) -> None:
    """A file holding ``ls`` alone, at its root (what Li et al.'s scripts read), written atomically."""
    with atomic_path(path) as tmp, h5py.File(tmp, "w") as fh:
        write_group(fh, ls, name="")
        fh.attrs["schema_version"] = SCHEMA_VERSION


# -- unfinished landscapes (/_in_progress/{tag}), for landscape.io._store ---------------
@dataclass
class Partial:
    """A landscape's definition and its finished points, as stored (``more``: an n-D grid's third
    and later directions, one flat float32 row each; ``points`` then has a column per direction)."""

    md: dict[str, Any]
    x: np.ndarray
    y: np.ndarray
    points: np.ndarray
    n_path: int
    intervals: list[int] | None
    v: np.ndarray
    w: np.ndarray
    values: dict[str, np.ndarray]
    done: np.ndarray = field(repr=False)
    more: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), dtype=np.float32), repr=False)


class Stored(NamedTuple):
    """What ``landscapes.h5`` holds: the finished landscapes' tags, and per unfinished landscape
    (``/_in_progress/{tag}``, a generation that was interrupted) its points done and in all."""

    finished: list[str]
    unfinished: dict[str, tuple[int, int]]


def stored_landscapes(path: str | os.PathLike) -> Stored:
    """Which landscapes of ``landscapes.h5`` are finished, which are not and how far each is.

    Cheap (the ``done`` flags are read, no values) and safe while a generation writes the
    file (read without HDF5's file lock; a rewrite replaces the file atomically). The points
    of an unfinished landscape count the grid and, for a PCA landscape, the path.

    Examples
    --------
    >>> stored = stored_landscapes("runs/mlp/landscapes.h5")  # doctest: +SKIP
    >>> stored.unfinished                                     # doctest: +SKIP
    {'landscape_[4, 6]': (37, 147)}
    """
    with open_h5(path, locking=False) as fh:
        unfinished = {}
        if PROGRESS in fh:
            for tag, g in fh[PROGRESS].items():
                done = np.asarray(g["done"][()], dtype=bool)
                unfinished[str(tag)] = (int(done.sum()), int(done.size))
        finished = [str(t) for t, g in fh.items() if not t.startswith("_") and t not in unfinished
                    and isinstance(g, h5py.Group) and "train_loss" in g]
    return Stored(finished, unfinished)


def landscape_status(path: str | os.PathLike, tag: str) -> tuple[str, str | None]:
    """("absent" | "partial" | "complete", the stored fingerprint's JSON text or None)."""
    with open_h5(path) as fh:
        if PROGRESS in fh and tag in fh[PROGRESS]:
            return "partial", str(fh[PROGRESS][tag].attrs["fingerprint"])
        if tag in fh and "train_loss" in fh[tag]:
            fp = fh[tag].attrs.get("fingerprint")
            return "complete", (str(fp) if fp is not None else None)
    return "absent", None


def read_progress(path: str | os.PathLike, tag: str) -> Partial:
    """The definition and finished points of the unfinished landscape ``tag``."""
    with open_h5(path) as fh:
        g = fh[PROGRESS][tag]
        values = {k[len("value_"):]: g[k][()] for k in g if k.startswith("value_")}
        return Partial(md=json.loads(g.attrs["metadata"]), x=g["x"][()], y=g["y"][()],
                       points=g["points"][()], n_path=int(g.attrs["n_path"]),
                       intervals=[int(i) for i in g["intervals"][()]] if "intervals" in g else None,
                       v=g["v"][()], w=g["w"][()], values=values, done=g["done"][()].astype(bool),
                       **({"more": g["more"][()]} if "more" in g else {}))


def write_progress(fh: Any, tag: str, fingerprint: str, metadata: str, part: Partial) -> None:
    """Write the group ``/_in_progress/{tag}`` into the open file ``fh`` (inside :func:`rewrite`).

    Every dataset's storage is allocated now (data given), so :func:`progress_writer` later
    only overwrites raw values: no HDF5 metadata changes after this.
    """
    g = fh.require_group(PROGRESS).create_group(tag)
    g.attrs["fingerprint"] = fingerprint
    g.attrs["metadata"] = metadata
    g.attrs["n_path"] = int(part.n_path)
    g.create_dataset("x", data=np.asarray(part.x, dtype=np.float64))
    g.create_dataset("y", data=np.asarray(part.y, dtype=np.float64))
    g.create_dataset("points", data=np.asarray(part.points, dtype=np.float64))
    if part.intervals is not None:
        g.create_dataset("intervals", data=np.asarray(part.intervals, dtype=np.int64))
    g.create_dataset("v", data=np.asarray(part.v, dtype=np.float32))
    g.create_dataset("w", data=np.asarray(part.w, dtype=np.float32))
    if np.size(part.more):
        g.create_dataset("more", data=np.asarray(part.more, dtype=np.float32))
    for name, arr in part.values.items():
        g.create_dataset(f"value_{name}", data=np.asarray(arr, dtype=np.float64))
    g.create_dataset("done", data=part.done.astype(np.uint8))


@contextlib.contextmanager
def progress_writer(path: str | os.PathLike,
                    tag: str) -> Iterator[Callable[[int, int, Mapping[str, np.ndarray]], None]]:
    """A writer of finished chunks of ``tag``: values first, flushed, then their ``done`` flags."""
    with open_h5(path, "r+") as fh:
        g = fh[PROGRESS][tag]

        def write(lo: int, hi: int, res: Mapping[str, np.ndarray]) -> None:
            for name, arr in res.items():
                g[f"value_{name}"][lo:hi] = np.asarray(arr, dtype=np.float64)
            fh.flush()
            g["done"][lo:hi] = 1
            fh.flush()

        yield write


def recorded_plans(path: str | os.PathLike) -> dict[str, dict[str, Any]]:
    """The tuned plans the file's landscapes (finished or not) were evaluated with, by the key
    of what decided them (their metadata's ``plan_key``)."""
    out: dict[str, dict[str, Any]] = {}
    with open_h5(path) as fh:
        groups = [g for t, g in fh.items() if not t.startswith("_") and isinstance(g, h5py.Group)]
        if PROGRESS in fh:
            groups += list(fh[PROGRESS].values())
        for g in groups:
            if "metadata" in g.attrs:  # an unfinished landscape keeps its metadata as one JSON text
                md = json.loads(g.attrs["metadata"])
            else:
                md = {k: _attr(g.attrs[k]) for k in ("plan_key", "points_per_call", "batching", "eval_batch",
                                                      "memory_format") if k in g.attrs}
            if md.get("plan_key"):
                out[str(md["plan_key"])] = {k: md.get(k) for k in ("points_per_call", "batching", "eval_batch",
                                                                   "memory_format")}
    return out


#: Root attribute of landscapes.h5 where ``landscape gen`` records the command that finished
#: its landscapes (see ``landscape/cli/_stamp.py``).
GEN_STAMP = "gen_stamp"


def read_gen_stamp(path: str | os.PathLike) -> tuple[str | None, dict[str, str | None]]:
    """The recorded command stamp (or None) and, for every finished landscape, its stored
    fingerprint's JSON text; unfinished landscapes are left out."""
    with open_h5(path, locking=False) as fh:
        raw = fh.attrs.get(GEN_STAMP)
        stamp = None if raw is None else str(raw)
        unfinished = set(fh[PROGRESS]) if PROGRESS in fh else set()
        done = {}
        for tag in fh:
            if tag == PROGRESS or tag in unfinished or not isinstance(fh[tag], h5py.Group):
                continue
            if "train_loss" in fh[tag]:
                fp = fh[tag].attrs.get("fingerprint")
                done[tag] = None if fp is None else str(fp)
        return stamp, done


def write_gen_stamp(path: str | os.PathLike, stamp: str) -> None:
    """Record ``stamp`` as the file's root attribute (one atomic rewrite)."""

    def add(fh: Any) -> None:
        fh.attrs[GEN_STAMP] = stamp

    rewrite(path, add=add)


# -- the run a landscapes.h5 belongs to, and each landscape's directions ------------------
#: Root attribute of landscapes.h5: the run its landscapes belong to, JSON text (``landscape/io/_run.py``).
RUN_ATTR = "run"
#: The group of a landscape's group that holds its directions (:class:`DirectionsRecord`).
DIRECTIONS = "directions"


def read_run(path: str | os.PathLike) -> dict[str, Any] | None:
    """The run record of ``landscapes.h5`` (None: a file written before runs were recorded).
    Read without HDF5's file lock, like :func:`stored_landscapes`."""
    with open_h5(path, locking=False) as fh:
        raw = fh.attrs.get(RUN_ATTR)
    return None if raw is None else json.loads(raw.decode() if isinstance(raw, bytes) else str(raw))


def write_run(fh: Any, record: Mapping[str, Any]) -> None:
    """Set the run record of the open file ``fh`` (inside :func:`rewrite`)."""
    fh.attrs[RUN_ATTR] = json.dumps(dict(record), sort_keys=True)


@dataclass
class DirectionsRecord:
    """A landscape's directions as ``landscapes.h5`` keeps them: the group ``directions`` of its group.

    Attributes
    ----------
    info : dict
        The group's attributes: ``kind`` ("arrays", or "recipe" for random directions), ``names`` and
        ``shapes`` of the moved tensors in order, ``stored`` (whether the arrays are in the file),
        ``digest_v``, ``digest_w`` (SHA-256 of the directions' dtypes, shapes and bytes, tensor by tensor),
        ``digest_centre`` (of the centre's moved tensors), ``torch`` (the version that computed them);
        for a recipe ``recipe`` (its parameters) and ``digest_draw`` (of the standard-normal draw before
        normalization); ``reason`` when arrays are not stored. See ``landscape/io/_directions.py``.
    v, w : dict of str to ndarray of float32, or None
        The directions by parameter name (``w`` None for a line; both None for a recipe, or when the
        arrays are not stored).
    points : ndarray of shape (m, 2), or (m, n) for an n-D grid
        The engine's ``(a, b)`` of every point (``centre + a*v + b*w``): the grid (row-major over y,
        then x), the path, the extra points of the markers; an n-D grid's point has one coordinate
        per direction.
    more : list of dict of str to ndarray of float32, or None
        An n-D grid's third and later directions (groups ``u3``, ``u4``, ... with digests
        ``digest_u3``, ...), when stored.
    """

    info: dict[str, Any]
    v: dict[str, np.ndarray] | None
    w: dict[str, np.ndarray] | None
    points: np.ndarray
    more: list[dict[str, np.ndarray]] | None = None


def _member(name: str) -> str:
    """A parameter's name as an HDF5 member name (a '/' would make groups)."""
    return name.replace("%", "%25").replace("/", "%2F")


def write_directions(g: Any, rec: DirectionsRecord) -> None:
    """Write ``rec`` as the group ``directions`` of the landscape's group ``g`` (inside :func:`rewrite`)."""
    d = g.create_group(DIRECTIONS)
    for key, val in rec.info.items():
        # str() of a str subclass (torch.__version__ is one), which h5py would store as a numpy array
        d.attrs[key] = str(val) if isinstance(val, str) else val if isinstance(val, (bool, int, float)) \
            else json.dumps(val)
    d.create_dataset("points", data=np.asarray(rec.points, dtype=np.float64))
    later = [(f"u{k}", arrays) for k, arrays in enumerate(rec.more or [], start=3)]
    for axis, arrays in (("v", rec.v), ("w", rec.w), *later):
        if arrays is not None:
            a = d.create_group(axis)
            for name, arr in arrays.items():
                a.create_dataset(_member(name), data=np.asarray(arr, dtype=np.float32))


def read_directions(path: str | os.PathLike, tag: str) -> DirectionsRecord:
    """The directions of landscape ``tag`` of ``path``, arrays included."""
    with open_h5(path) as fh:
        d = fh[tag][DIRECTIONS]
        info = {k: _attr(v) for k, v in d.attrs.items()}

        def arrays(axis: str) -> dict[str, np.ndarray] | None:
            return None if axis not in d else {n: d[axis][_member(n)][()] for n in info["names"]}

        more: list[dict[str, np.ndarray]] = []
        while f"u{len(more) + 3}" in d:
            got = arrays(f"u{len(more) + 3}")
            assert got is not None
            more.append(got)
        return DirectionsRecord(info, arrays("v"), arrays("w"), d["points"][()], more or None)


class DirectionsInFile:
    """Where a landscape read from a file gets its directions (:meth:`Landscape.directions`): the file,
    read only when they are asked for."""

    def __init__(self, path: str | os.PathLike, tag: str) -> None:
        self.path, self.tag = os.path.abspath(path), tag  # the same file after a change of directory

    def record(self) -> DirectionsRecord:
        return read_directions(self.path, self.tag)

    def load(self, centre: Any) -> Any:
        # the tensors need torch, which reading a file does not import (landscape ls, the stamp): loaded
        # on first use, as the package's lazy names are
        module = importlib.import_module("landscape.io._directions")
        return module.load_record(self.record(), centre, self.tag)


def _write_kept_directions(g: Any, ls: Landscape) -> None:
    """The directions ``ls`` keeps (:attr:`Landscape.directions_source`), if any, into its group ``g``."""
    source = ls.directions_source
    record = getattr(source, "record", None)
    if record is not None:
        write_directions(g, record())


# -- curvature results (``landscape curvature``) ------------------------------------------
#: The group of ``landscapes.h5`` that holds ``landscape curvature``'s results: one group per
#: checkpoint (``{unit}_{n}``); no ``train_loss``, so it is no landscape to the readers above.
CURVATURE = "curvature"


@dataclass
class CurvatureRecord:
    """One checkpoint's curvature results as ``landscapes.h5`` keeps them: ``/curvature/{name}``.

    Attributes
    ----------
    info : dict
        The group's attributes: what was measured and how (``unit``, ``checkpoint``,
        ``num_samples``, ``seed``, ...) and the scalar results (``trace``, ``sharpness``, ...);
        numbers and strings as they are, dicts and lists of strings as JSON text (None is left out).
    arrays : dict of str to ndarray
        The group's datasets (``eigenvalues``, ``density_grid``, ...), float64.
    """

    info: dict[str, Any]
    arrays: dict[str, np.ndarray] = field(default_factory=dict)


def write_curvature(path: str | os.PathLike, name: str, record: CurvatureRecord,
                    run: Mapping[str, Any] | None = None) -> None:
    """Write (or replace) ``/curvature/{name}`` of ``path`` in one atomic rewrite; ``run``, the record
    of the run it belongs to (``landscape/io/_run.py``), is set when the file has none."""

    def add(fh: Any) -> None:
        root = fh.require_group(CURVATURE)
        if name in root:
            del root[name]
        g = root.create_group(name)
        for key, val in record.info.items():
            if val is not None:
                g.attrs[key] = _attr_value(val)
        for key, arr in record.arrays.items():
            g.create_dataset(key, data=np.asarray(arr, dtype=np.float64))
        if run is not None and RUN_ATTR not in fh.attrs:
            write_run(fh, run)

    rewrite(path, add=add)


def read_curvature(path: str | os.PathLike) -> dict[str, CurvatureRecord]:
    """Every ``/curvature/{name}`` of ``path`` ({} when it has none); read without HDF5's file lock,
    like :func:`stored_landscapes`."""
    with open_h5(path, locking=False) as fh:
        if CURVATURE not in fh or not isinstance(fh[CURVATURE], h5py.Group):
            return {}
        return {str(name): CurvatureRecord({k: _attr(v) for k, v in g.attrs.items()},
                                           {k: np.asarray(g[k][()]) for k in g})
                for name, g in fh[CURVATURE].items()}


def curvature_summary(record: CurvatureRecord) -> dict[str, Any]:
    """What ``landscape curvature`` measured at one checkpoint, as ``landscape ls`` (``--json``) and
    the HTML report list it: ``unit``, ``checkpoint``, ``num_samples``, and those present of
    ``eigenvalues``, ``trace``, ``trace_interval``, ``density_mean``, ``density_stderr``, ``sharpness``
    (kind -> ``{"value", "rho"}``)."""
    info = record.info
    item: dict[str, Any] = {"unit": info.get("unit"), "checkpoint": info.get("checkpoint"),
                            "num_samples": info.get("num_samples")}
    if "eigenvalues" in record.arrays:
        item["eigenvalues"] = record.arrays["eigenvalues"].tolist()
    for key in ("trace", "trace_interval", "density_mean", "density_stderr"):
        if key in info:
            item[key] = info[key]
    if isinstance(info.get("sharpness"), dict):
        item["sharpness"] = {kind: {"value": s.get("value"), "rho": s.get("rho")}
                             for kind, s in info["sharpness"].items()}
    return item


def curvature_text(item: Mapping[str, Any]) -> str:
    """One line of a :func:`curvature_summary`: "curvature at epoch 6 (64 samples): eigenvalues ...; trace ..."."""
    parts = []
    if "eigenvalues" in item:
        parts.append("eigenvalues " + ", ".join(f"{v:.6g}" for v in item["eigenvalues"]))
    if "trace" in item:
        lo, hi = item.get("trace_interval") or (math.nan, math.nan)
        parts.append(f"trace {item['trace']:.6g} [{lo:.6g}, {hi:.6g}]")
    if "density_mean" in item:
        parts.append(f"density mean {item['density_mean']:.6g}")
    for kind, sh in (item.get("sharpness") or {}).items():
        rho = "" if sh.get("rho") is None else f" (rho={sh['rho']:g})"
        parts.append(f"{kind} {sh['value']:.6g}{rho}")
    return (f"curvature at {item['unit']} {item['checkpoint']} ({item['num_samples']} samples): "
            + ("; ".join(parts) or "-"))
