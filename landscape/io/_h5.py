"""``landscapes.h5``: one group per tag, Li et al.'s dataset names (private)."""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np

from landscape.result._landscape import Landscape, LossPath

__all__: list[str] = []
_NOT_METADATA = ("fingerprint",)


def write_group(fh: Any, ls: Landscape) -> None:
    """Write ``ls`` as the group ``/{tag}`` of the open HDF5 file ``fh``."""
    tag = ls.tag or "landscape"
    g = fh.create_group(tag)
    g.create_dataset("xcoordinates", data=np.asarray(ls.x, dtype=np.float64))
    g.create_dataset("ycoordinates", data=np.asarray(ls.y, dtype=np.float64))
    g.create_dataset("train_loss", data=np.asarray(ls.z, dtype=np.float64))
    g.create_dataset("convergence_point", data=np.asarray(ls.convergence_point, dtype=np.float64))
    for name, surf in ls.surfaces.items():
        g.create_dataset(f"surface_{name}", data=np.asarray(surf, dtype=np.float64))
    if ls.path is not None:
        p = g.create_group("path")
        p.create_dataset("x", data=np.asarray(ls.path.x, dtype=np.float64))
        p.create_dataset("y", data=np.asarray(ls.path.y, dtype=np.float64))
        p.create_dataset("z", data=np.asarray(ls.path.z, dtype=np.float64))
        p.create_dataset("intervals", data=np.asarray(ls.path.intervals, dtype=np.int64))
    for key, val in ls.metadata.items():
        if val is None:
            continue
        if isinstance(val, (list, tuple)) and any(isinstance(v, str) for v in val):
            g.attrs[key] = json.dumps(list(val))
        elif isinstance(val, (list, tuple, np.ndarray)):
            g.attrs[key] = np.asarray(val)
        elif isinstance(val, dict):
            g.attrs[key] = json.dumps(val)
        else:
            g.attrs[key] = val


def write_h5(path: str | os.PathLike, landscapes: list[Landscape]) -> None:
    """Write (or replace) one group per landscape tag in the HDF5 file ``path``.

    The file is replaced atomically (a copy written, then renamed): a crash leaves the old
    file or the new one, never a damaged one.
    """
    from landscape.io._store import Store

    tags = [ls.tag or "landscape" for ls in landscapes]

    def add(fh: Any) -> None:
        for ls in landscapes:
            write_group(fh, ls)

    Store(path).rewrite(drop=tags, drop_progress=tags, add=add)


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


def read_h5(path: str | os.PathLike) -> dict[str, Landscape]:
    """Every landscape of ``path`` by tag."""
    import h5py

    out = {}
    with h5py.File(path, "r") as fh:
        for tag, g in fh.items():
            if tag.startswith("_") or "train_loss" not in g:  # unfinished landscapes (_in_progress)
                continue
            path_obj = None
            if "path" in g:
                p = g["path"]
                path_obj = LossPath(p["x"][()], p["y"][()], p["z"][()], [int(i) for i in p["intervals"][()]])
            md = {k: _attr(v) for k, v in g.attrs.items() if k not in _NOT_METADATA}
            surfaces = {k[len("surface_"):]: g[k][()] for k in g if k.startswith("surface_")}
            cp = g["convergence_point"][()]
            out[tag] = Landscape(x=g["xcoordinates"][()], y=g["ycoordinates"][()], z=g["train_loss"][()],
                                 path=path_obj, convergence_point=tuple(float(c) for c in cp),
                                 metadata=md, surfaces=surfaces, tag=tag)
    return out
