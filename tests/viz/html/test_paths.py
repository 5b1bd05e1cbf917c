"""A report is shared: by default it holds no absolute path of this machine; the command's options
(--paths, --log, --levels) reach the page."""

from __future__ import annotations

import os
import re
import shutil

import pytest

pytest.importorskip("plotly")

import viz  # noqa: E402
from collector import InvalidParameterError  # noqa: E402
from landscape import write_h5  # noqa: E402
from landscape.cli._main import main  # noqa: E402
from tests.viz.html._pages import nan_plane, report_data, traces, wide_plane  # noqa: E402


def _runs_table(path) -> list[list[str]]:
    (table,) = re.findall(r'<table id="runs-table">(.*?)</table>', path.read_text(encoding="utf-8"), re.S)
    return [re.findall(r"<td[^>]*>(.*?)</td>", row) for row in re.findall(r"<tr>(.*?)</tr>", table)][1:]


def _absolute_forms(path) -> set[str]:
    return {os.path.abspath(path), os.path.realpath(path)}


def test_no_absolute_path_by_default(demo_run, tmp_path):
    runs = tmp_path / "runs"
    shutil.copytree(demo_run, runs / "sgd")
    (runs / "broken").mkdir()
    (runs / "broken" / "landscapes.h5").write_bytes(b"not an HDF5 file")  # its note names the file
    out = viz.report(runs, tmp_path / "out" / "r.html")
    text = out.read_text(encoding="utf-8")
    for absolute in _absolute_forms(tmp_path):
        assert absolute not in text
    rows = _runs_table(out)
    assert [row[:2] for row in rows] == [["broken", "broken"], ["sgd", "sgd"]]
    assert "broken/landscapes.h5" in rows[0][4]  # the note says which file, relative
    out = viz.report(runs / "sgd" / "landscapes.h5", tmp_path / "one.html")  # a file: with its folder's name
    assert [row[1] for row in _runs_table(out)] == ["sgd/landscapes.h5"]
    out = viz.report([runs / "sgd", runs / "sgd"], tmp_path / "twice.html")  # the same run twice
    assert [row[:2] for row in _runs_table(out)] == [["sgd", "sgd"], ["sgd (2)", "sgd"]]
    assert os.path.abspath(tmp_path) not in out.read_text(encoding="utf-8")


def test_absolute_paths_when_asked(demo_run, tmp_path):
    out = viz.report(demo_run, tmp_path / "r.html", paths="absolute")
    assert [row[1] for row in _runs_table(out)] == [os.path.abspath(demo_run)]
    with pytest.raises(InvalidParameterError, match=r"'paths' parameter of report must be one of 'relative', "
                                                    r"'absolute'\. Got 'full'"):
        viz.report(demo_run, tmp_path / "bad.html", paths="full")
    with pytest.raises(InvalidParameterError, match=r"'levels' parameter of report must be an int in the range "
                                                    r"\[2, inf\)\. Got 1"):
        viz.report(demo_run, tmp_path / "bad.html", levels=1)
    with pytest.raises(InvalidParameterError, match=r"'log' parameter of report must be"):
        viz.report(demo_run, tmp_path / "bad.html", log="yes")
    assert not (tmp_path / "bad.html").exists()


def test_the_command_s_options_reach_the_page(tmp_path, capsys):
    run = tmp_path / "cnn"
    run.mkdir()
    write_h5(run / "landscapes.h5", [wide_plane(), nan_plane()])
    out = tmp_path / "r.html"
    assert main(["report", str(run), "-o", str(out), "--levels", "7", "--log", "off", "--paths", "absolute"]) == 0
    view = report_data(out)["runs"][0]["landscapes"][0]["views"]["loss"]
    (contour,) = traces(view["contour"], kind="contour")
    assert contour["colorbar"]["title"]["text"] == "loss" and "7 contour levels" in view["info"]
    assert _runs_table(out)[0][1] == os.path.abspath(run)
    assert main(["report", str(run), "-o", str(out)]) == 0  # the defaults: log as the PNGs, 20 levels, relative
    view = report_data(out)["runs"][0]["landscapes"][0]["views"]["loss"]
    (contour,) = traces(view["contour"], kind="contour")
    assert contour["colorbar"]["title"]["text"] == "loss (log scale)" and "20 contour levels" in view["info"]
    assert os.path.abspath(tmp_path) not in out.read_text(encoding="utf-8")
    capsys.readouterr()
    assert main(["report", str(run), "-o", str(tmp_path / "no.html"), "--levels", "1"]) == 2
    assert "--levels must be 2 or more" in capsys.readouterr().err
    assert not (tmp_path / "no.html").exists()
