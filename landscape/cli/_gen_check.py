"""``landscape gen``'s options checked before any work (private).

Run before torch, the task module or the data is imported or read, so that a bad option
is refused at once (not after the task module's imports and the data), naming the
option as the user typed it (``--size``, ``--between``), the accepted values, the value
got and a hint. What needs the network or the data (``--ignore`` patterns that match no
parameter, ``--num-samples`` beyond the dataset) is left to ``SummaryLandscape``, which
checks it before evaluating any point.

The task module is located without running it (:func:`locate_task`), and its source is
read for the function's name (:func:`_defines`), so a misspelt ``--task`` is refused
here too.
"""

from __future__ import annotations

import argparse
import ast
import importlib.machinery
import importlib.util
import os
import sys
from pathlib import Path

from collector.common import check_directory
from collector.trajectory import CKPT_DIR, METADATA_FILE, TrainMetadata, read_train_metadata
from landscape.cli._common import UsageError

__all__ = ["check_gen", "split_task", "locate_task", "cwd_on_path", "VIEW_MODELS"]

#: How many checkpoints ``--between`` names for each ``--view`` (a line takes none).
VIEW_MODELS = {"line": 0, "grid": 0, "interpolation": 2, "plane": 3, "target": 2}
#: The directions ``--view grid`` takes, at most (``landscape.geometry.MAX_DIMS``, not imported: no torch here).
MAX_GRID_DIMS = 6
_TASK_FORM = ("MODULE:FUNCTION, FUNCTION returning (model, network, dataset, metrics) or (model, network, "
              "dataset, metrics, task)")


def split_task(spec: str) -> tuple[str, str]:
    """``(module, function)`` of ``--task MODULE:FUNCTION``."""
    module, sep, func = spec.partition(":")
    if not sep or not module or not func:
        raise UsageError(f"--task must be {_TASK_FORM}; got {spec!r}")
    if not func.isidentifier() or not all(part.isidentifier() for part in module.split(".")):
        raise UsageError(f"--task must be {_TASK_FORM} (Python names); got {spec!r}")
    return module, func


def cwd_on_path() -> None:
    """Put the current directory first on ``sys.path``: the task module is the user's, next to where
    they run the command (this is the command's own process)."""
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())


def locate_task(module: str) -> importlib.machinery.ModuleSpec | None:
    """Where the task module is, found as the command imports it (the current directory first),
    without running it (a dotted name's parent packages are imported)."""
    cwd_on_path()
    return importlib.util.find_spec(module)


_DYNAMIC = {"globals", "vars", "exec", "setattr", "__import__"}


def _defines(source: str, name: str) -> bool | None:
    """Whether a module's source binds ``name`` at its top level; None when it cannot be told (a star
    import, a module ``__getattr__``, names made with ``globals()`` or ``exec``, a ``match``,
    source that does not parse): only a sure "no" refuses."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    found: set[str] = set()
    statements = list(tree.body)
    while statements:
        node = statements.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found.add(node.name)
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            if any(a.name == "*" for a in node.names):
                return None
            found.update((a.asname or a.name).split(".")[0] for a in node.names)
            continue
        if isinstance(node, getattr(ast, "Match", ())):
            return None
        for part in ast.walk(node):  # assignments, loop and with targets, walrus; dynamic names give up
            if isinstance(part, ast.Call) and isinstance(part.func, ast.Name) and part.func.id in _DYNAMIC:
                return None
            if isinstance(part, ast.Name) and isinstance(part.ctx, ast.Store):
                found.add(part.id)
        for field in ("body", "orelse", "finalbody", "handlers"):  # if / try / with / for at the top level
            statements.extend(getattr(node, field, []))
    if "__getattr__" in found:
        return None
    return name in found


def _check_task(spec: str) -> None:
    module, func = split_task(spec)
    try:
        found = locate_task(module)
    except Exception as exc:  # a parent package that fails to import: the user's code, worded as theirs
        raise UsageError(f"--task: cannot import module {module!r}: {type(exc).__name__}: {exc}") from None
    if found is None:
        raise UsageError(f"--task: cannot import module {module!r}: no such module in the current directory "
                         f"({os.getcwd()}) or on sys.path. HINT: run the command where {module.split('.')[0]}.py is, "
                         "or make it importable (PYTHONPATH).")
    origin = getattr(found, "origin", None)
    if origin and origin.endswith(".py") and os.path.isfile(origin):
        with open(origin, "rb") as fh:
            defined = _defines(fh.read().decode("utf-8", errors="replace"), func)
        if defined is False:
            raise UsageError(f"--task: module {module!r} ({origin}) defines no {func!r}. HINT: --task takes "
                             f"{_TASK_FORM}.")


def _check_summary_dir(summary_dir: Path) -> TrainMetadata:
    """SUMMARY_DIR's ``train_metadata.json`` (which checkpoints were collected)."""
    if not summary_dir.is_dir():
        raise UsageError(f"SUMMARY_DIR {str(summary_dir)!r} is not a directory. HINT: pass the SummaryCollector's "
                         f"directory (it holds {CKPT_DIR}/{METADATA_FILE}).")
    metadata = summary_dir / CKPT_DIR / METADATA_FILE
    if not metadata.is_file():
        raise UsageError(f"SUMMARY_DIR {str(summary_dir)!r} holds no {CKPT_DIR}/{METADATA_FILE}. HINT: train with "
                         "SummaryCollector(collect_specified_data={'collect_landscape': ...}), which writes it with "
                         "the checkpoints, and pass its directory.")
    try:
        return read_train_metadata(metadata)
    except (OSError, ValueError) as exc:
        raise UsageError(f"SUMMARY_DIR: {exc}") from None


