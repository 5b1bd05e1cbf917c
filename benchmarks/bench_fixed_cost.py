"""A landscape's fixed cost: a 3×3 ``compute_landscape`` in a plain process against nine forward
passes of plain batched inference on the same samples (issue 35 asks for at most 3 ms beyond its
evaluation on the digits MLP, and at most 5 % of a 3×3 landscape of any model).

Each call after the first in the process (the first pays imports and allocations); medians of
``--repeats`` alternating measurements; where the time goes, from timers around the planner's
probe, the digests of the random directions and the engine's construction::

    python benchmarks/bench_fixed_cost.py --models mlp --samples 512,64 --repeats 15
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _models  # noqa: E402

from landscape import compute_landscape  # noqa: E402


def _timed(owner: Any, name: str, into: list[float]) -> Callable[[], None]:
    """Wrap ``owner.name`` to append its wall time to ``into``; returns the undo."""
    f = getattr(owner, name)

    @functools.wraps(f)
    def g(*a: Any, **k: Any) -> Any:
        t = time.perf_counter()
        try:
            return f(*a, **k)
        finally:
            into.append(time.perf_counter() - t)

    setattr(owner, name, g)
    return lambda: setattr(owner, name, f)


def measure(name: str, n: int, repeats: int) -> dict[str, Any]:
    import landscape.engine._engine as engine
    import landscape.engine._planner as planner  # the parts timed: private names, read-only here
    import landscape.io._directions as directions

    model, data, task, plain = _models.workload(name, n)
    model.eval()
    batch = data[0] if isinstance(data, list) else data
    compute_landscape(model, task=task, data=data, size=3, num_samples=n)
    parts: dict[str, list[float]] = {"probe": [], "digests": [], "engines": []}
    undo = [_timed(planner, "first_working_way", parts["probe"]),
            _timed(directions, "_recipe_digests", parts["digests"]),
            _timed(engine.Engine, "__init__", parts["engines"])]
    calls, forwards = [], []
    try:
        for _ in range(repeats):
            t = time.perf_counter()
            compute_landscape(model, task=task, data=data, size=3, num_samples=n)
            calls.append(time.perf_counter() - t)
            with torch.no_grad():
                t = time.perf_counter()
                for _ in range(9):
                    plain(model, batch)
                forwards.append(time.perf_counter() - t)
    finally:
        for u in undo:
            u()
    call, nine = statistics.median(calls), statistics.median(forwards)
    per = {k: round(1e3 * sum(v) / repeats, 2) for k, v in parts.items()}
    return {"model": name, "samples": n, "landscape_3x3_ms": round(1e3 * call, 2),
            "range_ms": [round(1e3 * min(calls), 2), round(1e3 * max(calls), 2)],
            "nine_forwards_ms": round(1e3 * nine, 2), "fixed_ms": round(1e3 * (call - nine), 2),
            "fixed_share": round((call - nine) / call, 3), "of_which_ms": per}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="mlp",
                        help=f"comma-separated, of {','.join(_models.MODELS + _models.MORE_MODELS)}")
    parser.add_argument("--samples", default="512,64")
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()
    for name in args.models.split(","):
        for n in (int(s) for s in args.samples.split(",")):
            print(json.dumps(measure(name, n, args.repeats)), flush=True)


if __name__ == "__main__":
    main()
