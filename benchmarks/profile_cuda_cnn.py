"""Where a small CNN's landscape time goes on a CUDA device (needs one; ``benchmarks/gpu_checks.sh`` runs it).

For ResNet-20 (CIFAR, 512 images of 32×32) and ResNet-18 (512 images of 64×64), one run each, in
milliseconds: plain inference of the 512 images, a naive loop per point (``p.copy_((c + b·w) + a·v)``
for every parameter, then the forward), ours in this process twice (12 × 12, the model on the device:
the first call pays cuDNN's start) and through ``device_ids=[0]``; then ``torch.profiler`` over ours on
4 × 4, its tables written to ``$OUT/prof_<model>.txt`` (or the current folder), the numbers to
``gpuprof.json`` there.

    python benchmarks/profile_cuda_cnn.py
"""

from __future__ import annotations

import json
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _models import workload  # noqa: E402

from landscape import compute_landscape  # noqa: E402

OUT = os.environ.get("OUT", ".")
if not torch.cuda.is_available():
    raise SystemExit("profile_cuda_cnn.py needs a CUDA device")
dev = torch.device("cuda:0")
res = {}
for name in ("resnet20", "resnet18"):
    model, data, task, forward = workload(name, 512)
    model = model.to(dev).eval()
    x, y = data
    batch = (x.to(dev), y.to(dev))
    with torch.inference_mode():
        for _ in range(3):
            float(forward(model, batch))
        t0 = time.perf_counter()
        for _ in range(20):
            float(forward(model, batch))
        plain = (time.perf_counter() - t0) / 20
        params = list(model.parameters())
        centre = [p.detach().clone() for p in params]
        g = torch.Generator().manual_seed(1)
        v = [torch.randn(c.shape, generator=g).to(dev) for c in centre]
        w = [torch.randn(c.shape, generator=g).to(dev) for c in centre]
        t0 = time.perf_counter()
        for i in range(144):
            a, b = -1 + 2 * (i % 12) / 11, -1 + 2 * (i // 12) / 11
            for p, c, dv, dw in zip(params, centre, v, w):
                p.copy_(torch.add(torch.add(c, dw, alpha=b), dv, alpha=a))
            float(forward(model, batch))
        naive = (time.perf_counter() - t0) / 144
        for p, c in zip(params, centre):
            p.copy_(c)
    row = {"plain_ms": plain * 1e3, "naive_ms_per_point": naive * 1e3}
    for rep in range(2):
        t0 = time.perf_counter()
        ls = compute_landscape(model, data=data, task=task, size=12, num_samples=512)
        row[f"ours_in_process_ms_per_point_{rep}"] = (time.perf_counter() - t0) / 144 * 1e3
    row["plan"] = {k: ls.metadata.get(k) for k in ("points_per_call", "batching", "eval_batch", "memory_format", "plan")}
    t0 = time.perf_counter()
    compute_landscape(model.cpu(), data=data, task=task, size=12, num_samples=512, device_ids=[0])
    row["ours_device_ids_ms_per_point"] = (time.perf_counter() - t0) / 144 * 1e3
    model.to(dev)
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        compute_landscape(model, data=data, task=task, size=4, num_samples=512)
    with open(os.path.join(OUT, f"prof_{name}.txt"), "w") as fh:
        fh.write(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=30))
        fh.write("\n\n")
        fh.write(prof.key_averages().table(sort_by="cuda_time_total", row_limit=15))
    res[name] = row
    print(name, json.dumps(row), flush=True)
with open(os.path.join(OUT, "gpuprof.json"), "w") as fh:
    json.dump(res, fh)
