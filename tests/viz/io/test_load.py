"""Loading landscapes from MindSpore's summaries, our h5, Li et al.'s h5; finding runs."""

from __future__ import annotations

import shutil

import h5py
import numpy as np
import pytest

import viz
from collector import InvalidParameterError
from landscape import Landscape, LossPath, write_h5

TAGS = ["landscape_[1, 5]", "landscape_[6, 10]", "landscape_[10]"]


def test_mindspore_directory_gives_three_landscapes(mindspore_run):
    found = viz.load_landscapes(mindspore_run)
    assert [ls.tag for ls in found] == TAGS
    pca, _, rnd = found
    assert pca.metadata["decomposition"] == "PCA" and pca.path.intervals == [1, 2, 3, 4, 5]
    assert pca.z.shape == (10, 10) and pca.convergence_point[:2] == (0.0, 0.0)
    assert rnd.path is None and rnd.metadata["decomposition"] == "Random"
    np.testing.assert_allclose(rnd.x, np.linspace(-1, 1, 10), atol=1e-7)
    assert rnd.convergence_point[2] == pytest.approx(rnd.z[5, 5])


def test_single_events_file(mindspore_run):
    files = sorted(p for p in mindspore_run.iterdir() if p.name.endswith("_MS"))
    got = []
    for f in files:
        try:
            got += [ls.tag for ls in viz.load_landscapes(f)]
        except ValueError:
            pass                                   # the training file holds no landscape
    assert sorted(got) == sorted(TAGS)


def test_mindspore_plots_every_kind(mindspore_run):
    for ls in viz.load_landscapes(mindspore_run):
        for kind in ("contour", "filled", "heatmap", "surface"):
            ax = viz.plot(ls, kind)
            if ls.path is not None:
                (line,) = [ln for ln in ax.lines if ln.get_gid() == "path"]
                assert len(line.get_xdata()) == 5


def test_our_h5_round_trip(tmp_path, mindspore_run):
    found = viz.load_landscapes(mindspore_run)
    out = tmp_path / "landscapes.h5"
    write_h5(out, found)
    back = viz.load_landscapes(out)
    assert sorted(ls.tag for ls in back) == sorted(TAGS)
    by_tag = {ls.tag: ls for ls in back}
    for ls in found:
        np.testing.assert_allclose(by_tag[ls.tag].z, ls.z)
        np.testing.assert_allclose(by_tag[ls.tag].convergence_point, ls.convergence_point)
    # a directory with only landscapes.h5 loads it
    assert len(viz.load_landscapes(tmp_path)) == 3


def test_li_et_al_h5(tmp_path):
    x, y = np.linspace(-1, 1, 5), np.linspace(-1, 1, 4)
    z = np.add.outer(y ** 2, x ** 2)
    with h5py.File(tmp_path / "surf.h5", "w") as fh:
        fh["xcoordinates"], fh["ycoordinates"] = x, y
        fh["train_loss"] = z.reshape(x.size, y.size)      # Li et al. allocate (len x, len y) ...
        fh["train_acc"] = (100 - z).reshape(x.size, y.size)  # ... and fill it in meshgrid order
    (ls,) = viz.load_landscapes(tmp_path / "surf.h5")
    assert ls.tag == "surf"
    np.testing.assert_allclose(ls.z, z)
    np.testing.assert_allclose(ls.surfaces["train_acc"], 100 - z)
    cx, cy, cz = ls.convergence_point          # the grid point nearest (0, 0): Li et al.'s trained model
    assert cx == 0.0 and abs(cy) == pytest.approx(1 / 3) and cz == pytest.approx(1 / 9)
    viz.plot(ls, "contour")


def test_duplicate_tags_keep_the_latest(tmp_path, mindspore_run):
    from collector import SummaryRecord

    for f in mindspore_run.iterdir():
        shutil.copy(f, tmp_path / f.name)
    first = viz.load_landscapes(tmp_path)[0]
    changed = Landscape(first.x, first.y, first.z + 1, first.path, first.convergence_point,
                        dict(first.metadata), tag=first.tag)
    with SummaryRecord(str(tmp_path), file_suffix="_again") as rec:  # our writer: a failure, never a skip
        rec.add_value("landscape", first.tag, changed)
        rec.record(0)
    found = viz.load_landscapes(tmp_path)
    assert [ls.tag for ls in found] == TAGS
    np.testing.assert_allclose(found[0].z, first.z + 1)


def test_no_landscape_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="No loss landscape found"):
        viz.load_landscapes(tmp_path)
    with pytest.raises(FileNotFoundError, match="'path' parameter of load_landscapes"):
        viz.load_landscapes(tmp_path / "missing")
    with pytest.raises(InvalidParameterError, match="'path' parameter of load_landscapes"):
        viz.load_landscapes(3)
    (tmp_path / "empty.h5").write_bytes(b"")
    h5py.File(tmp_path / "empty.h5", "w").close()
    with pytest.raises(ValueError, match="No loss landscape"):
        viz.load_landscapes(tmp_path / "empty.h5")


def test_find_runs(tmp_path, mindspore_run):
    for sub in ("a", "b/deep", "c"):
        (tmp_path / sub).mkdir(parents=True)
    (tmp_path / "a" / "events.out.events.summary.1700000000.host_MS").write_bytes(b"")
    (tmp_path / "b" / "deep" / "x.summary.12.y_lineage").write_bytes(b"")
    (tmp_path / "c" / "summary.txt").write_bytes(b"")            # no digits: not a run
    assert viz.find_runs(tmp_path) == [tmp_path / "a", tmp_path / "b" / "deep"]
    assert viz.find_runs(mindspore_run) == [mindspore_run]
    with pytest.raises(FileNotFoundError, match="'base_dir' parameter of find_runs"):
        viz.find_runs(tmp_path / "nope")


def test_path_object_kept():
    p = LossPath(np.zeros(2), np.zeros(2), np.zeros(2), [1, 2])
    assert p.intervals == [1, 2]
