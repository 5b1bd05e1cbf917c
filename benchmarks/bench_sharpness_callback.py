"""SharpnessCallback's overhead: training steps per second with and without it.

The digits MLP (64-128-128-10, scikit-learn's digits / 16, batch 64, Adam lr 1e-3) trained
by :class:`collector.Model` for ``--epochs`` epochs (28 steps each) with a
:class:`SummaryCollector` (``collect_freq=10``) in both series; the second adds
``SharpnessCallback(every=50, data=<the first 512 digits>)`` at its defaults (float32
products, ``tol=1e-4``, the preconditioned sharpness too: Adam). The series alternate in one
process (without, with, without, ...); each is reported with its median and range, the
ratio of the medians, the seconds per measurement (``SharpnessCallback.history``) and the
Lanczos iterations it took, as one JSON line::

    python benchmarks/bench_sharpness_callback.py --repeats 5

The overhead per step is ``(lambda_max's time + the preconditioned one's) / every``: with
``every=50`` a measurement's time spread over 50 steps. ``measurement_in_steps`` is a
measurement's median time over a plain step's (the median run without the callback over its
steps), and ``predicted_ratio`` ``1 + measurement_in_steps / every``: on a shared machine the two
series' medians drift with the load, this ratio of times taken in the same process less so.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time

import torch
from torch import nn

from collector import Model, SummaryCollector
from landscape.curvature import SharpnessCallback
from landscape.examples import MLP, digits_loader, digits_tensors


def _train(epochs: int, every: int | None, folder: str) -> tuple[float, int, list[dict]]:
    """Seconds of ``Model.train`` (the callbacks made before the clock starts), steps, measurements."""
    torch.manual_seed(0)
    net = MLP()
    model = Model(net, nn.CrossEntropyLoss(), torch.optim.Adam(net.parameters(), lr=1e-3))
    loader = digits_loader(64, shuffle=True, seed=0)
    callbacks: list = [SummaryCollector(folder, collect_freq=10)]
    sharp = None
    if every is not None:
        x, y = digits_tensors()
        sharp = SharpnessCallback(every=every, data=(x[:512], y[:512]), loss_fn=nn.CrossEntropyLoss(),
                                  num_samples=None)
        callbacks.append(sharp)
    started = time.perf_counter()
    model.train(epochs, loader, callbacks=callbacks)
    seconds = time.perf_counter() - started
    return seconds, epochs * len(loader), [] if sharp is None else sharp.history


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=10, help="epochs per run (28 steps each; default 10)")
    parser.add_argument("--every", type=int, default=50, help="SharpnessCallback's every (default 50)")
    parser.add_argument("--repeats", type=int, default=5, help="runs of each series, alternating (default 5)")
    args = parser.parse_args()
    torch.set_num_threads(max(1, torch.get_num_threads()))
    without, with_, history = [], [], []
    steps = 0
    with tempfile.TemporaryDirectory() as tmp:
        _train(1, args.every, os.path.join(tmp, "warm"))  # imports and first-call costs out of the series
        for r in range(args.repeats):
            s, steps, _ = _train(args.epochs, None, os.path.join(tmp, f"without{r}"))
            without.append(s)
            s, steps, hist = _train(args.epochs, args.every, os.path.join(tmp, f"with{r}"))
            with_.append(s)
            history += hist
    med_without, med_with = statistics.median(without), statistics.median(with_)
    print(json.dumps({
        "steps": steps, "every": args.every, "repeats": args.repeats, "threads": torch.get_num_threads(),
        "steps_per_s_without": round(steps / med_without, 1),
        "steps_per_s_with": round(steps / med_with, 1),
        "without_range_s": [round(min(without), 3), round(max(without), 3)],
        "with_range_s": [round(min(with_), 3), round(max(with_), 3)],
        "ratio_of_medians": round(med_with / med_without, 3),
        "overhead_per_step_ms": round(1000 * (med_with - med_without) / steps, 2),
        "measurements_per_run": len(history) // args.repeats,
        "seconds_per_measurement": round(statistics.median(h["seconds"] for h in history), 3),
        # the measurement in training steps of the same process (less sensitive to a shared machine's load
        # than the ratio of two medians), and the ratio it predicts: 1 + that / every
        "measurement_in_steps": round(statistics.median(h["seconds"] for h in history) / (med_without / steps), 1),
        "predicted_ratio": round(1 + statistics.median(h["seconds"] for h in history) / (med_without / steps)
                                 / args.every, 3),
        "lanczos_iterations_per_measurement": statistics.median(h["iterations"] for h in history),
        "lambda_max_last": round(history[-1]["lambda_max"], 4),
        "preconditioned_last": round(history[-1]["preconditioned"], 1),
    }))


if __name__ == "__main__":
    main()
