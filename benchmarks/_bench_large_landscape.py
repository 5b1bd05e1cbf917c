"""Sections of ``bench_large.py`` for landscapes of large models: peak memory above the model and speed.

Each section is a function ``section_<name>(args) -> dict`` (``args``: an ``argparse.Namespace``; the
options below, read with their defaults when absent). Every measurement runs in a fresh interpreter
(this file, ``--child``), whose peak resident memory (``VmHWM``) is reset once the model and its batch
are in memory: the peak above that baseline is what the measured work costs, activations included.
Memory is reported in model sizes (the model's parameter bytes). The machine may be shared: peaks
are meaningful, times are rough.

The children run with glibc's mmap threshold fixed at 128 KiB (``GLIBC_TUNABLES``; ``--malloc default``
leaves glibc's own rule): every tensor larger than that is then its own mapping, given back when it is
freed, so a peak is what the tensors held at once took. Under glibc's default the threshold rises with
each large block freed, later tensors go to the heap and the peaks move with its fragmentation: plain
GPT-2 inference measured 1.97 to 2.79 model sizes above the model in fresh processes on the same
input (2.0 with the threshold fixed, every time).

Speeds against plain inference are against plain forwards timed in the same process as ours, two
before the landscape and two after (this machine's speed drifts by tens of percent within minutes);
the naive loop's time includes drawing its directions and copying the centre, which ours includes too.

* ``gpt2``: GPT-2 124M (``transformers.GPT2LMHeadModel(GPT2Config())``, random weights), 16 sequences
  of 128 tokens, a random 3x3 landscape through ``compute_landscape(..., task=HuggingFace())`` with
  ``memory="fast"`` and ``"lean"``, against plain inference (the same forward, ``--reps`` times) and a
  naive loop that moves a copy of the model in place with the same directions (values compared).
* ``peers``: the same landscape through loss-landscapes 3.0.6 (``random_plane(steps=3)``, a metric
  calling the model on the batch) beside ours (``memory="fast"``): memory and time side by side.
  Their layer normalization: their filter normalization divides by zero on GPT-2
  (``ZeroDivisionError`` in ``filter_normalize_``).
* ``bf16``: GPT-2 124M in bfloat16 (``--bf16-seqs`` sequences of 128 tokens): ours fast and lean
  against a naive bfloat16 loop forming each point the same way (values equal bit for bit?).
* ``llama``: a 1.1B Llama-shaped model (TinyLlama's shape from ``transformers.LlamaConfig``, random
  weights), 2 sequences of 32 tokens, a random 3x3 landscape with ``memory="auto"`` (which setting
  it chose, its peak above the model, the centre against the model's own loss). Check ``free -g``
  first: the model is 4.4 GB.
* ``sharded``: GPT-2 124M sharded with FSDP2 over 2 gloo ranks (``torchrun``), a random 3x3
  landscape, fast and lean: each rank's peak above its sharded model, against one process.
* ``gpu`` (needs CUDA; ``benchmarks/gpu_checks.sh`` runs it on a lent machine): GPT-2 124M on the
  first CUDA device, ``--gpu-size`` per side, against plain inference and the naive loop (CUDA's
  ``max_memory_allocated`` above the model), lean on 3x3; then a 7B Llama-shaped model (Llama-2-7B's
  shape, random weights, built on the device) in bfloat16, ``--gpu-seqs`` x ``--gpu-tokens``, 3x3 with
  ``memory="auto"``: its GPU peak and the centre against the model's own loss.

    python benchmarks/bench_large.py --section gpt2
    python benchmarks/bench_large.py --section llama
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
TINYLLAMA = dict(hidden_size=2048, intermediate_size=5632, num_hidden_layers=22, num_attention_heads=32,
                 num_key_value_heads=4, vocab_size=32000)
#: Llama-2-7B's shape (6.7B parameters), for the ``gpu`` section.
LLAMA7B = dict(hidden_size=4096, intermediate_size=11008, num_hidden_layers=32, num_attention_heads=32,
               num_key_value_heads=32, vocab_size=32000)
DEFAULTS = {"size": 3, "reps": 3, "seqs": 16, "tokens": 128, "bf16_seqs": 4, "llama_seqs": 2, "llama_tokens": 32,
            "gpu_size": 11, "gpu_seqs": 4, "gpu_tokens": 512}


def _opt(args: argparse.Namespace, name: str) -> Any:
    return getattr(args, name, None) or DEFAULTS[name]


# -- measuring (in the child) ------------------------------------------------------------------
def _kb(field: str) -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise KeyError(field)


def _baseline(device: str = "cpu") -> int:
    """The memory now, from which the peak is counted: on a CUDA device the bytes allocated (its peak
    statistic reset); on the CPU, freed heap memory given back (glibc) and ``VmHWM`` reset to ``VmRSS``."""
    if device != "cpu":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        return int(torch.cuda.memory_allocated(device))
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except OSError:  # pragma: no cover - not glibc
        pass
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")
    return _kb("VmRSS")


def _peak_above(base: int, device: str = "cpu") -> int:
    if device != "cpu":
        torch.cuda.synchronize(device)
        return int(torch.cuda.max_memory_allocated(device)) - base
    return _kb("VmHWM") - base


def _model(name: str, dtype: str, seqs: int, tokens: int,
           device: str = "cpu") -> tuple[torch.nn.Module, dict[str, torch.Tensor], int]:
    import transformers

    torch.manual_seed(0)
    with torch.device(device):  # built where it runs (a 7B model is initialised on the GPU in seconds)
        if name == "gpt2":
            net = transformers.GPT2LMHeadModel(transformers.GPT2Config())
        else:
            shape = LLAMA7B if name == "llama7b" else TINYLLAMA
            net = transformers.LlamaForCausalLM(transformers.LlamaConfig(**shape, tie_word_embeddings=False))
    net = net.to(getattr(torch, dtype)).eval()
    if device != "cpu":
        torch.cuda.empty_cache()
    vocab = net.config.vocab_size
    ids = torch.randint(0, vocab, (seqs, tokens), generator=torch.Generator().manual_seed(1))
    size = sum(p.numel() * p.element_size() for p in net.parameters())
    return net, {"input_ids": ids, "labels": ids}, size


def _directions(net: torch.nn.Module, seed: int = 0) -> tuple[list[str], list[torch.Tensor], list[torch.Tensor]]:
    from landscape.geometry import moved_names, random_directions

    names, _ = moved_names(net, None)
    params = dict(net.named_parameters())
    v, w = random_directions([params[n].detach() for n in names], seed, "layer", names=names)
    return names, v, w


def _forwards(net: torch.nn.Module, batch: dict[str, torch.Tensor], times: int) -> tuple[list[float], float]:
    """Seconds of ``times`` plain forwards of ``net`` on ``batch`` (inference mode), and the last loss."""
    seconds, loss = [], float("nan")
    with torch.inference_mode():
        for _ in range(times):
            t0 = time.perf_counter()
            loss = float(net(**batch).loss)  # float(): waits for the device
            seconds.append(time.perf_counter() - t0)
    return seconds, loss


def child_plain(model: str, dtype: str, seqs: int, tokens: int, reps: int, device: str = "cpu") -> dict[str, Any]:
    """The model's forward on the batch, ``reps`` times (inference mode; on a GPU after one warm-up)."""
    net, batch, size = _model(model, dtype, seqs, tokens, device)
    batch = {k: t.to(device) for k, t in batch.items()}
    if device != "cpu":
        _forwards(net, batch, 1)
    base = _baseline(device)
    times, loss = _forwards(net, batch, reps)
    return {"model_bytes": size, "peak_above": _peak_above(base, device), "seconds": times, "loss": loss}


