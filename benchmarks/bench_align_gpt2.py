"""GPT-2 124M aligned on this CPU: the time and the peak memory of ``landscape.align``.

Hugging Face's ``GPT2LMHeadModel(GPT2Config())`` (124M parameters, 497 MB in float32; no
download: random initialisation), and B either a planted permutation of A
(``--pair permuted``: ``Alignment.random``, then weight matching must find it back) or a
second random initialisation (``--pair seeds``: weight matching up to ``--max-iter``
iterations). The structure is traced and the permuted B checked (eval and train mode) on
``--batch`` sequences of ``--tokens`` random token ids. Printed: the groups found (the
residual stream, the heads, the features of each head, the feed-forward units of each
layer), the seconds of the whole ``align`` call and of its parts, the iterations, the
objective, the function check, and the peak resident memory (Linux's ``VmHWM``, reset once
the pair is loaded) of a process that only loads the pair and aligns it, against its
resident memory once both are loaded
(the two models are the caller's; ``align`` adds what the docs' formula says: the largest
tensor's permuted copies, a group's cost matrix, and, for the check, one model size and
one forward pass).

``--pair permuted,seeds`` runs both pairs; ``--results`` writes a row for each to
``benchmarks/results/align_gpt2.json`` (``--results-dir`` elsewhere)::

    python benchmarks/bench_align_gpt2.py --pair permuted,seeds --max-iter 10 --threads 2 --results
    python benchmarks/bench_align_gpt2.py --layers 2 --embd 64 --heads 2 --pair permuted,seeds \\
        --results --results-dir /tmp/smoke                                   # a smoke run
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _results import options, write  # noqa: E402

from landscape import align  # noqa: E402
from landscape.connect import Alignment  # noqa: E402
from landscape.tasks import HuggingFace  # noqa: E402


def _rss_mb() -> float:
    """The process's resident memory now (MB), from /proc."""
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * resource.getpagesize() / 2 ** 20


def _peak_mb() -> float:
    """The peak resident memory (MB) since the last :func:`_reset_peak` (Linux's VmHWM)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _reset_peak() -> None:
    """Start the peak over from the memory resident now (``/proc/self/clear_refs``)."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def _models(args: argparse.Namespace) -> tuple[torch.nn.Module, torch.nn.Module, list[dict]]:
    from transformers import GPT2Config, GPT2LMHeadModel

    cfg = GPT2Config(n_layer=args.layers, n_embd=args.embd, n_head=args.heads)
    torch.manual_seed(0)
    a = GPT2LMHeadModel(cfg).eval()
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, cfg.vocab_size, (args.batch, args.tokens), generator=g)
    data = [{"input_ids": ids, "labels": ids}]
    if args.pair == "permuted":
        b = Alignment.random(a, data, seed=1, task=HuggingFace()).apply(a).eval()
    else:
        torch.manual_seed(1)
        b = GPT2LMHeadModel(cfg).eval()
    return a, b, data


def _child(args: argparse.Namespace) -> None:
    """The measured process: the pair loaded, then ``align`` alone (its peak is this process's)."""
    from transformers import GPT2Config, GPT2LMHeadModel

    saved = torch.load(args.child, weights_only=True)
    cfg = GPT2Config(n_layer=args.layers, n_embd=args.embd, n_head=args.heads)
    a, b = GPT2LMHeadModel(cfg).eval(), GPT2LMHeadModel(cfg).eval()
    a.load_state_dict(saved["a"])
    b.load_state_dict(saved["b"])
    data = [{"input_ids": saved["ids"], "labels": saved["ids"]}]
    del saved
    n_params = sum(p.numel() for p in a.parameters())
    size_mb = n_params * 4 / 2 ** 20
    base, peak_loading = _rss_mb(), _peak_mb()
    _reset_peak()
    print(f"GPT-2: {args.layers} layers, {args.embd} wide, {args.heads} heads: {n_params / 1e6:.1f}M parameters, "
          f"{size_mb:.0f} MB each in float32; {args.batch} x {args.tokens} tokens; resident {base:.0f} MB with "
          f"both loaded (peak while loading {peak_loading:.0f} MB)")
    started = time.perf_counter()
    found = align(a, b, data=data, task=HuggingFace(), seed=0, max_iter=args.max_iter)
    seconds = time.perf_counter() - started
    peak = _peak_mb()
    sizes = sorted(found.spec.groups.values())
    print(f"groups: {len(sizes)} ({sizes.count(args.embd)} of {args.embd}, {sizes.count(4 * args.embd)} of "
          f"{4 * args.embd}, {sizes.count(args.heads)} of {args.heads} heads, "
          f"{sizes.count(args.embd // args.heads)} of {args.embd // args.heads} features of a head)")
    print(found.spec.report())
    print(f"align: {seconds:.1f} s, {found.iterations} iterations, objective {found.history[0]:.6g} -> "
          f"{found.history[-1]:.6g}, function check eval {found.checked['eval']:.1e} train "
          f"{found.checked['train']:.1e}")
    print(f"peak resident memory {peak:.0f} MB: {peak - base:.0f} MB over the two models loaded "
          f"({(peak - base) / size_mb:.2f} model sizes)")
    same = None
    if args.pair == "permuted":
        back = found.apply(b)
        same = all(torch.equal(t, back.state_dict()[k]) for k, t in a.state_dict().items())
        print(f"the planted permutation found back bit for bit: {same}")
    with open(args.child_out, "w") as f:
        json.dump({"pair": args.pair, "layers": args.layers, "embd": args.embd, "heads": args.heads,
                   "batch": args.batch, "tokens": args.tokens, "parameters": n_params, "groups": len(sizes),
                   "seconds": seconds, "iterations": found.iterations, "objective": [found.history[0],
                                                                                    found.history[-1]],
                   "checked": dict(found.checked), "resident_mb": base, "peak_mb": peak,
                   "model_sizes": (peak - base) / size_mb, "found_back": same}, f)


