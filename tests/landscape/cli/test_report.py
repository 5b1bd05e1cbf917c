"""``landscape report RUN... -o FILE``: the HTML report from the command line."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("plotly")

from landscape import write_h5  # noqa: E402
from landscape.cli._main import build_parser, main  # noqa: E402
from tests.viz.html._pages import nan_line, nan_plane, report_data  # noqa: E402


def test_report_of_runs_written_where_asked(demo_run, tmp_path, capsys):
    other = tmp_path / "views"
    other.mkdir()
    write_h5(other / "landscapes.h5", [nan_plane(), nan_line()])
    out = tmp_path / "out" / "report.html"
    assert main(["report", str(demo_run), str(other), "-o", str(out), "--title", "Two runs"]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed == [str(out), f"open in a browser (works offline): {out.resolve().as_uri()}"]
    data = report_data(out)
    names = [r["name"] for r in data["runs"]]
    assert names == [demo_run.name, "views"]
    tags = [ls["tag"] for ls in data["runs"][1]["landscapes"]]
    assert tags == ["interpolation_[1, 10]", "plane_[1, 5, 10]"]  # landscapes.h5's order
    (line,) = [t for t in data["runs"][1]["landscapes"][0]["views"]["loss"]["line"]["data"] if t["name"] == "loss"]
    np.testing.assert_array_equal([np.nan if v is None else v for v in line["y"]], nan_line().z)
    assert "<title>Two runs</title>" in out.read_text(encoding="utf-8")


def test_default_output_is_in_the_first_run(tmp_path, capsys):
    write_h5(tmp_path / "landscapes.h5", [nan_plane()])
    assert main(["report", str(tmp_path)]) == 0
    assert capsys.readouterr().out.splitlines()[0] == str(tmp_path / "report.html")
    assert report_data(tmp_path / "report.html")["runs"][0]["landscapes"][0]["tag"] == "plane_[1, 5, 10]"
    assert main(["report", str(tmp_path / "landscapes.h5")]) == 0  # a file: beside it
    assert capsys.readouterr().out.splitlines()[0] == str(tmp_path / "report.html")


def test_errors_before_anything_is_written(tmp_path, capsys):
    assert main(["report", str(tmp_path / "missing"), "-o", str(tmp_path / "r.html")]) == 2
    assert "landscape report: error: no such file or directory: " in capsys.readouterr().err
    assert main(["report", str(tmp_path), "-o", str(tmp_path / "r.html")]) == 2  # a folder without runs
    assert "which holds no summary file and no landscapes.h5" in capsys.readouterr().err
    write_h5(tmp_path / "landscapes.h5", [nan_plane()])
    assert main(["report", str(tmp_path), "-o", str(tmp_path)]) == 2  # the output is a folder
    assert "'output' parameter of report must be the HTML file" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["landscapes.h5"]
    with pytest.raises(SystemExit) as exc:
        main(["report"])
    assert exc.value.code == 2


def test_every_argument_has_help():
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    parser = sub.choices["report"]
    for action in parser._actions:
        assert action.help, action.dest
