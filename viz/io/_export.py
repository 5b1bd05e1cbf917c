"""Exports: VTP for ParaView, CSV, and HDF5 in Li et al.'s layout (private)."""

from __future__ import annotations

import csv
import os
from pathlib import Path

import numpy as np

from collector.common import Options, check_param
from landscape.io import write_h5_single
from landscape.result import Landscape
from viz.io._arrays import check_landscape, line_values, surface_values
from viz.io._picture import clamped_grid

__all__ = ["export", "FORMATS"]

FORMATS = ("vtp", "csv", "h5")
_SUFFIX = {".vtp": "vtp", ".csv": "csv", ".h5": "h5", ".hdf5": "h5"}


def export(landscape: Landscape, path: str | os.PathLike, format: str | None = None) -> Path:
    """Write a landscape as VTP (ParaView), CSV or HDF5 (Li et al.'s layout).

    Parameters
    ----------
    landscape : Landscape
        The landscape to write.
    path : str or os.PathLike
        Output file (replaced if it exists).
    format : {"vtp", "csv", "h5"}, optional
        By default taken from the suffix of ``path`` (.vtp, .csv, .h5/.hdf5).

        - "vtp": VTK XML PolyData (ASCII): one point per grid cell at
          ``(x[j], y[i], loss)``, a "loss" point-data array (plus one per extra surface),
          quads as polys. VTK cannot draw NaN, so NaN/inf points are *lifted* to the
          largest finite loss, the quads touching them are left out, and the UInt8
          point-data array "finite" says which points are real (1) and which lifted (0);
          an extra surface with NaN/inf values gets its own "finite_<name>" array, and
          the field data "nonfinite_points" counts the loss's (threshold on "finite" in
          ParaView to see or hide them). A line is one polyline through
          ``(x[j], 0, loss)`` (broken at NaN/inf points), with the same arrays.
        - "csv": columns x, y, loss, then one per extra surface; one row per grid point
          (row-major over y, then x). A line has columns x, loss and its surfaces. Every
          value is written exactly (``repr`` of the float); a NaN or infinite value is
          the token ``nan``, ``inf`` or ``-inf``, which Python's ``float`` and
          ``numpy.genfromtxt`` read back as such (a metric where the loss is NaN is
          ``nan`` too). A landscape with ``clamped`` counts has a last column
          ``clamped_channels``: the batch-norm channels clamped at zero at the point.
        - "h5": ``xcoordinates``, ``ycoordinates``, ``train_loss`` (shape (len(y), len(x)))
          and one dataset per extra surface at the top level, as Li et al.'s
          ``plot_2D.py``/``h52vtp.py`` read them; the tag, the metadata and the
          convergence point as attributes, the path (if any) in a ``path`` group, the
          markers as the attribute ``markers``. A line has no ``ycoordinates`` and a
          ``train_loss`` of shape (len(x),), as Li et al.'s ``plot_1D.py`` reads it. The
          ``clamped`` counts, when there are any, are the int32 dataset
          ``clamped_channels`` shaped like ``train_loss`` (``landscape.write_h5``'s layout).

    Returns
    -------
    Path
        The file written.
    """
    ls = check_landscape(landscape, "export")
    check_param("path", path, ["path"], caller="export")
    check_param("format", format, [None, Options(FORMATS)], caller="export",
                hint="or leave it None and give path a .vtp, .csv or .h5 suffix.")
    out = Path(path)
    if format is None:
        format = _SUFFIX.get(out.suffix.lower())
        if format is None:
            raise ValueError(f"The 'format' parameter of export must be one of {', '.join(map(repr, FORMATS))} "
                             f"when path has no .vtp/.csv/.h5 suffix. Got None with path {os.fspath(path)!r}.")
    if ls.dims > 2 and format != "h5":
        raise ValueError(f"export writes a grid of {ls.dims} directions ({ls.tag or 'this landscape'!r}) as h5 only: "
                         f"VTP and CSV hold lines and planes. Got format {format!r}. HINT: format='h5'.")
    x, y, z = _arrays(ls) if ls.dims <= 2 else (np.asarray(ls.x), np.asarray(ls.y), np.asarray(ls.z))
    clamped_grid(ls)  # a count array not shaped like z is refused before anything is written
    if out.parent and not out.parent.exists():
        raise FileNotFoundError(f"The directory of 'path' does not exist: {os.fspath(out.parent)!r}.")
    {"vtp": _write_vtp, "csv": _write_csv, "h5": _write_h5}[format](ls, out, x, y, z)
    return out


def _arrays(ls: Landscape) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    x = np.asarray(ls.x, dtype=np.float64).reshape(-1)
    y = np.asarray(ls.y, dtype=np.float64).reshape(-1)
    z = line_values(ls, "loss", "export") if ls.dims == 1 else surface_values(ls, "loss", "export")
    return x, y, z


def _fmt(values: np.ndarray) -> str:
    return " ".join(repr(float(v)) for v in np.ravel(values))


def _filled(values: np.ndarray) -> np.ndarray:
    """Non-finite values replaced by the largest finite one (VTK readers cannot draw NaN)."""
    finite = np.isfinite(values)
    return np.where(finite, values, values[finite].max() if finite.any() else 0.0)


