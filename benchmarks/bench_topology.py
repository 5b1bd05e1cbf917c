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

One JSON line per measurement; ``--results`` writes ``benchmarks/results/topology.json`` (the
plane and the grid) and ``landscaper.json`` (side by side), ``--results-dir`` elsewhere::

    python benchmarks/bench_topology.py --size 41 --grid-size 21 --repeats 3 --results
    python benchmarks/bench_topology.py --size 9 --grid-size 5 --repeats 1 \\
        --landscaper-timeout 30 --results --results-dir /tmp/smoke     # a smoke run
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
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
from _results import options, ratio_row, write  # noqa: E402

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


def plane_case(size: int, repeats: int) -> tuple[np.ndarray, list[dict]]:
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
    return np.asarray(ls.z), rows


def grid_case(size: int, root: str) -> tuple[np.ndarray, list[dict]]:
    from bench_kill_resume import _make_run  # the digits MLP's SummaryCollector run and its --task module

    run = _make_run(root)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([root, ROOT, os.environ.get("PYTHONPATH", "")])}
    out = os.path.join(root, "grid")
    gen = [sys.executable, "-m", "landscape", "gen", run, "--task", "benchtask:callback_fn", "--output", out,
           "--view", "grid", "--dims", "3", "--directions", "hessian", "--size", str(size)]
    seconds, peak, printed = _run_measured(gen, root, env)
    records = [{"case": "grid through the command", "size": size, "points": size ** 3, "seconds": round(seconds, 2),
                "peak_rss_mib": peak, "printed": printed.strip().splitlines()}]
    print(json.dumps(records[-1]), flush=True)
    seconds, peak, printed = _run_measured([sys.executable, "-m", "landscape", "topology", out], root, env)
    records.append({"case": "landscape topology", "seconds": round(seconds, 2), "peak_rss_mib": peak,
                    "printed": printed.strip()})
    print(json.dumps(records[-1]), flush=True)
    grid = next(iter(read_h5(os.path.join(out, "landscapes.h5")).values()))
    return np.asarray(grid.z), records


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


def landscaper_case(grids: dict[str, np.ndarray], python: str, timeout: int) -> list[dict]:
    ranges = {name: [np.linspace(-1, 1, n) if name != "two_wells" else np.linspace(-2, 2, n) for n in z.shape]
              for name, z in grids.items()}
    ours = {}
    for name, z in grids.items():
        t0 = time.perf_counter()
        numbers = summary_numbers(z)
        ours[name] = {**numbers, "seconds": time.perf_counter() - t0}
    if not os.path.exists(python):
        print(json.dumps({"case": "landscaper", "skipped": f"no Landscaper venv at {python}", "ours": ours}))
        return []
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "grids.npz")
        arrays = {f"{n}/loss": z for n, z in grids.items()}
        arrays.update({f"{n}/ranges_{k}": r for n, rs in ranges.items() for k, r in enumerate(rs)})
        np.savez(path, **arrays)
        lines = []
        for name, z in grids.items():
            # One process per grid, killed from here: the side's own alarm cannot interrupt a long
            # call into compiled code (its 21^3 contour tree ran on past the alarm).
            try:
                res = subprocess.run([python, os.path.join(ROOT, "benchmarks", "_landscaper_side.py"), path,
                                      "--grid", name, "--timeout", str(timeout)], capture_output=True, text=True,
                                     check=True, timeout=timeout + 30)
                lines += res.stdout.strip().splitlines()
            except subprocess.TimeoutExpired:
                lines.append(json.dumps({"grid": name, "points": int(z.size), "unfinished_after_s": timeout}))
    records = []
    for line in lines:
        theirs = json.loads(line)
        records.append({"case": "landscaper", "grid": theirs["grid"], "points": theirs["points"],
                        "ours": ours[theirs["grid"]], "landscaper": theirs})
        print(json.dumps(records[-1]), flush=True)
    return records


#: the grids' names on the page
GRIDS = {"rosenbrock": "Rosenbrock 10×10 (Landscaper's fixture)", "two_wells": "two wells, 41²",
         "mlp_plane": "digits MLP, random plane {size}²", "mlp_hessian_3d": "digits MLP, Hessian grid {grid_size}³"}


def _smad(minima: int | None, smad: list[float], ours: dict) -> str:
    """``minima; SMAD raw, normalised, weighted``, or how close they are to ours where within 1e-6."""
    diff = max(abs(a - b) / max(abs(b), 1e-300) if b else abs(a) for a, b in zip(smad, ours["smad"]))
    same = "the same" if diff == 0 else f"the same to {diff:.0e}" if diff <= 1e-6 else \
        ", ".join(f"{v:.8g}" for v in smad)
    return same if minima is None else f"{minima}; {same}"


