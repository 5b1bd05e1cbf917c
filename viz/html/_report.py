"""``viz.report``: runs as one self-contained interactive HTML file (private)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Literal

from collector.common import Interval, InvalidParameterError, Options, atomic_path, check_directory, check_param
from landscape.result import Landscape
from viz.html._data import PATHS, read_run, resolve_runs, shown_sources
from viz.html._page import render_page

__all__ = ["report"]

RunLike = str | os.PathLike | Landscape | Sequence[Landscape]


def _version() -> str:
    try:
        return version("torch-landscape")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown"


def report(runs: RunLike | Sequence[RunLike] | Mapping[str, RunLike], output: str | os.PathLike, *,
           title: str | None = None, log: bool | Literal["auto"] = "auto", levels: int = 20,
           paths: Literal["relative", "absolute"] = "relative") -> Path:
    """Write runs' scalars, landscapes and lineage as one interactive HTML file.

    The file is self-contained: plotly's script and every value are inside it, so it
    opens from disk in a browser with no server and no network, and can be shared as a
    paper's supplement. It shows

    - the scalars (loss curves), one curve per run, a selector over the tags;
    - each plane as a rotatable 3-D surface with its path(s) and markers and as a
      contour view with the values under the cursor and the path(s); a landscape
      whose ``paths`` attribute holds several runs' paths (a plane shared by runs)
      draws each in its own colour with a legend. The centre is marked where the PNGs
      (:func:`viz.plot`) mark it and named as they name it: the exactly evaluated centre
      (``metadata["centre"]``, never the grid point beside it) of the "trained
      weights", a shared plane's "shared centre: run sgd's end" (or the runs' start,
      their mean), the models A, B, C of a view through models;
    - each line (random line, interpolation) as a line with its models;
    - a selector over the runs, their landscapes (intervals) and surfaces (loss,
      accuracy, ...);
    - the lineage table (``collector.lineage.filter_summary_lineage``'s fields).

    The colours follow the PNGs' rule (:func:`viz.io.value_scale`): a log scale when
    the values are positive and span more than a decade (a CNN's loss from 0.004 to 15
    is one flat basin on a linear scale), the range ending at the largest value that is
    not an outlier; ``levels`` contour levels over it; buttons on each view switch
    between log and linear colours. Non-finite values are counted in each view's caption
    and marked with a red ``x`` at the top of the finite range, never left out silently;
    points whose batch-norm variances were clamped at zero (``Landscape.clamped``) are
    marked with an open orange square and counted in the caption ("22 of 101 points
    with batch-norm variances clamped at zero"). The 3-D box keeps the
    plane's proportions (stretched to at most 4:1, as the caption says) and scales the
    value axis to 0.6 of its width, so the default camera frames the surface whatever
    the units (a PCA plane may span 0.1 while the loss spans 2).

    Parameters
    ----------
    runs : path, Landscape, list of Landscape, a list of these, or dict of str to one of these
        A run directory (summary files and/or ``landscapes.h5``), a directory of runs
        (every run under it), a summary file, an HDF5 file (``landscape.write_h5``'s or
        Li et al.'s layout), or Landscape objects; a dict names the runs (else they are
        named by their paths, relative to the folder they share).
    output : str or os.PathLike
        The HTML file to write (replaced atomically if it exists; its folder is created).
    title : str, optional
        The page's title; default "Loss landscapes: " and the run names.
    log : bool or "auto", default="auto"
        The colours shown first: "auto" as the PNGs choose (log when the values are
        positive and span more than a decade), True log (where the values are all
        positive), False linear. Either way the page's buttons switch.
    levels : int, default=20
        Contour levels of the contour views (as ``viz.plot``'s ``levels``).
    paths : {"relative", "absolute"}, default="relative"
        How the runs table shows where each run was read from: relative to the folder
        the runs share (no absolute path of this machine goes into a page that is
        shared; the notes' paths and a lineage's dataset paths likewise), or absolute.

    Returns
    -------
    Path
        ``output``.

    Raises
    ------
    InvalidParameterError
        A parameter is invalid (a path that does not exist or holds no run, an output
        that is a folder), before anything is read or written.
    ImportError
        plotly is not installed (``pip install 'torch-landscape[report]'``).

    Examples
    --------
    >>> import viz                                                       # doctest: +SKIP
    >>> viz.report(["runs/sgd", "runs/adam"], "report.html")             # doctest: +SKIP
    PosixPath('report.html')
    >>> viz.report({"sgd": "runs/sgd", "mine": landscapes}, "r.html",   # doctest: +SKIP
    ...            title="SGD against my landscapes")
    """
    caller = "report"
    check_param("output", output, ["path"], caller=caller)
    check_param("title", title, [None, "nonempty_str"], caller=caller)
    check_param("log", log, ["boolean", Options(["auto"])], caller=caller)
    check_param("levels", levels, [Interval(int, 2, None)], caller=caller,
                hint="the number of contour levels, 20 by default.")
    check_param("paths", paths, [Options(PATHS)], caller=caller,
                hint="'relative' keeps this machine's folders out of a page that is shared.")
    out = Path(output)
    if out.is_dir():
        raise InvalidParameterError(f"The 'output' parameter of {caller} must be the HTML file to write. Got "
                                    f"{os.fspath(output)!r}, which is an existing folder. HINT: name the file, e.g. "
                                    f"{os.path.join(os.fspath(output), 'report.html')!r}.")
    check_directory("output", os.path.dirname(os.path.abspath(out)), caller=caller,
                    hint="the HTML file's folder is in the way of a file of that name.")
    resolved = resolve_runs(runs, caller)
    shown, base = shown_sources([s if isinstance(s, Path) else None for _, s in resolved], paths)
    data = [read_run(name, source, where, base) for (name, source), where in zip(resolved, shown)]
    page = render_page(title or "Loss landscapes: " + ", ".join(r.name for r in data), data, _version(),
                       log=log, levels=levels)
    out.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(out) as tmp, open(tmp, "w", encoding="utf-8", newline="\n") as fh:
        fh.write(page)
    return out
