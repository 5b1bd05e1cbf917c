"""The ``landscape`` command (also ``python -m landscape``).

Subcommands: demo, run, gen, plot, ls, export, lineage. Arguments are parsed once here
into explicit keyword arguments for the library; bad usage prints one line and exits
with status 2, a failure while working exits with status 1.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import importlib
import json
import logging
import os
import sys
import time
from pathlib import Path
from typing import Any

__all__ = ["main", "build_parser"]

logger = logging.getLogger("landscape")


class _UsageError(Exception):
    """Bad usage detected after parsing (a bad value, an existing output folder)."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2
        self.exit(2, f"{self.prog}: error: {message}\n")


def _int_list(text: str) -> list[int]:
    try:
        ids = [int(t) for t in text.split(",") if t.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated ints like 0,1; got {text!r}") from None
    if not ids:
        raise argparse.ArgumentTypeError("expected at least one device id")
    return ids


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an int; got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an int >= 1; got {value}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="landscape", description="Loss landscapes for PyTorch: train, collect, generate, look.")
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress at INFO level")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser, metavar="COMMAND")

    p = sub.add_parser("demo", help="train the digits MLP, generate its landscapes, write PNGs")
    p.add_argument("--out", type=Path, help="summary directory to create (default: a fresh ./landscape_demo_<time>)")
    p.add_argument("--size", type=_positive, help="grid points per side (default 40)")

    p = sub.add_parser("run", help="the demo pipeline from a TOML configuration (see configs/)")
    p.add_argument("config", type=Path, help="TOML file")
    p.add_argument("--out", type=Path, help="output directory (default: a fresh ./<name>_<time>)")

    p = sub.add_parser("gen", help="post-training generation with your callback_fn")
    p.add_argument("summary_dir", type=Path, help="the SummaryCollector's directory (holds ckpt_dir/)")
    p.add_argument("--task", required=True, help="MODULE:FUNCTION returning (model, network, dataset, metrics)")
    p.add_argument("--size", type=_positive, help="override landscape_size")
    p.add_argument("--num-samples", type=_positive, help="override num_samples")
    p.add_argument("--devices", type=_int_list, help="device ids, e.g. 0,1 (CPU: that many worker processes)")
    p.add_argument("--output", type=Path, help="where to write the landscapes (default: SUMMARY_DIR)")
    p.add_argument("--normalization", choices=("layer", "filter", "none"), default="layer")
    p.add_argument("--ignore", choices=("biasbn",), default=None)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--restart", action="store_true",
                   help="start the landscapes over instead of resuming what landscapes.h5 holds of them")
    p.add_argument("--distributed", action=argparse.BooleanOptionalAction, default=None,
                   help="share the work between torch.distributed processes (default: when run under torchrun)")

    p = sub.add_parser("plot", help="draw the landscapes of a summary directory, events file or landscapes.h5")
    p.add_argument("path", type=Path)
    p.add_argument("-o", "--output", type=Path, help="PNG file, or a folder when several figures are drawn")
    p.add_argument("--kind", choices=("contour", "filled", "surface", "heatmap", "all"), default="filled")
    p.add_argument("--tag", help="only this landscape, e.g. 'landscape_[1, 5]'")
    p.add_argument("--log", action="store_true", help="log-scaled loss")

    p = sub.add_parser("ls", help="list the runs under a directory with their landscapes, scalars and final loss")
    p.add_argument("base_dir", type=Path)
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")

    p = sub.add_parser("export", help="export landscapes as VTP (ParaView), CSV or HDF5 (Li et al.'s layout)")
    p.add_argument("path", type=Path)
    p.add_argument("--format", choices=("vtp", "csv", "h5"), required=True)
    p.add_argument("-o", "--output", type=Path, help="output folder (default: next to PATH)")
    p.add_argument("--tag", help="only this landscape")

    try:
        lineage_cli = importlib.import_module("landscape.cli._lineage")
    except ImportError:
        lineage_cli = None
    if lineage_cli is not None:
        lineage_cli.add_lineage_parser(sub)
    return parser