def child_naive(model: str, dtype: str, seqs: int, tokens: int, size_: int, device: str = "cpu") -> dict[str, Any]:
    """A loop moving the model in place: a centre copy, both directions, ``p.copy_(point)`` per point (timed
    from the directions' draw on)."""
    net, batch, size = _model(model, dtype, seqs, tokens, device)
    batch = {k: t.to(device) for k, t in batch.items()}
    params = dict(net.named_parameters())
    base = _baseline(device)
    t0 = time.perf_counter()  # end to end, as ours: its directions drawn and the centre copied too
    names, v, w = _directions(net)
    v, w = [t.to(device) for t in v], [t.to(device) for t in w]
    centre = [params[n].detach().clone() for n in names]
    axis = np.linspace(-1.0, 1.0, size_)
    values = np.empty((size_, size_))
    with torch.inference_mode():
        for i, b in enumerate(axis):
            for j, a in enumerate(axis):
                for n, c, dv, dw in zip(names, centre, v, w):
                    if c.dtype in (torch.bfloat16, torch.float16):  # directions held in the model's dtype
                        dv, dw = dv.to(c.dtype), dw.to(c.dtype)
                    point = torch.add(torch.add(c.float(), dw, alpha=float(b)), dv, alpha=float(a))
                    params[n].copy_(point.to(c.dtype))
                values[i, j] = float(net(**batch).loss)
    return {"model_bytes": size, "peak_above": _peak_above(base, device), "seconds": time.perf_counter() - t0,
            "z": values.tolist(), "held_bytes": sum(t.nbytes for t in [*v, *w])}


