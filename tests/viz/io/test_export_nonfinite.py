"""Exports carry NaN and infinite values: CSV writes the tokens nan/inf/-inf where they were,
VTP says which points are real, HDF5 keeps them bit for bit."""

from __future__ import annotations

import csv
import xml.etree.ElementTree as ET

import h5py
import numpy as np

import viz
from tests.viz.io.test_export import X, Y, floats, known

PLANTED = {(0, 1): np.nan, (2, 3): np.inf, (3, 0): -np.inf}   # (i, j) -> value of z[i, j]


def planted():
    ls = known()
    for (i, j), v in PLANTED.items():
        ls.z[i, j] = v
    ls.surfaces["accuracy"][1, 1] = np.nan
    return ls


def test_csv_writes_explicit_tokens_at_the_planted_rows(tmp_path):
    ls = planted()
    out = viz.export(ls, tmp_path / "s.csv")
    with open(out, newline="") as fh:
        rows = list(csv.reader(fh))
    header, body = rows[0], rows[1:]
    assert header == ["x", "y", "loss", "accuracy"]
    tokens = {k: row[2] for k, row in enumerate(body) if row[2] in ("nan", "inf", "-inf")}
    expected = {i * X.size + j: {np.isnan(v): "nan", v == np.inf: "inf", v == -np.inf: "-inf"}[True]
                for (i, j), v in PLANTED.items()}
    assert tokens == expected
    assert body[1 * X.size + 1][3] == "nan"
    back = np.genfromtxt(out, delimiter=",", skip_header=1)                # numpy reads the tokens back
    np.testing.assert_array_equal(back[:, 2], ls.z.ravel())
    np.testing.assert_array_equal(back[:, 3], ls.surfaces["accuracy"].ravel())


def test_vtp_says_which_points_are_real(tmp_path):
    ls = planted()
    root = ET.parse(viz.export(ls, tmp_path / "s.vtp")).getroot()
    piece = root.find("PolyData/Piece")
    arrays = {a.get("Name"): floats(a.text) for a in piece.findall("PointData/DataArray")}
    expected = np.isfinite(ls.z).ravel().astype(float)
    np.testing.assert_array_equal(arrays["finite"], expected)
    np.testing.assert_array_equal(arrays["finite_accuracy"], np.isfinite(ls.surfaces["accuracy"]).ravel())
    lifted = arrays["loss"][expected == 0]
    assert np.all(lifted == np.nanmax(np.where(np.isfinite(ls.z), ls.z, np.nan)))   # lifted, flagged
    (count,) = root.findall("PolyData/FieldData/DataArray[@Name='nonfinite_points']")
    assert int(count.text) == len(PLANTED)
    conn = floats(piece.find("Polys/DataArray[@Name='connectivity']").text).astype(int)
    assert not set(conn) & {i * X.size + j for i, j in PLANTED}        # no quad through a lifted point


def test_h5_keeps_them(tmp_path):
    ls = planted()
    with h5py.File(viz.export(ls, tmp_path / "s.h5"), "r") as fh:
        np.testing.assert_array_equal(fh["train_loss"][()], ls.z)    # NaN == NaN for assert_array_equal
    (back,) = viz.load_landscapes(tmp_path / "s.h5")
    np.testing.assert_array_equal(back.z, ls.z)
    assert back.z.shape == (Y.size, X.size)
