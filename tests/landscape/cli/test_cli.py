"""The `landscape` command through subprocess: the pipeline, usage errors, ls/plot/export."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from landscape.cli._pipeline import DEMO_CONFIG, load_config
from tests.landscape._helpers import usage_error

ROOT = Path(__file__).resolve().parents[3]


def _run(*args: str, cwd: Path | None = None, timeout: int = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "landscape", *args], capture_output=True, text=True,
                          cwd=cwd or ROOT, timeout=timeout)


@pytest.fixture(scope="module")
def demo_dir(demo_run) -> Path:
    """The demo's run (tests/conftest.py), made by ``landscape demo --size 6`` in a subprocess."""
    return demo_run


def test_demo_writes_summaries_checkpoints_h5_and_pngs(demo_dir):
    from collector import SummaryReader

    reader = SummaryReader(demo_dir)
    assert [tag for _, tag, _ in reader.landscape_messages()] == ["landscape_[1, 5]", "landscape_[6, 10]", "landscape_[10]"]
    assert "loss/auto" in reader.scalars()
    assert (demo_dir / "landscapes.h5").is_file()
    meta = json.loads((demo_dir / "ckpt_dir" / "train_metadata.json").read_text())
    assert meta["epoch_group"] == {"0": [1, 2, 3, 4, 5], "1": [6, 7, 8, 9, 10]} and meta["landscape_size"] == 6
    pngs = sorted(p.name for p in (demo_dir / "plots").glob("*.png"))
    assert "overview.png" in pngs and "landscape_1_5_filled.png" in pngs and "landscape_10_surface.png" in pngs
    for png in (demo_dir / "plots").glob("*.png"):
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_demo_refuses_existing_output(demo_dir):
    res = _run("demo", "--out", str(demo_dir))
    assert res.returncode == 2
    assert "already exists and is not empty" in res.stderr and len(res.stderr.strip().splitlines()) == 1


def test_ls_lists_run_with_landscapes_and_final_loss(demo_dir):
    res = _run("ls", str(demo_dir.parent), "--json")
    assert res.returncode == 0, res.stderr
    (row,) = json.loads(res.stdout)
    assert row["run"] == "run" and len(row["landscapes"]) == 3 and "loss/auto" in row["scalars"]
    assert row["final_loss"] is not None and np.isfinite(row["final_loss"])


def test_plot_to_a_file_name_with_several_landscapes(demo_dir, tmp_path):
    """-o FILE.png and three landscapes: FILE_<tag>.png beside it (not a folder named FILE.png)."""
    res = _run("plot", str(demo_dir), "-o", str(tmp_path / "pics" / "ls.png"))
    assert res.returncode == 0, res.stderr
    names = sorted(p.name for p in (tmp_path / "pics").iterdir())
    assert names == ["ls_landscape_10.png", "ls_landscape_1_5.png", "ls_landscape_6_10.png"]
    assert all((tmp_path / "pics" / n).read_bytes()[:4] == b"\x89PNG" for n in names)
    assert res.stdout.split() == [str(tmp_path / "pics" / n) for n in
                                  ("ls_landscape_1_5.png", "ls_landscape_6_10.png", "ls_landscape_10.png")]
    res = _run("plot", str(demo_dir), "--tag", "landscape_[10]", "--kind", "all", "-o", str(tmp_path / "k.png"))
    assert res.returncode == 0, res.stderr
    assert sorted(p.name for p in tmp_path.glob("k*.png")) == ["k.png"]     # viz.plot(kind="all"): one figure


def test_plot_and_export(demo_dir, tmp_path):
    target = tmp_path / "one.png"
    res = _run("plot", str(demo_dir), "--tag", "landscape_[10]", "--kind", "heatmap", "-o", str(target))
    assert res.returncode == 0, res.stderr
    assert target.read_bytes()[:4] == b"\x89PNG"
    res = _run("export", str(demo_dir / "landscapes.h5"), "--format", "csv", "-o", str(tmp_path / "csv"))
    assert res.returncode == 0, res.stderr
    assert len(list((tmp_path / "csv").glob("*.csv"))) == 3


@pytest.mark.parametrize(
    "args, fragment",
    [
        ([], "the following arguments are required: COMMAND"),
        (["bogus"], "invalid choice: 'bogus'"),
        (["gen", "x"], "the following arguments are required: --task"),
        (["gen", "x", "--task", "m:f", "--devices", "a,b"], "expected comma-separated ints"),
        (["gen", "x", "--task", "nomodule"], "--task must be MODULE:FUNCTION"),
        (["gen", "x", "--task", "no_such_module_xyz:f"], "cannot import module"),
        (["plot", "/no/such/path"], "no such file or directory"),
        (["plot", "x", "--kind", "pie"], "invalid choice: 'pie'"),
        (["export", "x"], "the following arguments are required: --format"),
        (["run", "/no/such.toml"], "no configuration file"),
        (["demo", "--size", "0"], "argument --size: expected an int in [3, 256]"),
        (["demo", "--size", "2"], "argument --size: expected an int in [3, 256]"),
        (["ls", "/no/such/dir"], "not a directory"),
    ],
)
def test_usage_errors_exit_2_with_one_line(args, fragment, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    err = usage_error(args, capsys)
    assert fragment in err
    assert len(err.strip().splitlines()) == 1  # one line, no usage dump


def test_usage_error_through_the_installed_command(tmp_path):
    res = _run("plot", str(tmp_path / "missing"))
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and "no such file or directory" in res.stderr


@pytest.mark.parametrize("cmd", ["demo", "run", "gen", "plot", "ls", "export", "lineage"])
def test_every_subcommand_has_help(cmd, capsys):
    from landscape.cli._main import main

    with pytest.raises(SystemExit) as exc:
        main([cmd, "--help"])
    assert exc.value.code == 0 and "usage: landscape " + cmd in capsys.readouterr().out


def test_bad_config_is_refused_naming_the_key(tmp_path):
    cfg = tmp_path / "bad.toml"
    cfg.write_text('name = "x"\n[collect]\nunit = "hour"\nintervals = [[1, 2, 3]]\n')
    res = _run("run", str(cfg), "--out", str(tmp_path / "out"))
    assert res.returncode == 2 and "unit" in res.stderr and "'step'" in res.stderr
    assert not (tmp_path / "out").exists()
    cfg.write_text('name = "x"\nlearning = 3\n')
    res = _run("run", str(cfg))
    assert res.returncode == 2 and "unknown key(s) ['learning']" in res.stderr


def test_demo_config_file_is_the_demo():
    assert load_config(ROOT / "configs" / "digits_mlp.toml") == DEMO_CONFIG


@pytest.mark.parametrize("name", ["digits_cnn", "digits_deep_plain_vs_residual"])
def test_configs_parse(name):
    cfg = load_config(ROOT / "configs" / f"{name}.toml")
    assert cfg.runs and cfg.normalization == "filter"
