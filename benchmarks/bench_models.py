"""Landscape speed on users' networks: our engine against plain inference and the naive loop.

For each model (see ``_models.py``: the ordinary-Module digits MLP, a CIFAR ResNet-20 with
BatchNorm, torchvision's ResNet-18 at 64×64, a transformer-encoder text classifier, a
tiny GPT-2 with dict batches) and each sample count, in one process, alternating:

* ``limit``: plain batched inference of the same model over the same samples, at its
  best batch size (the fastest of n, n/2, n/4, ... down to 8), under
  ``torch.inference_mode``: one "point" is one pass over the samples;
* ``naive``: what users write -- per point, the point's state dict built, loaded with
  ``load_state_dict``, then that same best-batch-size pass;
* ``ours``: ``compute_landscape`` on a grid (random directions, the plan it chooses, or
  ``--plan tune``), end to end (directions, planning, evaluation), in points per second;
* ``naive_at_our_batch``: the naive loop at the samples per batch our plan ran, where
  that is not its best: ``plan="auto"`` chooses them without timing (all the samples,
  within the memory budget), so that the same call gives the same bits; the best batch
  size is a timed choice (``plan="tune"`` makes it).

It prints one JSON line per (model, samples, mode) with the medians and ranges over the
repeats, ``ours/limit``, ``ours/naive``, the plan chosen, and the peak memory of our
call above the process's memory before it (VmHWM, Linux). Run it alone on the machine.

    python benchmarks/bench_models.py --models mlp,resnet20 --samples 512,64 --repeats 3
    python benchmarks/bench_models.py --device cuda --models resnet56 --samples 256,2048
    python benchmarks/bench_models.py --grid 3 --repeats 5     # small landscapes: fixed costs count

``--results`` writes ``benchmarks/results/naive_loop.json`` (``naive_loop_gpu.json`` on a GPU)
and ``plain_inference.json``, the Benchmarks page's tables (``python benchmarks/make_page.py``);
the page's commands::

    python benchmarks/bench_models.py --samples 64 --grid 21,3 --repeats 5 --results
    python benchmarks/bench_models.py --device cuda --samples 512 --grid 11 --results
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time
from typing import Any

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _models import MODELS, workload  # noqa: E402

from landscape import compute_landscape  # noqa: E402
from landscape.engine import collect  # noqa: E402
from landscape.tasks import slice_batch, to_device  # noqa: E402


def _rss_kb(field: str) -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field):
                return int(line.split()[1])
    return 0


def _reset_peak() -> None:
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
    except OSError:
        pass


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _passes(batches: list[Any], n: int, bs: int) -> list[Any]:
    """The samples in batches of ``bs`` (one merged batch is cut in views)."""
    if len(batches) != 1:
        return batches
    return [slice_batch(batches[0], min(n, s + bs), s, size=n) for s in range(0, n, bs)]


def _time_pass(model: torch.nn.Module, forward: Any, batches: list[Any], device: torch.device, reps: int) -> float:
    with torch.inference_mode():
        forward(model, batches[0])
        _sync(device)
        t0 = time.perf_counter()
        for _ in range(reps):
            for b in batches:
                forward(model, b)
        _sync(device)
    return (time.perf_counter() - t0) / reps


def best_batch(model: torch.nn.Module, forward: Any, batches: list[Any], n: int, device: torch.device) -> tuple[int, float]:
    """The fastest batch size for one pass over the samples, and that pass's time."""
    sizes, bs = [], n
    while bs >= 8:
        sizes.append(bs)
        bs //= 2
    timed = []
    for bs in sizes or [n]:
        passes = _passes(batches, n, bs)
        t = _time_pass(model, forward, passes, device, reps=1)
        reps = max(1, min(20, int(0.5 / max(t, 1e-6))))
        timed.append((_time_pass(model, forward, passes, device, reps), bs))
    t, bs = min(timed)
    return bs, t


