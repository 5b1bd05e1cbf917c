"""``landscape gen`` beside one busy process: the command's time against the same command with
one thread (``OMP_NUM_THREADS=1``), and alone.

The busy process is another PyTorch program at its default threads (a 400×400 matmul and a
ReLU in a loop), as a test run or a second training beside the command would be. The run: a
2-layer LSTM classifier over the digits' 8 rows (an ordinary ``nn.LSTM``, many small kernels),
trained 10 epochs by SummaryCollector; ``landscape gen`` makes MindSpore's three landscapes
(PCA of epochs 1-5 and 6-10, Random around the last) at ``--size``, 512 samples, each command
in a fresh process as a user runs it. Settings, alternated within each repeat:

* ``default``: the command as shipped (it chooses OpenMP's passive waiting when other runnable
  threads would share its CPUs: landscape/threads.py);
* ``one_thread``: ``OMP_NUM_THREADS=1``;
* ``spin`` (with ``--spin``): libgomp's own default forced (``GOMP_SPINCOUNT=300000``, which the
  command leaves alone), i.e. the command before landscape/threads.py. Slow: minutes.

Prints one JSON line per command, then the medians and ``ratio`` = default / one_thread beside
the busy process (issue 35 asks for at most 1.2)::

    python benchmarks/bench_busy.py --size 21 --repeats 3
"""

from __future__ import annotations

import argparse
import json
import os
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
    from landscape.examples import digits_tensors

    class LSTMNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = nn.LSTM(8, 64, num_layers=2, batch_first=True)
            self.fc = nn.Linear(64, 10)

        def forward(self, x):
            out, _ = self.lstm(x.view(-1, 8, 8))
            return self.fc(out[:, -1])

    class _Model:
        loss_fn = nn.CrossEntropyLoss()

    def callback_fn():
        x, y = digits_tensors()
        return _Model(), LSTMNet(), (x, y), None
""")

BUSY = "import torch\na = torch.randn(400, 400)\nwhile True:\n    torch.relu(a @ a)\n"

SETTINGS = {"default": {}, "one_thread": {"OMP_NUM_THREADS": "1"}, "spin": {"GOMP_SPINCOUNT": "300000"}}


def _make_run(root: str) -> str:
    sys.path.insert(0, root)
    with open(os.path.join(root, "benchtask.py"), "w") as fh:
        fh.write(TASK)
    import benchtask  # type: ignore[import-not-found]
    import torch

    from collector import Model, SummaryCollector
    from landscape.examples import digits_loader

    torch.manual_seed(0)
    net = benchtask.LSTMNet()
    model = Model(net, torch.nn.CrossEntropyLoss(), torch.optim.Adam(net.parameters(), lr=3e-3))
    run = os.path.join(root, "run")
    collector = SummaryCollector(run, collect_freq=1000, collect_specified_data={"collect_landscape": {
        "landscape_size": 10, "unit": "epoch", "num_samples": 512, "intervals": [[1, 2, 3, 4, 5], [6, 7, 8, 9, 10]]}})
    model.train(10, digits_loader(64), callbacks=[collector])
    return run


def _gen(root: str, run: str, out: str, size: int, setting: dict[str, str]) -> float:
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "OMP_NUM_THREADS")}
    env.update(setting)
    env["PYTHONPATH"] = os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])
    cmd = [sys.executable, "-m", "landscape", "gen", run, "--task", "benchtask:callback_fn", "--output", out,
           "--size", str(size), "--restart"]
    t0 = time.perf_counter()
    subprocess.run(cmd, cwd=root, env=env, check=True, capture_output=True)
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=21)
    parser.add_argument("--results", action="store_true",
                        help="write benchmarks/results/busy.json (the Benchmarks page's table)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--spin", action="store_true", help="also libgomp's default spinning (slow)")
    parser.add_argument("--alone", action=argparse.BooleanOptionalAction, default=True,
                        help="also time each setting without the busy process")
    args = parser.parse_args()
    from landscape import read_h5

    names = ["default", "one_thread"] + (["spin"] if args.spin else [])
    times: dict[str, list[float]] = {f"{w}_{n}": [] for w in ("busy", "alone") for n in names}
    with tempfile.TemporaryDirectory() as root:
        run = _make_run(root)
        first: dict[str, dict] = {}
        for k in range(args.repeats):
            for where in ("alone", "busy") if args.alone else ("busy",):
                busy = subprocess.Popen([sys.executable, "-c", BUSY]) if where == "busy" else None
                try:
                    if busy is not None:
                        time.sleep(1.0)  # the busy process is running when the command starts
                    for name in names:
                        out = os.path.join(root, f"{where}_{name}_{k}")
                        seconds = _gen(root, run, out, args.size, SETTINGS[name])
                        times[f"{where}_{name}"].append(seconds)
                        land = read_h5(os.path.join(out, "landscapes.h5"))
                        # same threads, same bits: neither the load nor the wait policy changes a value
                        group = "one_thread" if name == "one_thread" else "default_threads"
                        same = None
                        if group in first:
                            same = all(np.array_equal(first[group][t].z, land[t].z) for t in land)
                        else:
                            first[group] = land
                        print(json.dumps({"repeat": k, "where": where, "setting": name, "seconds": round(seconds, 2),
                                          "same_bits_as_first_of_its_threads": same}), flush=True)
                finally:
                    if busy is not None:
                        busy.kill()
                        busy.wait()
        med = {key: round(statistics.median(v), 2) for key, v in times.items() if v}
        rng = {key: [round(min(v), 2), round(max(v), 2)] for key, v in times.items() if v}
        print(json.dumps({"size": args.size, "median_s": med, "range_s": rng,
                          "ratio_busy_default_over_one_thread": round(med["busy_default"] / med["busy_one_thread"], 3)}))
        if args.results:
            from _results import ratio_row, write

            pairs = zip(times["busy_default"], times["busy_one_thread"])
            write("busy", order=90, title="Beside a busy process", peer="the same command with one thread",
                  ratio="time of `landscape gen` at its default / time with `OMP_NUM_THREADS=1`, beside a busy "
                        "process (below 1: the default is faster)",
                  rows=[ratio_row("`landscape gen`, default threads", [a / b for a, b in pairs])],
                  records=[{"median_s": med, "range_s": rng}],
                  notes=f"Three {args.size}×{args.size} landscapes of a 2-layer LSTM at 512 samples, each in a fresh "
                        "process, beside a PyTorch matmul loop at 2 threads; the same values, bit for bit, in every "
                        "repeat of a thread count.")


if __name__ == "__main__":
    main()
