"""Training time with SummaryCollector over training time without it (target: ratio <= 1.05).

The demo-sized run: MLP 64-128-128-10 on scikit-learn's digits (inputs / 16), batch 64,
SGD momentum, 10 epochs (290 steps). The collector runs with ``collect_freq=10`` and
``collect_landscape`` intervals on (by default the MindSpore fixture's
``unit="epoch", intervals=[[1..5], [6..10]]``; ``--unit step`` saves at 15 steps instead).
Runs alternate (without, with, the reference below, the Lightning pair, without, ...) in one process; the median of each is
reported as one JSON line, with the ratio of the minimums and the median of each pair's
ratio (a run with the collector over the run without it just before), which follow the
machine's drift less on a shared machine::

    python benchmarks/bench_collector.py --repeats 7

A third series runs a reference callback, :class:`EssentialWork`, that does only the
work the collector cannot leave out in this configuration, in its plainest form (the
loss and copies of five parameters at 30 collections, ten state-dict copies, sorting
and bucketing the copies, eleven files, one fx trace): its ratio (``essential_ratio``)
shows how much of the overhead the required work alone takes on the machine at hand.

Two more series, when PyTorch Lightning is installed: the same network, data, optimizer
and ``collect_landscape`` settings trained by ``lightning.pytorch.Trainer.fit`` without a
callback and with :class:`collector.integrations.LightningCollector` (no logger, progress
bar, model summary or Lightning checkpoints; the Trainer is built outside the timed
``fit``). They alternate with the three above; ``lightning_ratio`` is their medians' ratio
and ``lightning_overhead_ms`` the difference. Every series is reported with its median
and range (``*_range_s``: the fastest and the slowest run).

The collector's runs write into fresh folders under ``--dir`` (default: the system's
temporary folder). Creating files is part of the overhead (two summary files, ten
checkpoints and the metadata), and its cost depends on the file system: on the
development VM a file creation in ``/tmp`` took ~200 us of kernel time, in a folder
elsewhere on the same disk ~20 us; the JSON line names the folder.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import time
import warnings

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader

from collector import Callback, Model, SummaryCollector
from landscape.examples import MLP, digits_loader

try:
    import lightning.pytorch as pl

    from collector.integrations import LightningCollector
except ImportError:  # the Lightning series are left out
    pl = None


class EssentialWork(Callback):
    """The work SummaryCollector cannot leave out here, in its plainest form: a reference, not a collector.

    At the first step and every ``collect_freq``-th: the loss as a float and a copy of
    the first five parameters into preallocated rows. At every step or epoch end listed
    in ``wanted``: a CPU copy of the state dict. At the first step: one ``torch.fx``
    trace of the network (the graph's input). At the end: for each parameter, the
    copies' float64 sums, minimum and maximum, a sort and a search of the 90 bucket
    edges (the histogram counts), written to one file; each state dict saved with
    ``torch.save`` to its own file. No summary format, lineage, graph message,
    metadata or validation.
    """

    def __init__(self, folder: str, collect_freq: int, unit: str, wanted: set[int]) -> None:
        self.folder, self.freq, self.unit, self.wanted = folder, collect_freq, unit, wanted

    def begin(self, run_context) -> None:
        args = run_context.original_args()
        collections = 1 + args["epoch_num"] * args["batch_num"] // self.freq
        params = list(args["network"].named_parameters())[:5]
        self.views = [p.detach().numpy().reshape(-1) for _, p in params]
        self.rows = [np.empty((collections, v.size), dtype=v.dtype) for v in self.views]
        self.used, self.losses, self.states = 0, [], []

    def step_end(self, run_context) -> None:
        args = run_context.original_args()
        step = args["cur_step_num"]
        if step == 1:
            torch.fx.Tracer(autowrap_modules=()).trace(args["network"])
        if step == 1 or step % self.freq == 0:
            self.losses.append(args["net_outputs"].item())
            for view, rows in zip(self.views, self.rows):
                np.copyto(rows[self.used], view)
            self.used += 1
        if self.unit == "step" and step in self.wanted:
            self._copy_state(args)

    def epoch_end(self, run_context) -> None:
        args = run_context.original_args()
        if self.unit == "epoch" and args["cur_epoch_num"] in self.wanted:
            self._copy_state(args)

    def _copy_state(self, args) -> None:
        self.states.append({k: v.detach().clone() for k, v in args["network"].state_dict().items()})

    def end(self, run_context) -> None:
        parts = [np.asarray(self.losses).tobytes()]
        for rows in self.rows:
            block = rows[:self.used]
            sums, lo, hi = block.sum(axis=1, dtype=np.float64), block.min(axis=1), block.max(axis=1)
            block.sort(axis=1)
            edges = np.linspace(lo, hi, 91, dtype=block.dtype, axis=1)
            counts = np.diff([np.append(row.searchsorted(e[:-1]), row.size) for row, e in zip(block, edges)])
            parts += [sums.tobytes(), edges.tobytes(), counts.tobytes()]
        with open(os.path.join(self.folder, "essential.bin"), "wb") as f:
            f.write(b"".join(parts))
        for i, state in enumerate(self.states):
            torch.save(state, os.path.join(self.folder, f"state_{i}.pt"))


def _run(loader: DataLoader, epochs: int, collector_kwargs: dict | None, folder: str | None = None,
         essential: dict | None = None) -> float:
    torch.manual_seed(0)
    net = MLP()
    model = Model(net, nn.CrossEntropyLoss(), torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9))
    tmp = tempfile.mkdtemp(prefix="bench_collector_", dir=folder)
    try:
        if essential is not None:
            callbacks = [EssentialWork(tmp, **essential)]
        else:
            callbacks = [SummaryCollector(tmp, **collector_kwargs)] if collector_kwargs is not None else None
        start = time.perf_counter()
        model.train(epochs, loader, callbacks=callbacks)  # includes closing files and writing metadata
        return time.perf_counter() - start
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _lightning_run(loader: DataLoader, epochs: int, collector_kwargs: dict | None, folder: str | None = None) -> float:
    """``Trainer.fit`` of the same network, optimizer and data; timed from fit to its return."""

    class LitMLP(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net, self.loss_fn = MLP(), nn.CrossEntropyLoss()

        def forward(self, x):
            return self.net(x)

        def training_step(self, batch, batch_idx):
            x, y = batch
            return self.loss_fn(self(x), y)

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.05, momentum=0.9)

    torch.manual_seed(0)
    module = LitMLP()
    tmp = tempfile.mkdtemp(prefix="bench_collector_lit_", dir=folder)
    try:
        callbacks = [LightningCollector(tmp, **collector_kwargs)] if collector_kwargs is not None else []
        trainer = pl.Trainer(max_epochs=epochs, accelerator="cpu", devices=1, callbacks=callbacks, logger=False,
                             enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                             num_sanity_val_steps=0, default_root_dir=tmp)
        start = time.perf_counter()
        trainer.fit(module, loader)  # includes closing the collector's files and writing its metadata
        return time.perf_counter() - start
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _range(times: list[float]) -> list[float]:
    return [round(min(times), 4), round(max(times), 4)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--unit", choices=["epoch", "step"], default="epoch")
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (default: torch's)")
    parser.add_argument("--dir", default=None, help="where the runs write (default: the system's temporary folder)")
    parser.add_argument("--no-lightning", action="store_true", help="leave out the two Lightning series")
    parser.add_argument("--results", action="store_true",
                        help="write benchmarks/results/collector.json (the Benchmarks page's table)")
    args = parser.parse_args()
    if args.repeats < 1:
        parser.error(f"--repeats must be at least 1, got {args.repeats}")
    if args.unit == "epoch" and args.epochs < 6:
        parser.error(f"--epochs must be at least 6 with --unit epoch (two landscape intervals of at least three epochs), got {args.epochs}")
    if args.threads:
        torch.set_num_threads(args.threads)

    loader = digits_loader(64, drop_last=False)  # 29 batches per epoch, shuffled with seed 0
    if args.unit == "epoch":
        half = args.epochs // 2
        intervals = [list(range(1, half + 1)), list(range(half + 1, args.epochs + 1))]
    else:
        last = args.epochs * len(loader)
        intervals = [[1, 2, 3, 4, 5], [last // 2 + k for k in range(0, 50, 10)], list(range(last - 4, last + 1))]
    kwargs = {"collect_freq": 10, "collect_specified_data": {"collect_landscape": {
        "unit": args.unit, "landscape_size": 10, "num_samples": 512, "intervals": intervals}}}

    # Warm-up: first-call costs (allocator, lazy imports) in neither series.
    folder = args.dir if args.dir is not None else tempfile.gettempdir()
    essential = {"collect_freq": 10, "unit": args.unit, "wanted": {n for iv in intervals for n in iv}}
    _run(loader, 1, None)
    _run(loader, 1, {"collect_freq": 10}, folder)
    _run(loader, 1, None, folder, essential)
    lightning = pl is not None and not args.no_lightning
    if lightning:
        import logging

        logging.getLogger("lightning.pytorch").setLevel(logging.WARNING)  # its notices on every fit
        warnings.filterwarnings("ignore", message=".*LeafSpec.*is deprecated")  # a notice of Lightning's own
        _lightning_run(loader, 1, None)
        _lightning_run(loader, 1, {"collect_freq": 10}, folder)
    without, with_collector, with_essential, lit_without, lit_with = [], [], [], [], []
    for _ in range(args.repeats):
        without.append(_run(loader, args.epochs, None))
        with_collector.append(_run(loader, args.epochs, kwargs, folder))
        with_essential.append(_run(loader, args.epochs, None, folder, essential))
        if lightning:
            lit_without.append(_lightning_run(loader, args.epochs, None))
            lit_with.append(_lightning_run(loader, args.epochs, kwargs, folder))
    base, coll = statistics.median(without), statistics.median(with_collector)
    ess = statistics.median(with_essential)
    extra: dict = {"lightning": "not installed" if pl is None else "left out (--no-lightning)"}
    if lightning:
        lb, lw = statistics.median(lit_without), statistics.median(lit_with)
        pairs = [w / b for w, b in zip(lit_with, lit_without)]
        extra = {"lightning": pl.__version__,
                 "lightning_median_without_s": round(lb, 4), "lightning_median_with_s": round(lw, 4),
                 "lightning_range_without_s": _range(lit_without), "lightning_range_with_s": _range(lit_with),
                 "lightning_ratio": round(lw / lb, 4),
                 "lightning_pair_ratio_median": round(statistics.median(pairs), 4),
                 "lightning_pair_ratio_range": [round(min(pairs), 4), round(max(pairs), 4)],
                 "lightning_overhead_ms": round(1000 * (lw - lb), 1)}
    record = {
        "benchmark": "collector_overhead",
        "model": "MLP 64-128-128-10, digits, batch 64",
        "epochs": args.epochs, "steps": args.epochs * len(loader), "unit": args.unit, "collect_freq": 10,
        "repeats": args.repeats, "torch_threads": torch.get_num_threads(), "dir": folder,
        "median_without_s": round(base, 4), "median_with_s": round(coll, 4),
        "ratio": round(coll / base, 4), "ratio_of_minimums": round(min(with_collector) / min(without), 4),
        "median_pair_ratio": round(statistics.median(w / b for w, b in zip(with_collector, without)), 4),
        "overhead_ms": round(1000 * (coll - base), 1), "target": 1.05,
        "essential_ratio": round(ess / base, 4), "essential_overhead_ms": round(1000 * (ess - base), 1),
        "range_without_s": _range(without), "range_with_s": _range(with_collector),
        "range_essential_s": _range(with_essential),
        **extra,
    }
    print(json.dumps(record))
    if args.results:
        from _results import ratio_row, write

        rows = [ratio_row("`SummaryCollector` under `Model`", [w / b for w, b in zip(with_collector, without)])]
        if lightning:
            rows.append(ratio_row(f"`LightningCollector` under `Trainer.fit` (Lightning {pl.__version__})",
                                  [w / b for w, b in zip(lit_with, lit_without)]))
        write("collector", order=80, title="Training with the collector", peer="the same training without a collector",
              ratio="time with the collector / time without (1 is free)", rows=rows, records=[record],
              notes=f"The digits MLP, {args.epochs} epochs; the collector with `collect_freq=10`, histograms, the "
                    "graph, lineage and landscape checkpoints. A reference callback doing only the copies and files "
                    f"the collector cannot leave out measured {ess / base:.2f} in the same run.")


if __name__ == "__main__":
    main()
