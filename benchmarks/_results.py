"""The benchmarks' result files: one JSON file per comparison under ``benchmarks/results/``.

A benchmark run with ``--results`` writes (or replaces) its file; ``python
benchmarks/make_page.py`` then writes docs/benchmarks.md and the README's headline table
from every file, so that the two cannot disagree. A file holds::

    {
      "order": 20,                              # where its section goes on the page
      "title": "loss-landscapes",              # the section's title on the page
      "peer": "loss-landscapes 3.0.6",          # what ours is compared with
      "ratio": "speed-up: their time / ours",   # what the ratio column means
      "command": "python benchmarks/...",       # the command that wrote it
      "environment": {"cpu": ..., "cores": ..., "torch": ..., "python": ..., "date": ...,
                      "note": "how the machine was, where it matters (optional)"},
      "rows": [{"what": "...", "ratio": 1.87, "low": 1.64, "high": 1.89, "runs": 3,
                "headline": "short label for the README (optional)"}],
      "notes": "a sentence or two the page prints under the table (optional)",
      "columns": ["seconds, ours / theirs"],    # more columns of the table (optional)
      "records": [...]                          # the benchmark's own JSON lines (optional)
    }

A row gives either ``ratio`` (with ``low``/``high``, the range over ``runs`` runs) or
``value`` and ``unit`` (an absolute figure, e.g. seconds, or a count such as ``"28/30"``
with the unit ``""``; ``low``/``high``/``runs`` may give its range too). Where no row gives
a ratio, the table's column says "value" and ``ratio`` says what the values are. A row's
``cells`` (``{"seconds, ours / theirs": "0.045 / 0.149"}``) fill the ``columns``, as text.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import sys
from collections.abc import Iterable
from typing import Any

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")


def cpu_model() -> str:
    """The CPU's model name as the kernel reports it (``/proc/cpuinfo``), else the platform's."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def environment(device: str = "cpu") -> dict[str, Any]:
    """The machine and software a result was measured on, and the date."""
    import torch

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    env: dict[str, Any] = {"cpu": cpu_model(), "cores": cores, "torch": torch.__version__,
                           "threads": torch.get_num_threads(), "python": platform.python_version(),
                           "date": datetime.date.today().isoformat()}
    if device.startswith("cuda") and torch.cuda.is_available():
        env["gpu"] = torch.cuda.get_device_name(0)
    return env


def ratio_row(what: str, ratios: Iterable[float], *, headline: str | None = None) -> dict[str, Any]:
    """One table row: the median of ``ratios`` and their range."""
    values = [float(r) for r in ratios]
    row: dict[str, Any] = {"what": what, "ratio": round(statistics.median(values), 3),
                           "low": round(min(values), 3), "high": round(max(values), 3), "runs": len(values)}
    if headline:
        row["headline"] = headline
    return row


def stats_row(what: str, stats: dict[str, float], runs: int, *, headline: str | None = None) -> dict[str, Any]:
    """One table row from a benchmark's ``{"median", "min", "max"}`` summary of ``runs`` values."""
    row: dict[str, Any] = {"what": what, "ratio": stats["median"], "low": stats["min"], "high": stats["max"],
                           "runs": runs}
    if headline:
        row["headline"] = headline
    return row


def options(parser: argparse.ArgumentParser, files: str) -> None:
    """``--results`` (write ``files`` under benchmarks/results/) and ``--results-dir`` (another folder)."""
    parser.add_argument("--results", action="store_true",
                        help=f"write benchmarks/results/{files} (the Benchmarks page's tables)")
    parser.add_argument("--results-dir", default=RESULTS,
                        help="the folder --results writes in (default: benchmarks/results; a smoke run's: a temporary one)")


def write(name: str, *, order: int, title: str, peer: str, ratio: str, rows: list[dict[str, Any]],
          records: list[Any] | None = None, notes: str | None = None, device: str = "cpu",
          path: str | None = None, columns: list[str] | None = None, folder: str = RESULTS) -> str:
    """Write ``{folder}/{name}.json`` (``folder``: benchmarks/results/ by default), or ``path``; the path written."""
    data: dict[str, Any] = {
        "order": order, "title": title, "peer": peer, "ratio": ratio,
        "command": "python " + " ".join([os.path.relpath(sys.argv[0]), *sys.argv[1:]]),
        "environment": environment(device), "rows": rows}
    if columns:
        data["columns"] = columns
    if notes:
        data["notes"] = notes
    if records is not None:
        data["records"] = records
    path = path or os.path.join(folder, f"{name}.json")
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump(data, f, indent=1)
        f.write("\n")
    print(f"results written to {path}", file=sys.stderr)
    return path
