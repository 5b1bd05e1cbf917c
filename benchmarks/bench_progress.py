"""How good the time left that ``landscape gen`` says is, with its output piped.

Writes a summary folder (bench_resume's: the demo MLP, 64-128-128-10, ten checkpoints of a
short training on the digits; here one Random landscape of ``--size`` per side over
``--samples`` samples) and a task module, then runs ``landscape gen`` with stderr to a
pipe, reading each line as it comes with its arrival time. From the progress lines
(``landscape_[10]: 1200/3605 points, 39 points/s, about 61 s left``) it prints:

* every line the piped run wrote, with the seconds since the command started;
* the estimate said once a tenth of the points was done (the first line at or past 10 %:
  the points left over the rate it says, its time left being rounded to minutes past 90 s)
  and the real time left then (the arrival of the line saying the landscape ended, less
  the arrival of that line); the same at half and at nine tenths.

One JSON line at the end::

    python benchmarks/bench_progress.py --size 100 --samples 1797
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_resume import _summary_dir as resume_run  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LINE = re.compile(r"^(?P<tag>\S+): (?P<done>\d+)/(?P<total>\d+) points, (?P<rate>[\d.]+) points/s, "
                  r"(?:about \d+(?:\.\d+)? (?:s|min|h)|under 1 s) left$")
END = re.compile(r"^(?P<tag>\S+): (?P<done>\d+)/(?P=done) points in ")

TASK = """
import torch
from torch import nn
from landscape.examples import MLP, digits_tensors


class _Model:
    loss_fn = nn.CrossEntropyLoss()


def task():
    x, y = digits_tensors()
    return _Model(), MLP(), [(x[i:i + 256], y[i:i + 256]) for i in range(0, len(x), 256)], None
"""


def _summary_dir(root: str, size: int, samples: int) -> str:
    """bench_resume's run (ten epochs of the demo MLP), its metadata asking for the Random landscape only."""
    run, _ = resume_run(root)
    path = os.path.join(run, "ckpt_dir", "train_metadata.json")
    with open(path) as fh:
        md = json.load(fh)
    md.update(num_samples=samples, landscape_size=size, create_landscape={"train": False, "result": True})
    with open(path, "w") as fh:
        json.dump(md, fh)
    with open(os.path.join(root, "bench_task.py"), "w") as fh:
        fh.write(TASK)
    return run


def _estimate_at(lines: list[tuple[float, re.Match]], fraction: float, end: float) -> dict | None:
    """The first line at or past ``fraction`` of the points: what it said and the real time left."""
    for t, m in lines:
        if int(m["done"]) >= fraction * int(m["total"]):
            # the line's time left is rounded to minutes past 90 s: the points left at its rate are the estimate
            said = (int(m["total"]) - int(m["done"])) / float(m["rate"])
            real = end - t
            return {"at_points": int(m["done"]), "said": m[0].split(", ")[-1], "estimate_s": round(said, 1),
                    "real_s": round(real, 1), "error": round(said / real - 1, 3) if real > 0 else None}
    return None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--samples", type=int, default=1797)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as root:
        run = _summary_dir(root, args.size, args.samples)
        env = dict(os.environ, PYTHONPATH=ROOT)
        started = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-m", "landscape", "gen", run, "--task", "bench_task:task",
                                 "--output", os.path.join(root, "out")], cwd=root, env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, bufsize=1)
        assert proc.stderr is not None
        written: list[tuple[float, str]] = []
        for raw in proc.stderr:
            written.append((time.perf_counter() - started, raw.rstrip("\n")))
        code = proc.wait()
        wall = time.perf_counter() - started
    for t, text in written:
        print(f"{t:7.2f} s  {text}")
    progress = [(t, m) for t, text in written if (m := LINE.match(text))]
    ends = [t for t, text in written if END.match(text)]
    result = {"bench": "progress", "size": args.size, "samples": args.samples, "exit": code,
              "wall_s": round(wall, 2), "lines": len(written), "progress_lines": len(progress),
              "load_avg_1min": os.getloadavg()[0]}
    if progress and ends:
        for name, fraction in (("at_10pct", 0.1), ("at_50pct", 0.5), ("at_90pct", 0.9)):
            result[name] = _estimate_at(progress, fraction, ends[-1])
    print(json.dumps(result))


if __name__ == "__main__":
    main()
