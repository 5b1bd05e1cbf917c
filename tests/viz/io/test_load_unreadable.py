"""viz's readers of a folder skip what they cannot read, with a warning naming it, and show the rest."""

from __future__ import annotations

import logging
import os

import numpy as np
import pytest

import viz
from collector import SummaryRecord
from landscape import Landscape


def _unreadable(path) -> None:
    """A file that cannot be read, root included: a link to /proc/self/mem (reading it gives EIO)."""
    if not os.path.exists("/proc/self/mem"):
        pytest.skip("needs /proc/self/mem")
    os.symlink("/proc/self/mem", path)


def _run(folder, tag: str, loss: float) -> None:
    ls = Landscape(x=np.linspace(-1, 1, 3), y=np.linspace(-1, 1, 3), z=np.arange(9.0).reshape(3, 3) + 1,
                   convergence_point=(0.0, 0.0, 5.0), tag=tag)
    with SummaryRecord(folder) as rec:
        rec.add_value("scalar", "loss/auto", loss)
        rec.add_value("landscape", tag, ls)
        rec.record(1)


@pytest.fixture
def base(tmp_path):
    """good/ (a healthy run), mixed/ (a healthy file and an unreadable one), broken/ (only an unreadable file)."""
    _run(tmp_path / "good", "landscape_[1, 3]", 0.5)
    _run(tmp_path / "mixed", "landscape_[4, 6]", 0.25)
    _unreadable(tmp_path / "mixed" / "events.out.events.summary.9999999999.host_MS")
    (tmp_path / "broken").mkdir()
    _unreadable(tmp_path / "broken" / "events.out.events.summary.1.host_MS")
    return tmp_path


def test_load_landscapes_skips_the_unreadable_file(base, caplog):
    with caplog.at_level(logging.WARNING):
        found = viz.load_landscapes(base / "mixed")
    assert [ls.tag for ls in found] == ["landscape_[4, 6]"]
    assert str(base / "mixed" / "events.out.events.summary.9999999999.host_MS") in caplog.text


def test_load_landscapes_names_a_damaged_h5_when_it_is_all_there_is(tmp_path, caplog):
    (tmp_path / "landscapes.h5").write_bytes(b"\x89HDF\r\n\x1a\n" + b"\0" * 64)
    with caplog.at_level(logging.WARNING), pytest.raises(ValueError, match="landscapes.h5' cannot be read"):
        viz.load_landscapes(tmp_path)
    assert "landscapes.h5" in caplog.text


def test_find_runs_skips_a_folder_it_cannot_list(base, monkeypatch, caplog):
    locked = base / "locked"
    locked.mkdir()
    real = os.scandir

    def scandir(path="."):
        if os.fspath(path) == str(locked):
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return real(path)

    monkeypatch.setattr(os, "scandir", scandir)
    with caplog.at_level(logging.WARNING):
        runs = viz.find_runs(base)
    assert [r.name for r in runs] == ["broken", "good", "mixed"]
    assert f"find_runs: skipped {str(locked)!r}, which cannot be listed: Permission denied" in caplog.text