def _fresh_dir(requested: Path | None, stem: str) -> Path:
    """The output folder: the one asked for if new or empty, else a fresh timestamped one."""
    if requested is not None:
        if requested.exists() and (not requested.is_dir() or any(requested.iterdir())):
            raise _UsageError(f"--out {str(requested)!r} already exists and is not empty; "
                              "choose a new folder (nothing is overwritten)")
        return requested
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    path, k = Path.cwd() / f"{stem}_{stamp}", 1
    while path.exists():
        path, k = Path.cwd() / f"{stem}_{stamp}-{k}", k + 1
    return path


def _print_results(results: dict[str, Any], started: float) -> None:
    print(f"Output: {results['out']}")
    for name, run in results["runs"].items():
        print(f"  run {name}: summary directory {run['summary_dir']}")
        print(f"    trained in {run['train_seconds']} s, landscapes generated in {run['generate_seconds']} s:")
        for tag in run["landscapes"]:
            print(f"      {tag}")
        print(f"    landscapes.h5: {os.path.join(run['summary_dir'], 'landscapes.h5')}")
    print("Figures:")
    for fig in results["figures"]:
        print(f"  {fig}")
    print(f"Done in {time.perf_counter() - started:.1f} s. Open the run in MindInsight with "
          f"`mindinsight start --summary-base-dir {os.path.dirname(os.path.abspath(results['out']))}`.")


def _cmd_demo(args) -> int:
    from landscape.cli._pipeline import DEMO_CONFIG, _validate, run_pipeline

    started = time.perf_counter()
    cfg = DEMO_CONFIG
    if args.size:
        cfg = type(cfg)(**{**cfg.__dict__, "landscape_size": args.size})
        _validate(cfg, "--size")
    out = _fresh_dir(args.out, "landscape_demo")
    _print_results(run_pipeline(cfg, out), started)
    return 0


def _cmd_run(args) -> int:
    from landscape.cli._pipeline import load_config, run_pipeline

    started = time.perf_counter()
    if not args.config.is_file():
        raise _UsageError(f"no configuration file at {str(args.config)!r}")
    cfg = load_config(args.config)
    out = _fresh_dir(args.out, cfg.name)
    _print_results(run_pipeline(cfg, out), started)
    return 0


def _load_task(spec: str):
    module_name, sep, func_name = spec.partition(":")
    if not sep or not module_name or not func_name:
        raise _UsageError(f"--task must be MODULE:FUNCTION; got {spec!r}")
    sys.path.insert(0, os.getcwd())  # a user's module next to where they run the command
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise _UsageError(f"--task: cannot import module {module_name!r}: {exc}") from None
    func = getattr(module, func_name, None)
    if not callable(func):
        raise _UsageError(f"--task: module {module_name!r} has no callable {func_name!r}")
    return func


def _cmd_gen(args) -> int:
    from landscape.generate._summary_landscape import SummaryLandscape

    started = time.perf_counter()
    callback_fn = _load_task(args.task)
    override = {}
    if args.size:
        override["landscape_size"] = args.size
    if args.num_samples:
        override["num_samples"] = args.num_samples
    sl = SummaryLandscape(str(args.summary_dir))
    landscapes = sl.gen_landscapes_with_multi_process(
        callback_fn, collect_landscape=override or None, device_ids=args.devices,
        output=str(args.output) if args.output else None,
        normalization=args.normalization, ignore=args.ignore, seed=args.seed,
        restart=args.restart, distributed=args.distributed,
    )
    if int(os.environ.get("RANK", "0")) != 0:  # under torchrun, rank 0 reports
        return 0
    out = args.output or args.summary_dir
    for ls in landscapes:
        st = sl.last_stats.get(ls.tag, {})
        kept = st.get("points", 0) - st.get("evaluated", 0)
        print(f"{ls.tag}: {ls.z.shape[0]}x{ls.z.shape[1]}, min loss {float(_nanmin(ls.z)):.6g}, "
              f"evaluated {st.get('evaluated', 0)} of {st.get('points', 0)} points"
              + (f" ({kept} already in landscapes.h5)" if kept else ""))
    print(f"Wrote {len(landscapes)} landscape(s) to {out} (summary events and landscapes.h5) "
          f"in {time.perf_counter() - started:.1f} s")
    return 0


