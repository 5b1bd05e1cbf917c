"""``landscape ls BASE_DIR``: the runs under a folder, their landscapes, scalars and final loss.

A run is a folder holding a summary file, or a ``landscapes.h5`` (the output folder of a
``landscape gen --output DIR`` that was interrupted before it wrote its summary events).
Its landscapes are those of its summary events and the finished ones of its
``landscapes.h5``; unfinished ones (``/_in_progress/{tag}``) are listed with their
progress, points done of points in all, which the same ``landscape gen`` command resumes.
A ``landscapes.h5`` records the run its landscapes belong to (one run per folder): its summary
directory is listed (``generated_from``), and printed when it is another folder (an ``--output``).
What ``landscape curvature`` measured (its group ``curvature``) is listed per checkpoint.

A run that cannot be read is listed as unreadable (and warned about on stderr); a
damaged file or record of a run is listed under it; the healthy runs are listed as usual.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

import viz
from collector.summary import SummaryReader
from landscape.cli._common import UsageError
from landscape.io import H5_NAME, curvature_summary, curvature_text, read_curvature, read_run, stored_landscapes

__all__ = ["run_ls"]


def _generation_folders(base: Path) -> list[Path]:
    """Folders under ``base`` (itself included) holding a ``landscapes.h5``."""
    found = []
    for root, dirs, files in os.walk(base, onerror=lambda exc: None):  # find_runs warns about unlistable ones
        dirs.sort()
        if H5_NAME in files:
            found.append(Path(root))
    return found


def _h5_row(row: dict[str, Any], folder: Path) -> None:
    """Add ``folder``'s landscapes.h5 to ``row``: its finished landscapes not in the summary events,
    and its unfinished ones with their progress."""
    row.setdefault("landscapes", [])
    row["unfinished"] = []
    row["curvature"] = []
    h5 = folder / H5_NAME
    if not h5.is_file():
        return
    try:
        stored = stored_landscapes(h5)
        record = read_run(h5)
        row["curvature"] = [curvature_summary(rec) for rec in read_curvature(h5).values()]
    except (OSError, KeyError, ValueError) as exc:
        row.setdefault("damaged", []).append(f"{H5_NAME} cannot be read: {exc}")
        return
    row["landscapes"] += [tag for tag in stored.finished if tag not in row["landscapes"]]
    row["unfinished"] = [{"tag": tag, "done": done, "points": total}
                         for tag, (done, total) in stored.unfinished.items()]
    row["generated_from"] = None if record is None else record.get("name")


def _summary_row(run: Path, name: str) -> dict[str, Any]:
    try:
        reader = SummaryReader(run)
    except (OSError, ValueError) as exc:  # one unreadable run does not hide the others
        print(f"landscape ls: warning: skipped {name}: {exc}", file=sys.stderr)
        return {"run": name, "error": str(exc)}
    scalars = reader.scalars()
    loss = scalars.get("loss/auto")
    return {
        "run": name,
        "landscapes": [tag for _, tag, _ in reader.landscape_messages()],
        "scalars": sorted(scalars),
        "final_loss": float(loss[1][-1]) if loss is not None and len(loss[1]) else None,
        "damaged": [str(i) for i in reader.issues],
    }


def run_ls(args: argparse.Namespace) -> int:
    if not args.base_dir.is_dir():
        raise UsageError(f"not a directory: {str(args.base_dir)!r}")
    runs = viz.find_runs(args.base_dir)
    folders = sorted(set(runs) | set(_generation_folders(args.base_dir)))
    rows: list[dict[str, Any]] = []
    for folder in folders:
        name = os.path.relpath(folder, args.base_dir)
        if folder in runs:
            row = _summary_row(folder, name)
        else:  # a generation's output folder without summary events (yet)
            row = {"run": name, "landscapes": [], "scalars": [], "final_loss": None, "damaged": []}
        if "error" not in row:
            _h5_row(row, folder)
        rows.append(row)
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
        for item in row.get("curvature", []):
            print(f"\t{curvature_text(item)}")
        for item in row["unfinished"]:
            print(f"\t{item['tag']}\tunfinished: {item['done']} of {item['points']} points "
                  "(the same landscape gen command resumes it)")
        source = row.get("generated_from")
        if source and source != os.path.abspath(os.path.join(args.base_dir, row["run"])):
            print(f"\tlandscapes of run {source}")
        for issue in row["damaged"]:
            print(f"\tdamaged: {issue}")
    return 0
