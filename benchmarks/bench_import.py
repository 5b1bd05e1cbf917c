"""What ``import collector`` costs a fresh process beyond ``import torch`` (target: at most 0.5 s).

Fresh interpreters alternate: ``import torch`` alone, then ``import collector`` with
``collector.SummaryCollector`` and ``collector.Model`` accessed (the names load on first
use), ``--repeats`` times each. Each child times its own imports (the interpreter's
start-up is the same for both and left out), in wall-clock seconds (``time.perf_counter``)
and in CPU seconds of the process (``time.process_time``: on a shared machine the wall
clock also counts the time other processes held the cores). One JSON line reports each
series' medians and ranges, and the medians of the pairs' differences (a collector
process minus the torch process just before it), which follow the machine's drift less::

    python benchmarks/bench_import.py --repeats 9

``--path DIR`` puts ``DIR`` first on the children's ``sys.path``: a copy of ``collector``
there (another commit's, e.g. ``git archive HEAD collector | tar -x -C DIR``) is timed
instead of this checkout's.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_TIMED = ("import time; t, c = time.perf_counter(), time.process_time(); {}; "
          "print(time.perf_counter() - t, time.process_time() - c)")
TORCH = _TIMED.format("import torch")
COLLECTOR = _TIMED.format("import collector; collector.SummaryCollector; collector.Model")


WHERE = "import collector; print(collector.__file__)"


def _run(code: str, path: str) -> str:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (path, ROOT) if p)}
    # from the root folder: ``-c`` puts the working folder first on sys.path, before ``path``
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True,
                          cwd=os.path.abspath(os.sep)).stdout


def _child(code: str, path: str) -> tuple[float, float]:
    """(wall, CPU) seconds of the child's imports."""
    wall, cpu = _run(code, path).strip().splitlines()[-1].split()
    return float(wall), float(cpu)


def _series(name: str, values: list[float]) -> dict[str, object]:
    return {f"{name}_s": round(statistics.median(values), 3),
            f"{name}_range_s": [round(min(values), 3), round(max(values), 3)]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--path", default="", help="a folder holding the collector package to time instead")
    args = parser.parse_args()
    runs: dict[str, list[tuple[float, float]]] = {"torch": [], "collector": []}
    for _ in range(args.repeats):
        runs["torch"].append(_child(TORCH, args.path))
        runs["collector"].append(_child(COLLECTOR, args.path))
    out: dict[str, object] = {"repeats": args.repeats, "collector": _run(WHERE, args.path).strip()}
    for i, clock in enumerate(("wall", "cpu")):
        for name in ("torch", "collector"):
            out.update(_series(f"{clock}_import_{name}", [r[i] for r in runs[name]]))
        out.update(_series(f"{clock}_beyond_torch_pairs", [c[i] - t[i] for t, c in zip(runs["torch"],
                                                                                       runs["collector"])]))
    print(json.dumps(out))


if __name__ == "__main__":
    main()
