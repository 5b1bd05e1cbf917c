"""``landscape plot PATH``: PNGs of the landscapes of a run, an events file or an HDF5 file."""

from __future__ import annotations

import argparse
from typing import cast

from matplotlib.figure import Figure

import viz
from collector.common import check_directory
from landscape.cli._common import UsageError, safe_name
from landscape.cli._select import select_landscapes
from landscape.result import Landscape

__all__ = ["run_plot"]


def _kinds(ls: Landscape, kind: str | None) -> list[str]:
    """What to draw of ``ls``: a line is drawn as a line whatever ``--kind`` says of planes;
    ``--kind line`` draws only the lines; ``--kind all`` is ``viz.plot(kind="all")``'s one
    figure (contour, filled, heatmap, surface and the 1-D slices through the centre);
    ``--kind topology`` the topology figure of any landscape, an n-D grid's only picture
    (drawn so by default)."""
    if kind == "topology" or (ls.dims > 2 and kind in (None, "all")):
        return ["topology"]
    if ls.dims > 2:
        return []
    if ls.dims == 1:
        return ["line"]
    if kind == "line":
        return []
    return [kind or "filled"]


def run_plot(args: argparse.Namespace) -> int:
    landscapes = select_landscapes(args.path, args.tag)
    pairs = [(ls, k) for ls in landscapes for k in _kinds(ls, args.kind)]
    if not pairs:
        raise UsageError(f"--kind {args.kind}: {str(args.path)!r} holds no landscape it draws (n-D grids are drawn "
                         "with --kind topology); leave --kind out")
    if args.output is not None and args.output.suffix:
        # a file name: that file for one figure, else FILE_<tag>[_<kind>].png beside it
        out = args.output
        if len(pairs) == 1:
            targets = [out]
        else:
            out.parent.mkdir(parents=True, exist_ok=True)
            several = len({id(ls) for ls, _ in pairs}) < len(pairs)  # some landscape drawn several ways
            targets = [out.with_name(f"{out.stem}_{safe_name(ls.tag or 'landscape')}"
                                     f"{'_' + k if several else ''}{out.suffix}") for ls, k in pairs]
    else:
        folder = args.output or (args.path if args.path.is_dir() else args.path.parent) / "plots"
        check_directory("--output", folder, caller="landscape plot",
                        hint="name a folder for the PNGs, or a file ending in .png when there is one picture.")
        folder.mkdir(parents=True, exist_ok=True)
        targets = [folder / f"{safe_name(ls.tag or 'landscape')}_{k}.png" for ls, k in pairs]
    for (ls, kind), target in zip(pairs, targets):
        extra = {"metric": args.metric} if kind == "line" and args.metric else {}
        drawn = viz.plot(ls, kind=kind, log=True if args.log else "auto", **extra)
        fig = drawn if isinstance(drawn, Figure) else cast(Figure, drawn.figure)  # a Figure for kind="all"
        fig.savefig(target, dpi=120, bbox_inches="tight")  # a plain Figure: no pyplot, nothing to close
        print(target)
    return 0
