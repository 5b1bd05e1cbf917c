"""``landscape ls`` and ``landscape plot`` on folders with unreadable runs and files: the healthy ones are
shown, the unreadable one named."""

from __future__ import annotations

import json
import pathlib

import pytest

from collector.summary import _reader
from landscape.cli._main import main
from tests.viz.io.test_load_unreadable import _run, _unreadable


@pytest.fixture
def base(tmp_path):
    """good/ (a healthy run), mixed/ (a healthy file and an unreadable one), broken/ (only an unreadable file)."""
    _run(tmp_path / "good", "landscape_[1, 3]", 0.5)
    _run(tmp_path / "mixed", "landscape_[4, 6]", 0.25)
    _unreadable(tmp_path / "mixed" / "events.out.events.summary.9999999999.host_MS")
    (tmp_path / "broken").mkdir()
    _unreadable(tmp_path / "broken" / "events.out.events.summary.1.host_MS")
    return tmp_path


def test_ls_lists_healthy_runs_and_names_the_unreadable(base, monkeypatch, capsys):
    real = pathlib.Path.iterdir
    denied = base / "denied"
    _run(denied, "landscape_[7]", 1.0)

    def iterdir(self):  # a run whose folder cannot be listed any more
        if self == denied:
            raise PermissionError(13, "Permission denied", str(self))
        return real(self)

    monkeypatch.setattr(_reader.Path, "iterdir", iterdir)
    assert main(["ls", str(base), "--json"]) == 0
    captured = capsys.readouterr()
    rows = {row["run"]: row for row in json.loads(captured.out)}
    assert rows["good"]["landscapes"] == ["landscape_[1, 3]"] and rows["good"]["final_loss"] == 0.5
    assert rows["mixed"]["landscapes"] == ["landscape_[4, 6]"] and rows["mixed"]["final_loss"] == 0.25
    assert any("events.out.events.summary.9999999999.host_MS" in d and "cannot be read" in d
               for d in rows["mixed"]["damaged"])
    assert rows["broken"]["landscapes"] == [] and "cannot be read" in rows["broken"]["damaged"][0]
    assert "cannot be listed" in rows["denied"]["error"] and str(denied) in rows["denied"]["error"]
    assert "landscape ls: warning: skipped denied" in captured.err

    assert main(["ls", str(base)]) == 0
    text = capsys.readouterr().out
    assert "good\tfinal loss 0.5" in text and "denied\tunreadable: " in text


def test_plot_shows_the_readable_landscapes(base, capsys):
    out = base / "pngs"
    assert main(["plot", str(base / "mixed"), "--kind", "heatmap", "-o", str(out)]) == 0
    assert [p.name for p in out.iterdir()] == ["landscape_4_6_heatmap.png"]


def test_plot_output_folder_that_is_a_file(base, capsys):
    a_file = base / "a_file"
    a_file.write_text("x")
    assert main(["plot", str(base / "good"), "--kind", "all", "-o", str(a_file)]) == 2
    assert "The '--output' parameter of landscape plot must be a directory" in capsys.readouterr().err
