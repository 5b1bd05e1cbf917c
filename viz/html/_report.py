"""``viz.report``: runs as one self-contained interactive HTML file (private)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from collector.common import InvalidParameterError, atomic_path, check_directory, check_param
from landscape.result import Landscape
from viz.html._data import read_run, resolve_runs
from viz.html._page import render_page

__all__ = ["report"]

RunLike = str | os.PathLike | Landscape | Sequence[Landscape]


def _version() -> str:
    try:
        return version("torch-landscape")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown"


def report(runs: RunLike | Sequence[RunLike] | Mapping[str, RunLike], output: str | os.PathLike, *,
           title: str | None = None) -> Path:
    """Write runs' scalars, landscapes and lineage as one interactive HTML file.

    The file is self-contained: plotly's script and every value are inside it, so it
    opens from disk in a browser with no server and no network, and can be shared as a
    paper's supplement. It shows

    - the scalars (loss curves), one curve per run, a selector over the tags;
    - each plane as a rotatable 3-D surface with its path(s) and markers (the trained
      weights or convergence point, the models A, B, C of a view through models) and as
      a contour view with the values under the cursor and the path(s); a landscape
      whose ``paths`` attribute holds several runs' paths (a plane shared by runs)
      draws each in its own colour with a legend;
    - each line (random line, interpolation) as a line with its models;
    - a selector over the runs, their landscapes (intervals) and surfaces (loss,
      accuracy, ...);
    - the lineage table (``collector.lineage.filter_summary_lineage``'s fields).

    Non-finite values are counted in each view's caption and marked with a red ``x``
    at the top of the finite range, never left out silently. The 3-D box keeps the
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
    out = Path(output)
    if out.is_dir():
        raise InvalidParameterError(f"The 'output' parameter of {caller} must be the HTML file to write. Got "
                                    f"{os.fspath(output)!r}, which is an existing folder. HINT: name the file, e.g. "
                                    f"{os.path.join(os.fspath(output), 'report.html')!r}.")
    check_directory("output", os.path.dirname(os.path.abspath(out)), caller=caller,
                    hint="the HTML file's folder is in the way of a file of that name.")
    resolved = resolve_runs(runs, caller)
    data = [read_run(name, source) for name, source in resolved]
    page = render_page(title or "Loss landscapes: " + ", ".join(r.name for r in data), data, _version())
    out.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(out) as tmp, open(tmp, "w", encoding="utf-8", newline="\n") as fh:
        fh.write(page)
    return out