def naive_points_per_s(model: torch.nn.Module, forward: Any, passes: list[Any], device: torch.device,
                       points: int) -> float:
    centre = {k: v.clone() for k, v in model.state_dict().items()}
    names = [k for k, p in model.named_parameters()]
    g = torch.Generator().manual_seed(1)
    v = {k: torch.randn(centre[k].shape, generator=g).to(device) for k in names}
    w = {k: torch.randn(centre[k].shape, generator=g).to(device) for k in names}
    coords = torch.linspace(-1, 1, points)
    with torch.inference_mode():
        _sync(device)
        t0 = time.perf_counter()
        for i in range(points):
            a, b = float(coords[i]), float(coords[-1 - i])
            state = {k: (c + a * v[k] + b * w[k]) if k in v else c for k, c in centre.items()}
            model.load_state_dict(state)
            for batch in passes:
                forward(model, batch)
        _sync(device)
    model.load_state_dict(centre)
    return points / (time.perf_counter() - t0)


def ours_points_per_s(model: torch.nn.Module, data: Any, task: Any, n: int, grid: int, device_ids: Any,
                      eval_mode: bool, plan: str = "auto") -> tuple[float, dict[str, Any], float]:
    base = _rss_kb("VmRSS")
    _reset_peak()
    t0 = time.perf_counter()
    ls = compute_landscape(model, data=data, task=task, size=grid, num_samples=n, device_ids=device_ids,
                           eval_mode=eval_mode, plan=plan)
    dt = time.perf_counter() - t0
    peak_mb = max(0, _rss_kb("VmHWM") - base) / 1024
    plan = {k: ls.metadata.get(k) for k in ("points_per_call", "batching", "eval_batch", "memory_format", "plan")}
    return grid * grid / dt, plan, peak_mb


