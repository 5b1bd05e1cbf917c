"""What resumability costs: a generation writing landscapes.h5 chunk by chunk vs the same
landscapes computed without a store, in one process.

The demo MLP (64-128-128-10) with 10 checkpoints along a short training on the digits,
intervals [1..5] and [6..10] plus the result landscape (three landscapes), ``--size``
per side, 512 samples. Three timings, medians of ``--repeats`` runs each:

* ``plain_s``: the three landscapes through ``compute_landscape`` (no store);
* ``resumable_s``: ``SummaryLandscape.gen_landscapes_with_multi_process`` into a fresh
  folder (fingerprints with SHA-256 of checkpoints and data, the progress groups written
  by atomic file replacement, every chunk flushed, the final groups, the summary events);
* ``rerun_s``: the same call again on the finished folder (nothing evaluated).

One JSON line; ``overhead_ratio`` = resumable_s / plain_s::

    python benchmarks/bench_resume.py --size 40 --repeats 3
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import time

import torch
from torch import nn


class _Model:
    loss_fn = nn.CrossEntropyLoss()


def _summary_dir(root: str) -> tuple[str, nn.Module]:
    from landscape.examples import MLP, digits_tensors

    torch.manual_seed(0)
    net = MLP()
    x, y = digits_tensors()
    opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
    ckpt = os.path.join(root, "run", "ckpt_dir")
    os.makedirs(ckpt)
    files = {}
    for epoch in range(1, 11):
        for i in range(0, 1792, 64):
            opt.zero_grad()
            nn.functional.cross_entropy(net(x[i:i + 64]), y[i:i + 64]).backward()
            opt.step()
        files[str(epoch)] = f"MLP_{epoch}_epoch.pt"
        torch.save(net.state_dict(), os.path.join(ckpt, files[str(epoch)]))
    md = {"epoch_group": {"0": [1, 2, 3, 4, 5], "1": [6, 7, 8, 9, 10]}, "model_params_file_map": files,
          "step_per_epoch": 28, "unit": "epoch", "num_samples": 512, "landscape_size": 40,
          "create_landscape": {"train": True, "result": True}}
    with open(os.path.join(ckpt, "train_metadata.json"), "w") as fh:
        json.dump(md, fh)
    return os.path.join(root, "run"), net


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=40)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    from landscape import SummaryLandscape, compute_landscape
    from landscape.examples import MLP, digits_tensors

    root = tempfile.mkdtemp(prefix="bench_resume_")
    try:
        run, _ = _summary_dir(root)
        x, y = digits_tensors()

        def callback_fn():
            return _Model(), MLP(), (x, y), None

        ckpt = os.path.join(run, "ckpt_dir")
        path = [os.path.join(ckpt, f"MLP_{e}_epoch.pt") for e in range(1, 11)]

        def plain() -> None:
            for iv in ([1, 2, 3, 4, 5], [6, 7, 8, 9, 10]):
                compute_landscape(MLP(), _Model.loss_fn, (x, y), directions="pca", size=args.size, num_samples=512,
                                  checkpoints=[path[i - 1] for i in iv], tag=f"landscape_{[iv[0], iv[-1]]}")
            compute_landscape(MLP(), _Model.loss_fn, (x, y), size=args.size, num_samples=512,
                              checkpoints=[path[-1]], tag="landscape_[10]")

        def resumable(out: str) -> None:
            SummaryLandscape(run).gen_landscapes_with_multi_process(
                callback_fn, collect_landscape={"landscape_size": args.size}, output=out)

        plain()  # warm-up (imports, first calls)
        t_plain, t_res, t_rerun = [], [], []
        for k in range(args.repeats):
            t0 = time.perf_counter()
            plain()
            t_plain.append(time.perf_counter() - t0)
            out = os.path.join(root, f"out{k}")
            t0 = time.perf_counter()
            resumable(out)
            t_res.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            resumable(out)
            t_rerun.append(time.perf_counter() - t0)
        p, r = statistics.median(t_plain), statistics.median(t_res)
        print(json.dumps({"size": args.size, "landscapes": 3, "points": 3 * args.size ** 2 + 10,
                          "plain_s": round(p, 3), "resumable_s": round(r, 3),
                          "overhead_ratio": round(r / p, 3),
                          "rerun_s": round(statistics.median(t_rerun), 3)}))
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
