"""What one run per folder and auditable directions cost (issue 34).

Two runs of the demo MLP (64-128-128-10) on the digits, seeds 0 and 1, 10 checkpoints each
with their SHA-256 recorded as SummaryCollector records them; run A's three landscapes
(``--size`` per side) generated into a folder. Then, medians of ``--repeats``:

* ``refused_s``: ``python -m landscape gen RUN_B --output A_OUT`` (exit 2, nothing written);
* ``startup_s``: ``python -c "import landscape.cli._gen"`` (torch and the library), what
  any gen pays before it can look at a checkpoint; ``refused_s - startup_s`` is the refusal's own time;
* ``directions_s``: ``kept_directions`` of each landscape kind, in process (a random landscape
  draws its directions twice more for their digests; PCA arrays are hashed);
* ``directions_bytes``: the bytes of the ``directions`` groups in run A's landscapes.h5, and
  ``zlib_ratio``: compressed / raw size of a PCA direction (zlib level 6), why they are stored raw;
* ``large_recipe_s``: the random digests of a 25.2M-parameter MLP (6 Linear 2048x2048 layers).

One JSON line::

    python benchmarks/bench_run_record.py --size 20 --repeats 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import zlib

import h5py
import numpy as np
import torch
from torch import nn

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TASK = """
import torch
from torch import nn
from landscape.examples import MLP, digits_tensors

class Model:
    loss_fn = nn.CrossEntropyLoss()

def task():
    x, y = digits_tensors()
    return Model(), MLP(), [(x[i:i + 256], y[i:i + 256]) for i in range(0, 512, 256)], None
"""


def _run(root: str, seed: int) -> str:
    from collector.trajectory import TrainMetadata, file_digest
    from landscape.examples import MLP, digits_tensors

    torch.manual_seed(seed)
    net = MLP()
    x, y = digits_tensors()
    opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
    ckpt = os.path.join(root, f"run{seed}", "ckpt_dir")
    os.makedirs(ckpt)
    files, digests = {}, {}
    for epoch in range(1, 11):
        for i in range(0, 1792, 64):
            opt.zero_grad()
            nn.functional.cross_entropy(net(x[i:i + 64]), y[i:i + 64]).backward()
            opt.step()
        files[epoch] = f"MLP_{epoch}_epoch.pt"
        torch.save(net.state_dict(), os.path.join(ckpt, files[epoch]))
        digests[epoch] = file_digest(os.path.join(ckpt, files[epoch]))
    TrainMetadata(intervals=[[1, 2, 3, 4, 5], [6, 7, 8, 9, 10]], files=files, step_per_epoch=28, unit="epoch",
                  num_samples=512, landscape_size=40, digests=digests).write(ckpt)
    return os.path.dirname(ckpt)


def _timed(cmd: list[str], cwd: str, expect: int) -> float:
    t0 = time.perf_counter()
    res = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=ROOT))
    took = time.perf_counter() - t0
    assert res.returncode == expect, res.stderr[-2000:]
    return took


def _group_bytes(g: h5py.Group) -> int:
    total = 0
    for obj in g.values():
        total += _group_bytes(obj) if isinstance(obj, h5py.Group) else obj.id.get_storage_size()
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    from landscape.geometry import SeededDirections
    from landscape.io import kept_directions, read_h5
    from landscape.io._directions import _recipe_digests
    from landscape.io._h5 import Partial

    out: dict[str, object] = {"size": args.size, "repeats": args.repeats, "torch": torch.__version__}
    with tempfile.TemporaryDirectory() as root:
        with open(os.path.join(root, "digits_task.py"), "w") as fh:
            fh.write(TASK)
        run_a, run_b = _run(root, 0), _run(root, 1)
        a_out = os.path.join(root, "a_out")
        gen = [sys.executable, "-m", "landscape", "gen"]
        opts = ["--task", "digits_task:task", "--output", a_out, "--size", str(args.size)]
        _timed(gen + [run_a, *opts], root, 0)
        h5 = os.path.join(a_out, "landscapes.h5")
        before = os.stat(h5).st_mtime_ns
        refused = [_timed(gen + [run_b, *opts], root, 2) for _ in range(args.repeats)]
        startup = [_timed([sys.executable, "-c", "import landscape.cli._gen"], root, 0) for _ in range(args.repeats)]
        assert os.stat(h5).st_mtime_ns == before
        out.update(refused_s=round(statistics.median(refused), 3), refused_range=[round(min(refused), 3),
                   round(max(refused), 3)], startup_s=round(statistics.median(startup), 3),
                   startup_range=[round(min(startup), 3), round(max(startup), 3)])
        with h5py.File(h5, "r") as fh:
            out["directions_bytes"] = {tag: _group_bytes(fh[tag]["directions"]) for tag in fh if tag[0] != "_"}
            out["file_bytes"] = os.path.getsize(h5)
            v = next(fh[t]["directions/v"] for t in fh if t[0] != "_" and "v" in fh[t]["directions"])
            raw = b"".join(v[n][()].tobytes() for n in v)
        out["zlib_ratio"] = round(len(zlib.compress(raw, 6)) / len(raw), 3)
        stored = read_h5(h5)
        ckpt = os.path.join(run_a, "ckpt_dir", "MLP_10_epoch.pt")
        state = torch.load(ckpt, weights_only=True)
        for tag, ls in stored.items():
            names = ls.metadata["moved_parameters"]
            v, w = ls.directions(centre=ckpt)
            rec = ls.directions_source.record()
            recipe = None if rec.info["kind"] == "arrays" else \
                SeededDirections(0, "layer", "normalize", tuple(names), 2, "per-block")
            flat = (np.concatenate([v[n].numpy().ravel() for n in names]),
                    np.concatenate([w[n].numpy().ravel() for n in names]))
            part = Partial({}, ls.x, ls.y, rec.points, 0, None, *(flat if recipe is None else (np.zeros(0),) * 2),
                           {}, np.zeros(0, bool))
            times = []
            for _ in range(args.repeats):
                t0 = time.perf_counter()
                kept_directions(part, names, state, recipe)
                times.append(time.perf_counter() - t0)
            out[f"directions_s {tag} ({rec.info['kind']})"] = round(statistics.median(times), 4)
    big = nn.Sequential(*[nn.Linear(2048, 2048) for _ in range(6)])
    centre = [p.detach() for p in big.parameters()]
    names = tuple(n for n, _ in big.named_parameters())
    recipe = SeededDirections(0, "layer", "normalize", names, 2, "per-block")
    times = []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        _recipe_digests(recipe, centre)
        times.append(time.perf_counter() - t0)
    out["large_recipe_params"] = sum(c.numel() for c in centre)
    out["large_recipe_s"] = round(statistics.median(times), 3)
    out["large_recipe_range"] = [round(min(times), 3), round(max(times), 3)]
    print(json.dumps(out))


if __name__ == "__main__":
    main()