def _stats(values: list[float]) -> dict[str, float]:
    return {"median": round(statistics.median(values), 3), "min": round(min(values), 3),
            "max": round(max(values), 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--samples", default="512,64")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--train-mode", action="store_true", help="also measure train-mode statistics (BN models)")
    parser.add_argument("--seconds", type=float, default=4.0, help="target duration of one measurement")
    parser.add_argument("--plan", default="auto", choices=["auto", "tune"],
                        help="our plan: the default (chosen without timing), or tuned (timed candidates)")
    parser.add_argument("--grid", default=None,
                        help="points per side, 3 to 256 (comma-separated for several), the naive loop then timed "
                             "on as many points; default: a grid of about --seconds")
    parser.add_argument("--results", action="store_true",
                        help="write benchmarks/results/naive_loop.json and plain_inference.json")
    args = parser.parse_args()
    grids: list[int | None] = [None]
    if args.grid is not None:
        try:
            grids = [int(g) for g in args.grid.split(",")]
        except ValueError:
            parser.error(f"--grid takes integers, comma-separated; got {args.grid!r}")
        if not all(3 <= g <= 256 for g in grids):
            parser.error(f"--grid must be 3 to 256, got {args.grid}")
    records = []
    device = torch.device(args.device)
    device_ids = [0] if device.type == "cuda" else None
    for name in args.models.split(","):
        for n in (int(s) for s in args.samples.split(",")):
            modes = [True, False] if args.train_mode and name in ("resnet20", "resnet56", "resnet18") else [True]
            for eval_mode, fixed in ((m, g) for m in modes for g in grids):
                model, data, task, forward = workload(name, n)
                model = model.to(device).train(not eval_mode)
                samples = collect(data, n, task, caller="bench")
                host = samples.batches
                dev_batches = [to_device(b, device) for b in host]
                bs, t_pass = best_batch(model, forward, dev_batches, n, device)
                passes = _passes(dev_batches, n, bs)
                target = max(4, int(args.seconds / max(t_pass, 1e-6)))
                grid = min(256, max(3, int(math.sqrt(target))))  # compute_landscape takes 3 to 256
                naive_pts = max(3, min(200, target // 2))
                if fixed is not None:  # the same points both ways, fixed costs included in ours
                    grid, naive_pts = fixed, fixed * fixed
                lim, nai, ours, plans, peaks, same = [], [], [], [], [], []
                for _ in range(args.repeats):
                    lim.append(1.0 / _time_pass(model, forward, passes, device, reps=max(1, naive_pts)))
                    nai.append(naive_points_per_s(model, forward, passes, device, naive_pts))
                    pts, plan, peak = ours_points_per_s(model.cpu(), data, task, n, grid, device_ids, eval_mode,
                                                        args.plan)
                    model.to(device)
                    # the naive loop again at the samples per batch our plan ran (plan="auto" chooses them without
                    # timing anything: all the samples, within the memory budget)
                    ours_bs = int(plan.get("eval_batch") or n)
                    same.append(nai[-1] if ours_bs == bs else
                                naive_points_per_s(model, forward, _passes(dev_batches, n, ours_bs), device,
                                                   naive_pts))
                    ours.append(pts)
                    plans.append(plan)
                    peaks.append(peak)
                ratio_l = [o / m for o, m in zip(ours, lim)]
                ratio_n = [o / m for o, m in zip(ours, nai)]
                ratio_s = [o / m for o, m in zip(ours, same)]
                records.append({
                    "model": name, "samples": n, "mode": "eval" if eval_mode else "train", "device": str(device),
                    "best_batch": bs, "grid": grid, "limit_pts_s": _stats(lim), "naive_pts_s": _stats(nai),
                    "ours_pts_s": _stats(ours), "ours_over_limit": _stats(ratio_l), "ours_over_naive": _stats(ratio_n),
                    "naive_at_our_batch_pts_s": _stats(same), "ours_over_naive_at_our_batch": _stats(ratio_s),
                    "plan": plans[-1], "peak_mb_above": round(statistics.median(peaks), 1),
                    "threads": torch.get_num_threads(), "repeats": args.repeats,
                })
                print(json.dumps(records[-1]), flush=True)
    if args.results:
        _write_results(records, device)


_NAMES = {"mlp": "digits MLP", "resnet20": "CIFAR ResNet-20", "resnet18": "ResNet-18 (64×64 images)",
          "transformer": "2-layer transformer classifier", "gpt2": "tiny GPT-2", "resnet56": "CIFAR ResNet-56",
          "mlp26m": "a 26M-parameter MLP", "vit": "a small ViT"}


def _write_results(records: list[dict[str, Any]], device: torch.device) -> None:
    """The Benchmarks page's result files (benchmarks/_results.py) from this run's records."""
    from _results import stats_row, write

    naive, limit = [], []
    # the README's row: the digits MLP's first plane of 20 or more points per side, on the CPU
    lead = next((r for r in records if r["model"] == "mlp" and r["grid"] >= 20 and device.type == "cpu"), None)
    for r in records:
        what = (f"{r['grid']}×{r['grid']}, {_NAMES.get(r['model'], r['model'])}, {r['samples']} samples"
                + ("" if r["mode"] == "eval" else ", train-mode statistics"))
        headline = f"{r['grid']}×{r['grid']} plane, digits MLP, {r['samples']} samples" if r is lead else None
        naive.append(stats_row(what, r["ours_over_naive"], r["repeats"], headline=headline))
        limit.append(stats_row(what, r["ours_over_limit"], r["repeats"]))
    gpu = device.type == "cuda"
    write("naive_loop_gpu" if gpu else "naive_loop", order=50 if gpu else 40,
          title="The naive loop on a GPU" if gpu else "The naive loop",
          peer="the naive loop (a state dict loaded per point)",
          ratio="speed-up: the loop's time / ours, on the same points", rows=naive, records=records,
          device=str(device),
          notes="The loop users write: per point a state dict built and loaded with `load_state_dict`, then the "
                "forward pass at its fastest batch size, its directions drawn outside its timer; ours end to end. "
                "On a 3×3 grid a landscape's fixed cost counts.")
    if not gpu:
        write("plain_inference", order=60, title="Plain inference", peer="plain batched inference (the limit)",
              ratio="ours in points/s over forward passes/s of the same model and samples at its fastest batch "
                    "size", rows=limit, records=records,
              notes="One forward pass over the samples per point is the most a loop of forwards can do; above 1, "
                    "several points share a layer's work (the MLP) or the convolutions run fused and "
                    "channels-last (the CNNs).")


if __name__ == "__main__":
    main()
