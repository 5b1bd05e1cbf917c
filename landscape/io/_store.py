"""Resumable generation in ``landscapes.h5`` (private).

While a landscape is computed, ``/_in_progress/{tag}`` holds everything that defines it:
its inputs' fingerprint, its metadata, the grid axes, every point, the two directions
(flat float32, the moved parameters in order), and per point its values and a ``done``
flag. Chunks are flushed as they finish. A finished landscape replaces its progress group
by the final group ``/{tag}`` (Li et al.'s dataset names), which keeps the fingerprint.

Crash safety (SIGKILL, Ctrl-C or a dying worker at any moment):

* Groups are only ever created or removed in a copy of the file that replaces the
  original with ``os.replace`` (atomic on POSIX): a crash leaves the old or the new file.
* Per chunk, only raw values of datasets created (storage allocated, contiguous) with the
  group are overwritten in place. No HDF5 metadata changes, so the file stays readable;
  the values are flushed before their ``done`` flags, so a ``done`` point always has its
  values. A crash between the two costs at most that chunk.
"""

from __future__ import annotations

import contextlib
import glob
import hashlib
import json
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from landscape.result._landscape import Landscape

__all__: list[str] = []
SCHEMA_VERSION = 2
PROGRESS = "_in_progress"


# -- fingerprints ---------------------------------------------------------------------
def _sha(*parts: bytes) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part)
    return h.hexdigest()


