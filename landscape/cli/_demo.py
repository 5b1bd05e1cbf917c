"""``landscape demo`` and ``landscape run CONFIG.toml``: train, collect, generate, plot."""

from __future__ import annotations

import argparse
import dataclasses
import os
import time
from typing import Any

from landscape.cli._common import UsageError, fresh_dir
from landscape.cli._figures import score_text
from landscape.cli._pipeline import (
    DEMO_CONFIG,
    load_config,
    run_pipeline,
    validate_config,
)
from landscape.engine import tune_malloc

__all__ = ["run_demo", "run_config"]


def _print_results(results: dict[str, Any], started: float) -> None:
    print(f"Output: {results['out']}")
    print(f"Seed: {results['seed']}")
    for name, run in results["runs"].items():
        print(f"  run {name}: summary directory {run['summary_dir']}")
        if "final_loss" in run:
            print(f"    loss {run['initial_loss']:.4g} before training, {run['final_loss']:.4g} after "
                  f"(accuracy {100 * run['accuracy']:.1f} %) on the landscapes' samples")
        if run.get("warning"):
            print(f"    WARNING: {run['warning']}")
        print(f"    trained in {run['train_seconds']} s, landscapes generated in {run['generate_seconds']} s:")
        for tag in run["landscapes"]:
            print(f"      {tag}")
        print(f"    landscapes.h5: {os.path.join(run['summary_dir'], 'landscapes.h5')}")
        if "surface_nonconvexity" in run:
            sc = run["surface_nonconvexity"]
            print(f"    Random plane: max {sc['max']:.4g}; {score_text(sc)}")
        if "centre_nonconvexity" in run:
            sc = run["centre_nonconvexity"]
            print(f"    within {sc['radius']:g} of the centre: negative at {sc['negative']} of {sc['points']} interior "
                  f"points" + (f", {sc['undefined']} undefined (NaN/inf in their stencil)" if sc["undefined"] else ""))
        if "nonconvexity" in run:
            sc = run["nonconvexity"]
            print(f"    eigen-ratio |λmin/λmax| ({run['eigen_ratio_seconds']} s): mean {sc['mean_ratio_low_loss']:.4f} "
                  f"over the lowest {100 * sc['quantile']:g} % of loss, {100 * sc['fraction_above']:.1f} % of "
                  f"points above {sc['threshold']:g}")
    print("Figures:")
    for fig in results["figures"]:
        print(f"  {fig}")
    print(f"Done in {time.perf_counter() - started:.1f} s. Open the run in MindInsight with "
          f"`mindinsight start --summary-base-dir {os.path.dirname(os.path.abspath(results['out']))}`.")


def run_demo(args: argparse.Namespace) -> int:
    """``landscape demo [--out DIR] [--size N]``."""
    tune_malloc(owned=True)  # the command's process is ours: see landscape/engine/_malloc.py
    started = time.perf_counter()
    cfg = DEMO_CONFIG
    if args.size:
        cfg = dataclasses.replace(cfg, landscape_size=args.size)
        validate_config(cfg, "--size")
    out = fresh_dir(args.out, "landscape_demo")
    _print_results(run_pipeline(cfg, out), started)
    return 0


def run_config(args: argparse.Namespace) -> int:
    """``landscape run CONFIG.toml [--out DIR] [--seed N]``."""
    tune_malloc(owned=True)
    started = time.perf_counter()
    if not args.config.is_file():
        raise UsageError(f"no configuration file at {str(args.config)!r}")
    cfg = load_config(args.config)
    if args.seed is not None:
        cfg = dataclasses.replace(cfg, seed=args.seed)
        validate_config(cfg, "--seed")
    out = fresh_dir(args.out, cfg.name)
    _print_results(run_pipeline(cfg, out), started)
    return 0