def _nanmin(z):
    import numpy as np

    finite = z[np.isfinite(z)]
    return finite.min() if finite.size else float("nan")


def _select(path: Path, tag: str | None):
    import viz

    if not path.exists():
        raise _UsageError(f"no such file or directory: {str(path)!r}")
    landscapes = viz.load_landscapes(path)
    if tag is not None:
        landscapes = [ls for ls in landscapes if ls.tag == tag]
        if not landscapes:
            raise _UsageError(f"--tag {tag!r} not found in {str(path)!r}")
    return landscapes


def _cmd_plot(args) -> int:
    import matplotlib.pyplot as plt

    import viz
    from landscape.cli._pipeline import _safe

    landscapes = _select(args.path, args.tag)
    kinds = ["contour", "filled", "surface", "heatmap"] if args.kind == "all" else [args.kind]
    single = len(landscapes) * len(kinds) == 1
    if args.output is not None and single and args.output.suffix:
        targets = [args.output]
    else:
        folder = args.output or (args.path if args.path.is_dir() else args.path.parent) / "plots"
        folder.mkdir(parents=True, exist_ok=True)
        targets = [folder / f"{_safe(ls.tag or 'landscape')}_{k}.png" for ls in landscapes for k in kinds]
    pairs = [(ls, k) for ls in landscapes for k in kinds]
    for (ls, kind), target in zip(pairs, targets):
        fig = viz.plot(ls, kind=kind, log=True if args.log else "auto").figure
        fig.savefig(target, dpi=120, bbox_inches="tight")
        plt.close(fig)
        print(target)
    return 0


def _cmd_export(args) -> int:
    import viz
    from landscape.cli._pipeline import _safe

    landscapes = _select(args.path, args.tag)
    folder = args.output or (args.path if args.path.is_dir() else args.path.parent) / "export"
    folder.mkdir(parents=True, exist_ok=True)
    for ls in landscapes:
        target = folder / f"{_safe(ls.tag or 'landscape')}.{args.format}"
        viz.export(ls, target, format=args.format)
        print(target)
    return 0


def _cmd_ls(args) -> int:
    from collector import SummaryReader
    import viz

    if not args.base_dir.is_dir():
        raise _UsageError(f"not a directory: {str(args.base_dir)!r}")
    rows = []
    for run in viz.find_runs(args.base_dir):
        reader = SummaryReader(run)
        scalars = reader.scalars()
        loss = scalars.get("loss/auto")
        rows.append({
            "run": os.path.relpath(run, args.base_dir),
            "landscapes": [tag for _, tag, _ in reader.landscape_messages()],
            "scalars": sorted(scalars),
            "final_loss": float(loss[1][-1]) if loss is not None and len(loss[1]) else None,
            "damaged": [str(i) for i in reader.issues],
        })
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    if not rows:
        print(f"no runs under {args.base_dir}")
        return 0
    for row in rows:
        loss = "-" if row["final_loss"] is None else f"{row['final_loss']:.6g}"
        print(f"{row['run']}\tfinal loss {loss}\tscalars: {', '.join(row['scalars']) or '-'}")
        for tag in row["landscapes"]:
            print(f"\t{tag}")
        for issue in row["damaged"]:
            print(f"\tdamaged: {issue}")
    return 0


_COMMANDS = {"demo": _cmd_demo, "run": _cmd_run, "gen": _cmd_gen, "plot": _cmd_plot, "ls": _cmd_ls,
             "export": _cmd_export}


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``landscape`` command; returns the exit status."""
    from collector.common._validation import InvalidParameterError

    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    if args.command == "lineage":
        return importlib.import_module("landscape.cli._lineage").run_lineage(args)
    try:
        return _COMMANDS[args.command](args)
    except (_UsageError, InvalidParameterError) as exc:
        print(f"landscape {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("landscape: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - one clear line, the traceback with -v
        if args.verbose:
            logger.exception("failed")
        print(f"landscape {args.command}: failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
