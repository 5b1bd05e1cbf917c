"""MindSpore's own workload, first call in the process: ours against MindSpore's ``SummaryLandscape``.

The workload of ``bench_resume.py``: the digits MLP (64-128-128-10) trained 10 epochs of 28 steps
(batch 64, SGD with momentum), interval checkpoints at every epoch, then
``SummaryLandscape(run).gen_landscapes_with_multi_process`` of the intervals [1..5] and [6..10]
(PCA planes) and the result (a random plane), ``--size`` per side, 512 samples. Ours is timed in
a fresh process as its first landscape call (imports excluded, as for MindSpore), then again in
the same process (medians of ``--repeats``). With ``--mindspore-python`` (an interpreter that has
MindSpore: ``python -m venv /opt/ms-venv && /opt/ms-venv/bin/pip install mindspore==2.10.0
'numpy<2'``), MindSpore trains the same network on the same samples with its
``SummaryCollector(collect_landscape=...)`` and its ``gen_landscapes_with_multi_process`` is timed
the same way (``_mindspore_workload.py``), alternating with ours ``--rounds`` times. One JSON line
per round and a summary::

    python benchmarks/bench_mindspore.py --size 6 --rounds 3 --mindspore-python /opt/ms-venv/bin/python

With ``--results`` (and ``--mindspore-python``) it writes ``benchmarks/results/mindspore.json``,
the Benchmarks page's table (``python benchmarks/make_page.py``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def ours(size: int, repeats: int) -> dict[str, float]:
    """Our gen call, first in this process, then ``repeats`` more (each into a fresh folder)."""
    import torch

    sys.path.insert(0, HERE)
    from bench_resume import _Model, _summary_dir

    from landscape import SummaryLandscape
    from landscape.examples import MLP, digits_tensors

    root = tempfile.mkdtemp(prefix="bench_mindspore_")
    run, _ = _summary_dir(root)  # trains and writes the checkpoints (not timed)
    x, y = digits_tensors()

    def callback_fn():
        return _Model(), MLP(), (x, y), None

    def gen(k: int) -> float:
        t0 = time.perf_counter()
        SummaryLandscape(run).gen_landscapes_with_multi_process(
            callback_fn, collect_landscape={"landscape_size": size}, output=os.path.join(root, f"out{k}"))
        return time.perf_counter() - t0

    try:
        first = gen(0)
        again = [gen(k + 1) for k in range(repeats)]
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return {"first_s": first, "again_s": statistics.median(again), "threads": torch.get_num_threads()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=6)
    ap.add_argument("--repeats", type=int, default=5, help="our calls after the first, in the same process")
    ap.add_argument("--rounds", type=int, default=1, help="fresh processes of each, alternating")
    ap.add_argument("--mindspore-python", default=None, help="an interpreter with MindSpore installed")
    ap.add_argument("--ours-only", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--results", action="store_true",
                    help="write benchmarks/results/mindspore.json (needs --mindspore-python)")
    args = ap.parse_args()
    if args.ours_only:
        print(json.dumps(ours(args.size, args.repeats)))
        return
    rows = []
    tmp = tempfile.TemporaryDirectory(prefix="bench_mindspore_ms_")
    digits = os.path.join(tmp.name, "digits.npz")
    if args.mindspore_python:  # the same samples for MindSpore, from this project's loader
        import numpy as np

        sys.path.insert(0, os.path.dirname(HERE))
        from landscape.examples import digits_tensors

        x, y = digits_tensors()
        np.savez(digits, x=x.numpy(), y=y.numpy())
    for r in range(args.rounds):
        row: dict[str, object] = {"round": r, "size": args.size}
        res = subprocess.run([sys.executable, os.path.abspath(__file__), "--ours-only", "--size", str(args.size),
                              "--repeats", str(args.repeats)], capture_output=True, text=True, check=True)
        row["ours"] = json.loads(res.stdout.strip().splitlines()[-1])
        if args.mindspore_python:
            res = subprocess.run([args.mindspore_python, os.path.join(HERE, "_mindspore_workload.py"),
                                  os.path.join(tmp.name, f"run{r}"), str(args.size), digits],
                                 capture_output=True, text=True, check=True)
            ms = json.loads(res.stdout.strip().splitlines()[-1])
            row["mindspore"] = ms
            row["mindspore_over_ours_first"] = round(ms["gen_s"] / row["ours"]["first_s"], 1)  # type: ignore[index]
            row["mindspore_over_ours_again"] = round(ms["gen_s"] / row["ours"]["again_s"], 1)  # type: ignore[index]
        rows.append(row)
        print(json.dumps(row), flush=True)
    tmp.cleanup()
    if args.mindspore_python and rows:
        print(json.dumps({"summary": True, "rounds": len(rows),
                          "mindspore_over_ours_first": [r["mindspore_over_ours_first"] for r in rows],
                          "mindspore_over_ours_again": [r["mindspore_over_ours_again"] for r in rows]}))
        if args.results:
            from _results import ratio_row, write

            ms = [r["mindspore"]["gen_s"] for r in rows]  # type: ignore[index]
            first = [r["ours"]["first_s"] for r in rows]  # type: ignore[index]
            write("mindspore", order=10, title="MindSpore's own workload", peer="MindSpore 2.10",
                  ratio="speed-up: MindSpore's time / ours",
                  rows=[ratio_row("first call in a fresh process", [r["mindspore_over_ours_first"] for r in rows],
                                  headline=f"its own workload: two PCA and one random {args.size}×{args.size} "
                                           "landscape, first call"),
                        ratio_row("later calls in the same process",
                                  [r["mindspore_over_ours_again"] for r in rows])],
                  records=rows,
                  notes=f"Two PCA landscapes and one random landscape, {args.size}×{args.size}, 512 samples, the "
                        "digits MLP trained by each tool's own `Model` and `SummaryCollector`; "
                        "`gen_landscapes_with_multi_process` timed in each, imports excluded, MindSpore in its own "
                        f"virtual environment. MindSpore took {min(ms):.1f}–{max(ms):.1f} s, ours "
                        f"{min(first):.3f}–{max(first):.3f} s as the process's first call.")


if __name__ == "__main__":
    main()
