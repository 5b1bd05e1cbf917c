"""``landscape compare RUN_A RUN_B ... --task MODULE:FUNCTION -o OUT``: several runs on one plane."""

from __future__ import annotations

import argparse
import time

from landscape.cli._common import UsageError, describe
from landscape.cli._gen import deferred_task
from landscape.cli._gen_check import split_task
from landscape.engine import tune_malloc
from landscape.generate import compare_runs

__all__ = ["run_compare"]


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
                      device_ids=args.devices, restart=args.restart, plan=args.plan)
    print(describe(ls))
    ev = ls.metadata.get("explained_variance_ratio")
    if ev:
        print(f"plane: PCA of every checkpoint of {len(ls.paths)} runs, explained variance {ev[0]:.1%} and "
              f"{ev[1]:.1%}")
    print(f"centre: {ls.metadata.get('centre_description') or ls.metadata.get('centre_on')}")
    for name, dist in (ls.metadata.get("path_distance") or {}).items():
        print(f"  {name}: {len(dist)} checkpoints, at most {max(dist):.1%} of their distance from the centre off "
              "the plane")
    print(f"Wrote the comparison to {args.output} (summary events and landscapes.h5) in "
          f"{time.perf_counter() - started:.1f} s")
    return 0
