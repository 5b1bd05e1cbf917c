"""``landscape plot PATH``: PNGs of the landscapes of a run, an events file or an HDF5 file."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import cast

import matplotlib.pyplot as plt
from matplotlib.figure import Figure

import viz
from landscape.cli._common import UsageError, safe_name
from landscape.result import Landscape

__all__ = ["run_plot", "select_landscapes"]


def select_landscapes(path: Path, tag: str | None) -> list[Landscape]:
    """The landscapes of ``path``, or only the one tagged ``tag``."""
    if not path.exists():
        raise UsageError(f"no such file or directory: {str(path)!r}")
    landscapes = viz.load_landscapes(path)
    if tag is not None:
        landscapes = [ls for ls in landscapes if ls.tag == tag]
        if not landscapes:
            raise UsageError(f"--tag {tag!r} not found in {str(path)!r}")
    return landscapes


def run_plot(args: argparse.Namespace) -> int:
    landscapes = select_landscapes(args.path, args.tag)
    kinds = ["contour", "filled", "surface", "heatmap"] if args.kind == "all" else [args.kind]
    single = len(landscapes) * len(kinds) == 1
    if args.output is not None and args.output.suffix:
        # a file name: that file for one figure, else FILE_<tag>[_<kind>].png beside it
        out = args.output
        if single:
            targets = [out]
        else:
            out.parent.mkdir(parents=True, exist_ok=True)
            targets = [out.with_name(f"{out.stem}_{safe_name(ls.tag or 'landscape')}"
                                     f"{'_' + k if len(kinds) > 1 else ''}{out.suffix}")
                       for ls in landscapes for k in kinds]
    else:
        folder = args.output or (args.path if args.path.is_dir() else args.path.parent) / "plots"
        folder.mkdir(parents=True, exist_ok=True)
        targets = [folder / f"{safe_name(ls.tag or 'landscape')}_{k}.png" for ls in landscapes for k in kinds]
    pairs = [(ls, k) for ls in landscapes for k in kinds]
    for (ls, kind), target in zip(pairs, targets):
        fig = cast(Figure, viz.plot(ls, kind=kind, log=True if args.log else "auto").figure)
        fig.savefig(target, dpi=120, bbox_inches="tight")
        plt.close(fig)
        print(target)
    return 0
