"""Large models on this CPU: memory and time of the paths that hold a model's parameters.

Sections (``--section``, one function each; every measurement runs in a fresh
subprocess, whose peak resident memory ``VmHWM`` is reset after the model or the centre
is in memory, so the peak above that baseline is what the section's work costs):

* ``pca``: PCA directions of ``--checkpoints`` checkpoints of a Llama-shaped model
  (``--model tinyllama``: TinyLlama-1.1B's shape, hidden 2048, intermediate 5632, 22
  layers, 32 heads, 4 KV heads, vocabulary 32,000, from ``transformers.LlamaConfig``,
  random weights), written to a temporary folder as a drifting trajectory and streamed
  from disk (``landscape.geometry._streamed_pca``). Reported: peak memory above the
  centre (one checkpoint) and the two directions, in model sizes, and the time. With
  ``--compare`` also today's in-memory PCA (all differences held), which needs
  (checkpoints - 1) model sizes: only for ``--model small``.
* ``collector``: ``collect_landscape``'s interval checkpoints of the model at three
  consecutive steps (the parameters change in place between them, as a training step
  does): peak memory above the model, time the training thread was held, for
  ``--format torch`` or ``safetensors``.
* ``gpt2``, ``peers``, ``bf16``, ``llama``, ``sharded``, ``gpu``: landscapes of GPT-2 124M and the
  1.1B Llama-shaped model (see ``_bench_large_landscape.py``): peak memory above the model
  against plain inference and a naive in-place loop, loss-landscapes 3.0.6 beside us, a
  bfloat16 run, the FSDP2-sharded path over 2 gloo ranks; on a CUDA device GPT-2 and a
  7B-shaped model in bfloat16.

    python benchmarks/bench_large.py --section pca --model tinyllama --checkpoints 10
    python benchmarks/bench_large.py --section collector --model tinyllama --format safetensors
    python benchmarks/bench_large.py --section gpt2
    python benchmarks/bench_large.py --section llama
"""

from __future__ import annotations

import argparse
import glob
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _bench_large_landscape import DEFAULTS as LANDSCAPE_DEFAULTS  # noqa: E402
from _bench_large_landscape import SECTIONS as LANDSCAPE_SECTIONS  # noqa: E402

MODELS = {
    "tinyllama": dict(hidden_size=2048, intermediate_size=5632, num_hidden_layers=22, num_attention_heads=32,
                      num_key_value_heads=4, vocab_size=32000),
    "small": dict(hidden_size=1024, intermediate_size=2816, num_hidden_layers=8, num_attention_heads=16,
                  num_key_value_heads=4, vocab_size=32000),
}


# -- measuring -----------------------------------------------------------------------------
def _status_kb(field: str) -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise KeyError(field)


def _reset_peak() -> int:
    """Reset this process's ``VmHWM`` to its current ``VmRSS``; return that (bytes)."""
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")
    return _status_kb("VmRSS") * 1024


def _peak() -> int:
    return _status_kb("VmHWM") * 1024


def _child(name: str, **kw: Any) -> dict[str, Any]:
    """Run ``_CHILDREN[name](**kw)`` in a fresh interpreter (this file, ``--child``); its JSON result."""
    env = dict(os.environ)
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", name, json.dumps(kw)],
                         env=env, check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _llama(model: str, device: str = "cpu") -> torch.nn.Module:
    import transformers

    config = transformers.LlamaConfig(**MODELS[model], tie_word_embeddings=False)
    with torch.device(device):
        return transformers.LlamaForCausalLM(config)


def _gb(n: float) -> str:
    return f"{n / 1e9:.2f} GB"


