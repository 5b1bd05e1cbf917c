"""``landscape export PATH --format vtp|csv|h5|tensorboard``: landscapes (or runs) as files for other tools."""

from __future__ import annotations

import argparse
import sys

import viz
from collector.common import check_directory
from landscape.cli._common import UsageError, safe_name
from landscape.cli._select import select_landscapes

__all__ = ["run_export"]


def run_export(args: argparse.Namespace) -> int:
    if args.format == "tensorboard":
        return _run_tensorboard(args)
    landscapes = select_landscapes(args.path, args.tag)
    folder = args.output or (args.path if args.path.is_dir() else args.path.parent) / "export"
    check_directory("--output", folder, caller="landscape export", hint="name the folder the exported files go to.")
    folder.mkdir(parents=True, exist_ok=True)
    for ls in landscapes:
        if ls.dims > 2 and args.format != "h5":  # VTP and CSV hold lines and planes
            print(f"{ls.tag}: skipped, a grid of {ls.dims} directions (--format h5 exports it)", file=sys.stderr)
            continue
        target = folder / f"{safe_name(ls.tag or 'landscape')}.{args.format}"
        viz.export(ls, target, format=args.format)
        print(target)
    return 0


def _run_tensorboard(args: argparse.Namespace) -> int:
    """Every run under PATH as a TensorBoard run; prints each and the command that shows them."""
    if args.tag is not None:
        raise UsageError("--tag selects one landscape; --format tensorboard converts whole runs (leave --tag out)")
    if not args.path.exists():
        raise UsageError(f"no such file or directory: {str(args.path)!r}")
    runs = viz.export_tensorboard(args.path, args.output)
    for run in runs:
        print(run)
    logdir = args.output or (args.path if args.path.is_dir() else args.path.parent) / "export" / "tensorboard"
    print(f"view with: tensorboard --logdir {logdir}")
    return 0
