"""``landscape compare RUN_A RUN_B ... --task MODULE:FUNCTION -o OUT``: several runs on one plane."""

from __future__ import annotations

import argparse
import time
from typing import Any

from landscape.cli._common import UsageError, describe
from landscape.cli._gen import deferred_task
from landscape.cli._gen_check import split_task
from landscape.engine import tune_malloc
from landscape.generate import compare_runs
from landscape.result import Landscape

__all__ = ["run_compare", "plane_report"]


def run_compare(args: argparse.Namespace) -> int:
    """The runs' shared (PCA) or random plane into ``--output``, with each run's path and its
    distance from the plane reported."""
    started = time.perf_counter()
    split_task(args.task)
    for run in args.runs:
        if not (run / "ckpt_dir").is_dir():
            raise UsageError(f"RUN {str(run)!r} has no ckpt_dir/: pass SummaryCollector directories")
    if args.output.exists() and not args.output.is_dir():
        raise UsageError(f"--output {str(args.output)!r} is a file; pass a folder")
    tune_malloc(owned=True)  # the command's process is ours: see landscape/engine/_malloc.py
    ls = compare_runs([str(r) for r in args.runs], deferred_task(args.task), str(args.output),
                      directions=args.directions, centre=args.centre, size=args.size or 40,
                      num_samples=args.num_samples, normalization=args.normalization, seed=args.seed,
                      device_ids=args.devices, restart=args.restart, plan=args.plan,
                      pca_method=getattr(args, "pca_method", "uncentred"))
    print(describe(ls))
    for line in plane_report(ls):
        print(line)
    print(f"Wrote the comparison to {args.output} (summary events and landscapes.h5) in "
          f"{time.perf_counter() - started:.1f} s")
    return 0


def plane_report(ls: Landscape) -> list[str]:
    """What the drawn plane holds, in words: the share of the runs' movement, each checkpoint's
    distance off it (the largest named), the PCA's explained variance before normalization."""
    md = ls.metadata
    lines = []
    kind = "PCA" if md.get("decomposition") == "PCA" else str(md.get("decomposition") or "").lower()
    what = (f"the {md.get('pca_method')} PCA of every checkpoint of {len(ls.paths)} runs" if kind == "PCA" else
            f"a {kind} plane")
    lines.append(f"plane: {what}, normalization {md.get('normalization')!r}")
    lines.append(f"centre: {md.get('centre_description') or md.get('centre_on')}")
    share = md.get("movement_in_plane")
    if share is not None:
        lines.append(f"in the drawn plane: {100 * share:.4f} % of the runs' movement (squared distances)")
    ev = md.get("explained_variance_ratio")
    if ev:
        lines.append(f"PCA explained variance (before normalization): {100 * ev[0]:.1f} % and {100 * ev[1]:.1f} %")
    distances = md.get("path_distance") or {}
    if distances:
        lines.append("off the plane, in % of each checkpoint's distance from the centre:")
    unit = md.get("unit") or "checkpoint"
    largest: tuple[float, str, Any] | None = None
    for name, dist in distances.items():
        path = ls.paths.get(name)
        numbers = list(path.intervals) if path is not None and len(path.intervals) == len(dist) else \
            list(range(1, len(dist) + 1))
        lines.append(f"  {name} ({unit}s {numbers[0]}-{numbers[-1]}): " + " ".join(f"{100 * d:.0f}" for d in dist))
        for d, k in zip(dist, numbers):
            if largest is None or d > largest[0]:
                largest = (d, name, k)
    if largest is not None:
        lines.append(f"  largest: {100 * largest[0]:.1f} % (run {largest[1]}, {unit} {largest[2]})")
    return lines