# -- children (each in its own process) -----------------------------------------------------
def _make_trajectory(model: str, folder: str, count: int, file_format: str) -> dict[str, Any]:
    """``count`` checkpoints ``theta + a_k d1 + b_k d2 + noise_k`` (d1, d2 per tensor from seeds)."""
    from collector.trajectory import save_file

    torch.manual_seed(0)
    net = _llama(model)
    state = {k: v.detach() for k, v in net.state_dict().items()}
    start = time.perf_counter()
    for k in range(count):
        ck = {}
        for i, (name, t) in enumerate(state.items()):
            gens = [torch.Generator().manual_seed(1000 * i + j + (100 * k if j == 2 else 0)) for j in range(3)]
            ck[name] = t + (0.01 * k) * torch.randn(t.shape, generator=gens[0]) \
                + (0.005 * math.sin(k)) * torch.randn(t.shape, generator=gens[1]) \
                + 0.001 * torch.randn(t.shape, generator=gens[2])
        suffix = ".safetensors" if file_format == "safetensors" else ".pt"
        save_file(ck, os.path.join(folder, f"ck{k:03d}{suffix}"), file_format=file_format)
        del ck
    return {"seconds": time.perf_counter() - start, "model_bytes": sum(t.nbytes for t in state.values())}


def _pca_child(model: str, folder: str, streamed: bool) -> dict[str, Any]:
    from collector.trajectory import load_checkpoint
    from landscape.geometry._pca import pca_trajectory
    from landscape.geometry._state import flat_float, moved_names
    from landscape.geometry._streamed_pca import trajectory_pca

    net = _llama(model, "meta")  # shapes only: the checkpoints' keys and shapes are checked against it
    names, _ = moved_names(net, None)
    paths = sorted(glob.glob(os.path.join(folder, "ck*")))
    centre = flat_float(load_checkpoint(paths[-1], what="centre", network=net), names)
    model_bytes = sum(t.nbytes for t in centre)
    base = _reset_peak()
    start = time.perf_counter()
    if streamed:
        res = trajectory_pca(paths, names, centre, network=net, label="bench")
    else:  # today's in-memory PCA: every difference held (float32), Gram solver
        n = len(paths)

        def load(k: int) -> list[torch.Tensor]:
            return centre if k == n - 1 else flat_float(load_checkpoint(paths[k], what=f"{k}", network=net), names)

        res = pca_trajectory(load, n, solver="gram")
    seconds = time.perf_counter() - start
    directions = sum(t.nbytes for t in res["v"]) + sum(t.nbytes for t in res["w"])
    return {"seconds": seconds, "model_bytes": model_bytes, "base_rss": base, "peak_above_base": _peak() - base,
            "directions_bytes": directions, "ratio": [float(r) for r in res["explained_variance_ratio"][:2]],
            "coords": res["coords"].tolist()}


def _collector_child(model: str, folder: str, file_format: str) -> dict[str, Any]:
    from collector.collect._landscape import LandscapeCollector
    from collector.trajectory import validate_collect_landscape

    torch.manual_seed(0)
    net = _llama(model)
    model_bytes = sum(t.nbytes for t in net.state_dict().values())
    config = validate_collect_landscape({"unit": "step", "intervals": [[1, 2, 3]]})
    # the format keyword exists since the safetensors option; a checkout before it writes torch files
    collector = LandscapeCollector(folder, config, file_format) if file_format != "torch" else \
        LandscapeCollector(folder, config)
    base = _reset_peak()
    start = time.perf_counter()
    held = 0.0
    for step in (1, 2, 3):
        with torch.no_grad():
            for p in net.parameters():
                p.add_(1e-4)  # a training step's in-place update
        t0 = time.perf_counter()
        collector.maybe_save(net, step)
        held += time.perf_counter() - t0
    t0 = time.perf_counter()
    collector.write_metadata(step_per_epoch=3)
    return {"model_bytes": model_bytes, "base_rss": base, "peak_above_base": _peak() - base,
            "held_seconds": held, "final_wait_seconds": time.perf_counter() - t0,
            "total_seconds": time.perf_counter() - start,
            "file_bytes": sum(os.path.getsize(p) for p in glob.glob(os.path.join(folder, "*_step.*")))}


_CHILDREN: dict[str, Callable[..., dict[str, Any]]] = {
    "make_trajectory": _make_trajectory, "pca": _pca_child, "collector": _collector_child}


