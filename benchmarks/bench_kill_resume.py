"""A run killed with SIGKILL at 45 % of its time, then run again: how long the rerun takes.

The demo MLP (64-128-128-10) with 10 checkpoints along a short training on the digits, the
three landscapes MindSpore makes (PCA of [1..5] and [6..10], Random around the last), all
1,797 samples, ``--size`` per side, through the command (``landscape gen``), each run in a
fresh process as a user runs it:

* ``uninterrupted_s``: the command, start to end, into a fresh folder (median of ``--repeats``);
* ``rerun_s``: the same command into a folder where it was killed (SIGKILL) at
  ``--kill-at`` of ``uninterrupted_s``; it resumes what landscapes.h5 kept;
* ``ratio`` = rerun_s / uninterrupted_s, and whether the resumed landscapes equal the
  uninterrupted ones bit for bit.

One JSON line per repeat, then the medians::

    python benchmarks/bench_kill_resume.py --size 200 --repeats 3
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time

import numpy as np

TASK = textwrap.dedent("""
    import torch
    from torch import nn
    from landscape.examples import MLP, digits_tensors

    class _Model:
        loss_fn = nn.CrossEntropyLoss()

    def callback_fn():
        x, y = digits_tensors()
        return _Model(), MLP(), (x, y), None
""")


def _make_run(root: str) -> str:
    """A summary directory as SummaryCollector leaves it (ten epoch checkpoints and the metadata)."""
    import torch
    from torch import nn

    from collector import Model, SummaryCollector
    from landscape.examples import MLP, digits_loader

    torch.manual_seed(0)
    net = MLP()
    model = Model(net, nn.CrossEntropyLoss(), torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9))
    run = os.path.join(root, "run")
    collector = SummaryCollector(run, collect_freq=1000, collect_specified_data={"collect_landscape": {
        "landscape_size": 10, "unit": "epoch", "num_samples": 1797, "intervals": [[1, 2, 3, 4, 5], [6, 7, 8, 9, 10]]}})
    model.train(10, digits_loader(64), callbacks=[collector])
    with open(os.path.join(root, "benchtask.py"), "w") as fh:
        fh.write(TASK)
    return run


def _cmd(run: str, out: str, size: int) -> list[str]:
    return [sys.executable, "-m", "landscape", "gen", run, "--task", "benchtask:callback_fn", "--output", out,
            "--size", str(size), "--restart"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=200)
    parser.add_argument("--results", action="store_true",
                        help="write benchmarks/results/resume.json (the Benchmarks page's table)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--kill-at", type=float, default=0.45)
    args = parser.parse_args()
    from landscape import read_h5

    with tempfile.TemporaryDirectory() as root:
        run = _make_run(root)
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])}
        rows = []
        for k in range(args.repeats):
            full = os.path.join(root, f"full{k}")
            t0 = time.perf_counter()
            subprocess.run(_cmd(run, full, args.size), cwd=root, env=env, check=True, capture_output=True)
            uninterrupted = time.perf_counter() - t0
            cut = os.path.join(root, f"cut{k}")
            proc = subprocess.Popen(_cmd(run, cut, args.size), cwd=root, env=env, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL)
            time.sleep(args.kill_at * uninterrupted)
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            # the rerun: the same command without --restart (it resumes)
            t0 = time.perf_counter()
            subprocess.run(_cmd(run, cut, args.size)[:-1], cwd=root, env=env, check=True, capture_output=True)
            rerun = time.perf_counter() - t0
            a, b = read_h5(os.path.join(full, "landscapes.h5")), read_h5(os.path.join(cut, "landscapes.h5"))
            same = sorted(a) == sorted(b) and all(np.array_equal(a[t].z, b[t].z) for t in a)
            row = {"uninterrupted_s": round(uninterrupted, 2), "rerun_s": round(rerun, 2),
                   "ratio": round(rerun / uninterrupted, 3), "bit_for_bit": same}
            print(json.dumps(row), flush=True)
            rows.append(row)
        print(json.dumps({"size": args.size, "median_ratio": statistics.median(r["ratio"] for r in rows),
                          "range": [min(r["ratio"] for r in rows), max(r["ratio"] for r in rows)],
                          "all_bit_for_bit": all(r["bit_for_bit"] for r in rows)}))
        if args.results:
            from _results import ratio_row, write

            write("resume", order=100, title="Resuming after a kill", peer="an uninterrupted run",
                  ratio="rerun's time / the uninterrupted run's time",
                  rows=[ratio_row(f"rerun after SIGKILL at {args.kill_at:.0%}", [r["ratio"] for r in rows])],
                  records=rows,
                  notes=f"The demo MLP's three {args.size}×{args.size} landscapes through `landscape gen`, killed with "
                        "SIGKILL and run again"
                        + ("; the rerun's landscapes equal the uninterrupted ones bit for bit."
                           if all(r["bit_for_bit"] for r in rows) else "; NOT bit for bit in every repeat."))


if __name__ == "__main__":
    main()
