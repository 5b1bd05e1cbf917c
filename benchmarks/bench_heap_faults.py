"""The pages the engine's heap room saves: minor page faults of each scenario with the room and without it.

The scenarios are those of tests/landscape/engine/test_heap.py (there they only check what the room is
made of; the faults depend on the machine: the kernel's huge pages, glibc, the load), each run in fresh
processes under glibc's own settings, ``--repeats`` times, alternating with its baseline:

- ``calls``: 200 calls holding three 2 MB activations at once; with the room and without it (``none``);
- ``three_landscapes``: the third of three digits-MLP landscapes in a process; the room kept (``keep``) and
  given back before it (``release``);
- ``logits``: three 81-point landscapes of a language model's head, one point per call (the third);
- ``first_landscape``: the digits MLP's 20x20 plane at 64 samples, seven groups of points; the faults of
  the third to seventh groups;
- ``pieces``: an 8 MiB room made after glibc's mmap threshold has risen (``raised``) and at its start
  (``initial``): the faults of its making against its number of pieces (each costs a page: its header).

``logits`` and ``first_landscape`` take ``LANDSCAPE_MALLOC_TUNING=0`` (no room) as their baseline. One JSON
line per scenario: both series, their medians and the baseline's median over the room's (how many times
fewer pages the room faults in); ``--results`` writes ``benchmarks/results/heap_faults.json``
(``--results-dir`` elsewhere)::

    python benchmarks/bench_heap_faults.py --repeats 5 --results
    python benchmarks/bench_heap_faults.py --repeats 1 --results --results-dir /tmp/smoke     # a smoke run
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
from _results import options, write  # noqa: E402

from tests.landscape.engine.test_heap import (  # noqa: E402  (the scenarios, not copied)
    CALLS,
    LOGITS,
    PIECES,
    THREE_LANDSCAPES,
    _faults_in_a_fresh_process,
)

FIRST_LANDSCAPE = """
import resource, sys, torch
from torch import nn
from landscape import compute_landscape
from landscape.engine import _engine
from landscape.examples import MLP, digits_tensors
torch.manual_seed(0)
x, y = digits_tensors()
net = MLP().eval()
faults, group = [], _engine.Engine._forward_group
def counted(self, a, b):
    f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    try:
        return group(self, a, b)
    finally:
        faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0)
_engine.Engine._forward_group = counted
compute_landscape(net, nn.CrossEntropyLoss(), (x[:64], y[:64]), size=20, num_samples=64)
print(sum(faults[2:]), len(faults))
"""

#: name: (script, (mode, LANDSCAPE_MALLOC_TUNING) with the room, the same for the baseline).
SCENARIOS = {
    "calls": (CALLS, ("room", None), ("none", None)),
    "three_landscapes": (THREE_LANDSCAPES, ("keep", None), ("release", None)),
    "logits": (LOGITS, ("", None), ("", "0")),
    "first_landscape": (FIRST_LANDSCAPE, ("", None), ("", "0")),
}


#: the scenarios on the Benchmarks page: what is counted, and the baseline's name
NAMES = {"calls": ("200 calls holding three 2 MB activations at once", "without the room"),
         "three_landscapes": ("the third of three digits-MLP landscapes in a process", "the room given back before it"),
         "logits": ("the third of three 81-point landscapes of a language model's head, one point per call",
                    "`LANDSCAPE_MALLOC_TUNING=0`"),
         "first_landscape": ("the digits MLP's 20×20 plane at 64 samples, its third to seventh groups of points",
                             "`LANDSCAPE_MALLOC_TUNING=0`"),
         "pieces_raised": ("an 8 MiB room made after glibc's mmap threshold has risen", ""),
         "pieces_initial": ("an 8 MiB room made at the process's start", "")}
COLUMNS = ["baseline", "the baseline's faults", "pieces of the room"]


def _ratio(base: float, room: float) -> float | None:
    return round(base / room, 1) if room else None


def _pages(values: list[int]) -> dict:
    """A value row's figure: the median of ``values`` (pages), its range and the runs."""
    return {"value": f"{statistics.median(values):,.0f}", "unit": "pages", "low": f"{min(values):,}",
            "high": f"{max(values):,}", "runs": len(values)}


def _spread(values: list[int]) -> str:
    lo, hi = min(values), max(values)
    return f"{statistics.median(values):,.0f} pages" + (f" ({lo:,}–{hi:,})" if lo != hi else "")


def write_results(args: argparse.Namespace, records: list[dict]) -> None:
    rows = []
    for r in records:
        what, base = NAMES[r["scenario"]]
        if "faults_room" in r:
            rows.append({"what": what, **_pages(r["faults_room"]),
                         "cells": {COLUMNS[0]: base, COLUMNS[1]: _spread(r["faults_baseline"])}})
        else:
            rows.append({"what": what, **_pages(r["faults"]),
                         "cells": {COLUMNS[2]: f"{statistics.median(r['pieces']):,.0f}"}})
    write("heap_faults", order=111, title="Page faults of the heap room", peer="the same scenarios without it",
          ratio="minor page faults with the room (medians of the repeats)", rows=rows, columns=COLUMNS,
          records=records, folder=args.results_dir,
          notes="Each scenario of `tests/landscape/engine/test_heap.py` in fresh processes under glibc's own "
                "settings, alternating with its baseline; `ru_minflt` counted around what each says. A room's "
                "pieces each fault in one page (its header) where the kernel gives no huge page.")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--only", default="", help="comma-separated scenario names (all by default)")
    options(parser, "heap_faults.json")
    args = parser.parse_args()
    only = {s for s in args.only.split(",") if s}
    records = []
    for name, (script, room, base) in SCENARIOS.items():
        if only and name not in only:
            continue
        with_room, baseline = [], []
        for _ in range(args.repeats):
            with_room.append(_faults_in_a_fresh_process(script, room[0], room[1])[0])
            baseline.append(_faults_in_a_fresh_process(script, base[0], base[1])[0])
        m_room, m_base = statistics.median(with_room), statistics.median(baseline)
        records.append({"scenario": name, "faults_room": with_room, "faults_baseline": baseline,
                        "median_room": m_room, "median_baseline": m_base,
                        "baseline_over_room": _ratio(m_base, m_room)})
        print(json.dumps(records[-1]))
    if not only or "pieces" in only:
        records += _pieces(args.repeats)
    if args.results:
        write_results(args, records)


def _pieces(repeats: int) -> list[dict]:
    from landscape.engine import _heap

    records = []
    for mode, piece in (("raised", _heap.BIG_PIECE_BYTES), ("initial", _heap.PIECE_BYTES)):
        runs = [_faults_in_a_fresh_process(PIECES, mode) for _ in range(repeats)]
        records.append({"scenario": f"pieces_{mode}", "room_bytes": [r[0] for r in runs],
                        "faults": [r[1] for r in runs], "pieces": [r[0] // piece for r in runs],
                        "pages": [r[0] // os.sysconf("SC_PAGE_SIZE") for r in runs],
                        "mmapped": [r[2] for r in runs]})
        print(json.dumps(records[-1]))
    return records


if __name__ == "__main__":
    main()
