"""Side by side with ``rebasin`` 0.0.47 (PyPI, snimu/rebasin): weight matching on the same pairs.

For each model, two networks trained from seeds 1 and 2 (the digits: 1,437 training and 360
test digits; the tiny GPT-2 untrained, two random initialisations, on random tokens), then:

* ours: ``landscape.align(a, b, data=..., method="weights")`` end to end (the structure traced,
  weight matching, the function check), then ``barrier(a, b, ..., align=alignment)``;
* theirs: ``PermutationCoordinateDescent(a, b, input).rebasin()`` (torchview's trace and
  their weight matching), run by ``/work/venvs/rebasin/bin/python benchmarks/_rebasin_peer.py``
  on the same saved pair; their permuted B comes back and its barrier is measured by our
  ``barrier`` (the same code for both), and B's function is compared with theirs (the largest
  relative output difference on the samples: a permutation keeps it near float rounding).

Each side runs ``--repeats`` times, alternating, in processes of their own threads
(``--threads``); medians and ranges are printed. Barriers: Git Re-Basin's ("mean") and
Entezari et al.'s ("linear") on the training data, 25 alphas, batch-norm statistics estimated
again at every alpha.

``--results`` writes ``benchmarks/results/rebasin.json`` (``--results-dir`` elsewhere)::

    python benchmarks/bench_rebasin.py --repeats 5 --threads 2 --results
    python benchmarks/bench_rebasin.py --models mlp --epochs 2 --repeats 1 \\
        --results --results-dir /tmp/smoke                                    # a smoke run

The peer's venv: ``python3 -m venv /work/venvs/rebasin && /work/venvs/rebasin/bin/pip install
torch==2.13.0 && /work/venvs/rebasin/bin/pip install rebasin==0.0.47 transformers`` (and the
system's graphviz). It is never a dependency of the project.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
from torch import nn

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

sys.path.insert(0, str(ROOT / "benchmarks"))
from _results import options, ratio_row, write  # noqa: E402

from benchmarks._rebasin_models import KINDS, build  # noqa: E402
from landscape import align, barrier  # noqa: E402
from landscape.examples import digits_tensors  # noqa: E402
from landscape.tasks import HuggingFace  # noqa: E402

PEER = "/work/venvs/rebasin/bin/python"
CE = nn.CrossEntropyLoss()
#: the pairs' names on the Benchmarks page
NAMES = {"mlp": "digits MLP (64-128-128-10), trained from seeds 1 and 2",
         "resnet20": "the examples' ResNet-20, trained from seeds 1 and 2",
         "gpt2": "tiny GPT-2 (2 layers, 64 wide), two initialisations"}
COLUMNS = ["seconds, ours / rebasin", "barrier, ours / rebasin's (not aligned)", "B's function kept to, ours / rebasin's"]


def _split(image: bool) -> tuple[torch.Tensor, torch.Tensor]:
    from sklearn.model_selection import train_test_split

    x, y = digits_tensors(image=image)
    tr, _ = train_test_split(list(range(len(x))), test_size=360, stratify=y.numpy(), random_state=0)
    return x[tr], y[tr]


def _train(kind: str, seed: int, epochs: int) -> tuple[nn.Module, Any]:
    """A trained model and the data it is measured on (the tiny GPT-2: untrained, random tokens)."""
    torch.manual_seed(seed)
    net = build(kind, seed)
    if kind == "gpt2":
        g = torch.Generator().manual_seed(0)
        ids = torch.randint(0, 1000, (16, 32), generator=g)
        return net.eval(), [{"input_ids": ids, "labels": ids}]
    x, y = _split(image=kind == "resnet20")
    opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)
    gen = torch.Generator().manual_seed(seed)
    for _ in range(epochs):
        order = torch.randperm(len(x), generator=gen)
        for i in range(0, len(x), 32):
            idx = order[i:i + 32]
            opt.zero_grad()
            CE(net(x[idx]), y[idx]).backward()
            opt.step()
    return net.eval(), (x, y)


def _outputs(model: nn.Module, data: Any) -> torch.Tensor:
    with torch.no_grad():
        if isinstance(data, list):
            return model(input_ids=data[0]["input_ids"]).logits
        return model(data[0][:256])


def _relative(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).abs().max() / a.abs().max())


def _ours(a: nn.Module, b: nn.Module, data: Any, kind: str, threads: int) -> dict[str, Any]:
    torch.set_num_threads(threads)
    task = HuggingFace() if kind == "gpt2" else None
    started = time.perf_counter()
    found = align(a, b, data=data, task=task)
    seconds = time.perf_counter() - started
    return {"seconds": seconds, "iterations": found.iterations, "groups": len(found.perms),
            "alignment": found, "function": max(found.checked["eval"], found.checked["train"])}


def _theirs(pair: Path, kind: str, threads: int, out: Path, memory_gb: float) -> dict[str, Any]:
    """The peer in its venv, its address space capped (on the tiny GPT-2 rebasin's trace grew past 19 GB
    resident before the kernel killed it: a shared machine must not find out that way)."""
    limit = int(memory_gb * 2 ** 30)

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    try:
        res = subprocess.run([PEER, str(ROOT / "benchmarks" / "_rebasin_peer.py"), str(pair), kind, str(out),
                              "--threads", str(threads)], capture_output=True, text=True, timeout=1800,
                             env={**os.environ, "PYTHONPATH": str(ROOT)}, preexec_fn=cap)
    except subprocess.TimeoutExpired:
        return {"error": "no result within 30 minutes"}
    lines = [ln for ln in res.stdout.splitlines() if ln.startswith("{")]
    if res.returncode != 0 or not lines:
        tail = [ln for ln in (res.stderr or res.stdout).splitlines() if not ln.startswith("[transformers]")]
        return {"error": f"exit status {res.returncode}: {' / '.join(tail[-3:])[-400:]}"}
    return json.loads(lines[-1])


def _heights(a: nn.Module, b: nn.Module, data: Any, kind: str, alignment: Any = None) -> tuple[float, float]:
    if kind == "gpt2":
        got = barrier(a, b, data=data, task=HuggingFace(), align=alignment, points=5)
    else:
        got = barrier(a, b, CE, data, align=alignment)
    return got.height("mean"), got.height("linear")


def _range(values: list[float]) -> str:
    if not values:
        return "-"
    return f"{statistics.median(values):.3f} s ({min(values):.3f}-{max(values):.3f})"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default=",".join(KINDS))
    ap.add_argument("--epochs", type=int, default=10, help="training epochs of each digits model")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--peer-memory-gb", type=float, default=6.0,
                    help="address space rebasin's process may take (it is stopped past it)")
    options(ap, "rebasin.json")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    rows, records, version = [], [], ""
    for kind in args.models.split(","):
        (a, data), (b, _) = _train(kind, 1, args.epochs), _train(kind, 2, args.epochs)
        ours_s, theirs_s, theirs_trace = [], [], []
        ours = theirs = None
        with tempfile.TemporaryDirectory() as tmp:
            pair, out = Path(tmp) / "pair.pt", Path(tmp) / "theirs_b.pt"
            inputs = data[0]["input_ids"] if kind == "gpt2" else data[0][:64]
            torch.save({"a": a.state_dict(), "b": b.state_dict(), "input": inputs}, pair)
            for _ in range(args.repeats):
                ours = _ours(a, b, data, kind, args.threads)
                ours_s.append(ours["seconds"])
                theirs = _theirs(pair, kind, args.threads, out, args.peer_memory_gb)
                if "total_s" in theirs:
                    theirs_s.append(theirs["total_s"])
                    theirs_trace.append(theirs["trace_s"])
            permuted = None
            if out.exists():
                permuted = build(kind)
                permuted.load_state_dict(torch.load(out, weights_only=True))
                permuted.eval()
        assert ours is not None and theirs is not None
        naive = _heights(a, b, data, kind)
        aligned = _heights(a, b, data, kind, ours["alignment"])
        version = str(theirs.get("version", version))
        print(f"{kind}: naive barrier {naive[0]:.4f} (mean) / {naive[1]:.4f} (linear)")
        print(f"  ours: {_range(ours_s)}, {ours['groups']} groups, {ours['iterations']} iterations, "
              f"barrier {aligned[0]:.4f} / {aligned[1]:.4f}, B's function kept to {ours['function']:.1e}")
        record = {"model": kind, "ours_s": ours_s, "theirs_s": theirs_s, "theirs_trace_s": theirs_trace,
                  "groups": ours["groups"], "iterations": ours["iterations"], "naive_barrier": naive,
                  "ours_barrier": aligned, "ours_function": ours["function"]}
        cells = {COLUMNS[0]: f"{statistics.median(ours_s):.3g} / —", COLUMNS[1]: f"{aligned[0]:.3g} / — ({naive[0]:.3g})",
                 COLUMNS[2]: f"{ours['function']:.0e} / —"}
        if permuted is not None:
            theirs_h = _heights(a, permuted, data, kind)
            kept = _relative(_outputs(b, data), _outputs(permuted, data))
            print(f"  rebasin {version}: {_range(theirs_s)} (of which tracing {_range(theirs_trace)}), "
                  f"{theirs.get('permutations')} permutations, barrier {theirs_h[0]:.4f} / {theirs_h[1]:.4f}, "
                  f"B's function kept to {kept:.1e}")
            if theirs_s:
                print(f"  time ours / theirs: {statistics.median(ours_s) / statistics.median(theirs_s):.2f}")
            record.update(theirs_barrier=theirs_h, theirs_function=kept, permutations=theirs.get("permutations"))
            cells = {COLUMNS[0]: f"{statistics.median(ours_s):.3g} / {statistics.median(theirs_s):.3g}",
                     COLUMNS[1]: f"{aligned[0]:.3g} / {theirs_h[0]:.3g} ({naive[0]:.3g})",
                     COLUMNS[2]: f"{ours['function']:.0e} / {kept:.1g}"}
            # the repeats alternate: each of ours against the peer's run after it
            row = ratio_row(NAMES[kind], [t / o for o, t in zip(ours_s, theirs_s)])
        else:
            failed = f"rebasin failed ({args.peer_memory_gb:g} GB of address space allowed)"
            print(f"  rebasin {version}: failed ({args.peer_memory_gb:g} GB of address space allowed): "
                  f"{theirs.get('error')}")
            record["theirs_error"] = theirs.get("error")
            row = {"what": NAMES[kind], "value": failed, "unit": ""}
        rows.append({**row, "cells": cells})
        records.append(record)
    if args.results:
        write("rebasin", order=75, title="Weight matching against rebasin", peer=f"rebasin {version}".strip(),
              ratio="speed-up: rebasin's time / ours", rows=rows, columns=COLUMNS,
              records=records, folder=args.results_dir,
              notes="`landscape.align(a, b, data=...)` end to end (the structure traced, weight matching, the "
                    "function check) against rebasin's `PermutationCoordinateDescent(a, b, input).rebasin()` "
                    "(torchview's trace and their weight matching) in its own virtual environment, alternating, "
                    f"{args.threads} thread{'s' if args.threads > 1 else ''} each. The barrier is Git Re-Basin's "
                    "(the mean definition) on the training data, 25 α (5 for GPT-2), batch-norm statistics estimated again at "
                    "each; B's function: the largest output difference of B and B permuted, relative to B's "
                    "largest output.")


if __name__ == "__main__":
    main()
