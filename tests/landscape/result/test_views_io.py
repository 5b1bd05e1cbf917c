"""Lines, non-square planes and markers through LossLandscape messages, summary files and HDF5."""

from __future__ import annotations

import h5py
import numpy as np

import landscape
import viz
from collector import SummaryRecord, proto
from landscape import Landscape


def _line():
    x = np.linspace(-0.5, 1.5, 9)
    z = (x - 1.0) ** 2 + 0.25
    return Landscape(x=x, y=np.zeros(0), z=z, convergence_point=(0.0, 0.0, 1.25),
                     metadata={"decomposition": "Interpolation", "dims": 1}, surfaces={"accuracy": 1 - z / 4},
                     tag="interpolation_[1, 10]", markers={"A": (0.0, 0.0, 1.25), "B": (1.0, 0.0, 0.25)})


def _plane():
    x, y = np.linspace(-0.2, 2.2, 7), np.linspace(-0.1, 0.6, 4)
    z = np.add.outer(y ** 2, (x - 1) ** 2)
    return Landscape(x=x, y=y, z=z, convergence_point=(0.0, 0.0, 1.0),
                     metadata={"decomposition": "Plane"}, tag="plane_[1, 5, 10]",
                     markers={"A": (0.0, 0.0, 1.0), "B": (2.0, 0.0, 1.0), "C": (1.5, 0.5, 0.5)})


def test_line_message_round_trip():
    ls = _line()
    msg = ls.to_proto()
    assert list(msg.landscape.z.dims) == [9] and list(msg.landscape.y.dims) == [0]
    assert list(msg.convergence_point.x.dims) == [3]   # the convergence point, then A and B
    assert msg.metadata.decomposition == "Interpolation"
    back = Landscape.from_proto(msg.SerializeToString(), tag=ls.tag)
    assert back.dims == 1 and back.z.shape == (9,) and back.y.size == 0
    np.testing.assert_allclose(back.z, ls.z, rtol=1e-7)
    assert list(back.markers) == ["A", "B"]
    np.testing.assert_allclose(back.markers["B"], ls.markers["B"], rtol=1e-7)
    assert back.convergence_point == ls.convergence_point


def test_non_square_plane_message_keeps_mindspore_layout():
    ls = _plane()
    msg = ls.to_proto()
    assert list(msg.landscape.z.dims) == [4, 7] and list(msg.landscape.x.dims) == [7]
    assert msg.convergence_point.x.data_type == proto.DT_FLOAT64
    back = Landscape.from_proto(msg)
    assert back.z.shape == (4, 7)
    np.testing.assert_allclose(back.z, ls.z, rtol=1e-6)
    assert list(back.markers) == ["A", "B", "C"] and back.markers["C"][:2] == (1.5, 0.5)


def test_summary_file_round_trip(tmp_path):
    with SummaryRecord(str(tmp_path)) as rec:
        for ls in (_line(), _plane()):
            rec.add_value("landscape", ls.tag, ls)
            rec.record(0)
    line, plane = viz.load_landscapes(tmp_path)   # no landscapes.h5: the summary messages alone
    assert line.dims == 1 and line.z.shape == (9,) and plane.z.shape == (4, 7)
    assert list(plane.markers) == ["A", "B", "C"]


def test_h5_round_trip_and_li_et_al_1d_layout(tmp_path):
    path = tmp_path / "landscapes.h5"
    landscape.write_h5(path, [_line(), _plane()])
    back = landscape.read_h5(path)
    line, plane = back["interpolation_[1, 10]"], back["plane_[1, 5, 10]"]
    np.testing.assert_array_equal(line.z, _line().z)
    np.testing.assert_array_equal(line.surfaces["accuracy"], _line().surfaces["accuracy"])
    assert line.markers == _line().markers and plane.markers == _plane().markers
    np.testing.assert_array_equal(plane.y, _plane().y)
    with h5py.File(path) as fh:
        g = fh["interpolation_[1, 10]"]
        assert "ycoordinates" not in g and g["train_loss"].shape == (9,)
    # Li et al.'s own 1-D file (plot_1D.py's layout: no ycoordinates, train_loss and train_acc of (n,))
    x = np.linspace(-1, 1, 5)
    with h5py.File(tmp_path / "li.h5", "w") as fh:
        fh["xcoordinates"], fh["train_loss"], fh["train_acc"] = x, x ** 2, 100 - x ** 2
        fh["dir_file"] = "model.t7_weights.h5"
    (li,) = viz.load_landscapes(tmp_path / "li.h5")
    assert li.dims == 1 and li.convergence_point == (0.0, 0.0, 0.0)
    np.testing.assert_array_equal(li.surfaces["train_acc"], 100 - x ** 2)
