"""Exports carry the clamped counts: a CSV column, a VTP point array, an HDF5 dataset; a metric that is
NaN where the loss is is written as nan."""

from __future__ import annotations

import csv
import xml.etree.ElementTree as ET

import h5py
import numpy as np

import viz
from tests.viz.html._pages import clamped_line, clamped_plane
from tests.viz.io.test_export import floats, known


def _rows(path) -> tuple[list[str], list[list[str]]]:
    with open(path, newline="") as fh:
        rows = list(csv.reader(fh))
    return rows[0], rows[1:]


def test_csv_has_a_clamped_channels_column_only_when_there_are_counts(tmp_path):
    ls = clamped_plane()
    header, body = _rows(viz.export(ls, tmp_path / "p.csv"))
    assert header == ["x", "y", "loss", "accuracy", "clamped_channels"]
    assert [int(r[4]) for r in body] == ls.clamped.ravel().tolist()       # row-major over y, then x
    assert [(float(r[0]), float(r[1])) for r in body] == [(x, y) for y in ls.y for x in ls.x]
    nan_row = body[2 * ls.x.size + 6]                                     # z[2, 6] is NaN, and so its accuracy
    assert (nan_row[2], nan_row[3], nan_row[4]) == ("nan", "nan", "3")
    line = clamped_line()
    header, body = _rows(viz.export(line, tmp_path / "l.csv"))
    assert header == ["x", "loss", "accuracy", "clamped_channels"]
    assert [int(r[3]) for r in body] == line.clamped.tolist() and body[8][1:3] == ["nan", "nan"]
    header, _ = _rows(viz.export(known(), tmp_path / "k.csv"))            # None: nothing could be clamped
    assert header == ["x", "y", "loss", "accuracy"]


def test_vtp_and_h5_carry_the_counts(tmp_path):
    ls = clamped_plane()
    root = ET.parse(viz.export(ls, tmp_path / "p.vtp")).getroot()
    (array,) = root.findall("PolyData/Piece/PointData/DataArray[@Name='clamped_channels']")
    assert array.get("type") == "Int32"
    np.testing.assert_array_equal(floats(array.text), ls.clamped.ravel())
    (count,) = root.findall("PolyData/FieldData/DataArray[@Name='clamped_points']")
    assert int(count.text) == int(np.count_nonzero(ls.clamped))
    root = ET.parse(viz.export(known(), tmp_path / "k.vtp")).getroot()
    assert not root.findall(".//DataArray[@Name='clamped_channels']")
    with h5py.File(viz.export(ls, tmp_path / "p.h5"), "r") as fh:
        np.testing.assert_array_equal(fh["clamped_channels"][()], ls.clamped)
    (back,) = viz.load_landscapes(tmp_path / "p.h5")
    np.testing.assert_array_equal(back.clamped, ls.clamped)
