"""Lines exported as VTP polylines, CSV and Li et al.'s 1-D HDF5, read back."""

from __future__ import annotations

import csv
import xml.etree.ElementTree as ET

import h5py
import numpy as np

import viz
from landscape import read_h5
from tests.viz.plots.test_views import X, Z, line


def test_line_exports(tmp_path):
    ls = line(z=np.where(np.arange(9) == 4, np.inf, Z))   # a diverged point breaks the polyline
    root = ET.parse(viz.export(ls, tmp_path / "l.vtp")).getroot()
    piece = root.find("PolyData/Piece")
    assert int(piece.get("NumberOfPoints")) == 9 and int(piece.get("NumberOfLines")) == 2
    conn = [int(v) for v in piece.find("Lines/DataArray[@Name='connectivity']").text.split()]
    assert conn == [0, 1, 2, 3, 5, 6, 7, 8]
    with open(viz.export(ls, tmp_path / "l.csv"), newline="") as fh:
        rows = list(csv.reader(fh))
    assert rows[0] == ["x", "loss", "accuracy"] and len(rows) == 10 and float(rows[2][0]) == X[1]
    viz.export(line(), tmp_path / "l.h5")
    with h5py.File(tmp_path / "l.h5") as fh:
        assert "ycoordinates" not in fh and fh["train_loss"].shape == (9,)
    (back,) = read_h5(tmp_path / "l.h5").values()
    assert back.markers == line().markers and back.dims == 1
