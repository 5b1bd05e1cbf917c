"""Does the engine's heap room (landscape/engine/_heap.py) earn its place? With it against without.

The room keeps the activations of a landscape's calls in the heap of the caller's process
(a plain Python process: the library leaves glibc's settings alone there), and keeps it
between landscapes. This script times the same landscapes in fresh processes with the room
(the default) and without it (``LANDSCAPE_MALLOC_TUNING=0``, which makes no room and changes
no glibc setting either), alternating, ``--pairs`` pairs per model:

* each process builds the model and its samples (``_models.workload``), then computes
  ``--landscapes`` random planes of ``--grid`` points per side in a row with
  ``compute_landscape`` (seeds 0, 1, ...): the first is the process's first landscape, the
  others are "later" ones (where a kept room would be found again);
* it reports the first landscape's points per second, the median of the later ones', and
  the minor page faults of each (``ru_minflt``);
* the parent prints one JSON line per process, then per model the medians and ranges of
  both settings and the ratio with / without (above 1: the room is faster), for the first
  landscape and for the later ones.

Models (``--models``): the digits MLP (``mlp``), the zoo's ResNet-18 at 64×64
(``resnet18``), the tiny GPT-2 (``gpt2``, needs ``transformers``) and a small ViT built from
``torch.nn`` (``vit``). Run it alone on the machine::

    python benchmarks/bench_heap.py --pairs 5 --results
    python benchmarks/bench_heap.py --models mlp --samples 64 --grid 40 --pairs 5

A smoke run (seconds, proves the script works, measures nothing)::

    python benchmarks/bench_heap.py --pairs 1 --grid 3 --landscapes 2 --samples 8
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = ("mlp", "resnet18", "gpt2", "vit")
#: samples and grid side per model: a landscape of a few seconds on a 2-core CPU
DEFAULTS = {"mlp": (512, 20), "resnet18": (64, 5), "gpt2": (64, 9), "vit": (128, 7)}
#: each model's name on the page
NAMES = {"mlp": "digits MLP", "resnet18": "ResNet-18", "gpt2": "tiny GPT-2", "vit": "ViT at CIFAR scale"}
SETTINGS = {"with room": {}, "without room": {"LANDSCAPE_MALLOC_TUNING": "0"}}


def child(model: str, samples: int, grid: int, landscapes: int) -> dict:
    """In a fresh process: ``landscapes`` landscapes in a row, each timed, with their page faults."""
    import torch

    sys.path.insert(0, HERE)
    from _models import workload

    from landscape import compute_landscape
    from landscape.engine import kept_bytes

    net, data, task, _ = workload(model, samples)
    net.eval()
    batches = data if isinstance(data, list) else [data]
    out = []
    for k in range(landscapes):
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        t0 = time.perf_counter()
        compute_landscape(net, data=batches, task=task, size=grid, num_samples=samples, seed=k)
        seconds = time.perf_counter() - t0
        out.append({"points_s": grid * grid / seconds, "seconds": seconds,
                    "faults": resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults})
    return {"model": model, "samples": samples, "grid": grid, "threads": torch.get_num_threads(),
            "kept_bytes": kept_bytes(), "first": out[0], "later": out[1:]}


def _run(model: str, setting: str, args: argparse.Namespace, samples: int, grid: int) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("LANDSCAPE_MALLOC_TUNING", "GLIBC_TUNABLES")}
    env.update(SETTINGS[setting])
    cmd = [sys.executable, os.path.abspath(__file__), "--child", model, "--samples", str(samples), "--grid", str(grid),
           "--landscapes", str(args.landscapes)]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
    row = json.loads(done.stdout.strip().splitlines()[-1])
    row["setting"] = setting
    return row


def _stats(values: list[float]) -> dict:
    return {"median": round(statistics.median(values), 2), "min": round(min(values), 2),
            "max": round(max(values), 2)}


def summary(model: str, rows: list[dict]) -> dict:
    """Medians and ranges of both settings, and the ratios with / without (first and later landscapes)."""
    out: dict = {"model": model, "pairs": len(rows) // 2}
    by = {s: [r for r in rows if r["setting"] == s] for s in SETTINGS}
    for s, rs in by.items():
        out[s] = {"first_points_s": _stats([r["first"]["points_s"] for r in rs]),
                  "first_faults": _stats([r["first"]["faults"] for r in rs])}
        if rs and rs[0]["later"]:
            out[s]["later_points_s"] = _stats([statistics.median(x["points_s"] for x in r["later"]) for r in rs])
            out[s]["later_faults"] = _stats([statistics.median(x["faults"] for x in r["later"]) for r in rs])
    pairs = list(zip(by["with room"], by["without room"]))
    out["ratio_first"] = [round(a["first"]["points_s"] / b["first"]["points_s"], 3) for a, b in pairs]
    if pairs and pairs[0][0]["later"]:
        out["ratio_later"] = [round(statistics.median(x["points_s"] for x in a["later"])
                                    / statistics.median(x["points_s"] for x in b["later"]), 3) for a, b in pairs]
    for key in ("ratio_first", "ratio_later"):
        if key in out:
            out[key + "_median"] = round(statistics.median(out[key]), 3)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=",".join(MODELS), help=f"comma-separated, of {','.join(MODELS)}")
    ap.add_argument("--pairs", type=int, default=5, help="alternating pairs of fresh processes per model")
    ap.add_argument("--landscapes", type=int, default=3, help="landscapes per process: the first and later ones")
    ap.add_argument("--samples", type=int, default=None, help="samples per landscape (default: per model)")
    ap.add_argument("--grid", type=int, default=None, help="points per side (default: per model)")
    ap.add_argument("--results", nargs="?", const="", default=None,
                    help="write benchmarks/results/heap.json (or the path given)")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.landscapes < 1 or args.pairs < 1:
        ap.error("--pairs and --landscapes must be at least 1")
    if args.child:
        print(json.dumps(child(args.child, args.samples, args.grid, args.landscapes)))
        return
    summaries, records = [], []
    for model in args.models.split(","):
        if model not in DEFAULTS:
            ap.error(f"--models: unknown model {model!r}; choose from {', '.join(MODELS)}")
        samples = args.samples or DEFAULTS[model][0]
        grid = args.grid or DEFAULTS[model][1]
        rows = []
        for pair in range(args.pairs):
            # alternate which setting runs first, so that a drift of the machine falls on both
            order = list(SETTINGS) if pair % 2 == 0 else list(SETTINGS)[::-1]
            for setting in order:
                row = _run(model, setting, args, samples, grid)
                rows.append(row)
                print(json.dumps(row), flush=True)
        summaries.append(summary(model, rows))
        records += rows
        print(json.dumps({"summary": True, **summaries[-1]}), flush=True)
    if args.results is not None:
        sys.path.insert(0, HERE)
        from _results import ratio_row, write

        table = []
        for s in summaries:
            samples, grid = args.samples or DEFAULTS[s["model"]][0], args.grid or DEFAULTS[s["model"]][1]
            name = f"{NAMES[s['model']]} ({samples} samples, {grid}² plane)"
            table.append(ratio_row(f"{name}, first landscape in a fresh process", s["ratio_first"]))
            if "ratio_later" in s:
                table.append(ratio_row(f"{name}, later landscapes", s["ratio_later"]))
        write("heap", order=110, title="The engine's heap room", peer="the same landscapes without it",
              ratio="speed-up with the heap room over without it (`LANDSCAPE_MALLOC_TUNING=0`), plain process",
              rows=table, records=records, path=args.results or None,
              notes="Alternating fresh processes; random planes of each model, the first landscape of a "
                    "process and the later ones timed apart.")


if __name__ == "__main__":
    main()