def write_results(args: argparse.Namespace, plane: list[dict], grid: list[dict], side: list[dict]) -> None:
    """``topology.json`` (the plane's share, the grid through the commands) and ``landscaper.json``."""
    def spread(values: list[float], what: str, unit: str, digits: int) -> dict:
        return {"what": what, "value": round(statistics.median(values), digits), "unit": unit,
                "low": round(min(values), digits), "high": round(max(values), digits), "runs": len(values)}

    rows = [spread([r["plane_s"] for r in plane], f"the digits MLP's {args.size}² random plane on all 1,797 "
                   "digits (`compute_landscape`)", "s", 2),
            spread([r["summary_s"] for r in plane], "its topology: `Landscape.topology()`, the summary line "
                   "and the three SMADs", "s", 4),
            spread([100 * r["share"] for r in plane], "the topology's share of the plane's time", "%", 3)]
    if grid:
        n = grid[0]["size"]
        rows += [{"what": f"`landscape gen RUN --view grid --dims 3 --directions hessian --size {n}` "
                          f"({n ** 3:,} points), the whole process", "value": grid[0]["seconds"], "unit": "s",
                  "cells": {"peak resident memory": f"{grid[0]['peak_rss_mib']:,} MiB"}},
                 {"what": "`landscape topology` on it, the whole process", "value": grid[1]["seconds"], "unit": "s",
                  "cells": {"peak resident memory": f"{grid[1]['peak_rss_mib']:,} MiB"}}]
    write("topology", order=73, title="Topology", peer="the landscapes it summarises",
          ratio="seconds (medians of the repeats), the topology's share of the plane's time, and each "
                "command's wall time",
          rows=rows, columns=["peak resident memory"] if grid else None,
          records=[{"case": "plane", "size": args.size, **r} for r in plane] + grid,
          folder=args.results_dir,
          notes="The digits MLP (64-128-128-10) trained ten epochs; the plane and its topology timed one after the "
                "other in one process. The commands each in a process of their own, as a user runs them, on a "
                "`SummaryCollector` run of the same MLP, imports included; the peak is the process's `ru_maxrss`.")
    if not side:
        return
    theirs = next((r["landscaper"] for r in side if "version" in r["landscaper"]), side[0]["landscaper"])
    version = theirs.get("version", "")
    uses = ", ".join(f"{k} {v}" for k, v in theirs.get("uses", {}).items())
    names = {k: v.format(size=args.size, grid_size=args.grid_size) for k, v in GRIDS.items()}
    columns = ["ours: minima; SMAD (raw, normalised, weighted)", "Landscaper, merge tree",
               f"Landscaper {version}, contour tree", "seconds, ours / Landscaper"]
    rows = []
    for rec in sorted(side, key=lambda r: list(GRIDS).index(r["grid"]) if r["grid"] in GRIDS else len(GRIDS)):
        ours, theirs = rec["ours"], rec["landscaper"]
        what = f"{names.get(rec['grid'], rec['grid'])}, {rec['points']:,} points"
        cells = {columns[0]: f"{ours['minima']}; " + ", ".join(f"{v:.8g}" for v in ours["smad"])}
        if "unfinished_after_s" in theirs:
            row = {"what": what, "value": f"unfinished after {theirs['unfinished_after_s']} s", "unit": ""}
        else:
            row = ratio_row(what, [theirs["seconds_contour_tree"] / ours["seconds"]])
            cells[columns[1]] = _smad(theirs["minima"], theirs["smad_merge_tree"], ours)
            cells[columns[2]] = _smad(None, theirs["smad_contour_tree"], ours)
            cells[columns[3]] = f"{ours['seconds']:.3g} / {theirs['seconds_contour_tree']:.3g}"
        rows.append({**row, "cells": cells})
    write("landscaper", order=74, title="Topology against Landscaper",
          peer=f"Landscaper {version}" + (f" ({uses})" if uses else ""),
          ratio="speed-up: Landscaper's time (its `LossLandscape` made, the three SMADs over the contour tree) / "
                "ours (`grid_topology` and the three SMADs), one run each",
          rows=rows, columns=columns, records=side, folder=args.results_dir,
          notes="The same grids through `grid_topology` here and through `benchmarks/_landscaper_side.py` in "
                "Landscaper's own virtual environment, timed from its `LossLandscape`'s creation (nglpy's graph "
                "and topopy's trees included). Its SMAD two ways: over the contour tree (the release's) and over "
                "the sublevel merge tree (its repository's current source, and ours). Axis neighbours, threshold 0.")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=41, help="the plane's points per side")
    parser.add_argument("--grid-size", type=int, default=21, help="the 3-D grid's points per axis")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--skip-grid", action="store_true")
    parser.add_argument("--landscaper-python", default=LANDSCAPER_PYTHON)
    parser.add_argument("--landscaper-timeout", type=int, default=600, help="seconds per grid")
    options(parser, "topology.json and landscaper.json")
    args = parser.parse_args()
    x = np.linspace(-1, 1, 10)
    gx, gy = np.meshgrid(x, x, indexing="ij")
    w = np.linspace(-2, 2, 41)
    wx, wy = np.meshgrid(w, w)
    grids = {"rosenbrock": (1 - gx) ** 2 + 100 * (gy - gx ** 2) ** 2,
             "two_wells": 0.05 * (wx ** 2 + wy ** 2) - np.exp(-((wx - 1) ** 2 + wy ** 2) / 0.3)
             - 0.5 * np.exp(-((wx + 1) ** 2 + wy ** 2) / 0.3)}
    grids["mlp_plane"], plane = plane_case(args.size, args.repeats)
    grid: list[dict] = []
    if not args.skip_grid:
        with tempfile.TemporaryDirectory() as root:
            grids["mlp_hessian_3d"], grid = grid_case(args.grid_size, root)
    side = landscaper_case(grids, args.landscaper_python, args.landscaper_timeout)
    if args.results:
        write_results(args, plane, grid, side)


if __name__ == "__main__":
    main()
