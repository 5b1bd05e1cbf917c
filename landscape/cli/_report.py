"""``landscape report RUN... [-o report.html] [--log auto|on|off] [--levels N] [--paths relative|absolute]``:
runs as one self-contained interactive HTML file."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Literal

import viz
from landscape.cli._common import UsageError

__all__ = ["run_report"]


def run_report(args: argparse.Namespace) -> int:
    """Write the report and print its path (and how to open it)."""
    missing = [str(r) for r in args.runs if not r.exists()]
    if missing:
        raise UsageError(f"no such file or directory: {', '.join(repr(m) for m in missing)}")
    if args.levels < 2:
        raise UsageError(f"--levels must be 2 or more (the contour levels of the contour views); got {args.levels}")
    first: Path = args.runs[0]
    output = args.output or (first if first.is_dir() else first.parent) / "report.html"
    log: bool | Literal["auto"] = "auto" if args.log == "auto" else args.log == "on"
    path = viz.report(args.runs, output, title=args.title, log=log, levels=args.levels, paths=args.paths)
    print(path)
    print(f"open in a browser (works offline): {path.resolve().as_uri()}")
    return 0
