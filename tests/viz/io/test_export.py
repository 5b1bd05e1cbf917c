"""Every export read back: VTP through xml.etree, CSV through csv, h5 through h5py."""

from __future__ import annotations

import csv
import xml.etree.ElementTree as ET

import h5py
import numpy as np
import pytest

import viz
from collector import InvalidParameterError
from landscape import Landscape, LossPath

X = np.linspace(-1.0, 1.0, 5)
Y = np.linspace(-2.0, 2.0, 4)


def known(**changes) -> Landscape:
    z = X[None, :] ** 2 + 2 * Y[:, None] ** 2
    kw = dict(x=X, y=Y, z=z, path=LossPath(np.array([-0.5, 0.0]), np.array([1.0, 0.0]), np.array([2.25, 0.0]),
                                           [3, 4]),
              convergence_point=(0.0, 0.0, 0.0), metadata={"decomposition": "PCA", "unit": "step"},
              surfaces={"accuracy": 1.0 - z / 10}, tag="landscape_[3, 4]")
    kw.update(changes)
    return Landscape(**kw)


def floats(text):
    return np.array([float(v) for v in text.split()])


def test_vtp(tmp_path):
    ls = known()
    out = viz.export(ls, tmp_path / "s.vtp")
    root = ET.parse(out).getroot()
    assert root.tag == "VTKFile" and root.get("type") == "PolyData"
    piece = root.find("PolyData/Piece")
    assert int(piece.get("NumberOfPoints")) == X.size * Y.size
    assert int(piece.get("NumberOfPolys")) == (X.size - 1) * (Y.size - 1)
    pts = floats(piece.find("Points/DataArray").text).reshape(-1, 3)
    assert pts.shape == (X.size * Y.size, 3)
    gx, gy = np.meshgrid(X, Y)
    np.testing.assert_array_equal(pts[:, 0], gx.ravel())
    np.testing.assert_array_equal(pts[:, 1], gy.ravel())
    np.testing.assert_array_equal(pts[:, 2], ls.z.ravel())
    arrays = {a.get("Name"): a for a in piece.findall("PointData/DataArray")}
    np.testing.assert_array_equal(floats(arrays["loss"].text), ls.z.ravel())
    np.testing.assert_array_equal(floats(arrays["accuracy"].text), ls.surfaces["accuracy"].ravel())
    polys = {a.get("Name"): a for a in piece.findall("Polys/DataArray")}
    conn = floats(polys["connectivity"].text).astype(int).reshape(-1, 4)
    offsets = floats(polys["offsets"].text).astype(int)
    assert list(conn[0]) == [0, 1, X.size + 1, X.size] and offsets[-1] == conn.size
    assert conn.max() == X.size * Y.size - 1


def test_vtp_non_finite_points_lose_their_quads(tmp_path):
    ls = known()
    ls.z[0, 0] = np.nan
    piece = ET.parse(viz.export(ls, tmp_path / "s.vtp")).getroot().find("PolyData/Piece")
    assert int(piece.get("NumberOfPolys")) == (X.size - 1) * (Y.size - 1) - 1
    pts = floats(piece.find("Points/DataArray").text).reshape(-1, 3)
    assert np.isfinite(pts).all()
    finite = {a.get("Name"): a for a in piece.findall("PointData/DataArray")}["finite"]
    assert floats(finite.text)[0] == 0 and floats(finite.text)[1:].all()


def test_csv(tmp_path):
    ls = known()
    ls.z[1, 2] = np.inf
    out = viz.export(ls, tmp_path / "s.txt", format="csv")
    with open(out, newline="") as fh:
        rows = list(csv.reader(fh))
    assert rows[0] == ["x", "y", "loss", "accuracy"]
    data = np.array(rows[1:], dtype=float)
    assert data.shape == (X.size * Y.size, 4)
    gx, gy = np.meshgrid(X, Y)
    np.testing.assert_array_equal(data[:, 0], gx.ravel())
    np.testing.assert_array_equal(data[:, 1], gy.ravel())
    np.testing.assert_array_equal(data[:, 2], ls.z.ravel())
    np.testing.assert_array_equal(data[:, 3], ls.surfaces["accuracy"].ravel())


def test_h5_li_layout_and_round_trip(tmp_path):
    ls = known()
    out = viz.export(ls, tmp_path / "s.h5")
    with h5py.File(out, "r") as fh:
        np.testing.assert_array_equal(fh["xcoordinates"][()], X)
        np.testing.assert_array_equal(fh["ycoordinates"][()], Y)
        np.testing.assert_array_equal(fh["train_loss"][()], ls.z)
        np.testing.assert_array_equal(fh["accuracy"][()], ls.surfaces["accuracy"])
        assert fh.attrs["tag"] == "landscape_[3, 4]"
    (back,) = viz.load_landscapes(out)
    assert back.tag == ls.tag and back.metadata["decomposition"] == "PCA"
    np.testing.assert_array_equal(back.z, ls.z)
    np.testing.assert_array_equal(back.surfaces["accuracy"], ls.surfaces["accuracy"])
    np.testing.assert_array_equal(back.path.x, ls.path.x)
    assert back.path.intervals == [3, 4] and back.convergence_point == ls.convergence_point


def test_mindspore_landscape_exports(tmp_path, mindspore_run):
    for k, ls in enumerate(viz.load_landscapes(mindspore_run)):
        for fmt in ("vtp", "csv", "h5"):
            assert viz.export(ls, tmp_path / f"{k}.{fmt}").stat().st_size > 0


def test_bad_format(tmp_path):
    with pytest.raises(InvalidParameterError, match="'format' parameter of export must be None or one of"):
        viz.export(known(), tmp_path / "s.vtp", format="obj")
    with pytest.raises(ValueError, match="'format' parameter of export"):
        viz.export(known(), tmp_path / "s.dat")
    with pytest.raises(InvalidParameterError, match="'landscape' parameter of export"):
        viz.export({"x": 1}, tmp_path / "s.vtp")
