"""``landscape report RUN... [-o report.html]``: runs as one self-contained interactive HTML file."""

from __future__ import annotations

import argparse
from pathlib import Path

import viz
from landscape.cli._common import UsageError

__all__ = ["run_report"]


def run_report(args: argparse.Namespace) -> int:
    """Write the report and print its path (and how to open it)."""
    missing = [str(r) for r in args.runs if not r.exists()]
    if missing:
        raise UsageError(f"no such file or directory: {', '.join(repr(m) for m in missing)}")
    first: Path = args.runs[0]
    output = args.output or (first if first.is_dir() else first.parent) / "report.html"
    path = viz.report(args.runs, output, title=args.title)
    print(path)
    print(f"open in a browser (works offline): {path.resolve().as_uri()}")
    return 0
