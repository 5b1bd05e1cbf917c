"""Landscaper's numbers and times on grids saved by bench_topology.py (run in Landscaper's own venv).

    /work/venvs/landscaper/bin/python benchmarks/_landscaper_side.py GRIDS.npz [--timeout 600]

For each grid ``NAME`` of the file (``NAME/loss`` and ``NAME/ranges_k``), ``LossLandscape(loss,
ranges)`` and, timed from the object's creation (nglpy's graph and topopy's trees included):
``smad()``, ``smad(normalize=True)`` and ``smad(normalize=True, weighted=True)`` as PyPI's 1.3.1
computes them (over the contour tree), the same over the sublevel merge tree (the repository's
current ``smad``: ``get_contour_tree`` answered by ``get_sublevel_tree``), and the merge tree's
leaves (minima). One JSON line per grid, with the versions of Landscaper and of what it computes with;
a grid not done within ``--timeout`` seconds says so.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import signal
import time

import numpy as np


class _Late(Exception):
    pass


def _alarm(signum, frame):  # noqa: ARG001 - a signal handler's signature
    raise _Late


def _numbers(loss: np.ndarray, ranges: list[np.ndarray]) -> dict:
    from landscaper import LossLandscape

    t0 = time.perf_counter()
    ls = LossLandscape(loss, ranges)
    contour = [float(ls.smad()), float(ls.smad(normalize=True)), float(ls.smad(normalize=True, weighted=True))]
    t_contour = time.perf_counter() - t0
    t1 = time.perf_counter()
    ls.get_contour_tree = ls.get_sublevel_tree  # the repository's current smad: the sublevel merge tree
    merge = [float(ls.smad()), float(ls.smad(normalize=True)), float(ls.smad(normalize=True, weighted=True))]
    minima = len(ls.get_sublevel_tree().leaves)
    return {"smad_contour_tree": contour, "smad_merge_tree": merge, "minima": minima,
            "seconds_contour_tree": round(t_contour, 3), "seconds_merge_tree": round(time.perf_counter() - t1, 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("grids")
    parser.add_argument("--timeout", type=int, default=600)
    parser.add_argument("--grid", help="only this grid (all by default)")
    args = parser.parse_args()
    data = np.load(args.grids)
    names = [args.grid] if args.grid else sorted({k.split("/")[0] for k in data.files})
    version = importlib.metadata.version("landscaper")
    uses = {name: importlib.metadata.version(name) for name in ("numpy", "networkx", "topopy", "nglpy")}
    signal.signal(signal.SIGALRM, _alarm)
    for name in names:
        loss = data[f"{name}/loss"]
        ranges = [data[f"{name}/ranges_{k}"] for k in range(loss.ndim)]
        signal.alarm(args.timeout)
        try:
            row = {"grid": name, "points": int(loss.size), "version": version, "uses": uses, **_numbers(loss, ranges)}
        except _Late:
            row = {"grid": name, "points": int(loss.size), "version": version, "uses": uses, "unfinished_after_s": args.timeout}
        finally:
            signal.alarm(0)
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
