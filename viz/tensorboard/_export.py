"""``export_tensorboard``: summary directories as TensorBoard runs (private)."""

from __future__ import annotations

import logging
import os
import struct
from pathlib import Path
from typing import Any

from collector.common import check_param
from collector.summary import TensorBoardWriter, read_events
from landscape.result import Landscape
from viz.io import find_runs
from viz.plots import repr_png

__all__ = ["export_tensorboard"]

_log = logging.getLogger("landscape")

#: The picture of each landscape: its tag plus this (a plane's filled contour, a line's chart).
IMAGE_SUFFIX = "/filled_contour"
LINE_IMAGE_SUFFIX = "/line"


#: PNG colour type -> channels (grey, RGB, palette, grey + alpha, RGBA)
_PNG_CHANNELS = {0: 1, 2: 3, 3: 3, 4: 2, 6: 4}


def _png_shape(png: bytes) -> tuple[int, int, int]:
    """``(width, height, channels)`` from a PNG's IHDR chunk (the first, at a fixed offset)."""
    width, height, _depth, colour = struct.unpack(">IIBB", png[16:26])
    return width, height, _PNG_CHANNELS.get(colour, 4)


def _runs(path: Path) -> list[tuple[Path, Path]]:
    """``(source, its place relative to the output)``: one file, or every run under a directory."""
    if path.is_file():
        return [(path, Path("."))]
    return [(run, run.relative_to(path)) for run in find_runs(path)]


def export_tensorboard(path: str | os.PathLike, out_dir: str | os.PathLike | None = None, *,
                       images: bool = True) -> list[Path]:
    """Convert summaries (ours or MindSpore's) into TensorBoard event files.

    Every run under ``path`` (a directory holding summary files; ``path`` itself
    included) becomes a TensorBoard run at the same relative place under ``out_dir``:
    scalars, histograms, images and tensors as TensorBoard's own kinds, the lineage as
    hyper-parameters and metrics (HParams dashboard), each plane as a 3-D mesh (Mesh
    dashboard; scaled to fill the viewer, the scale in its description), a tensor
    ``{tag}/grid`` of ``(x, y, loss)`` per grid point and a picture
    ``{tag}/filled_contour`` (the filled contour with its path), and each line (random
    line, interpolation) as the scalar series ``{tag}/loss`` (step k: point k), a tensor
    ``{tag}/grid`` of ``(x, loss)`` and a picture ``{tag}/line``; see
    :class:`collector.summary.TensorBoardWriter`. Damaged records are skipped (and
    logged), as the reader skips them. Graphs are not converted.

    Parameters
    ----------
    path : str or os.PathLike
        A run directory, a directory of runs (searched recursively), or one summary file.
    out_dir : str or os.PathLike, optional
        Where the TensorBoard runs go (``tensorboard --logdir out_dir``); default
        ``{path}/export/tensorboard`` (next to a file: ``{its folder}/export/tensorboard``).
        A run's event files from an earlier export there are replaced.
    images : bool, default=True
        Draw each landscape's picture (matplotlib; about 0.1 s each).

    Returns
    -------
    list of Path
        The TensorBoard run directories written, in order.

    Examples
    --------
    >>> import viz                                                   # doctest: +SKIP
    >>> viz.export_tensorboard("runs", "tb")                         # doctest: +SKIP
    [PosixPath('tb/mlp'), PosixPath('tb/cnn')]
    """
    c = "export_tensorboard"
    check_param("path", path, ["path"], caller=c)
    check_param("out_dir", out_dir, [None, "path"], caller=c)
    check_param("images", images, ["boolean"], caller=c)
    src = Path(path)
    if not src.exists():
        raise FileNotFoundError(f"The 'path' parameter of {c} must be an existing summary directory or file. "
                                f"Got {os.fspath(path)!r} instead.")
    out = Path(out_dir) if out_dir is not None else (src if src.is_dir() else src.parent) / "export" / "tensorboard"
    runs = _runs(src)
    if not runs:
        raise FileNotFoundError(f"No summary file under {os.fspath(path)!r} (a run directory holds files whose name "
                                "contains 'summary.' and digits).")
    written = []
    for run, where in runs:
        target = (out / where).resolve()
        if target.is_dir():
            for old in target.iterdir():  # an earlier export of this run: replaced, not doubled
                if old.is_file() and "tfevents" in old.name:
                    old.unlink()
        _convert(run, target, images)
        written.append(out / where if where != Path(".") else out)
    return written


def _convert(run: Path, target: Path, images: bool) -> None:
    n = 0
    with TensorBoardWriter(target) as tb:
        event: Any
        for kind, event in read_events(run):
            n += 1
            if kind == "lineage":
                tb.add_lineage_event(event)
                continue
            tb.add_event(event)
            if not images or event.WhichOneof("what") != "summary":
                continue
            for value in event.summary.value:
                if value.WhichOneof("value") != "loss_landscape":
                    continue
                try:
                    ls = Landscape.from_proto(value.loss_landscape, tag=value.tag)
                    line = ls.dims == 1
                    png = repr_png(ls, kind="line" if line else "filled")
                except Exception as exc:  # a landscape that cannot be drawn keeps its mesh and grid
                    _log.warning("landscape %r of %s: no picture (%s: %s)", value.tag, run, type(exc).__name__, exc)
                    continue
                width, height, channels = _png_shape(png)
                tb.add_image_png(value.tag + (LINE_IMAGE_SUFFIX if line else IMAGE_SUFFIX), png, event.step,
                                 event.wall_time, height=height, width=width, channels=channels)
    _log.info("%s: %d events converted to %s", run, n, target)