def file_digest(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def tensor_digest(*tensors: torch.Tensor) -> str:
    h = hashlib.sha256()
    for t in tensors:
        t = t.detach().cpu().contiguous()
        h.update(f"{t.dtype}{tuple(t.shape)}".encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()


def model_digest(network: torch.nn.Module) -> str:
    """The architecture: class, module tree and every state entry's name, shape and dtype."""
    cls = type(network)
    items = [f"{cls.__module__}.{cls.__qualname__}", repr(network)]
    items += [f"{k}:{tuple(v.shape)}:{v.dtype}" for k, v in network.state_dict().items()]
    return _sha("\n".join(items).encode())


def differences(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """Human-readable differences between two fingerprints (digests shortened)."""

    def show(v: Any) -> str:
        if isinstance(v, str) and len(v) == 64:
            return v[:12]
        return json.dumps(v)

    out = []
    for key in sorted(set(old) | set(new)):
        if old.get(key) != new.get(key):
            out.append(f"{key}: {show(old.get(key, '(absent)'))} then, {show(new.get(key, '(absent)'))} now")
    return out


# -- the file -------------------------------------------------------------------------
def jsonable(value: Any) -> Any:
    """``value`` with numpy arrays and scalars turned into lists and Python numbers."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, (np.generic,)):
        return value.item()
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    return value


@dataclass
class Partial:
    """A landscape's definition and its finished points, as stored."""

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


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def _fsync(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class Store:
    """``landscapes.h5`` of one output folder, written only by one process (rank 0)."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = os.fspath(path)
        self._drop_stale_copies()

    def _drop_stale_copies(self) -> None:
        """Copies left by a process killed in the middle of a rewrite (never the live file)."""
        for tmp in glob.glob(glob.escape(self.path) + ".tmp-*"):
            pid = tmp.rsplit("-", 1)[-1]
            if pid.isdigit() and int(pid) != os.getpid() and not _alive(int(pid)):
                with contextlib.suppress(OSError):
                    os.remove(tmp)

    @contextlib.contextmanager
    def lock(self) -> Iterator[None]:
        """Hold ``{path}.lock`` (an advisory ``flock``) while generating, so that a second
        generation into the same folder is refused instead of mixing its writes in. The
        kernel drops the lock when the process ends, however it ends; the file is removed
        on release."""
        import fcntl

        lock_path = self.path + ".lock"
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                other = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
                raise RuntimeError(f"Another generation (pid {other}) is writing to {self.path}; wait for it "
                                   "to finish or choose another output folder.") from None
            os.ftruncate(fd, 0)
            os.pwrite(fd, str(os.getpid()).encode(), 0)
            try:
                yield
            finally:
                with contextlib.suppress(OSError):
                    os.remove(lock_path)
        finally:
            os.close(fd)

    # -- reading ------------------------------------------------------------------
    def status(self, tag: str) -> tuple[str, dict[str, Any] | None]:
        """("absent" | "partial" | "complete", stored fingerprint or None)."""
        import h5py

        if not os.path.exists(self.path):
            return "absent", None
        with h5py.File(self.path, "r") as fh:
            if PROGRESS in fh and tag in fh[PROGRESS]:
                return "partial", json.loads(fh[PROGRESS][tag].attrs["fingerprint"])
            if tag in fh and "train_loss" in fh[tag]:
                fp = fh[tag].attrs.get("fingerprint")
                return "complete", (json.loads(fp) if fp is not None else {})
        return "absent", None

    def check(self, tag: str, fingerprint: Mapping[str, Any]) -> str:
        """What the file holds for ``tag`` ("absent", "partial", "complete"); a landscape
        made from other inputs is refused (``forget`` it first to start over)."""
        state, stored = self.status(tag)
        if state == "absent":
            return state
        diff = differences(stored or {}, fingerprint)
        if diff:
            what = "an unfinished" if state == "partial" else "a finished"
            raise ValueError(
                f"{self.path} holds {what} landscape {tag!r} made from other inputs than this call's: "
                + "; ".join(diff) + ". HINT: pass restart=True (landscape gen --restart) to start it over, "
                "or write to another output folder.")
        return state

    def load_partial(self, tag: str) -> Partial:
        import h5py

        with h5py.File(self.path, "r") as fh:
            g = fh[PROGRESS][tag]
            values = {k[len("value_"):]: g[k][()] for k in g if k.startswith("value_")}
            return Partial(md=json.loads(g.attrs["metadata"]), x=g["x"][()], y=g["y"][()],
                           points=g["points"][()], n_path=int(g.attrs["n_path"]),
                           intervals=[int(i) for i in g["intervals"][()]] if "intervals" in g else None,
                           v=g["v"][()], w=g["w"][()], values=values, done=g["done"][()].astype(bool))

    def load_complete(self, tag: str) -> Landscape:
        from landscape.io._h5 import read_h5

        return read_h5(self.path)[tag]

    # -- writing ------------------------------------------------------------------
    def rewrite(self, *, drop: Sequence[str] = (), drop_progress: Sequence[str] = (),
                 add: Callable[[Any], None] | None = None) -> None:
        """Copy the file without ``drop`` / ``drop_progress`` groups, let ``add`` write
        into the copy, then atomically replace the file by the copy."""
        import h5py

        tmp = f"{self.path}.tmp-{os.getpid()}"
        try:
            with h5py.File(tmp, "w") as dst:
                if os.path.exists(self.path):
                    with h5py.File(self.path, "r") as src:
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
            _fsync(tmp)
            os.replace(tmp, self.path)
            _fsync(os.path.dirname(os.path.abspath(self.path)))
        except BaseException:
            with contextlib.suppress(OSError):
                os.remove(tmp)
            raise

    def forget(self, tags: Sequence[str]) -> None:
        """Start over: remove these landscapes, finished or not."""
        if os.path.exists(self.path):
            self.rewrite(drop=tags, drop_progress=tags)

    def begin(self, tag: str, fingerprint: Mapping[str, Any], part: Partial) -> None:
        """Record a landscape's definition, with no point done, as one atomic step."""

        def add(fh: Any) -> None:
            g = fh.require_group(PROGRESS).create_group(tag)
            g.attrs["fingerprint"] = json.dumps(dict(fingerprint), sort_keys=True)
            g.attrs["metadata"] = json.dumps(jsonable(part.md), sort_keys=True)
            g.attrs["n_path"] = int(part.n_path)
            # storage allocated now (data given): later writes only overwrite raw values
            g.create_dataset("x", data=np.asarray(part.x, dtype=np.float64))
            g.create_dataset("y", data=np.asarray(part.y, dtype=np.float64))
            g.create_dataset("points", data=np.asarray(part.points, dtype=np.float64))
            if part.intervals is not None:
                g.create_dataset("intervals", data=np.asarray(part.intervals, dtype=np.int64))
            g.create_dataset("v", data=np.asarray(part.v, dtype=np.float32))
            g.create_dataset("w", data=np.asarray(part.w, dtype=np.float32))
            for name, arr in part.values.items():
                g.create_dataset(f"value_{name}", data=np.asarray(arr, dtype=np.float64))
            g.create_dataset("done", data=part.done.astype(np.uint8))

        self.rewrite(drop=[tag], drop_progress=[tag], add=add)

    @contextlib.contextmanager
    def chunks(self, tag: str) -> Iterator[Callable[[int, int, Mapping[str, np.ndarray]], None]]:
        """A writer of finished chunks: values first, flushed, then their ``done`` flags."""
        import h5py

        with h5py.File(self.path, "r+") as fh:
            g = fh[PROGRESS][tag]

            def write(lo: int, hi: int, res: Mapping[str, np.ndarray]) -> None:
                for name, arr in res.items():
                    g[f"value_{name}"][lo:hi] = np.asarray(arr, dtype=np.float64)
                fh.flush()
                g["done"][lo:hi] = 1
                fh.flush()

            yield write

    def finish(self, landscape: Landscape, fingerprint: Mapping[str, Any]) -> None:
        """Replace the progress group of ``landscape.tag`` by its final group."""
        from landscape.io._h5 import write_group

        tag = landscape.tag or "landscape"

        def add(fh: Any) -> None:
            write_group(fh, landscape)
            fh[tag].attrs["fingerprint"] = json.dumps(dict(fingerprint), sort_keys=True)

        self.rewrite(drop=[tag], drop_progress=[tag], add=add)