#: the pairs' names on the Benchmarks page
PAIRS = {"permuted": "a planted permutation of itself", "seeds": "a second initialisation"}
COLUMNS = ["iterations", "peak memory beyond the two models", "function check, eval / train",
           "the planted permutation found back"]


def write_results(args: argparse.Namespace, runs: list[dict]) -> None:
    """``align_gpt2.json``: a row per pair."""
    rows = []
    for r in runs:
        what = (f"GPT-2, {r['layers']} layer{'s' if r['layers'] > 1 else ''} of {r['embd']}, {r['heads']} heads "
                f"({r['parameters'] / 1e6:.1f}M parameters), {PAIRS[r['pair']]}")
        found = "—" if r["found_back"] is None else "bit for bit" if r["found_back"] else "no"
        rows.append({"what": what, "value": round(r["seconds"], 1), "unit": "s", "cells": {
            COLUMNS[0]: str(r["iterations"]), COLUMNS[1]: f"{r['model_sizes']:.2f} model sizes ({r['peak_mb'] - r['resident_mb']:,.0f} MB)",
            COLUMNS[2]: f"{r['checked']['eval']:.0e} / {r['checked']['train']:.0e}", COLUMNS[3]: found}})
    write("align_gpt2", order=76, title="Aligning GPT-2", peer=" and ".join(PAIRS[r["pair"]] for r in runs),
          ratio="seconds of the whole `align` call (the structure traced, weight matching, the function check)",
          rows=rows, columns=COLUMNS, records=runs, folder=args.results_dir,
          notes=f"Hugging Face's `GPT2LMHeadModel`, random initialisation (no download), on {runs[0]['batch']} × "
                f"{runs[0]['tokens']} random tokens, up to {args.max_iter} iterations, {torch.get_num_threads()} "
                "threads, in a process that only loads the pair and aligns it. The peak is Linux's `VmHWM`, "
                "reset once both models are loaded, in model sizes (one model's float32 parameters); the function "
                "check is the largest output difference of B and B permuted, relative, in eval and train mode.")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pair", default="permuted", help="permuted, seeds or both (comma-separated)")
    ap.add_argument("--max-iter", type=int, default=100)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--embd", type=int, default=768)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--child-out", help=argparse.SUPPRESS)
    options(ap, "align_gpt2.json")
    args = ap.parse_args()
    pairs = args.pair.split(",")
    if not set(pairs) <= set(PAIRS):
        ap.error(f"--pair: {args.pair!r}; each of {', '.join(PAIRS)}")
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.child:
        _child(args)
        return
    runs = []
    for name in pairs:
        args.pair = name
        a, b, data = _models(args)
        with tempfile.TemporaryDirectory() as tmp:
            pair, out = Path(tmp) / "pair.pt", Path(tmp) / "run.json"
            torch.save({"a": a.state_dict(), "b": b.state_dict(), "ids": data[0]["input_ids"]}, pair)
            del a, b
            cmd = [sys.executable, __file__, "--child", str(pair), "--child-out", str(out), "--pair", name,
                   *(f"--{k.replace('_', '-')}={getattr(args, k)}" for k in
                     ("max_iter", "batch", "tokens", "layers", "embd", "heads", "threads"))]
            subprocess.run(cmd, check=True)
            runs.append(json.loads(out.read_text()))
    if args.results:
        write_results(args, runs)


if __name__ == "__main__":
    main()