# -- sections ---------------------------------------------------------------------------------
def section_pca(args: argparse.Namespace) -> dict[str, Any]:
    folder = args.folder or tempfile.mkdtemp(prefix="bench_large_pca_", dir=args.tmp)
    try:
        if len(glob.glob(os.path.join(folder, "ck*"))) != args.checkpoints:
            made = _child("make_trajectory", model=args.model, folder=folder, count=args.checkpoints,
                          file_format=args.format)
            print(f"pca: {args.checkpoints} checkpoints of {args.model} ({_gb(made['model_bytes'])} each, "
                  f"{args.format}) written in {made['seconds']:.0f} s", flush=True)
        else:
            print(f"pca: the {args.checkpoints} checkpoints in {folder}", flush=True)
        out: dict[str, Any] = {"model": args.model, "checkpoints": args.checkpoints, "format": args.format}
        runs = [("streamed", True)] + ([("in_memory", False)] if args.compare else [])
        for label, streamed in runs:
            r = _child("pca", model=args.model, folder=folder, streamed=streamed)
            size = r["model_bytes"]
            beyond = r["peak_above_base"] - r["directions_bytes"]
            print(f"pca {label}: {r['seconds']:.1f} s; peak {_gb(r['peak_above_base'])} above the centre, "
                  f"{_gb(beyond)} = {beyond / size:.2f} model sizes beyond the two directions", flush=True)
            out[label] = {**r, "beyond_directions_model_sizes": beyond / size}
        if args.compare:
            np_coords = [out[k]["coords"] for k in ("streamed", "in_memory")]
            out["max_coord_difference"] = max(abs(a - b) for ra, rb in zip(*np_coords) for a, b in zip(ra, rb))
        return out
    finally:
        if not args.folder:
            shutil.rmtree(folder, ignore_errors=True)


def section_collector(args: argparse.Namespace) -> dict[str, Any]:
    folder = tempfile.mkdtemp(prefix="bench_large_ckpt_", dir=args.tmp)
    try:
        r = _child("collector", model=args.model, folder=folder, file_format=args.format)
        size = r["model_bytes"]
        print(f"collector ({args.format}): 3 checkpoints of {_gb(size)}: peak {_gb(r['peak_above_base'])} above "
              f"the model = {r['peak_above_base'] / size:.2f} model sizes; the training thread held "
              f"{r['held_seconds']:.1f} s, the last writes {r['final_wait_seconds']:.1f} s", flush=True)
        return {"model": args.model, "format": args.format, **r, "model_sizes": r["peak_above_base"] / size}
    finally:
        shutil.rmtree(folder, ignore_errors=True)


SECTIONS: dict[str, Callable[[argparse.Namespace], dict[str, Any]]] = {
    "pca": section_pca, "collector": section_collector, **LANDSCAPE_SECTIONS}


def main() -> None:
    if len(sys.argv) >= 2 and sys.argv[1] == "--child":
        print(json.dumps(_CHILDREN[sys.argv[2]](**json.loads(sys.argv[3]))))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--section", choices=[*SECTIONS, "all"], default="all")
    parser.add_argument("--model", choices=list(MODELS), default="tinyllama")
    parser.add_argument("--checkpoints", type=int, default=10)
    parser.add_argument("--format", choices=["torch", "safetensors"], default="torch")
    parser.add_argument("--compare", action="store_true", help="pca: also today's in-memory PCA")
    parser.add_argument("--tmp", default=None, help="folder for the temporary checkpoints")
    parser.add_argument("--folder", default=None, help="pca: keep the checkpoints here (reused when all are there)")
    for name, default in LANDSCAPE_DEFAULTS.items():  # the landscape sections' sizes
        parser.add_argument(f"--{name.replace('_', '-')}", type=int, default=default)
    parser.add_argument("--malloc", choices=["fixed", "default"], default="fixed",
                        help="the landscape sections' children: glibc's mmap threshold fixed (peaks are the tensors' "
                             "own) or glibc's default (see _bench_large_landscape.py)")
    parser.add_argument("--json", default=None, help="write the results here")
    args = parser.parse_args()
    os.environ["BENCH_MALLOC"] = args.malloc
    results = {name: fn(args) for name, fn in SECTIONS.items() if args.section in (name, "all")}
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(results, fh, indent=1)


if __name__ == "__main__":
    main()