def _write_vtp(ls: Landscape, out: Path, x: np.ndarray, y: np.ndarray, z: np.ndarray) -> None:
    """A plane as VTK PolyData quads (a quad only where its four corners are finite), a line as
    polylines at ``(x, 0, loss)`` (one per run of finite values)."""
    finite = np.isfinite(z).ravel()
    if ls.dims == 1:
        points = np.column_stack([x, np.zeros_like(x), _filled(z)])
        runs, start = [], None
        for k in range(x.size + 1):
            if k < x.size and finite[k]:
                start = k if start is None else start
            elif start is not None:
                if k - start >= 2:
                    runs.append(list(range(start, k)))
                start = None
        cells = "Lines"
        conn = [i for run in runs for i in run]
        offsets = np.cumsum([len(r) for r in runs]).astype(np.int64).tolist()
    else:
        nx, ny = x.size, y.size
        X, Y = np.meshgrid(x, y)  # point k = i * nx + j is (x[j], y[i])
        points = np.column_stack([X.ravel(), Y.ravel(), _filled(z).ravel()])
        polys = []
        for i in range(ny - 1):
            for j in range(nx - 1):
                k = i * nx + j
                quad = (k, k + 1, k + 1 + nx, k + nx)
                if all(finite[q] for q in quad):
                    polys.append(quad)
        cells = "Polys"
        conn = [k for quad in polys for k in quad]
        offsets = (4 * np.arange(1, len(polys) + 1, dtype=np.int64)).tolist()
    arrays = [("loss", _filled(z))] + [(str(name), _filled(np.asarray(surf, dtype=np.float64)))
                                       for name, surf in ls.surfaces.items() if np.shape(surf) == z.shape]
    counts = {"Lines": 0, "Polys": 0, cells: len(offsets)}
    clamped = clamped_grid(ls)
    field = [("nonfinite_points", int(np.count_nonzero(~finite)))]
    if clamped is not None:
        field.append(("clamped_points", int(np.count_nonzero(clamped))))
    lines = ['<?xml version="1.0"?>',
             '<VTKFile type="PolyData" version="1.0" byte_order="LittleEndian">',
             "  <PolyData>",
             "    <FieldData>",
             *(f'      <DataArray type="Int64" Name="{name}" NumberOfTuples="1" format="ascii">{n}</DataArray>'
               for name, n in field),
             "    </FieldData>",
             f'    <Piece NumberOfPoints="{len(points)}" NumberOfVerts="0" NumberOfLines="{counts["Lines"]}" '
             f'NumberOfStrips="0" NumberOfPolys="{counts["Polys"]}">',
             '      <PointData Scalars="loss">']
    for name, vals in arrays:
        lines.append(f'        <DataArray type="Float64" Name="{_xml_attr(name)}" format="ascii">{_fmt(vals)}'
                     "</DataArray>")
    validity = [("finite", finite)] + [(f"finite_{name}", np.isfinite(np.asarray(surf, dtype=np.float64)).ravel())
                                       for name, surf in ls.surfaces.items()
                                       if np.shape(surf) == z.shape and not np.isfinite(surf).all()]
    for name, ok in validity:
        lines.append(f'        <DataArray type="UInt8" Name="{_xml_attr(name)}" format="ascii">'
                     + " ".join("1" if v else "0" for v in ok) + "</DataArray>")
    if clamped is not None:
        lines.append('        <DataArray type="Int32" Name="clamped_channels" format="ascii">'
                     + " ".join(str(int(v)) for v in clamped.ravel()) + "</DataArray>")
    lines += ["      </PointData>", "      <Points>",
              f'        <DataArray type="Float64" NumberOfComponents="3" format="ascii">{_fmt(points)}</DataArray>',
              "      </Points>", f"      <{cells}>",
              '        <DataArray type="Int64" Name="connectivity" format="ascii">'
              + " ".join(map(str, conn)) + "</DataArray>",
              '        <DataArray type="Int64" Name="offsets" format="ascii">'
              + " ".join(map(str, offsets)) + "</DataArray>",
              f"      </{cells}>", "    </Piece>", "  </PolyData>", "</VTKFile>", ""]
    out.write_text("\n".join(lines), encoding="utf-8")


def _xml_attr(text: str) -> str:
    return (text.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;").replace(">", "&gt;"))


def _write_csv(ls: Landscape, out: Path, x: np.ndarray, y: np.ndarray, z: np.ndarray) -> None:
    extra = [(str(n), np.asarray(s, dtype=np.float64)) for n, s in ls.surfaces.items()
             if np.shape(s) == z.shape]
    clamped = clamped_grid(ls)
    tail = ["clamped_channels"] if clamped is not None else []

    def counts(index: tuple[int, ...]) -> list[str]:
        return [str(int(clamped[index]))] if clamped is not None else []

    with open(out, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        if ls.dims == 1:
            w.writerow(["x", "loss", *(n for n, _ in extra), *tail])
            for j in range(x.size):
                w.writerow([repr(float(x[j])), repr(float(z[j])), *(repr(float(s[j])) for _, s in extra),
                            *counts((j,))])
            return
        w.writerow(["x", "y", "loss", *(n for n, _ in extra), *tail])
        for i in range(y.size):
            for j in range(x.size):
                w.writerow([repr(float(x[j])), repr(float(y[i])), repr(float(z[i, j])),
                            *(repr(float(s[i, j])) for _, s in extra), *counts((i, j))])


def _write_h5(ls: Landscape, out: Path, x: np.ndarray, y: np.ndarray, z: np.ndarray) -> None:
    write_h5_single(out, ls)