def child_ours(model: str, dtype: str, seqs: int, tokens: int, size_: int, memory: str,
               device: str = "cpu", plan: Any = "auto") -> dict[str, Any]:
    """``compute_landscape`` with ``memory``; its peak includes defining the landscape. Plain forwards of the
    same model and batch are timed in this process, two before it and two after."""
    import landscape
    from landscape.tasks import HuggingFace

    net, batch, size = _model(model, dtype, seqs, tokens, device)
    on_device = {k: t.to(device) for k, t in batch.items()}
    if device != "cpu":
        _forwards(net, on_device, 1)  # CUDA's first forward: kernels loaded, the caching allocator filled
    plain_s = _forwards(net, on_device, 2)[0]  # the baseline below gives their memory back first
    base = _baseline(device)
    host = _baseline() if device != "cpu" else base
    t0 = time.perf_counter()
    ls = landscape.compute_landscape(net, data=[batch], task=HuggingFace(), size=size_, num_samples=None,
                                     memory=memory, seed=0, plan=plan)
    seconds = time.perf_counter() - t0
    peak, host_peak = _peak_above(base, device), _peak_above(host)
    after, own = _forwards(net, on_device, 2)
    plain_s += after
    md = ls.metadata
    return {"model_bytes": size, "peak_above": peak, "host_peak_above": host_peak, "seconds": seconds,
            "plain_seconds": plain_s,
            "z": ls.z.tolist(), "centre": float(ls.z[size_ // 2, size_ // 2]), "own_loss": own,
            "plan": {k: md.get(k) for k in ("points_per_call", "eval_batch", "batching", "direction_draw")},
            "device": str(torch.cuda.get_device_name(device)) if device != "cpu" else "cpu"}


def child_peer(model: str, dtype: str, seqs: int, tokens: int, size_: int) -> dict[str, Any]:
    """loss-landscapes 3.0.6: ``random_plane(model, metric, distance=1, steps=size)``, moving the model."""
    import loss_landscapes
    from loss_landscapes.metrics import Metric

    net, batch, size = _model(model, dtype, seqs, tokens)

    class Loss(Metric):  # their Loss metric calls model(inputs); a Hugging Face model takes the batch's keys
        def __call__(self, wrapper: Any) -> float:
            return float(wrapper.modules[0](**batch).loss)

    base = _baseline()
    t0 = time.perf_counter()
    with torch.no_grad():
        z = loss_landscapes.random_plane(net, Loss(), distance=1, steps=size_, normalization="layer",
                                         deepcopy_model=False)
    return {"model_bytes": size, "peak_above": _kb("VmHWM") - base, "seconds": time.perf_counter() - t0,
            "z": np.asarray(z).tolist()}


CHILDREN: dict[str, Callable[..., dict[str, Any]]] = {
    "plain": child_plain, "naive": child_naive, "ours": child_ours, "peer": child_peer}


#: glibc's mmap threshold in the measuring children (see the module docstring); "default" leaves glibc's rule.
MALLOC_TUNABLES = "glibc.malloc.mmap_threshold=131072"


def _child_env() -> dict[str, str]:
    """The environment of a measuring process: this repository importable, glibc's malloc as chosen."""
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR")}
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    if os.environ.get("BENCH_MALLOC", "fixed") != "default":
        env["GLIBC_TUNABLES"] = ":".join(t for t in (os.environ.get("GLIBC_TUNABLES"), MALLOC_TUNABLES) if t)
    return env


def _child(name: str, **kw: Any) -> dict[str, Any]:
    env = _child_env()
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", name, json.dumps(kw)], env=env,
                         capture_output=True, text=True)
    if out.returncode != 0:  # the child's own error, not only its exit status
        raise RuntimeError(f"child {name} {kw} exited with {out.returncode}:\n{out.stderr[-4000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


# -- reporting ---------------------------------------------------------------------------------
def _sizes(r: dict[str, Any]) -> float:
    return r["peak_above"] / r["model_bytes"]


def _rel(a: Any, b: Any) -> float:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(np.max(np.abs(a - b) / np.maximum(np.abs(b), 1e-12)))


def _landscapes(args: argparse.Namespace, model: str, dtype: str, seqs: int, tokens: int,
                memories: tuple[str, ...], device: str = "cpu", size_: int | None = None) -> dict[str, Any]:
    """Plain inference, the naive loop and ours for each memory setting, on one model and batch."""
    size_, reps = size_ or _opt(args, "size"), _opt(args, "reps")
    common = {"model": model, "dtype": dtype, "seqs": seqs, "tokens": tokens, "device": device}
    plain = _child("plain", **common, reps=reps)
    naive = _child("naive", **common, size_=size_)
    per_point = float(np.median(plain["seconds"]))
    out: dict[str, Any] = {"model_bytes": plain["model_bytes"], "points": size_ * size_,
                           "plain": {"model_sizes": _sizes(plain), "seconds_per_forward": plain["seconds"]},
                           "naive": {"model_sizes": _sizes(naive), "points_per_s": size_ * size_ / naive["seconds"],
                                     "speed_vs_plain": per_point * size_ * size_ / naive["seconds"]}}
    print(f"{model} {dtype} on {device} ({plain['model_bytes'] / 1e9:.2f} GB, {seqs}x{tokens} tokens, {size_}x{size_}): "
          f"plain inference "
          f"{per_point:.3g} s per forward, peak {_sizes(plain):.2f} model sizes above the model; naive loop "
          f"{out['naive']['points_per_s']:.4f} points/s, peak {_sizes(naive):.2f}", flush=True)
    for memory in memories:
        ours = _child("ours", **common, size_=size_, memory=memory)
        beside = float(np.median(ours["plain_seconds"]))  # plain forwards timed around ours, in its process
        row = {"model_sizes": _sizes(ours), "beyond_plain_model_sizes": _sizes(ours) - _sizes(plain),
               "points_per_s": size_ * size_ / ours["seconds"],
               "speed_vs_plain": beside * size_ * size_ / ours["seconds"], "plain_seconds_beside": ours["plain_seconds"],
               "speed_vs_plain_child": per_point * size_ * size_ / ours["seconds"],
               "speed_vs_naive": naive["seconds"] / ours["seconds"], "max_rel_vs_naive": _rel(ours["z"], naive["z"]),
               "centre": ours["centre"], "own_loss": ours["own_loss"], "plan": ours["plan"], "z": ours["z"]}
        out[memory] = row
        print(f"  ours memory={memory}: peak {row['model_sizes']:.2f} model sizes above the model "
              f"({row['beyond_plain_model_sizes']:+.2f} beyond plain inference), {row['points_per_s']:.4f} points/s "
              f"= {row['speed_vs_plain']:.2f} of plain inference beside it ({beside:.3g} s per forward), "
              f"{row['speed_vs_naive']:.2f}x the naive loop; "
              f"max relative difference from the naive loop {row['max_rel_vs_naive']:.2g}; centre "
              f"{row['centre']!r}, the model's own loss {row['own_loss']!r}", flush=True)
    if len(memories) == 2:
        out["fast_equals_lean"] = out[memories[0]]["z"] == out[memories[1]]["z"]
    return out


# -- sections ----------------------------------------------------------------------------------
def section_gpt2(args: argparse.Namespace) -> dict[str, Any]:
    return _landscapes(args, "gpt2", "float32", _opt(args, "seqs"), _opt(args, "tokens"), ("fast", "lean"))


def section_bf16(args: argparse.Namespace) -> dict[str, Any]:
    out = _landscapes(args, "gpt2", "bfloat16", _opt(args, "bf16_seqs"), _opt(args, "tokens"), ("fast", "lean"))
    out["equal_to_naive_bf16_loop"] = all(out[m]["max_rel_vs_naive"] == 0.0 for m in ("fast", "lean"))
    print(f"  bf16: equal to the naive bfloat16 loop bit for bit: {out['equal_to_naive_bf16_loop']}", flush=True)
    return out


def section_peers(args: argparse.Namespace) -> dict[str, Any]:
    size_ = _opt(args, "size")
    common = {"model": "gpt2", "dtype": "float32", "seqs": _opt(args, "seqs"), "tokens": _opt(args, "tokens"),
              "size_": size_}
    theirs = _child("peer", **common)
    ours = _child("ours", **common, memory="fast")
    out = {name: {"model_sizes": _sizes(r), "points_per_s": size_ * size_ / r["seconds"], "seconds": r["seconds"]}
           for name, r in (("loss_landscapes", theirs), ("ours", ours))}
    for name, r in out.items():
        print(f"peers, GPT-2 124M {size_}x{size_}: {name}: peak {r['model_sizes']:.2f} model sizes above the "
              f"model, {r['points_per_s']:.4f} points/s ({r['seconds']:.0f} s)", flush=True)
    return out


def _available() -> int:
    with open("/proc/meminfo") as fh:
        for line in fh:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return 0


def section_llama(args: argparse.Namespace) -> dict[str, Any]:
    size_ = _opt(args, "size")
    common = {"model": "llama", "dtype": "float32", "seqs": _opt(args, "llama_seqs"),
              "tokens": _opt(args, "llama_tokens")}
    free = _available()
    print(f"llama: {free / 1e9:.1f} GB available before the runs", flush=True)
    plain = _child("plain", **common, reps=1)
    ours = _child("ours", **common, size_=size_, memory="auto")
    out = {"available_bytes": free, "model_bytes": ours["model_bytes"], "plain_model_sizes": _sizes(plain),
           "model_sizes": _sizes(ours), "beyond_plain_model_sizes": _sizes(ours) - _sizes(plain),
           "seconds": ours["seconds"], "points_per_s": size_ * size_ / ours["seconds"],
           "plain_seconds": plain["seconds"][0], "centre": ours["centre"], "own_loss": ours["own_loss"],
           "centre_equals_own_loss": ours["centre"] == ours["own_loss"], "z": ours["z"]}
    print(f"llama 1.1B ({ours['model_bytes'] / 1e9:.2f} GB): peak {out['model_sizes']:.2f} model sizes above the "
          f"model (plain inference {out['plain_model_sizes']:.2f}), {out['points_per_s']:.3f} points/s "
          f"(plain {plain['seconds'][0]:.1f} s per forward); centre {ours['centre']!r}, own loss "
          f"{ours['own_loss']!r}", flush=True)
    return out


def _sharded_rank(out: str, memory: str, size_: int, seqs: int, tokens: int) -> None:
    """One rank of ``section_sharded`` (run by torchrun): shard GPT-2 over the group, then the landscape."""
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    import landscape
    from landscape.tasks import HuggingFace

    dist.init_process_group("gloo")
    net, batch, size = _model("gpt2", "float32", seqs, tokens)
    mesh = init_device_mesh("cpu", (dist.get_world_size(),))
    for block in net.transformer.h:
        fully_shard(block, mesh=mesh)
    fully_shard(net, mesh=mesh)
    shard = sum(p.to_local().nbytes for p in net.parameters())
    # plain sharded inference first: the forward FSDP runs on this rank's share of the sequences (the
    # landscape's share), twice, every unit resharded after it -- what FSDP itself needs above the shard
    rank, world = dist.get_rank(), dist.get_world_size()
    mine = {k: v[rank * seqs // world:(rank + 1) * seqs // world] for k, v in batch.items()}
    base = _baseline()
    t0 = time.perf_counter()
    with torch.no_grad():
        for _ in range(2):
            HuggingFace()(net, mine)
            for m in net.modules():
                if hasattr(m, "reshard"):
                    m.reshard()
    plain = {"plain_peak_above": _kb("VmHWM") - base, "plain_seconds": (time.perf_counter() - t0) / 2}
    base = _baseline()
    t0 = time.perf_counter()
    ls = landscape.compute_landscape(net, data=[batch], task=HuggingFace(), size=size_, num_samples=None,
                                     memory=memory, seed=0)
    row = {"rank": rank, "model_bytes": size, "shard_bytes": shard, "rss_sharded": base,
           "peak_above": _kb("VmHWM") - base, "seconds": time.perf_counter() - t0, "z": ls.z.tolist(), **plain}
    rows: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(rows, row)
    if dist.get_rank() == 0:
        with open(out, "w") as fh:
            json.dump(rows, fh)
    dist.destroy_process_group()
    # PyTorch 2.13 keeps the mesh fully_shard used (DTensor's sharding-propagation cache), so the gloo group
    # outlives destroy_process_group and the interpreter's finalization can abort the process: leave before it
    # (tests/landscape/execution/_sharded_run.py says more)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def section_sharded(args: argparse.Namespace) -> dict[str, Any]:
    size_, seqs, tokens = _opt(args, "size"), _opt(args, "seqs"), _opt(args, "tokens")
    single = _child("ours", model="gpt2", dtype="float32", seqs=seqs, tokens=tokens, size_=size_, memory="fast")
    out: dict[str, Any] = {"single_process": {"model_sizes": _sizes(single), "seconds": single["seconds"]}}
    env = _child_env()
    for memory in ("fast", "lean"):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "ranks.json")
            subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
                            os.path.abspath(__file__), "--sharded", path, memory, str(size_), str(seqs), str(tokens)],
                           env=env, check=True, capture_output=True, text=True)
            with open(path) as fh:
                rows = json.load(fh)
        for r in rows:
            r["shard_model_sizes"] = r["shard_bytes"] / r["model_bytes"]
            r["peak_above_model_sizes"] = r["peak_above"] / r["model_bytes"]
            r["plain_peak_above_model_sizes"] = r["plain_peak_above"] / r["model_bytes"]
            r["max_rel_vs_single"] = _rel(r.pop("z"), single["z"])
            print(f"sharded over 2 gloo ranks, memory={memory}: rank {r['rank']} holds {r['shard_model_sizes']:.2f} "
                  f"of the model; peak {r['peak_above_model_sizes']:.2f} model sizes above its sharded model "
                  f"(activations of its {seqs // 2} sequences included; plain sharded inference "
                  f"{r['plain_peak_above_model_sizes']:.2f}, {r['plain_seconds']:.2f} s per forward), "
                  f"{r['seconds']:.0f} s; max relative difference from one process {r['max_rel_vs_single']:.2g}",
                  flush=True)
        out[memory] = rows
    return out


def section_gpu(args: argparse.Namespace) -> dict[str, Any]:
    """On the first CUDA device: GPT-2 124M (float32; a larger grid, a forward takes milliseconds) against
    plain inference and the naive loop, then a 7B Llama-shaped model in bfloat16 (``memory="auto"``)."""
    if not torch.cuda.is_available():
        if getattr(args, "section", "gpu") == "gpu":
            raise SystemExit("the gpu section needs a CUDA device")
        print("gpu: skipped (no CUDA device)", flush=True)  # --section all on a CPU machine
        return {"skipped": "no CUDA device"}
    device, size_ = "cuda:0", _opt(args, "gpu_size")
    out: dict[str, Any] = {"device": torch.cuda.get_device_name(0),
                           "total_bytes": torch.cuda.get_device_properties(0).total_memory}
    out["gpt2"] = _landscapes(args, "gpt2", "float32", _opt(args, "seqs"), _opt(args, "tokens"), ("fast",),
                              device=device, size_=size_)
    # lean draws every tensor again on the CPU at each point (seconds for 124M parameters, against a forward
    # of milliseconds here): a 3x3 grid, for its memory and its values against fast's centre row
    lean = _child("ours", model="gpt2", dtype="float32", seqs=_opt(args, "seqs"), tokens=_opt(args, "tokens"),
                  size_=3, memory="lean", device=device)
    out["gpt2"]["lean_3x3"] = {"model_sizes": _sizes(lean), "seconds": lean["seconds"], "centre": lean["centre"],
                               "own_loss": lean["own_loss"]}
    print(f"  ours memory=lean, 3x3: peak {_sizes(lean):.2f} model sizes above the model, {lean['seconds']:.1f} s; "
          f"centre {lean['centre']!r}, own loss {lean['own_loss']!r}", flush=True)
    common = {"model": "llama7b", "dtype": "bfloat16", "seqs": _opt(args, "gpu_seqs"),
              "tokens": _opt(args, "gpu_tokens"), "device": device}
    plain = _child("plain", **common, reps=3)
    ours = _child("ours", **common, size_=3, memory="auto")
    forward = float(np.median(plain["seconds"]))
    out["llama7b"] = {"model_bytes": ours["model_bytes"], "plain_model_sizes": _sizes(plain),
                      "plain_seconds": plain["seconds"], "model_sizes": _sizes(ours),
                      "beyond_plain_model_sizes": _sizes(ours) - _sizes(plain), "seconds": ours["seconds"],
                      "host_peak_above": ours["host_peak_above"], "centre": ours["centre"],
                      "own_loss": ours["own_loss"], "centre_equals_own_loss": ours["centre"] == ours["own_loss"],
                      "z": ours["z"]}
    print(f"llama 7B shape bf16 on {out['device']} ({ours['model_bytes'] / 1e9:.1f} GB): 3x3 in {ours['seconds']:.1f} s "
          f"(plain inference {forward:.3f} s per forward); GPU peak {_sizes(ours):.2f} model sizes above the model "
          f"= {(ours['model_bytes'] + ours['peak_above']) / 1e9:.1f} GB in all (plain {_sizes(plain):.2f}); host "
          f"{ours['host_peak_above'] / 1e9:.1f} GB above its start; centre {ours['centre']!r}, own loss "
          f"{ours['own_loss']!r}", flush=True)
    return out


SECTIONS: dict[str, Callable[[argparse.Namespace], dict[str, Any]]] = {
    "gpt2": section_gpt2, "peers": section_peers, "bf16": section_bf16, "llama": section_llama,
    "sharded": section_sharded, "gpu": section_gpu}


def main() -> None:
    """The entry points of the processes the sections start (a measurement, a torchrun rank)."""
    if len(sys.argv) >= 2 and sys.argv[1] == "--child":
        print(json.dumps(CHILDREN[sys.argv[2]](**json.loads(sys.argv[3]))))
        return
    if len(sys.argv) >= 2 and sys.argv[1] == "--sharded":
        out, memory, size_, seqs, tokens = sys.argv[2:7]
        _sharded_rank(out, memory, int(size_), int(seqs), int(tokens))
        return
    raise SystemExit("run the sections through benchmarks/bench_large.py --section NAME")


if __name__ == "__main__":
    main()
