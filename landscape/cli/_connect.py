"""``landscape connect A B --task MODULE:FUNCTION -o DIR``: two models' barriers, before and after alignment.

A and B are checkpoint files or SummaryCollector runs (their last checkpoint, checked against the
digest their ``train_metadata.json`` records). The task's network takes both; the barrier along
the straight line is measured naive and (``--align``) after aligning B to A, and ``--curve``
trains a curve between A and the aligned B. ``DIR`` receives ``landscapes.h5`` (every line
landscape, the curve's and the plane it lies on) and one PNG per landscape; the command prints
one line with both barriers before and after alignment. ``landscape report DIR`` shows them.
"""

from __future__ import annotations

import argparse
import copy
import time
from pathlib import Path
from typing import Any, cast

from matplotlib import pyplot as plt
from matplotlib.figure import Figure
from torch import nn

import viz
from collector.trajectory import (
    CKPT_DIR,
    METADATA_FILE,
    load_checkpoint,
    read_train_metadata,
    verify_checkpoint_file,
)
from landscape.cli._common import UsageError, safe_name
from landscape.cli._gen import load_task
from landscape.cli._gen_check import split_task
from landscape.connect import Barrier, barrier, fit_curve
from landscape.engine import TooFewSamples, tune_malloc
from landscape.io import H5_NAME, write_h5
from landscape.result import Landscape

__all__ = ["run_connect", "checkpoint_of"]


def checkpoint_of(path: Path, label: str) -> str:
    """A checkpoint file, or a run's last checkpoint (verified against its recorded digest)."""
    if path.is_file():
        return str(path)
    ckpt = path / CKPT_DIR
    if not (ckpt / METADATA_FILE).is_file():
        raise UsageError(f"{label} {str(path)!r} is neither a checkpoint file nor a SummaryCollector run (no "
                         f"{CKPT_DIR}/{METADATA_FILE})")
    md = read_train_metadata(str(ckpt / METADATA_FILE))
    if not md.files:
        raise UsageError(f"{label} {str(path)!r}: the run saved no checkpoint")
    last = max(md.files)
    found = md.checkpoint_path(str(ckpt), last)
    verify_checkpoint_file(found, what=f"{label}: the checkpoint of {md.unit} {last}", digest=md.digests.get(last),
                           recorded_in=str(ckpt / METADATA_FILE))
    return found


def _model(network: nn.Module, path: str, label: str) -> nn.Module:
    model = copy.deepcopy(network)
    model.load_state_dict(load_checkpoint(path, what=label, network=network))
    return model.eval()


def _line(name: str, naive: Barrier, aligned: Barrier | None) -> str:
    def pair(b: Barrier, metric: str) -> str:
        scale, unit = (100.0, " points") if metric == "error" else (1.0, "")
        return f"{scale * b.height('mean', metric):.4g} / {scale * b.height('linear', metric):.4g}{unit}"  # type: ignore[arg-type]

    parts = [f"loss (mean / linear): naive {pair(naive, 'loss')}"]
    if aligned is not None:
        parts[0] += f", aligned ({name}) {pair(aligned, 'loss')}"
    if naive.error is not None:
        text = f"error: naive {pair(naive, 'error')}"
        if aligned is not None:
            text += f", aligned {pair(aligned, 'error')}"
        parts.append(text)
    return "barrier " + "; ".join(parts)


def _pictures(landscapes: list[Landscape], folder: Path) -> list[str]:
    made = []
    for ls in landscapes:
        fig = cast(Figure, viz.plot(ls, kind="line" if ls.dims == 1 else "filled").figure)
        path = folder / f"{safe_name(ls.tag or 'landscape')}.png"
        fig.savefig(path, dpi=120, bbox_inches="tight")
        plt.close(fig)
        made.append(str(path))
    return made


def run_connect(args: argparse.Namespace) -> int:
    """Barriers (and a curve) between two models into ``--output``; one summary line printed."""
    started = time.perf_counter()
    split_task(args.task)
    if args.output.exists() and not args.output.is_dir():
        raise UsageError(f"--output {str(args.output)!r} is a file; pass a folder")
    if args.points % 2 == 0 or args.points < 3:
        raise UsageError(f"--points must be odd and at least 3, so that the grid holds alpha = 0.5; got {args.points}")
    path_a, path_b = checkpoint_of(args.a, "A"), checkpoint_of(args.b, "B")
    tune_malloc(owned=True)  # the command's process is ours: see landscape/engine/_malloc.py
    got = load_task(args.task)()
    if not (isinstance(got, (tuple, list)) and len(got) in (4, 5)):
        raise UsageError("--task: the function must return (model, network, dataset, metrics[, task])")
    model, network, dataset = got[0], got[1], got[2]
    task = got[4] if len(got) == 5 else None
    loss_fn = None if task is not None else getattr(model, "loss_fn", None)
    a, b = _model(network, path_a, "A"), _model(network, path_b, "B")
    common: dict[str, Any] = {"points": args.points, "bn_statistics": args.bn_statistics,
                              "num_samples": args.num_samples, "seed": args.seed}
    try:  # the first to read the data: a number of samples it does not hold is refused before any point
        naive = barrier(a, b, loss_fn, dataset, task=task, tag="naive", **common)
    except TooFewSamples as exc:
        raise UsageError(f"--num-samples {args.num_samples} asks for more samples than the dataset --task returned "
                         f"holds ({exc.have} samples). HINT: pass --num-samples {exc.have} or fewer.") from None
    aligned = None
    if args.align != "none":
        aligned = barrier(a, b, loss_fn, dataset, task=task, align=args.align, tag=f"aligned_{args.align}", **common)
    landscapes = [*naive.landscapes, *(aligned.landscapes if aligned is not None else [])]
    curve_line = ""
    if args.curve is not None:
        curve = fit_curve(a, b, loss_fn, dataset, task=task, kind=args.curve, epochs=args.curve_epochs,
                          seed=args.seed, align=None if aligned is None else aligned.alignment)
        along = curve.barrier(points=61)
        plane = curve.plane(size=args.size)
        plane.tag = f"curve_{args.curve}_plane"
        landscapes += [*along.landscapes, plane]
        curve_line = (f"; along the {args.curve} curve ({args.curve_epochs} epochs) "
                      f"{along.height('mean'):.4g} / {along.height('linear'):.4g}")
    args.output.mkdir(parents=True, exist_ok=True)
    write_h5(args.output / H5_NAME, landscapes)
    made = _pictures(landscapes, args.output)
    print(_line(args.align, naive, aligned) + curve_line)
    print(f"Wrote {len(landscapes)} landscapes to {args.output / H5_NAME} and {len(made)} PNGs in "
          f"{time.perf_counter() - started:.1f} s")
    return 0
