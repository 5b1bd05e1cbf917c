"""``landscape export PATH --format vtp|csv|h5``: landscapes as files for other tools."""

from __future__ import annotations

import argparse

import viz
from collector.common import check_directory
from landscape.cli._common import safe_name
from landscape.cli._plot import select_landscapes

__all__ = ["run_export"]


def run_export(args: argparse.Namespace) -> int:
    landscapes = select_landscapes(args.path, args.tag)
    folder = args.output or (args.path if args.path.is_dir() else args.path.parent) / "export"
    check_directory("--output", folder, caller="landscape export", hint="name the folder the exported files go to.")
    folder.mkdir(parents=True, exist_ok=True)
    for ls in landscapes:
        target = folder / f"{safe_name(ls.tag or 'landscape')}.{args.format}"
        viz.export(ls, target, format=args.format)
        print(target)
    return 0
