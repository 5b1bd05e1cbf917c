"""``landscape ls BASE_DIR``: the runs under a folder, their landscapes, scalars and final loss.

A run that cannot be read is listed as unreadable (and warned about on stderr); a
damaged file or record of a run is listed under it; the healthy runs are listed as usual.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

import viz
from collector.summary import SummaryReader
from landscape.cli._common import UsageError

__all__ = ["run_ls"]


def run_ls(args: argparse.Namespace) -> int:
    if not args.base_dir.is_dir():
        raise UsageError(f"not a directory: {str(args.base_dir)!r}")
    rows: list[dict[str, Any]] = []
    for run in viz.find_runs(args.base_dir):
        name = os.path.relpath(run, args.base_dir)
        try:
            reader = SummaryReader(run)
        except (OSError, ValueError) as exc:  # one unreadable run does not hide the others
            print(f"landscape ls: warning: skipped {name}: {exc}", file=sys.stderr)
            rows.append({"run": name, "error": str(exc)})
            continue
        scalars = reader.scalars()
        loss = scalars.get("loss/auto")
        rows.append({
            "run": name,
            "landscapes": [tag for _, tag, _ in reader.landscape_messages()],
            "scalars": sorted(scalars),
            "final_loss": float(loss[1][-1]) if loss is not None and len(loss[1]) else None,
            "damaged": [str(i) for i in reader.issues],
        })
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    if not rows:
        print(f"no runs under {args.base_dir}")
        return 0
    for row in rows:
        if "error" in row:
            print(f"{row['run']}\tunreadable: {row['error']}")
            continue
        final = "-" if row["final_loss"] is None else f"{row['final_loss']:.6g}"
        print(f"{row['run']}\tfinal loss {final}\tscalars: {', '.join(row['scalars']) or '-'}")
        for tag in row["landscapes"]:
            print(f"\t{tag}")
        for issue in row["damaged"]:
            print(f"\tdamaged: {issue}")
    return 0
