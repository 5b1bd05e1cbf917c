"""``landscape gen SUMMARY_DIR --task MODULE:FUNCTION``: post-training generation."""

from __future__ import annotations

import argparse
import contextlib
import importlib
import logging
import os
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

from collector.train import get_metric
from landscape.cli._common import UsageError, describe
from landscape.cli._gen_check import cwd_on_path, split_task
from landscape.cli._stamp import record_finished
from landscape.curvature import EIGEN_RATIO, EigenRatio
from landscape.engine import PROGRESS_LOGGER, tune_malloc
from landscape.generate import SummaryLandscape, TooManySamples

__all__ = ["run_gen", "load_task", "deferred_task", "with_eigen_ratio", "progress_lines"]


def load_task(spec: str) -> Callable[..., Any]:
    """The user's ``MODULE:FUNCTION`` (the module importable from the current directory)."""
    module_name, func_name = split_task(spec)
    cwd_on_path()  # where the check found the module
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise UsageError(f"--task: cannot import module {module_name!r}: {exc}") from None
    func = getattr(module, func_name, None)
    if not callable(func):
        raise UsageError(f"--task: module {module_name!r} has no callable {func_name!r}")
    return func


def deferred_task(spec: str) -> Callable[[], Any]:
    """A ``callback_fn`` that imports the task module when called: ``SummaryLandscape`` checks its
    options, the metadata and every checkpoint first, so none waits for the module's imports."""

    def callback_fn() -> Any:
        return load_task(spec)()

    return callback_fn


def with_eigen_ratio(callback_fn: Callable[..., Any]) -> Callable[[], Any]:
    """``callback_fn`` with the eigen-ratio point metric added to the metrics it returns."""

    def wrapped() -> Any:
        got = callback_fn()
        if not (isinstance(got, (tuple, list)) and len(got) in (4, 5)):
            return got  # SummaryLandscape words the error
        metrics = got[3]
        if metrics is None:
            metrics = {}
        elif isinstance(metrics, (set, list, tuple)):
            metrics = {str(n): get_metric(n) for n in metrics}
        elif isinstance(metrics, dict):
            metrics = dict(metrics)
        else:
            return got
        metrics[EIGEN_RATIO] = EigenRatio()
        return (*got[:3], metrics, *got[4:])

    return wrapped


class _Stderr(logging.StreamHandler):
    """Writes each record, as it is, to the ``sys.stderr`` of the moment (a later redirection or capture)."""

    def emit(self, record: logging.LogRecord) -> None:
        self.setStream(sys.stderr)
        super().emit(record)


@contextlib.contextmanager
def progress_lines() -> Iterator[None]:
    """The progress lines (``landscape.progress``, INFO) on stderr as they are, whatever the verbosity,
    for the duration: what the command shows of long work when its stderr is not a terminal (a pipe,
    ``tee``, ``nohup``, a batch job), where no bar is drawn. The command's process is ours to set up."""
    log = logging.getLogger(PROGRESS_LOGGER)
    handler, saved = _Stderr(), (log.level, log.propagate)
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    log.propagate = False  # once, without the "INFO landscape.progress:" prefix of --verbose's handler
    try:
        yield
    finally:
        log.removeHandler(handler)
        log.setLevel(saved[0])
        log.propagate = saved[1]


def _as_command(gen: Callable[..., Any]) -> Callable[..., Any]:
    """``gen`` as the command runs it: progress lines on stderr, and a number of samples the dataset
    does not hold refused naming ``--num-samples`` (the Python parameter is not what was typed)."""

    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            with progress_lines():
                return gen(*args, **kwargs)
        except TooManySamples as exc:
            raise UsageError(exc.worded("--num-samples {n}", "the dataset --task returned")) from None

    return run


def run_gen(args: argparse.Namespace, stamp_key: str | None = None) -> int:
    """Generate the landscapes of a summary directory and report what was evaluated; with
    ``stamp_key`` (:func:`landscape.cli._stamp.command_key`) record the finished run."""
    started = time.perf_counter()
    tune_malloc(owned=True)  # the command's process is ours: see landscape/engine/_malloc.py
    callback_fn = deferred_task(args.task)
    if getattr(args, "eigen_ratio", False):
        callback_fn = with_eigen_ratio(callback_fn)
    override = {}
    if args.size:
        override["landscape_size"] = args.size
    if args.num_samples:
        override["num_samples"] = args.num_samples
    sl = SummaryLandscape(str(args.summary_dir))
    landscapes = _as_command(sl.gen_landscapes_with_multi_process)(
        callback_fn, collect_landscape=override or None, device_ids=args.devices,
        output=str(args.output) if args.output else None,
        normalization=args.normalization, ignore=args.ignore, seed=args.seed,
        restart=args.restart, distributed=args.distributed, view=args.view, between=args.between,
        second=args.second or "random", x=args.x, y=args.y, include=args.include, biasbn=args.biasbn,
        plan=getattr(args, "plan", "auto"), bn_statistics=getattr(args, "bn_statistics", "recompute"),
        memory=getattr(args, "memory", "auto"), directions=getattr(args, "directions", None) or "random",
        dims=getattr(args, "dims", None),
    )
    if int(os.environ.get("RANK", "0")) != 0:  # under torchrun, rank 0 reports
        return 0
    out = args.output or args.summary_dir
    for ls in landscapes:
        st = sl.last_stats.get(ls.tag or "", {})
        kept = st.get("points", 0) - st.get("evaluated", 0)
        print(f"{describe(ls)}, "
              f"evaluated {st.get('evaluated', 0)} of {st.get('points', 0)} points"
              + (f" ({kept} already in landscapes.h5)" if kept else ""))
    if stamp_key is not None:
        record_finished(args, stamp_key, [ls.tag or "landscape" for ls in landscapes])
    grids = sum(ls.dims > 2 for ls in landscapes)
    where = "summary events and landscapes.h5"
    if grids:  # MindSpore's message holds lines and planes
        where = "landscapes.h5" if grids == len(landscapes) else f"{where}; n-D grids in landscapes.h5 only"
    print(f"Wrote {len(landscapes)} landscape(s) to {out} ({where}) in {time.perf_counter() - started:.1f} s")
    return 0
