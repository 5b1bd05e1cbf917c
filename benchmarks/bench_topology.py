"""The topology's cost beside the landscapes it summarises, an n-D Hessian grid through the command,
and Landscaper side by side.

* ``plane``: the digits MLP (64-128-128-10, ten epochs) and its ``--size``² random plane on all
  1,797 digits (``compute_landscape``); then its summary (``Landscape.topology()``, the one-line
  summary and the three SMADs). ``share`` = summary time / plane time (median of ``--repeats``).
* ``grid``: a SummaryCollector run of the same MLP (benchmarks/bench_kill_resume.py's), then
  ``landscape gen RUN --view grid --dims 3 --directions hessian --size N`` and ``landscape
  topology`` on it, each in its own process as a user runs it: wall time and peak resident
  memory (``wait4``'s ``ru_maxrss``).
* ``landscaper``: the same grids (Landscaper's Rosenbrock fixture, the two wells, the MLP's plane,
  its 3-D grid) through ``grid_topology`` here and, in Landscaper's own venv
  (``--landscaper-python``, Python 3.11, numpy < 2), through ``benchmarks/_landscaper_side.py``:
  minima, SMAD (raw, normalised, weighted) and seconds, side by side.

One JSON line per measurement::

    python benchmarks/bench_topology.py --size 41 --grid-size 21 --repeats 3
    python benchmarks/bench_topology.py --size 9 --grid-size 5 --repeats 1     # a smoke run
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch
from torch import nn

from landscape import compute_landscape, read_h5
from landscape.examples import MLP, digits_tensors, train_epoch
from landscape.topology import grid_topology

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LANDSCAPER_PYTHON = "/work/venvs/landscaper/bin/python"


def trained() -> tuple[nn.Module, torch.Tensor, torch.Tensor]:
    torch.manual_seed(0)
    net = MLP()
    x, y = digits_tensors()
    opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
    gen = torch.Generator().manual_seed(0)
    for _ in range(10):
        train_epoch(net, opt, x, y, gen)
    return net, x, y


def summary_numbers(z: np.ndarray) -> dict:
    topo = grid_topology(z)
    return {"minima": len(topo.minima), "smad": [topo.smad(), topo.smad(normalize=True),
                                                  topo.smad(normalize=True, weighted=True)]}


def plane_case(size: int, repeats: int) -> np.ndarray:
    net, x, y = trained()
    rows = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        ls = compute_landscape(net, nn.CrossEntropyLoss(), (x, y), size=size, num_samples=None)
        plane_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        topo = ls.topology()
        text = topo.summary()
        topo.smad(normalize=True, weighted=True)
        summary_s = time.perf_counter() - t0
        rows.append({"plane_s": plane_s, "summary_s": summary_s, "share": summary_s / plane_s})
        print(json.dumps({"case": "plane", "size": size, **{k: round(v, 5) for k, v in rows[-1].items()}}),
              flush=True)
    print(json.dumps({"case": "plane", "size": size, "summary": text,
                      "median_share": round(statistics.median(r["share"] for r in rows), 5),
                      "median_summary_s": round(statistics.median(r["summary_s"] for r in rows), 5),
                      "median_plane_s": round(statistics.median(r["plane_s"] for r in rows), 3)}), flush=True)
    return np.asarray(ls.z)


def grid_case(size: int, root: str) -> np.ndarray:
    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    from bench_kill_resume import _make_run  # the digits MLP's SummaryCollector run and its --task module

    run = _make_run(root)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([root, ROOT, os.environ.get("PYTHONPATH", "")])}
    out = os.path.join(root, "grid")
    gen = [sys.executable, "-m", "landscape", "gen", run, "--task", "benchtask:callback_fn", "--output", out,
           "--view", "grid", "--dims", "3", "--directions", "hessian", "--size", str(size)]
    seconds, peak, printed = _run_measured(gen, root, env)
    print(json.dumps({"case": "grid through the command", "points": size ** 3, "seconds": round(seconds, 2),
                      "peak_rss_mib": peak, "printed": printed.strip().splitlines()}), flush=True)
    seconds, peak, printed = _run_measured([sys.executable, "-m", "landscape", "topology", out], root, env)
    print(json.dumps({"case": "landscape topology", "seconds": round(seconds, 2), "peak_rss_mib": peak,
                      "printed": printed.strip()}), flush=True)
    grid = next(iter(read_h5(os.path.join(out, "landscapes.h5")).values()))
    return np.asarray(grid.z)


def _run_measured(cmd: list[str], cwd: str, env: dict) -> tuple[float, int, str]:
    """Wall seconds, peak resident memory (MiB, the process's own ``ru_maxrss`` from ``wait4``) and
    standard output of ``cmd``."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=out, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if proc.returncode:
            raise RuntimeError(f"{' '.join(cmd)} failed:\n{err.read()}")
        return seconds, usage.ru_maxrss // 1024, out.read()


def landscaper_case(grids: dict[str, np.ndarray], python: str, timeout: int) -> None:
    ranges = {name: [np.linspace(-1, 1, n) if name != "two_wells" else np.linspace(-2, 2, n) for n in z.shape]
              for name, z in grids.items()}
    ours = {}
    for name, z in grids.items():
        t0 = time.perf_counter()
        numbers = summary_numbers(z)
        ours[name] = {**numbers, "seconds": round(time.perf_counter() - t0, 4)}
    if not os.path.exists(python):
        print(json.dumps({"case": "landscaper", "skipped": f"no Landscaper venv at {python}", "ours": ours}))
        return
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "grids.npz")
        arrays = {f"{n}/loss": z for n, z in grids.items()}
        arrays.update({f"{n}/ranges_{k}": r for n, rs in ranges.items() for k, r in enumerate(rs)})
        np.savez(path, **arrays)
        res = subprocess.run([python, os.path.join(ROOT, "benchmarks", "_landscaper_side.py"), path,
                              "--timeout", str(timeout)], capture_output=True, text=True, check=True)
    for line in res.stdout.strip().splitlines():
        theirs = json.loads(line)
        print(json.dumps({"case": "landscaper", "grid": theirs["grid"], "points": theirs["points"],
                          "ours": ours[theirs["grid"]], "landscaper": theirs}), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=41, help="the plane's points per side")
    parser.add_argument("--grid-size", type=int, default=21, help="the 3-D grid's points per axis")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--skip-grid", action="store_true")
    parser.add_argument("--landscaper-python", default=LANDSCAPER_PYTHON)
    parser.add_argument("--landscaper-timeout", type=int, default=600, help="seconds per grid")
    args = parser.parse_args()
    x = np.linspace(-1, 1, 10)
    gx, gy = np.meshgrid(x, x, indexing="ij")
    w = np.linspace(-2, 2, 41)
    wx, wy = np.meshgrid(w, w)
    grids = {"rosenbrock": (1 - gx) ** 2 + 100 * (gy - gx ** 2) ** 2,
             "two_wells": 0.05 * (wx ** 2 + wy ** 2) - np.exp(-((wx - 1) ** 2 + wy ** 2) / 0.3)
             - 0.5 * np.exp(-((wx + 1) ** 2 + wy ** 2) / 0.3)}
    grids["mlp_plane"] = plane_case(args.size, args.repeats)
    if not args.skip_grid:
        with tempfile.TemporaryDirectory() as root:
            grids["mlp_hessian_3d"] = grid_case(args.grid_size, root)
    landscaper_case(grids, args.landscaper_python, args.landscaper_timeout)


if __name__ == "__main__":
    main()
