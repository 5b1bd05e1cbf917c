"""Peak memory of a landscape over a whole CIFAR-sized dataset (50,000 samples of 3×32×32).

The dataset is a map-style ``Dataset`` that makes each image when asked (a fixed seed per
index), so the process holds the model alone before the call; the peak resident memory
(``VmHWM`` of this process and of the worker processes) above that is what the landscape
costs: our one copy of the samples (50,000 × 3×32×32 float32 = 614 MB), the evaluation
batches' activations and the workers. Run it alone on the machine; it evaluates a 2×2 grid
over the 50,000 samples (four points, several minutes on a 2-core CPU).

    python benchmarks/bench_memory.py --model resnet20 --samples 50000 --workers 1
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time

import torch
from torch.utils.data import Dataset

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _models import CifarResNet  # noqa: E402

from landscape import compute_landscape  # noqa: E402


class Images(Dataset):
    """CIFAR-shaped images made on demand: no memory held for the dataset itself."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        g = torch.Generator().manual_seed(i)
        return torch.randn(3, 32, 32, generator=g), torch.randint(0, 10, (), generator=g)


def _kb(pid: int, field: str) -> int:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith(field):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def _children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as fh:
            return [int(p) for p in fh.read().split()]
    except OSError:
        return []


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=50_000)
    parser.add_argument("--workers", type=int, default=1, help="CPU worker processes (device_ids)")
    parser.add_argument("--size", type=int, default=2)
    args = parser.parse_args()
    torch.manual_seed(0)
    model = CifarResNet(20).eval()
    data = Images(args.samples)
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")  # reset this process's peak
    base = _kb(os.getpid(), "VmRSS")
    worker_peak = {}
    stop = threading.Event()

    def watch() -> None:  # the workers' own peaks, read while they live
        while not stop.is_set():
            for pid in _children(os.getpid()):
                worker_peak[pid] = max(worker_peak.get(pid, 0), _kb(pid, "VmHWM"))
            time.sleep(0.5)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    t0 = time.perf_counter()
    ls = compute_landscape(model, torch.nn.CrossEntropyLoss(), data, size=args.size, num_samples=None,
                           device_ids=list(range(args.workers)) if args.workers > 1 else None)
    seconds = time.perf_counter() - t0
    stop.set()
    watcher.join()
    peak = _kb(os.getpid(), "VmHWM")
    print(json.dumps({
        "samples": args.samples, "workers": args.workers, "grid": f"{args.size}x{args.size}",
        "seconds": round(seconds, 1), "model_mb": round(base / 1024, 1),
        "peak_above_model_mb": round((peak - base) / 1024, 1),
        "workers_peak_mb": [round(v / 1024, 1) for v in worker_peak.values()],
        "plan": {k: ls.metadata.get(k) for k in ("points_per_call", "eval_batch", "plan")},
        "samples_mb": round(args.samples * 3 * 32 * 32 * 4 / 2**20, 1),
    }), flush=True)


if __name__ == "__main__":
    main()
