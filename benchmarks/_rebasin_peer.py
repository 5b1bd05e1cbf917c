"""The ``rebasin`` 0.0.47 side of ``bench_rebasin.py``, run in its own virtual environment.

    /work/venvs/rebasin/bin/python benchmarks/_rebasin_peer.py PAIR.pt KIND OUT.pt [--threads N]

Loads the pair ``bench_rebasin.py`` saved (state dicts ``a``, ``b`` and the input the models are
traced on), builds the model of ``KIND`` (``mlp``, ``resnet20``, ``gpt2``), runs
``PermutationCoordinateDescent(model_a, model_b, input).rebasin()`` (their weight matching over
the graph torchview traces), saves B as they permuted it to ``OUT.pt`` and prints one JSON line:
rebasin's version, the seconds of the tracing (their constructor) and of the matching, or the error
it raised.
The benchmark-only venv holds torch 2.13.0 (CPU), rebasin 0.0.47, torchview, graphviz and
transformers; never a dependency of the project.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import sys
import time
import traceback
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the project's models, for the same classes

from benchmarks._rebasin_models import build  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("pair")
    ap.add_argument("kind")
    ap.add_argument("out")
    ap.add_argument("--threads", type=int, default=0)
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    from rebasin import PermutationCoordinateDescent

    saved = torch.load(args.pair, weights_only=True)
    a, b = build(args.kind), build(args.kind)
    a.load_state_dict(saved["a"])
    b.load_state_dict(saved["b"])
    a.eval()
    b.eval()
    inputs = saved["input"]
    if args.kind == "gpt2":
        inputs = inputs.long()
    got: dict[str, object] = {"kind": args.kind, "version": importlib.metadata.version("rebasin")}
    torch.manual_seed(0)  # their order of permutations (torch.randperm)
    try:
        started = time.perf_counter()
        pcd = PermutationCoordinateDescent(a, b, inputs)
        traced = time.perf_counter()
        pcd.rebasin()
        done = time.perf_counter()
        got.update(trace_s=traced - started, match_s=done - traced, total_s=done - started,
                   permutations=len(pcd.pinit.model_graph.permutation_to_info))
        torch.save(b.state_dict(), args.out)
    except Exception as exc:  # what their tool does on this model is the result
        got.update(error=f"{type(exc).__name__}: {exc}"[:500], where=traceback.format_exc().splitlines()[-3][:300])
    print(json.dumps(got))


if __name__ == "__main__":
    main()