def _check_view(args: argparse.Namespace, md: TrainMetadata) -> None:
    """``--between``, ``--second``, ``--y`` and their ``--view``."""
    view, between = args.view, args.between
    dims, directions = getattr(args, "dims", None), getattr(args, "directions", None)
    if (dims is not None or directions is not None) and view != "grid":
        got = "no --view" if view is None else f"--view {view}"
        raise UsageError(f"--dims and --directions are for --view grid; got {got}. HINT: add --view grid for a grid "
                         "around the last checkpoint.")
    if dims is not None and not 2 <= dims <= MAX_GRID_DIMS:
        raise UsageError(f"--dims must be 2 to {MAX_GRID_DIMS} (the grid's directions); got {dims}.")
    if view == "grid" and (dims or 3) > 2 and getattr(args, "memory", "auto") == "lean":
        raise UsageError("--memory lean does not apply to an n-D grid (--dims 3 and more): it holds its directions.")
    if between is not None:
        if view is None or view in ("line", "grid"):
            got = "no --view" if view is None else f"--view {view}, around the last checkpoint"
            raise UsageError(f"--between {_joined(between)} needs --view interpolation, plane or target (got {got}). "
                             "HINT: add --view interpolation for the line between two checkpoints.")
        want = VIEW_MODELS[view]
        if len(between) != want:
            raise UsageError(f"--between must be {want} checkpoints for --view {view}; got {len(between)} "
                             f"({_joined(between)}).")
        for item in between:
            if isinstance(item, int) and item not in md.files:
                raise UsageError(f"--between {_joined(between)}: no checkpoint of {md.unit} {item} was collected; "
                                 f"collected: {_joined(sorted(md.files))}.")
            if isinstance(item, str) and not os.path.isfile(item):
                raise UsageError(f"--between {_joined(between)}: no checkpoint file {item!r}.")
    if args.second is not None:
        if view != "target":
            raise UsageError(f"--second {args.second} is the second axis of --view target; got "
                             f"{'no --view' if view is None else '--view ' + view}.")
        if args.second == "pca" and between is not None and not all(isinstance(b, int) for b in between):
            raise UsageError(f"--second pca needs --between as two checkpoint numbers (the trajectory runs from one "
                             f"to the other); got {_joined(between)}.")
    if args.y is not None and view in ("line", "interpolation"):
        raise UsageError(f"--y does not apply to --view {view} (a line has one axis, --x).")


def _joined(items: list) -> str:
    return ",".join(str(i) for i in items)


def check_gen(args: argparse.Namespace) -> None:
    """Refuse bad ``landscape gen`` options (see the module docstring); imports nothing heavy."""
    _check_task(args.task)
    md = _check_summary_dir(args.summary_dir)
    if args.output is not None:
        check_directory("--output", args.output, caller="landscape gen",
                        hint="pass the folder the landscapes go to (created if missing).")
    _check_view(args, md)
    for option, patterns in (("--ignore", args.ignore), ("--include", args.include)):
        if patterns and not all(patterns):
            raise UsageError(f"{option} takes a glob pattern; got an empty one.")
    if args.devices is not None and args.distributed:
        raise UsageError("--devices does not apply with --distributed: each torch.distributed process uses one "
                         "device (cuda:LOCAL_RANK, or the CPU). HINT: choose devices with torchrun's "
                         "--nproc_per_node and CUDA_VISIBLE_DEVICES.")
